"""The running fake: its database, settings and the pieces every request uses."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from fake_lucy.addresses import is_loopback
from fake_lucy.domain import clock, events, sessions, tenants
from fake_lucy.domain import seed as seeding
from fake_lucy.domain.defaults import DEFAULT_ADMIN_TOKEN
from fake_lucy.domain.ids import IdFactory
from fake_lucy.settings import FakeLucySettings
from fake_lucy.store.connection import MEMORY, Database, DatabaseUnusableError, storage_failure
from lucy_memory._contract import InvalidJSONError, SecretScanner, load_contract, parse_json_object

__all__ = ["DatabaseUnusableError", "FakeLucy", "SeedMismatchError"]

log = logging.getLogger("fake_lucy")

SeedOutcome = Literal["unchecked", "applied", "reset", "kept"]


class SeedMismatchError(ValueError):
    """The database holds the state of another seed than the one this fake was given, and
    ``reset_on_start`` is off: the seed could not take effect."""


class FakeLucy:
    """One process's view of the fake. All state lives in the database, none here."""

    def __init__(self, settings: FakeLucySettings, *, initialise: bool = True) -> None:
        if settings.database == MEMORY and settings.workers > 1:
            raise ValueError(":memory: keeps one shared connection; it cannot serve several workers")
        self.settings = settings
        self.contract: dict[str, Any] = load_contract("agent-memory-api")
        self.control_contract: dict[str, Any] = load_contract("fake-control")
        self.ids = IdFactory(settings.id_seed)
        self.seed = self._load_seed(settings.seed)
        self.loopback = is_loopback(settings.host)
        configured = settings.resolved_admin_token()
        self.admin_token = configured if configured is not None else DEFAULT_ADMIN_TOKEN
        # the built-in token configured by name is still the public one: refused off loopback too
        self.admin_token_is_builtin = configured is None or configured == DEFAULT_ADMIN_TOKEN
        # what a server admin's console session must have logged in with (none: the token is refused)
        self.console_admin = sessions.server_admin_digest(
            None if self.admin_token_is_builtin and not self.loopback else self.admin_token
        )
        self.scanner = SecretScanner()
        self.stop_words = frozenset(self.contract["recall"]["stop_words"])
        self.placeholder: str = self.contract["secret_policy"]["placeholder"]
        # One worker: the v1 requests of an event-loop turn share a commit. Several: each request
        # commits alone, so that no worker holds the write lock while its event loop serves others.
        self.db = Database(settings.database, group_commits=settings.workers == 1)
        self.seed_outcome: SeedOutcome = "unchecked"  # set by initialise()
        if initialise:
            try:
                self.initialise()
            # Broad on purpose: the connection is closed on every way out (Ctrl-C and SystemExit
            # included), and the exception is raised again unchanged.
            except BaseException:
                # A new file this start made stays: empty, the next start makes it ready, and
                # another process starting on the same new file may be using it already.
                self.db.close()
                raise

    @staticmethod
    def _load_seed(path: Path | None) -> dict[str, Any]:
        if path is None:
            return seeding.DEFAULT_SEED
        try:  # as strictly as a snapshot or a request body: a repeated key is refused, never half-read
            document = parse_json_object(path.read_bytes(), subject="the file")
        except OSError as exc:
            raise ValueError(f"cannot read the seed file {path} ({exc.strerror or exc})") from None
        except InvalidJSONError as exc:
            raise ValueError(f"the seed file {path} is not a JSON object ({exc})") from None
        try:
            return seeding.validate_seed(document)
        except ValueError as exc:
            raise ValueError(f"the seed file {path} is not a valid seed: {exc}") from None

    def initialise(self, then: Callable[[sqlite3.Connection], None] | None = None) -> None:
        """Create the tables; seed a new database (or reset it with ``--reset-on-start``). An existing
        database seeded with another seed is refused (``SeedMismatchError``), never served as if the
        seed had been applied. ``seed_outcome`` says what happened: ``applied``, ``reset`` or ``kept``.
        ``then`` runs in the same transaction (``--import``): if it raises, nothing changes. A file
        that cannot be written is ``DatabaseUnusableError``, in SQLite's words."""
        try:
            self._initialise(then)
        except sqlite3.Error as exc:
            reason = storage_failure(exc)
            if reason is None:
                raise
            database = self.settings.database
            raise DatabaseUnusableError(f"cannot write the database {database} ({reason})") from None

    def _initialise(self, then: Callable[[sqlite3.Connection], None] | None) -> None:
        self.db.create_schema()
        with self.db.write() as conn:
            if not seeding.is_initialised(conn):
                seeding.apply_seed(conn, self.ids, self.seed)
                self.seed_outcome = "applied"
            elif self.settings.reset_on_start:
                self._reset(conn)  # a reset as any other: its event tells a reader from before it
                self.seed_outcome = "reset"
            elif seeding.applied_seed(conn) != seeding.seed_digest(self.seed):
                raise SeedMismatchError(self._mismatch(seeding.applied_seed(conn)))
            else:
                self.seed_outcome = "kept"
                tenants.date_the_undated(conn)
            if then is not None:
                then(conn)

    def _mismatch(self, recorded: str | None) -> str:
        if recorded is None:
            held = (
                f"the database {self.settings.database} was seeded by an older fake-lucy"
                " that did not record its seed"
            )
        else:
            held = f"the database {self.settings.database} holds the state of another seed"
        if self.settings.seed is None:
            wanted, fresh = "the built-in dev seed", "the dev seed"
        else:
            wanted, fresh = f"--seed {self.settings.seed}", "this seed"
        return (
            f"{held}, so {wanted} cannot take effect on it; add --reset-on-start"
            f" (FAKE_LUCY_RESET_ON_START=1) to wipe it and apply {fresh}, or choose another --database"
        )

    def reset(self) -> float:
        """Back to the fresh seeded state; returns the time it took in milliseconds."""
        started = time.perf_counter()
        with self.db.write() as conn:
            self._reset(conn)
        return (time.perf_counter() - started) * 1000

    def _reset(self, conn: sqlite3.Connection) -> None:
        """The fresh seeded state and its server-wide ``reset`` event, in the caller's transaction."""
        seeding.reset(conn, self.ids, self.seed)
        events.emit(conn, "reset", {}, at=clock.now(conn), tenant=None)

    def db_files(self) -> list[Path]:
        """The SQLite file and its WAL and shared-memory files (none for ``:memory:``)."""
        if self.settings.database == ":memory:":
            return []
        base = Path(self.settings.database)
        return [base, Path(f"{base}-wal"), Path(f"{base}-shm")]

    def close(self) -> None:
        self.db.close()
