"""Table definitions. SQLModel declares them; the hot paths query them with ``sqlite3``.

These declarations are the schema's source of truth. The running fake does not import them: it
creates tables from ``schema.sql``, their DDL as SQLAlchemy renders it for SQLite, which
``python -m fake_lucy.store.tables`` writes again after a change here (a test fails while the two
differ). What older files lack, and the full-text tables, are in ``store.schema``.

Every piece of state lives here, including the clock, faults, rate-limit buckets, in-flight
markers and the id sequence, so that several workers on one file behave as one server.
Timestamps of domain objects are stored as the same fixed-width UTC text the API emits
(``YYYY-MM-DDTHH:MM:SS.ffffffZ``), which sorts and compares correctly as text.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from sqlalchemy import Boolean, Column, Index, Integer, LargeBinary, Table, text
from sqlalchemy.dialects import sqlite
from sqlalchemy.schema import CreateIndex, CreateTable
from sqlmodel import AutoString, Field, SQLModel

from fake_lucy.store.records import JournalRow, LedgerRecord
from fake_lucy.store.schema import SCHEMA_SQL

__all__ = ["metadata", "render_schema"]


class Tenant(SQLModel, table=True):
    """A tenant: its policy, its clock and, for one made by ``POST /_fake/tenants``, its admin.

    The clock is the server clock's pair of columns, per tenant (SPEC 3.6). ``admin_token_sha256``,
    ``first_credential_id`` and ``initial_credits`` are what a tenant reset keeps or restores;
    they are null for a tenant made otherwise (the seed, a credential or a policy on first use).
    """

    __tablename__ = "tenants"
    id: str = Field(primary_key=True)
    auto_approve: str = Field(default='"off"')  # JSON: "off" | "all" | [kinds]
    proposal_ttl_seconds: int = 604800
    rate_limit_per_minute: int | None = None
    clock_offset_us: int = 0
    clock_frozen_us: int | None = None
    admin_token_sha256: str | None = Field(default=None, index=True, unique=True)
    first_credential_id: str | None = None
    initial_credits: int | None = None
    # when the tenant row was made, by the server clock (an older file: when it was first opened)
    created_at: str | None = None
    # A random value given anew whenever the tenant's state is made again (created, reset,
    # restored, made again under its id): a v1 request still in flight from before is not let
    # into the new state (``server_state.in_transaction``, ``server_state.tenant_is``).
    incarnation: int = 0


class Account(SQLModel, table=True):
    """A credit account of a tenant: its balance, which every charge and admin set changes
    together with a ``ledger`` row."""

    __tablename__ = "accounts"
    id: str = Field(primary_key=True)
    tenant_id: str = Field(index=True)
    balance: int = 0


class Credential(SQLModel, table=True):
    """A v1 bearer credential: the token only as its SHA-256, what it may do and see, and the
    account it charges."""

    __tablename__ = "credentials"
    id: str = Field(primary_key=True)
    token_sha256: str = Field(unique=True)
    tenant_id: str = Field(index=True)
    account_id: str
    user_id: str
    permissions: str  # comma-separated
    scopes: str  # JSON list of {kind, id}
    builtin: bool = False
    revoked: bool = False


class ContentColumns(SQLModel):
    """What a memory says: a proposal proposes it, a version of a memory holds it."""

    kind: str
    topic: str | None = None
    content: str
    importance: int


class VersionColumns(ContentColumns):
    """One version of a memory: the head (``memories``, the current version) and every version
    (``memory_versions``) both hold these."""

    status: str
    source: str | None = None
    updated_at: str
    approved_at: str


class Keyed(SQLModel):
    """The keys of a memory head and of a proposal: ``seq`` the order of creation (and a memory's
    full-text rowid), ``id`` the public id, and the tenant it belongs to."""

    seq: int | None = Field(default=None, primary_key=True)
    id: str = Field(unique=True)
    tenant_id: str = Field(index=True)


class Memory(Keyed, VersionColumns, table=True):
    """The head of a memory: its current version's fields. ``seq`` is the full-text rowid."""

    __tablename__ = "memories"
    __table_args__ = (
        Index(
            "memories_active_topic",
            "tenant_id",
            "scope_kind",
            "scope_id",
            "topic",
            unique=True,
            sqlite_where=text("status = 'active' AND topic IS NOT NULL"),
        ),
    )
    scope_kind: str
    scope_id: str
    version: int
    created_at: str


class MemoryAccess(SQLModel, table=True):
    """When recall last returned a memory (``memories.seq``); absent = never.

    Kept apart from the wide ``memories`` rows so that a recall, which stamps up to 50 memories,
    dirties a few pages of ~40-byte rows instead of one page per memory: every dirty page is
    a WAL frame written at commit (~4 µs each).
    """

    __tablename__ = "memory_access"
    seq: int = Field(primary_key=True)
    last_accessed_at: str


class MemoryVersion(VersionColumns, table=True):
    """Every version of every memory, the current one too (the head repeats it)."""

    __tablename__ = "memory_versions"
    memory_id: str = Field(primary_key=True)
    version: int = Field(primary_key=True)


class Proposal(ContentColumns, Keyed, table=True):
    """A proposal and its decision; indexed by status, tenant and ``expires_at`` (the pending
    ones: a tenant's expiry sweep and earliest pending expiry, the review's counts), by tenant
    (listings in ``seq`` order) and for the replacements of a memory (``target_key``)."""

    __tablename__ = "proposals"
    __table_args__ = (
        Index("proposals_status_tenant_expiry", "status", "tenant_id", "expires_at"),
        Index("proposals_target", "target_key", "status"),
    )
    account_id: str
    credential_id: str
    status: str
    scope_kind: str
    scope_id: str
    justification: str | None = None
    replaces_memory_id: str | None = None
    replaces_version: int | None = None
    memory_id: str | None = None
    memory_version: int | None = None
    reason: str | None = None
    reason_detail: str | None = None
    source: str | None = None
    created_at: str
    updated_at: str
    expires_at: str
    decided_at: str | None = None
    target_key: str | None = None


class IdempotencyRecord(SQLModel, table=True):
    """A propose's Idempotency-Key within its account: the body's hash and the stored answer
    (``done``), or a request still running (``in_flight``) — SPEC 2.3."""

    __tablename__ = "idempotency_records"
    account_id: str = Field(primary_key=True)
    key: str = Field(primary_key=True)
    body_sha256: str
    state: str  # in_flight | done
    status_code: int | None = None
    response_body: bytes | None = Field(default=None, sa_column=Column(LargeBinary))
    original_request_id: str
    scope_kind: str
    scope_id: str
    created_at: str
    expires_at: str
    in_flight_until: str | None = None


class Fault(SQLModel, table=True):
    """An armed fault; ``tenant_id`` is null for the server admin's (they match every tenant)."""

    __tablename__ = "faults"
    seq: int | None = Field(default=None, primary_key=True)
    id: str = Field(unique=True)
    remaining: int  # how many more requests it fires on
    # which requests it matches, and at which step
    tenant_id: str | None = None
    credential_id: str | None = None
    operation: str
    phase: str
    # what it answers them: a status and code (and Retry-After), a drop, a delay or a hold
    status: int
    code: str
    retry_after: int | None = None
    drop_connection: bool = False
    delay_ms: int | None = None
    hold_ms: int | None = None


class RateBucket(SQLModel, table=True):
    """A credential's token bucket for its rate limit (the tokens left at ``updated_us``)."""

    __tablename__ = "rate_buckets"
    credential_id: str = Field(primary_key=True)
    tokens: float
    updated_us: int


class JournalCount(SQLModel, table=True):
    """How many journal rows a tenant has: each tenant's journal is bounded on its own
    (``domain.journal``), so a busy tenant never pushes another tenant's rows out. Kept beside the
    journal by every statement that adds or removes its rows."""

    __tablename__ = "journal_counts"
    tenant: str = Field(primary_key=True)
    rows: int


class SeqFloor(SQLModel, table=True):
    """The number below which ``name``'s new rows are never numbered (``store.numbering``)."""

    __tablename__ = "seq_floors"
    name: str = Field(primary_key=True)
    floor: int


class ServerState(SQLModel, table=True):
    """One row: the clock, the billing authority switch, the id sequence and the credential epoch.

    ``auth_epoch`` changes (to a new random value) with every change to credentials or tenant
    policies, including reset, so a worker's cache of authenticated principals knows it is stale.
    ``index_epoch`` does the same for the recallable memories (the full-text index and the rows it
    points to), for the ranked answers that ``domain.recall.RecallCache`` keeps.
    """

    __tablename__ = "server_state"
    id: int = Field(default=1, primary_key=True)
    clock_offset_us: int = 0
    clock_frozen_us: int | None = None
    billing_available: bool = True
    id_sequence: int = 0
    auth_epoch: int = 0
    index_epoch: int = 0
    seed_sha256: str | None = None  # the seed the database was created or last reset with
    # the highest finding number ever given since the last server reset: a tenant's reset deletes
    # its findings, and their numbers (the listing's cursor) are never given again
    findings_seq: int = 0


class Finding(SQLModel, table=True):
    """What a client did that a well-behaved client never does (SPEC 3.8); ``subject`` is what the
    finding is about (an idempotency key, a body hash, a proposal id), so that one fact is one row."""

    __tablename__ = "findings"
    __table_args__ = (Index("findings_subject", "credential_id", "code", "subject"),)
    seq: int | None = Field(default=None, primary_key=True)
    id: str = Field(unique=True)
    tenant_id: str
    credential_id: str
    code: str
    subject: str
    request_ids: str  # JSON list
    at: str
    detail: str


class ClientWatch(SQLModel, table=True):
    """The last failed answer a credential got for one request body or one idempotency key, kept
    for a few minutes so that the next attempt can be judged (``domain.findings``). Only failures
    are written: a credential whose requests succeed has no rows here."""

    __tablename__ = "client_watch"
    credential_id: str = Field(primary_key=True)
    kind: str = Field(primary_key=True)  # recall | propose (a body hash) | key (an Idempotency-Key)
    subject: str = Field(primary_key=True)
    tenant_id: str
    key: str | None = None  # the Idempotency-Key of a failed propose body
    body_sha256: str
    request_ids: str  # JSON list: the attempts so far, the last one last
    status: int | None = None  # None: the connection was dropped
    code: str | None = None
    retry_after: float | None = None
    answered_us: int  # real time of the answer
    clock_us: int  # server clock at the answer (the tenant's)
    reported: str = ""  # codes already recorded for this chain, comma-separated
    expires_us: int = Field(index=True)  # real time


class PollSeries(SQLModel, table=True):
    """One credential's polling of one proposal: the series of status requests since the last pause
    of over a minute, summed up in one row with its newest polls, so that a poll reads and writes
    one row (clustered on its key: one b-tree)."""

    __tablename__ = "poll_series"
    __table_args__ = {"sqlite_with_rowid": False}
    credential_id: str = Field(primary_key=True)
    proposal_id: str = Field(primary_key=True)
    polls: int  # in this series
    grew: bool = False  # some interval of the series was longer than the one before
    reported: bool = False  # status_polling_unbounded was recorded for this proposal
    last_request_id: str
    last_status: int | None = None  # None: the connection was dropped
    last_arrived_us: int  # real time
    last_clock_us: int  # server clock
    last_interval_us: int | None = None
    # Until the series is reported, its newest polls (the request ids a finding names), oldest
    # first: "request_id real_us clock_us", joined by ";" (``store.findings.with_poll``).
    recent: str = ""
    # When the last poll was answered (a retry's wait counts from there; None in a row written
    # before they were kept: its arrival stands in)
    last_answered_us: int | None = None  # real time
    last_answered_clock_us: int | None = None  # server clock


class Event(SQLModel, table=True):
    """The event stream (SPEC 3.7): a row per change, or per transaction and tenant when the
    transaction gathers its events (``store.events``), written in the transaction of the change,
    so ``seq`` is the commit order across every worker. ``seq`` is never reused without
    AUTOINCREMENT (and its extra write per row, to ``sqlite_sequence``): a new row takes the
    largest ``seq`` + 1, and no statement deletes the newest row (reset keeps the table, pruning
    the oldest). Older files made it AUTOINCREMENT, which gives the same numbers. ``data`` is the
    event's JSON object. Bounded like the journal."""

    __tablename__ = "events"
    seq: int | None = Field(default=None, primary_key=True)
    type: str
    tenant_id: str | None = None
    at: str
    data: str


class EventHorizon(SQLModel, table=True):
    """Where a tenant id's event history starts for its admin: after the newest event when a tenant
    of that id was last deleted, so a tenant made again under the id never reads the deleted one's
    events. Part of the event history, not of the state: a reset keeps it, like the events."""

    __tablename__ = "event_horizons"
    tenant_id: str = Field(primary_key=True)
    after_seq: int


class ConsoleSession(SQLModel, table=True):
    """A review console session (SPEC 3.10): the cookie's id only as its SHA-256. Wall-clock
    microseconds, not the server clock: advancing the fake's clock logs nobody out. Reset keeps it.
    ``admin_sha256``: the admin token that logged in; the session lasts only while that token is the
    server's (or its tenant's) admin token."""

    __tablename__ = "console_sessions"
    id_sha256: str = Field(primary_key=True)
    tenant_id: str | None = None
    created_us: int
    seen_us: int
    admin_sha256: str | None = None


class ConsoleLink(SQLModel, table=True):
    """A one-time console login link (``fake-lucy serve`` prints it): deleted when used; it works
    only while the admin token in force when it was made (``admin_sha256``) still is."""

    __tablename__ = "console_links"
    token_sha256: str = Field(primary_key=True)
    tenant_id: str | None = None
    expires_us: int
    admin_sha256: str | None = None


metadata = SQLModel.metadata


def _column(name: str, annotation: str) -> Column[Any]:
    kind, _, optional = annotation.partition(" | ")
    return Column(name, _SQL_TYPES[kind], nullable=optional == "None")


_SQL_TYPES: dict[str, Any] = {"str": AutoString, "int": Integer, "bool": Boolean}


def _log_table(name: str, record: type[Any], *indexed: str) -> Table:
    """An append-only table whose columns are a record's fields, declared there once, after a
    ``seq`` key that orders it."""
    columns = [_column(field.name, str(field.type)) for field in fields(record)]
    return Table(
        name,
        metadata,
        Column("seq", Integer, primary_key=True),
        *columns,
        *(Index(f"ix_{name}_{column}", column) for column in indexed),
    )


journal = _log_table("journal", JournalRow, "tenant")
# One index on the ledger: a commit writes a page of each index, and every charged request adds a
# row. An account's rows are found through its tenant's (``queries.ledger_page``).
ledger = _log_table("ledger", LedgerRecord, "tenant_id")


_HEADER = """\
-- The tables of fake_lucy/store/tables.py as SQLAlchemy renders them for SQLite, each followed by
-- its indexes: what fake_lucy.store.schema creates in a new database file.
-- Generated by `python -m fake_lucy.store.tables`: edit the declarations there, not this file.
"""


def render_schema() -> str:
    """``schema.sql``: each table's ``CREATE TABLE`` (by name: no table refers to another) followed by
    its indexes' ``CREATE INDEX`` (by name), one statement a line (the tables that share
    ``ContentColumns`` would otherwise repeat them line for line in a file that declares nothing)."""
    dialect = sqlite.dialect()
    blocks = []
    for table in metadata.sorted_tables:
        ddl = [CreateTable(table).compile(dialect=dialect)]
        ddl += [
            CreateIndex(index).compile(dialect=dialect)
            for index in sorted(table.indexes, key=lambda index: str(index.name))
        ]
        blocks.append("".join(f"{_trimmed(str(statement))};\n" for statement in ddl))
    return _HEADER + "".join(f"\n{block}" for block in blocks)


def _trimmed(sql: str) -> str:
    """One line: SQLAlchemy's lines stripped and joined (``CREATE TABLE t (a …, b …)``)."""
    return " ".join(line.strip() for line in sql.strip().splitlines()).replace("( ", "(").replace(" )", ")")


if __name__ == "__main__":
    SCHEMA_SQL.write_text(render_schema(), encoding="utf-8")
    print(f"wrote {SCHEMA_SQL}")
