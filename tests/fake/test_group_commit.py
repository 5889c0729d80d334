"""Group commit (``Database.write_in_group``): the request transactions of one event-loop turn share
one ``COMMIT``; each can fail alone; none is answered before the commit; any other transaction
commits the open group first; with several workers each transaction commits on its own."""

from __future__ import annotations

import asyncio
import sqlite3
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fake_lucy.domain import recall as domain_recall
from fake_lucy.runtime import FakeLucy
from fake_lucy.settings import FakeLucySettings
from fake_lucy.store import connection
from fake_lucy.store.connection import Database
from fake_lucy.testing import FakeAdmin, InProcessFake
from tests.helpers import propose, recall, status

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # a turn of asyncio's event loop is what a group is made of


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "groups.sqlite3")


@pytest.fixture
def database(path: str) -> Iterator[Database]:
    db = Database(path, group_commits=True)
    db.conn.execute("CREATE TABLE t (v TEXT)")
    try:
        yield db
    finally:
        db.close()


def committed(path: str) -> list[str]:
    """What another connection (another process) sees."""
    other = sqlite3.connect(path)
    try:
        return sorted(v for (v,) in other.execute("SELECT v FROM t"))
    finally:
        other.close()


def count_commits(conn: sqlite3.Connection) -> list[str]:
    seen: list[str] = []
    conn.set_trace_callback(lambda sql: seen.append(sql) if sql == "COMMIT" else None)
    return seen


async def insert(db: Database, value: str, *, fail: bool = False) -> None:
    with db.write_in_group() as conn:
        conn.execute("INSERT INTO t (v) VALUES (?)", (value,))
        if fail:
            raise ValueError(value)
    await db.group_committed()


async def test_the_transactions_of_one_turn_share_one_commit_and_are_visible_once_awaited(
    database: Database, path: str
) -> None:
    commits = count_commits(database.conn)
    await asyncio.gather(*(insert(database, f"v{i}") for i in range(5)))
    assert commits == ["COMMIT"]
    assert committed(path) == ["v0", "v1", "v2", "v3", "v4"]


async def test_before_group_committed_returns_another_connection_sees_nothing(
    database: Database, path: str
) -> None:
    with database.write_in_group() as conn:
        conn.execute("INSERT INTO t (v) VALUES ('pending')")
    assert committed(path) == []
    await database.group_committed()
    assert committed(path) == ["pending"]


async def test_a_lone_transaction_commits_at_once_and_waits_a_turn_only_when_others_are_ready(
    database: Database, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns: list[float] = []

    async def counting_sleep(delay: float) -> None:
        """Records the delay asked for and yields one turn of the loop, as ``sleep(0)`` does."""
        turns.append(delay)
        turn = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(turn.set_result, None)
        await turn

    class Asyncio(types.ModuleType):
        """``asyncio`` as the connection module sees it, with the counting ``sleep``: patched there
        alone, so that another task's ``asyncio.sleep`` (a fixture's) counts no turn."""

        sleep = staticmethod(counting_sleep)

        def __getattr__(self, name: str) -> Any:
            return getattr(asyncio, name)

    monkeypatch.setattr(connection, "asyncio", Asyncio("asyncio"))
    await insert(database, "alone")
    assert (turns, committed(path)) == ([], ["alone"]), "nothing else was ready: no turn to wait for"
    asyncio.get_running_loop().call_soon(lambda: None)  # something else to run first
    await insert(database, "with company")
    assert (turns, committed(path)) == ([0], ["alone", "with company"])


async def test_a_transaction_that_raises_is_rolled_back_alone(database: Database, path: str) -> None:
    results = await asyncio.gather(
        insert(database, "kept"),
        insert(database, "undone", fail=True),
        insert(database, "also kept"),
        return_exceptions=True,
    )
    assert [type(r).__name__ for r in results] == ["NoneType", "ValueError", "NoneType"]
    assert committed(path) == ["also kept", "kept"]


async def test_any_other_transaction_commits_the_open_group_first(database: Database, path: str) -> None:
    with database.write_in_group() as conn:
        conn.execute("INSERT INTO t (v) VALUES ('grouped')")
    with database.write() as conn:
        conn.execute("INSERT INTO t (v) VALUES ('alone')")
    assert committed(path) == ["alone", "grouped"]
    with database.write_in_group() as conn:
        conn.execute("INSERT INTO t (v) VALUES ('before a read')")
    with database.read():
        assert committed(path) == ["alone", "before a read", "grouped"]
    await database.group_committed()  # already committed: returns at once


async def test_a_snapshot_read_commits_the_open_group_so_that_another_process_can_write_meanwhile(
    database: Database, path: str
) -> None:
    with database.write_in_group() as conn:
        conn.execute("INSERT INTO t (v) VALUES ('grouped')")

    def another_process_writes(_: sqlite3.Connection) -> list[str]:
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # "database is locked" at once if the group held the lock
            other.execute("INSERT INTO t (v) VALUES ('meanwhile')")
            other.execute("COMMIT")
        finally:
            other.close()
        return committed(path)

    assert await database.in_snapshot(another_process_writes) == ["grouped", "meanwhile"]
    await database.group_committed()


async def test_a_member_cancelled_while_waiting_still_commits_the_group(
    database: Database, path: str
) -> None:
    joined = asyncio.Event()

    async def member() -> None:
        with database.write_in_group() as conn:
            conn.execute("INSERT INTO t (v) VALUES ('cancelled member')")
        joined.set()  # this test's wake-up is now ready: the member waits a turn for the group
        await database.group_committed()

    task = asyncio.create_task(member())
    await joined.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert committed(path) == ["cancelled member"]


class _FailingCommit:
    """The connection, except that ``COMMIT`` fails as a full disk makes it fail (the next
    ``times`` commits; ``None``: every one)."""

    def __init__(self, conn: sqlite3.Connection, times: int | None = None) -> None:
        self._conn = conn
        self._times = times

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "COMMIT" and self._times != 0:
            if self._times is not None:
                self._times -= 1
            raise sqlite3.OperationalError("database or disk is full")
        return self._conn.execute(sql, *args)


async def test_a_failed_commit_rolls_the_group_back_and_every_member_gets_the_error(
    database: Database, path: str
) -> None:
    real = database.conn
    database.conn = _FailingCommit(real)  # type: ignore[assignment]
    try:
        results = await asyncio.gather(insert(database, "a"), insert(database, "b"), return_exceptions=True)
    finally:
        database.conn = real
    assert [str(r) for r in results] == ["database or disk is full"] * 2
    assert not real.in_transaction
    assert committed(path) == []
    await insert(database, "after")  # the connection works on
    assert committed(path) == ["after"]


async def test_without_group_commits_each_transaction_commits_at_once(path: str) -> None:
    db = Database(path, group_commits=False)
    try:
        db.conn.execute("CREATE TABLE t (v TEXT)")
        with db.write_in_group() as conn:
            conn.execute("INSERT INTO t (v) VALUES ('alone')")
        assert committed(path) == ["alone"]
    finally:
        db.close()


async def test_concurrent_v1_requests_share_commits_and_each_is_journaled_and_charged(
    fake: InProcessFake, api: httpx.AsyncClient, admin: FakeAdmin
) -> None:
    assert fake.fake.db.group_commits, "one worker groups its commits"
    proposal_id = (await propose(api)).json()["proposal"]["id"]
    commits = count_commits(fake.fake.db.conn)
    polls = await asyncio.gather(*(status(api, proposal_id) for _ in range(6)))
    fake.fake.db.conn.set_trace_callback(None)
    assert [r.status_code for r in polls] == [200] * 6
    assert 1 <= len(commits) < 6, f"{len(commits)} commits for 6 concurrent requests"
    ids = {r.headers["Lucy-Request-Id"] for r in polls}
    assert ids <= {row["request_id"] for row in await admin.requests(operation="proposal_status")}
    charged = {row["request_id"] for row in await admin.ledger(account="acct_dev")}
    assert ids <= charged
    remaining = sorted(int(r.headers["Lucy-Credits-Remaining"]) for r in polls)
    assert remaining == list(range(remaining[0], remaining[0] + 6)), "each charged once, in turn"


@pytest.mark.parametrize(("workers", "grouped"), [(1, True), (2, False)])
def test_only_a_single_worker_groups_its_commits(tmp_path: Path, workers: int, grouped: bool) -> None:
    fake = FakeLucy(FakeLucySettings(database=str(tmp_path / "w.sqlite3"), workers=workers))
    try:
        assert fake.db.group_commits is grouped
    finally:
        fake.close()


async def test_when_sqlite_rolls_back_the_whole_group_its_members_learn_it_and_the_next_starts_afresh(
    database: Database, path: str
) -> None:
    database.conn.execute(
        "PRAGMA max_page_count = 50"
    )  # a nearly full disk: SQLITE_FULL ends the transaction

    async def too_big() -> None:
        with database.write_in_group() as conn:
            conn.execute("INSERT INTO t (v) VALUES ('lost')")
            conn.execute("INSERT INTO t (v) VALUES (zeroblob(2000000))")
        await database.group_committed()

    results = await asyncio.gather(
        insert(database, "a"), too_big(), insert(database, "c"), return_exceptions=True
    )
    assert [str(r) for r in results] == ["database or disk is full", "database or disk is full", "None"]
    assert committed(path) == ["c"], "a's row went with the group, and a was told; c started a new group"
    assert database.conn.in_transaction is False


async def test_a_transaction_that_raises_alone_in_its_group_ends_the_group(database: Database) -> None:
    with pytest.raises(ValueError, match="alone"):
        await insert(database, "alone", fail=True)
    assert not database.conn.in_transaction, "no empty transaction left holding the write lock"


async def test_commit_joined_raises_when_the_callers_own_group_failed(database: Database, path: str) -> None:
    real = database.conn
    with database.write_in_group() as conn:
        conn.execute("INSERT INTO t (v) VALUES ('before a hold')")
    database.conn = _FailingCommit(real)  # type: ignore[assignment]
    try:
        with pytest.raises(sqlite3.OperationalError, match="disk is full"):
            database.commit_joined()
    finally:
        database.conn = real
    assert committed(path) == []
    database.commit_joined()  # nothing joined, nothing open: nothing to say


async def test_a_request_that_fails_unexpectedly_has_its_writes_committed_before_its_500(
    fake: InProcessFake, api: httpx.AsyncClient, admin: FakeAdmin, monkeypatch: pytest.MonkeyPatch
) -> None:
    await admin.set_policy(rate_limit_per_minute=5)  # step 6 takes a token in a grouped transaction

    def a_bug(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug in the fake")

    monkeypatch.setattr(domain_recall, "prepare", a_bug)
    response = await recall(api, "postgres")
    assert response.status_code == 500
    db = fake.fake.db
    assert not db.conn.in_transaction, "the group was left open, holding the write lock"
    other = sqlite3.connect(db.path, timeout=0)
    try:
        assert other.execute("SELECT count(*) FROM rate_buckets").fetchone() == (1,), (
            "the token take was lost"
        )
    finally:
        other.close()


async def test_a_commit_that_fails_before_an_in_flight_hold_fails_the_request_and_keeps_the_fault(
    fake: InProcessFake, api: httpx.AsyncClient, admin: FakeAdmin
) -> None:
    fault = await admin.add_fault("propose", 503, phase="in_flight", hold_ms=20, count=1)
    db = fake.fake.db
    real = db.conn
    db.conn = _FailingCommit(real, times=1)  # type: ignore[assignment]  # the commit before the hold
    try:
        failed = await propose(api, key="hold-1")
    finally:
        db.conn = real
    assert failed.status_code == 500, "its in-flight marker and the fault's firing were never committed"
    assert [(f["fault_id"], f["remaining"]) for f in await admin.faults()] == [(fault["fault_id"], 1)]
    assert [r["request_id"] for r in await admin.requests(operation="propose")] == []


def _temporary_files() -> list[str]:
    """The files this process holds open that SQLite made for itself (``etilqs_*``, unlinked)."""
    held = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue
        if "etilqs_" in target:
            held.append(target)
    return held


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads /proc to see the open files")
def test_a_group_keeps_its_requests_undo_pages_in_memory_not_in_a_temporary_file(database: Database) -> None:
    """Each member of a group is a ``SAVEPOINT``, so SQLite keeps the pages it changes as they were
    (to roll that member back alone). Past 64 KiB that sub-journal went to a temporary file, written
    page by page: most of a propose's system calls. It stays in memory (``temp_store``)."""
    conn = database.conn
    conn.executemany("INSERT INTO t (v) VALUES (?)", [("x" * 200,) for _ in range(2_000)])  # ~100 pages
    before = set(_temporary_files())  # other connections' of this process, if any
    with database.write_in_group() as tx:
        tx.execute("UPDATE t SET v = upper(v)")  # every page changed inside the member's savepoint
    with database.write_in_group() as tx:
        tx.execute("UPDATE t SET v = lower(v)")
        assert set(_temporary_files()) - before == set()
    database.commit_group()
    assert conn.execute("SELECT count(*) FROM t WHERE v = ?", ("x" * 200,)).fetchone()[0] == 2_000


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads /proc to see the open files")
def test_a_write_outside_a_group_keeps_its_undo_pages_in_a_temporary_file_not_in_memory(
    database: Database,
) -> None:
    """A reset, a restore or an administrative change may change a large part of the file: the
    copies of the pages it changes go to a temporary file past 64 KiB, as SQLite does by default,
    not into the process's memory, also after a group kept its own in memory."""
    conn = database.conn
    conn.executemany("INSERT INTO t (v) VALUES (?)", [("x" * 200,) for _ in range(2_000)])  # ~100 pages
    with database.write_in_group() as tx:
        tx.execute("UPDATE t SET v = upper(v)")
    before = set(_temporary_files())
    with database.write() as tx:
        tx.execute("SAVEPOINT large")  # the undo pages of a large change, as a restore's would be
        tx.execute("UPDATE t SET v = lower(v)")
        assert set(_temporary_files()) - before, "the undo pages were kept in memory"
        tx.execute("RELEASE large")
    assert conn.execute("SELECT count(*) FROM t WHERE v = ?", ("x" * 200,)).fetchone()[0] == 2_000
