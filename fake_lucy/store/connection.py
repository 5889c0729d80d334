"""The SQLite connection and the transaction helpers.

One connection per process, used only from the event loop's thread: every transaction runs to
completion without an ``await`` inside it, so within a process transactions never interleave, and
``BEGIN IMMEDIATE`` with a ``busy_timeout`` serialises writers across worker processes.

Group commit (``group_commits``, one worker): the v1 requests whose transactions run in the same
turn of the event loop share one ``BEGIN IMMEDIATE`` … ``COMMIT``, each inside a savepoint of its
own (``write_in_group``), and each answers only after that ``COMMIT`` (``group_committed``). A
``COMMIT`` costs one WAL frame per page written, and a turn's requests write mostly the same pages
(the journal's, the ledger's, the account's), so under concurrent load most of a commit's cost is
shared. A request alone pays two statements and one pass of the event loop more. Every other
transaction of the connection (``write``, ``read``) and every ``in_snapshot`` commits the open group
first, so that the write lock is held only while the turn's requests run their transactions. A
failed ``COMMIT``, or a statement after which SQLite rolled back the whole transaction (a full disk),
fails the group: each member learns it before it answers (``group_committed``, ``commit_joined``).

``in_snapshot`` serves a read (a recall's ranking) in a snapshot of its own, without the write
lock. A short one runs at once on the event loop's thread, on this connection, whose page cache
its own commits leave warm (a second connection's cache is dropped whenever the file changed, and a
ranking that reads it cold took ~60% longer); one that is still running after ``INLINE_BUDGET_S``
is stopped and runs again on a second, read-only connection on a thread of its own at a lower CPU
priority, while the event loop goes on serving other requests (SQLite releases the GIL while it
works, and a cheap request wins the CPU over a ranking). WAL lets it read while any connection
writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TypeVar

import anyio.to_thread

from fake_lucy.files import check_writable
from fake_lucy.store.schema import (
    ADDED_COLUMNS,
    ADDED_INDEXES,
    LEGACY_FTS_TABLE,
    SCHEMA_VERSION,
    fts_ddl,
    fts_table,
    table_statements,
)

__all__ = [
    "MEMORY",
    "Database",
    "DatabaseUnusableError",
    "ForeignDatabaseError",
    "fold_wal",
    "storage_failure",
]


class ForeignDatabaseError(ValueError):
    """The database file is not one fake-lucy created (or not a SQLite file at all)."""


class DatabaseUnusableError(ValueError):
    """The database file could not be written (a full disk, a read-only file or mount), or read (a
    failing disk), while it was being opened or made ready: nothing of it was changed."""


# What SQLite says when the file is a database it cannot write (not one it cannot read as one).
_UNWRITABLE_CODES = frozenset({sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR})
# Of its I/O errors, the ones a read met (a failing disk): the file is not to blame either.
_READ_ERRORS = frozenset({sqlite3.SQLITE_IOERR_READ, sqlite3.SQLITE_IOERR_SHORT_READ})


def _unwritable(path: str, exc: sqlite3.Error) -> DatabaseUnusableError | None:
    code = getattr(exc, "sqlite_errorcode", 0)
    if code in _READ_ERRORS:
        return DatabaseUnusableError(f"cannot read the database {path} ({exc})")
    if (code & 0xFF) in _UNWRITABLE_CODES:
        return DatabaseUnusableError(f"cannot write the database {path} ({exc})")
    return None


MEMORY = ":memory:"
BUSY_TIMEOUT_MS = 10_000
# The WAL is copied back into the file once it holds this many pages (SQLite's default is 1,000).
# A copy writes each page once however many commits changed it, and a request's commit changes
# mostly the same few pages (the tails of the journal, events and ledger, the indexes' upper
# levels, the balance): ten times the default copies them a tenth as often. In process a propose
# took ~22 % less CPU (best of 3 × 7,000 calls on the 100-tenant store); the WAL grows to ~40 MB
# of 4 KB pages before a copy (the last connection to close copies it back and removes it).
WAL_CHECKPOINT_PAGES = 10_000
READER_NICENESS = 10  # the reading thread's nice value (Linux sets it per thread; elsewhere none)
# A snapshot read runs on the event loop while it takes at most this much CPU time (most rankings take a
# twentieth of it); a longer one is interrupted and runs on the reading thread instead, and so do the
# next ``INLINE_PAUSE`` reads (a store whose reads are long does not pay for a try each time).
INLINE_BUDGET_S = 0.002
INLINE_CHECK_STEPS = 2_000  # SQLite virtual-machine steps between two looks at the clock
INLINE_PAUSE = 8
T = TypeVar("T")


def _lower_priority() -> None:
    with contextlib.suppress(OSError, AttributeError):  # no per-thread priority here: run as is
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), READER_NICENESS)


class _OverBudget(Exception):
    """A read on the event loop ran past its budget and was interrupted."""


class _Group:
    """The request transactions of one event-loop turn, committed together."""

    __slots__ = ("error", "members")

    def __init__(self) -> None:
        self.members = 0  # transactions released into it
        self.error: sqlite3.Error | None = None


def _others_ready() -> bool:
    """Whether the event loop has callbacks to run before a task that yields now runs again: only
    those (other requests' tasks among them) can join the open group. A request that arrives
    meanwhile starts in the turn after, so with none ready the group can be committed at once.
    asyncio's loop keeps them in ``_ready``; a loop without it (uvloop) is assumed to have some,
    and under trio (through anyio) there is no asyncio loop and no turn to share."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    ready = getattr(loop, "_ready", None)
    return ready is None or len(ready) > 0


class _GroupRolledBack(sqlite3.OperationalError):
    """A group whose transaction SQLite rolled back by itself (it does so on a full disk)."""


def _rolled_back() -> sqlite3.OperationalError:
    """The error of a group whose transaction SQLite rolled back by itself."""
    return _GroupRolledBack("the transaction was rolled back by SQLite")


# What SQLite answers when the file cannot be written or read as it should (a full disk, a file or
# mount made read-only, an I/O error, a file gone or damaged), or not within the busy timeout
# (another process held its write lock longer: a huge snapshot restored on another worker): the
# transaction did not commit, and the same request succeeds later.
_STORAGE_CODES = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_CORRUPT,
        sqlite3.SQLITE_NOTADB,
        sqlite3.SQLITE_PERM,
    }
)


def storage_failure(exc: BaseException) -> str | None:
    """SQLite's words when ``exc`` says the database file could not be used (nothing of the
    transaction stands: SQLite rolls it back); None for any other error."""
    if isinstance(exc, _GroupRolledBack):
        return str(exc)
    if isinstance(exc, sqlite3.Error) and (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _STORAGE_CODES:
        return str(exc)
    return None


# The group the current task's last ``write_in_group`` joined (each request runs in a task of its own).
_joined: ContextVar[_Group | None] = ContextVar("fake_lucy_group", default=None)


def fold_wal(path: str) -> bool:
    """Copy the write-ahead log back into the database file and remove it, once every process that
    had the file open has ended (the workers of ``fake-lucy serve``, which stop without closing
    their connections): the file alone then holds every change. A connection that closes last does
    this by itself. Returns whether the log is gone; a file still open elsewhere (another server on
    it, a reader) or not writable keeps its log at once, without waiting, which loses nothing: the
    next connection reads it."""
    if path == MEMORY or not Path(path).exists():
        return True
    try:
        # no busy handler: while another connection reads or writes the file, waiting for it
        # would hold the write lock from its other writers and the stop for as long
        with contextlib.closing(sqlite3.connect(path, isolation_level=None, timeout=0)) as conn:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.Error:
        return False
    return not busy and not Path(f"{path}-wal").exists()


def _unmakeable(path: Path, exc: OSError) -> str:
    """Why the folders on the way to a database file cannot be made, said as ``check_writable``
    says it for a snapshot file."""
    try:
        check_writable(path)
    except ValueError as reason:
        return str(reason)
    return f"cannot make the folder {path.parent} for the database {path} ({exc.strerror or exc})"


class Database:
    """A SQLite database file (or ``:memory:``) and this process's connection to it."""

    def __init__(self, path: str, *, group_commits: bool = False) -> None:
        self.path = path
        self.closed = False
        self._reader: sqlite3.Connection | None = None  # used by one snapshot at a time (the lock)
        self._reader_lock = threading.Lock()
        self._reading_thread: ThreadPoolExecutor | None = None
        self._inline_pause = 0  # reads left to send to the thread straight away
        self.group_commits = group_commits
        self._group: _Group | None = None  # open: its BEGIN IMMEDIATE ran, its COMMIT not yet
        self._temp_in_memory = False  # SQLite's temp_store (see ``_keep_temporary_data``)
        if path != MEMORY:
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # a file or a broken link in the way, no permission
                raise ForeignDatabaseError(_unmakeable(Path(path), exc)) from None
        try:
            self.conn = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, cached_statements=256
            )
            self.conn.row_factory = sqlite3.Row
            self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            tables = {
                row[0] for row in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
        except sqlite3.DatabaseError as exc:  # not a database, a directory, no permission; a full disk
            with contextlib.suppress(AttributeError, sqlite3.Error):
                self.conn.close()
            unwritable = _unwritable(path, exc)
            if unwritable is not None:  # the file is not to blame: said as a write that failed is
                raise unwritable from None
            raise ForeignDatabaseError(f"{path} cannot be opened as a SQLite database ({exc})") from None
        if tables and "server_state" not in tables:  # refused before anything is written to it
            self.conn.close()
            raise ForeignDatabaseError(
                f"{path} holds tables of another application (no server_state table);"
                " give fake-lucy a file of its own with --database"
            )
        (version,) = self.conn.execute("PRAGMA user_version").fetchone()
        if version > SCHEMA_VERSION:  # its tables are not the ones this fake-lucy writes and reads
            self.conn.close()
            raise ForeignDatabaseError(
                f"{path} was written by a newer fake-lucy (schema version {version}; this one knows"
                f" up to {SCHEMA_VERSION}): run that fake-lucy, or give this one another --database"
            )
        if tables:  # a file of its own, damaged inside its pages, would answer every write 503 for ever
            self._check_pages(path)
        try:
            if path != MEMORY:
                # writes to the file (a new one's header, the WAL's files): a full disk fails here
                self.conn.execute("PRAGMA journal_mode = WAL")
                # WAL + OFF: a commit is handed to the OS, so it survives a crash or kill of the process
                # (what a fake needs), not an OS crash or power loss. NORMAL's fsync at every
                # checkpoint cost ~40% of a recall's time (benchmarks/RESULTS.md).
                self.conn.execute("PRAGMA synchronous = OFF")
                self.conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
            self.conn.execute("PRAGMA foreign_keys = OFF")
        except sqlite3.Error as exc:
            self.conn.close()
            raise _unwritable(path, exc) or exc from None

    def _check_pages(self, path: str) -> None:
        """SQLite's ``quick_check`` of an existing file (~0.2 s for 100 MB): a damaged one is refused
        at start, in one line naming the way back, rather than served."""
        try:
            (verdict,) = self.conn.execute("PRAGMA quick_check(1)").fetchone()
        except sqlite3.DatabaseError as exc:
            verdict = str(exc)
        verdict = " ".join(str(verdict).split())  # SQLite's lines, as one
        if verdict != "ok":
            self.conn.close()
            raise ForeignDatabaseError(
                f"{path} is damaged (SQLite's quick_check: {verdict}); start on another --database,"
                " with --import of a snapshot taken before, to go on from there"
            )

    def create_schema(self) -> None:
        """Create every table that does not exist yet, with its indexes; bring a file written by an
        older fake-lucy up to date; record ``SCHEMA_VERSION`` — all in one transaction (idempotent),
        so that a process killed on the way leaves the file as it was. A file holding another
        application's tables, or written by a newer fake-lucy, was refused when it was opened."""
        conn = self.conn
        with self.write():
            existing = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            for table, statements in table_statements().items():
                if table not in existing:
                    for statement in statements:
                        conn.execute(statement)
            count_journal = "journal" in existing and "journal_counts" not in existing
            added: set[tuple[str, str]] = set()
            for table, column, declaration in ADDED_COLUMNS:
                existing = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
                if column not in existing:
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
                    added.add((table, column))
            for statement in ADDED_INDEXES:
                conn.execute(statement)
            self._move_access_times()
            self._fill_tenant_columns(added)
            if count_journal:  # a file written when the journal was bounded as a whole
                conn.execute(
                    "INSERT INTO journal_counts SELECT tenant, count(*) FROM journal GROUP BY tenant"
                )
            self._split_full_text_index()
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _fill_tenant_columns(self, added: set[tuple[str, str]]) -> None:
        """A file written before tenants had clocks and journal and ledger rows their tenant: each
        tenant follows the server clock, each row names the tenant of its credential or account."""
        conn = self.conn
        if ("tenants", "clock_offset_us") in added:
            conn.execute(
                "UPDATE tenants SET (clock_offset_us, clock_frozen_us) ="
                " (SELECT clock_offset_us, clock_frozen_us FROM server_state WHERE id = 1)"
                " WHERE EXISTS (SELECT 1 FROM server_state WHERE id = 1)"
            )
        if ("journal", "tenant") in added:
            conn.execute(
                "UPDATE journal SET tenant = coalesce("
                "(SELECT tenant_id FROM credentials c WHERE c.id = journal.credential_id), '')"
            )
        if ("ledger", "tenant_id") in added:
            conn.execute(
                "UPDATE ledger SET tenant_id = coalesce("
                "(SELECT tenant_id FROM accounts a WHERE a.id = ledger.account_id), '')"
            )

    def _split_full_text_index(self) -> None:
        """Every tenant has its full-text table; a file written with one index for all tenants has
        its rows moved to their tenants' tables, and the old index dropped (in the caller's
        transaction)."""
        conn = self.conn
        tenants = [row[0] for row in conn.execute("SELECT id FROM tenants")]
        legacy = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (LEGACY_FTS_TABLE,)
        ).fetchone()
        missing = [
            tenant
            for tenant in tenants
            if conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (fts_table(tenant),)
            ).fetchone()
            is None
        ]
        for tenant in missing:
            conn.execute(fts_ddl(tenant))
        if legacy is not None:
            for tenant in tenants:
                conn.execute(
                    f"INSERT INTO {fts_table(tenant)} (rowid, scope_tag, content, topic)"  # noqa: S608 - a digest name
                    f" SELECT f.rowid, f.scope_tag, f.content, f.topic FROM {LEGACY_FTS_TABLE} f"
                    " JOIN memories m ON m.seq = f.rowid WHERE m.tenant_id = ?",
                    (tenant,),
                )
            conn.execute(f"DROP TABLE {LEGACY_FTS_TABLE}")
            # the ranked answers a worker may cache were computed on the old index
            conn.execute("UPDATE server_state SET index_epoch = ? WHERE id = 1", (secrets.randbits(62),))

    def _move_access_times(self) -> None:
        """A file written before ``memory_access`` existed keeps ``last_accessed_at`` in
        ``memories``: move the values over once (the old column stays, always NULL)."""
        conn = self.conn
        if "last_accessed_at" not in {row[1] for row in conn.execute("PRAGMA table_info(memories)")}:
            return
        conn.execute(
            "INSERT OR IGNORE INTO memory_access (seq, last_accessed_at)"
            " SELECT seq, last_accessed_at FROM memories WHERE last_accessed_at IS NOT NULL"
        )
        conn.execute("UPDATE memories SET last_accessed_at = NULL WHERE last_accessed_at IS NOT NULL")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN`` … ``COMMIT``: one consistent snapshot for several reads. It takes no write lock
        (WAL), so a slow read here never holds up a writer of another worker."""
        self.commit_group()
        conn = self.conn
        conn.execute("BEGIN")
        try:
            yield conn
        except BaseException:  # anything, cancellation included: end the snapshot, then let it go on
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``; any exception rolls the whole transaction back."""
        self.commit_group()
        self._keep_temporary_data(in_memory=False)
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:  # anything, cancellation included: roll back, then let it go on
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _keep_temporary_data(self, *, in_memory: bool) -> None:
        """Where SQLite keeps this connection's temporary data, before a transaction begins.

        A group's members are savepoints: SQLite keeps each page a member changes as it was (to roll
        that member back alone), and past 64 KiB wrote those pages one by one to a temporary file,
        most of a propose's system calls under load. A group of requests keeps a few hundred KB of
        them, in memory. Any other write transaction (a reset, a restore, an administrative change)
        may change a large part of the file: its copies go to a temporary file, as by default, not
        into the process's memory."""
        if self._temp_in_memory != in_memory:
            self.conn.execute(f"PRAGMA temp_store = {'MEMORY' if in_memory else 'DEFAULT'}")
            self._temp_in_memory = in_memory

    @contextmanager
    def write_in_group(self) -> Iterator[sqlite3.Connection]:
        """A request's write transaction, in the group of this event-loop turn (see the module's
        text): ``SAVEPOINT`` … ``RELEASE`` inside the ``BEGIN IMMEDIATE`` the group shares. An
        exception rolls back this transaction's part only — or, when SQLite rolled back the whole
        transaction (a full disk does), the group, whose members then learn it. The caller awaits
        ``group_committed`` before it answers. Without grouping (``group_commits`` off): ``write``."""
        if not self.group_commits:
            with self.write() as conn:
                yield conn
            return
        conn = self.conn
        if self._group is not None and not conn.in_transaction:  # SQLite ended it: the group failed
            self.commit_group()
        if self._group is None:
            self._keep_temporary_data(in_memory=True)
            conn.execute("BEGIN IMMEDIATE")
            self._group = _Group()
        group = self._group
        conn.execute("SAVEPOINT request")
        try:
            yield conn
            conn.execute("RELEASE request")
        except BaseException as exc:  # anything, cancellation included: undo this part
            if not conn.in_transaction:  # SQLite rolled back the whole transaction: the group's too
                if self._group is group:
                    self._fail_group(exc if isinstance(exc, sqlite3.Error) else _rolled_back())
                raise
            conn.execute("ROLLBACK TO request")
            conn.execute("RELEASE request")
            if not group.members and self._group is group:  # nothing else in it: end it
                self._group = None
                conn.execute("ROLLBACK")
            raise
        group.members += 1
        _joined.set(group)

    def _fail_group(self, error: sqlite3.Error) -> None:
        """The open group did not commit: rolled back, its members get ``error`` from
        ``group_committed`` or ``commit_joined``."""
        group = self._group
        if group is None:
            return
        self._group = None
        group.error = error
        with contextlib.suppress(sqlite3.Error):
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")

    async def group_committed(self) -> None:
        """Returns once the group the caller's last ``write_in_group`` joined is committed; raises
        the error its ``COMMIT`` met (the group was rolled back)."""
        group = _joined.get()
        if group is None:
            return
        _joined.set(None)
        if self._group is group:
            if not _others_ready():  # nobody could join before this task runs again: commit now
                self.commit_group()
            else:
                try:
                    await asyncio.sleep(0)  # the requests that run in this turn join the group
                finally:  # cancelled or not, the first member back commits the group
                    if self._group is group:
                        self.commit_group()
        if group.error is not None:
            raise group.error

    def commit_joined(self) -> None:
        """Commit the open group now, before the caller waits (a hold, a delay, a ranking); raises
        the error of the group the caller's last ``write_in_group`` joined, when it failed."""
        group = _joined.get()
        _joined.set(None)
        self.commit_group()
        if group is not None and group.error is not None:
            raise group.error

    def commit_group(self) -> None:
        """Commit the open group now, if there is one (every other transaction of this connection
        does this first). A failed ``COMMIT`` rolls the group back; its members learn it from
        ``group_committed`` or ``commit_joined``."""
        if self._group is None:
            return
        try:
            if not self.conn.in_transaction:  # SQLite ended it (a full disk): nothing was committed
                raise _rolled_back()
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._fail_group(exc)
        else:
            self._group = None

    async def in_snapshot(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work(conn)`` in one read snapshot (on the reading thread: one at a time). ``work``
        only reads. It runs at once when it is short, else off the event loop (see the
        module's text). ``:memory:`` has no second connection (another one would be another
        database): there it runs in a snapshot of the first. An open group is committed first:
        no other process waits for the write lock while this process reads at length (and the
        caller learns there when the group of its own last write failed)."""
        self.commit_joined()
        if self.path == MEMORY:
            with self.read() as conn:
                return work(conn)
        if self._inline_pause:
            self._inline_pause -= 1
        else:
            try:
                return self._inline(work)
            except _OverBudget:
                self._inline_pause = INLINE_PAUSE
        if self._reading_thread is None:
            self._reading_thread = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="fake-lucy-reader", initializer=_lower_priority
            )
        future = self._reading_thread.submit(self._snapshot, work)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # another event loop (trio, through anyio): wait in a worker thread
            return await anyio.to_thread.run_sync(future.result)
        return await asyncio.wrap_future(future, loop=loop)

    def _inline(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` in a snapshot of this connection, on this thread (no transaction is open: every
        one runs to its end without an ``await``, and the group was committed); ``_OverBudget``
        when it ran past ``INLINE_BUDGET_S`` and was interrupted (it only reads: nothing to undo)."""
        conn = self.conn
        # the thread's CPU time: a read is not moved for the time another process had the CPU
        deadline = time.thread_time() + INLINE_BUDGET_S
        conn.set_progress_handler(lambda: time.thread_time() > deadline, INLINE_CHECK_STEPS)
        conn.execute("BEGIN")
        try:
            return work(conn)
        except sqlite3.OperationalError as exc:
            if str(exc) != "interrupted":
                raise
            raise _OverBudget from None
        finally:
            conn.set_progress_handler(None, 0)
            conn.execute("COMMIT")

    def _snapshot(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._reader_lock:
            if self._reader is None:
                self._reader = self._open_reader()
            conn = self._reader
            conn.execute("BEGIN")
            try:
                return work(conn)
            finally:  # nothing was written: ending the snapshot either way is the same
                conn.execute("COMMIT")

    def _open_reader(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, cached_statements=64)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA query_only = ON")
        return conn

    def _close_reader(self) -> None:
        with self._reader_lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None

    def close(self) -> None:
        self.commit_group()
        if self._reading_thread is not None:
            self._reading_thread.submit(self._close_reader)
            self._reading_thread.shutdown(wait=True)  # after every snapshot already asked for
            self._reading_thread = None
        self._close_reader()
        self.conn.close()
        self.closed = True
