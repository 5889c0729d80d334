"""The queries of the control layer and the lifecycle: each returns typed records.

The domain decides what to ask; these functions only know how to ask SQLite. The v1 hot paths
(recall ranking, the one-statement charge, the fault take) keep their statements next to their
rules in ``domain/``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fake_lucy.store.records import (
    LAST_ACCESSED_AT,
    MEMORY_COLUMNS,
    JournalRow,
    LedgerRecord,
    MemoryRecord,
    ProposalRecord,
    TenantPolicy,
)

__all__ = [
    "Page",
    "account_tenant_and_balance",
    "active_topic_owner",
    "clear_rate_buckets",
    "credential_exists",
    "journal_page",
    "ledger_page",
    "memory_head",
    "memory_versions_page",
    "proposal",
    "proposals_page",
    "tenant_policy",
    "update_tenant_policy",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing; ``last`` is the key of its last item when more items follow."""

    items: list[T]
    last: Any | None


def _page(rows: Sequence[sqlite3.Row], size: int, convert: Callable[[sqlite3.Row], T], key: str) -> Page[T]:
    items = [convert(row) for row in rows[:size]]
    return Page(items, rows[size - 1][key] if len(rows) > size else None)


def _where(after: tuple[str, Any] | None, **equal: Any) -> tuple[str, list[Any]]:
    """``WHERE`` clauses: each column (``m__tenant_id`` for ``m.tenant_id``) equal to its value
    where one is given, and the key column past ``after`` (a column and a value, or a
    ``"(a, b)"`` row value and a pair)."""
    clauses, params = ["1 = 1"], []
    for name, value in equal.items():
        if value is not None:
            clauses.append(name.replace("__", ".") + " = ?")
            params.append(value)
    if after is not None:
        column, value = after
        if isinstance(value, tuple):
            clauses.append(f"{column} > ({', '.join('?' for _ in value)})")
            params.extend(value)
        else:
            clauses.append(f"{column} > ?")
            params.append(value)
    return " AND ".join(clauses), params


def proposal(conn: sqlite3.Connection, proposal_id: str) -> ProposalRecord | None:
    row = conn.execute("SELECT * FROM proposals WHERE id = ?", (proposal_id,)).fetchone()
    return None if row is None else ProposalRecord.from_row(row)


def proposals_page(
    conn: sqlite3.Connection, *, after: int, status: str | None, tenant: str | None, limit: int
) -> Page[ProposalRecord]:
    where, params = _where(("seq", after), status=status, tenant_id=tenant)
    sql = f"SELECT * FROM proposals WHERE {where} ORDER BY seq LIMIT ?"  # noqa: S608 - constant clauses
    rows = conn.execute(sql, [*params, limit + 1]).fetchall()
    return _page(rows, limit, ProposalRecord.from_row, "seq")


def memory_head(
    conn: sqlite3.Connection, memory_id: str, *, tenant: str | None = None
) -> MemoryRecord | None:
    """A memory's head (its current version), within ``tenant`` when one is given."""
    sql = f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ?"  # noqa: S608 - constant column list
    params: tuple[str, ...] = (memory_id,)
    if tenant is not None:
        sql += " AND m.tenant_id = ?"
        params = (memory_id, tenant)
    row = conn.execute(sql, params).fetchone()
    return None if row is None else MemoryRecord.from_row(row)


def active_topic_owner(
    conn: sqlite3.Connection, tenant: str, scope_kind: str, scope_id: str, topic: str
) -> tuple[str, int] | None:
    """The id and version of the active memory of a scope that holds ``topic``."""
    row = conn.execute(
        "SELECT id, version FROM memories WHERE tenant_id = ? AND scope_kind = ? AND scope_id = ?"
        " AND topic = ? AND status = 'active'",
        (tenant, scope_kind, scope_id, topic),
    ).fetchone()
    return None if row is None else (row[0], int(row[1]))


_VERSION_COLUMNS = (
    f"m.seq, m.id, m.tenant_id, m.scope_kind, m.scope_id, m.created_at, {LAST_ACCESSED_AT},"
    " v.version, v.kind, v.topic, v.content, v.importance, v.status, v.source, v.updated_at,"
    " v.approved_at"
)


def memory_versions_page(
    conn: sqlite3.Connection,
    *,
    tenant: str | None,
    scope_kind: str | None,
    scope_id: str | None,
    history: bool,
    after: tuple[str, int] | None,
    limit: int,
) -> Page[MemoryRecord]:
    """Memory versions ordered by (id, version); only each head's current one without ``history``."""
    where, params = _where(
        None if after is None else ("(v.memory_id, v.version)", after),
        m__tenant_id=tenant,
        m__scope_kind=scope_kind,
        m__scope_id=scope_id,
    )
    if not history:
        where += " AND v.version = m.version"
    sql = (
        f"SELECT {_VERSION_COLUMNS} FROM memory_versions v JOIN memories m ON m.id = v.memory_id"  # noqa: S608 - constant clauses
        f" WHERE {where} ORDER BY v.memory_id, v.version LIMIT ?"
    )
    rows = conn.execute(sql, [*params, limit + 1]).fetchall()
    items = [MemoryRecord.from_row(row) for row in rows[:limit]]
    last = (rows[limit - 1]["id"], rows[limit - 1]["version"]) if len(rows) > limit else None
    return Page(items, last)


def journal_page(
    conn: sqlite3.Connection,
    *,
    operation: str | None,
    credential_id: str | None,
    newest: int | None,
    after: int,
    limit: int,
) -> Page[JournalRow]:
    """Journal rows oldest first; with ``newest`` only the newest that many matching rows."""
    where, params = _where(None, operation=operation, credential_id=credential_id)
    if newest is not None:
        # keep the newest matching rows: start at the seq of the newest-th newest one
        oldest_kept = conn.execute(
            f"SELECT seq FROM journal WHERE {where} ORDER BY seq DESC LIMIT 1 OFFSET ?",  # noqa: S608 - constant clauses
            [*params, newest - 1],
        ).fetchone()
        if oldest_kept is not None:
            where += " AND seq >= ?"
            params.append(oldest_kept[0])
    rows = conn.execute(
        f"SELECT * FROM journal WHERE {where} AND seq > ? ORDER BY seq LIMIT ?",  # noqa: S608 - constant clauses
        [*params, after, limit + 1],
    ).fetchall()
    return _page(rows, limit, JournalRow.from_row, "seq")


def ledger_page(
    conn: sqlite3.Connection, *, account: str | None, after: int, limit: int
) -> Page[LedgerRecord]:
    where, params = _where(("seq", after), account_id=account)
    rows = conn.execute(
        f"SELECT * FROM ledger WHERE {where} ORDER BY seq LIMIT ?",  # noqa: S608 - constant clauses
        [*params, limit + 1],
    ).fetchall()
    return _page(rows, limit, LedgerRecord.from_row, "seq")


def account_tenant_and_balance(conn: sqlite3.Connection, account: str) -> tuple[str, int] | None:
    row = conn.execute("SELECT tenant_id, balance FROM accounts WHERE id = ?", (account,)).fetchone()
    return None if row is None else (row[0], int(row[1]))


def credential_exists(conn: sqlite3.Connection, credential_id: str) -> bool:
    return conn.execute("SELECT 1 FROM credentials WHERE id = ?", (credential_id,)).fetchone() is not None


def tenant_policy(conn: sqlite3.Connection, tenant: str) -> TenantPolicy | None:
    row = conn.execute(
        "SELECT auto_approve, proposal_ttl_seconds, rate_limit_per_minute FROM tenants WHERE id = ?",
        (tenant,),
    ).fetchone()
    if row is None:
        return None
    return TenantPolicy(
        auto_approve=json.loads(row[0]), proposal_ttl_seconds=row[1], rate_limit_per_minute=row[2]
    )


_POLICY_COLUMNS = ("auto_approve", "proposal_ttl_seconds", "rate_limit_per_minute")


def update_tenant_policy(conn: sqlite3.Connection, tenant: str, values: dict[str, Any]) -> None:
    """Set the given policy fields (``auto_approve`` is stored as JSON text)."""
    for column, value in values.items():
        if column not in _POLICY_COLUMNS:
            raise KeyError(column)
        if column == "auto_approve":
            value = json.dumps(value)
        conn.execute(f"UPDATE tenants SET {column} = ? WHERE id = ?", (value, tenant))  # noqa: S608 - checked column


def clear_rate_buckets(conn: sqlite3.Connection, tenant: str) -> None:
    conn.execute(
        "DELETE FROM rate_buckets WHERE credential_id IN (SELECT id FROM credentials WHERE tenant_id = ?)",
        (tenant,),
    )
