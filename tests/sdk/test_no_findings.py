"""The SDK keeps the client rules the fake judges (SPEC 3.8): the scenarios that make a naive client's
findings (tests/fake/test_findings.py) produce none through ``lucy_memory``. The SDK waits with an
injected sleep that advances the fake's clock, so nothing here waits in real time.
"""

from __future__ import annotations

import json

import pytest

from fake_lucy.testing import InProcessFake
from lucy_memory import AgentMemoryClient
from lucy_memory.errors import (
    RateLimitedError,
    ResponseLostError,
    ScopeForbiddenError,
    ServiceUnavailableError,
)
from tests.sdk.helpers import make_client, proposal_json

pytestmark = pytest.mark.anyio


class FakeClockSleep:
    """Waits by advancing the fake's clock: the fake counts that time as passed."""

    def __init__(self, fake: InProcessFake) -> None:
        self.fake = fake
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await self.fake.admin.advance_clock(seconds)


@pytest.fixture
async def client(fake):
    sdk = make_client(fake, sleep=FakeClockSleep(fake))
    async with sdk:
        yield sdk


async def _statuses(admin, operation: str) -> list[int | None]:
    return [row["status"] for row in await admin.requests(operation=operation)]


async def test_the_naive_clients_scenarios_through_the_sdk_produce_no_finding(
    fake, admin, client: AgentMemoryClient
) -> None:
    # (a) an injected 503 on recall: raised, not retried
    await admin.add_fault("recall", 503)
    with pytest.raises(ServiceUnavailableError):
        await client.recall('{"query": "deploy"}')
    # (b) a 503 on propose: retried with the same key
    await admin.add_fault("propose", 503)
    retried = await client.propose(proposal_json("We deploy with a rollback plan."))
    assert retried.attempts == 2
    # (c) a 4xx on propose: raised, not retried
    forbidden = json.dumps(
        {"kind": "fact", "content": "Elsewhere.", "scope": {"kind": "project", "id": "p_x"}}
    )
    with pytest.raises(ScopeForbiddenError):
        await client.propose(forbidden)
    # (d) 503 four times: three attempts, then the error
    await admin.add_fault("propose", 503, count=4)
    with pytest.raises(ServiceUnavailableError) as exhausted:
        await client.propose(proposal_json("Four times unavailable."))
    assert exhausted.value.attempts == 3
    await admin.clear_faults()
    # (e) Retry-After: 2 waited out (on the fake's clock)
    await admin.add_fault("propose", 429, retry_after=2)
    waited = await client.propose(proposal_json("Rate limited once."))
    assert waited.attempts == 2
    # (f) Retry-After: 120 is over the limit: no retry, the caller gets it
    await admin.add_fault("propose", 429, retry_after=120)
    with pytest.raises(RateLimitedError) as limited:
        await client.propose(proposal_json("Rate limited for two minutes."))
    assert (limited.value.retry_after, limited.value.attempts) == (120, 1)
    # (g) polling a pending proposal 40 times: with the SDK's growing intervals
    final = await client.wait_for_decision(waited.proposal.id, max_polls=40)
    assert final.proposal.status == "pending"

    assert await _statuses(admin, "recall") == [503]
    assert await _statuses(admin, "propose") == [503, 201, 403, 503, 503, 503, 429, 201, 429]
    assert len(await _statuses(admin, "proposal_status")) == 40
    assert await admin.findings() == []


async def test_a_lost_propose_answer_recovered_with_its_key_is_no_finding(
    fake, admin, client: AgentMemoryClient
) -> None:
    await admin.add_fault("propose", 503, phase="after_commit", drop_connection=True)
    request = proposal_json("Recovered after a lost answer.", topic="recovery")
    with pytest.raises(ResponseLostError) as lost:
        await client.propose(request)
    recovered = await client.propose(request, idempotency_key=lost.value.idempotency_key)
    assert recovered.replayed
    assert [row["dropped"] for row in await admin.requests(operation="propose")] == [True, False]
    assert await admin.findings() == []


async def test_a_recovery_after_a_lost_answer_counts_that_attempt_among_its_retries(
    fake, admin, client: AgentMemoryClient
) -> None:
    """The documented recovery (propose again with the lost call's key) is a retry of the same key:
    with the SDK's own retries it never makes more than three attempts under one key."""
    await admin.add_fault("propose", 503, phase="after_commit", drop_connection=True)
    request = proposal_json("Recovered through two more failures.", topic="lost-then-503")
    with pytest.raises(ResponseLostError) as lost:
        await client.propose(request)
    await admin.add_fault("propose", 503, count=3)
    with pytest.raises(ServiceUnavailableError) as failed:
        await client.propose(request, idempotency_key=lost.value.idempotency_key)
    assert failed.value.attempts == 2  # this call's own: attempt 2 (the retry header 1) and 3
    rows = await admin.requests(operation="propose")
    assert [(row["retry_attempt"], row["dropped"]) for row in rows] == [(0, True), (1, False), (2, False)]
    assert await admin.findings() == []
    await admin.clear_faults()
    fresh = await client.propose(proposal_json("A new key starts at attempt 0."))
    assert fresh.attempts == 1
    assert (await admin.requests(operation="propose"))[-1]["retry_attempt"] == 0


@pytest.mark.parametrize("max_interval", [3, 4.5])
async def test_polling_with_the_shortest_max_interval_keeps_the_polling_rules(
    fake, admin, client: AgentMemoryClient, max_interval: float
) -> None:
    proposed = await client.propose(proposal_json(f"Polled with a cap of {max_interval} s."))
    final = await client.wait_for_decision(proposed.proposal.id, max_polls=45, max_interval=max_interval)
    assert final.proposal.status == "pending"
    assert await admin.findings() == []
