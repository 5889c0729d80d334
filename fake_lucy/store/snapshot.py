"""The statements of snapshots (SPEC 3.9): every row of one tenant out, every row back in.

A snapshot is the whole state by design, so these functions read and write rows as plain
dictionaries of their columns (``domain.snapshot`` shapes them into the document); the tables and
columns are this project's own (``store.tables``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from fake_lucy.store.numbering import NUMBERED, keep_numbers, next_seq
from fake_lucy.store.records import JOURNAL_COLUMNS
from fake_lucy.store.schema import STATE_TABLES

__all__ = [
    "TENANT_ROWS",
    "admin_token_hashes",
    "clear_all",
    "clear_tenant",
    "insert",
    "journal_rows",
    "request_ids_elsewhere",
    "server_row",
    "tenant_ids",
    "tenant_rows",
    "write_server_row",
]

# What a tenant holds, table by table: the statement that selects its rows, in the order they were made.
TENANT_ROWS: dict[str, str] = {
    "tenants": "SELECT *, rowid AS place FROM tenants WHERE id = ?",
    "accounts": "SELECT * FROM accounts WHERE tenant_id = ? ORDER BY id",
    "credentials": "SELECT * FROM credentials WHERE tenant_id = ? ORDER BY id",
    "memories": (
        "SELECT m.id, m.scope_kind, m.scope_id, m.version, m.created_at, a.last_accessed_at"
        " FROM memories m LEFT JOIN memory_access a ON a.seq = m.seq WHERE m.tenant_id = ? ORDER BY m.seq"
    ),
    "memory_versions": (
        "SELECT v.* FROM memory_versions v JOIN memories m ON m.id = v.memory_id"
        " WHERE m.tenant_id = ? ORDER BY m.seq, v.version"
    ),
    "proposals": "SELECT * FROM proposals WHERE tenant_id = ? ORDER BY seq",
    "idempotency_records": (
        "SELECT r.* FROM idempotency_records r JOIN accounts a ON a.id = r.account_id"
        " WHERE a.tenant_id = ? ORDER BY r.rowid"
    ),
    "ledger": "SELECT * FROM ledger WHERE tenant_id = ? ORDER BY seq",
}

# Everything a full restore replaces: the tables a snapshot carries and the instrumentation that
# belongs to the state it replaces (faults, buckets, findings and their watch, the journal).
_ALL_TABLES = STATE_TABLES


def tenant_ids(conn: sqlite3.Connection) -> list[str]:
    """In the order the tenants were made (a snapshot lists them so, and a restore makes them so)."""
    return [row[0] for row in conn.execute("SELECT id FROM tenants ORDER BY rowid")]


def admin_token_hashes(conn: sqlite3.Connection) -> set[str]:
    """The hashes of every tenant's admin token."""
    rows = conn.execute("SELECT admin_token_sha256 FROM tenants WHERE admin_token_sha256 IS NOT NULL")
    return {row[0] for row in rows}


def tenant_rows(conn: sqlite3.Connection, table: str, tenant: str) -> list[dict[str, Any]]:
    return [dict(row) for row in conn.execute(TENANT_ROWS[table], (tenant,))]


# The column naming a row's tenant, in the tables whose rows each name a request.
_REQUEST_ROWS = {"ledger": "tenant_id", "journal": "tenant"}


def request_ids_elsewhere(
    conn: sqlite3.Connection, table: str, tenant: str, request_ids: list[str]
) -> set[str]:
    """Which of ``request_ids`` rows of ``table`` (the ledger or the journal) of other tenants name."""
    column = _REQUEST_ROWS[table]
    rows = conn.execute(
        f"SELECT DISTINCT request_id FROM {table}"  # noqa: S608 - our table and column names
        f" WHERE {column} != ? AND request_id IN (SELECT value FROM json_each(?))",
        (tenant, json.dumps(request_ids)),
    )
    return {row[0] for row in rows}


def journal_rows(conn: sqlite3.Connection, tenant: str) -> list[dict[str, Any]]:
    """The tenant's journal rows, oldest first."""
    columns = ", ".join(JOURNAL_COLUMNS)
    rows = conn.execute(
        f"SELECT {columns} FROM journal WHERE tenant = ? ORDER BY seq",  # noqa: S608 - declared columns
        (tenant,),
    )
    return [dict(row) for row in rows]


def server_row(conn: sqlite3.Connection) -> dict[str, Any]:
    row = conn.execute(
        "SELECT clock_offset_us, clock_frozen_us, billing_available, id_sequence"
        " FROM server_state WHERE id = 1"
    ).fetchone()
    return dict(row)


def write_server_row(
    conn: sqlite3.Connection,
    *,
    offset_us: int,
    frozen_us: int | None,
    billing_available: bool,
    id_sequence: int,
    seed_sha256: str | None,
) -> None:
    conn.execute(
        "INSERT INTO server_state (id, clock_offset_us, clock_frozen_us, billing_available, id_sequence,"
        " auth_epoch, index_epoch, seed_sha256, findings_seq) VALUES (1, ?, ?, ?, ?, 0, 0, ?, 0)",
        (offset_us, frozen_us, billing_available, id_sequence, seed_sha256),
    )


def clear_all(conn: sqlite3.Connection) -> None:
    """Every row of every table but the tenants' full-text tables (the caller's)."""
    for table in _ALL_TABLES:
        conn.execute(f"DELETE FROM {table}")  # noqa: S608 - table names are constants


_CLEAR_TENANT = (
    "DELETE FROM memory_access WHERE seq IN (SELECT seq FROM memories WHERE tenant_id = :t)",
    "DELETE FROM memory_versions WHERE memory_id IN (SELECT id FROM memories WHERE tenant_id = :t)",
    "DELETE FROM memories WHERE tenant_id = :t",
    "DELETE FROM proposals WHERE tenant_id = :t",
    "DELETE FROM idempotency_records WHERE account_id IN (SELECT id FROM accounts WHERE tenant_id = :t)",
    "DELETE FROM ledger WHERE tenant_id = :t",
    "DELETE FROM journal WHERE tenant = :t",
    "DELETE FROM journal_counts WHERE tenant = :t",
    "DELETE FROM faults WHERE tenant_id = :t"
    " OR credential_id IN (SELECT id FROM credentials WHERE tenant_id = :t)",
    "DELETE FROM rate_buckets WHERE credential_id IN (SELECT id FROM credentials WHERE tenant_id = :t)",
    "DELETE FROM findings WHERE tenant_id = :t",
    "DELETE FROM client_watch WHERE tenant_id = :t",
    "DELETE FROM poll_series WHERE credential_id IN (SELECT id FROM credentials WHERE tenant_id = :t)",
    "DELETE FROM credentials WHERE tenant_id = :t",
    "DELETE FROM accounts WHERE tenant_id = :t",
    "DELETE FROM tenants WHERE id = :t",
)


def clear_tenant(conn: sqlite3.Connection, tenant: str) -> None:
    """Every row of one tenant (and the instrumentation of its credentials), but its full-text
    table (the caller's, ``lifecycle.clear_index``); the numbers its rows held are not given again."""
    keep_numbers(conn)
    for statement in _CLEAR_TENANT:
        conn.execute(statement, {"t": tenant})


def insert(conn: sqlite3.Connection, table: str, values: Mapping[str, Any]) -> int:
    """Insert one row; returns its rowid (for proposals, the journal and the ledger, numbered
    above every number given before: ``store.numbering``)."""
    names = list(values)
    places = ["?" for _ in names]
    if table in NUMBERED and NUMBERED[table] not in values:
        names, places = [NUMBERED[table], *names], [next_seq(table), *places]
    cursor = conn.execute(
        f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join(places)})",  # noqa: S608 - our column names
        [values[name] for name in values],
    )
    return int(cursor.lastrowid or 0)
