"""A v1 request in flight while its tenant is reset, restored, or deleted and made again under its
id: nothing of it reaches the new state — no journal row, no event, no charge, no fault taken.

The state after a reset is "a fresh database with the seed" (SPEC 3.2), and a tenant made again
under a deleted one's id sees nothing of the old one (SPEC 3.6). The change happens here from
another connection to the same file, as another worker (or the control API between two of the
request's transactions) would make it, at the moment the request waits: an injected fault's
``delay_ms`` or an ``in_flight`` fault's hold (the pipeline's ``asyncio.sleep``, patched so that no
test waits).
"""

from __future__ import annotations

import asyncio
import sqlite3
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fake_lucy.domain import faults, principals, tenants
from fake_lucy.domain import seed as seeding
from fake_lucy.http import pipeline
from fake_lucy.store.connection import Database
from fake_lucy.store.events import events_after
from fake_lucy.testing import FakeAdmin
from lucy_memory._contract import load_contract
from tests.helpers import WORKSPACE, proposal_body, propose, recall

pytestmark = pytest.mark.anyio


@pytest.fixture
def meanwhile(fake, monkeypatch) -> Iterator[Callable[[Callable[[sqlite3.Connection], Any]], None]]:
    """``meanwhile(change)``: the next wait of a request (a fault's delay or hold) runs ``change``
    in a write transaction of another connection instead of waiting."""
    other = Database(fake.fake.settings.database)
    changes: list[Callable[[sqlite3.Connection], Any]] = []

    async def sleep(seconds: float) -> None:
        if changes:
            with other.write() as conn:
                changes.pop(0)(conn)
        await asyncio.sleep(0)

    monkeypatch.setattr(pipeline, "asyncio", types.SimpleNamespace(sleep=sleep))
    yield changes.append
    other.close()


@pytest.fixture
def after_authentication(
    fake, monkeypatch
) -> Iterator[Callable[[Callable[[sqlite3.Connection], Any]], None]]:
    """``after_authentication(change)``: the next v1 request, once its permissions are checked, has
    ``change`` run in a write transaction of another connection (another worker's) before it goes on."""
    other = Database(fake.fake.settings.database)
    check = pipeline.V1Pipeline._check_permissions

    def arm(change: Callable[[sqlite3.Connection], Any]) -> None:
        def checked_then_changed(self: pipeline.V1Pipeline, call: Any) -> None:
            check(self, call)
            monkeypatch.setattr(pipeline.V1Pipeline, "_check_permissions", check)  # once
            with other.write() as conn:
                change(conn)

        monkeypatch.setattr(pipeline.V1Pipeline, "_check_permissions", checked_then_changed)

    yield arm
    other.close()


def rows(fake, table: str, tenant: str) -> list[dict[str, Any]]:
    """A table's rows of the tenant, straight from the file (the server admin's listings have no
    tenant filter)."""
    column = "tenant" if table == "journal" else "tenant_id"
    with fake.fake.db.read() as conn:
        cursor = conn.execute(f"SELECT * FROM {table} WHERE {column} = ?", (tenant,))  # noqa: S608
        return [dict(zip([d[0] for d in cursor.description], row, strict=True)) for row in cursor]


def reset_server(fake) -> Callable[[sqlite3.Connection], None]:
    return lambda conn: seeding.reset(conn, fake.fake.ids, fake.fake.seed)


def made_again(fake, tenant: str) -> Callable[[sqlite3.Connection], None]:
    def change(conn: sqlite3.Connection) -> None:
        tenants.delete(conn, tenant, scope=tenants.SERVER)
        tenants.create(conn, fake.fake.ids, scope=tenants.SERVER, tenant=tenant)

    return change


async def test_an_answer_delayed_past_a_server_reset_leaves_no_journal_row_in_the_fresh_state(
    fake, api, admin, meanwhile
) -> None:
    """The charge went with the state it was made in, and the journal row with it (it is written
    before the delay): the fresh state has neither, nor the fault the request took."""
    await admin.add_fault("propose", 500, phase="after_commit", delay_ms=5)
    meanwhile(reset_server(fake))
    response = await propose(api, proposal_body(), key="delayed-past-reset")
    assert response.status_code == 500  # the injected answer, as decided before the reset
    request_id = response.headers["Lucy-Request-Id"]
    assert [row for row in await admin.requests() if row["request_id"] == request_id] == []
    assert [row for row in await admin.ledger() if row["request_id"] == request_id] == []
    assert (await admin.proposals())["items"] == []
    assert await admin.faults() == []


async def test_a_request_of_a_deleted_tenant_reaches_nothing_of_the_tenant_made_again_under_its_id(
    fake, admin, meanwhile
) -> None:
    created = await admin.create_tenant("t-again")
    old = fake.client(created["credential"]["token"])
    async with old as client:
        await admin.add_fault("propose", 500, phase="after_commit", delay_ms=5)
        meanwhile(made_again(fake, "t-again"))
        response = await propose(client, proposal_body(scope=WORKSPACE), key="k1")
    assert response.status_code == 500
    request_id = response.headers["Lucy-Request-Id"]
    assert rows(fake, "journal", "t-again") == []
    with fake.fake.db.read() as conn:
        seen = events_after(conn, 0, tenant="t-again", limit=10_000)
    assert [event for event in seen if request_id in event.data] == []


async def test_a_propose_held_in_flight_across_its_tenants_rebirth_is_refused_and_not_journaled(
    fake, admin, meanwhile
) -> None:
    """The held request resumes after the tenant was deleted and made again: it is answered 503
    unavailable (retryable, nothing done), never executed or refused against the new tenant's
    account (which used to read as a balance of 0: 402), and the new tenant's journal stays empty."""
    created = await admin.create_tenant("t-held")
    async with fake.client(created["credential"]["token"]) as client:
        await admin.add_fault("propose", 500, phase="in_flight", hold_ms=5)
        meanwhile(made_again(fake, "t-held"))
        response = await propose(client, proposal_body(scope=WORKSPACE), key="held")
        assert (response.status_code, response.json()["code"]) == (503, "unavailable")
        assert response.json()["retryable"] is True
        assert "reset, restored or made again while this request ran" in response.json()["detail"]
        assert (
            "503 unavailable (retryable" in load_contract("fake-control")["tenants"]["in_flight_across_reset"]
        )
        again = await propose(client, proposal_body(scope=WORKSPACE), key="held")
        assert again.status_code == 401  # the old tenant's token, retried: unknown now
    assert rows(fake, "journal", "t-held") == []
    assert [row for row in rows(fake, "ledger", "t-held") if row["request_id"] is not None] == []


async def test_a_request_that_began_before_its_tenants_reset_takes_no_fault_of_the_fresh_state(
    fake, admin, after_authentication
) -> None:
    """Between its authentication and its fault step another worker resets the tenant and its
    admin arms a fault: that fault is the fresh state's, so the request from before answers 503 and
    leaves it to the requests that come after."""
    created = await admin.create_tenant("t-fault")
    tenant_admin = FakeAdmin(client_factory=lambda: fake.client(created["admin_token"]))

    def reset_and_arm(conn: sqlite3.Connection) -> None:
        tenants.reset(conn, "t-fault")
        faults.create(conn, fake.fake.ids, {"operation": "recall", "status": 500}, tenant="t-fault")

    after_authentication(reset_and_arm)
    async with fake.client(created["credential"]["token"]) as client:
        first = await recall(client, "anything")
        assert (first.status_code, first.json()["code"]) == (503, "unavailable")
        assert [fault["remaining"] for fault in await tenant_admin.faults()] == [1]
        assert await tenant_admin.requests() == []
        after = await recall(client, "anything")
        assert after.status_code == 500  # the fresh state's fault, for the first request of it


async def test_a_propose_held_in_flight_while_its_credential_is_revoked_is_401_and_does_nothing(
    fake, admin, meanwhile
) -> None:
    """Revocation is "401 from now on" (contract revoke_credential): the held request resumes after
    it and is refused, with no proposal, charge or idempotency record left; the key is free again."""
    created = await admin.create_credential(scopes=[WORKSPACE])
    async with fake.client(created["token"]) as client:
        await admin.add_fault("propose", 500, phase="in_flight", hold_ms=5)
        meanwhile(lambda conn: principals.revoke_credential(conn, created["credential_id"]))
        response = await propose(client, proposal_body(scope=WORKSPACE), key="held-revoked")
        assert (response.status_code, response.json()["code"]) == (401, "unauthenticated")
        assert "revoked while this request ran" in response.json()["detail"]
    request_id = response.headers["Lucy-Request-Id"]
    assert (await admin.proposals())["items"] == []
    assert [row for row in await admin.ledger() if row["request_id"] == request_id] == []
    with fake.fake.db.read() as conn:
        held = conn.execute(
            "SELECT count(*) FROM idempotency_records WHERE account_id = ?", (created["account"],)
        ).fetchone()[0]
    assert held == 0


async def test_a_recall_whose_credential_is_revoked_after_it_authenticated_is_401_and_not_charged(
    fake, admin, after_authentication
) -> None:
    created = await admin.create_credential(scopes=[WORKSPACE])
    after_authentication(lambda conn: principals.revoke_credential(conn, created["credential_id"]))
    async with fake.client(created["token"]) as client:
        response = await recall(client, "anything")
    assert (response.status_code, response.json()["code"]) == (401, "unauthenticated")
    assert "revoked while this request ran" in response.json()["detail"]
    request_id = response.headers["Lucy-Request-Id"]
    assert [row for row in await admin.ledger() if row["request_id"] == request_id] == []
