"""The administrative operations of SPEC 3.2, one function each.

The control API, and every other surface a person or a test drives the fake with, call these and
nothing else: each runs inside the caller's write transaction, reads the server clock itself and
returns typed records (or raises a ``DomainError``).
"""

from __future__ import annotations

import sqlite3
from typing import Literal

from fake_lucy.domain import billing, clock, lifecycle
from fake_lucy.domain.ids import IdFactory
from fake_lucy.store import queries
from fake_lucy.store.queries import Page
from fake_lucy.store.records import MemoryRecord, ProposalRecord

__all__ = [
    "Decision",
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


# Listings the domain adds no rule to: the store's queries as they are.
memories = queries.memory_versions_page
journal = queries.journal_page
ledger = queries.ledger_page


def delete_memory(conn: sqlite3.Connection, memory_id: str) -> MemoryRecord:
    return lifecycle.delete_memory(conn, memory_id, now=clock.now(conn))


def restore_memory(conn: sqlite3.Connection, memory_id: str) -> MemoryRecord:
    return lifecycle.restore_memory(conn, memory_id, now=clock.now(conn))
