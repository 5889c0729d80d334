"""The built-in transport's limits: a whole attempt is bounded by ``timeout`` (not each read alone),
a closed transport and a second event loop are refused before anything is sent, each with an SDK
error that says nothing was sent, never a bare ``RuntimeError`` after the call was done and charged."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest

from fake_lucy.testing import InProcessFake
from lucy_memory import (
    AgentMemoryClient,
    ClientClosedError,
    ConfigurationError,
    ConnectionFailedError,
    ResponseLostError,
)
from tests.sdk.helpers import BOTH, DEV_TOKEN, RecordingSleep, http_transport, make_client, proposal_json


class _Trickle(httpx.AsyncByteStream):
    """A body that sends its first byte and then nothing, for ever (a proxy that stalls, a server
    that drips): no single read ever waits long, so only a bound on the whole attempt ends it."""

    def __init__(self) -> None:
        self.never = anyio.Event()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"{"
        await self.never.wait()


class _TrickleTransport(httpx.AsyncBaseTransport):
    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Type": "application/json"}, stream=_Trickle())


@pytest.mark.anyio
async def test_timeout_bounds_a_whole_attempt_not_each_read(fake: InProcessFake) -> None:
    transport = http_transport(fake, http=_TrickleTransport(), timeout=0.05, connect_timeout=0.05)
    client = AgentMemoryClient(transport=transport, token=DEV_TOKEN, permissions=BOTH, sleep=RecordingSleep())
    with anyio.fail_after(10):  # before the bound, the call never ended
        with pytest.raises(ResponseLostError) as caught:
            await client.recall('{"query": "database"}')
    assert isinstance(caught.value.__cause__, TimeoutError)
    assert caught.value.attempts == 1
    await client.aclose()


class _ConnectsSlowly(httpx.AsyncBaseTransport):
    """A connection that cannot be made: httpx's own connect timeout ends it (nothing was sent)."""

    def __init__(self, connect_timeout: float) -> None:
        self.connect_timeout = connect_timeout

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        with anyio.move_on_after(self.connect_timeout):
            await anyio.Event().wait()
        raise httpx.ConnectTimeout("timed out connecting")


@pytest.mark.anyio
async def test_a_connect_that_times_out_is_a_connection_failure_whatever_timeout_is(
    fake: InProcessFake,
) -> None:
    """The attempt's bound is connect_timeout + timeout: a timeout shorter than connect_timeout
    does not end a connect that is still trying as a lost response (which says it may have run)."""
    transport = http_transport(fake, http=_ConnectsSlowly(0.2), timeout=0.05, connect_timeout=0.2)
    client = AgentMemoryClient(transport=transport, token=DEV_TOKEN, permissions=BOTH, sleep=RecordingSleep())
    with anyio.fail_after(10):
        with pytest.raises(ConnectionFailedError) as caught:
            await client.recall('{"query": "database"}')
    assert "nothing was sent" in str(caught.value)
    await client.aclose()


@pytest.mark.anyio
async def test_a_transport_closed_by_a_client_that_shared_it_refuses_before_sending(
    fake: InProcessFake, admin
) -> None:
    transport = http_transport(fake)
    first, second = (
        AgentMemoryClient(transport=transport, token=DEV_TOKEN, permissions=BOTH, sleep=RecordingSleep())
        for _ in range(2)
    )
    await first.aclose()
    with pytest.raises(ClientClosedError) as caught:
        await second.propose(proposal_json(), idempotency_key="shared-transport-1")
    assert caught.value.attempts == 0
    assert caught.value.idempotency_key == "shared-transport-1"
    assert "this attempt was not sent" in str(caught.value)
    assert await admin.requests() == []
    await second.aclose()


def test_a_client_used_in_a_second_event_loop_refuses_before_sending(fake: InProcessFake) -> None:
    """Each ``asyncio.run`` makes a new loop; the first one's connections cannot serve the second.
    httpx sent the second call and then failed on the old loop's connection (``RuntimeError:
    Event loop is closed``) with the proposal made and charged and no key on the error."""
    client = make_client(fake)
    asyncio.run(client.recall('{"query": "database"}'))
    with pytest.raises(ConfigurationError) as caught:
        asyncio.run(client.propose(proposal_json(), idempotency_key="second-loop-1"))
    assert caught.value.idempotency_key == "second-loop-1"
    assert "make the client inside the asyncio.run that uses it" in str(caught.value)
    operations = [row[0] for row in fake.fake.db.conn.execute("SELECT operation FROM journal ORDER BY seq")]
    assert operations == ["recall"]
