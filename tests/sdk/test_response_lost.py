"""Must hold 5: a lost response (dropped connection, timeout) is never retried automatically; for propose
the error carries the key, and repeating with it replays — one proposal, one credit."""

from __future__ import annotations

import functools
from typing import Any

import anyio
import httpx
import pytest

from lucy_memory import (
    AgentMemoryClient,
    LucyMemoryError,
    ResponseLostError,
    TransportRequest,
    TransportResponse,
)
from tests.sdk.helpers import RaisingTransport, http_transport, proposal_json

pytestmark = pytest.mark.anyio


async def test_a_dropped_propose_raises_response_lost_and_repeating_with_its_key_replays(
    live, live_admin, sleeps, new_client
) -> None:
    await live_admin.add_fault("propose", 503, phase="after_commit", drop_connection=True)
    client = new_client(live)
    body = proposal_json(topic="main-database")

    with pytest.raises(ResponseLostError) as caught:
        await client.propose(body)

    lost = caught.value
    assert lost.attempts == 1
    assert lost.idempotency_key is not None
    assert lost.idempotency_key in str(lost)
    assert lost.retryable is True
    assert isinstance(lost.__cause__, httpx.RemoteProtocolError)
    assert sleeps.delays == []
    rows = await live_admin.requests(operation="propose")
    assert [(row["dropped"], row["idempotency_key"]) for row in rows] == [(True, lost.idempotency_key)]

    again = await client.propose(body, idempotency_key=lost.idempotency_key)

    assert again.replayed is True
    assert again.idempotency_key == lost.idempotency_key
    assert again.credits.charged == 0
    proposals = (await live_admin.proposals())["items"]
    assert [item["id"] for item in proposals] == [again.proposal.id]
    charges = [row for row in await live_admin.ledger() if row["operation"] == "propose"]
    assert len(charges) == 1
    assert [row["replayed"] for row in await live_admin.requests(operation="propose")] == [False, True]


async def test_a_dropped_recall_raises_response_lost_after_one_attempt(
    live, live_admin, sleeps, new_client
) -> None:
    await live_admin.add_fault("recall", 503, phase="after_commit", drop_connection=True)
    client = new_client(live)

    with pytest.raises(ResponseLostError) as caught:
        await client.recall('{"query": "database"}')

    assert caught.value.attempts == 1
    assert caught.value.idempotency_key is None
    assert caught.value.retryable is False
    assert "may have executed and been charged" in str(caught.value)
    assert [row["dropped"] for row in await live_admin.requests(operation="recall")] == [True]
    # It was executed: the lost recall was charged, which is why it is never repeated automatically.
    assert [row["operation"] for row in await live_admin.ledger()].count("recall") == 1
    assert sleeps.delays == []


class TimesOutAfterCommit(httpx.AsyncBaseTransport):
    """Forwards to the in-process fake (which executes and charges), then reports a read timeout."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.calls = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        await self.inner.handle_async_request(request)
        raise httpx.ReadTimeout("timed out", request=request)


async def test_a_timed_out_propose_raises_response_lost_and_is_not_retried(
    fake, admin, sleeps, new_client
) -> None:
    timing_out = TimesOutAfterCommit(fake.transport)
    client = new_client(fake, transport=http_transport(fake, http=timing_out))
    body = proposal_json()

    with pytest.raises(ResponseLostError) as caught:
        await client.propose(body)

    assert timing_out.calls == 1
    assert isinstance(caught.value.__cause__, httpx.ReadTimeout)
    key = caught.value.idempotency_key
    assert [row["idempotency_key"] for row in await admin.requests(operation="propose")] == [key]

    recovering = new_client(fake)
    again = await recovering.propose(body, idempotency_key=key)

    assert again.replayed is True
    assert len((await admin.proposals())["items"]) == 1
    assert [row["operation"] for row in await admin.ledger()].count("propose") == 1
    assert sleeps.delays == []


@pytest.mark.parametrize(
    "error",
    [
        httpx.RemoteProtocolError("Server disconnected without sending a response."),
        httpx.ReadTimeout("timed out"),
        ConnectionResetError(104, "Connection reset by peer"),
        ResponseLostError("connection dropped", operation="propose", idempotency_key=None, attempts=1),
    ],
)
async def test_a_custom_transports_network_error_on_propose_still_carries_the_key(error) -> None:
    transport = RaisingTransport(error)
    client = AgentMemoryClient(
        transport=transport, token="a-token-for-a-custom-transport", permissions=["memory:propose"]
    )
    with pytest.raises(ResponseLostError) as caught:
        await client.propose(proposal_json(), idempotency_key="my-key-1")
    lost = caught.value
    assert (lost.idempotency_key, lost.attempts, lost.retryable) == ("my-key-1", 1, True)
    assert "same idempotency_key" in str(lost)
    assert lost.__cause__ is error
    assert transport.keys == ["my-key-1"]


async def test_a_custom_transports_other_exceptions_are_not_called_lost_responses() -> None:
    client = AgentMemoryClient(
        transport=RaisingTransport(TypeError("a bug in the transport")),
        token="a-token-for-a-custom-transport",
        permissions=["memory:propose"],
    )
    with pytest.raises(TypeError):
        await client.propose(proposal_json(), idempotency_key="my-key-1")


class FlakyTransport:
    """Loses the first ``losses`` answers (a read timeout), then forwards every request."""

    def __init__(self, inner: Any, losses: int) -> None:
        self.inner = inner
        self.losses = losses
        self.max_retries = inner.max_retries
        self.sent: list[TransportRequest] = []

    async def send(self, request: TransportRequest) -> TransportResponse:
        self.sent.append(request)
        if len(self.sent) <= self.losses:
            raise httpx.ReadTimeout("timed out")
        response: TransportResponse = await self.inner.send(request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.parametrize("max_retries", [0, 2, 10])
async def test_repeated_recoveries_never_send_a_retry_header_past_max_retries(
    fake, admin, new_client, max_retries: int
) -> None:
    """Each recovery after a loss goes on counting the key's attempts, up to ``max_retries``:
    the header stays one the service takes (0–10) however often the answer is lost."""
    flaky = FlakyTransport(http_transport(fake), losses=12)
    client = new_client(fake, transport=flaky, max_retries=max_retries)
    body = proposal_json("Recovered at last.")
    with pytest.raises(ResponseLostError) as lost:
        await client.propose(body)
    key = lost.value.idempotency_key
    for _ in range(11):
        with pytest.raises(ResponseLostError):
            await client.propose(body, idempotency_key=key)
    recovered = await client.propose(body, idempotency_key=key)
    assert recovered.proposal.status == "pending"
    headers = [request.attempt for request in flaky.sent]
    assert headers == [min(n, max_retries) for n in range(13)]


class _BlocksOnce:
    """An injected ``sleep`` whose first wait ends only when the caller is cancelled."""

    def __init__(self) -> None:
        self.entered = anyio.Event()
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        if not self.entered.is_set():
            self.entered.set()
            await anyio.Event().wait()  # set by nobody: the cancellation ends it


async def test_a_propose_cancelled_while_it_waits_to_retry_counts_its_attempts_for_a_repeat(
    live, live_admin, new_client
) -> None:
    """A caller's timeout (or an MCP host's cancellation) during the wait before a retry: the attempt
    answered 503 counts, so a repeat with the key goes on at attempt 1 and Lucy sees at most three
    attempts of the key (it used to start again at 0: five attempts in all)."""
    await live_admin.add_fault("propose", 503, retry_after=1, count=5)
    sleep = _BlocksOnce()
    client = new_client(live, sleep=sleep)
    body = proposal_json()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(functools.partial(client.propose, body, idempotency_key="cancelled-1"))
        await sleep.entered.wait()
        tasks.cancel_scope.cancel()
    with pytest.raises(LucyMemoryError) as caught:
        await client.propose(body, idempotency_key="cancelled-1")

    assert caught.value.status == 503
    rows = await live_admin.requests(operation="propose")
    assert [row["retry_attempt"] for row in rows] == [0, 1, 2]
    # (this test's sleeps return at once, so the fake reports the early retries; never too many)
    assert "too_many_retries" not in {finding["code"] for finding in await live_admin.findings()}


async def test_a_propose_cancelled_while_its_answer_is_on_the_way_repeats_as_a_retry(
    live, live_admin, new_client
) -> None:
    """Cancelled after the request reached Lucy, before its answer was read: as a lost answer, the
    repeat with the key is attempt 1 and replays the proposal the first attempt made."""
    inner = http_transport(live)
    reached = anyio.Event()

    class AnswerNeverRead:
        async def send(self, request: TransportRequest) -> TransportResponse:
            response: TransportResponse = await inner.send(request)
            if not reached.is_set():
                reached.set()
                await anyio.Event().wait()  # set by nobody: the cancellation ends it
            return response

    client = new_client(live, transport=AnswerNeverRead())
    body = proposal_json()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(functools.partial(client.propose, body, idempotency_key="cancelled-2"))
        await reached.wait()
        tasks.cancel_scope.cancel()
    again = await client.propose(body, idempotency_key="cancelled-2")

    assert again.replayed is True
    rows = await live_admin.requests(operation="propose")
    assert [(row["retry_attempt"], row["replayed"]) for row in rows] == [(0, False), (1, True)]
    await inner.aclose()
