"""memory_propose without an idempotency_key derives one from the arguments: a host repeating an
identical call gets a replay (one proposal, one credit), and the key comes back every time."""

from __future__ import annotations

import pytest

from lucy_memory._contract import canonical_sha256
from lucy_memory.mcp.refusals import RefusedKeys
from tests.mcp.helpers import MODES, connect, one_line, proposal_args, text_of
from tests.sdk.helpers import DEV_TOKEN

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", MODES)
async def test_an_identical_propose_without_a_key_is_a_replay_one_proposal_one_credit(
    fake, admin, mode
) -> None:
    arguments = proposal_args(topic="main-database", importance=8)
    derived = canonical_sha256(arguments)
    async with connect(fake, mode=mode) as client:
        first = await client.call_tool("memory_propose", arguments)
        second = await client.call_tool("memory_propose", dict(reversed(list(arguments.items()))))
    assert first.structured_content is not None
    assert second.structured_content is not None
    assert first.structured_content["idempotency_key"] == derived
    assert second.structured_content["idempotency_key"] == derived
    assert second.structured_content["proposal"] == first.structured_content["proposal"]

    assert len((await admin.proposals())["items"]) == 1
    ledger = await admin.ledger(account="acct_dev")
    assert [row["operation"] for row in ledger] == ["propose"]
    journal = await admin.requests(operation="propose")
    assert [(row["replayed"], row["charged"]) for row in journal] == [(False, True), (True, False)]

    first_text, second_text = one_line(text_of(first)), one_line(text_of(second))
    assert "This is a replay" not in first_text
    assert "This is a replay of an earlier identical proposal" in second_text
    assert "nothing was charged" in second_text
    assert "Credits: 0 credits charged, 999 remaining" in second_text
    for text in (first_text, second_text):
        assert f"idempotency_key: {derived} (derived from the arguments)" in text
        assert "An identical proposal (same arguments and idempotency_key) within 24 h replays" in text
        assert text.startswith("Not saved yet:")


async def test_different_arguments_make_a_new_proposal_with_a_new_key(fake, admin) -> None:
    async with connect(fake) as client:
        first = await client.call_tool("memory_propose", proposal_args("We use PostgreSQL 16."))
        second = await client.call_tool("memory_propose", proposal_args("We use PostgreSQL 17."))
    assert first.structured_content is not None
    assert second.structured_content is not None
    assert first.structured_content["idempotency_key"] != second.structured_content["idempotency_key"]
    assert first.structured_content["proposal"]["id"] != second.structured_content["proposal"]["id"]
    assert "This is a replay" not in text_of(second)
    assert len((await admin.proposals())["items"]) == 2
    assert [row["operation"] for row in await admin.ledger(account="acct_dev")] == ["propose", "propose"]


async def test_a_given_key_is_used_as_given_and_returned(fake, admin) -> None:
    async with connect(fake, mode="2026-07-28") as client:
        result = await client.call_tool(
            "memory_propose", {**proposal_args(), "idempotency_key": "host-key-1"}
        )
    assert result.structured_content is not None
    assert result.structured_content["idempotency_key"] == "host-key-1"
    assert "idempotency_key: host-key-1 (as given)" in one_line(text_of(result))
    assert [row["idempotency_key"] for row in await admin.requests(operation="propose")] == ["host-key-1"]


async def test_a_retry_that_finds_what_its_first_attempt_saved_says_one_proposal_one_credit(
    fake, admin
) -> None:
    """The first answer is a 503 after Lucy saved (and charged) the proposal; the retry with the same
    key gets the replay. That call made the proposal and cost one credit: the text must not call it
    an earlier proposal that cost nothing."""
    await admin.add_fault("propose", 503, phase="after_commit")
    async with connect(fake) as client:
        result = await client.call_tool("memory_propose", proposal_args(topic="main-database"))
    text = one_line(text_of(result))
    assert "one proposal was created and one credit was charged, by that first attempt" in text
    assert "Credits: 1 credit charged (by the first attempt), 999 remaining" in text
    assert "nothing was charged" not in text
    assert "This is a replay of an earlier identical proposal" not in text
    assert [row["operation"] for row in await admin.ledger(account="acct_dev")] == ["propose"]
    journal = await admin.requests(operation="propose")
    assert [(row["status"], row["charged"], row["replayed"]) for row in journal] == [
        (503, True, False),
        (201, False, True),
    ]


async def test_the_same_proposal_after_a_refusal_the_agent_was_told_to_act_on_is_no_finding(
    fake, admin
) -> None:
    """After 402 insufficient_credits the agent is told to have the balance topped up; the same
    arguments then are a new request, not a retry of the refused one: a key of its own, so the fake
    sees no propose repeated after a 4xx (propose_retry_not_retryable)."""
    arguments = proposal_args("Proposed again once the credits were there.")
    async with connect(fake) as client:
        await admin.set_balance("acct_dev", 0)
        refused = await client.call_tool("memory_propose", arguments)
        assert refused.is_error
        assert "insufficient_credits" in text_of(refused)
        await admin.set_balance("acct_dev", 10)
        saved = await client.call_tool("memory_propose", arguments)
        again = await client.call_tool("memory_propose", arguments)  # and an identical call replays
    assert not saved.is_error
    assert saved.structured_content is not None
    assert again.structured_content is not None
    assert saved.structured_content["idempotency_key"] != canonical_sha256(arguments)
    assert again.structured_content["idempotency_key"] == saved.structured_content["idempotency_key"]
    assert "This is a replay" in text_of(again)
    assert await admin.findings() == []


async def test_a_server_restarted_after_a_refusal_sends_the_same_arguments_under_a_key_of_their_own(
    fake, admin, tmp_path
) -> None:
    """The refusal outlives the server process (a host restarts its servers): the next server, on the
    same state folder, service and token, does not repeat the refused key (the fake would report
    propose_retry_not_retryable), and a server of another token is not affected."""
    arguments = proposal_args("Proposed again by a restarted server.")
    await admin.set_balance("acct_dev", 0)
    async with connect(fake, refused=RefusedKeys(tmp_path, origin=fake.base_url, token=DEV_TOKEN)) as first:
        refused = await first.call_tool("memory_propose", arguments)
    assert "insufficient_credits" in text_of(refused)
    await admin.set_balance("acct_dev", 10)
    restarted = RefusedKeys(tmp_path, origin=fake.base_url, token=DEV_TOKEN)
    async with connect(fake, refused=restarted) as second:
        saved = await second.call_tool("memory_propose", arguments)
    assert not saved.is_error, text_of(saved)
    assert saved.structured_content is not None
    assert saved.structured_content["idempotency_key"] == canonical_sha256(arguments) + "-1"
    assert await admin.findings() == []
    other = RefusedKeys(tmp_path, origin=fake.base_url, token="another-token-of-the-same-user")
    assert other.get(canonical_sha256(arguments)) == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == ["refused-keys.json"]
    assert DEV_TOKEN not in (tmp_path / "refused-keys.json").read_text()
    assert oct((tmp_path / "refused-keys.json").stat().st_mode & 0o777) == "0o600"


async def test_a_proposal_that_would_replace_a_memory_says_which_and_that_it_stays_active(
    fake, admin
) -> None:
    async with connect(fake) as client:
        first = await client.call_tool(
            "memory_propose", proposal_args("We use PostgreSQL 16.", topic="database")
        )
        assert first.structured_content is not None
        approved = await admin.approve(first.structured_content["proposal"]["id"])
        upsert = await client.call_tool(
            "memory_propose", proposal_args("We use PostgreSQL 17.", topic="database")
        )
    memory = approved["memory"]
    text = one_line(text_of(upsert))
    assert text.startswith("Not saved yet:")
    assert (
        f"It would replace memory {memory['id']} version {memory['version']}, which stays active"
        " (and recallable) until then." in text
    )
    assert "would replace" not in one_line(text_of(first))


async def test_the_same_replacement_after_a_topic_conflict_was_resolved_is_no_finding(fake, admin) -> None:
    """409 topic_conflict is a refusal for good too (only 409 idempotency_key_in_use is not): once a
    reviewer resolves the conflict, the same arguments go under a key of their own."""
    async with connect(fake) as client:
        a = await client.call_tool("memory_propose", proposal_args("Cache for 5 minutes.", topic="cache-ttl"))
        b = await client.call_tool("memory_propose", proposal_args("Queue with SQS.", topic="queue"))
        assert a.structured_content is not None
        assert b.structured_content is not None
        memory_a = (await admin.approve(a.structured_content["proposal"]["id"]))["memory"]
        memory_b = (await admin.approve(b.structured_content["proposal"]["id"]))["memory"]
        replacement = proposal_args(
            "Cache for 10 minutes.",
            topic="queue",  # held by B: a conflict
            replaces={"memory_id": memory_a["id"], "version": memory_a["version"]},
        )
        conflict = await client.call_tool("memory_propose", replacement)
        assert conflict.is_error
        assert "topic_conflict" in text_of(conflict)
        await admin.delete_memory(memory_b["id"])
        accepted = await client.call_tool("memory_propose", replacement)
    assert not accepted.is_error, text_of(accepted)
    assert await admin.findings() == []
