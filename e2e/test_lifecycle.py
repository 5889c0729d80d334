"""The memory lifecycle as an agent (through MCP) and a reviewer (through the control API) live it."""

from __future__ import annotations

import pytest

from e2e.helpers import PROJECT, propose, recall, status, text

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_propose_pending_approve_then_recalled_with_id_and_version(fake, new_agent) -> None:
    agent = await new_agent()
    async with agent.session() as mcp:
        proposed = await propose(mcp, "We approved PostgreSQL 16 for the billing database.")
        proposal = proposed["proposal"]
        assert proposal["status"] == "pending"
        assert (await status(mcp, proposal["id"]))["proposal"]["status"] == "pending"
        assert await recall(mcp, "billing database") == []
        await fake.admin.approve(proposal["id"])
        approved = (await status(mcp, proposal["id"]))["proposal"]
        assert approved["status"] == "approved"
        result = await mcp.call_tool("memory_recall", {"query": "Which database for billing?"})
        memories = result.structured_content["memories"]
        assert [(m["id"], m["version"]) for m in memories] == [
            (approved["memory"]["id"], approved["memory"]["version"])
        ]
        assert f"id={approved['memory']['id']} version=1" in text(result)


async def test_reject_and_expiry_by_the_fake_clock(fake, new_agent) -> None:
    agent = await new_agent()
    async with agent.session() as mcp:
        rejected = (await propose(mcp, "Store logs forever."))["proposal"]
        expiring = (await propose(mcp, "Rotate keys monthly."))["proposal"]
        await fake.admin.reject(rejected["id"], "retention policy says 90 days")
        assert (await status(mcp, rejected["id"]))["proposal"]["reason"] == "rejected_by_reviewer"
        await fake.admin.advance_clock(7 * 24 * 3600)
        expired = (await status(mcp, expiring["id"]))["proposal"]
        assert (expired["status"], expired["reason"]) == ("expired", "expired")


async def test_replacement_supersedes_the_prior_version_and_a_competing_replacement(fake, new_agent) -> None:
    agent = await new_agent()
    async with agent.session() as mcp:
        first = (await propose(mcp, "Frontend uses React 18.", topic="frontend-framework"))["proposal"]
        memory = (await fake.admin.approve(first["id"]))["memory"]
        winner = (
            await propose(mcp, "Frontend uses React 19.", replaces={"memory_id": memory["id"], "version": 1})
        )["proposal"]
        loser = (await propose(mcp, "Frontend uses Svelte.", topic="frontend-framework"))["proposal"]
        assert loser["replaces"] == {"memory_id": memory["id"], "version": 1}  # topic upsert
        await fake.admin.approve(winner["id"])
        assert (await status(mcp, loser["id"]))["proposal"]["status"] == "superseded"
        found = await recall(mcp, "frontend uses")
        assert [(m["id"], m["version"], m["content"]) for m in found] == [
            (memory["id"], 2, "Frontend uses React 19.")
        ]
        history = (await fake.admin.memories(scope_kind="project", scope_id="project_example"))["items"]
        assert [(m["version"], m["status"]) for m in history] == [(1, "superseded"), (2, "active")]


async def test_auto_memory_policy_saves_at_once_and_says_so(fake, new_agent) -> None:
    await fake.admin.set_policy("tenant_dev", auto_approve=["rule"])
    agent = await new_agent()
    async with agent.session() as mcp:
        result = await mcp.call_tool(
            "memory_propose", {"kind": "rule", "content": "Never deploy on Fridays.", "scope": PROJECT}
        )
        assert result.structured_content["proposal"]["status"] == "approved"
        assert "Saved" in text(result)
        pending = await mcp.call_tool(
            "memory_propose", {"kind": "fact", "content": "The office is in Lisbon.", "scope": PROJECT}
        )
        assert pending.structured_content["proposal"]["status"] == "pending"
        assert "Not saved yet" in text(pending)
        assert [m["content"] for m in await recall(mcp, "deploy fridays")] == ["Never deploy on Fridays."]
