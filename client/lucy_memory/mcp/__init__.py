"""``lucy-memory-mcp``: the stdio MCP server with exactly three tools over the Lucy Agent Memory SDK.

``memory_recall``, ``memory_propose`` and ``memory_proposal_status``; nothing that writes, approves,
deletes, restores or resolves. Configured from ``LUCY_MEMORY_*`` (see ``lucy_memory.mcp.config``)::

    LUCY_MEMORY_TOKEN=… LUCY_MEMORY_BASE_URL=https://lucy.example lucy-memory-mcp

Layers: ``server`` (handlers) → ``render`` (text) and ``tools`` (definitions) → the SDK client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lucy_memory._lazy import lazy_names
from lucy_memory.mcp.config import McpConfigError, McpSettings, ServerConfig, load_settings, resolve_config
from lucy_memory.mcp.tools import TOOL_NAMES, tools

if TYPE_CHECKING:
    from lucy_memory.mcp.server import LucyMemoryTools, create_server, serve_stdio

# Loaded on first use (PEP 562): ``lucy-memory-mcp`` imports this package before it reads its
# configuration, and a refused configuration or ``--help`` needs none of the MCP SDK (its types
# alone take longer to import than all the rest; ``tools`` imports them when called).
_HOMES = {
    "LucyMemoryTools": "lucy_memory.mcp.server",
    "create_server": "lucy_memory.mcp.server",
    "serve_stdio": "lucy_memory.mcp.server",
}

__all__ = [
    "TOOL_NAMES",
    "LucyMemoryTools",
    "McpConfigError",
    "McpSettings",
    "ServerConfig",
    "create_server",
    "load_settings",
    "resolve_config",
    "serve_stdio",
    "tools",
]


__getattr__ = lazy_names(__name__, _HOMES)
