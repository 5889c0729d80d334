"""Snapshots (SPEC 3.9): the whole state out of one fake and into a fresh one, answering the same."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest

from fake_lucy.domain import snapshot as snapshots
from fake_lucy.domain.errors import DomainError
from fake_lucy.testing import AdminError, InProcessFake
from tests.contract_check import response_hook
from tests.helpers import PROJECT, V1, proposal_body, propose, recall, status

pytestmark = pytest.mark.anyio

HOOKS: dict[str, Any] = {"response": [response_hook]}
ADMIN_TOKEN = "fake-admin-token"


async def _lifecycle(fake: InProcessFake) -> dict[str, Any]:
    """Proposals in every state, a memory with two versions, a deleted one, a secret refused, a
    recall that stamped access times, a balance set by hand; returns what the test replays."""
    admin = fake.admin
    await admin.set_clock(now="2031-05-01T09:00:00.000000Z", frozen=True)
    created = await admin.create_credential(scopes=[PROJECT], credits=50, account="acct_snap")
    async with fake.client(created["token"]) as api:
        first = await propose(api, proposal_body("We use PostgreSQL 16.", topic="database"), key="k-first")
        await admin.approve(first.json()["proposal"]["id"])
        upsert_body = proposal_body("We use PostgreSQL 17.", topic="database")
        upsert = await propose(api, upsert_body, key="k-upsert")
        loser = await propose(api, proposal_body("We use MySQL.", topic="database"), key="k-loser")
        await admin.approve(upsert.json()["proposal"]["id"])
        rejected = await propose(api, proposal_body("Tabs, not spaces."), key="k-rejected")
        await admin.reject(rejected.json()["proposal"]["id"], "style is settled")
        expiring = await propose(api, proposal_body("Deploy on Fridays."), key="k-expiring")
        await admin.expire(expiring.json()["proposal"]["id"])
        doomed = await propose(api, proposal_body("Queue with SQS.", topic="queue"), key="k-doomed")
        approved = await admin.approve(doomed.json()["proposal"]["id"])
        await admin.delete_memory(approved["memory"]["id"])
        pending = await propose(api, proposal_body("Cache with Redis."), key="k-pending")
        secret = await propose(api, proposal_body("the key is AKIAIOSFODNN7EXAMPLE"), key="k-secret")
        assert (await recall(api, "postgresql")).status_code == 200
    await admin.set_balance("acct_snap", 40)
    await admin.advance_clock(60)
    proposals = [
        r.json()["proposal"]["id"] for r in (first, upsert, loser, rejected, expiring, doomed, pending)
    ]
    assert secret.json()["proposal"]["status"] == "rejected"
    return {"token": created["token"], "proposals": proposals, "replay": ("k-upsert", upsert_body)}


async def _answers(fake: InProcessFake, token: str, story: dict[str, Any]) -> list[tuple[int, bytes]]:
    """Recall, every status and a replayed propose; each body with its fresh request id blanked."""
    answers: list[httpx.Response] = []
    async with fake.client(token, event_hooks=HOOKS) as api:
        answers.append(await recall(api, "postgresql database"))
        answers.extend([await status(api, proposal_id) for proposal_id in story["proposals"]])
        key, body = story["replay"]
        replay = await propose(api, body, key=key)
        assert replay.headers["idempotent-replayed"] == "true"
        answers.append(replay)
    return [
        (r.status_code, r.content.replace(r.headers["lucy-request-id"].encode(), b"req_<this>"))
        for r in answers
    ]


async def _snapshot(fake: InProcessFake, **params: Any) -> dict[str, Any]:
    async with fake.client(ADMIN_TOKEN, event_hooks=HOOKS) as http:
        response = await http.get("/_fake/snapshot", params=params)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def _put(fake: InProcessFake, document: Any) -> httpx.Response:
    async with fake.client(ADMIN_TOKEN, event_hooks=HOOKS) as http:
        return await http.put("/_fake/snapshot", json=document)


async def test_a_snapshot_put_into_a_fresh_fake_answers_byte_for_byte_the_same(fake, tmp_path) -> None:
    story = await _lifecycle(fake)
    snapshot = await _snapshot(fake)
    expected = await _answers(fake, story["token"], story)
    async with InProcessFake.start(tmp_path) as fresh:
        restored = await _put(fresh, snapshot)
        assert (restored.status_code, restored.json()) == (200, {"restored": True})
        # the state itself is the same document (the clock is frozen at the same instant)
        assert await _snapshot(fresh) == snapshot
        assert await _answers(fresh, story["token"], story) == expected


async def test_a_snapshot_holds_every_state_and_no_token(fake) -> None:
    story = await _lifecycle(fake)
    snapshot = await _snapshot(fake, include_journal="true")
    text = json.dumps(snapshot)
    for secret in (story["token"], fake.dev_token, ADMIN_TOKEN):
        assert secret not in text
    [tenant] = snapshot["tenants"]
    assert {p["status"] for p in tenant["proposals"]} == {
        "pending",
        "approved",
        "rejected",
        "expired",
        "superseded",
    }
    database = next(m for m in tenant["memories"] if m["versions"][0]["topic"] == "database")
    assert [(v["version"], v["status"]) for v in database["versions"]] == [(1, "superseded"), (2, "active")]
    assert len(tenant["idempotency_records"]) == 8
    assert [entry["operation"] for entry in tenant["ledger"]][-1] == "admin_set"
    assert len(tenant["journal"]) == 9
    assert "journal" not in (await _snapshot(fake))["tenants"][0]


async def test_a_snapshot_of_a_newer_format_version_is_refused_and_changes_nothing(fake) -> None:
    await _lifecycle(fake)
    before = await _snapshot(fake)
    newer = {**copy.deepcopy(before), "version": snapshots.VERSION + 1, "something_new": {}}
    response = await _put(fake, newer)
    assert response.status_code == 422
    assert [e["pointer"] for e in response.json()["details"]["errors"]] == ["/version"]
    assert await _snapshot(fake) == before


async def test_a_malformed_snapshot_is_a_422_with_pointers_and_changes_nothing(fake) -> None:
    await _lifecycle(fake)
    before = await _snapshot(fake)
    broken = copy.deepcopy(before)
    broken["tenants"][0]["credentials"][0]["token_sha256"] = "not-a-hash"
    del broken["tenants"][0]["ledger"]
    response = await _put(fake, broken)
    assert response.status_code == 422
    pointers = {e["pointer"] for e in response.json()["details"]["errors"]}
    assert pointers == {"/tenants/0/credentials/0/token_sha256", "/tenants/0/ledger"}
    assert await _snapshot(fake) == before


async def test_a_snapshot_whose_references_break_is_a_422_with_their_pointers(fake) -> None:
    await _lifecycle(fake)
    before = await _snapshot(fake)
    broken = copy.deepcopy(before)
    broken["tenants"][0]["credentials"][0]["account"] = "acct_nowhere"
    broken["tenants"][0]["memories"][0]["version"] = 7
    response = await _put(fake, broken)
    assert response.status_code == 422
    assert [e["pointer"] for e in response.json()["details"]["errors"]] == [
        "/tenants/0/credentials/0/account",
        "/tenants/0/memories/0/version",
    ]
    assert await _snapshot(fake) == before


def _dev(document: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    [(t, tenant)] = [
        (t, tenant) for t, tenant in enumerate(document["tenants"]) if tenant["id"] == "tenant_dev"
    ]
    return t, tenant


def _done_without_status(document: dict[str, Any]) -> str:
    t, dev = _dev(document)
    i = [r["state"] for r in dev["idempotency_records"]].index("done")
    dev["idempotency_records"][i]["status"] = None
    return f"/tenants/{t}/idempotency_records/{i}/status"


def _first_credential_without_credits(document: dict[str, Any]) -> str:
    [made] = [t for t in document["tenants"] if t.get("first_credential_id")]
    made["initial_credits"] = None
    return f"/tenants/{document['tenants'].index(made)}/initial_credits"


def _thirtieth_of_february(document: dict[str, Any]) -> str:
    t, dev = _dev(document)
    dev["proposals"][0]["expires_at"] = "2039-02-30T00:00:00.000000Z"
    return f"/tenants/{t}/proposals/0/expires_at"


def _frozen_before_1970(document: dict[str, Any]) -> str:
    document["clocks"]["server"] = {"now": "0001-01-01T00:00:00.000000Z", "frozen": True, "offset_us": 0}
    return "/clocks/server/now"


def _replay_body_not_json(document: dict[str, Any]) -> str:
    t, dev = _dev(document)
    i = [r["state"] for r in dev["idempotency_records"]].index("done")
    dev["idempotency_records"][i]["body"] = "<<<not json>>>"
    return f"/tenants/{t}/idempotency_records/{i}/body"


def _replay_body_no_propose_answer(document: dict[str, Any]) -> str:
    t, dev = _dev(document)
    i = [r["state"] for r in dev["idempotency_records"]].index("done")
    dev["idempotency_records"][i]["body"] = '{"proposal": {"id": 1}}'
    return f"/tenants/{t}/idempotency_records/{i}/body"


def _approved_without_memory(document: dict[str, Any]) -> str:
    t, dev = _dev(document)
    i = [p["status"] for p in dev["proposals"]].index("approved")
    dev["proposals"][i]["memory"] = None
    return f"/tenants/{t}/proposals/{i}/memory"


def _approved_memory_nowhere(document: dict[str, Any]) -> str:
    t, dev = _dev(document)
    i = [p["status"] for p in dev["proposals"]].index("approved")
    dev["proposals"][i]["memory"] = {"id": "mem_nowhere_0000000000000", "version": 1}
    return f"/tenants/{t}/proposals/{i}/memory"


def _pending_with_memory(document: dict[str, Any]) -> str:
    t, dev = _dev(document)
    approved = [p["status"] for p in dev["proposals"]].index("approved")
    i = [p["status"] for p in dev["proposals"]].index("pending")
    dev["proposals"][i]["memory"] = dev["proposals"][approved]["memory"]
    return f"/tenants/{t}/proposals/{i}/memory"


def _replaces_nothing(document: dict[str, Any]) -> str:
    t, dev = _dev(document)
    i = [p["status"] for p in dev["proposals"]].index("pending")
    dev["proposals"][i]["replaces"] = {"memory_id": "mem_nowhere_0000000000000", "version": 1}
    return f"/tenants/{t}/proposals/{i}/replaces"


def _replaces_a_version_never_made(document: dict[str, Any]) -> str:
    t, dev = _dev(document)
    i = [p["status"] for p in dev["proposals"]].index("pending")
    memory = dev["memories"][0]
    dev["proposals"][i]["replaces"] = {"memory_id": memory["id"], "version": len(memory["versions"]) + 1}
    return f"/tenants/{t}/proposals/{i}/replaces"


def _two_versions(document: dict[str, Any]) -> tuple[int, int, dict[str, Any]]:
    t, dev = _dev(document)
    [(m, memory)] = [(m, memory) for m, memory in enumerate(dev["memories"]) if len(memory["versions"]) == 2]
    return t, m, memory


def _current_not_the_last_version(document: dict[str, Any]) -> str:
    """The next replacement would make version 2 again: a 500 at approval."""
    t, m, memory = _two_versions(document)
    memory["version"] = 1
    memory["versions"][0]["status"], memory["versions"][1]["status"] = "active", "superseded"
    return f"/tenants/{t}/memories/{m}/version"


def _two_active_versions(document: dict[str, Any]) -> str:
    t, m, memory = _two_versions(document)
    memory["versions"][0]["status"] = "active"
    return f"/tenants/{t}/memories/{m}/versions/0/status"


def _current_version_superseded(document: dict[str, Any]) -> str:
    """Neither recallable, deletable nor restorable, and yet replaceable."""
    t, m, memory = _two_versions(document)
    memory["versions"][1]["status"] = "superseded"
    return f"/tenants/{t}/memories/{m}/versions/1/status"


def _replaces_a_memory_in_another_scope(document: dict[str, Any]) -> str:
    """Its approval would put the memory's next version in front of the proposal's scope."""
    t, dev = _dev(document)
    i = [p["status"] for p in dev["proposals"]].index("pending")
    _, _, memory = _two_versions(document)
    dev["proposals"][i]["replaces"] = {"memory_id": memory["id"], "version": 2}
    dev["proposals"][i]["scope"] = {"kind": "workspace", "id": "ws_elsewhere"}
    return f"/tenants/{t}/proposals/{i}/scope"


def _ledger_request_twice(document: dict[str, Any]) -> str:
    t, dev = _dev(document)
    dev["ledger"][1]["request_id"] = dev["ledger"][0]["request_id"]
    return f"/tenants/{t}/ledger/1/request_id"


def _ledger_of_another_tenant(document: dict[str, Any]) -> str:
    t, dev = _dev(document)
    dev["ledger"][0]["tenant"] = "tenant-made"
    return f"/tenants/{t}/ledger/0/tenant"


def _journal_row_of_another_tenant(document: dict[str, Any]) -> str:
    t, dev = _dev(document)
    dev["journal"][2]["tenant"] = "tenant-made"
    return f"/tenants/{t}/journal/2/tenant"


def _charge_of_two_credits(document: dict[str, Any]) -> str:
    t, dev = _dev(document)
    i = 0  # an account's first row: no row before it for its balance to follow from
    assert dev["ledger"][i]["operation"] != "admin_set"
    dev["ledger"][i]["amount"] = -2
    return f"/tenants/{t}/ledger/{i}/amount"


def _ledger_balance_out_of_step(document: dict[str, Any]) -> str:
    t, dev = _dev(document)
    account = dev["ledger"][-1]["account"]
    [i] = [i for i, entry in enumerate(dev["ledger"]) if entry["account"] == account][:1]
    dev["ledger"][i]["balance_after"] += 1  # the account's next row no longer follows from its first
    following = next(j for j, entry in enumerate(dev["ledger"]) if entry["account"] == account and j > i)
    return f"/tenants/{t}/ledger/{following}/balance_after"


def _balance_not_the_ledgers(document: dict[str, Any]) -> str:
    t, dev = _dev(document)
    [a] = [a for a, account in enumerate(dev["accounts"]) if account["id"] == "acct_snap"]
    dev["accounts"][a]["balance"] = 39
    return f"/tenants/{t}/accounts/{a}/balance"


@pytest.mark.parametrize(
    "break_it",
    [
        _done_without_status,
        _first_credential_without_credits,
        _thirtieth_of_february,
        _frozen_before_1970,
        _replay_body_not_json,
        _replay_body_no_propose_answer,
        _approved_without_memory,
        _approved_memory_nowhere,
        _pending_with_memory,
        _replaces_nothing,
        _replaces_a_version_never_made,
        _current_not_the_last_version,
        _two_active_versions,
        _current_version_superseded,
        _replaces_a_memory_in_another_scope,
        _ledger_request_twice,
        _ledger_of_another_tenant,
        _journal_row_of_another_tenant,
        _charge_of_two_credits,
        _ledger_balance_out_of_step,
        _balance_not_the_ledgers,
    ],
)
async def test_a_snapshot_the_schema_takes_but_the_fake_could_not_serve_is_a_422(fake, break_it) -> None:
    """Each of these was restored, and a later replay, tenant reset or console page answered 500 (or
    the fake wrote times it could not read back, or its ledger showed balances no account had)."""
    await _lifecycle(fake)
    await fake.admin.create_tenant("tenant-made")
    before = await _snapshot(fake, include_journal="true")
    broken = copy.deepcopy(before)
    pointer = break_it(broken)
    response = await _put(fake, broken)
    assert response.status_code == 422, response.text
    assert [e["pointer"] for e in response.json()["details"]["errors"]] == [pointer]
    assert await _snapshot(fake, include_journal="true") == before


async def test_a_restored_snapshot_is_a_server_wide_reset_event(fake) -> None:
    document = await _snapshot(fake)
    async with fake.admin.watch() as stream:
        assert (await _put(fake, document)).status_code == 200
        restored = await stream.wait_for("reset", timeout=10)
    assert (restored.tenant, restored.data) == (None, {"snapshot": True})


async def test_a_snapshot_repeating_an_id_is_a_422_with_its_pointer_and_changes_nothing(fake) -> None:
    await _lifecycle(fake)
    before = await _snapshot(fake)
    broken = copy.deepcopy(before)
    proposals = broken["tenants"][0]["proposals"]
    proposals[1]["id"] = proposals[0]["id"]
    response = await _put(fake, broken)
    assert response.status_code == 422
    assert [e["pointer"] for e in response.json()["details"]["errors"]] == ["/tenants/0/proposals/1/id"]
    assert await _snapshot(fake) == before


async def test_a_snapshot_repeating_a_token_hash_is_a_422_at_that_hash_and_changes_nothing(fake) -> None:
    """Two tenants with one admin token, two credentials with one token: the pointer names the hash
    (it named the item's id, which repeats nothing)."""
    async with fake.client(ADMIN_TOKEN) as http:
        for name in ("tenant-a", "tenant-b"):
            assert (await http.post("/_fake/tenants", json={"tenant": name})).status_code == 201
    await _lifecycle(fake)
    before = await _snapshot(fake)
    places = {tenant["id"]: i for i, tenant in enumerate(before["tenants"])}
    a, b = places["tenant-a"], places["tenant-b"]
    shared_admin = copy.deepcopy(before)
    shared_admin["tenants"][b]["admin_token_sha256"] = shared_admin["tenants"][a]["admin_token_sha256"]
    shared_token = copy.deepcopy(before)
    credentials = shared_token["tenants"][a]["credentials"] + shared_token["tenants"][b]["credentials"]
    credentials[-1]["token_sha256"] = credentials[0]["token_sha256"]
    for broken, pointer in (
        (shared_admin, f"/tenants/{max(a, b)}/admin_token_sha256"),
        (
            shared_token,
            f"/tenants/{b}/credentials/{len(shared_token['tenants'][b]['credentials']) - 1}/token_sha256",
        ),
    ):
        response = await _put(fake, broken)
        assert response.status_code == 422
        assert [e["pointer"] for e in response.json()["details"]["errors"]] == [pointer]
    assert await _snapshot(fake) == before


async def test_a_restored_snapshot_brings_back_a_revoked_token_as_it_was(fake) -> None:
    snapshot = await _snapshot(fake)
    created = await fake.admin.create_credential(scopes=[PROJECT])
    async with fake.client(created["token"]) as api:
        assert (await recall(api, "x")).status_code == 200
    assert (await _put(fake, snapshot)).status_code == 200
    async with fake.client(created["token"]) as api:
        assert (await recall(api, "x")).status_code == 401  # the credential did not exist then
    async with fake.client() as api:
        assert (await api.post(V1 + "/recall", json={"query": "x"})).status_code == 200
    with pytest.raises(AdminError) as refused:
        await fake.admin.call("PUT", "/snapshot", {"format": "fake-lucy-snapshot"})
    assert refused.value.status == 422


async def test_a_tenants_snapshot_restores_that_tenant_only(fake) -> None:
    alice = await fake.admin.create_credential("tenant_alice", scopes=[PROJECT], account="acct_alice")
    bob = await fake.admin.create_credential("tenant_bob", scopes=[PROJECT], account="acct_bob")
    for token in (alice["token"], bob["token"]):
        async with fake.client(token) as api:
            assert (await propose(api, proposal_body("Before the snapshot."))).status_code == 201
    with fake.fake.db.write() as conn:
        alice_only = snapshots.export_state(conn, fake_version="test", tenant="tenant_alice")
    assert [tenant["id"] for tenant in alice_only["tenants"]] == ["tenant_alice"]
    for token in (alice["token"], bob["token"]):
        async with fake.client(token) as api:
            assert (await propose(api, proposal_body("After the snapshot."))).status_code == 201
    with fake.fake.db.write() as conn:
        snapshots.restore_state(conn, alice_only, tenant="tenant_alice")
    contents = {
        tenant: sorted(p["content"] for p in (await fake.admin.proposals(tenant=tenant))["items"])
        for tenant in ("tenant_alice", "tenant_bob")
    }
    assert contents == {
        "tenant_alice": ["Before the snapshot."],
        "tenant_bob": ["After the snapshot.", "Before the snapshot."],
    }
    with pytest.raises(DomainError) as other, fake.fake.db.write() as conn:
        snapshots.restore_state(conn, alice_only, tenant="tenant_bob")
    assert other.value.details == {
        "errors": [{"pointer": "/tenants/0/id", "detail": "names another tenant than the one restored"}]
    }


async def test_a_snapshot_holds_each_proposals_effective_status(fake, api) -> None:
    """A proposal past its expiry that nobody read since is expired in the snapshot (and so in a
    failure dump), as every API answers it, never the pending still stored."""
    await fake.admin.set_policy("tenant_dev", proposal_ttl_seconds=3600)
    made = (await propose(api, proposal_body("Left to expire."))).json()["proposal"]
    await fake.admin.advance_clock(3 * 3600)
    document = await _snapshot(fake)
    [exported] = [p for t in document["tenants"] for p in t["proposals"] if p["id"] == made["id"]]
    assert (exported["status"], exported["reason"]) == ("expired", "expired")
    assert exported["decided_at"] == made["expires_at"]


async def test_a_snapshot_listing_a_tenant_twice_says_so_first(fake) -> None:
    """Its rows repeat the first copy's request ids too; the first pointer names the tenant."""
    await _lifecycle(fake)
    before = await _snapshot(fake)
    broken = copy.deepcopy(before)
    _, dev = _dev(broken)
    broken["tenants"].append(copy.deepcopy(dev))
    response = await _put(fake, broken)
    assert response.status_code == 422
    first = response.json()["details"]["errors"][0]
    repeated = len(broken["tenants"]) - 1
    assert first == {
        "pointer": f"/tenants/{repeated}/id",
        "detail": f"repeats the tenant of /tenants/{broken['tenants'].index(dev)}",
    }
    assert await _snapshot(fake) == before


async def test_a_whole_number_written_as_a_float_is_that_integer_a_newer_version_included(fake) -> None:
    """JSON has one kind of number (SPEC 1.1): ``3.0`` is 3. A newer format written so is refused as
    ``3`` is, and a memory's version ``1.0`` restores as 1 (it was a 500)."""
    await _lifecycle(fake)
    before = await _snapshot(fake)
    newer = {**copy.deepcopy(before), "version": float(snapshots.VERSION + 1)}
    refused = await _put(fake, newer)
    assert refused.status_code == 422
    assert [e["pointer"] for e in refused.json()["details"]["errors"]] == ["/version"]
    floats = copy.deepcopy(before)
    tenant = floats["tenants"][0]
    for memory in tenant["memories"]:
        memory["version"] = float(memory["version"])
        for version in memory["versions"]:
            version["version"] = float(version["version"])
    tenant["accounts"][0]["balance"] = float(tenant["accounts"][0]["balance"])
    restored = await _put(fake, floats)
    assert restored.status_code == 200, restored.text
    assert await _snapshot(fake) == before


async def test_a_tenant_restore_naming_another_tenants_request_is_refused_so_the_whole_state_restores(
    fake,
) -> None:
    """Request ids are server-wide: a restore of the whole state refuses a ledger or journal row
    repeating one, so a tenant's restore must not bring one in, or the server's own snapshot could
    never be restored (``--export-on-exit`` then ``--import`` would fail)."""
    await fake.admin.set_clock(frozen=True)  # the snapshots compared say the same time
    created = [await fake.admin.create_tenant(name) for name in ("tenant_one", "tenant_two")]
    for tenant in created:
        async with fake.client(tenant["credential"]["token"]) as api:
            assert (await recall(api, "anything")).status_code == 200
    snaps = []
    for tenant in created:
        async with fake.client(tenant["admin_token"], event_hooks=HOOKS) as http:
            answer = await http.get("/_fake/snapshot", params={"include_journal": "true"})
            snaps.append(answer.json())
    theirs = snaps[1]["tenants"][0]
    mine = copy.deepcopy(snaps[0])
    mine["tenants"][0]["ledger"][-1]["request_id"] = theirs["ledger"][-1]["request_id"]
    mine["tenants"][0]["journal"][-1]["request_id"] = theirs["journal"][-1]["request_id"]
    async with fake.client(created[0]["admin_token"], event_hooks=HOOKS) as http:
        refused = await http.put("/_fake/snapshot", json=mine)
        assert refused.status_code == 422
        assert [e["pointer"] for e in refused.json()["details"]["errors"]] == [
            f"/tenants/0/ledger/{len(mine['tenants'][0]['ledger']) - 1}/request_id",
            f"/tenants/0/journal/{len(mine['tenants'][0]['journal']) - 1}/request_id",
        ]
        assert (await http.get("/_fake/snapshot", params={"include_journal": "true"})).json() == snaps[0]
    whole = await _snapshot(fake, include_journal="true")
    assert (await _put(fake, whole)).status_code == 200


async def test_with_an_id_seed_a_tenant_restored_from_another_run_goes_on_making_new_ids(tmp_path) -> None:
    """``--id-seed`` gives the n-th id; a tenant snapshot of an earlier run of the same seed holds ids
    this run would make next. They are passed over, not given twice (a propose was a 500)."""
    saved: dict[str, Any] = {}
    token = ""  # the first run's credential: the restored tenant's
    for run in ("first", "second"):
        fake = InProcessFake(tmp_path / f"{run}.sqlite3", id_seed=7)
        try:
            created = await fake.admin.create_tenant("tenant_kept")
            async with fake.client(created["admin_token"], event_hooks=HOOKS) as http:
                if run == "first":
                    token = created["credential"]["token"]
                    async with fake.client(token) as api:
                        made = await propose(api, proposal_body("Made in the first run."))
                    assert made.status_code == 201
                    saved = (await http.get("/_fake/snapshot")).json()
                    continue
                assert (await http.put("/_fake/snapshot", json=saved)).status_code == 200
            async with fake.client(token) as api:
                again = await propose(api, proposal_body("Made in the second run."))
            assert again.status_code == 201, again.text
            ids = {p["id"] for p in (await fake.admin.proposals(tenant="tenant_kept"))["items"]}
            assert len(ids) == 2
        finally:
            await fake.aclose()
