"""The floor for the MCP cold start: a minimal stdio server on the same ``mcp`` SDK, one no-op tool.

``python -m benchmarks.mcp_floor``; the same low-level ``Server`` API as ``lucy-memory-mcp``.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

NOOP = types.Tool(
    name="noop",
    description="Does nothing.",
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
)


async def on_list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[NOOP])


async def on_call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text="ok")])


server = Server("mcp-floor", version="0.0.1", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


async def _serve() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(_serve)
