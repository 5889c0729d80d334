"""Issue 14: the event stream (SPEC 3.7) — one event per change, ids, Last-Event-ID, keep-alive."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace

import anyio
import httpx
import pytest

from fake_lucy.app import create_app
from fake_lucy.domain import events
from fake_lucy.domain.defaults import DEV_TOKEN
from fake_lucy.http import events as http_events
from fake_lucy.http.events import KEEPALIVE_SECONDS, EventStream
from fake_lucy.runtime import FakeLucy
from fake_lucy.settings import FakeLucySettings
from fake_lucy.testing import AdminError, FakeAdmin, InProcessFake, InProcessTransport, LiveServer
from lucy_memory._contract import load_contract
from tests.helpers import approved_memory, proposal_body, propose, recall

pytestmark = pytest.mark.anyio

STREAM = {"Accept": "text/event-stream"}
JSON_BODY = {"Content-Type": "application/json"}


async def test_a_proposal_made_over_v1_is_a_proposal_created_event_with_an_id(
    fake: InProcessFake, api: httpx.AsyncClient
) -> None:
    async with fake.admin.watch() as stream:
        created = (await propose(api)).json()["proposal"]
        event = await stream.wait_for("proposal.created", timeout=10)
    assert event.id > 0
    assert event.tenant == "tenant_dev"
    assert event.at == created["created_at"]
    assert event.data == {
        "proposal_id": created["id"],
        "status": "pending",
        "kind": "decision",
        "scope": {"kind": "project", "id": "project_example"},
        "account": "acct_dev",
        "credential_id": "cred_dev_default",
    }


async def test_every_change_of_a_proposal_and_its_request_is_one_event_in_commit_order(
    fake: InProcessFake, api: httpx.AsyncClient, admin: FakeAdmin
) -> None:
    async with fake.admin.watch() as stream:
        first = (await propose(api, proposal_body("A.", topic="db"))).json()["proposal"]
        second = (await propose(api, proposal_body("B.", topic="db"))).json()["proposal"]
        await admin.approve(first["id"])
        last = await stream.wait_for("proposal.decided", proposal_id=second["id"], timeout=10)
    seen = [
        (e.type, e.data.get("proposal_id") or e.data.get("memory_id") or e.data.get("request_id"))
        for e in stream.seen
    ]
    ids = [e.id for e in stream.seen]
    assert ids == sorted(ids)
    assert [t for t, _ in seen] == [
        "proposal.created",
        "credits.changed",
        "request",
        "proposal.created",
        "credits.changed",
        "request",
        "memory.changed",
        "proposal.decided",
        "proposal.decided",
    ]
    memory = stream.seen[6].data
    assert memory["change"] == "created"
    assert stream.seen[7].data == {
        "proposal_id": first["id"],
        "status": "approved",
        "decided_by": "admin",
        "memory": {"id": memory["memory_id"], "version": 1},
    }
    assert last.data["status"] == "superseded"
    assert last.data["decided_by"] == "supersession"


async def test_expiry_and_the_auto_approve_policy_are_decisions_by_expiry_and_by_policy(
    fake: InProcessFake, api: httpx.AsyncClient, admin: FakeAdmin
) -> None:
    waiting = (await propose(api)).json()["proposal"]
    async with fake.admin.watch() as stream:
        await admin.advance_clock(8 * 86_400)
        clock = await stream.wait_for("clock.changed", timeout=10)
        await admin.proposals()  # a listing persists due expiries
        expired = await stream.wait_for("proposal.decided", proposal_id=waiting["id"], timeout=10)
        await admin.set_policy(auto_approve="all")
        auto = (await propose(api)).json()["proposal"]
        approved = await stream.wait_for("proposal.decided", proposal_id=auto["id"], timeout=10)
    assert clock.data["frozen"] is False
    assert clock.tenant is None
    assert (expired.data["status"], expired.data["decided_by"]) == ("expired", "expiry")
    assert (approved.data["status"], approved.data["decided_by"]) == ("approved", "policy")


async def test_deletes_restores_balances_faults_and_reset_are_events(
    fake: InProcessFake, api: httpx.AsyncClient, admin: FakeAdmin
) -> None:
    proposal = (await propose(api)).json()["proposal"]
    memory = (await admin.approve(proposal["id"]))["memory"]
    fault = await admin.add_fault("recall", 503)
    async with fake.admin.watch() as stream:
        await admin.delete_memory(memory["id"])
        await admin.restore_memory(memory["id"])
        await admin.set_balance("acct_dev", 50)
        assert (await recall(api, "anything")).status_code == 503
        await admin.reset()
        await stream.wait_for("reset", timeout=10)
    kinds = [(e.type, e.data.get("change")) for e in stream.seen]
    assert ("memory.changed", "deleted") in kinds
    assert ("memory.changed", "restored") in kinds
    balance = next(e for e in stream.seen if e.type == "credits.changed")
    assert balance.data["operation"] == "admin_set"
    assert balance.data["balance"] == 50
    fired = next(e for e in stream.seen if e.type == "fault.fired")
    assert fired.data["fault_id"] == fault["fault_id"]
    assert fired.data["status"] == 503
    request = next(e for e in stream.seen if e.type == "request")
    assert request.data["fault_id"] == fault["fault_id"]
    assert request.data["status"] == 503


async def test_last_event_id_resumes_right_after_that_event(
    fake: InProcessFake, api: httpx.AsyncClient
) -> None:
    async with fake.admin.watch() as stream:
        first = (await propose(api)).json()["proposal"]
        mark = await stream.wait_for("proposal.created", timeout=10)
        second = (await propose(api)).json()["proposal"]
        await stream.wait_for("proposal.created", proposal_id=second["id"], timeout=10)
    async with fake.admin.watch(after=mark.id) as resumed:
        again = await resumed.wait_for("proposal.created", timeout=10)
        first_seen = resumed.seen[0]
    assert first_seen.id == mark.id + 1
    assert again.data["proposal_id"] == second["id"] != first["id"]


async def test_one_requests_events_are_one_stored_row_with_an_id_each_and_a_resume_can_start_inside_it(
    fake: InProcessFake, api: httpx.AsyncClient
) -> None:
    async with fake.admin.watch() as stream:
        await propose(api)
        request = await stream.wait_for("request", timeout=10)
    mine = list(stream.seen)
    assert [e.type for e in mine] == ["proposal.created", "credits.changed", "request"]
    assert [e.id for e in mine] == [request.id - 2, request.id - 1, request.id]
    (rows,) = fake.fake.db.conn.execute(
        "SELECT count(*) FROM events WHERE seq >= ?", (mine[0].id,)
    ).fetchone()
    assert rows == 1, "the request's events took a row each"
    async with fake.admin.watch(after=mine[0].id) as resumed:
        await resumed.wait_for("request", timeout=10)
    assert [(e.id, e.type, e.data) for e in resumed.seen] == [(e.id, e.type, e.data) for e in mine[1:]]


async def test_a_resume_older_than_the_kept_history_starts_at_the_oldest_kept_event(
    fake: InProcessFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(events, "HISTORY", 100)
    with fake.fake.db.write() as conn:
        for n in range(600):
            events.emit(conn, "reset", {"n": n}, at="2026-01-01T00:00:00.000000Z", tenant=None)
        newest = events.resume_after(conn, None)
        kept = events.after(conn, 0, tenant=None, limit=1000)
        resumed = events.resume_after(conn, 1)
    assert len(kept) < 400  # pruned in steps, never more than HISTORY + one step behind
    assert kept[-1].id == newest
    assert resumed == kept[0].id - 1


async def test_a_resume_from_another_databases_id_gets_every_kept_event_of_this_one(
    fake: InProcessFake,
) -> None:
    """A reader of a fake started again on a newer file resumes with an id this database never
    gave: it has seen none of its events, the import's reset among them."""
    await fake.admin.reset()
    with fake.fake.db.write() as conn:
        newest = events.resume_after(conn, None)
        oldest = events.after(conn, 0, tenant=None)[0].id
        assert events.resume_after(conn, newest + 500) == oldest - 1
    async with fake.admin.watch(after=newest + 500) as resumed:
        first = await resumed.wait_for("reset", timeout=10)
    assert first.id == oldest  # from this database's first kept event, not from now on


async def test_a_reader_resuming_on_another_file_gets_its_whole_history_whichever_wrote_more(
    tmp_path: Path,
) -> None:
    """A fake started again on another file: the reader's last id is one the old file gave. The new
    file may have written more events than that id counts (were both counted from 1, the reader
    would resume in the middle of its history, past its first changes): it still gets all of them."""
    async with InProcessFake.start(tmp_path / "old") as old, old.admin.watch() as stream:
        await old.admin.reset()
        last_seen = (await stream.wait_for("reset", timeout=10)).id
    async with InProcessFake.start(tmp_path / "new") as new:
        async with new.client() as api:
            made = [(await propose(api, proposal_body(f"Change {n}."))).json()["proposal"] for n in range(4)]
        async with new.admin.watch(after=last_seen) as resumed:
            await resumed.wait_for("proposal.created", proposal_id=made[-1]["id"], timeout=10)
        with new.fake.db.write() as conn:
            kept = events.after(conn, 0, tenant=None)
    seen = [e.id for e in resumed.seen]
    assert seen == [e.id for e in kept][: len(seen)]  # from its first event on, none skipped
    created = [e.data["proposal_id"] for e in resumed.seen if e.type == "proposal.created"]
    assert created == [p["id"] for p in made]


async def test_a_restart_with_reset_on_start_is_a_reset_event_and_the_start_of_the_history(
    tmp_path: Path,
) -> None:
    """``--reset-on-start`` wipes the state as a reset does: a reader resuming from before it meets
    the ``reset`` (a live page reloads on it), and a reader from the start (``0``) begins with it,
    not among the changes of a state that is gone."""
    async with InProcessFake.start(tmp_path) as before:
        async with before.client() as api:
            await propose(api)
        async with before.admin.watch(after=0) as stream:
            last_seen = (await stream.wait_for("request", timeout=10)).id
    async with InProcessFake.start(tmp_path, reset_on_start=True) as after:
        async with after.admin.watch(after=last_seen) as resumed:
            reset = await resumed.wait_for("reset", timeout=10)
        async with after.client() as api:
            made = (await propose(api)).json()["proposal"]
        async with after.admin.watch(after=0) as fresh:
            await fresh.wait_for("proposal.created", timeout=10)
    assert [e.type for e in resumed.seen] == ["reset"]
    assert reset.tenant is None
    assert [(e.type, e.data.get("proposal_id")) for e in fresh.seen] == [
        ("reset", None),
        ("proposal.created", made["id"]),
    ]


async def test_a_resume_from_before_the_kept_history_starts_at_the_first_event_of_the_oldest_row(
    fake: InProcessFake,
) -> None:
    """A v1 request's events share one row (``credits.changed`` and ``request``): a resume from
    before the history, or from another database, gets both, not the row's last alone."""
    with fake.fake.db.write() as conn:
        conn.execute("DELETE FROM events")
    async with fake.client() as http:
        assert (await recall(http, "x")).status_code == 200
    with fake.fake.db.write() as conn:
        kept = events.after(conn, 0, tenant=None)
        assert [e.type for e in kept] == ["credits.changed", "request"]
        assert events.resume_after(conn, kept[-1].id + 100) == kept[0].id - 1
        assert events.resume_after(conn, 0) == kept[0].id - 1


async def test_the_stream_needs_the_admin_token_and_a_numeric_last_event_id(fake: InProcessFake) -> None:
    async with fake.client(None) as anonymous:
        refused = await anonymous.get("/_fake/events", headers=STREAM)
    async with fake.client(fake.admin_token) as http:
        malformed = await http.get("/_fake/events", headers={**STREAM, "Last-Event-ID": "12x"})
    assert refused.status_code == 401
    assert refused.json()["code"] == "unauthenticated"
    assert malformed.status_code == 400
    assert malformed.json()["code"] == "invalid_header"
    with pytest.raises(AdminError) as caught:
        async with FakeAdmin(fake.client("wrong")).watch():
            pass
    assert caught.value.status == 401


@contextlib.asynccontextmanager
async def _quick_stream_app(
    tmp_path: Path, *, poll: float = 0.01, keepalive: float = 0.05, token: str | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    """An app whose streams poll every ``poll`` seconds; a client with the admin token (or ``token``)."""
    fake = FakeLucy(FakeLucySettings(database=str(tmp_path / "quick.sqlite3")))
    app = create_app(fake, event_stream=EventStream(fake, poll=poll, keepalive=keepalive))
    try:
        async with httpx.AsyncClient(
            base_url="http://127.0.0.1:8787",
            transport=InProcessTransport(app),
            headers={"Authorization": f"Bearer {token or fake.admin_token}"},
        ) as http:
            yield http
    finally:
        fake.close()


async def test_an_idle_stream_sends_comment_lines_to_stay_open(tmp_path: Path) -> None:
    async with (
        _quick_stream_app(tmp_path) as http,
        http.stream("GET", "/_fake/events", headers=STREAM) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.aiter_lines()
        comments = []
        while len(comments) < 3:
            line = await anext(lines)
            if line.startswith(":"):
                comments.append(line)
    assert comments == [": connected", ": keep-alive", ": keep-alive"]


async def test_a_change_made_by_the_streams_own_worker_is_sent_at_once_not_at_its_next_poll(
    tmp_path: Path,
) -> None:
    """The poll is for other workers' events: here it is an hour, and this worker's change arrives."""
    async with _quick_stream_app(tmp_path, poll=3600, keepalive=3600) as http:
        dev = FakeAdmin(http)
        async with dev.watch() as stream:
            created = (await propose(http, headers={"Authorization": f"Bearer {DEV_TOKEN}"})).json()
            event = await stream.wait_for("proposal.created", timeout=5)
            await dev.approve(created["proposal"]["id"])
            decided = await stream.wait_for("proposal.decided", timeout=5)
    assert event.data["proposal_id"] == decided.data["proposal_id"] == created["proposal"]["id"]
    assert decided.data["status"] == "approved"


async def test_events_of_one_worker_reach_a_stream_served_by_another_process(tmp_path: Path) -> None:
    """Two processes on one file (what two workers are): a stream on one sees the other's change."""
    with LiveServer.start(tmp_path) as first:
        other = FakeLucy(FakeLucySettings(database=first.fake.settings.database), initialise=False)
        app = create_app(other)
        try:
            async with first.admin_client() as http:
                admin = FakeAdmin(http)
                async with (
                    admin.watch() as stream,
                    httpx.AsyncClient(
                        base_url="http://127.0.0.1:8787",
                        transport=InProcessTransport(app),
                        headers={"Authorization": f"Bearer {first.dev_token}"},
                    ) as elsewhere,
                ):
                    created = (await propose(elsewhere)).json()["proposal"]
                    event = await stream.wait_for("proposal.created", timeout=10)
        finally:
            other.close()
    assert event.data["proposal_id"] == created["id"]


async def test_a_server_with_an_open_stream_shuts_down(tmp_path: Path) -> None:
    with LiveServer.start(tmp_path) as server:
        async with (
            server.admin_client() as http,
            http.stream("GET", "/_fake/events", headers=STREAM, timeout=None) as response,
        ):
            assert response.status_code == 200
            server.stop()  # joins uvicorn's thread for 10 s at most
            assert not server.thread.is_alive()  # the stream ended with the shutdown, not after it


async def test_every_answer_of_the_stream_is_one_the_contract_and_the_control_openapi_describe(
    fake: InProcessFake,
) -> None:
    """``service_endpoints/events`` of contracts/fake-control (and so ``GET /_fake/openapi.json``)
    lists each status the stream answers, with its codes and headers."""
    described = load_contract("fake-control")["service_endpoints"]["events"]
    async with fake.client(None) as anonymous:
        answers = {"401": await anonymous.get("/_fake/events", headers=STREAM)}
        document = (await anonymous.get("/_fake/openapi.json")).json()
    async with fake.client(fake.admin_token) as http:
        answers["400"] = await http.get("/_fake/events", headers={**STREAM, "Last-Event-ID": "12x"})
        answers["405"] = await http.post("/_fake/events", headers=STREAM)
        answers["422"] = await http.get("/_fake/events?after=-1", headers=STREAM)
        answers["413"] = await http.request(
            "GET", "/_fake/events", content=b"{" + b" " * 70_000 + b"}", headers={**STREAM, **JSON_BODY}
        )
        answers["415"] = await http.request("GET", "/_fake/events", content=b"xx", headers=STREAM)
        refused_bodies = [
            await http.request("GET", "/_fake/events", content=b"{", headers={**STREAM, **JSON_BODY}),
            await http.request("GET", "/_fake/events", content=b'{"a": 1}', headers={**STREAM, **JSON_BODY}),
        ]
        braces = {"content": b"{}", "headers": {**STREAM, **JSON_BODY}}
        async with http.stream("GET", "/_fake/events", **braces) as empty:
            assert empty.status_code == 200  # {} is no body
        async with http.stream("GET", "/_fake/events", headers=STREAM) as streaming:
            lines = streaming.aiter_lines()
            first = [await anext(lines), await anext(lines)]
            answers["200"] = streaming
    assert first == ["retry: 1000", ": connected"]
    assert [(r.status_code, r.json()["code"]) for r in refused_bodies] == [
        (400, "invalid_json"),
        (422, "invalid_request"),
    ]
    # 431: uvicorn's parser refuses a head over 16 KiB on every path (tests/fake/test_http_parser_errors)
    assert sorted(answers) == sorted(set(described["responses"]) - {"431"})
    for status, response in answers.items():
        spec = described["responses"][status]
        assert str(response.status_code) == status
        assert {name.lower() for name in spec["headers"]} <= set(response.headers), status
        if status == "200":
            assert response.headers["content-type"].startswith(spec["media_type"])
        else:
            assert response.json()["code"] in spec["codes"], status
    served = document["paths"][described["path"]]
    assert set(served) == {"get"}
    assert served["get"]["operationId"] == described["operation_id"]
    assert sorted(served["get"]["responses"]) == sorted(described["responses"])


async def test_a_reader_from_the_start_begins_at_the_newest_reset_it_sees(
    fake: InProcessFake, api: httpx.AsyncClient, admin: FakeAdmin
) -> None:
    """A reset is back to a fresh database: ``after=0`` starts at it, not at a previous test's
    events (the plugin resets between tests); a tenant's reader starts at its own tenant's reset."""
    before = (await propose(api)).json()["proposal"]
    await admin.reset()
    after = (await propose(api)).json()["proposal"]
    async with fake.admin.watch(after=0) as stream:
        await stream.wait_for("proposal.created", timeout=10, proposal_id=after["id"])
    assert stream.seen[0].type == "reset"
    assert before["id"] not in str([event.data for event in stream.seen])
    made = await admin.create_tenant("tenant-fresh")
    async with fake.client(made["admin_token"]) as http:
        own = FakeAdmin(http, tenant="tenant-fresh")
        async with fake.client(made["credential"]["token"]) as tenant_api:
            old = (await propose(tenant_api)).json()["proposal"]
            await own.reset()
            new = (await propose(tenant_api)).json()["proposal"]
        async with own.watch(after=0) as tenant_stream:
            await tenant_stream.wait_for("proposal.created", timeout=10, proposal_id=new["id"])
    assert (tenant_stream.seen[0].type, tenant_stream.seen[0].tenant) == ("reset", "tenant-fresh")
    assert old["id"] not in str([event.data for event in tenant_stream.seen])


async def test_a_recorded_finding_is_a_finding_event_holding_the_findings_listing_item(
    fake: InProcessFake, api: httpx.AsyncClient, admin: FakeAdmin
) -> None:
    """SPEC 3.7 lists ``finding``: a recall sent again after a 503 is recorded and sent as it is
    listed by ``GET /_fake/findings``, with its tenant and time."""
    await admin.add_fault("recall", 503)
    async with fake.admin.watch() as stream:
        assert (await recall(api, "deploys")).status_code == 503
        assert (await recall(api, "deploys")).status_code == 200
        event = await stream.wait_for("finding", timeout=10)
    [finding] = await admin.findings()
    assert finding["code"] == "recall_retried"
    assert event.data == finding
    assert (event.tenant, event.at) == ("tenant_dev", finding["at"])
    assert [e.type for e in stream.seen].count("finding") == 1


async def test_approving_a_replacement_is_a_memory_changed_superseded_event_with_the_new_version(
    fake: InProcessFake, api: httpx.AsyncClient, admin: FakeAdmin
) -> None:
    memory = (await approved_memory(api, admin, "We use PostgreSQL 15."))["memory"]
    replacement = await propose(
        api, proposal_body("We use PostgreSQL 16.", replaces={"memory_id": memory["id"], "version": 1})
    )
    assert replacement.status_code == 201, replacement.text
    async with fake.admin.watch() as stream:
        await admin.approve(replacement.json()["proposal"]["id"])
        changed = await stream.wait_for("memory.changed", timeout=10, memory_id=memory["id"])
        await stream.wait_for("proposal.decided", timeout=10)
    assert changed.data == {"memory_id": memory["id"], "version": 2, "change": "superseded"}
    assert changed.tenant == "tenant_dev"
    assert [e.data["change"] for e in stream.seen if e.type == "memory.changed"] == ["superseded"]


async def test_the_served_streams_keep_alive_comes_within_15_seconds_of_silence(
    fake: InProcessFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC 3.7: a comment line at least every 15 s. The app as served (no shortened ``EventStream``)
    reads a stand-in monotonic clock that says 15 s passed since the stream connected: its first
    idle poll (0.2 s) sends the keep-alive; a longer default would send none before the deadline."""
    assert KEEPALIVE_SECONDS <= 15
    assert EventStream(fake.fake).keepalive == KEEPALIVE_SECONDS
    readings = iter([0.0])  # when the stream connected; every later reading is 15 s after it
    monkeypatch.setattr(http_events, "time", SimpleNamespace(monotonic=lambda: next(readings, 15.0)))
    async with (
        fake.client(fake.admin_token) as http,
        http.stream("GET", "/_fake/events", headers=STREAM) as response,
    ):
        lines = response.aiter_lines()
        comments: list[str] = []
        with anyio.fail_after(5):
            while len(comments) < 2:
                line = await anext(lines)
                if line.startswith(":"):
                    comments.append(line)
    assert comments == [": connected", ": keep-alive"]


async def test_the_admins_wait_for_returns_the_first_matching_event_after_the_id_it_is_given(
    api: httpx.AsyncClient, admin: FakeAdmin
) -> None:
    """The async ``FakeAdmin.wait_for`` (SPEC 3.7): from ``after=0`` (this test's reset) it returns
    the first event of the type whose data has the given values, skipping the others."""
    first = (await propose(api, proposal_body("First."))).json()["proposal"]
    second = (await propose(api, proposal_body("Second."))).json()["proposal"]
    named = await admin.wait_for("proposal.created", after=0, timeout=5, proposal_id=second["id"])
    earliest = await admin.wait_for("proposal.created", after=0, timeout=5)
    assert (named.type, named.tenant, named.data["proposal_id"]) == (
        "proposal.created",
        "tenant_dev",
        second["id"],
    )
    assert earliest.data["proposal_id"] == first["id"]
    assert earliest.id < named.id
    resumed = await admin.wait_for("proposal.created", after=earliest.id, timeout=5)
    assert resumed == named
