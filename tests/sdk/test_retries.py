"""Must hold 1–4: automatic retries exactly as the Lucy README states, checked in the fake's journal on a
real uvicorn server, with an injected sleep so nothing waits."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from lucy_memory import (
    BadGatewayError,
    GatewayTimeoutError,
    LucyMemoryError,
    RateLimitedError,
    ServiceUnavailableError,
)
from lucy_memory.retry import backoff_delay
from tests.sdk.helpers import (
    Recorder,
    canonical_sha256_of,
    http_transport,
    proposal_json,
    with_header,
)

pytestmark = pytest.mark.anyio


async def _propose_rows(admin):
    return await admin.requests(operation="propose")


async def test_propose_answered_429_429_201_is_sent_three_times_with_one_body_and_key(
    live, live_admin, sleeps, new_client
) -> None:
    await live_admin.add_fault("propose", 429, retry_after=7)
    await live_admin.add_fault("propose", 429)  # the fake's default Retry-After for a 429 is 1
    client = new_client(live)
    body = proposal_json(topic="main-database")

    result = await client.propose(body)

    rows = await _propose_rows(live_admin)
    assert [row["status"] for row in rows] == [429, 429, 201]
    assert [row["retry_attempt"] for row in rows] == [0, 1, 2]
    assert {row["body_sha256"] for row in rows} == {canonical_sha256_of(body)}
    assert {row["idempotency_key"] for row in rows} == {result.idempotency_key}
    assert sleeps.delays == [7.0, 1.0]
    assert result.attempts == 3
    assert result.replayed is False
    assert result.proposal.status == "pending"
    assert len((await live_admin.proposals())["items"]) == 1
    charges = [row for row in await live_admin.ledger() if row["operation"] == "propose"]
    assert [row["amount"] for row in charges] == [-1]
    assert result.credits.charged == 1


@pytest.mark.parametrize(
    ("status", "error_class"),
    [(503, ServiceUnavailableError), (502, BadGatewayError), (504, GatewayTimeoutError)],
)
async def test_propose_gives_up_after_three_attempts_of_a_retryable_status(
    live, live_admin, sleeps, new_client, status, error_class
) -> None:
    await live_admin.add_fault("propose", status, count=3)
    client = new_client(live, random=lambda: 0.5)
    body = proposal_json()

    with pytest.raises(error_class) as caught:
        await client.propose(body, idempotency_key="my-key-1")

    error = caught.value
    assert (error.status, error.attempts, error.idempotency_key) == (status, 3, "my-key-1")
    assert "my-key-1" in str(error)
    assert error.retries_used_up
    assert "Its automatic retries are used up: propose again with that key later" in str(error)
    rows = await _propose_rows(live_admin)
    assert [row["status"] for row in rows] == [status] * 3
    assert [row["retry_attempt"] for row in rows] == [0, 1, 2]
    assert {row["idempotency_key"] for row in rows} == {"my-key-1"}
    assert {row["body_sha256"] for row in rows} == {canonical_sha256_of(body)}
    # No Retry-After on these faults: capped exponential backoff with the injected jitter.
    assert sleeps.delays == [backoff_delay(0, lambda: 0.5), backoff_delay(1, lambda: 0.5)]
    assert (await live_admin.proposals())["items"] == []
    assert [row for row in await live_admin.ledger() if row["operation"] == "propose"] == []


async def test_max_retries_of_the_transport_bounds_the_attempts(live, live_admin, sleeps, new_client) -> None:
    await live_admin.add_fault("propose", 503, count=5)
    client = new_client(live, transport=http_transport(live, max_retries=0))
    with pytest.raises(ServiceUnavailableError) as caught:
        await client.propose(proposal_json())
    assert caught.value.attempts == 1
    assert len(await _propose_rows(live_admin)) == 1
    assert sleeps.delays == []


# ---- statuses that are never retried ---------------------------------------------------------------


async def _version_conflict_case(live, admin, new_client):
    client = new_client(live)
    first = await client.propose(proposal_json("We use PostgreSQL 15.", topic="main-database"))
    memory = (await admin.approve(first.proposal.id))["memory"]
    second = await client.propose(proposal_json("We use PostgreSQL 16.", topic="main-database"))
    await admin.approve(second.proposal.id)
    replaces = {"memory_id": memory["id"], "version": 1}
    return {}, proposal_json("We use PostgreSQL 17.", replaces=replaces)


async def _arrange(name, live, admin, new_client):
    """(client options, propose JSON) for a case that answers the named status."""
    body = proposal_json()
    if name == "500":
        await admin.add_fault("propose", 500)
    elif name == "400":
        return {
            "rewrite_request": lambda r: replace(r, headers={**r.headers, "Lucy-Retry-Attempt": "x"})
        }, body
    elif name == "401":
        return {"token": "not-a-valid-token-for-the-fake"}, body
    elif name == "402":
        await admin.set_balance("acct_dev", 0)
    elif name == "403":
        cred = await admin.create_credential(permissions=("memory:read",), scopes=[PROJECT_SCOPE])
        return {"token": cred["token"]}, body
    elif name == "404":
        return {}, proposal_json(replaces={"memory_id": "mem_" + "x" * 24, "version": 1})
    elif name == "409":
        return await _version_conflict_case(live, admin, new_client)
    elif name == "413":
        return {"rewrite_request": lambda r: replace(r, body=b" " * 70_000 + (r.body or b""))}, body
    elif name == "415":
        return {
            "rewrite_request": lambda r: replace(r, headers={**r.headers, "Content-Type": "text/plain"})
        }, body
    elif name == "422":
        client = new_client(live)
        await client.propose(proposal_json("Another body."), idempotency_key="reused-key")
        return {"key": "reused-key"}, body
    return {}, body


PROJECT_SCOPE = {"kind": "project", "id": "project_example"}


@pytest.mark.parametrize("name", ["400", "401", "402", "403", "404", "409", "413", "415", "422", "500"])
async def test_propose_is_not_retried_on_other_statuses(live, live_admin, sleeps, new_client, name) -> None:
    options, body = await _arrange(name, live, live_admin, new_client)
    before = len(await _propose_rows(live_admin))
    recorder = Recorder(
        http_transport(live),
        rewrite_request=options.get("rewrite_request"),
    )
    client = new_client(live, transport=recorder, token=options.get("token", "lucy-dev-token"))

    with pytest.raises(LucyMemoryError) as caught:
        await client.propose(body, idempotency_key=options.get("key"))

    assert caught.value.status == int(name)
    assert caught.value.attempts == 1
    assert len(recorder.requests) == 1
    assert sleeps.delays == []
    rows = (await _propose_rows(live_admin))[before:]
    if name in ("401", "413"):  # answered before authentication: the fake journals nothing
        assert rows == []
    else:
        assert [row["status"] for row in rows] == [int(name)]


# ---- Retry-After ------------------------------------------------------------------------------------


async def test_retry_after_from_0_to_60_seconds_is_waited_exactly(
    live, live_admin, sleeps, new_client
) -> None:
    await live_admin.add_fault("propose", 429, retry_after=0)
    await live_admin.add_fault("propose", 503, retry_after=60)
    client = new_client(live, random=lambda: 0.0)

    result = await client.propose(proposal_json())

    assert sleeps.delays == [0.0, 60.0]
    assert result.attempts == 3
    assert [row["retry_attempt"] for row in await _propose_rows(live_admin)] == [0, 1, 2]


@pytest.mark.parametrize(("status", "error_class"), [(429, RateLimitedError), (503, ServiceUnavailableError)])
async def test_retry_after_over_60_seconds_is_not_retried_and_is_on_the_error(
    live, live_admin, sleeps, new_client, status, error_class
) -> None:
    await live_admin.add_fault("propose", status, retry_after=61)
    client = new_client(live)

    with pytest.raises(error_class) as caught:
        await client.propose(proposal_json())

    assert caught.value.retry_after == 61
    assert caught.value.attempts == 1
    assert not caught.value.retries_used_up
    assert "retries are used up" not in str(caught.value)
    assert "Lucy asked to wait 61 s, longer than the 60 s this SDK waits by itself" in str(caught.value)
    assert sleeps.delays == []
    assert len(await _propose_rows(live_admin)) == 1


async def test_an_http_date_retry_after_is_understood(live, live_admin, sleeps, new_client) -> None:
    now = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
    date = format_datetime(datetime(2030, 1, 1, 12, 0, 42, tzinfo=UTC), usegmt=True)
    await live_admin.add_fault("propose", 429, retry_after=1)
    recorder = Recorder(
        http_transport(live),
        rewrite_response=lambda r: with_header(r, "Retry-After", date) if r.status == 429 else r,
    )
    client = new_client(live, transport=recorder, clock=now.timestamp)

    result = await client.propose(proposal_json())

    assert sleeps.delays == [42.0]
    assert result.attempts == 2
    assert [row["status"] for row in await _propose_rows(live_admin)] == [429, 201]


async def test_an_http_date_over_60_seconds_ahead_is_not_retried(
    live, live_admin, sleeps, new_client
) -> None:
    now = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
    date = format_datetime(datetime(2030, 1, 1, 12, 5, 0, tzinfo=UTC), usegmt=True)
    await live_admin.add_fault("propose", 503, retry_after=1)
    recorder = Recorder(http_transport(live), rewrite_response=lambda r: with_header(r, "Retry-After", date))
    client = new_client(live, transport=recorder, clock=now.timestamp)

    with pytest.raises(ServiceUnavailableError) as caught:
        await client.propose(proposal_json())

    assert caught.value.retry_after == 300.0
    assert len(await _propose_rows(live_admin)) == 1
    assert sleeps.delays == []


async def test_a_malformed_retry_after_falls_back_to_capped_backoff_with_jitter(
    live, live_admin, sleeps, new_client
) -> None:
    await live_admin.add_fault("propose", 429, retry_after=5, count=2)
    jitter = iter([0.0, 1.0])
    recorder = Recorder(
        http_transport(live),
        rewrite_response=lambda r: with_header(r, "Retry-After", "soon") if r.status == 429 else r,
    )
    client = new_client(live, transport=recorder, random=lambda: next(jitter))

    result = await client.propose(proposal_json())

    # first retry: 0.5 s × (1 − 0.25 × 0.0); second: 1.0 s × (1 − 0.25 × 1.0)
    assert sleeps.delays == [0.5, 0.75]
    assert result.attempts == 3
    assert [row["retry_attempt"] for row in await _propose_rows(live_admin)] == [0, 1, 2]


# ---- recall and proposal status are never retried ------------------------------------------------


@pytest.mark.parametrize("status", [429, 503])
async def test_recall_is_never_retried_and_says_whether_repeating_may_charge_again(
    live, live_admin, sleeps, new_client, status
) -> None:
    await live_admin.add_fault("recall", status, retry_after=1)
    client = new_client(live)

    with pytest.raises(LucyMemoryError) as caught:
        await client.recall('{"query": "database"}')

    assert caught.value.status == status
    assert caught.value.attempts == 1
    # a 429 was refused before it executed; a 503 may have executed (errors are never charged, but a
    # response lost after the commit was)
    expected = "Nothing was executed or charged." if status < 500 else "repeating it may charge again"
    assert expected in str(caught.value)
    assert [row["status"] for row in await live_admin.requests(operation="recall")] == [status]
    assert sleeps.delays == []


@pytest.mark.parametrize("status", [429, 503])
async def test_proposal_status_is_never_retried_and_says_whether_repeating_may_charge_again(
    live, live_admin, sleeps, new_client, status
) -> None:
    client = new_client(live)
    proposed = await client.propose(proposal_json())
    await live_admin.add_fault("proposal_status", status, retry_after=1)

    with pytest.raises(LucyMemoryError) as caught:
        await client.proposal_status(f'{{"proposal_id": "{proposed.proposal.id}"}}')

    assert caught.value.status == status
    # a 429 was refused before it executed; a 503 may have executed (errors are never charged, but a
    # response lost after the commit was)
    expected = "Nothing was executed or charged." if status < 500 else "repeating it may charge again"
    assert expected in str(caught.value)
    assert [row["status"] for row in await live_admin.requests(operation="proposal_status")] == [status]
    assert sleeps.delays == []
