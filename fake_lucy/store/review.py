"""The queries behind the reviewer's surfaces (console pages, operator CLI) that the control API's
listings do not already answer: counts, the versions a queue replaces, accounts, the newest ledger."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

from fake_lucy.store.records import VERSION_COLUMNS, LedgerRecord, MemoryRecord

__all__ = [
    "AccountRow",
    "account_count",
    "accounts",
    "ledger_newest",
    "pending_count",
    "tenant_count",
    "tenant_ids",
    "versions",
]


@dataclass(frozen=True, slots=True)
class AccountRow:
    id: str
    tenant_id: str
    balance: int


def pending_count(conn: sqlite3.Connection, *, tenant: str | None) -> int:
    if tenant is None:
        row = conn.execute("SELECT count(*) FROM proposals WHERE status = 'pending'").fetchone()
    else:
        row = conn.execute(
            "SELECT count(*) FROM proposals WHERE status = 'pending' AND tenant_id = ?", (tenant,)
        ).fetchone()
    return int(row[0])


def versions(
    conn: sqlite3.Connection, wanted: Iterable[tuple[str, str, int]]
) -> dict[tuple[str, str, int], MemoryRecord]:
    """The named versions (tenant, memory id, version) that exist: a memory of that tenant only."""
    found: dict[tuple[str, str, int], MemoryRecord] = {}
    for tenant, memory_id, version in set(wanted):
        row = conn.execute(
            f"SELECT {VERSION_COLUMNS} FROM memory_versions v JOIN memories m ON m.id = v.memory_id"  # noqa: S608 - constant column list
            " WHERE v.memory_id = ? AND v.version = ? AND m.tenant_id = ?",
            (memory_id, version, tenant),
        ).fetchone()
        if row is not None:
            found[(tenant, memory_id, version)] = MemoryRecord.from_row(row)
    return found


def _of_tenant(conn: sqlite3.Connection, sql: str, tenant: str | None, limit: int) -> list[sqlite3.Row]:
    """The rows of ``sql``, a listing whose ``:tenant`` filter is off when ``tenant`` is None and
    whose size is ``:limit``."""
    return conn.execute(sql, {"tenant": tenant, "limit": limit}).fetchall()


def accounts(conn: sqlite3.Connection, *, tenant: str | None, limit: int) -> list[AccountRow]:
    sql = (
        "SELECT id, tenant_id, balance FROM accounts WHERE :tenant IS NULL OR tenant_id = :tenant"
        " ORDER BY tenant_id, id LIMIT :limit"
    )
    return [AccountRow(r[0], r[1], int(r[2])) for r in _of_tenant(conn, sql, tenant, limit)]


def account_count(conn: sqlite3.Connection, *, tenant: str | None) -> int:
    sql = "SELECT count(*) FROM accounts WHERE :tenant IS NULL OR tenant_id = :tenant"
    return int(conn.execute(sql, {"tenant": tenant}).fetchone()[0])


def ledger_newest(conn: sqlite3.Connection, *, tenant: str | None, limit: int) -> list[LedgerRecord]:
    """The newest ``limit`` ledger rows (of a tenant's accounts), oldest first."""
    sql = (
        "SELECT * FROM (SELECT l.* FROM ledger l JOIN accounts a ON a.id = l.account_id"
        " WHERE :tenant IS NULL OR a.tenant_id = :tenant ORDER BY l.seq DESC LIMIT :limit) ORDER BY seq"
    )
    return [LedgerRecord.from_row(row) for row in _of_tenant(conn, sql, tenant, limit)]


def tenant_ids(conn: sqlite3.Connection, *, tenant: str | None, limit: int) -> list[str]:
    sql = "SELECT id FROM tenants WHERE :tenant IS NULL OR id = :tenant ORDER BY id LIMIT :limit"
    return [r[0] for r in _of_tenant(conn, sql, tenant, limit)]


def tenant_count(conn: sqlite3.Connection, *, tenant: str | None) -> int:
    sql = "SELECT count(*) FROM tenants WHERE :tenant IS NULL OR id = :tenant"
    return int(conn.execute(sql, {"tenant": tenant}).fetchone()[0])
