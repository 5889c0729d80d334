"""Lucy Agent Memory: a typed async SDK for Agent Memory HTTP v1.

```python
client = AgentMemoryClient(
    transport=create_lucy_http_transport(base_url="https://lucy.example"),
    token=os.environ["LUCY_MEMORY_TOKEN"],
    permissions=["memory:read", "memory:propose"],
)
result = await client.recall('{"query": "Which database did we approve?", "limit": 3}')
```
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lucy_memory import errors, models
from lucy_memory._contract import PERMISSIONS, SchemaError
from lucy_memory._lazy import lazy_names
from lucy_memory.errors import *  # noqa: F403 - the whole error tree is public: see __all__ below
from lucy_memory.models import *  # noqa: F403 - every result type is public: see __all__ below
from lucy_memory.retry import DEFAULT_MAX_RETRIES, MAX_RETRY_AFTER_SECONDS

if TYPE_CHECKING:
    from lucy_memory.client import DEFAULT_CLIENT_NAME, AgentMemoryClient, SyncAgentMemoryClient
    from lucy_memory.transport import (
        LucyHttpTransport,
        Transport,
        TransportRequest,
        TransportResponse,
        create_lucy_http_transport,
    )

# The client and its HTTP transport are loaded on first use (PEP 562), with httpx and anyio: the
# fake server imports this package for its contract rules alone (``lucy_memory._contract``), in
# every process it starts, and uses neither.
_HOMES = {
    "DEFAULT_CLIENT_NAME": "lucy_memory.client",
    "AgentMemoryClient": "lucy_memory.client",
    "SyncAgentMemoryClient": "lucy_memory.client",
    "LucyHttpTransport": "lucy_memory.transport",
    "Transport": "lucy_memory.transport",
    "TransportRequest": "lucy_memory.transport",
    "TransportResponse": "lucy_memory.transport",
    "create_lucy_http_transport": "lucy_memory.transport",
}

__all__ = [
    "DEFAULT_CLIENT_NAME",
    "DEFAULT_MAX_RETRIES",
    "MAX_RETRY_AFTER_SECONDS",
    "PERMISSIONS",
    "AgentMemoryClient",
    "LucyHttpTransport",
    "SchemaError",
    "SyncAgentMemoryClient",
    "Transport",
    "TransportRequest",
    "TransportResponse",
    "create_lucy_http_transport",
]
# The error tree and the result types are public whole: their modules' own lists name them, once.
__all__ += errors.__all__
__all__ += models.__all__


__getattr__ = lazy_names(__name__, _HOMES)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
