"""The pytest plugin (entry point ``pytest11: fake_lucy``): fixtures for testing against the fake.

- ``fake_lucy``: the fake in this process (ASGI, real SQLite file), reset for each test. It has
  ``.client(token)`` (an ``httpx.AsyncClient``), ``.admin`` (the control API: credentials,
  approve/reject/expire, clock, policies, faults, journal, ledger) and ``.transport``.
- ``fake_lucy_server``: a real uvicorn server on 127.0.0.1, port 0, reset for each test
  (``.base_url``, ``.client()``, ``.admin``).
- ``lucy_client``: a ``lucy_memory.AgentMemoryClient`` wired to ``fake_lucy`` with the dev token.
- ``lucy_mcp``: an MCP client session (the official ``mcp`` SDK's ``Client``) to the real
  ``lucy-memory-mcp`` stdio server, configured as a host would (command and environment) against
  ``fake_lucy_server`` with the dev token and both permissions.

Each pytest-xdist worker gets its own database (``tmp_path_factory`` is per worker). Async
fixtures need an async test runner (anyio's pytest plugin or pytest-asyncio).

Installing the package loads this module into every pytest run in that environment, so it imports
only pytest at module level: the fake, FastAPI, uvicorn, the SDK and the MCP SDK are imported inside
the fixtures that use them, and a run that uses none of them pays nothing
(tests/plugin/test_plugin_cost.py holds this).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from mcp import Client, StdioServerParameters

    from fake_lucy.testing.fakes import InProcessFake, LiveServer
    from lucy_memory import AgentMemoryClient

__all__ = ["fake_lucy", "fake_lucy_server", "lucy_client", "lucy_mcp", "lucy_mcp_parameters"]

PERMISSIONS = ("memory:read", "memory:propose")


@pytest.fixture(scope="session")
def _fake_lucy_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessFake]:
    from fake_lucy.testing.fakes import InProcessFake

    fake = InProcessFake(tmp_path_factory.mktemp("fake-lucy") / "fake-lucy.sqlite3")
    yield fake
    fake.fake.close()


@pytest.fixture
def fake_lucy(_fake_lucy_session: InProcessFake) -> InProcessFake:
    """The in-process fake, reset to its seeded state for this test."""
    _fake_lucy_session.reset()
    return _fake_lucy_session


@pytest.fixture(scope="session")
def _fake_lucy_server_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    from fake_lucy.testing.fakes import LiveServer

    with LiveServer.start(tmp_path_factory.mktemp("fake-lucy-server")) as server:
        yield server


@pytest.fixture
def fake_lucy_server(_fake_lucy_server_session: LiveServer) -> LiveServer:
    """A real uvicorn server (one per session and worker), reset to its seeded state for this test."""
    _fake_lucy_server_session.reset()
    return _fake_lucy_server_session


@pytest.fixture
async def lucy_client(fake_lucy: InProcessFake) -> AsyncIterator[AgentMemoryClient]:
    """An SDK client on the in-process fake: dev token, read and propose permissions."""
    from lucy_memory import AgentMemoryClient, create_lucy_http_transport

    client = AgentMemoryClient(
        transport=create_lucy_http_transport(
            base_url=fake_lucy.base_url, allow_insecure_loopback=True, http_transport=fake_lucy.transport
        ),
        token=fake_lucy.dev_token,
        permissions=PERMISSIONS,
        client_name="pytest",
    )
    async with client:
        yield client


def lucy_mcp_parameters(server: LiveServer, *, token: str, permissions: str) -> StdioServerParameters:
    """How a host launches ``lucy-memory-mcp`` against ``server``: command and environment only."""
    from mcp import StdioServerParameters

    command = shutil.which("lucy-memory-mcp", path=str(Path(sys.executable).parent)) or shutil.which(
        "lucy-memory-mcp"
    )
    if command is None:
        raise RuntimeError("lucy-memory-mcp is not installed next to this Python")
    return StdioServerParameters(
        command=command,
        args=[],
        env={
            "LUCY_MEMORY_TOKEN": token,
            "LUCY_MEMORY_PERMISSIONS": permissions,
            "LUCY_MEMORY_BASE_URL": server.base_url,
            "LUCY_MEMORY_ALLOW_INSECURE_LOOPBACK": "1",
        },
    )


@pytest.fixture
async def lucy_mcp(fake_lucy_server: LiveServer) -> AsyncIterator[Client]:
    """An MCP session to a real ``lucy-memory-mcp`` subprocess on ``fake_lucy_server``."""
    from mcp import Client
    from mcp.types import Implementation

    parameters = lucy_mcp_parameters(
        fake_lucy_server, token=fake_lucy_server.dev_token, permissions=",".join(PERMISSIONS)
    )
    async with Client(parameters, client_info=Implementation(name="pytest", version="1")) as client:
        yield client
