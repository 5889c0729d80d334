"""Credits, retries and lost responses, end to end: MCP host → lucy-memory-mcp → fake."""

from __future__ import annotations

import pytest

from e2e.helpers import PROJECT, call, fail, idempotency_key_in, propose, recall, status, text

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def _spent(fake, agent) -> list[str]:
    return [row["operation"] for row in await fake.admin.ledger(account=agent.account)]


async def test_every_tool_call_costs_one_credit_and_a_replay_costs_none(fake, new_agent) -> None:
    agent = await new_agent(credits=10)
    async with agent.session() as mcp:
        arguments = {"kind": "fact", "content": "The API rate limit is 100 rps.", "scope": PROJECT}
        first = await mcp.call_tool("memory_propose", arguments)
        again = await mcp.call_tool("memory_propose", arguments)
        assert again.structured_content == first.structured_content
        assert "replay" in text(again).lower()
        await status(mcp, first.structured_content["proposal"]["id"])
        await recall(mcp, "rate limit")
    assert await _spent(fake, agent) == ["propose", "proposal_status", "recall"]
    ledger = await fake.admin.ledger(account=agent.account)
    assert ledger[-1]["balance_after"] == 7


async def test_no_credits_and_billing_down_are_clear_tool_errors(fake, new_agent) -> None:
    agent = await new_agent(credits=0)
    async with agent.session() as mcp:
        message = await fail(mcp, "memory_recall", query="anything")
        assert "insufficient_credits" in message
        await fake.admin.set_balance(agent.account, 5)
        await fake.admin.set_billing(False)
        message = await fail(mcp, "memory_recall", query="anything")
        assert "billing_unavailable" in message
        assert "Next:" in message


async def test_a_429_on_propose_is_retried_with_the_same_key_and_body_and_charged_once(
    fake, new_agent
) -> None:
    agent = await new_agent()
    await fake.admin.add_fault("propose", 429, retry_after=0, count=2)
    async with agent.session() as mcp:
        body = await propose(mcp, "Cache invalidation happens on write.")
    assert body["proposal"]["status"] == "pending"
    journal = await fake.admin.requests(operation="propose")
    assert [row["status"] for row in journal] == [429, 429, 201]
    assert [row["retry_attempt"] for row in journal] == [0, 1, 2]
    assert len({row["idempotency_key"] for row in journal}) == 1
    assert len({row["body_sha256"] for row in journal}) == 1
    assert await _spent(fake, agent) == ["propose"]


async def test_a_429_on_recall_is_surfaced_not_retried(fake, new_agent) -> None:
    agent = await new_agent()
    await fake.admin.add_fault("recall", 429, retry_after=0)
    async with agent.session() as mcp:
        message = await fail(mcp, "memory_recall", query="anything")
    assert "rate_limited" in message
    assert len(await fake.admin.requests(operation="recall")) == 1
    assert await _spent(fake, agent) == []


async def test_a_lost_propose_response_is_recovered_with_the_returned_key(fake, new_agent) -> None:
    agent = await new_agent()
    await fake.admin.add_fault("propose", 503, phase="after_commit", drop_connection=True)
    arguments = {"kind": "decision", "content": "Queue with SQS.", "scope": PROJECT}
    async with agent.session() as mcp:
        message = await fail(mcp, "memory_propose", **arguments)
        key = idempotency_key_in(message)
        recovered = await call(mcp, "memory_propose", **arguments, idempotency_key=key)
    assert recovered["idempotency_key"] == key
    proposals = (await fake.admin.proposals())["items"]
    assert [p["id"] for p in proposals] == [recovered["proposal"]["id"]]
    assert await _spent(fake, agent) == ["propose"]
    journal = await fake.admin.requests(operation="propose")
    assert [(row["dropped"], row["replayed"]) for row in journal] == [(True, False), (False, True)]
