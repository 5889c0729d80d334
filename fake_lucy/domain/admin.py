"""The administrative operations of SPEC 3.2, one function each.

The control API, and every other surface a person or a test drives the fake with, call these and
nothing else: each runs inside the caller's write transaction, reads the server clock itself and
returns typed records (or raises a ``DomainError``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Literal

from fake_lucy.domain import billing, clock, lifecycle
from fake_lucy.domain.ids import IdFactory
from fake_lucy.domain.principals import create_credential as _create_credential
from fake_lucy.store import queries
from fake_lucy.store.queries import Page
from fake_lucy.store.records import JournalRow, LedgerRecord, MemoryRecord, ProposalRecord

__all__ = [
    "Decision",
    "create_credential",
    "decide",
    "delete_memory",
    "journal",
    "ledger",
    "memories",
    "proposals",
    "restore_memory",
    "set_balance",
]

Decision = Literal["approve", "reject", "expire"]


def create_credential(
    conn: sqlite3.Connection,
    ids: IdFactory,
    *,
    request_id: str,
    tenant: str,
    account: str | None,
    user: str | None,
    permissions: Sequence[str],
    scopes: Sequence[dict[str, str]],
    credits: int | None,
) -> dict[str, str]:
    """A credential (tenant and account created on first use). ``credits`` on an existing account
    of the tenant sets its balance, with the ``admin_set`` ledger row a balance change writes."""
    if account is not None and credits is not None:
        existing = queries.account_tenant_and_balance(conn, account)
        if existing is not None and existing[0] == tenant and existing[1] != credits:
            set_balance(conn, account=account, balance=credits, request_id=request_id)
    return _create_credential(
        conn,
        ids,
        tenant=tenant,
        account=account,
        user=user,
        permissions=permissions,
        scopes=scopes,
        credits=credits,
    )


def set_balance(conn: sqlite3.Connection, *, account: str, balance: int, request_id: str) -> None:
    billing.set_balance(conn, account=account, new_balance=balance, request_id=request_id, at=clock.now(conn))


def proposals(
    conn: sqlite3.Connection, *, status: str | None, tenant: str | None, after: int, limit: int
) -> Page[ProposalRecord]:
    """Proposals in creation order, filtered by their effective status."""
    lifecycle.expire_due(conn, clock.now(conn))
    return queries.proposals_page(conn, after=after, status=status, tenant=tenant, limit=limit)


def decide(
    conn: sqlite3.Connection,
    ids: IdFactory,
    proposal_id: str,
    decision: Decision,
    *,
    reason_detail: str | None = None,
) -> ProposalRecord:
    """A reviewer's decision on a pending proposal (a final one is ``invalid_transition``)."""
    now = clock.now(conn)
    lifecycle.expire_due(conn, now)
    record = lifecycle.load_proposal(conn, proposal_id)
    if decision == "approve":
        return lifecycle.approve(conn, ids, record, now=now)
    if decision == "reject":
        return lifecycle.reject(conn, record, now=now, reason_detail=reason_detail)
    return lifecycle.expire(conn, record, now=now)


def memories(
    conn: sqlite3.Connection,
    *,
    tenant: str | None,
    scope_kind: str | None,
    scope_id: str | None,
    history: bool,
    after: tuple[str, int] | None,
    limit: int,
) -> Page[MemoryRecord]:
    return queries.memory_versions_page(
        conn,
        tenant=tenant,
        scope_kind=scope_kind,
        scope_id=scope_id,
        history=history,
        after=after,
        limit=limit,
    )


def delete_memory(conn: sqlite3.Connection, memory_id: str) -> MemoryRecord:
    return lifecycle.delete_memory(conn, memory_id, now=clock.now(conn))


def restore_memory(conn: sqlite3.Connection, memory_id: str) -> MemoryRecord:
    return lifecycle.restore_memory(conn, memory_id)


def journal(
    conn: sqlite3.Connection,
    *,
    operation: str | None,
    credential_id: str | None,
    newest: int | None,
    after: int,
    limit: int,
) -> Page[JournalRow]:
    return queries.journal_page(
        conn, operation=operation, credential_id=credential_id, newest=newest, after=after, limit=limit
    )


def ledger(conn: sqlite3.Connection, *, account: str | None, after: int, limit: int) -> Page[LedgerRecord]:
    return queries.ledger_page(conn, account=account, after=after, limit=limit)
