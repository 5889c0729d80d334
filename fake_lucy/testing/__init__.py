"""Test fixtures' core: the in-process fake, a real uvicorn server, and the admin helper.

```python
async with InProcessFake.start(tmp_path) as fake:          # ASGI in this process
    async with fake.client() as http: ...                   # httpx.AsyncClient on the v1 origin
    await fake.admin.approve(proposal_id)

with LiveServer.start(tmp_path) as server:                 # real uvicorn on 127.0.0.1:<port 0>
    httpx.get(server.base_url + "/healthz")
    server.sync_admin.approve(proposal_id)                  # the admin helper, blocking
```
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fake_lucy.testing.admin import AdminError, AdminEvent, EventWatch, FakeAdmin
    from fake_lucy.testing.clients import (
        RecordedWaits,
        RecordingAgentMemoryClient,
        RecordingSyncAgentMemoryClient,
    )
    from fake_lucy.testing.fakes import InProcessFake, LiveServer, ServeProcess
    from fake_lucy.testing.sync_admin import SyncFakeAdmin
    from fake_lucy.testing.transport import InProcessTransport

# Loaded on first use (PEP 562): the pytest plugin, fake_lucy.testing.pytest_plugin, is imported by
# every pytest run where the package is installed, and importing this package must not pull in the
# fake, FastAPI and uvicorn for a run that never uses them.
_HOMES = {
    "AdminError": "fake_lucy.testing.admin",
    "AdminEvent": "fake_lucy.testing.admin",
    "EventWatch": "fake_lucy.testing.admin",
    "FakeAdmin": "fake_lucy.testing.admin",
    "InProcessFake": "fake_lucy.testing.fakes",
    "LiveServer": "fake_lucy.testing.fakes",
    "ServeProcess": "fake_lucy.testing.fakes",
    "InProcessTransport": "fake_lucy.testing.transport",
    "RecordedWaits": "fake_lucy.testing.clients",
    "RecordingAgentMemoryClient": "fake_lucy.testing.clients",
    "RecordingSyncAgentMemoryClient": "fake_lucy.testing.clients",
    "SyncFakeAdmin": "fake_lucy.testing.sync_admin",
}

__all__ = [
    "AdminError",
    "AdminEvent",
    "EventWatch",
    "FakeAdmin",
    "InProcessFake",
    "InProcessTransport",
    "LiveServer",
    "RecordedWaits",
    "RecordingAgentMemoryClient",
    "RecordingSyncAgentMemoryClient",
    "ServeProcess",
    "SyncFakeAdmin",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
