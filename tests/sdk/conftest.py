from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from fake_lucy.testing import InProcessFake, LiveServer
from lucy_memory import AgentMemoryClient
from tests.sdk.helpers import RecordingSleep, make_client


@pytest.fixture
def sleeps() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
async def new_client(sleeps: RecordingSleep) -> AsyncIterator[Callable[..., AgentMemoryClient]]:
    """``new_client(fake_or_live, **options)``: an SDK client with the recording sleep, closed afterwards."""
    made: list[AgentMemoryClient] = []

    def build(shape: InProcessFake | LiveServer, **options: Any) -> AgentMemoryClient:
        options.setdefault("sleep", sleeps)
        client = make_client(shape, **options)
        made.append(client)
        return client

    yield build
    for client in made:
        await client.aclose()
