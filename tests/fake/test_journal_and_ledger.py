"""Issue 3, points 6 and 7: the lost-response story, the request journal and the ledger (SPEC 3.2, 3.5)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from fake_lucy.domain import journal
from fake_lucy.store.connection import Database
from fake_lucy.store.records import JournalRow
from fake_lucy.testing import AdminError, FakeAdmin, InProcessFake, LiveServer
from tests.conftest import HOOKS
from tests.helpers import V1, proposal_body, propose, recall, status

pytestmark = pytest.mark.anyio


async def test_a_propose_lost_after_commit_is_recovered_by_its_key_and_the_journal_shows_both_attempts(
    live: LiveServer, live_admin: FakeAdmin
) -> None:
    fault = await live_admin.add_fault("propose", 503, phase="after_commit")
    raw = json.dumps(proposal_body("Releases are cut from main.")).encode()
    headers = {"Idempotency-Key": "lost-once", "Content-Type": "application/json"}
    async with live.client(event_hooks=HOOKS) as client:
        lost = await client.post(V1 + "/proposals", content=raw, headers=headers)
        retried = await client.post(
            V1 + "/proposals", content=raw, headers={**headers, "Lucy-Retry-Attempt": "1"}
        )
    assert lost.status_code == 503
    assert lost.headers["Fake-Lucy-Fault"] == fault["fault_id"]
    assert retried.status_code == 201
    assert retried.headers["Idempotent-Replayed"] == "true"
    assert retried.headers["Lucy-Credits-Charged"] == "0"
    assert retried.headers["Lucy-Original-Request-Id"] == lost.headers["Lucy-Request-Id"]
    original = retried.json()
    assert original["request_id"] == lost.headers["Lucy-Request-Id"], "the lost 201, as stored"
    assert original["credits"] == {"charged": 1, "remaining": 999}
    proposals = (await live_admin.proposals())["items"]
    assert [p["id"] for p in proposals] == [original["proposal"]["id"]]
    ledger = await live_admin.ledger(account="acct_dev")
    assert [(row["operation"], row["request_id"]) for row in ledger] == [("propose", original["request_id"])]
    journal = await live_admin.requests(operation="propose")
    assert len(journal) == 2
    first, second = journal
    assert first["idempotency_key"] == second["idempotency_key"] == "lost-once"
    assert first["body_sha256"] == second["body_sha256"] == hashlib.sha256(raw).hexdigest()
    assert (first["retry_attempt"], second["retry_attempt"]) == (0, 1)
    assert (first["replayed"], second["replayed"]) == (False, True)
    assert (first["charged"], second["charged"]) == (True, False)
    assert (first["status"], second["status"]) == (503, 201)
    assert (first["fault_id"], second["fault_id"]) == (fault["fault_id"], None)
    assert [first["request_id"], second["request_id"]] == [
        lost.headers["Lucy-Request-Id"],
        retried.headers["Lucy-Request-Id"],
    ]


async def test_the_journal_records_every_request_past_authentication_with_its_raw_body_hash(
    fake: InProcessFake, api, admin
) -> None:
    async with fake.client("wrong-token", event_hooks=HOOKS) as stranger:
        assert (await recall(stranger, "database")).status_code == 401
    assert (await api.get(V1 + "/elsewhere")).status_code == 404
    raw = b'{ "query" : "database" }'
    sent = await api.post(
        V1 + "/recall",
        content=raw,
        headers={"Content-Type": "application/json", "Lucy-Retry-Attempt": "3"},
    )
    malformed = await api.post(
        V1 + "/proposals",
        json=proposal_body(),
        headers={"Idempotency-Key": "bad key", "Lucy-Retry-Attempt": "11"},
    )
    polled = await status(api, "prop_" + "m" * 22)
    journal = await admin.requests()
    assert [row["request_id"] for row in journal] == [
        sent.headers["Lucy-Request-Id"],
        malformed.headers["Lucy-Request-Id"],
        polled.headers["Lucy-Request-Id"],
    ], "neither the 401 nor the unrouted request is journaled"
    assert journal[0] | {"at": None} == {
        "request_id": sent.headers["Lucy-Request-Id"],
        "at": None,
        "operation": "recall",
        "credential_id": "cred_dev_default",
        "tenant": "tenant_dev",
        "idempotency_key": None,
        "retry_attempt": 3,
        "body_sha256": hashlib.sha256(raw).hexdigest(),
        "status": 200,
        "charged": True,
        "replayed": False,
        "dropped": False,
        "fault_id": None,
    }
    assert (journal[1]["operation"], journal[1]["status"], journal[1]["charged"]) == ("propose", 400, False)
    assert (journal[1]["idempotency_key"], journal[1]["retry_attempt"]) == (None, 0)
    assert (journal[2]["operation"], journal[2]["status"]) == ("proposal_status", 404)
    assert journal[2]["body_sha256"] == hashlib.sha256(b"").hexdigest()


async def test_the_journal_timestamps_come_from_the_fake_clock(api, admin) -> None:
    clock = await admin.set_clock(now="2031-01-02T03:04:05.000000Z", frozen=True)
    await recall(api, "database")
    assert [row["at"] for row in await admin.requests()] == [clock["now"]]
    assert [row["at"] for row in await admin.ledger()] == [clock["now"]]


async def test_the_journal_filters_by_operation_and_credential(fake: InProcessFake, api, admin) -> None:
    other = await admin.create_credential()
    created = await propose(api)
    await recall(api, "database")
    await status(api, created.json()["proposal"]["id"])
    async with fake.client(other["token"], event_hooks=HOOKS) as client:
        theirs = await recall(client, "database")
    recalls = await admin.requests(operation="recall")
    assert [row["operation"] for row in recalls] == ["recall", "recall"]
    only_theirs = await admin.requests(credential_id=other["credential_id"])
    assert [row["request_id"] for row in only_theirs] == [theirs.headers["Lucy-Request-Id"]]
    both = await admin.requests(operation="propose", credential_id="cred_dev_default")
    assert [row["request_id"] for row in both] == [created.headers["Lucy-Request-Id"]]
    assert await admin.requests(operation="propose", credential_id=other["credential_id"]) == []


async def test_journal_limit_keeps_the_newest_rows_oldest_first(api, admin) -> None:
    ids = [(await recall(api, f"query {i}")).headers["Lucy-Request-Id"] for i in range(6)]
    await propose(api)
    newest = await admin.call("GET", "/requests", operation="recall", limit=4)
    assert [row["request_id"] for row in newest["items"]] == ids[2:]
    assert newest["next_cursor"] is None


async def test_journal_and_ledger_pages_follow_cursors_oldest_first(api, admin) -> None:
    ids = [(await recall(api, "database")).headers["Lucy-Request-Id"] for _ in range(130)]
    first = await admin.call("GET", "/requests")
    assert len(first["items"]) == 100
    assert first["next_cursor"] is not None
    second = await admin.call("GET", "/requests", cursor=first["next_cursor"])
    assert second["next_cursor"] is None
    assert [row["request_id"] for row in first["items"] + second["items"]] == ids
    ledger_first = await admin.call("GET", "/ledger", account="acct_dev")
    ledger_rest = await admin.call("GET", "/ledger", account="acct_dev", cursor=ledger_first["next_cursor"])
    rows = ledger_first["items"] + ledger_rest["items"]
    assert [row["request_id"] for row in rows] == ids
    assert [row["balance_after"] for row in rows] == list(range(999, 999 - 130, -1))
    newest = await admin.call("GET", "/requests", limit=110)
    rest = await admin.call("GET", "/requests", limit=110, cursor=newest["next_cursor"])
    assert [row["request_id"] for row in newest["items"] + rest["items"]] == ids[20:]


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/requests", {"operation": "delete"}),
        ("/requests", {"limit": "0"}),
        ("/requests", {"limit": "10001"}),
        ("/requests", {"cursor": "not-a-cursor"}),
        ("/requests", {"status": "200"}),
        ("/ledger", {"cursor": "%%%"}),
        ("/ledger", {"operation": "recall"}),
    ],
)
async def test_a_bad_journal_or_ledger_query_is_422(admin, path: str, query: dict[str, Any]) -> None:
    with pytest.raises(AdminError) as refused:
        await admin.call("GET", path, **query)
    assert (refused.value.status, refused.value.code) == (422, "invalid_request")


async def test_the_journal_is_bounded_by_journal_size(tmp_path) -> None:
    async with InProcessFake.start(tmp_path, journal_size=5) as small:
        async with small.client(event_hooks=HOOKS) as client:
            ids = [(await recall(client, "database")).headers["Lucy-Request-Id"] for _ in range(8)]
        journal = await small.admin.requests()
        assert [row["request_id"] for row in journal] == ids[-5:]
        assert len(await small.admin.ledger()) == 8, "the ledger is not bounded"


async def test_the_ledger_filters_by_account_and_records_admin_sets(fake: InProcessFake, api, admin) -> None:
    other = await admin.create_credential(account="acct_other", credits=10)
    await admin.set_balance("acct_dev", 3)
    mine = await recall(api, "database")
    async with fake.client(other["token"], event_hooks=HOOKS) as client:
        theirs = await recall(client, "database")
    await admin.set_balance("acct_other", 50)
    everything = await admin.ledger()
    assert [(row["account"], row["operation"]) for row in everything] == [
        ("acct_dev", "admin_set"),
        ("acct_dev", "recall"),
        ("acct_other", "recall"),
        ("acct_other", "admin_set"),
    ]
    dev = await admin.ledger(account="acct_dev")
    assert [(row["amount"], row["balance_after"]) for row in dev] == [(-997, 3), (-1, 2)]
    assert dev[1]["request_id"] == mine.headers["Lucy-Request-Id"]
    other_rows = await admin.ledger(account="acct_other")
    assert [(row["amount"], row["balance_after"]) for row in other_rows] == [(-1, 9), (41, 50)]
    assert other_rows[0]["request_id"] == theirs.headers["Lucy-Request-Id"]
    assert other_rows[1]["request_id"].startswith("req_")
    assert await admin.ledger(account="acct_nobody") == []


async def test_reset_empties_the_journal_and_the_ledger(api, admin) -> None:
    await recall(api, "database")
    await admin.set_balance("acct_dev", 5)
    await admin.reset()
    assert await admin.requests() == []
    assert await admin.ledger() == []
    assert (await recall(api, "database")).json()["credits"]["remaining"] == 999


async def test_credits_on_an_existing_account_is_an_admin_set_ledger_row(fake, api, admin) -> None:
    await recall(api, "anything")  # acct_dev: 1,000 → 999
    created = await admin.create_credential(account="acct_dev", credits=50)
    rows = await admin.ledger(account="acct_dev")
    assert [(row["operation"], row["amount"], row["balance_after"]) for row in rows] == [
        ("recall", -1, 999),
        ("admin_set", -949, 50),
    ]
    async with fake.client(created["token"]) as client:
        assert (await recall(client, "anything")).headers["Lucy-Credits-Remaining"] == "49"
    await admin.create_credential(account="acct_dev", credits=49)  # the balance it has: no row
    assert len(await admin.ledger(account="acct_dev")) == 3
    fresh = await admin.create_credential(account="acct_new", credits=70)  # a new account starts there
    assert fresh["account"] == "acct_new"
    assert await admin.ledger(account="acct_new") == []


async def test_a_balance_of_20_point_0_is_the_integer_20(admin) -> None:
    answer = await admin.call("PUT", "/accounts/acct_dev/credits", {"balance": 20.0})
    assert answer == {"account": "acct_dev", "balance": 20}
    assert isinstance(answer["balance"], int)
    assert (await admin.ledger(account="acct_dev"))[-1]["balance_after"] == 20


@pytest.mark.parametrize("max_rows", [1, 5, 150, 6_400])
def test_the_journal_never_holds_more_than_its_bound_and_drops_only_the_oldest(
    tmp_path: Path, max_rows: int
) -> None:
    database = Database(str(tmp_path / "journal.sqlite3"))
    database.create_schema()
    batch = journal.trim_batch(max_rows)
    assert batch == {1: 1, 5: 1, 150: 1, 6_400: 64}[max_rows]
    try:
        with database.write() as conn:
            for n in range(1, max_rows + 3 * batch + 2):
                row = JournalRow(f"req_{n}", "t", "recall", "cred", "tenant_dev", None, 0, "")
                journal.append(conn, row, max_rows=max_rows)
                count, oldest, newest = conn.execute(  # min and max apart: a seek each, not a scan
                    "SELECT count(*), (SELECT min(seq) FROM journal), (SELECT max(seq) FROM journal)"
                    " FROM journal"
                ).fetchone()
                assert count <= max_rows, f"{count} rows after request {n}"
                assert (oldest, newest) == (n - count + 1, n), "a row other than the oldest went"
                if n >= max_rows:
                    assert count > max_rows - batch, "more than one batch of the oldest went early"
            kept = [row[0] for row in conn.execute("SELECT request_id FROM journal ORDER BY seq")]
        assert kept == [f"req_{m}" for m in range(n - len(kept) + 1, n + 1)], "not the newest rows"
    finally:
        database.close()


async def test_each_tenant_keeps_its_own_journal_size_whatever_other_tenants_send(tmp_path) -> None:
    """A busy tenant on a shared fake never pushes another tenant's rows out of the journal."""
    async with InProcessFake.start(tmp_path, journal_size=5) as small:
        quiet, busy = await small.admin.create_tenant("quiet"), await small.admin.create_tenant("busy")
        async with small.client(quiet["credential"]["token"], event_hooks=HOOKS) as client:
            mine = [(await recall(client, "database")).headers["Lucy-Request-Id"] for _ in range(3)]
        async with small.client(busy["credential"]["token"], event_hooks=HOOKS) as client:
            theirs = [(await recall(client, "database")).headers["Lucy-Request-Id"] for _ in range(12)]
        async with small.client(quiet["credential"]["token"], event_hooks=HOOKS) as client:
            mine += [(await recall(client, "database")).headers["Lucy-Request-Id"] for _ in range(3)]
        rows = await small.admin.requests()
        kept = {
            name: [row["request_id"] for row in rows if row["tenant"] == name] for name in ["quiet", "busy"]
        }
        assert kept == {"quiet": mine[-5:], "busy": theirs[-5:]}


async def test_a_reset_or_restored_tenant_counts_its_journal_rows_afresh(tmp_path) -> None:
    """The rows a tenant's reset removes stop counting toward its bound; rows a restore brings in count."""
    async with InProcessFake.start(tmp_path, journal_size=3) as small:
        created = await small.admin.create_tenant("counted")
        async with small.client(created["admin_token"], event_hooks=HOOKS) as http:
            tenant_admin = FakeAdmin(http, tenant="counted")
            async with small.client(created["credential"]["token"], event_hooks=HOOKS) as client:

                async def recalls(n: int) -> list[str]:
                    return [(await recall(client, "database")).headers["Lucy-Request-Id"] for _ in range(n)]

                await recalls(3)
                await tenant_admin.reset()
                after_reset = await recalls(2)
                assert [row["request_id"] for row in await tenant_admin.requests()] == after_reset
                snapshot = await tenant_admin.call("GET", "/snapshot", include_journal="true")
                await tenant_admin.reset()
                await tenant_admin.call("PUT", "/snapshot", snapshot)
                later = await recalls(2)
                kept = [row["request_id"] for row in await tenant_admin.requests()]
                assert kept == [after_reset[1], *later]


class _Died(BaseException):
    """The process ended (a SIGKILL): nothing after this point runs."""


@pytest.mark.parametrize("fault", [None, {"status": 503}, {"drop_connection": True}])
async def test_a_charged_request_and_its_journal_row_are_one_commit_even_with_faults_armed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: dict[str, Any] | None
) -> None:
    """With several workers each request commits alone. A process that ends once the change is
    committed, before it answers, leaves the charge with its journal row (and the step-14 fault
    taken with both): with faults armed the row was a commit of its own after the fault's, so the
    ledger held a charge the journal never showed."""
    from fake_lucy.http.pipeline import V1Pipeline

    fake = InProcessFake(tmp_path / "workers.sqlite3", workers=2)  # no group commit: as each worker
    try:
        if fault is None:  # armed, but for another operation: none fires for this one
            await fake.admin.add_fault("recall", 503, phase="after_commit")
        else:
            await fake.admin.add_fault("propose", phase="after_commit", **{"status": 503, **fault})
        answered = V1Pipeline._fault

        def dies_before_answering(self: V1Pipeline, call: Any, phase: str) -> None:
            if phase == "after_commit":
                raise _Died
            answered(self, call, phase)

        monkeypatch.setattr(V1Pipeline, "_fault", dies_before_answering)
        async with fake.client() as api:
            with pytest.raises(_Died):
                await propose(api, proposal_body("Committed, then the process ended."))
        monkeypatch.undo()
        charges = [row["request_id"] for row in await fake.admin.ledger(account="acct_dev")]
        rows = [row for row in await fake.admin.requests() if row["operation"] == "propose"]
        assert len(charges) == 1
        assert [(row["request_id"], row["charged"]) for row in rows] == [(charges[0], True)]
        taken = [f for f in await fake.admin.faults() if f["operation"] == "propose"]
        if fault is not None:  # the fault that was to lose the answer was taken in that commit
            assert rows[0]["fault_id"] is not None
            assert [f["remaining"] for f in taken] in ([], [0])
    finally:
        await fake.aclose()
