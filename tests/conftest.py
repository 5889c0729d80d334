from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from fake_lucy.testing import FakeAdmin, InProcessFake, LiveServer
from tests.contract_check import response_hook

HOOKS: dict[str, Any] = {"response": [response_hook]}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def _in_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessFake]:
    fake = InProcessFake(tmp_path_factory.mktemp("fake") / "fake-lucy.sqlite3")
    yield fake
    fake.fake.close()


@pytest.fixture
def fake(_in_process: InProcessFake) -> InProcessFake:
    """The in-process fake, reset to its seeded state for this test."""
    _in_process.reset()
    return _in_process


@pytest.fixture
async def api(fake: InProcessFake) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client with the dev token; every response is checked against the contract."""
    async with fake.client(event_hooks=HOOKS) as client:
        yield client


@pytest.fixture
async def admin(fake: InProcessFake) -> AsyncIterator[FakeAdmin]:
    async with fake.client(fake.admin_token, event_hooks=HOOKS) as client:
        yield FakeAdmin(client)


@pytest.fixture(scope="session")
def _live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer.start(tmp_path_factory.mktemp("live")) as server:
        yield server


@pytest.fixture
def live(_live: LiveServer) -> LiveServer:
    """A real uvicorn server (session-scoped), reset for this test."""
    _live.reset()
    return _live


@pytest.fixture
async def live_admin(live: LiveServer) -> AsyncIterator[FakeAdmin]:
    async with live.client(live.admin_token, event_hooks=HOOKS) as client:
        yield FakeAdmin(client)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: a test that starts extra processes")
