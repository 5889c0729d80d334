"""The queries behind the reviewer's surfaces (console pages, operator CLI) that the control API's
listings do not already answer: counts, the versions a queue replaces, accounts, the newest ledger."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

from fake_lucy.store.records import LedgerRecord

__all__ = [
    "AccountRow",
    "VersionText",
    "accounts",
    "ledger_newest",
    "pending_count",
    "tenant_ids",
    "versions",
]


@dataclass(frozen=True, slots=True)
class VersionText:
    """What one memory version says (the part a replacement's difference is drawn against)."""

    memory_id: str
    version: int
    kind: str
    topic: str | None
    content: str
    importance: int
    status: str


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
    conn: sqlite3.Connection, wanted: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], VersionText]:
    """The named versions (memory id, version) that exist."""
    found: dict[tuple[str, int], VersionText] = {}
    for memory_id, version in set(wanted):
        row = conn.execute(
            "SELECT kind, topic, content, importance, status FROM memory_versions"
            " WHERE memory_id = ? AND version = ?",
            (memory_id, version),
        ).fetchone()
        if row is not None:
            found[(memory_id, version)] = VersionText(
                memory_id, version, row[0], row[1], row[2], row[3], row[4]
            )
    return found


def accounts(conn: sqlite3.Connection, *, tenant: str | None, limit: int) -> list[AccountRow]:
    rows = conn.execute(
        "SELECT id, tenant_id, balance FROM accounts WHERE ? IS NULL OR tenant_id = ? ORDER BY tenant_id, id"
        " LIMIT ?",
        (tenant, tenant, limit),
    ).fetchall()
    return [AccountRow(r[0], r[1], int(r[2])) for r in rows]


def ledger_newest(conn: sqlite3.Connection, *, tenant: str | None, limit: int) -> list[LedgerRecord]:
    """The newest ``limit`` ledger rows (of a tenant's accounts), oldest first."""
    rows = conn.execute(
        "SELECT * FROM (SELECT l.* FROM ledger l JOIN accounts a ON a.id = l.account_id"
        " WHERE ? IS NULL OR a.tenant_id = ? ORDER BY l.seq DESC LIMIT ?) ORDER BY seq",
        (tenant, tenant, limit),
    ).fetchall()
    return [LedgerRecord.from_row(row) for row in rows]


def tenant_ids(conn: sqlite3.Connection, *, tenant: str | None, limit: int) -> list[str]:
    rows = conn.execute(
        "SELECT id FROM tenants WHERE ? IS NULL OR id = ? ORDER BY id LIMIT ?", (tenant, tenant, limit)
    ).fetchall()
    return [r[0] for r in rows]
