"""Builders for the MCP tests: an in-process MCP client on the server over the fake, result helpers."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client
from mcp_types import Implementation

from fake_lucy.testing import InProcessFake, LiveServer
from lucy_memory.mcp import LucyMemoryTools, create_server
from lucy_memory.mcp.refusals import RefusedKeys
from lucy_memory.transport import Transport
from tests.sdk.helpers import BOTH, DEV_TOKEN, PROJECT, RecordingSleep, http_transport

__all__ = [
    "BOTH",
    "DEV_TOKEN",
    "MODES",
    "PROJECT",
    "READ_ONLY",
    "connect",
    "proposal_args",
    "text_of",
    "write_transport_module",
]

MODES = ("legacy", "2026-07-28")
READ_ONLY = ("memory:read",)


def proposal_args(
    content: str = "We use PostgreSQL 16 for the main database.", **fields: Any
) -> dict[str, Any]:
    return {"kind": "decision", "content": content, "scope": PROJECT, **fields}


def text_of(result: types.CallToolResult) -> str:
    texts = [item.text for item in result.content if isinstance(item, types.TextContent)]
    assert len(texts) == 1, result
    return texts[0]


def one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@contextlib.asynccontextmanager
async def connect(
    shape: InProcessFake | LiveServer,
    *,
    mode: str = "legacy",
    permissions: tuple[str, ...] = BOTH,
    client_name: str = "mcp-tests",
    token: str = DEV_TOKEN,
    transport: Transport | None = None,
    sleep: RecordingSleep | None = None,
    refused: RefusedKeys | None = None,
) -> AsyncIterator[Client]:
    """The server over the fake (its real HTTP transport on the in-process ASGI app), and an MCP client
    connected to it through the SDK's in-memory transport, speaking ``mode``."""
    handlers = LucyMemoryTools(
        transport=transport if transport is not None else http_transport(shape),
        token=token,
        permissions=permissions,
        sleep=sleep if sleep is not None else RecordingSleep(),
        refused=refused,
    )
    try:
        async with Client(
            create_server(handlers),
            mode=mode,  # type: ignore[arg-type]  # a Literal in the SDK; tests parametrize it as str
            client_info=Implementation(name=client_name, version="1.0"),
        ) as client:
            yield client
    finally:
        await handlers.aclose()


TRANSPORT_MODULE = '''\
"""A custom transport for lucy-memory-mcp: plain httpx to the fake (written by a test)."""

import httpx

from lucy_memory import TransportResponse

print("transport module: loading", flush=True)  # stdout on purpose: it must not reach the protocol


class PlainHttpx:
    def __init__(self, base_url: str) -> None:
        self._http = httpx.AsyncClient(base_url=base_url + "/api/agent-memory/v1")

    async def send(self, request):
        print("transport module: sending", request.operation)  # not flushed: a buffered debug line
        response = await self._http.request(
            request.method, request.path, content=request.body, headers=dict(request.headers)
        )
        headers = {name.lower(): value for name, value in response.headers.items()}
        return TransportResponse(response.status_code, headers, response.content)

    async def aclose(self) -> None:
        await self._http.aclose()


def create_transport(*, token: str):
    if not token:
        raise ValueError("no token")
    return PlainHttpx(BASE_URL)
'''


def write_transport_module(directory: Path, base_url: str, name: str = "lucy_transport.py") -> Path:
    """A transport module file (mode 0644) that sends to ``base_url`` with plain httpx."""
    path = directory / name
    path.write_text(TRANSPORT_MODULE.replace("BASE_URL", repr(base_url)), encoding="utf-8")
    path.chmod(0o644)
    return path
