"""SPEC 3.6: creating, resetting and deleting a tenant; a clock per tenant."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fake_lucy.domain import clock as clock_module
from fake_lucy.domain.clock import format_us, parse_timestamp
from fake_lucy.store.schema import fts_table
from fake_lucy.testing import AdminError, FakeAdmin, InProcessFake
from lucy_memory._contract import load_contract
from tests.conftest import HOOKS
from tests.helpers import PROJECT, WORKSPACE, proposal_body, propose, recall, status

pytestmark = pytest.mark.anyio

DEFAULTS = load_contract("fake-control")["defaults"]
HOUR = 3600
DAY = 24 * HOUR


@contextlib.asynccontextmanager
async def as_tenant_admin(fake: InProcessFake, created: dict[str, Any]) -> AsyncIterator[FakeAdmin]:
    async with fake.client(created["admin_token"], event_hooks=HOOKS) as http:
        yield FakeAdmin(http, tenant=created["tenant"])


def index_tables(fake: InProcessFake, tenant: str) -> list[str]:
    """The FTS5 table of ``tenant``'s full-text index, if it exists (its shadow tables aside)."""
    rows = sqlite3.connect(fake.fake.settings.database).execute(
        "SELECT name FROM sqlite_master WHERE name = ?", (fts_table(tenant),)
    )
    return [row[0] for row in rows]


def seconds_between(later: str, earlier: str) -> float:
    return (parse_timestamp(later) - parse_timestamp(earlier)) / 1e6


# -- create ------------------------------------------------------------------------------------


async def test_a_new_tenant_is_shaped_like_the_dev_seed_with_its_own_admin_token(fake, admin) -> None:
    created = await admin.create_tenant("ci-job-1", credits=25)
    credential = created["credential"]
    assert created["tenant"] == "ci-job-1"
    assert credential["user"] == DEFAULTS["user"]
    assert credential["permissions"] == DEFAULTS["permissions"]
    assert credential["scopes"] == DEFAULTS["scopes"]
    assert credential["account"].startswith("acct_")
    assert credential["account"] != DEFAULTS["account"]
    async with fake.client(credential["token"]) as client:
        for scope in (PROJECT, WORKSPACE, {"kind": "user", "id": "usr_dev"}):
            response = await propose(client, proposal_body("Scope ids are per tenant.", scope=scope))
            assert response.status_code == 201, response.text
        assert response.headers["Lucy-Credits-Remaining"] == "22"
    assert await admin.policy("ci-job-1") == DEFAULTS["policy"]
    assert (await admin.proposals(tenant="tenant_dev"))["items"] == []  # the dev tenant saw nothing


async def test_a_tenant_without_a_name_gets_a_fresh_id_and_the_default_credits(fake, admin) -> None:
    first, second = await admin.create_tenant(), await admin.create_tenant()
    assert first["tenant"] != second["tenant"]
    assert first["credential"]["account"] != second["credential"]["account"]
    async with fake.client(first["credential"]["token"]) as client:
        answer = await recall(client, "anything")
    assert answer.headers["Lucy-Credits-Remaining"] == str(DEFAULTS["credits"] - 1)


async def test_an_existing_tenant_id_is_409_tenant_conflict(admin) -> None:
    await admin.create_tenant("taken")
    for name in ("taken", "tenant_dev"):
        with pytest.raises(AdminError) as refused:
            await admin.create_tenant(name)
        assert (refused.value.status, refused.value.code) == (409, "tenant_conflict")


async def test_the_same_idempotency_key_and_scope_ids_in_two_tenants_are_independent(fake, admin) -> None:
    one, two = await admin.create_tenant(), await admin.create_tenant()
    async with fake.client(one["credential"]["token"]) as a, fake.client(two["credential"]["token"]) as b:
        first = await propose(a, proposal_body("Tenant one's text."), key="shared-key")
        second = await propose(b, proposal_body("Tenant two's text."), key="shared-key")
        assert (first.status_code, second.status_code) == (201, 201)
        assert "Idempotent-Replayed" not in second.headers
        assert (await status(b, first.json()["proposal"]["id"])).status_code == 404


# -- reset -------------------------------------------------------------------------------------


async def test_a_tenant_reset_returns_it_to_the_state_its_creation_made(fake, admin) -> None:
    created = await admin.create_tenant("resettable", credits=40)
    token, credential_id = created["credential"]["token"], created["credential"]["credential_id"]
    account = created["credential"]["account"]
    async with as_tenant_admin(fake, created) as own, fake.client(token) as client:
        proposal = await propose(client, proposal_body("Kept until the reset."))
        await own.approve(proposal.json()["proposal"]["id"])
        await propose(client, proposal_body("Pending until the reset."), key="the-key")
        extra = await own.create_credential(permissions=("memory:read",))
        await own.set_policy(auto_approve="all", rate_limit_per_minute=1000)
        await own.add_fault("recall", 503, count=3)
        await own.set_clock(frozen=True)
        await own.advance_clock(DAY)
        await own.revoke(credential_id)  # even its first credential: the reset gives it back
        result = await own.reset()
        assert result["reset"] is True
        assert result["took_ms"] >= 0
        assert await own.proposals() == {"items": [], "next_cursor": None}
        assert await own.memories() == {"items": [], "next_cursor": None}
        assert await own.requests() == []
        assert await own.ledger() == []
        assert await own.faults() == []
        assert await own.policy() == DEFAULTS["policy"]
        own_clock, server_clock = await own.clock(), await admin.clock()
        assert own_clock["frozen"] is False
        assert abs(seconds_between(own_clock["now"], server_clock["now"])) < 5
        found = await recall(client, "reset")
        assert found.status_code == 200
        assert found.json()["memories"] == []
        assert found.headers["Lucy-Credits-Remaining"] == "39"
        again = await propose(client, proposal_body("A new text under the old key."), key="the-key")
        assert again.status_code == 201
        assert "Idempotent-Replayed" not in again.headers
        assert again.json()["proposal"]["status"] == "pending"  # the policy is the default again
    async with fake.client(extra["token"]) as gone:
        assert (await recall(gone, "x")).status_code == 401
    assert [row["account"] for row in await admin.ledger(account=account)] == [account, account]


async def test_a_server_reset_removes_every_created_tenant_and_its_tokens(fake, admin) -> None:
    created = await admin.create_tenant("short-lived")
    await admin.reset()
    async with fake.client(created["credential"]["token"]) as client:
        assert (await recall(client, "x")).status_code == 401
    async with fake.client(created["admin_token"]) as control:
        assert (await control.get("/_fake/clock")).status_code == 401
    assert (await admin.create_tenant("short-lived"))["tenant"] == "short-lived"


# -- delete ------------------------------------------------------------------------------------


async def test_a_deleted_tenants_tokens_are_401_at_once_and_nothing_of_it_is_left(fake, admin) -> None:
    created = await admin.create_tenant("doomed")
    token = created["credential"]["token"]
    async with fake.client(token) as client, as_tenant_admin(fake, created) as own:
        proposal = await propose(client, proposal_body("Doomed tenant's memory about zebras."))
        await own.approve(proposal.json()["proposal"]["id"])
        assert len((await recall(client, "zebras")).json()["memories"]) == 1
        assert index_tables(fake, "doomed") == [fts_table("doomed")]
        await own.delete_tenant()  # a tenant admin may delete its own tenant
        refused = await recall(client, "zebras")
        assert (refused.status_code, refused.json()["code"]) == (401, "unauthenticated")
        with pytest.raises(AdminError) as control:
            await own.clock()
        assert control.value.status == 401
    assert (await admin.memories(tenant="doomed"))["items"] == []
    assert (await admin.proposals(tenant="doomed"))["items"] == []
    assert [row for row in await admin.requests() if row["tenant"] == "doomed"] == []
    assert await admin.ledger(account=created["credential"]["account"]) == []
    with pytest.raises(AdminError) as missing:
        await admin.delete_tenant("doomed")
    assert missing.value.status == 404
    assert index_tables(fake, "doomed") == []  # its full-text index is dropped with it
    fresh = await admin.create_tenant("doomed")  # the name is free again, and starts empty
    async with fake.client(fresh["credential"]["token"]) as client:
        assert (await recall(client, "zebras")).json()["memories"] == []
    assert index_tables(fake, "doomed") == [fts_table("doomed")]


# -- list --------------------------------------------------------------------------------------


async def test_the_listing_shows_each_tenant_when_it_was_made_and_what_it_holds(fake, admin) -> None:
    await admin.set_clock(now="2030-01-15T09:00:00.000000Z", frozen=True)
    created = await admin.create_tenant("ci-job-7")
    await admin.advance_clock(HOUR)
    await admin.create_tenant("ci-job-8")
    async with fake.client(created["credential"]["token"]) as client, as_tenant_admin(fake, created) as own:
        kept = await propose(client, proposal_body("A memory of job seven."))
        await own.approve(kept.json()["proposal"]["id"])
        await propose(client, proposal_body("Waits for review."))
        await propose(client, proposal_body("Expires before the listing."))
        await own.create_credential(permissions=("memory:read",))
        revoked = await own.create_credential(permissions=("memory:read",))
        await own.revoke(revoked["credential_id"])
        expiring = (await own.proposals(status="pending"))["items"][-1]["id"]
        await own.expire(expiring)
    listed = await admin.tenants()
    assert [item["tenant"] for item in listed] == [DEFAULTS["tenant"], "ci-job-7", "ci-job-8"]
    dev, seven, eight = listed
    assert dev["tenant_admin"] is False  # the seed's tenant has no tenant admin token
    assert seven == {
        "tenant": "ci-job-7",
        "created_at": "2030-01-15T09:00:00.000000Z",
        "tenant_admin": True,
        "credentials": 2,  # the first and the read-only one; the revoked one is not counted
        "memories": 1,
        "pending_proposals": 1,
    }
    assert eight["created_at"] == "2030-01-15T10:00:00.000000Z"
    assert (eight["credentials"], eight["memories"], eight["pending_proposals"]) == (1, 0, 0)
    async with as_tenant_admin(fake, created) as own:
        assert await own.tenants() == [seven]  # a tenant admin sees its own tenant alone
    await admin.delete_tenant("ci-job-7")
    assert [item["tenant"] for item in await admin.tenants()] == [DEFAULTS["tenant"], "ci-job-8"]


async def test_a_pending_proposal_past_its_expiry_is_not_counted_as_pending(fake, admin) -> None:
    created = await admin.create_tenant("expiring")
    async with fake.client(created["credential"]["token"]) as client:
        await propose(client, proposal_body("Nobody reviews this one."))
    assert [t["pending_proposals"] for t in await admin.tenants() if t["tenant"] == "expiring"] == [1]
    await admin.advance_clock(8 * DAY)
    assert [t["pending_proposals"] for t in await admin.tenants() if t["tenant"] == "expiring"] == [0]


async def test_the_listing_pages_with_limit_and_cursor(fake, admin) -> None:
    for n in range(5):
        await admin.create_tenant(f"paged-{n}")
    seen: list[str] = []
    cursor = None
    while True:
        page = await admin.call("GET", "/tenants", limit=2, cursor=cursor)
        assert len(page["items"]) <= 2
        seen += [item["tenant"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [DEFAULTS["tenant"], *(f"paged-{n}" for n in range(5))]
    with pytest.raises(AdminError) as refused:
        await admin.call("GET", "/tenants", limit=0)
    assert (refused.value.status, refused.value.code) == (422, "invalid_request")
    with pytest.raises(AdminError) as foreign:
        await admin.call("GET", "/tenants", cursor="bm90LWEtY3Vyc29y")
    assert (foreign.value.status, foreign.value.code) == (422, "invalid_request")


async def test_a_tenant_restoring_its_own_snapshot_keeps_its_place_in_the_listing(fake, admin) -> None:
    made = [await admin.create_tenant(f"placed-{n}") for n in range(3)]
    first = await admin.call("GET", "/tenants", limit=2)
    async with as_tenant_admin(fake, made[0]) as own:
        await own.call("PUT", "/snapshot", json=await own.call("GET", "/snapshot"))
    rest = await admin.call("GET", "/tenants", cursor=first["next_cursor"])
    names = [item["tenant"] for item in first["items"] + rest["items"]]
    assert names == [DEFAULTS["tenant"], "placed-0", "placed-1", "placed-2"]  # once each, in order


async def test_a_tenant_restoring_its_own_snapshot_keeps_when_it_was_made(fake, admin) -> None:
    await admin.set_clock(now="2030-01-15T09:00:00.000000Z", frozen=True)
    created = await admin.create_tenant("restorer")
    await admin.advance_clock(DAY)
    async with as_tenant_admin(fake, created) as own:
        await own.call("PUT", "/snapshot", json=await own.call("GET", "/snapshot"))
        assert [item["created_at"] for item in await own.tenants()] == ["2030-01-15T09:00:00.000000Z"]
    whole = await admin.call("GET", "/snapshot")
    listed = await admin.tenants()
    assert [item["tenant"] for item in listed] == ["tenant_dev", "restorer"]  # made in that order
    await admin.advance_clock(HOUR)
    await admin.call("PUT", "/snapshot", json=whole)
    # a whole restore keeps when each tenant was made, and so their order (and what prune finds)
    assert await admin.tenants() == listed
    # a version 1 snapshot does not say: its tenants are made at the restore, in its order
    older = {**whole, "version": 1, "tenants": [{**t, "created_at": None} for t in whole["tenants"]]}
    for item in older["tenants"]:
        del item["created_at"]
    await admin.call("PUT", "/snapshot", json=older)
    restored_now = (await admin.clock())["now"]
    assert [(item["tenant"], item["created_at"]) for item in await admin.tenants()] == [
        ("tenant_dev", restored_now),
        ("restorer", restored_now),
    ]


async def test_a_running_tenant_clock_past_the_end_of_the_range_never_moves_back_on_a_server_advance(
    fake, admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A running clock that its admin set to the end of the range runs on past it; a server advance
    then keeps its offset (it used to pull it back to the end of the range). Its snapshot, with an
    offset of ~7,000 years, restores."""
    real = [clock_module.real_us()]
    monkeypatch.setattr(clock_module, "real_us", lambda: real[0])
    created = await admin.create_tenant()
    async with as_tenant_admin(fake, created) as own:
        await own.set_clock(now="9000-01-01T00:00:00.000000Z")
        real[0] += 2 * 10**6  # two seconds later: its clock has run past the end
        assert (await own.clock())["now"] == "9000-01-01T00:00:02.000000Z"
        await admin.advance_clock(1)
        assert (await own.clock())["now"] == "9000-01-01T00:00:02.000000Z"
        document = await own.call("GET", "/snapshot")
        await own.call("PUT", "/snapshot", json=document)
        assert (await own.clock())["now"] == "9000-01-01T00:00:02.000000Z"


# -- clocks ------------------------------------------------------------------------------------


async def test_a_tenant_admins_clock_calls_move_only_its_tenant(fake, admin) -> None:
    one, two = await admin.create_tenant(), await admin.create_tenant()
    async with as_tenant_admin(fake, one) as first, as_tenant_admin(fake, two) as second:
        server_before = await admin.clock()
        frozen = await first.set_clock(frozen=True)
        moved = await first.advance_clock(10 * DAY)
        assert moved["frozen"] is True
        assert seconds_between(moved["now"], frozen["now"]) == 10 * DAY
        assert (await second.clock())["frozen"] is False
        assert seconds_between(moved["now"], (await second.clock())["now"]) > 9 * DAY
        assert seconds_between(moved["now"], (await admin.clock())["now"]) > 9 * DAY
        assert (await admin.clock())["frozen"] is server_before["frozen"]
        with pytest.raises(AdminError) as backwards:
            await first.set_clock(now=frozen["now"])
        assert (backwards.value.status, backwards.value.code) == (409, "clock_regression")
        assert backwards.value.problem["details"] == {"now": moved["now"]}


async def test_expiry_follows_the_clock_of_the_proposals_tenant(fake, admin) -> None:
    one, two = await admin.create_tenant(), await admin.create_tenant()
    async with (
        as_tenant_admin(fake, one) as first,
        fake.client(one["credential"]["token"]) as a,
        fake.client(two["credential"]["token"]) as b,
    ):
        pending_a = (await propose(a, proposal_body("A's proposal."))).json()["proposal"]
        pending_b = (await propose(b, proposal_body("B's proposal."))).json()["proposal"]
        await first.advance_clock(8 * DAY)  # past the default 7-day TTL, in tenant one only
        assert (await status(a, pending_a["id"])).json()["proposal"]["status"] == "expired"
        assert (await status(b, pending_b["id"])).json()["proposal"]["status"] == "pending"
        assert [p["status"] for p in (await admin.proposals(tenant=two["tenant"]))["items"]] == ["pending"]
        assert [p["status"] for p in (await admin.proposals(tenant=one["tenant"]))["items"]] == ["expired"]
        stamped = (await propose(a, proposal_body("Written on tenant one's clock."))).json()["proposal"]
        assert seconds_between(stamped["created_at"], pending_b["created_at"]) > 8 * DAY - 60


async def test_the_server_admins_clock_calls_move_every_tenant_forward_never_back(fake, admin) -> None:
    behind, ahead = await admin.create_tenant(), await admin.create_tenant()
    async with as_tenant_admin(fake, behind) as slow, as_tenant_admin(fake, ahead) as fast:
        await slow.set_clock(frozen=True)
        start = (await slow.clock())["now"]
        await fast.set_clock(frozen=True)
        await fast.advance_clock(30 * DAY)
        far = (await fast.clock())["now"]
        server = await admin.advance_clock(HOUR)  # adds to every tenant's clock
        assert seconds_between((await slow.clock())["now"], start) == HOUR
        far_now = (await fast.clock())["now"]
        assert seconds_between(far_now, far) == HOUR
        target = format_us(parse_timestamp(server["now"]) + 2 * DAY * 10**6)
        assert (await admin.set_clock(now=target))["now"] >= target
        assert (await slow.clock())["now"] == target  # behind it: brought up to it
        assert (await fast.clock())["now"] == far_now  # ahead of it: stays where it was
        await admin.set_clock(frozen=False)  # applies to every tenant
        assert (await slow.clock())["frozen"] is False
        assert (await fast.clock())["frozen"] is False
        late = await admin.create_tenant()  # a new tenant starts at the server clock
        async with as_tenant_admin(fake, late) as newest:
            assert 0 <= seconds_between((await newest.clock())["now"], target) < 60


async def test_a_tenant_clock_at_the_end_of_the_range_stops_there_and_never_refuses_the_server_advance(
    fake, admin
) -> None:
    """One tenant's clock cannot block the server admin's advance for every tenant (nor tell the
    server admin that some tenant's clock is near the end): it stops at the end of the range."""
    created, other = await admin.create_tenant(), await admin.create_tenant()
    async with as_tenant_admin(fake, created) as own, as_tenant_admin(fake, other) as theirs:
        await own.set_clock(now="8999-12-31T00:00:00.000000Z", frozen=True)
        other_before = parse_timestamp((await theirs.clock())["now"])
        server_before = parse_timestamp((await admin.clock())["now"])
        moved = await admin.advance_clock(2 * DAY)
        assert parse_timestamp(moved["now"]) - server_before >= 2 * DAY * 10**6
        stopped = await own.clock()
        assert (stopped["now"], stopped["frozen"]) == ("9000-01-01T00:00:00.000000Z", True)
        assert parse_timestamp((await theirs.clock())["now"]) - other_before >= 2 * DAY * 10**6
        with pytest.raises(AdminError) as refused:  # the server clock itself keeps to the range
            await admin.advance_clock(3_000_000 * DAY)
        assert refused.value.status == 422
        assert refused.value.problem["details"]["errors"][0]["pointer"] == "/seconds"
