from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from fake_lucy.testing import FakeAdmin, InProcessFake, LiveServer
from tests.contract_check import response_hook

HOOKS: dict[str, Any] = {"response": [response_hook]}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fake(fake_lucy: InProcessFake) -> InProcessFake:
    """The plugin's in-process fake (``fake_lucy``), reset for this test."""
    return fake_lucy


@pytest.fixture
async def api(fake: InProcessFake) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client with the dev token; every response is checked against the contract."""
    async with fake.client(event_hooks=HOOKS) as client:
        yield client


@pytest.fixture
async def admin(fake: InProcessFake) -> AsyncIterator[FakeAdmin]:
    async with fake.client(fake.admin_token, event_hooks=HOOKS) as client:
        yield FakeAdmin(client)


@pytest.fixture
def live(fake_lucy_server: LiveServer) -> LiveServer:
    """The plugin's real uvicorn server (``fake_lucy_server``), reset for this test."""
    return fake_lucy_server


@pytest.fixture
async def live_admin(live: LiveServer) -> AsyncIterator[FakeAdmin]:
    async with live.client(live.admin_token, event_hooks=HOOKS) as client:
        yield FakeAdmin(client)
