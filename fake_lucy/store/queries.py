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

from fake_lucy.store.numbering import keep_numbers
from fake_lucy.store.records import (
    MEMORY_COLUMNS,
    VERSION_COLUMNS,
    JournalRow,
    LedgerRecord,
    MemoryRecord,
    ProposalRecord,
    TenantPolicy,
    TenantSummary,
)

__all__ = [
    "JournalFilter",
    "MemoryFilter",
    "Page",
    "ProposalFilter",
    "TenantRecord",
    "TenantSummary",
    "account_tenant_and_balance",
    "active_topic_owner",
    "clear_rate_buckets",
    "credential_exists",
    "credential_tenant",
    "date_undated_tenants",
    "delete_tenant_row",
    "journal_page",
    "ledger_page",
    "memory_head",
    "memory_versions_page",
    "proposal",
    "proposals_page",
    "purge_tenant",
    "restore_tenant_start",
    "set_incarnation",
    "set_tenant_admin",
    "tenant",
    "tenant_admin_hashes",
    "tenant_by_admin_token",
    "tenant_ids",
    "tenant_policy",
    "tenants_page",
    "tenants_with_pending_proposals",
    "update_tenant_policy",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing; ``last`` is the key of its last item when more items follow."""

    items: list[T]
    last: Any | None


@dataclass(frozen=True, slots=True)
class ProposalFilter:
    """Which proposals a listing holds: those of ``status`` and of ``tenant``, each when given."""

    status: str | None = None
    tenant: str | None = None


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """Which memory versions a listing holds: of ``tenant`` and of the scope, each when given;
    every version with ``history``, else each memory's current one."""

    tenant: str | None = None
    scope_kind: str | None = None
    scope_id: str | None = None
    history: bool = True


@dataclass(frozen=True, slots=True)
class JournalFilter:
    """Which journal rows a listing holds: of ``operation``, ``credential_id`` and ``tenant``, each
    when given; with ``newest`` only the newest that many of them."""

    operation: str | None = None
    credential_id: str | None = None
    tenant: str | None = None
    newest: int | None = None


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
    conn: sqlite3.Connection, wanted: ProposalFilter, *, after: int, limit: int
) -> Page[ProposalRecord]:
    where, params = _where(("seq", after), status=wanted.status, tenant_id=wanted.tenant)
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


def memory_versions_page(
    conn: sqlite3.Connection, wanted: MemoryFilter, *, after: tuple[str, int] | None, limit: int
) -> Page[MemoryRecord]:
    """Memory versions ordered by (id, version)."""
    where, params = _where(
        None if after is None else ("(v.memory_id, v.version)", after),
        m__tenant_id=wanted.tenant,
        m__scope_kind=wanted.scope_kind,
        m__scope_id=wanted.scope_id,
    )
    if not wanted.history:
        where += " AND v.version = m.version"
    sql = (
        f"SELECT {VERSION_COLUMNS} FROM memory_versions v JOIN memories m ON m.id = v.memory_id"  # noqa: S608 - constant clauses
        f" WHERE {where} ORDER BY v.memory_id, v.version LIMIT ?"
    )
    rows = conn.execute(sql, [*params, limit + 1]).fetchall()
    items = [MemoryRecord.from_row(row) for row in rows[:limit]]
    last = (rows[limit - 1]["id"], rows[limit - 1]["version"]) if len(rows) > limit else None
    return Page(items, last)


def journal_page(
    conn: sqlite3.Connection, wanted: JournalFilter, *, after: int, limit: int
) -> Page[JournalRow]:
    """Journal rows oldest first."""
    where, params = _where(
        None, operation=wanted.operation, credential_id=wanted.credential_id, tenant=wanted.tenant
    )
    newest = wanted.newest
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
    conn: sqlite3.Connection, *, account: str | None, after: int, limit: int, tenant: str | None = None
) -> Page[LedgerRecord]:
    where, params = _where(("seq", after), account_id=account, tenant_id=tenant)
    if account is not None:  # the ledger's index is its tenant's: the account's rows are among them
        where += " AND tenant_id = (SELECT a.tenant_id FROM accounts a WHERE a.id = ?)"
        params.append(account)
    rows = conn.execute(
        f"SELECT * FROM ledger WHERE {where} ORDER BY seq LIMIT ?",  # noqa: S608 - constant clauses
        [*params, limit + 1],
    ).fetchall()
    return _page(rows, limit, LedgerRecord.from_row, "seq")


def account_tenant_and_balance(conn: sqlite3.Connection, account: str) -> tuple[str, int] | None:
    row = conn.execute("SELECT tenant_id, balance FROM accounts WHERE id = ?", (account,)).fetchone()
    return None if row is None else (row[0], int(row[1]))


def credential_tenant(conn: sqlite3.Connection, credential_id: str) -> str | None:
    row = conn.execute("SELECT tenant_id FROM credentials WHERE id = ?", (credential_id,)).fetchone()
    return None if row is None else str(row[0])


def credential_exists(conn: sqlite3.Connection, credential_id: str, *, tenant: str | None = None) -> bool:
    """Whether the credential exists (within ``tenant`` when one is given)."""
    row = conn.execute("SELECT tenant_id FROM credentials WHERE id = ?", (credential_id,)).fetchone()
    return row is not None and (tenant is None or row[0] == tenant)


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


# -- tenants (SPEC 3.6) ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TenantRecord:
    """What a tenant reset keeps or restores; ``first_credential_id`` and ``initial_credits``
    are null for a tenant not made by ``POST /_fake/tenants``."""

    id: str
    first_credential_id: str | None
    first_account_id: str | None
    initial_credits: int | None


def tenant(conn: sqlite3.Connection, tenant_id: str) -> TenantRecord | None:
    row = conn.execute(
        "SELECT t.id, t.first_credential_id, c.account_id, t.initial_credits FROM tenants t"
        " LEFT JOIN credentials c ON c.id = t.first_credential_id WHERE t.id = ?",
        (tenant_id,),
    ).fetchone()
    return None if row is None else TenantRecord(row[0], row[1], row[2], row[3])


# Each count reads one tenant's entries of an index (credentials by tenant, memories by tenant,
# proposals by status and tenant), never a table scan.
_TENANT_SUMMARY = (
    "SELECT t.rowid AS seq, t.id, t.created_at, t.admin_token_sha256 IS NOT NULL,"
    " (SELECT count(*) FROM credentials c WHERE c.tenant_id = t.id AND c.revoked = 0),"
    " (SELECT count(*) FROM memories m WHERE m.tenant_id = t.id AND m.status = 'active'),"
    " (SELECT count(*) FROM proposals p WHERE p.status = 'pending' AND p.tenant_id = t.id)"
    " FROM tenants t"
)


def tenants_page(
    conn: sqlite3.Connection, *, tenant: str | None, after: int, limit: int
) -> Page[TenantSummary]:
    """Tenants in the order they were made (row number), ``tenant`` alone when given."""
    where, params = _where(("t.rowid", after), t__id=tenant)
    rows = conn.execute(
        f"{_TENANT_SUMMARY} WHERE {where} ORDER BY t.rowid LIMIT ?",
        [*params, limit + 1],
    ).fetchall()
    return _page(rows, limit, TenantSummary.from_row, "seq")


def date_undated_tenants(conn: sqlite3.Connection, now: str) -> None:
    conn.execute("UPDATE tenants SET created_at = ? WHERE created_at IS NULL", (now,))


def tenant_ids(conn: sqlite3.Connection) -> list[str]:
    return [row[0] for row in conn.execute("SELECT id FROM tenants ORDER BY id")]


def tenant_admin_hashes(conn: sqlite3.Connection) -> dict[str, str | None]:
    """Every tenant's id and the sha256 of its admin token (None for a tenant without one)."""
    return {row[0]: row[1] for row in conn.execute("SELECT id, admin_token_sha256 FROM tenants")}


def tenant_by_admin_token(conn: sqlite3.Connection, token_sha256: str) -> str | None:
    row = conn.execute("SELECT id FROM tenants WHERE admin_token_sha256 = ?", (token_sha256,)).fetchone()
    return None if row is None else str(row[0])


def tenants_with_pending_proposals(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT DISTINCT tenant_id FROM proposals WHERE status = 'pending'")
    return [row[0] for row in rows]


def set_tenant_admin(
    conn: sqlite3.Connection, tenant_id: str, *, token_sha256: str, first_credential_id: str, credits: int
) -> None:
    conn.execute(
        "UPDATE tenants SET admin_token_sha256 = ?, first_credential_id = ?, initial_credits = ?"
        " WHERE id = ?",
        (token_sha256, first_credential_id, credits, tenant_id),
    )


def purge_tenant(conn: sqlite3.Connection, tenant_id: str, *, keep: TenantRecord | None) -> None:
    """Delete every row of the tenant but its full-text index (the caller's), its own row and,
    with ``keep``, its first credential and account: memories with their versions and access times,
    proposals, idempotency records, buckets, faults (its own and any on its credentials), journal
    and ledger rows, findings and what judging its clients remembers, the other credentials and
    accounts."""
    credential = None if keep is None else keep.first_credential_id
    account = None if keep is None else keep.first_account_id
    statements = (
        "DELETE FROM memory_access WHERE seq IN (SELECT seq FROM memories WHERE tenant_id = :t)",
        "DELETE FROM memory_versions WHERE memory_id IN (SELECT id FROM memories WHERE tenant_id = :t)",
        "DELETE FROM memories WHERE tenant_id = :t",
        "DELETE FROM proposals WHERE tenant_id = :t",
        "DELETE FROM idempotency_records WHERE account_id IN (SELECT id FROM accounts WHERE tenant_id = :t)",
        "DELETE FROM rate_buckets WHERE credential_id IN (SELECT id FROM credentials WHERE tenant_id = :t)",
        "DELETE FROM faults WHERE tenant_id = :t"
        " OR credential_id IN (SELECT id FROM credentials WHERE tenant_id = :t)",
        "DELETE FROM journal WHERE tenant = :t",
        "DELETE FROM journal_counts WHERE tenant = :t",
        "DELETE FROM ledger WHERE tenant_id = :t",
        "DELETE FROM findings WHERE tenant_id = :t",
        "DELETE FROM client_watch WHERE tenant_id = :t",
        "DELETE FROM poll_series WHERE credential_id IN (SELECT id FROM credentials WHERE tenant_id = :t)",
        "DELETE FROM credentials WHERE tenant_id = :t AND id IS NOT :credential",
        "DELETE FROM accounts WHERE tenant_id = :t AND id IS NOT :account",
    )
    keep_numbers(conn)  # the numbers the tenant's proposals, journal and ledger rows held
    for statement in statements:
        conn.execute(statement, {"t": tenant_id, "credential": credential, "account": account})


def restore_tenant_start(
    conn: sqlite3.Connection, record: TenantRecord, *, proposal_ttl_seconds: int
) -> None:
    """The first credential usable again, the first account at its initial credits, the default policy."""
    conn.execute("UPDATE credentials SET revoked = 0 WHERE id = ?", (record.first_credential_id,))
    conn.execute(
        "UPDATE accounts SET balance = ? WHERE id = ?", (record.initial_credits, record.first_account_id)
    )
    conn.execute(
        "UPDATE tenants SET auto_approve = ?, proposal_ttl_seconds = ?, rate_limit_per_minute = NULL"
        " WHERE id = ?",
        ('"off"', proposal_ttl_seconds, record.id),
    )


def set_incarnation(conn: sqlite3.Connection, tenant_id: str, incarnation: int) -> None:
    conn.execute("UPDATE tenants SET incarnation = ? WHERE id = ?", (incarnation, tenant_id))


def delete_tenant_row(conn: sqlite3.Connection, tenant_id: str) -> None:
    conn.execute("DELETE FROM tenants WHERE id = ?", (tenant_id,))
