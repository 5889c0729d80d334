"""The pytest plugin (entry point ``pytest11: fake_lucy``): fixtures for testing against the fake.

- ``fake_lucy``: the fake in this process (ASGI, real SQLite file), reset for each test. It has
  ``.client(token)`` (an ``httpx.AsyncClient``), ``.admin`` (the control API: credentials,
  approve/reject/expire, clock, policies, faults, journal, ledger) and ``.transport``.
- ``fake_lucy_server``: a real uvicorn server on 127.0.0.1, port 0, reset for each test
  (``.base_url``, ``.client()``, ``.admin``).
- ``lucy_client``: a ``lucy_memory.AgentMemoryClient`` wired to ``fake_lucy`` with the dev token.

Each pytest-xdist worker gets its own database (``tmp_path_factory`` is per worker). Async
fixtures need an async test runner (anyio's pytest plugin or pytest-asyncio).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from fake_lucy.testing.fakes import InProcessFake, LiveServer
from lucy_memory import AgentMemoryClient, create_lucy_http_transport

__all__ = ["fake_lucy", "fake_lucy_server", "lucy_client"]

PERMISSIONS = ("memory:read", "memory:propose")


@pytest.fixture(scope="session")
def _fake_lucy_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessFake]:
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
