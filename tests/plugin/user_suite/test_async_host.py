"""A user's async tests: the SDK and the MCP host on one fake, and a rate limit that costs no time."""

import json

import pytest

pytestmark = pytest.mark.anyio

RULE = {
    "kind": "rule",
    "content": "Never deploy on Fridays.",
    "scope": {"kind": "project", "id": "project_example"},
}


async def test_what_the_sdk_proposes_the_mcp_host_recalls(lucy_server_client, lucy_mcp, fake_lucy_server):
    proposed = await lucy_server_client.propose(json.dumps(RULE))
    await fake_lucy_server.admin.approve(proposed.proposal.id)
    result = await lucy_mcp.call_tool("memory_recall", {"query": "deploy fridays"})
    assert not result.is_error
    assert "Never deploy on Fridays." in result.content[0].text


async def test_what_the_mcp_host_proposes_the_sdk_sees(lucy_server_client, lucy_mcp, fake_lucy_server):
    result = await lucy_mcp.call_tool("memory_propose", RULE)
    assert not result.is_error
    [pending] = (await fake_lucy_server.admin.proposals(status="pending"))["items"]
    status = await lucy_server_client.proposal_status(json.dumps({"proposal_id": pending["id"]}))
    assert status.proposal.content == "Never deploy on Fridays."


async def test_a_429_with_retry_after_3_is_retried_without_sleeping(lucy_client, fake_lucy):
    await fake_lucy.admin.add_fault("propose", 429, retry_after=3)
    proposed = await lucy_client.propose(json.dumps(RULE))
    assert proposed.attempts == 2
    assert lucy_client.waits == [3.0]
    journal = await fake_lucy.admin.requests(operation="propose")
    assert [row["status"] for row in journal] == [429, 201]
