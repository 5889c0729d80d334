"""The administrative operations of SPEC 3.2, one function each, within an ``AdminScope``.

The control API, and every other surface a person or a test drives the fake with, call these and
nothing else: each runs inside the caller's write transaction, reads the clock of the tenant it
acts in and returns typed records (or raises a ``DomainError``). ``scope`` (default: the server
admin) is who acts: a tenant admin reaches only its tenant's objects — another tenant's is
``not_found`` and its listings show its tenant alone (SPEC 3.6).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Literal, TypeVar

from fake_lucy.domain import billing, clock, lifecycle, principals
from fake_lucy.domain.errors import DomainError, invalid_field
from fake_lucy.domain.ids import IdFactory
from fake_lucy.domain.principals import NewCredential
from fake_lucy.domain.tenants import SERVER, AdminScope
from fake_lucy.store import queries
from fake_lucy.store.queries import JournalFilter, MemoryFilter, Page, ProposalFilter
from fake_lucy.store.records import JournalRow, LedgerRecord, MemoryRecord, ProposalRecord, TenantSummary
from lucy_memory._contract import SecretScanner

__all__ = [
    "Decision",
    "create_credential",
    "decide",
    "delete_memory",
    "journal",
    "ledger",
    "memories",
    "memory_to_delete",
    "proposals",
    "restore_memory",
    "revoke_credential",
    "set_balance",
    "tenants",
]

Decision = Literal["approve", "reject", "expire"]


def create_credential(
    conn: sqlite3.Connection,
    ids: IdFactory,
    new: NewCredential,
    *,
    request_id: str,
    scope: AdminScope = SERVER,
) -> dict[str, str]:
    """A credential (tenant and account made on first use, for the server admin); returns the
    token once.

    A tenant admin names an account of its own tenant, or none (a new one is made): account ids
    are global, so one it may not name is ``not_found`` whether it belongs to another tenant or to
    none — an answer that tells nothing about other tenants (the server admin gets
    ``account_conflict`` for another tenant's)."""
    if not scope.sees(new.tenant):
        raise DomainError("not_found", "no tenant with this id is within reach of this admin token")
    if scope.tenant is not None and new.account is not None:
        owner = queries.account_tenant_and_balance(conn, new.account)
        if owner is None or owner[0] != scope.tenant:
            raise DomainError(
                "not_found", "no account of this tenant has this id (leave account out for a new one)"
            )
    return principals.create_credential(conn, ids, new, request_id=request_id)


def revoke_credential(conn: sqlite3.Connection, credential_id: str, *, scope: AdminScope = SERVER) -> None:
    owner = queries.credential_tenant(conn, credential_id)
    if owner is None or not scope.sees(owner):
        raise DomainError("not_found", "no credential has this id")
    principals.revoke_credential(conn, credential_id)


def set_balance(
    conn: sqlite3.Connection, *, account: str, balance: int, request_id: str, scope: AdminScope = SERVER
) -> None:
    owner = queries.account_tenant_and_balance(conn, account)
    if owner is None or not scope.sees(owner[0]):
        raise DomainError("not_found", "no account has this id")
    billing.set_balance(
        conn, account=account, new_balance=balance, request_id=request_id, at=clock.now(conn, owner[0])
    )


def _expire_due(conn: sqlite3.Connection, tenant: str | None) -> None:
    """Persist the effective status of ``tenant``'s proposals, or of every tenant's, each by its clock."""
    for each in [tenant] if tenant is not None else queries.tenants_with_pending_proposals(conn):
        lifecycle.expire_due(conn, each, clock.now(conn, each))


_Filter = TypeVar("_Filter", ProposalFilter, MemoryFilter, JournalFilter)
_Item = TypeVar("_Item")


def _listing(scope: AdminScope, wanted: _Filter, read: Callable[[_Filter], Page[_Item]]) -> Page[_Item]:
    """``read`` with the filter narrowed to the tenants ``scope`` reaches; an empty page when a
    tenant admin asks for another tenant."""
    tenant, empty = scope.narrow(wanted.tenant)
    return Page([], None) if empty else read(replace(wanted, tenant=tenant))


def proposals(
    conn: sqlite3.Connection, wanted: ProposalFilter, *, after: int, limit: int, scope: AdminScope = SERVER
) -> Page[ProposalRecord]:
    """Proposals in creation order, filtered by their effective status."""

    def read(reached: ProposalFilter) -> Page[ProposalRecord]:
        if reached.tenant is None or queries.tenant(conn, reached.tenant) is not None:
            _expire_due(conn, reached.tenant)
        return queries.proposals_page(conn, reached, after=after, limit=limit)

    return _listing(scope, wanted, read)


def decide(
    conn: sqlite3.Connection,
    ids: IdFactory,
    proposal_id: str,
    decision: Decision,
    *,
    reason_detail: str | None = None,
    scope: AdminScope = SERVER,
) -> ProposalRecord:
    """A reviewer's decision on a pending proposal (a final one is ``invalid_transition``). A
    rejection's reason that looks like a secret is refused (422 at ``/reason_detail``, without
    echo): the reason is stored, and shown to the proposal's agent by proposal status (SPEC 1.5)."""
    if decision == "reject" and reason_detail is not None:
        found_secret = _SCANNER.find(reason_detail)
        if found_secret is not None:
            raise invalid_field(
                "/reason_detail",
                f"holds secret-looking text ({found_secret}); a reason is stored and shown to the"
                " agent by proposal status, so it never holds a secret",
            )
    found = queries.proposal(conn, proposal_id)
    if found is None or not scope.sees(found.tenant_id):
        raise DomainError("not_found", "no proposal has this id")
    now = clock.now(conn, found.tenant_id)
    lifecycle.expire_due(conn, found.tenant_id, now)
    record = lifecycle.load_proposal(conn, proposal_id)
    if decision == "approve":
        return lifecycle.approve(conn, ids, record, now=now)
    if decision == "reject":
        return lifecycle.reject(conn, record, now=now, reason_detail=reason_detail)
    return lifecycle.expire(conn, record, now=now)


_SCANNER = SecretScanner()


def memories(
    conn: sqlite3.Connection,
    wanted: MemoryFilter,
    *,
    after: tuple[str, int] | None,
    limit: int,
    scope: AdminScope = SERVER,
) -> Page[MemoryRecord]:
    """Memory versions ordered by (id, version)."""
    return _listing(scope, wanted, partial(queries.memory_versions_page, conn, after=after, limit=limit))


def journal(
    conn: sqlite3.Connection, wanted: JournalFilter, *, after: int, limit: int, scope: AdminScope = SERVER
) -> Page[JournalRow]:
    """The journal oldest first (a tenant admin's: its tenant's rows)."""
    return _listing(scope, wanted, partial(queries.journal_page, conn, after=after, limit=limit))


def ledger(
    conn: sqlite3.Connection, *, account: str | None, after: int, limit: int, scope: AdminScope = SERVER
) -> Page[LedgerRecord]:
    """The ledger oldest first (a tenant admin's: its tenant's rows)."""
    return queries.ledger_page(conn, account=account, after=after, limit=limit, tenant=scope.tenant)


def tenants(
    conn: sqlite3.Connection, *, after: int, limit: int, scope: AdminScope = SERVER
) -> Page[TenantSummary]:
    """The tenants in the order they were made, with their pending proposals counted by their
    effective status (a tenant admin's: its tenant alone). An operator finds there the tenants
    that test sessions left behind."""
    _expire_due(conn, scope.tenant)
    return queries.tenants_page(conn, tenant=scope.tenant, after=after, limit=limit)


def _memory_in_reach(conn: sqlite3.Connection, memory_id: str, scope: AdminScope) -> MemoryRecord:
    head = queries.memory_head(conn, memory_id, tenant=scope.tenant)
    if head is None:
        raise DomainError("not_found", "no memory has this id")
    return head


def memory_to_delete(conn: sqlite3.Connection, memory_id: str, *, scope: AdminScope = SERVER) -> MemoryRecord:
    """The memory a delete would act on, checked as the delete checks it (in reach, active), and
    nothing changed: what a confirmation asks about."""
    head = _memory_in_reach(conn, memory_id, scope)
    lifecycle.require_deletable(head)
    return head


def delete_memory(conn: sqlite3.Connection, memory_id: str, *, scope: AdminScope = SERVER) -> MemoryRecord:
    head = _memory_in_reach(conn, memory_id, scope)
    return lifecycle.delete_memory(conn, memory_id, now=clock.now(conn, head.tenant_id))


def restore_memory(conn: sqlite3.Connection, memory_id: str, *, scope: AdminScope = SERVER) -> MemoryRecord:
    head = _memory_in_reach(conn, memory_id, scope)
    return lifecycle.restore_memory(conn, memory_id, now=clock.now(conn, head.tenant_id))
