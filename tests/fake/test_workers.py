"""Issue 3, point 8: ``fake-lucy serve --workers 2`` on one SQLite file behaves as one server.

Points 2 and 3 of the issue, repeated against two uvicorn worker processes sharing one database.
Each client holds one keep-alive connection, opened one at a time, and ``/proc`` tells which worker
accepted it: the scenarios run only once both workers hold some of the connections.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest

from fake_lucy.domain.defaults import DEV_TOKEN
from fake_lucy.runtime import FakeLucy
from fake_lucy.settings import FakeLucySettings
from fake_lucy.store.connection import fold_wal
from fake_lucy.testing import FakeAdmin, ServeProcess
from fake_lucy.testing.admin import EventWatch
from fake_lucy.testing.fakes import poll_until
from fake_lucy.testing.tls import shared_tls_context
from tests.conftest import HOOKS
from tests.fake.test_billing import assert_parallel_spending_stops_at_zero
from tests.fake.test_idempotency import assert_in_flight_conflict, assert_one_key_under_concurrency
from tests.helpers import V1, proposal_body, propose

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads /proc to see which worker serves"),
]

ESTABLISHED = "01"


def server_pids(server: ServeProcess) -> set[int]:
    """The ``fake-lucy serve`` process and its descendants (the supervisor's uvicorn workers)."""
    pids, pending = set(), [server.process.pid]
    while pending:
        pid = pending.pop()
        pids.add(pid)
        for children in Path(f"/proc/{pid}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                pending.extend(int(child) for child in children.read_text().split())
    return pids


def connections_by_pid(server: ServeProcess) -> dict[str, int]:
    """The established connections to the server's port (server side): socket inode → the pid holding it.

    Only the server's own processes are searched, so a machine running many others stays fast.
    """
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rsplit(":", 1)[1], 16) == server.port and fields[3] == ESTABLISHED:
            inodes.add(f"socket:[{fields[9]}]")
    held: dict[str, int] = {}
    for pid in server_pids(server):
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            with contextlib.suppress(OSError):
                target = str(fd.readlink())
                if target in inodes:
                    held[target] = pid
    return held


async def clients_on_both_workers(
    server: ServeProcess, stack: contextlib.AsyncExitStack, count: int
) -> list[tuple[httpx.AsyncClient, int]]:
    """``count`` clients, each with its own open connection, and the worker pid that accepted it."""
    clients: list[tuple[httpx.AsyncClient, int]] = []
    for _ in range(count * 10):
        client = await stack.enter_async_context(server.client(event_hooks=HOOKS, timeout=30))
        before = connections_by_pid(server)
        assert (await client.get("/healthz")).status_code == 200
        # New sockets only: a worker may close an idle keep-alive connection meanwhile.
        gained = {pid for inode, pid in connections_by_pid(server).items() if inode not in before}
        assert len(gained) == 1, gained
        clients.append((client, gained.pop()))
        if len(clients) >= count and len({pid for _, pid in clients[-count:]}) == 2:
            return clients[-count:]
    raise AssertionError("the connections never reached both workers")


def both_workers_answer(server: ServeProcess) -> Callable[[], bool]:
    """A readiness check: one new connection per call, true once each of two workers accepted one.

    ``/healthz`` answers as soon as the first worker serves; on a busy machine the second can take
    seconds longer, and until then every connection lands on the first.
    """
    seen: set[int] = set()

    def check() -> bool:
        with httpx.Client(base_url=server.base_url, verify=shared_tls_context()) as client:
            before = connections_by_pid(server)
            if client.get("/healthz").status_code == 200:
                seen.update(pid for inode, pid in connections_by_pid(server).items() if inode not in before)
        return len(seen) >= 2

    return check


@pytest.fixture(scope="module")
def _two_workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    database = tmp_path_factory.mktemp("workers") / "shared.sqlite3"
    with ServeProcess.start(["--workers", "2", "--database", str(database)]) as server:
        server.wait_until(both_workers_answer(server), "serving on both workers")
        yield server


@pytest.fixture
def served(_two_workers: ServeProcess) -> ServeProcess:
    response = httpx.post(
        _two_workers.base_url + "/_fake/reset",
        headers={"Authorization": f"Bearer {_two_workers.admin_token}"},
        verify=shared_tls_context(),
    )
    response.raise_for_status()
    return _two_workers


@pytest.fixture
async def served_admin(served: ServeProcess) -> AsyncIterator[FakeAdmin]:
    async with served.client(served.admin_token, event_hooks=HOOKS) as client:
        yield FakeAdmin(client)


async def test_two_workers_charge_exactly_the_balance_under_parallel_load(
    served: ServeProcess, served_admin: FakeAdmin
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        clients = await clients_on_both_workers(served, stack, 40)
        await assert_parallel_spending_stops_at_zero([c for c, _ in clients], served_admin)


async def test_two_workers_make_one_proposal_and_one_charge_for_sixteen_concurrent_uses_of_one_key(
    served: ServeProcess, served_admin: FakeAdmin
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        clients = await clients_on_both_workers(served, stack, 16)
        await assert_one_key_under_concurrency([c for c, _ in clients], served_admin)


async def test_an_in_flight_marker_set_by_one_worker_is_a_409_on_the_other(
    served: ServeProcess, served_admin: FakeAdmin
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        clients = await clients_on_both_workers(served, stack, 2)
        (first, first_pid), (second, second_pid) = clients
        assert first_pid != second_pid
        await assert_in_flight_conflict(first, second, served_admin)


async def test_a_replay_a_reused_key_and_retention_are_the_same_on_both_workers(
    served: ServeProcess, served_admin: FakeAdmin
) -> None:
    await served_admin.set_clock(frozen=True)
    async with contextlib.AsyncExitStack() as stack:
        (one, _), (other, _) = await clients_on_both_workers(served, stack, 2)
        first = await propose(one, key="across-workers")
        replayed = await propose(other, key="across-workers")
        assert replayed.content == first.content
        assert replayed.headers["Idempotent-Replayed"] == "true"
        assert replayed.headers["Lucy-Original-Request-Id"] == first.headers["Lucy-Request-Id"]
        reused = await propose(other, proposal_body("Another decision."), key="across-workers")
        assert (reused.status_code, reused.json()["code"]) == (422, "idempotency_key_reused")
        await served_admin.advance_clock(24 * 60 * 60)
        fresh = await propose(other, key="across-workers")
        assert "Idempotent-Replayed" not in fresh.headers
        assert fresh.json()["proposal"]["id"] != first.json()["proposal"]["id"]
    assert len((await served_admin.proposals())["items"]) == 2


async def test_a_revocation_and_a_policy_change_reach_the_worker_that_did_not_make_them(
    served: ServeProcess, served_admin: FakeAdmin
) -> None:
    created = await served_admin.create_credential()
    bearer = {"Authorization": f"Bearer {created['token']}"}
    async with contextlib.AsyncExitStack() as stack:
        clients = await clients_on_both_workers(served, stack, 2)
        for client, _ in clients:  # each worker has authenticated both tokens
            assert (await client.post(V1 + "/recall", json={"query": "x"}, headers=bearer)).status_code == 200
            assert (await propose(client)).json()["proposal"]["status"] == "pending"
        await served_admin.revoke(created["credential_id"])
        await served_admin.set_policy(auto_approve="all")
        for client, _ in clients:
            assert (await client.post(V1 + "/recall", json={"query": "x"}, headers=bearer)).status_code == 401
            assert (await propose(client)).json()["proposal"]["status"] == "approved"


async def test_a_deleted_tenants_tokens_are_refused_at_once_by_both_workers(
    served: ServeProcess, served_admin: FakeAdmin
) -> None:
    created = await served_admin.create_tenant()
    v1 = {"Authorization": f"Bearer {created['credential']['token']}"}
    control = {"Authorization": f"Bearer {created['admin_token']}"}
    async with contextlib.AsyncExitStack() as stack:
        clients = await clients_on_both_workers(served, stack, 2)
        for client, _ in clients:  # each worker has authenticated the tenant's tokens
            assert (await client.post(V1 + "/recall", json={"query": "x"}, headers=v1)).status_code == 200
            assert (await client.get("/_fake/clock", headers=control)).status_code == 200
        await served_admin.delete_tenant(created["tenant"])
        for client, _ in clients:
            assert (await client.post(V1 + "/recall", json={"query": "x"}, headers=v1)).status_code == 401
            assert (await client.get("/_fake/clock", headers=control)).status_code == 401


async def test_a_console_session_and_the_event_stream_span_both_workers(served: ServeProcess) -> None:
    """Issue 14, must-hold 2 and 6: a session started on one worker works on the other, and a
    stream served by either worker delivers a proposal made on the other."""
    console = "/_fake/console"
    origin = {"Origin": served.base_url}
    admin = {"Authorization": f"Bearer {served.admin_token}", "Accept": "text/event-stream"}
    async with contextlib.AsyncExitStack() as stack:
        (one, one_pid), (other, other_pid) = await clients_on_both_workers(served, stack, 2)
        assert one_pid != other_pid
        login = await one.post(console + "/login", data={"token": served.admin_token}, headers=origin)
        assert login.status_code == 303
        other.cookies.set("fake_lucy_console", login.cookies["fake_lucy_console"])
        page = await other.get(console + "/")
        assert page.status_code == 200
        assert "Review queue" in page.text
        for streaming, making in ((one, other), (other, one)):
            async with streaming.stream("GET", "/_fake/events", headers=admin) as response:
                watch = EventWatch(response.aiter_lines())
                created = (await propose(making)).json()["proposal"]
                event = await watch.wait_for("proposal.created", timeout=5, proposal_id=created["id"])
                assert event.data["proposal_id"] == created["id"]


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for its parent to read its end."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"


def test_the_workers_end_when_their_supervisor_is_killed(tmp_path: Path) -> None:
    """``kill -9`` of ``fake-lucy serve`` lets it stop nothing: its workers stop by themselves,
    instead of holding the port (and the database) with nobody to stop them."""
    server = ServeProcess(["--workers", "2", "--database", str(tmp_path / "orphans.sqlite3")])
    workers: set[int] = set()
    try:
        server.wait_ready()
        server.wait_until(both_workers_answer(server), "serving on both workers")
        workers = server_pids(server) - {server.process.pid}
        assert len(workers) >= 2
        server.process.kill()
        server.process.wait()  # not its pipes: a worker left running would hold them open
        gone = "the workers outlived their supervisor"
        poll_until(lambda: not any(_alive(pid) for pid in workers), gone, 30)
    finally:
        for pid in workers:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        server.stop()


def test_a_stop_of_two_workers_leaves_every_change_in_the_database_file_itself(tmp_path: Path) -> None:
    """After a clean stop, the file alone holds the data: no write-ahead log is left beside it that
    a copy of the file would lose (one worker folds it back when it closes; with several, the
    supervisor does once they have ended)."""
    database = tmp_path / "stopped.sqlite3"
    with ServeProcess.start(["--workers", "2", "--database", str(database)]) as server:
        server.wait_until(both_workers_answer(server), "serving on both workers")
        created = httpx.post(
            server.base_url + V1 + "/proposals",
            json=proposal_body(),
            headers={"Authorization": f"Bearer {DEV_TOKEN}", "Idempotency-Key": "stopped"},
            verify=shared_tls_context(),
        ).json()["proposal"]["id"]
        _, err = server.stop()
        assert server.process.returncode == 0, err
    assert not Path(f"{database}-wal").exists()
    copy = tmp_path / "copy.sqlite3"
    copy.write_bytes(database.read_bytes())  # the file alone, as a backup or a CI artifact takes it
    with contextlib.closing(sqlite3.connect(copy)) as conn:
        assert conn.execute("SELECT count(*) FROM proposals WHERE id = ?", (created,)).fetchone() == (1,)


def test_folding_the_log_back_never_waits_for_another_connection_on_the_file(tmp_path: Path) -> None:
    """A file another connection still uses (a second server, a reader) keeps its log, at once:
    waiting would hold the write lock from that connection's writes, and the stop, for as long."""
    database = tmp_path / "shared.sqlite3"
    FakeLucy(FakeLucySettings(database=str(database))).close()
    with contextlib.closing(sqlite3.connect(database, isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")  # another process writing
        other.execute("UPDATE server_state SET auth_epoch = auth_epoch + 1")
        folded: list[bool] = []
        folding = threading.Thread(target=lambda: folded.append(fold_wal(str(database))))
        folding.start()
        folding.join(timeout=5)  # the busy timeout it must not wait for is 10 s
        assert not folding.is_alive(), "fold_wal waited for the other connection's lock"
        assert folded == [False]
        other.execute("COMMIT")
    assert fold_wal(str(database)) is True
    assert not Path(f"{database}-wal").exists()
