"""SPEC 3.6: a tenant admin token acts only within its tenant, on every control endpoint.

Issue 15, must-hold 2: another tenant's object is 404, a server-wide operation 403 ``forbidden``,
and a tenant admin's reset, clock advance, fault and approval never change another tenant.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from fake_lucy.domain.clock import parse_timestamp
from fake_lucy.testing import AdminError, FakeAdmin, InProcessFake
from fake_lucy.testing.admin import EventWatch
from tests.conftest import HOOKS
from tests.helpers import PROJECT, V1, proposal_body, propose, recall, status

pytestmark = pytest.mark.anyio

DAY_US = 24 * 3600 * 10**6


@dataclass
class Tenant:
    """A tenant made by ``POST /_fake/tenants``, with an object of each kind."""

    id: str
    admin_token: str
    token: str
    credential_id: str
    account: str
    admin: FakeAdmin
    pending: str = ""  # a pending proposal
    memory: str = ""  # an active memory
    deleted: str = ""  # a deleted memory
    fault: str = ""


@contextlib.asynccontextmanager
async def tenant_admin(fake: InProcessFake, created: dict[str, Any]) -> AsyncIterator[FakeAdmin]:
    async with fake.client(created["admin_token"], event_hooks=HOOKS) as http:
        yield FakeAdmin(http, tenant=created["tenant"])


async def populated(
    fake: InProcessFake, admin: FakeAdmin, stack: contextlib.AsyncExitStack, name: str
) -> Tenant:
    created = await admin.create_tenant(name)
    own = await stack.enter_async_context(tenant_admin(fake, created))
    tenant = Tenant(
        id=created["tenant"],
        admin_token=created["admin_token"],
        token=created["credential"]["token"],
        credential_id=created["credential"]["credential_id"],
        account=created["credential"]["account"],
        admin=own,
    )
    async with fake.client(tenant.token, event_hooks=HOOKS) as client:
        kept = await propose(client, proposal_body(f"{name} keeps the kept memory."))
        tenant.memory = (await own.approve(kept.json()["proposal"]["id"]))["memory"]["id"]
        gone = await propose(client, proposal_body(f"{name} deletes this memory.", topic="gone"))
        tenant.deleted = (await own.approve(gone.json()["proposal"]["id"]))["memory"]["id"]
        await own.delete_memory(tenant.deleted)
        pending = await propose(client, proposal_body(f"{name} waits for review."))
        tenant.pending = pending.json()["proposal"]["id"]
        assert (await recall(client, "memory")).status_code == 200
    tenant.fault = (await own.add_fault("proposal_status", 503))["fault_id"]
    return tenant


@pytest.fixture
async def tenants(fake, admin) -> AsyncIterator[tuple[Tenant, Tenant]]:
    async with contextlib.AsyncExitStack() as stack:
        yield (
            await populated(fake, admin, stack, "tenant-a"),
            await populated(fake, admin, stack, "tenant-b"),
        )


async def snapshot(admin: FakeAdmin, tenant: Tenant) -> dict[str, Any]:
    """Everything the server admin and the tenant's own admin can see of ``tenant``."""
    return {
        "proposals": await admin.proposals(tenant=tenant.id),
        "memories": await admin.memories(tenant=tenant.id),
        "ledger": await admin.ledger(account=tenant.account),
        "journal": await admin.requests(credential_id=tenant.credential_id),
        "policy": await admin.policy(tenant.id),
        "faults": await tenant.admin.faults(),
        "clock": (await tenant.admin.clock())["frozen"],
    }


# (method, path, body) with {a} / {b} fields of the two tenants; A's admin sends each.
OTHER_TENANTS_OBJECTS = [
    ("POST", "/credentials", {"tenant": "{b.id}", "permissions": ["memory:read"], "scopes": []}),
    (  # in its own tenant, on the other's account
        "POST",
        "/credentials",
        {"tenant": "{a.id}", "account": "{b.account}", "permissions": ["memory:read"], "scopes": []},
    ),
    ("DELETE", "/credentials/{b.credential_id}", None),
    ("PUT", "/accounts/{b.account}/credits", {"balance": 5}),
    ("POST", "/proposals/{b.pending}/approve", None),
    ("POST", "/proposals/{b.pending}/reject", {"reason_detail": "not yours"}),
    ("POST", "/proposals/{b.pending}/expire", None),
    ("DELETE", "/memories/{b.memory}", None),
    ("POST", "/memories/{b.deleted}/restore", None),
    ("GET", "/tenants/{b.id}/policy", None),
    ("PUT", "/tenants/{b.id}/policy", {"auto_approve": "all"}),
    ("DELETE", "/tenants/{b.id}", None),
]
SERVER_WIDE = [
    ("POST", "/tenants", {"tenant": "tenant-c"}),
    ("PUT", "/billing", {"available": False}),
]


def _fill(template: Any, a: Tenant, b: Tenant) -> Any:
    if isinstance(template, str):
        return template.format(a=a, b=b)
    if isinstance(template, dict):
        return {key: _fill(value, a, b) for key, value in template.items()}
    return template


@pytest.mark.parametrize(("method", "path", "body"), OTHER_TENANTS_OBJECTS, ids=lambda v: str(v))
async def test_another_tenants_object_is_404_and_stays_as_it_was(admin, tenants, method, path, body) -> None:
    a, b = tenants
    before = await snapshot(admin, b)
    with pytest.raises(AdminError) as refused:
        await a.admin.call(method, _fill(path, a, b), _fill(body, a, b))
    assert (refused.value.status, refused.value.code) == (404, "not_found")
    assert await snapshot(admin, b) == before


@pytest.mark.parametrize(("method", "path", "body"), SERVER_WIDE, ids=lambda v: str(v))
async def test_a_server_wide_operation_is_403_forbidden_for_a_tenant_admin(
    fake, admin, tenants, method, path, body
) -> None:
    a, b = tenants
    before = await snapshot(admin, b)
    with pytest.raises(AdminError) as refused:
        await a.admin.call(method, path, body)
    assert (refused.value.status, refused.value.code) == (403, "forbidden")
    assert await snapshot(admin, b) == before
    async with fake.client(b.token) as client:  # billing is still available to everyone
        assert (await recall(client, "memory")).status_code == 200
    with pytest.raises(AdminError) as missing:
        await admin.policy("tenant-c")
    assert missing.value.status == 404


async def test_the_same_operations_on_its_own_objects_succeed(tenants) -> None:
    a, _ = tenants
    assert (await a.admin.approve(a.pending))["status"] == "approved"
    assert (await a.admin.restore_memory(a.deleted))["status"] == "active"
    assert (await a.admin.delete_memory(a.memory))["status"] == "deleted"
    assert (await a.admin.set_balance(a.account, 7)) == {"account": a.account, "balance": 7}
    extra = await a.admin.create_credential(permissions=("memory:read",))
    assert extra["tenant"] == a.id
    await a.admin.revoke(extra["credential_id"])
    assert (await a.admin.set_policy(auto_approve="all"))["auto_approve"] == "all"


async def test_an_account_id_tells_a_tenant_admin_nothing_about_other_tenants(fake, admin, tenants) -> None:
    a, b = tenants
    answers = []
    for account in (b.account, "acct_nobody_has"):
        with pytest.raises(AdminError) as refused:
            await a.admin.create_credential(account=account, permissions=("memory:read",))
        answers.append((refused.value.status, refused.value.code, refused.value.problem["detail"]))
    assert answers[0] == answers[1]
    assert answers[0][:2] == (404, "not_found")
    assert (await admin.memories(tenant=b.id))["items"]  # b is as it was, and nothing was made
    with pytest.raises(AdminError):
        await admin.set_balance("acct_nobody_has", 1)
    own = await a.admin.create_credential(account=a.account, permissions=("memory:read",))
    assert own["account"] == a.account
    fresh = await a.admin.create_credential(permissions=("memory:read",))
    assert fresh["account"] not in (a.account, b.account)
    # the server admin, who sees every tenant, is told why
    with pytest.raises(AdminError) as conflict:
        await admin.create_credential(a.id, account=b.account, permissions=("memory:read",))
    assert (conflict.value.status, conflict.value.code) == (409, "account_conflict")


async def test_a_fault_on_another_tenants_credential_is_refused(admin, tenants) -> None:
    a, b = tenants
    before = await snapshot(admin, b)
    with pytest.raises(AdminError) as refused:
        await a.admin.add_fault("recall", 503, credential_id=b.credential_id)
    assert (refused.value.status, refused.value.problem["details"]["errors"][0]["pointer"]) == (
        422,
        "/credential_id",
    )
    assert await snapshot(admin, b) == before


async def test_listings_show_the_tenant_admins_own_tenant_only(admin, tenants) -> None:
    a, b = tenants
    proposals = (await a.admin.proposals())["items"]
    assert {p["id"] for p in proposals} >= {a.pending}
    assert b.pending not in {p["id"] for p in proposals}
    assert (await a.admin.proposals(tenant=b.id))["items"] == []
    assert (await a.admin.proposals(tenant=a.id))["items"] == proposals
    memories = (await a.admin.memories())["items"]
    assert {m["id"] for m in memories} == {a.memory, a.deleted}
    assert (await a.admin.memories(tenant=b.id))["items"] == []
    journal = await a.admin.requests()
    assert journal
    assert {row["tenant"] for row in journal} == {a.id}
    assert {row["credential_id"] for row in journal} == {a.credential_id}
    assert await a.admin.requests(credential_id=b.credential_id) == []
    ledger = await a.admin.ledger()
    assert ledger
    assert {(row["tenant"], row["account"]) for row in ledger} == {(a.id, a.account)}
    assert await a.admin.ledger(account=b.account) == []
    assert [f["fault_id"] for f in await a.admin.faults()] == [a.fault]
    everything = await admin.faults()  # the server admin sees every tenant's
    assert {f["fault_id"] for f in everything} == {a.fault, b.fault}
    server_journal = await admin.requests()
    assert {row["tenant"] for row in server_journal} == {a.id, b.id}


async def test_a_tenant_admins_fault_fires_only_for_its_tenant(fake, admin, tenants) -> None:
    a, b = tenants
    async with fake.client(a.token) as client_a, fake.client(b.token) as client_b:
        injected = await status(client_a, a.pending)
        assert (injected.status_code, injected.headers["Fake-Lucy-Fault"]) == (503, a.fault)
        assert (await status(client_a, a.pending)).status_code == 200  # its count was 1
        assert (await status(client_b, b.pending)).status_code == 503  # B's own fault, not A's
        await b.admin.clear_faults()
        await a.admin.add_fault("any", 500, count=5)
        assert (await recall(client_b, "memory")).status_code == 200
        assert (await recall(client_a, "memory")).status_code == 500
        await a.admin.clear_faults()
        server_fault = await admin.add_fault("recall", 502)  # the server admin's: every tenant
        await b.admin.clear_faults()  # clears B's own only
        assert [f["fault_id"] for f in await admin.faults()] == [server_fault["fault_id"]]
        assert (await recall(client_b, "memory")).status_code == 502


async def test_a_tenant_admins_reset_clock_fault_and_approval_leave_other_tenants_as_they_were(
    fake, admin, api, tenants
) -> None:
    a, b = tenants
    dev_proposal = await propose(api, proposal_body("The dev tenant's own proposal."))
    dev_before = {
        "proposals": await admin.proposals(tenant="tenant_dev"),
        "ledger": await admin.ledger(account="acct_dev"),
        "clock": await admin.clock(),
    }
    before = await snapshot(admin, b)
    b_clock = (await b.admin.clock())["now"]
    await a.admin.approve(a.pending)
    await a.admin.add_fault("any", 503, count=10)
    advanced = await a.admin.advance_clock(30 * 24 * 3600)  # past every TTL of A's tenant
    await a.admin.set_clock(frozen=True)
    b_now = (await b.admin.clock())["now"]
    assert b_clock <= b_now
    assert parse_timestamp(advanced["now"]) - parse_timestamp(b_now) > 29 * DAY_US  # B's did not jump
    assert await snapshot(admin, b) == before  # B's pending proposal did not expire
    assert (await a.admin.reset())["reset"] is True
    assert await snapshot(admin, b) == before
    assert (await a.admin.clock())["frozen"] is False  # A's clock follows the server clock again
    async with fake.client(b.token) as client_b:  # A's faults do not reach B
        recalled = (await recall(client_b, "kept memory")).json()["memories"]
    assert [memory["id"] for memory in recalled] == [b.memory]
    assert dev_before["proposals"] == await admin.proposals(tenant="tenant_dev")
    assert dev_before["ledger"] == await admin.ledger(account="acct_dev")
    assert dev_before["clock"]["now"] <= (await admin.clock())["now"]
    assert [p["id"] for p in dev_before["proposals"]["items"]] == [dev_proposal.json()["proposal"]["id"]]


async def test_a_tenant_admins_clock_advance_refills_its_buckets_and_ends_its_key_retention_only(
    fake, admin
) -> None:
    """The clock a tenant admin moves is the one its tenant's rate limit refills by and its
    idempotency records are kept by (24 h): after a 24 h advance A's bucket is full and A's key
    makes a new proposal, while B's bucket is as empty and B's key still replays."""
    await admin.set_clock(frozen=True)
    async with contextlib.AsyncExitStack() as stack:
        clients, admins, first = {}, {}, {}
        for name in ("tenant-a", "tenant-b"):
            created = await admin.create_tenant(name)
            admins[name] = await stack.enter_async_context(tenant_admin(fake, created))
            clients[name] = await stack.enter_async_context(
                fake.client(created["credential"]["token"], event_hooks=HOOKS)
            )
            first[name] = await propose(clients[name], key="kept-key")
            assert first[name].status_code == 201
            await admins[name].set_policy(rate_limit_per_minute=2)
            assert [(await recall(clients[name], "x")).status_code for _ in range(3)] == [200, 200, 429]
        await admins["tenant-a"].advance_clock(24 * 3600)
        a_refilled = [(await recall(clients["tenant-a"], "x")).status_code for _ in range(2)]
        b_still = await recall(clients["tenant-b"], "x")
        assert a_refilled == [200, 200]
        assert (b_still.status_code, b_still.headers["Retry-After"]) == (429, "30")  # not a token more
        await admins["tenant-a"].set_policy(rate_limit_per_minute=None)
        await admins["tenant-b"].set_policy(rate_limit_per_minute=None)
        a_again = await propose(clients["tenant-a"], key="kept-key")
        b_again = await propose(clients["tenant-b"], key="kept-key")
    assert a_again.status_code == 201
    assert "Idempotent-Replayed" not in a_again.headers
    assert a_again.json()["proposal"]["id"] != first["tenant-a"].json()["proposal"]["id"]
    assert b_again.headers.get("Idempotent-Replayed") == "true"
    assert b_again.content == first["tenant-b"].content


async def test_a_tenant_admin_token_is_refused_on_v1_and_a_v1_token_on_the_control_api(fake, tenants) -> None:
    a, _ = tenants
    async with fake.client(a.admin_token) as as_v1:
        refused = await recall(as_v1, "memory")
    assert (refused.status_code, refused.json()["code"]) == (401, "unauthenticated")
    for token in (a.token, fake.dev_token):
        async with fake.client(token) as as_admin:
            control = await as_admin.get("/_fake/clock")
        assert (control.status_code, control.json()["code"]) == (401, "unauthenticated")
        assert control.headers["WWW-Authenticate"] == "Bearer"


async def test_tenant_tokens_are_long_and_stored_hashed(fake, tenants) -> None:
    a, _ = tenants
    assert len(a.admin_token) >= 32
    assert len(a.token) >= 32
    raw = b"".join(p.read_bytes() for p in fake.fake.db_files() if p.exists())
    assert a.admin_token.encode() not in raw
    assert a.token.encode() not in raw


async def test_a_request_in_flight_when_its_tenant_is_deleted_is_401(fake, admin, tenants) -> None:
    a, _ = tenants
    async with fake.client(a.token) as client:
        assert (await recall(client, "memory")).status_code == 200  # the principal is cached
        await admin.delete_tenant(a.id)
        gone = await client.post(V1 + "/recall", json={"query": "memory", "scope": PROJECT})
    assert (gone.status_code, gone.json()["code"]) == (401, "unauthenticated")
    with pytest.raises(AdminError) as refused:
        await a.admin.clock()
    assert refused.value.status == 401


async def test_a_tenant_admins_event_stream_carries_its_own_tenants_events_only(fake, admin, tenants) -> None:
    a, b = tenants
    async with a.admin.watch() as stream:
        async with fake.client(b.token) as theirs, fake.client(a.token) as mine:
            assert (await propose(theirs, proposal_body("B's note that A must not see."))).status_code == 201
            await b.admin.add_fault("recall", 503)
            own = (await propose(mine, proposal_body("A's own note."))).json()["proposal"]
        created = await stream.wait_for("proposal.created", timeout=10)
    assert (created.tenant, created.data["proposal_id"]) == (a.id, own["id"])
    assert {event.tenant for event in stream.seen} <= {a.id, None}
    async with admin.watch(after=0) as everything:  # the server admin's stream has both
        await everything.wait_for("proposal.created", timeout=10, account=b.account)


async def test_a_tenant_admins_event_stream_ends_when_its_tenant_is_deleted(fake, admin, tenants) -> None:
    """Within a poll (0.2 s), with nothing written after the deletion (the stream is not waiting for
    an event to notice), and with the other tenant's writes going on."""
    a, b = tenants
    async with a.admin.watch() as stream:
        await admin.delete_tenant(a.id)
        with anyio.fail_after(2), pytest.raises(EOFError):
            await _read_to_the_end(stream)
    assert {event.tenant for event in stream.seen} <= {a.id, None}
    async with b.admin.watch() as stream:
        await admin.delete_tenant(b.id)
        async with fake.client() as others:  # the dev tenant's
            assert (await propose(others, proposal_body("The dev tenant goes on."))).status_code == 201
        with anyio.fail_after(2), pytest.raises(EOFError):
            await _read_to_the_end(stream)
    assert {event.tenant for event in stream.seen} <= {b.id, None}


async def _read_to_the_end(stream: EventWatch) -> None:
    while True:
        await stream.next()


async def test_a_restored_snapshot_naming_another_tenants_target_supersedes_nothing_of_theirs(
    fake, tenants
) -> None:
    """A tenant's snapshot is its admin's to edit, so a proposal's stored target can be made to name
    another tenant's topic or memory; what its approval or a deletion supersedes stays in its tenant."""
    a, b = tenants
    async with fake.client(b.token) as theirs:
        topical = await propose(theirs, proposal_body("B's topic note.", topic="release-day"))
    b_topical = topical.json()["proposal"]["id"]

    async def retarget(tenant: Tenant, proposal_id: str, target: str) -> None:
        document = await tenant.admin.call("GET", "/snapshot")
        [proposal] = [p for t in document["tenants"] for p in t["proposals"] if p["id"] == proposal_id]
        proposal["target"] = target
        await tenant.admin.call("PUT", "/snapshot", document)

    # A's pending proposal claims B's topic; approving it supersedes competitors of that target
    await retarget(a, a.pending, "t:" + json.dumps([b.id, PROJECT["kind"], PROJECT["id"], "release-day"]))
    await a.admin.approve(a.pending)
    # B's pending proposal claims A's memory; deleting that memory supersedes proposals replacing it
    await retarget(b, b.pending, "m:" + a.memory)
    await a.admin.delete_memory(a.memory)
    statuses = {p["id"]: p["status"] for p in (await b.admin.proposals())["items"]}
    assert (statuses[b_topical], statuses[b.pending]) == ("pending", "pending")


@pytest.mark.parametrize("whose", ["own tenant admin", "server admin"])
async def test_a_snapshot_cannot_make_an_admin_token_a_v1_credential(fake, tenants, whose) -> None:
    a, _ = tenants
    admin_token = a.admin_token if whose == "own tenant admin" else fake.admin_token
    document = await a.admin.call("GET", "/snapshot")
    [mine] = document["tenants"]
    mine["credentials"][0]["token_sha256"] = hashlib.sha256(admin_token.encode()).hexdigest()
    with pytest.raises(AdminError) as refused:
        await a.admin.call("PUT", "/snapshot", document)
    assert refused.value.status == 422
    [error] = refused.value.problem["details"]["errors"]
    assert error["pointer"] == "/tenants/0/credentials/0/token_sha256"
    async with fake.client(admin_token) as as_v1:
        assert (await recall(as_v1, "memory")).status_code == 401
    async with fake.client(a.token) as still:  # nothing changed
        assert (await recall(still, "memory")).status_code == 200


async def test_a_tenant_reset_and_a_restored_tenant_snapshot_are_reset_events_of_the_tenant(tenants) -> None:
    a, _ = tenants
    document = await a.admin.call("GET", "/snapshot")
    async with a.admin.watch() as stream:
        await a.admin.reset()
        reset = await stream.wait_for("reset", timeout=10)
        await a.admin.call("PUT", "/snapshot", document)
        restored = await stream.wait_for("reset", timeout=10)
    assert (reset.tenant, reset.data) == (a.id, {})
    assert (restored.tenant, restored.data) == (a.id, {"snapshot": True})


async def test_a_fired_fault_is_an_event_at_its_tenants_time(fake, tenants) -> None:
    a, _ = tenants
    await a.admin.set_clock(frozen=True)
    moved = await a.admin.advance_clock(3 * 24 * 3600)  # the tenant's clock only
    async with a.admin.watch() as stream, fake.client(a.token) as client:
        assert (await status(client, a.pending)).status_code == 503  # the populated tenant's fault
        fired = await stream.wait_for("fault.fired", timeout=10)
    assert (fired.tenant, fired.at) == (a.id, moved["now"])


async def test_a_tenant_made_again_under_a_deleted_ones_id_reads_none_of_its_events(
    fake, admin, tenants
) -> None:
    a, _ = tenants
    await admin.delete_tenant(a.id)
    again = await admin.create_tenant(a.id)
    async with tenant_admin(fake, again) as own, own.watch(after=0) as stream:  # all it may read
        async with fake.client(again["credential"]["token"]) as client:
            assert (await propose(client, proposal_body("The new tenant's first note."))).status_code == 201
        created = await stream.wait_for("proposal.created", timeout=10)
    assert created.data["credential_id"] == again["credential"]["credential_id"]
    seen = json.dumps([event.data for event in stream.seen])
    for old in (a.pending, a.memory, a.deleted, a.credential_id):  # each named in the old events
        assert old not in seen


@pytest.mark.parametrize("change", ["deletion", "server reset", "restore of the whole state"])
async def test_a_tenant_admins_open_stream_never_sends_an_event_of_a_tenant_made_again_under_its_id(
    fake, admin, tenants, change
) -> None:
    """The stream asks whether its token still acts for the tenant before each send (not only after
    each idle poll): it ends instead of sending the first event of the tenant made again under the id."""
    a, _ = tenants
    before = await admin.call("GET", "/snapshot")
    [kept] = [t for t in before["tenants"] if t["id"] == a.id]
    before["tenants"].remove(kept)
    async with a.admin.watch() as stream:
        if change == "deletion":
            await admin.delete_tenant(a.id)
        elif change == "server reset":
            await admin.reset()
        else:
            await admin.call("PUT", "/snapshot", before)
        again = await admin.create_tenant(a.id)
        async with fake.client(again["credential"]["token"]) as client:
            assert (await propose(client, proposal_body("The new owner's note."))).status_code == 201
        with anyio.fail_after(10), pytest.raises(EOFError):
            await _read_to_the_end(stream)
    seen = json.dumps([event.data for event in stream.seen])
    assert again["credential"]["credential_id"] not in seen
    assert again["credential"]["account"] not in seen


@pytest.mark.parametrize("change", ["server reset", "restore of the whole state"])
async def test_after_the_whole_state_is_replaced_a_tenant_made_again_under_an_old_id_reads_none_of_its_events(
    fake, admin, tenants, change
) -> None:
    a, _ = tenants
    before = await admin.call("GET", "/snapshot")
    before["tenants"] = [t for t in before["tenants"] if t["id"] != a.id]
    if change == "server reset":
        await admin.reset()
    else:
        await admin.call("PUT", "/snapshot", before)
    again = await admin.create_tenant(a.id)
    async with tenant_admin(fake, again) as own, own.watch(after=0) as stream:  # all it may read
        async with fake.client(again["credential"]["token"]) as client:
            created = await propose(client, proposal_body("The new tenant's first note."))
        await stream.wait_for("proposal.created", timeout=10, proposal_id=created.json()["proposal"]["id"])
    seen = json.dumps([event.data for event in stream.seen])
    for old in (a.pending, a.memory, a.deleted, a.credential_id, a.account):
        assert old not in seen


async def test_a_new_tenants_admin_reads_no_event_from_before_the_tenant_was_made(fake, admin) -> None:
    """Server-wide events (a clock change, a reset) that happened before the tenant existed are
    not its history, even from ``Last-Event-ID: 0``."""
    await admin.set_clock(frozen=True)
    await admin.advance_clock(60)  # server-wide clock.changed events, before the tenant
    created = await admin.create_tenant("late-comer")
    await admin.advance_clock(30)  # and one after
    async with (
        fake.client(created["admin_token"]) as http,
        FakeAdmin(http, tenant="late-comer").watch(after=0) as stream,
    ):
        first = await stream.next()
    assert (first.type, first.tenant) == ("clock.changed", "late-comer")  # its own clock's change
    assert parse_timestamp(first.data["now"]) == parse_timestamp((await admin.clock())["now"])


async def test_a_server_clock_change_reaches_each_tenant_as_its_own_clock(fake, admin) -> None:
    """A tenant whose admin moved its clock ahead hears the server admin's advance with its own
    time, not the server's; the server admin's stream has both."""
    await admin.set_clock(frozen=True)
    created = await admin.create_tenant("ahead")
    async with fake.client(created["admin_token"]) as http:
        own = FakeAdmin(http, tenant="ahead")
        await own.advance_clock(3600)
        async with own.watch() as tenant_stream, fake.admin.watch() as server_stream:
            await admin.advance_clock(60)
            heard = await tenant_stream.wait_for("clock.changed", timeout=10)
            server = await server_stream.wait_for("clock.changed", timeout=10)
            echoed = await server_stream.wait_for("clock.changed", timeout=10, now=heard.data["now"])
        tenant_now = (await own.clock())["now"]
    assert heard.tenant == "ahead"
    assert parse_timestamp(heard.data["now"]) == parse_timestamp(tenant_now)
    assert server.tenant is None
    assert parse_timestamp(server.data["now"]) == parse_timestamp((await admin.clock())["now"])
    assert parse_timestamp(heard.data["now"]) - parse_timestamp(server.data["now"]) == 3600 * 1_000_000
    assert echoed.tenant == "ahead"


async def test_a_tenant_a_whole_restore_brings_in_reads_no_event_from_before(fake, admin) -> None:
    created = await admin.create_tenant("returning")
    document = await admin.call("GET", "/snapshot")
    await admin.delete_tenant("returning")
    await admin.advance_clock(60)  # a server-wide event while the tenant is not there
    await admin.call("PUT", "/snapshot", document)  # and back it comes, with its admin token
    async with (
        fake.client(created["admin_token"]) as http,
        FakeAdmin(http, tenant="returning").watch(after=0) as stream,
    ):
        first = await stream.next()
    assert (first.type, first.tenant, first.data) == ("reset", None, {"snapshot": True})


# (field of tenant A's snapshot to overwrite, path in B's snapshot of the value that B holds)
GLOBAL_VALUES = [
    ("accounts/0/id", "accounts/0/id"),
    ("credentials/0/credential_id", "credentials/0/credential_id"),
    ("credentials/0/token_sha256", "credentials/0/token_sha256"),
    ("memories/0/id", "memories/0/id"),
    ("proposals/0/id", "proposals/0/id"),
]


def _at(document: Any, path: str) -> tuple[Any, str]:
    *parents, last = path.split("/")
    for part in parents:
        document = document[int(part)] if part.isdigit() else document[part]
    return document, last


@pytest.mark.parametrize(("mine", "theirs"), GLOBAL_VALUES, ids=[m for m, _ in GLOBAL_VALUES])
async def test_a_tenant_snapshot_taking_an_id_another_tenant_holds_is_a_422_and_changes_neither(
    admin, tenants, mine, theirs
) -> None:
    """Ids and token hashes are global: a tenant admin's restore cannot take one of another tenant's
    (contract put_snapshot); the refusal names the first place it is written, and neither tenant
    changes."""
    a, b = tenants
    document = await a.admin.call("GET", "/snapshot")
    [b_tenant] = (await b.admin.call("GET", "/snapshot"))["tenants"]
    held, held_key = _at(b_tenant, theirs)
    target, key = _at(document["tenants"][0], mine)
    # renamed everywhere in A's document, so that its references still hold
    document = json.loads(json.dumps(document).replace(json.dumps(target[key]), json.dumps(held[held_key])))
    before = (await snapshot(admin, a), await snapshot(admin, b))
    with pytest.raises(AdminError) as refused:
        await a.admin.call("PUT", "/snapshot", document)
    assert (refused.value.status, refused.value.code) == (422, "invalid_request")
    [error] = refused.value.problem["details"]["errors"]
    assert error["pointer"] == f"/tenants/0/{mine}"
    assert (await snapshot(admin, a), await snapshot(admin, b)) == before


async def test_another_tenants_reset_leaves_the_server_admins_history_from_the_start_standing(
    fake, admin, tenants
) -> None:
    """``after=0`` is the newest reset that started the reader's state afresh: for the server admin
    the server's, not a tenant's (a shared fake's session resets its tenant before every test)."""
    a, _ = tenants
    async with fake.client() as dev:
        created = (await propose(dev, proposal_body("The dev tenant's pending note."))).json()["proposal"]
    await a.admin.reset()
    async with admin.watch(after=0) as everything:
        seen = await everything.wait_for("proposal.created", timeout=10, proposal_id=created["id"])
        reset = await everything.wait_for("reset", timeout=10)
    assert seen.id < reset.id  # the tenant's reset came after, and did not hide what came before
    async with a.admin.watch(after=0) as own:  # the tenant admin's history starts at its reset
        first = await own.wait_for("reset", timeout=10)
    assert first.tenant == a.id
