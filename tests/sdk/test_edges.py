"""Edges of the SDK: a refused connection, a closed client, a replay's own request id, an answer the
models cannot read, and the sync client's options."""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import replace
from typing import Any

import anyio
import httpx
import pytest

from lucy_memory import (
    AgentMemoryClient,
    ClientClosedError,
    ConfigurationError,
    ConnectionFailedError,
    InvalidRequestError,
    InvalidResponseError,
    ResponseLostError,
    SyncAgentMemoryClient,
    create_lucy_http_transport,
)
from lucy_memory.transport import TransportResponse
from tests.helpers import proxy_trap
from tests.sdk.helpers import (
    BOTH,
    DEV_TOKEN,
    RaisingTransport,
    Recorder,
    http_transport,
    proposal_json,
    refused,
)

pytestmark = pytest.mark.anyio


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again when the block ends: nothing listens


@pytest.mark.parametrize("operation", ["recall", "propose"])
async def test_a_refused_connection_says_nothing_was_sent_or_charged(operation) -> None:
    transport = create_lucy_http_transport(
        base_url=f"http://127.0.0.1:{_closed_port()}", allow_insecure_loopback=True
    )
    async with AgentMemoryClient(transport=transport, token=DEV_TOKEN, permissions=BOTH) as client:
        call = (
            client.recall('{"query": "database"}')
            if operation == "recall"
            else client.propose(proposal_json(), idempotency_key="k-refused")
        )
        with pytest.raises(ConnectionFailedError) as caught:
            await call
    error = caught.value
    assert (error.code, error.retryable, error.status, error.attempts) == ("connection_failed", True, None, 1)
    assert "nothing was sent and nothing was charged" in str(error)
    assert "may have" not in str(error)
    if operation == "propose":
        assert error.idempotency_key == "k-refused"


async def test_a_custom_transports_refused_connection_is_connection_failed_with_the_key() -> None:
    client = AgentMemoryClient(transport=RaisingTransport(refused()), token=DEV_TOKEN, permissions=BOTH)
    with pytest.raises(ConnectionFailedError) as caught:
        await client.propose(proposal_json(), idempotency_key="k-custom")
    assert caught.value.idempotency_key == "k-custom"
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


async def test_a_closed_client_sends_nothing_and_closing_twice_is_fine(fake, admin) -> None:
    recorder = Recorder(http_transport(fake))
    client = AgentMemoryClient(transport=recorder, token=DEV_TOKEN, permissions=BOTH)
    await client.aclose()
    await client.aclose()
    with pytest.raises(ClientClosedError) as caught:
        await client.propose(proposal_json(), idempotency_key="k-closed")
    assert caught.value.idempotency_key == "k-closed"
    assert recorder.requests == []
    assert await admin.requests() == []


async def test_a_replay_reports_its_own_request_id_and_the_original_one(fake, new_client) -> None:
    client = new_client(fake)
    first = await client.propose(proposal_json(), idempotency_key="k-replay")
    again = await client.propose(proposal_json(), idempotency_key="k-replay")
    assert again.replayed is True
    assert again.original_request_id == first.request_id
    assert again.request_id != first.request_id
    assert again.request_id.startswith("req_")
    assert json.loads(again.body)["request_id"] == first.request_id  # the stored body, byte for byte


async def test_an_answer_the_models_cannot_read_is_an_invalid_response_with_the_key(fake) -> None:
    def impossible_date(response: TransportResponse) -> TransportResponse:
        data = json.loads(response.body)
        data["proposal"]["created_at"] = "2026-02-30T00:00:00.000000Z"  # matches the schema's pattern
        return replace(response, body=json.dumps(data).encode())

    recorder = Recorder(http_transport(fake), rewrite_response=impossible_date)
    async with AgentMemoryClient(transport=recorder, token=DEV_TOKEN, permissions=BOTH) as client:
        with pytest.raises(InvalidResponseError) as caught:
            await client.propose(proposal_json(), idempotency_key="k-feb-30")
    assert caught.value.idempotency_key == "k-feb-30"
    assert isinstance(caught.value.__cause__, ValueError)


@pytest.mark.parametrize("max_interval", [-5, 0, 1, 2, 2.99, float("nan"), float("inf"), True, "3"])
async def test_wait_for_decision_refuses_a_max_interval_that_is_no_number_of_at_least_3_seconds(
    fake, new_client, max_interval
) -> None:
    client = new_client(fake)
    with pytest.raises(ConfigurationError):
        await client.wait_for_decision("prop_x", max_polls=1, max_interval=max_interval)


def test_the_sync_client_takes_clock_and_random_and_closes_idempotently(live) -> None:
    transport = create_lucy_http_transport(base_url=live.base_url, allow_insecure_loopback=True)
    client = SyncAgentMemoryClient(
        transport=transport, token=DEV_TOKEN, permissions=BOTH, clock=lambda: 1.0, random=lambda: 0.0
    )
    with client:
        assert client.recall('{"query": "database"}').credits.charged == 1
    client.close()
    with pytest.raises(ClientClosedError):
        client.recall('{"query": "database"}')


async def test_a_propose_retry_that_cannot_connect_is_a_lost_response_not_nothing_sent(fake, admin) -> None:
    await admin.add_fault("propose", 503, phase="after_commit")
    # The first attempt is answered 503 after the fake executed it; the retry cannot connect.
    transport = RaisingTransport(refused(), inner=http_transport(fake), answered=1)
    client = AgentMemoryClient(transport=transport, token=DEV_TOKEN, permissions=BOTH, sleep=_no_sleep)
    with pytest.raises(ResponseLostError) as caught:
        await client.propose(proposal_json(), idempotency_key="k-retry")
    assert (caught.value.idempotency_key, caught.value.attempts) == ("k-retry", 2)
    assert "nothing was charged" not in str(caught.value)
    assert [row["operation"] for row in await admin.ledger()] == ["propose"]  # the first one executed


async def _no_sleep(seconds: float) -> None:
    return None


async def test_a_deeply_nested_request_is_an_invalid_request_not_a_recursion_error(fake, new_client) -> None:
    client = new_client(fake)
    with pytest.raises(InvalidRequestError):
        await client.recall('{"query": "x", "extra": ' + "[" * 450 + "]" * 450 + "}")


async def test_a_replay_of_what_an_earlier_attempt_of_the_call_saved_is_recovered(
    fake, admin, new_client
) -> None:
    """``recovered``: the retry's replay names the request of this call's first attempt (answered 503
    after the commit), so this call made the proposal and was charged for it once. A replay of an
    earlier call's proposal (the same key used again) is not."""
    await admin.add_fault("propose", 503, phase="after_commit")
    client = new_client(fake)
    first = await client.propose(proposal_json(), idempotency_key="k-recovered")
    assert (first.replayed, first.recovered, first.attempts) == (True, True, 2)
    assert first.credits.charged == 0  # this request's, as documented
    again = await client.propose(proposal_json(), idempotency_key="k-recovered")
    assert (again.replayed, again.recovered, again.attempts) == (True, False, 1)
    assert [row["operation"] for row in await admin.ledger()] == ["propose"]


@pytest.mark.parametrize("operation", ["recall", "proposal_status"])
async def test_an_unreadable_answer_to_a_charging_call_says_it_was_charged(fake, operation) -> None:
    """A 200 executed and was charged: the error must not say nothing was."""

    def without_credits(response: TransportResponse) -> TransportResponse:
        data = json.loads(response.body)
        del data["credits"]
        return replace(response, body=json.dumps(data).encode())

    async with AgentMemoryClient(transport=http_transport(fake), token=DEV_TOKEN, permissions=BOTH) as plain:
        proposal_id = (await plain.propose(proposal_json(), idempotency_key="k-read")).proposal.id
    recorder = Recorder(http_transport(fake), rewrite_response=without_credits)
    async with AgentMemoryClient(transport=recorder, token=DEV_TOKEN, permissions=BOTH) as client:
        call = (
            client.recall('{"query": "database"}')
            if operation == "recall"
            else client.proposal_status(json.dumps({"proposal_id": proposal_id}))
        )
        with pytest.raises(InvalidResponseError) as caught:
            await call
    message = str(caught.value)
    assert caught.value.status == 200
    assert "Nothing was executed or charged" not in message
    assert "It executed and was charged" in message
    assert "repeating it charges again" in message


async def test_closing_the_client_while_a_propose_waits_to_retry_keeps_its_attempts_and_key(
    fake, admin
) -> None:
    """The first attempt was sent and answered 503 (after the fake executed it): the error counts it,
    says so, and the key's next use goes on from it."""
    await admin.add_fault("propose", 503, phase="after_commit", retry_after=1)
    recorder = Recorder(http_transport(fake))

    async def close_while_waiting(seconds: float) -> None:
        await client.aclose()

    client = AgentMemoryClient(
        transport=recorder, token=DEV_TOKEN, permissions=BOTH, sleep=close_while_waiting
    )
    with pytest.raises(ClientClosedError) as caught:
        await client.propose(proposal_json(), idempotency_key="k-closing")
    error = caught.value
    assert (error.attempts, error.status, error.idempotency_key) == (1, 503, "k-closing")
    assert str(error.request_id).startswith("req_")
    assert "nothing was sent" not in str(error)
    assert "the last of this call's 1 attempt was answered 503" in str(error)
    assert "idempotency_key k-closing" in str(error)
    assert len(recorder.requests) == 1
    assert [row["operation"] for row in await admin.ledger()] == ["propose"]  # it did execute


async def test_closing_the_client_cuts_a_retry_wait_short(fake, admin) -> None:
    """The propose waits a minute (Retry-After: 60) and is closed on: it ends with ClientClosedError
    at once, not when the minute is over (the wait is a real one here, and never runs out)."""
    await admin.add_fault("propose", 503, retry_after=60)
    waiting = anyio.Event()

    async def real_sleep(seconds: float) -> None:
        waiting.set()
        await anyio.sleep(seconds)

    client = AgentMemoryClient(
        transport=http_transport(fake), token=DEV_TOKEN, permissions=BOTH, sleep=real_sleep
    )
    caught: list[BaseException] = []

    async def propose() -> None:
        try:
            await client.propose(proposal_json(), idempotency_key="k-cut-short")
        except ClientClosedError as error:
            caught.append(error)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(propose)
            await waiting.wait()
            await client.aclose()
    [error] = caught
    assert (error.attempts, error.status, error.idempotency_key) == (1, 503, "k-cut-short")  # type: ignore[attr-defined]


def test_closing_the_sync_facade_cuts_a_retry_wait_short(fake) -> None:
    """``close()`` from another thread returns at once, and the waiting propose raises then."""
    waiting = threading.Event()

    async def real_sleep(seconds: float) -> None:
        waiting.set()
        await anyio.sleep(seconds)

    problem = {
        "type": "https://agent-memory.invalid/problems/unavailable",
        "title": "Service unavailable",
        "status": 503,
        "detail": "busy",
        "code": "unavailable",
        "request_id": "req_" + "a" * 22,
        "retryable": True,
    }
    headers = {"retry-after": "60", "content-type": "application/problem+json"}
    answer = TransportResponse(status=503, headers=headers, body=json.dumps(problem).encode())

    class Busy:
        async def send(self, request: Any) -> TransportResponse:
            return answer

    client = SyncAgentMemoryClient(transport=Busy(), token=DEV_TOKEN, permissions=BOTH, sleep=real_sleep)
    caught: list[BaseException] = []

    def propose() -> None:
        try:
            client.propose(proposal_json(), idempotency_key="k-sync-cut")
        except ClientClosedError as error:
            caught.append(error)

    worker = threading.Thread(target=propose)
    worker.start()
    assert waiting.wait(timeout=10)
    closer = threading.Thread(target=client.close)
    closer.start()
    closer.join(timeout=10)  # a bound, not a speed goal: it used to block for the whole minute
    assert not closer.is_alive(), "close() waited for the retry wait to run out"
    worker.join(timeout=10)
    assert not worker.is_alive()
    [error] = caught
    assert error.attempts == 1  # type: ignore[attr-defined]


async def test_a_recovery_calls_lost_response_gives_one_count_in_its_attempts_and_its_message(fake) -> None:
    lost = httpx.ReadTimeout("timed out")
    transport = RaisingTransport(lost)
    client = AgentMemoryClient(transport=transport, token=DEV_TOKEN, permissions=BOTH, sleep=_no_sleep)
    with pytest.raises(ResponseLostError):
        await client.propose(proposal_json(), idempotency_key="k-twice")
    with pytest.raises(ResponseLostError) as caught:
        await client.propose(proposal_json(), idempotency_key="k-twice")  # the recovery, lost again
    assert transport.sent[-1].attempt == 1  # the key's second attempt …
    assert caught.value.attempts == 1  # … and this call's first
    assert "failed after 1 attempt with idempotency_key k-twice" in str(caught.value)


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"])
async def test_a_proxy_in_the_environment_never_sees_the_token_for_a_loopback_service(
    live, monkeypatch, variable
) -> None:
    with proxy_trap() as (proxy, arrived):
        monkeypatch.setenv(variable, proxy)
        transport = create_lucy_http_transport(base_url=live.base_url, allow_insecure_loopback=True)
        async with AgentMemoryClient(transport=transport, token=DEV_TOKEN, permissions=BOTH) as client:
            assert (await client.recall('{"query": "database"}')).credits.charged == 1
    assert arrived == []


async def test_an_untrusted_certificate_is_named_as_the_cause_with_what_to_set() -> None:
    """A self-signed or private CA's certificate: the one failure whose fix can be said."""
    untrusted = httpx.ConnectError(
        "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate (_ssl.c:1006)"
    )
    for error, said in (
        (untrusted, "(ConnectError: the service's TLS certificate is not trusted; SSL_CERT_FILE names"),
        (refused(), "could not connect to the service (ConnectError);"),
    ):
        client = AgentMemoryClient(transport=RaisingTransport(error), token=DEV_TOKEN, permissions=BOTH)
        with pytest.raises(ConnectionFailedError) as caught:
            await client.recall('{"query": "database"}')
        assert said in str(caught.value)
