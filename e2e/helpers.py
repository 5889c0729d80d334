"""Small helpers for driving the MCP tools in e2e tests."""

from __future__ import annotations

import re
from typing import Any

from mcp import Client

PROJECT = {"kind": "project", "id": "project_example"}


def text(result: Any) -> str:
    return "\n".join(part.text for part in result.content if getattr(part, "type", "") == "text")


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    """A tool call that must succeed; returns its structured content (the v1 response body)."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text(result)
    return result.structured_content


async def fail(client: Client, tool: str, **arguments: Any) -> str:
    """A tool call that must fail as a tool error; returns its text."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, text(result)
    assert result.structured_content is None
    return text(result)


async def propose(client: Client, content: str, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = await call(
        client,
        "memory_propose",
        kind=fields.pop("kind", "decision"),
        content=content,
        scope=fields.pop("scope", PROJECT),
        **fields,
    )
    return body


async def status(client: Client, proposal_id: str) -> dict[str, Any]:
    body: dict[str, Any] = await call(client, "memory_proposal_status", proposal_id=proposal_id)
    return body


async def recall(client: Client, query: str, **fields: Any) -> list[dict[str, Any]]:
    body = await call(client, "memory_recall", query=query, **fields)
    memories: list[dict[str, Any]] = body["memories"]
    return memories


def idempotency_key_in(message: str) -> str:
    match = re.search(r"^idempotency_key: (\S+)$", message, re.MULTILINE)
    assert match, message
    return match.group(1)
