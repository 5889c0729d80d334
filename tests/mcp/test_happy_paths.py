"""Each tool's happy path, in both protocol eras: structuredContent is the v1 body, the text says what
happened, and the proposing client's name becomes the proposal's ``source``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
from jsonschema import Draft7Validator
from mcp_types import CLIENT_INFO_META_KEY

from lucy_memory._contract import schema_validator
from lucy_memory.mcp.server import client_name
from lucy_memory.mcp.tools import tool_schemas
from tests.mcp.helpers import MODES, connect, one_line, proposal_args, text_of

pytestmark = pytest.mark.anyio


def _v1_body(result: Any, schema: str, tool: str) -> dict[str, Any]:
    assert result.is_error is False, text_of(result)
    body: dict[str, Any] = result.structured_content
    assert schema_validator(schema).errors(body) == []
    assert Draft7Validator(tool_schemas()[tool]["output"]).is_valid(body)
    return body


@pytest.mark.parametrize("mode", MODES)
async def test_propose_status_and_recall_answer_the_v1_bodies_with_plain_text(fake, admin, mode) -> None:
    async with connect(fake, mode=mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        proposed = await client.call_tool("memory_propose", proposal_args(topic="main-database"))
        body = _v1_body(proposed, "propose-response.schema.json", "memory_propose")
        proposal_id = body["proposal"]["id"]
        assert body["proposal"]["status"] == "pending"
        assert one_line(text_of(proposed)).startswith(f"Not saved yet: proposal {proposal_id} is pending")

        await admin.approve(proposal_id)
        status = await client.call_tool("memory_proposal_status", {"proposal_id": proposal_id})
        status_body = _v1_body(status, "proposal-status-response.schema.json", "memory_proposal_status")
        memory = status_body["proposal"]["memory"]
        assert status_body["proposal"]["status"] == "approved"
        assert text_of(status).startswith(
            f"Saved: proposal {proposal_id} is approved as memory {memory['id']} version 1"
        )

        recalled = await client.call_tool("memory_recall", {"query": "Which database?", "limit": 3})
        recall_body = _v1_body(recalled, "recall-response.schema.json", "memory_recall")
    assert [m["id"] for m in recall_body["memories"]] == [memory["id"]]
    text = text_of(recalled)
    assert text.startswith("1 approved memory recalled (1 credit charged, 997 remaining")
    assert "We use PostgreSQL 16 for the main database." in text
    assert f"id={memory['id']} version=1" in text


async def test_propose_says_saved_when_the_tenant_auto_approves(fake, admin) -> None:
    await admin.set_policy(auto_approve="all")
    async with connect(fake) as client:
        result = await client.call_tool("memory_propose", proposal_args())
    body = result.structured_content
    assert body is not None
    assert body["proposal"]["status"] == "approved"
    assert text_of(result).startswith(f"Saved: proposal {body['proposal']['id']} is approved as memory")


async def test_status_of_a_rejected_proposal_says_not_saved_and_final(fake, admin) -> None:
    async with connect(fake) as client:
        proposed = await client.call_tool("memory_propose", proposal_args())
        proposal_id = proposed.structured_content["proposal"]["id"]  # type: ignore[index]
        await admin.reject(proposal_id, "duplicate of an existing rule")
        status = await client.call_tool("memory_proposal_status", {"proposal_id": proposal_id})
    text = text_of(status)
    assert text.startswith(f"Not saved: proposal {proposal_id} is rejected (reason: rejected_by_reviewer)")
    assert "duplicate of an existing rule" in text


async def test_an_empty_recall_says_so_and_is_still_a_v1_body(fake) -> None:
    async with connect(fake, mode="2026-07-28") as client:
        result = await client.call_tool("memory_recall", {"query": "nothing matches this"})
    assert result.structured_content is not None
    assert result.structured_content["memories"] == []
    assert text_of(result).startswith("0 approved memories recalled (1 credit charged")


@pytest.mark.parametrize("mode", MODES)
async def test_the_source_is_the_hosts_client_name(fake, mode) -> None:
    async with connect(fake, mode=mode, client_name="Claude Desktop ✓") as client:
        result = await client.call_tool("memory_propose", proposal_args())
    assert result.structured_content is not None
    assert result.structured_content["proposal"]["source"] == "Claude Desktop ✓"


async def test_a_client_name_in_the_request_metadata_wins_over_the_initialize_one(fake) -> None:
    meta: Any = {CLIENT_INFO_META_KEY: {"name": "per-request-host", "version": "2"}}
    async with connect(fake, mode="legacy", client_name="initialize-host") as client:
        result = await client.call_tool("memory_propose", proposal_args(), meta=meta)
    assert result.structured_content is not None
    assert result.structured_content["proposal"]["source"] == "per-request-host"


@pytest.mark.parametrize(
    ("host", "source"),
    [
        ("Host\u0085Agent", "HostAgent"),
        ("Host\ud800 Agent", "Host Agent"),
        # a name that looks like a secret: not sent (Lucy would refuse it), the server's own instead
        ("agent password=hunter2hunter2", "lucy-memory-mcp"),
    ],
)
async def test_a_host_name_with_characters_the_server_refuses_is_cleaned(fake, host, source) -> None:
    # C1 controls (NEL) and lone surrogates would make every call a 400 invalid_header.
    async with connect(fake, mode="legacy", client_name=host) as client:
        result = await client.call_tool("memory_propose", proposal_args())
    assert result.is_error is False, text_of(result)
    assert result.structured_content is not None
    assert result.structured_content["proposal"]["source"] == source


async def test_the_status_of_an_approved_proposal_claims_nothing_about_the_memorys_current_state(
    fake, admin
) -> None:
    async with connect(fake) as client:
        first = await client.call_tool("memory_propose", proposal_args(topic="main-db"))
        first_id = first.structured_content["proposal"]["id"]  # type: ignore[index]
        await admin.approve(first_id)
        second = await client.call_tool(
            "memory_propose", proposal_args(content="We use PostgreSQL 17 now.", topic="main-db")
        )
        await admin.approve(second.structured_content["proposal"]["id"])  # type: ignore[index]
        status = await client.call_tool("memory_proposal_status", {"proposal_id": first_id})
    text = text_of(status)
    assert text.startswith(f"Saved: proposal {first_id} is approved as memory")
    assert "version 1." in text  # version 1 is superseded now: no claim that it is active or recallable
    assert "recallable" not in text
    assert "active" not in text


def test_without_any_client_name_the_source_is_lucy_memory_mcp() -> None:
    bare = SimpleNamespace(meta=None, session=SimpleNamespace(client_params=None))
    assert client_name(cast(Any, bare)) == "lucy-memory-mcp"
    blank = SimpleNamespace(meta={CLIENT_INFO_META_KEY: {"name": "\x00 "}}, session=bare.session)
    assert client_name(cast(Any, blank)) == "lucy-memory-mcp"


async def test_an_unknown_tool_is_an_error_result_and_sends_nothing(fake, admin) -> None:
    async with connect(fake) as client:
        result = await client.call_tool("memory_delete", {"id": "mem_x"})
        shaped_like_a_key = await client.call_tool("AKIAIOSFODNN7EXAMPLE", {})
    assert result.is_error is True
    assert result.structured_content is None
    assert "unknown_tool" in text_of(result)
    assert "memory_delete" not in text_of(result)  # the host's text is never echoed
    assert "AKIAIOSFODNN7EXAMPLE" not in text_of(shaped_like_a_key)
    assert "memory_recall, memory_propose, memory_proposal_status" in text_of(result)
    assert await admin.requests() == []


async def test_the_structured_content_is_the_response_body_as_the_fake_sent_it(fake, admin) -> None:
    async with connect(fake) as client:
        result = await client.call_tool("memory_propose", proposal_args())
    assert result.structured_content is not None
    journal = await admin.requests(operation="propose")
    assert [row["request_id"] for row in journal] == [result.structured_content["request_id"]]
    assert result.structured_content["credits"] == {"charged": 1, "remaining": 999}
