"""The scenarios that make a naive client's findings (tests/fake/test_findings.py), driven through a
real lucy-memory-mcp by an MCP host: no finding (and the suite runs strict, so any would fail it).
Waits the fake asks for are Retry-After: 0 here, so that nothing waits in real time; the SDK's
waiting out a longer Retry-After is tests/sdk/test_no_findings.py."""

from __future__ import annotations

import pytest

from e2e.helpers import PROJECT, call, fail, propose, status

pytestmark = pytest.mark.anyio


async def test_the_naive_clients_scenarios_through_the_mcp_server_produce_no_finding(fake, new_agent) -> None:
    agent = await new_agent()
    admin = fake.admin
    async with agent.session() as mcp:
        await admin.add_fault("recall", 503)  # (a)
        assert "unavailable" in await fail(mcp, "memory_recall", query="deploy")
        await admin.add_fault("propose", 503, retry_after=0)  # (b)
        await propose(mcp, "We deploy with a rollback plan.")
        elsewhere = {"kind": "project", "id": "p_elsewhere"}  # (c)
        assert "scope_forbidden" in await fail(
            mcp, "memory_propose", kind="fact", content="x", scope=elsewhere
        )
        await admin.add_fault("propose", 503, retry_after=0, count=4)  # (d)
        await fail(mcp, "memory_propose", kind="fact", content="Four times unavailable.", scope=PROJECT)
        await admin.clear_faults()
        await admin.add_fault("propose", 429, retry_after=0)  # (e)
        pending = (await propose(mcp, "Rate limited once."))["proposal"]
        await admin.add_fault("propose", 429, retry_after=120)  # (f)
        assert "rate_limited" in await fail(
            mcp, "memory_propose", kind="fact", content="Later.", scope=PROJECT
        )
        for _ in range(3):  # (g) a host polling a few times
            await status(mcp, pending["id"])
        await call(mcp, "memory_recall", query="rollback plan")  # another recall, not a repeat
    journal = await admin.requests()
    assert [(row["operation"], row["status"]) for row in journal] == [
        ("recall", 503),
        ("propose", 503),
        ("propose", 201),
        ("propose", 403),
        ("propose", 503),
        ("propose", 503),
        ("propose", 503),
        ("propose", 429),
        ("propose", 201),
        ("propose", 429),
        ("proposal_status", 200),
        ("proposal_status", 200),
        ("proposal_status", 200),
        ("recall", 200),
    ]
    assert await admin.findings() == []


@pytest.mark.lucy_allow("recall_retried")
async def test_a_host_that_retries_a_recall_is_found_and_allowed_here(fake, new_agent) -> None:
    """The other side: a host that repeats a failed recall is found; this test allows it (without
    lucy_allow the strict suite would fail it, naming recall_retried)."""
    agent = await new_agent()
    await fake.admin.add_fault("recall", 503)
    async with agent.session() as mcp:
        await fail(mcp, "memory_recall", query="deploy")
        await call(mcp, "memory_recall", query="deploy")
    assert [item["code"] for item in await fake.admin.findings()] == ["recall_retried"]
