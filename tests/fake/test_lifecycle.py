"""SPEC 1.3: every transition of the proposal state machine, through the API."""

from __future__ import annotations

import pytest

from fake_lucy.testing import AdminError
from tests.helpers import PROJECT, WORKSPACE, approved_memory, proposal_body, propose, recall, status

pytestmark = pytest.mark.anyio

WEEK = 7 * 24 * 3600


async def _pending(api, **fields) -> dict:
    response = await propose(api, proposal_body(**fields))
    assert response.status_code == 201, response.text
    proposal = response.json()["proposal"]
    assert proposal["status"] == "pending"
    return proposal


async def test_a_pending_proposal_is_not_recallable_until_approved(api, admin) -> None:
    proposal = await _pending(api, content="Retries use exponential backoff.")
    assert (await recall(api, "exponential backoff")).json()["memories"] == []
    approved = await admin.approve(proposal["id"])
    memories = (await recall(api, "exponential backoff")).json()["memories"]
    assert [(m["id"], m["version"]) for m in memories] == [(approved["memory"]["id"], 1)]
    assert approved["decided_at"] == approved["updated_at"]


async def test_reject_is_final_and_records_the_reviewer_reason(api, admin) -> None:
    proposal = await _pending(api)
    rejected = await admin.reject(proposal["id"], "not a decision we made")
    assert (rejected["status"], rejected["reason"]) == ("rejected", "rejected_by_reviewer")
    assert rejected["reason_detail"] == "not a decision we made"
    assert rejected["memory"] is None


@pytest.mark.parametrize("action", ["approve", "reject", "expire"])
@pytest.mark.parametrize("final", ["approve", "reject", "expire"])
async def test_every_move_out_of_a_final_state_is_invalid_transition(api, admin, final, action) -> None:
    proposal = await _pending(api, content=f"final state {final} then {action}")
    await getattr(admin, final)(proposal["id"])
    with pytest.raises(AdminError) as caught:
        await getattr(admin, action)(proposal["id"])
    assert caught.value.status == 409
    assert caught.value.code == "invalid_transition"


async def test_a_superseded_proposal_cannot_be_approved(api, admin) -> None:
    memory = await approved_memory(api, admin, "Use tabs.", topic="indentation")
    first = await _pending(api, content="Use four spaces.", topic="indentation")
    second = await _pending(api, content="Use two spaces.", topic="indentation")
    await admin.approve(first["id"])
    with pytest.raises(AdminError) as caught:
        await admin.approve(second["id"])
    assert caught.value.code == "invalid_transition"
    assert memory["memory"]["id"] == first["replaces"]["memory_id"]


async def test_expiry_comes_from_advancing_the_clock_and_persists(api, admin) -> None:
    proposal = await _pending(api)
    await admin.advance_clock(WEEK - 1)
    assert (await status(api, proposal["id"])).json()["proposal"]["status"] == "pending"
    await admin.advance_clock(1)
    expired = (await status(api, proposal["id"])).json()["proposal"]
    assert (expired["status"], expired["reason"]) == ("expired", "expired")
    assert expired["decided_at"] == expired["updated_at"] == expired["expires_at"]
    listed = await admin.proposals(status="expired")
    assert [p["id"] for p in listed["items"]] == [proposal["id"]]
    with pytest.raises(AdminError) as caught:
        await admin.approve(proposal["id"])
    assert caught.value.code == "invalid_transition"


async def test_the_expiry_sweep_runs_only_once_the_tenants_earliest_pending_expiry_is_due(
    fake, api, admin
) -> None:
    sweeps: list[str] = []
    fake.fake.db.conn.set_trace_callback(
        lambda sql: sweeps.append(sql) if sql.startswith("UPDATE proposals SET status = 'expired'") else None
    )
    try:
        await admin.set_policy(proposal_ttl_seconds=60)
        soon = await _pending(api, content="expires in a minute")
        await admin.set_policy(proposal_ttl_seconds=120)
        later = await _pending(api, content="expires in two minutes")
        await admin.advance_clock(59)
        assert (await status(api, soon["id"])).json()["proposal"]["status"] == "pending"
        assert sweeps == [], "nothing was due"
        await admin.advance_clock(1)
        assert (await status(api, later["id"])).json()["proposal"]["status"] == "pending"
        assert len(sweeps) == 1, "the earliest expiry came: one sweep"
        assert (await status(api, soon["id"])).json()["proposal"]["status"] == "expired"
        assert len(sweeps) == 1, "the next pending expiry is a minute away"
        await admin.advance_clock(60)
        assert (await status(api, later["id"])).json()["proposal"]["status"] == "expired"
        assert len(sweeps) == 2
    finally:
        fake.fake.db.conn.set_trace_callback(None)


async def test_a_tenant_ttl_change_applies_to_new_proposals_only(api, admin) -> None:
    old = await _pending(api, content="old ttl")
    await admin.set_policy(proposal_ttl_seconds=60)
    new = await _pending(api, content="new ttl")
    await admin.advance_clock(60)
    assert (await status(api, new["id"])).json()["proposal"]["status"] == "expired"
    assert (await status(api, old["id"])).json()["proposal"]["status"] == "pending"


async def test_topic_upsert_replaces_the_active_memory_of_that_topic(api, admin) -> None:
    first = await approved_memory(api, admin, "Releases ship on Mondays.", topic="release-day")
    memory_id = first["memory"]["id"]
    upsert = await _pending(api, content="Releases ship on Thursdays.", topic="release-day")
    assert upsert["replaces"] == {"memory_id": memory_id, "version": 1}
    # Until approval the old version stays active and recallable.
    before = (await recall(api, "releases ship")).json()["memories"]
    assert [(m["id"], m["version"], m["content"]) for m in before] == [
        (memory_id, 1, "Releases ship on Mondays.")
    ]
    approved = await admin.approve(upsert["id"])
    assert approved["memory"] == {"id": memory_id, "version": 2}
    after = (await recall(api, "releases ship")).json()["memories"]
    assert [(m["id"], m["version"], m["content"]) for m in after] == [
        (memory_id, 2, "Releases ship on Thursdays.")
    ]


async def test_replacement_supersedes_the_prior_version_and_keeps_history(api, admin) -> None:
    first = await approved_memory(api, admin, "The API uses REST.", topic="api-style")
    memory_id = first["memory"]["id"]
    replacement = await _pending(
        api, content="The API uses gRPC.", replaces={"memory_id": memory_id, "version": 1}
    )
    assert replacement["topic"] == "api-style"  # omitted topic is inherited
    await admin.approve(replacement["id"])
    history = (await admin.memories(scope_kind="project", scope_id="project_example"))["items"]
    versions = [(m["id"], m["version"], m["status"], m["content"]) for m in history]
    assert versions == [
        (memory_id, 1, "superseded", "The API uses REST."),
        (memory_id, 2, "active", "The API uses gRPC."),
    ]
    current = (await admin.memories(include_history=False))["items"]
    assert [(m["id"], m["version"]) for m in current] == [(memory_id, 2)]
    assert history[0]["created_at"] == history[1]["created_at"]


async def test_an_explicit_null_topic_clears_it(api, admin) -> None:
    first = await approved_memory(api, admin, "Lint with ruff.", topic="linting")
    memory_id = first["memory"]["id"]
    cleared = await _pending(
        api, content="Lint with ruff and mypy.", topic=None, replaces={"memory_id": memory_id, "version": 1}
    )
    assert cleared["topic"] is None
    await admin.approve(cleared["id"])
    found = (await recall(api, "ruff mypy")).json()["memories"]
    assert (found[0]["topic"], found[0]["version"]) == (None, 2)


@pytest.mark.parametrize("version", [1, 1.0])
async def test_replacing_an_older_version_is_a_version_conflict_with_details(api, admin, version) -> None:
    first = await approved_memory(api, admin, "Cache for 5 minutes.", topic="cache-ttl")
    memory_id = first["memory"]["id"]
    await admin.approve((await _pending(api, content="Cache for 10 minutes.", topic="cache-ttl"))["id"])
    stale = await propose(
        api, proposal_body("Cache for 1 minute.", replaces={"memory_id": memory_id, "version": version})
    )
    assert stale.status_code == 409
    problem = stale.json()
    assert problem["code"] == "version_conflict"
    assert problem["details"] == {"memory_id": memory_id, "expected_version": 1, "current_version": 2}
    assert b'"expected_version":1,' in stale.content  # 1.0 counts as the integer 1 (SPEC 1.1)


async def test_replacing_a_version_the_memory_never_had_says_so(api, admin) -> None:
    first = await approved_memory(api, admin, "Retry twice.", topic="retries")
    memory_id = first["memory"]["id"]
    ahead = await propose(
        api, proposal_body("Retry thrice.", replaces={"memory_id": memory_id, "version": 3})
    )
    problem = ahead.json()
    assert (ahead.status_code, problem["code"]) == (409, "version_conflict")
    # the 3 given is not repeated in the detail (no detail echoes an input value, SPEC 1.5)
    never_had = "the replacement names a version the memory never had (its active version is 1)"
    assert problem["detail"] == never_had
    assert problem["details"] == {"memory_id": memory_id, "expected_version": 3, "current_version": 1}


async def test_replacing_an_unknown_or_deleted_memory_is_memory_not_found(api, admin) -> None:
    unknown = await propose(api, proposal_body(replaces={"memory_id": "mem_" + "x" * 22, "version": 1}))
    assert (unknown.status_code, unknown.json()["code"]) == (404, "memory_not_found")
    first = await approved_memory(api, admin, "Temporary rule.")
    await admin.delete_memory(first["memory"]["id"])
    deleted = await propose(api, proposal_body(replaces={"memory_id": first["memory"]["id"], "version": 1}))
    assert (deleted.status_code, deleted.json()["code"]) == (404, "memory_not_found")


async def test_a_replacement_must_keep_the_scope_of_the_memory(api, admin) -> None:
    first = await approved_memory(api, admin, "Scope bound rule.")
    moved = await propose(
        api,
        proposal_body(
            "Scope bound rule, moved.",
            scope=WORKSPACE,
            replaces={"memory_id": first["memory"]["id"], "version": 1},
        ),
    )
    assert moved.status_code == 422
    assert moved.json()["details"]["errors"] == [
        {"pointer": "/scope", "detail": "must equal the scope of the replaced memory"}
    ]


async def test_taking_another_memorys_topic_is_a_topic_conflict_at_propose_and_approval(api, admin) -> None:
    a = await approved_memory(api, admin, "Memory A", topic="topic-a")
    b = await approved_memory(api, admin, "Memory B", topic="topic-b")
    clash = await propose(
        api,
        proposal_body(
            "Memory A renamed", topic="topic-b", replaces={"memory_id": a["memory"]["id"], "version": 1}
        ),
    )
    assert (clash.status_code, clash.json()["code"]) == (409, "topic_conflict")
    # Checked again at approval: the topic is free at propose time, taken before approval.
    rename = await _pending(
        api,
        content="Memory A moves",
        topic="topic-c",
        replaces={"memory_id": a["memory"]["id"], "version": 1},
    )
    take_c = await _pending(
        api,
        content="Memory B moves",
        topic="topic-c",
        replaces={"memory_id": b["memory"]["id"], "version": 1},
    )
    await admin.approve(take_c["id"])
    with pytest.raises(AdminError) as caught:
        await admin.approve(rename["id"])
    assert (caught.value.status, caught.value.code) == (409, "topic_conflict")
    assert (await status(api, rename["id"])).json()["proposal"]["status"] == "pending"


async def test_competing_pending_proposals_are_superseded_by_the_winner(api, admin) -> None:
    first = await approved_memory(api, admin, "Deploy with Helm.", topic="deploy-tool")
    memory_id = first["memory"]["id"]
    winner = await _pending(api, content="Deploy with Kustomize.", topic="deploy-tool")
    loser = await _pending(
        api, content="Deploy with Pulumi.", replaces={"memory_id": memory_id, "version": 1}
    )
    unrelated = await _pending(api, content="Unrelated pending proposal.")
    await admin.approve(winner["id"])
    lost = (await status(api, loser["id"])).json()["proposal"]
    assert (lost["status"], lost["reason"]) == ("superseded", "superseded")
    assert winner["id"] in lost["reason_detail"]
    assert (await status(api, unrelated["id"])).json()["proposal"]["status"] == "pending"


async def test_competing_new_memories_with_one_topic_supersede_each_other(api, admin) -> None:
    one = await _pending(api, content="Style guide is PEP 8.", topic="style-guide")
    two = await _pending(api, content="Style guide is Google's.", topic="style-guide")
    await admin.approve(two["id"])
    assert (await status(api, one["id"])).json()["proposal"]["status"] == "superseded"


async def test_delete_supersedes_pending_proposals_and_restore_brings_it_back(api, admin) -> None:
    first = await approved_memory(api, admin, "Backups run nightly.", topic="backups")
    memory_id = first["memory"]["id"]
    pending = await _pending(api, content="Backups run hourly.", topic="backups")
    deleted = await admin.delete_memory(memory_id)
    assert deleted["status"] == "deleted"
    assert (await recall(api, "backups nightly")).json()["memories"] == []
    gone = (await status(api, pending["id"])).json()["proposal"]
    assert (gone["status"], gone["reason"]) == ("superseded", "target_deleted")
    restored = await admin.restore_memory(memory_id)
    assert restored["status"] == "active"
    assert [m["id"] for m in (await recall(api, "backups nightly")).json()["memories"]] == [memory_id]


async def test_deleting_or_restoring_twice_is_409_with_the_current_status(api, admin) -> None:
    memory_id = (await approved_memory(api, admin, "Logs are kept 30 days."))["memory"]["id"]
    with pytest.raises(AdminError) as restored_active:
        await admin.restore_memory(memory_id)
    assert restored_active.value.problem["details"] == {"status": "active"}
    await admin.delete_memory(memory_id)
    with pytest.raises(AdminError) as deleted_twice:
        await admin.delete_memory(memory_id)
    assert (deleted_twice.value.status, deleted_twice.value.problem["code"]) == (409, "invalid_transition")
    assert deleted_twice.value.problem["details"] == {"status": "deleted"}


async def test_delete_leaves_an_already_expired_proposal_expired(api, admin) -> None:
    first = await approved_memory(api, admin, "Deploys happen on Tuesdays.", topic="deploy-day")
    pending = await _pending(api, content="Deploys happen on Thursdays.", topic="deploy-day")
    await admin.advance_clock(8 * 86_400)  # past the 7-day proposal TTL; nothing has read it since
    await admin.delete_memory(first["memory"]["id"])
    expired = (await status(api, pending["id"])).json()["proposal"]
    assert (expired["status"], expired["reason"]) == ("expired", "expired")
    assert expired["decided_at"] == expired["expires_at"]


async def test_restore_refuses_when_the_topic_was_taken_meanwhile(api, admin) -> None:
    first = await approved_memory(api, admin, "On-call rotates weekly.", topic="on-call")
    await admin.delete_memory(first["memory"]["id"])
    await approved_memory(api, admin, "On-call rotates daily.", topic="on-call")
    with pytest.raises(AdminError) as caught:
        await admin.restore_memory(first["memory"]["id"])
    assert (caught.value.status, caught.value.code) == (409, "topic_conflict")


@pytest.mark.parametrize(
    ("policy", "kind", "expected"),
    [
        ("off", "decision", "pending"),
        ("all", "decision", "approved"),
        (["rule", "fact"], "rule", "approved"),
        (["rule", "fact"], "decision", "pending"),
    ],
)
async def test_auto_memory_policy_approves_in_the_creating_transaction(
    api, admin, policy, kind, expected
) -> None:
    await admin.set_policy(auto_approve=policy)
    response = await propose(api, proposal_body("Auto policy check.", kind=kind))
    proposal = response.json()["proposal"]
    assert proposal["status"] == expected
    recalled = (await recall(api, "auto policy")).json()["memories"]
    assert len(recalled) == (1 if expected == "approved" else 0)


async def test_auto_memory_never_approves_a_secret(api, admin) -> None:
    await admin.set_policy(auto_approve="all")
    response = await propose(api, proposal_body("deploy key AKIAIOSFODNN7EXAMPLE"))
    proposal = response.json()["proposal"]
    assert (proposal["status"], proposal["reason"]) == ("rejected", "secret_detected")


async def test_the_scope_of_a_proposal_is_echoed_and_versions_are_per_memory(api, admin) -> None:
    a = await approved_memory(api, admin, "Alpha", scope=PROJECT)
    b = await approved_memory(api, admin, "Beta", scope=WORKSPACE)
    assert a["scope"] == PROJECT
    assert b["scope"] == WORKSPACE
    assert a["memory"]["id"] != b["memory"]["id"]
