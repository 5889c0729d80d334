"""``lucy-memory-mcp``: the stdio MCP server with exactly three tools over the Lucy Agent Memory SDK.

``memory_recall``, ``memory_propose`` and ``memory_proposal_status``; nothing that writes, approves,
deletes, restores or resolves. Configured from ``LUCY_MEMORY_*`` (see ``lucy_memory.mcp.config``)::

    LUCY_MEMORY_TOKEN=… LUCY_MEMORY_BASE_URL=https://lucy.example lucy-memory-mcp

Layers: ``server`` (handlers) → ``render`` (text) and ``tools`` (definitions) → the SDK client.
"""

from lucy_memory.mcp.config import McpConfigError, McpSettings, ServerConfig, load_settings, resolve_config
from lucy_memory.mcp.server import LucyMemoryTools, create_server, serve_stdio
from lucy_memory.mcp.tools import TOOL_NAMES, tools

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
