"""A user's synchronous tests: plain ``def`` tests with ``lucy_sync_client`` and ``sync_admin``."""

import json

import pytest

LYON = {"kind": "fact", "content": "The office is in Lyon.", "scope": {"kind": "user", "id": "usr_dev"}}


def test_a_memory_is_recalled_only_after_a_reviewer_approves_it(lucy_sync_client, fake_lucy_server):
    proposed = lucy_sync_client.propose(json.dumps(LYON))
    assert lucy_sync_client.recall('{"query": "office"}').memories == ()
    fake_lucy_server.sync_admin.approve(proposed.proposal.id)
    recalled = lucy_sync_client.recall('{"query": "office"}')
    assert [m.content for m in recalled.memories] == ["The office is in Lyon."]


def test_a_rejected_proposal_is_never_recalled(lucy_sync_client, fake_lucy_server):
    proposed = lucy_sync_client.propose(json.dumps(LYON))
    fake_lucy_server.sync_admin.reject(proposed.proposal.id, "we moved")
    status = lucy_sync_client.proposal_status(json.dumps({"proposal_id": proposed.proposal.id}))
    assert status.proposal.status == "rejected"
    assert lucy_sync_client.recall('{"query": "office"}').memories == ()


def test_a_pending_proposal_expires_on_the_fake_clock(lucy_sync_client, fake_lucy_server):
    admin = fake_lucy_server.sync_admin
    proposed = lucy_sync_client.propose(json.dumps(LYON))
    ttl = admin.policy()["proposal_ttl_seconds"]
    admin.advance_clock(ttl + 1)
    status = lucy_sync_client.proposal_status(json.dumps({"proposal_id": proposed.proposal.id}))
    assert status.proposal.status == "expired"


@pytest.mark.parametrize("n", range(4))
def test_each_test_starts_from_the_seed(lucy_sync_client, fake_lucy_server, n):
    assert fake_lucy_server.sync_admin.requests() == []
    assert lucy_sync_client.recall('{"query": "anything"}').credits.remaining == 999
    assert [row["operation"] for row in fake_lucy_server.sync_admin.requests()] == ["recall"]
