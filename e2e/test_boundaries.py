"""What never crosses a boundary: secrets, permissions, tenants."""

from __future__ import annotations

import pytest

from e2e.helpers import PROJECT, fail, propose, recall

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_a_secret_is_refused_before_any_request_reaches_the_fake(fake, new_agent) -> None:
    agent = await new_agent()
    async with agent.session() as mcp:
        message = await fail(
            mcp, "memory_propose", kind="fact", content="deploy key AKIAIOSFODNN7EXAMPLE", scope=PROJECT
        )
    assert "secret" in message.lower()
    assert "AKIAIOSFODNN7EXAMPLE" not in message
    assert await fake.admin.requests() == []


async def test_a_read_only_host_cannot_propose(fake, new_agent) -> None:
    agent = await new_agent(permissions="memory:read")
    async with agent.session() as mcp:
        tools = {tool.name for tool in (await mcp.list_tools()).tools}
        assert tools == {"memory_recall", "memory_propose", "memory_proposal_status"}
        message = await fail(mcp, "memory_propose", kind="fact", content="x", scope=PROJECT)
        assert "permission_denied" in message
        await recall(mcp, "anything")
    assert [row["operation"] for row in await fake.admin.requests()] == ["recall"]


async def test_two_tenants_never_see_each_others_memory(fake, new_agent) -> None:
    shared = {"kind": "project", "id": "shared"}
    alice = await new_agent(tenant="tenant_alice", scopes=[shared])
    bob = await new_agent(tenant="tenant_bob", scopes=[shared])
    async with alice.session() as mcp_a:
        proposal = (await propose(mcp_a, "Alice's launch date is March 3.", scope=shared))["proposal"]
        await fake.admin.approve(proposal["id"])
        async with bob.session(mode="2026-07-28") as mcp_b:
            assert await recall(mcp_b, "launch date") == []
            message = await fail(mcp_b, "memory_proposal_status", proposal_id=proposal["id"])
            assert "not_found" in message
        assert [m["content"] for m in await recall(mcp_a, "launch date")] == [
            "Alice's launch date is March 3."
        ]
