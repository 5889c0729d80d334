"""A database file the fake cannot write (a full disk, a read-only file or mount): one line, never a
traceback; nothing half done; at start, no file left behind that this start made.

A full disk is SQLite's ``max_page_count`` reached: the same ``SQLITE_FULL`` a full file system gives."""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from pathlib import Path

import pytest

from fake_lucy.cli import main
from fake_lucy.runtime import DatabaseUnusableError, FakeLucy
from fake_lucy.settings import FakeLucySettings
from fake_lucy.store import connection
from fake_lucy.store.connection import Database
from fake_lucy.testing import InProcessFake
from tests.helpers import proposal_body, propose

pytestmark = pytest.mark.anyio


def _fill(conn: sqlite3.Connection) -> None:
    """No page more for this connection: every write that needs one fails as on a full disk."""
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    conn.execute(f"PRAGMA max_page_count = {pages}")


async def test_a_full_disk_while_serving_is_a_retryable_503_and_the_retry_succeeds_once_there_is_room(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = InProcessFake(tmp_path / "full.sqlite3")
    try:
        async with fake.client() as api:
            _fill(fake.fake.db.conn)
            answers = []
            for n in range(200):  # until a write needs a page the file cannot have
                body, key = proposal_body(f"Fact number {n} of many."), uuid.uuid4().hex
                answer = await propose(api, body, key=key)
                answers.append(answer.status_code)
                if answer.status_code != 201:
                    break
            assert answer.status_code == 503, answers
            assert answer.json()["code"] == "unavailable"
            assert answer.json()["retryable"] is True
            assert answer.json()["detail"] == (
                "the fake cannot write its database (database or disk is full); nothing was done"
            )
            assert not any(record.exc_info for record in caplog.records)  # one line, no traceback
            assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [
                "cannot write the database while serving POST /api/agent-memory/v1/proposals:"
                " database or disk is full"
            ]
            made = len(answers) - 1
            fake.fake.db.conn.execute("PRAGMA max_page_count = 1073741823")  # room again
            again = await propose(api, body, key=key)
            assert again.status_code == 201  # executed now, not a replay: nothing was done before
            assert "Idempotent-Replayed" not in again.headers
            assert int(again.headers["Lucy-Credits-Remaining"]) == 1000 - made - 1
    finally:
        await fake.aclose()


async def test_a_full_disk_on_the_control_api_is_the_same_one_line_503(tmp_path: Path) -> None:
    fake = InProcessFake(tmp_path / "full.sqlite3")
    try:
        async with fake.client(fake.admin_token) as http:
            _fill(fake.fake.db.conn)
            for n in range(200):
                answer = await http.post("/_fake/tenants", json={"tenant": f"team-{n}"})
                if answer.status_code != 201:
                    break
        assert (answer.status_code, answer.json()["code"]) == (503, "unavailable")
    finally:
        await fake.aclose()


def test_a_new_database_that_cannot_be_made_ready_is_one_error_and_the_next_start_makes_it_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = Database.create_schema

    def on_a_full_disk(self: Database) -> None:
        self.conn.execute("PRAGMA max_page_count = 1")
        created(self)

    path = tmp_path / "new.sqlite3"
    with monkeypatch.context() as full:
        full.setattr(Database, "create_schema", on_a_full_disk)
        with pytest.raises(DatabaseUnusableError) as refused:
            FakeLucy(FakeLucySettings(database=str(path)))
    assert str(refused.value) == f"cannot write the database {path} (database or disk is full)"
    again = FakeLucy(FakeLucySettings(database=str(path)))  # room again: the file left is made ready
    try:
        assert again.seed_outcome == "applied"
    finally:
        again.close()


def test_a_new_file_that_holds_tables_when_the_start_fails_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process starting on the same new file may have made it ready meanwhile: a failed
    start never removes the file."""
    made = FakeLucy._initialise

    def then_stopped(self: FakeLucy, then: object) -> None:
        made(self, None)  # the tables and the seed, committed (as another process's would be)
        raise KeyboardInterrupt

    monkeypatch.setattr(FakeLucy, "_initialise", then_stopped)
    path = tmp_path / "shared.sqlite3"
    with pytest.raises(KeyboardInterrupt):
        FakeLucy(FakeLucySettings(database=str(path)))
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT count(*) FROM server_state").fetchone() == (1,)
    finally:
        conn.close()


def test_an_older_database_whose_upgrade_cannot_be_written_is_kept_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "kept.sqlite3"
    FakeLucy(FakeLucySettings(database=str(path))).close()
    conn = sqlite3.connect(path)
    conn.execute("DROP INDEX ix_ledger_tenant_id")  # as an older fake-lucy wrote it
    conn.execute("ALTER TABLE ledger DROP COLUMN tenant_id")
    conn.execute("VACUUM")  # no free page left: the upgrade needs new ones
    conn.close()
    before = path.read_bytes()
    created = Database.create_schema

    def on_a_full_disk(self: Database) -> None:
        _fill(self.conn)
        created(self)

    monkeypatch.setattr(Database, "create_schema", on_a_full_disk)
    with pytest.raises(DatabaseUnusableError) as refused:
        FakeLucy(FakeLucySettings(database=str(path)))
    assert str(refused.value) == f"cannot write the database {path} (database or disk is full)"
    assert path.read_bytes() == before


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
def test_serve_on_a_device_that_is_always_full_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["serve", "--database", "/dev/full", "--port", "0"]) == 1
    assert (
        capsys.readouterr().err
        == "fake-lucy: cannot write the database /dev/full (database or disk is full)\n"
    )


async def test_a_write_lock_held_past_the_busy_timeout_is_a_retryable_503_not_a_500(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another process holding the file's write lock longer than the busy timeout (a huge snapshot
    restored on another worker held it 10-19 s): SQLite gives up with "database is locked", and
    nothing was done, so the answer is the retryable 503 of a storage failure, not a 500."""
    path = tmp_path / "busy.sqlite3"
    fake = InProcessFake(path)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        fake.fake.db.conn.execute("PRAGMA busy_timeout = 50")  # not 10 s: the test waits for it
        other.execute("BEGIN IMMEDIATE")  # the other worker's long write
        async with fake.client() as api:
            body, key = proposal_body("Written once the lock is free."), uuid.uuid4().hex
            answer = await propose(api, body, key=key)
            assert (answer.status_code, answer.json()["code"]) == (503, "unavailable"), answer.text
            assert answer.json()["retryable"] is True
            assert "database is locked" in answer.json()["detail"]
            assert not any(record.exc_info for record in caplog.records)  # one line, no traceback
            other.execute("ROLLBACK")
            again = await propose(api, body, key=key)
            assert again.status_code == 201  # executed now: nothing was done before
            assert "Idempotent-Replayed" not in again.headers
    finally:
        other.close()
        await fake.aclose()


def test_serve_on_a_database_another_process_keeps_locked_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds the file's write lock past the busy timeout: one line, not the
    traceback of SQLite's 'database is locked'."""
    from fake_lucy.store import connection

    path = tmp_path / "locked.sqlite3"
    FakeLucy(FakeLucySettings(database=str(path))).close()
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_MS", 50)  # not 10 s: the test waits for it
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("UPDATE server_state SET id = id")
        assert main(["serve", "--database", str(path), "--port", "0"]) == 1
    finally:
        other.close()
    assert capsys.readouterr().err == f"fake-lucy: cannot write the database {path} (database is locked)\n"


async def test_a_database_damaged_inside_its_pages_is_refused_at_start_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its header is sound, so it opened, and every write was then a 503 "retryable" for ever
    (SQLite: database disk image is malformed); SQLite's quick_check at start finds it."""
    path = tmp_path / "damaged.sqlite3"
    fake = InProcessFake(path)
    async with fake.client() as api:
        for n in range(60):  # pages enough that the damage lands inside the tables
            assert (await propose(api, proposal_body(f"Fact {n}: " + "words " * 80))).status_code == 201
    await fake.aclose()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with path.open("r+b") as file:
        file.seek(3 * 4096)
        file.write(b"\xff" * 4096)
    assert main(["serve", "--database", str(path), "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"fake-lucy: {path} is damaged (SQLite's quick_check: ")
    assert err.endswith(
        "); start on another --database, with --import of a snapshot taken before, to go on from there\n"
    )
    assert len(err.splitlines()) == 1


def _full_disk_at(statement: str, words: str, code: int) -> type[sqlite3.Connection]:
    """A connection whose ``statement`` fails as SQLite fails on a file system with no byte free
    (the first write of a new file, or the WAL's files of an existing one)."""

    class OnAFullDisk(sqlite3.Connection):
        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:  # type: ignore[override]
            if sql == statement:
                error = sqlite3.OperationalError(words)
                error.sqlite_errorcode = code  # type: ignore[attr-defined]
                raise error
            return super().execute(sql, *args)  # type: ignore[arg-type]

    return OnAFullDisk


@pytest.mark.parametrize(
    ("statement", "full", "code"),
    [
        ("PRAGMA journal_mode = WAL", "database or disk is full", sqlite3.SQLITE_FULL),
        ("SELECT name FROM sqlite_master WHERE type = 'table'", "disk I/O error", sqlite3.SQLITE_IOERR),
    ],
    ids=["a new file's first write", "an existing file's WAL"],
)
def test_serve_where_the_disk_has_no_byte_free_is_one_line_naming_the_write_and_exit_1(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    statement: str,
    full: str,
    code: int,
) -> None:
    """Not a traceback (a new file on a full disk), nor "cannot be opened as a SQLite database" (an
    existing file, which is not to blame): the line the README gives a database that cannot be
    written."""
    from fake_lucy.store import connection

    path = tmp_path / "full.sqlite3"
    if "sqlite_master" in statement:
        FakeLucy(FakeLucySettings(database=str(path))).close()
    failing = _full_disk_at(statement, full, code)
    connect = sqlite3.connect
    monkeypatch.setattr(connection.sqlite3, "connect", lambda *a, **k: connect(*a, **k, factory=failing))
    assert main(["serve", "--database", str(path), "--port", "0"]) == 1
    assert capsys.readouterr().err == f"fake-lucy: cannot write the database {path} ({full})\n"


def test_a_read_that_fails_at_start_is_named_a_read_not_a_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing disk (SQLite's ``IOERR_READ``) while the file is opened is one line that says the
    database cannot be read: neither the file's fault nor a write that failed."""
    path = tmp_path / "unreadable.sqlite3"
    FakeLucy(FakeLucySettings(database=str(path))).close()

    class FailingReads(sqlite3.Connection):
        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:  # type: ignore[override]
            if sql.startswith("SELECT name FROM sqlite_master"):
                error = sqlite3.OperationalError("disk I/O error")
                error.sqlite_errorcode = sqlite3.SQLITE_IOERR_READ  # type: ignore[attr-defined]
                raise error
            return super().execute(sql, *args)

    connect = sqlite3.connect
    monkeypatch.setattr(connection.sqlite3, "connect", lambda *a, **k: connect(*a, **k, factory=FailingReads))
    with pytest.raises(DatabaseUnusableError) as refused:
        FakeLucy(FakeLucySettings(database=str(path)))
    assert str(refused.value) == f"cannot read the database {path} (disk I/O error)"
