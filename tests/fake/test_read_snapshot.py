"""``Database.in_snapshot``: a short read runs at once on the event loop's thread; a read that runs
past its CPU budget is interrupted and runs again on the reading thread, as do the next few."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fake_lucy.store import connection
from fake_lucy.store.connection import Database

pytestmark = pytest.mark.anyio

# Counts to n in SQLite's virtual machine: a read as long as n makes it.
COUNT = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) SELECT count(*) FROM n"


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    db = Database(str(tmp_path / "reads.sqlite3"))
    try:
        yield db
    finally:
        db.close()


def read(n: int) -> Callable[[sqlite3.Connection], tuple[int, int]]:
    """A read as long as ``n`` makes it, that says which thread ran it and what it counted."""

    def work(conn: sqlite3.Connection) -> tuple[int, int]:
        (count,) = conn.execute(COUNT, (n,)).fetchone()
        return threading.get_ident(), count

    return work


async def test_a_short_read_runs_at_once_on_the_event_loops_thread(database: Database) -> None:
    thread, count = await database.in_snapshot(read(100))
    assert (thread, count) == (threading.get_ident(), 100)


async def test_a_read_past_its_budget_runs_again_on_the_reading_thread_and_so_do_the_next_few(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connection, "INLINE_BUDGET_S", 0.0)  # any read that reaches a check is over
    monkeypatch.setattr(connection, "INLINE_PAUSE", 2)
    loop_thread = threading.get_ident()
    thread, count = await database.in_snapshot(read(200_000))
    assert thread != loop_thread, "the long read stayed on the event loop"
    assert count == 200_000, "the read that ran again gave a different answer"
    paused = [await database.in_snapshot(read(10)) for _ in range(2)]
    assert [t != loop_thread for t, _ in paused] == [True, True], "the next reads tried the loop again"
    monkeypatch.setattr(connection, "INLINE_BUDGET_S", 1.0)
    assert await database.in_snapshot(read(10)) == (loop_thread, 10), "after the pause: at once again"


async def test_a_read_that_fails_on_the_event_loop_raises_its_own_error(database: Database) -> None:
    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("SELECT * FROM no_such_table")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        await database.in_snapshot(broken)
    assert await database.in_snapshot(read(3)) == (threading.get_ident(), 3), "the snapshot was not ended"


async def test_a_short_read_uses_the_writing_connection_whose_cache_its_commits_keep(
    database: Database,
) -> None:
    seen = await database.in_snapshot(lambda conn: conn)
    assert seen is database.conn
    assert not database.conn.in_transaction, "the snapshot was ended"


async def test_a_short_read_runs_at_once_while_a_long_one_holds_the_reading_thread(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    started = threading.Event()

    def long_read(conn: sqlite3.Connection) -> int:
        started.set()
        release.wait(timeout=10)
        return int(conn.execute("SELECT 1").fetchone()[0])

    monkeypatch.setattr(connection, "INLINE_PAUSE", 1)
    monkeypatch.setattr(connection, "INLINE_BUDGET_S", 0.0)
    assert (await database.in_snapshot(read(200_000)))[1] == 200_000  # over budget: ran on the thread
    monkeypatch.setattr(connection, "INLINE_BUDGET_S", 1.0)
    blocked = asyncio.ensure_future(database.in_snapshot(long_read))  # the paused read: to the thread
    try:
        assert await asyncio.to_thread(started.wait, 10)
        assert await database.in_snapshot(read(5)) == (threading.get_ident(), 5), "it waited for the thread"
    finally:
        release.set()
    assert await blocked == 1
