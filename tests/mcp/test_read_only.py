"""A server configured with memory:read only still lists the three tools; propose and status refuse
before anything reaches the fake."""

from __future__ import annotations

import pytest

from tests.mcp.helpers import MODES, READ_ONLY, connect, one_line, proposal_args, text_of

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", MODES)
async def test_a_read_only_server_lists_three_tools_and_refuses_propose_and_status_locally(
    fake, admin, mode
) -> None:
    async with connect(fake, mode=mode, permissions=READ_ONLY) as client:
        listed = [tool.name for tool in (await client.list_tools()).tools]
        proposed = await client.call_tool("memory_propose", proposal_args())
        status = await client.call_tool(
            "memory_proposal_status", {"proposal_id": "prop_AAAAAAAAAAAAAAAAAAAAAA"}
        )
        assert await admin.requests() == []
        recalled = await client.call_tool("memory_recall", {"query": "database"})
    assert listed == ["memory_recall", "memory_propose", "memory_proposal_status"]
    for result, operation in ((proposed, "propose"), (status, "proposal_status")):
        assert result.is_error is True
        assert result.structured_content is None
        text = one_line(text_of(result))
        assert text.startswith(f"Error permission_denied (refused before sending) from {operation}")
        assert "memory:propose" in text
        assert "Nothing was sent or charged" in text
        assert "LUCY_MEMORY_PERMISSIONS" in text
    assert recalled.is_error is False
    assert [row["operation"] for row in await admin.requests()] == ["recall"]
    assert [row["operation"] for row in await admin.ledger(account="acct_dev")] == ["recall"]
