"""What the reviewer's pages show, one function per page (SPEC 3.10), over the same listings as
the control API (``domain.admin``). Each runs in the caller's write transaction (listing proposals
persists due expiries) and takes the session's tenant scope: ``None`` is the server admin's view."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from fake_lucy.domain import admin, clock, events, faults, policy
from fake_lucy.domain.tenants import AdminScope
from fake_lucy.store import findings as findings_store
from fake_lucy.store import review
from fake_lucy.store.queries import JournalFilter, MemoryFilter, ProposalFilter
from fake_lucy.store.records import JournalRow, LedgerRecord, MemoryRecord, ProposalRecord, TenantPolicy
from fake_lucy.store.review import AccountRow

__all__ = [
    "Chain",
    "CreditsView",
    "Listing",
    "QueueItem",
    "QueueView",
    "SettingsView",
    "credits",
    "memories",
    "proposals",
    "queue",
    "request_chains",
    "settings",
]

QUEUE_PAGE = 50
REQUESTS_SHOWN = 150
LEDGER_SHOWN = 500  # for the charts; the table shows the newest LEDGER_LISTED
LEDGER_LISTED = 100
ACCOUNTS_SHOWN = 200
TENANTS_SHOWN = 200
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class QueueItem:
    proposal: ProposalRecord
    replaced: MemoryRecord | None  # the version a replacement would supersede (if it still exists)


@dataclass(frozen=True, slots=True)
class QueueView:
    items: list[QueueItem]
    pending: int
    next_after: int | None
    now: str
    last_event_id: int
    # the clock of each listed proposal's tenant that is not ``now`` (a tenant admin moved it):
    # its expiry follows that one
    tenant_now: dict[str, str] = field(default_factory=dict)
    # real milliseconds until the first listed proposal expires by its tenant's running clock (a
    # frozen clock moves only by a control call, which is an event of its own); None: none will
    next_expiry_ms: int | None = None
    after: int = 0  # the page starts after this proposal's row number (0: the first page)


def queue(
    conn: sqlite3.Connection, *, tenant: str | None, after: int = 0, limit: int = QUEUE_PAGE
) -> QueueView:
    """Pending proposals oldest first, each replacement with the version it replaces (a memory of
    the proposal's own tenant: a restored snapshot may name any id there)."""
    page = admin.proposals(conn, ProposalFilter("pending", tenant), after=after, limit=limit)
    wanted = [
        (p.tenant_id, p.replaces_memory_id, p.replaces_version)
        for p in page.items
        if p.replaces_memory_id is not None and p.replaces_version is not None
    ]
    found = review.versions(conn, wanted)
    items = [
        QueueItem(
            p,
            None
            if p.replaces_memory_id is None or p.replaces_version is None
            else found.get((p.tenant_id, p.replaces_memory_id, p.replaces_version)),
        )
        for p in page.items
    ]
    now_us = clock.now_us(conn, tenant)  # a tenant's session: its own clock, which its expiries follow
    others = {each: clock.now_us(conn, each) for each in {p.tenant_id for p in page.items} - {tenant}}
    running = {each: not clock.state(conn, each)["frozen"] for each in {p.tenant_id for p in page.items}}
    waits = [
        (clock.parse_timestamp(p.expires_at) - others.get(p.tenant_id, now_us)) // 1000
        for p in page.items
        if running[p.tenant_id]
    ]
    # a clock read a moment later is not another clock: one a second or more apart is
    apart = {each: us for each, us in others.items() if abs(us - now_us) >= 1_000_000}
    return QueueView(
        items=items,
        pending=review.pending_count(conn, tenant=tenant),
        next_after=page.last,
        now=clock.format_us(now_us),
        last_event_id=events.resume_after(conn, None),
        tenant_now={each: clock.format_us(us) for each, us in apart.items()},
        next_expiry_ms=max(0, min(waits)) if waits else None,
        after=after,
    )


@dataclass(slots=True)
class Chain:
    """Requests that belong together: the attempts of one propose key, or one other request.

    ``rows`` oldest first; the chain is as new as its newest attempt."""

    operation: str
    credential_id: str
    key: str | None
    rows: list[JournalRow] = field(default_factory=list)

    @property
    def statuses(self) -> list[int | None]:
        return [row.status for row in self.rows]

    @property
    def charged(self) -> int:
        return sum(1 for row in self.rows if row.charged)

    @property
    def replayed(self) -> int:
        return sum(1 for row in self.rows if row.replayed)

    @property
    def dropped(self) -> int:
        return sum(1 for row in self.rows if row.dropped)

    findings: list[str] = field(default_factory=list)  # the codes of findings naming its requests

    @property
    def faults(self) -> list[str]:
        return [row.fault_id for row in self.rows if row.fault_id is not None]

    @property
    def retries(self) -> list[int]:
        """The attempts' ``Lucy-Retry-Attempt`` values, when any was a retry."""
        attempts = [row.retry_attempt for row in self.rows]
        return attempts if any(attempts) else []

    @property
    def last(self) -> JournalRow:
        return self.rows[-1]


def request_chains(
    conn: sqlite3.Connection, *, tenant: str | None, newest: int = REQUESTS_SHOWN
) -> tuple[list[Chain], int]:
    """The newest journal rows as chains, newest chain first, and the last event id (the live tail).

    A retry chain is every request of one credential under one ``Idempotency-Key``.
    """
    rows = admin.journal(conn, JournalFilter(tenant=tenant, newest=newest), after=0, limit=newest).items
    chains: dict[tuple[str, str], Chain] = {}
    ordered: list[Chain] = []
    for row in rows:
        if row.idempotency_key is None:
            chain = Chain(row.operation, row.credential_id, None)
            ordered.append(chain)
        else:
            by = (row.credential_id, row.idempotency_key)
            chain = chains.get(by) or Chain(row.operation, row.credential_id, row.idempotency_key)
            if by in chains:
                ordered.remove(chain)
            chains[by] = chain
            ordered.append(chain)
        chain.rows.append(row)
    ordered.reverse()
    # the findings that name these requests (SPEC 3.10: findings marked), each code once a chain
    by_request = {row.request_id: chain for chain in ordered for row in chain.rows}
    for finding in reversed(findings_store.newest_findings(conn, tenant=tenant, limit=newest)):
        for request_id in finding.request_ids:
            marked = by_request.get(request_id)
            if marked is not None and finding.code not in marked.findings:
                marked.findings.append(finding.code)
    return ordered, events.resume_after(conn, None)


@dataclass(frozen=True, slots=True)
class CreditsView:
    accounts: list[AccountRow]  # the first ACCOUNTS_SHOWN, by tenant and id
    account_count: int  # all of them (of the tenant shown)
    ledger: list[LedgerRecord]  # the newest LEDGER_LISTED rows, newest first
    series: dict[str, list[int]]  # per account: its balance after each of those rows
    last_event_id: int


def credits(conn: sqlite3.Connection, *, tenant: str | None) -> CreditsView:
    accounts = review.accounts(conn, tenant=tenant, limit=ACCOUNTS_SHOWN)
    ledger = review.ledger_newest(conn, tenant=tenant, limit=LEDGER_SHOWN)
    series: dict[str, list[int]] = {}
    for row in ledger:
        series.setdefault(row.account_id, []).append(row.balance_after)
    listed = ledger[-LEDGER_LISTED:][::-1]
    count = review.account_count(conn, tenant=tenant)
    return CreditsView(accounts, count, listed, series, events.resume_after(conn, None))


@dataclass(frozen=True, slots=True)
class SettingsView:
    clock: dict[str, object]
    faults: list[dict[str, Any]]
    policies: dict[str, TenantPolicy]  # the first TENANTS_SHOWN tenants' (of ``policies_of``), by id
    tenant_count: int  # all of them
    last_event_id: int


def settings(conn: sqlite3.Connection, *, tenant: str | None, policies_of: str | None = None) -> SettingsView:
    """``tenant``: the scope (a tenant admin's); ``policies_of``: the one tenant whose policy the server
    admin asked for (the clock and the faults stay the scope's)."""
    shown = tenant if tenant is not None else policies_of
    tenants = review.tenant_ids(conn, tenant=shown, limit=TENANTS_SHOWN)
    return SettingsView(
        clock=clock.state(conn, tenant),
        faults=faults.list_faults(conn, tenant=tenant),
        policies={name: policy.get_policy(conn, name) for name in tenants},
        tenant_count=review.tenant_count(conn, tenant=shown),
        last_event_id=events.resume_after(conn, None),
    )


@dataclass(frozen=True, slots=True)
class Listing(Generic[T]):
    items: list[T]
    next_after: Any | None
    last_event_id: int


def proposals(
    conn: sqlite3.Connection,
    *,
    scope: AdminScope,
    tenant: str | None,
    status: str | None,
    after: int,
    limit: int,
) -> Listing[ProposalRecord]:
    """Proposals of every status (or one), of every tenant ``scope`` reaches (or one), in creation
    order: as the control API lists them (a tenant admin filtering by another tenant: none)."""
    page = admin.proposals(conn, ProposalFilter(status, tenant), after=after, limit=limit, scope=scope)
    return Listing(page.items, page.last, events.resume_after(conn, None))


def memories(
    conn: sqlite3.Connection, *, tenant: str | None, history: bool, after: tuple[str, int] | None, limit: int
) -> Listing[MemoryRecord]:
    """Memories ordered by (id, version): the current versions, or every version with ``history``."""
    page = admin.memories(conn, MemoryFilter(tenant, history=history), after=after, limit=limit)
    return Listing(page.items, page.last, events.resume_after(conn, None))
