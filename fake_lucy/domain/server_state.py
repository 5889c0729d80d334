"""What a v1 request needs from the one-row ``server_state`` table, read in one statement each.

``at_start``: once per request, before authentication — whether any fault can still fire, and the
credential epoch (which keeps the principal cache of ``principals.PrincipalCache`` honest across
workers). The clock of the journal and the rate limiter is the caller's tenant's, which the
principal carries (a clock change moves the epoch).
``in_transaction``: once inside the request's write transaction — the tenant's clock (timestamps
of what the transaction writes), the billing authority, the account's balance and, again, whether
a fault can fire (decided under the write lock, so the journal row may join the same commit) and
the epoch of the recallable memories (``bump_index_epoch``), whether the findings' watch on
failed answers holds any row (with none, the judge of a recall or propose has nothing to look up),
and the tenant's earliest pending expiry (``expiry_due``: with none due, the expiry sweep is not
run); for a status poll, also whether its proposal's poll series is settled
(``findings.poll_is_settled``).
Both ``in_transaction`` and ``check_tenant`` hold a request to the tenant it authenticated against:
a tenant reset, restored or made again under its id while the request ran (its ``incarnation``
changed) is not the request's, so the request does nothing more in it (503 ``unavailable``,
retryable: nothing was done; 401 when the tenant is gone), and a journal row it would write after
answering is not written (``tenant_is``).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from fake_lucy.domain import clock
from fake_lucy.domain.epochs import bump_index_epoch
from fake_lucy.domain.errors import DomainError
from fake_lucy.store.findings import SETTLED_SERIES

__all__ = [
    "RequestStart",
    "TransactionState",
    "at_start",
    "bump_index_epoch",
    "check_tenant",
    "in_transaction",
    "index_epoch",
    "tenant_is",
]


@dataclass(frozen=True, slots=True)
class RequestStart:
    faults_armed: bool
    auth_epoch: int


@dataclass(frozen=True, slots=True)
class TransactionState:
    now_us: int
    billing_available: bool
    balance: int  # 0 when the account does not exist
    faults_armed: bool
    index_epoch: int
    watching: bool  # ``client_watch`` has a row (findings.observe)
    earliest_pending_expiry: str | None  # of the tenant's pending proposals; None: none pending
    series_settled: bool = False  # the polled proposal's series is settled (``poll`` was given)

    def expiry_due(self, now: str) -> bool:
        """Whether a pending proposal of the tenant is at or past its expiry at ``now`` (the
        tenant's clock): only then has ``lifecycle.expire_due`` anything to do."""
        return self.earliest_pending_expiry is not None and self.earliest_pending_expiry <= now


def at_start(conn: sqlite3.Connection) -> RequestStart:
    armed, epoch = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM faults WHERE remaining > 0), auth_epoch FROM server_state WHERE id = 1"
    ).fetchone()
    return RequestStart(bool(armed), int(epoch))


_IN_TRANSACTION = (
    "SELECT t.clock_offset_us, t.clock_frozen_us, s.billing_available,"
    " (SELECT balance FROM accounts WHERE id = ?),"
    " (SELECT NOT revoked FROM credentials WHERE id = ?),"
    " EXISTS (SELECT 1 FROM faults WHERE remaining > 0), s.index_epoch,"
    " EXISTS (SELECT 1 FROM client_watch),"
    " (SELECT min(expires_at) FROM proposals WHERE tenant_id = t.id AND status = 'pending'),"
    " t.incarnation{}"
    " FROM server_state s JOIN tenants t ON t.id = ? WHERE s.id = 1"
)
_STATE = _IN_TRANSACTION.format("")
_STATE_AND_SERIES = _IN_TRANSACTION.format(", " + SETTLED_SERIES)


_GONE = "the bearer token's tenant has been deleted"
_REVOKED = "the bearer token was revoked while this request ran; nothing was done"
_REPLACED = "the tenant was reset, restored or made again while this request ran; nothing was done (retry)"


def in_transaction(
    conn: sqlite3.Connection,
    tenant: str,
    account: str,
    credential: str,
    *,
    incarnation: int,
    poll: tuple[str, str] | None = None,
) -> TransactionState:
    """``incarnation``: the tenant's as the request authenticated (``Principal.incarnation``);
    ``poll``: the credential and proposal id of a status poll, whose series is read too. The
    request's credential revoked since it authenticated is 401, as its next request will be."""
    if poll is None:
        row = conn.execute(_STATE, (account, credential, tenant)).fetchone()
    else:
        row = conn.execute(_STATE_AND_SERIES, (account, credential, *poll, tenant)).fetchone()
    if row is None:  # deleted by another request since this one authenticated
        raise DomainError("unauthenticated", _GONE)
    offset, frozen, available, balance, active, armed, index_epoch, watching, earliest, current, *rest = row
    if current != incarnation:
        raise DomainError("unavailable", _REPLACED)
    if not active:
        raise DomainError("unauthenticated", _REVOKED)
    return TransactionState(
        now_us=clock.from_state(offset, frozen),
        billing_available=bool(available),
        balance=0 if balance is None else int(balance),
        faults_armed=bool(armed),
        index_epoch=int(index_epoch),
        watching=bool(watching),
        earliest_pending_expiry=earliest,
        series_settled=bool(rest and rest[0]),
    )


def tenant_is(conn: sqlite3.Connection, tenant: str, incarnation: int) -> bool:
    """Whether ``tenant`` is still the one of ``incarnation`` (not deleted, reset or replaced)."""
    row = conn.execute("SELECT incarnation FROM tenants WHERE id = ?", (tenant,)).fetchone()
    return row is not None and row[0] == incarnation


def check_tenant(conn: sqlite3.Connection, tenant: str, incarnation: int) -> None:
    """``tenant_is``, or the request's answer: 401 when the tenant is gone, else 503 ``unavailable``."""
    row = conn.execute("SELECT incarnation FROM tenants WHERE id = ?", (tenant,)).fetchone()
    if row is None:
        raise DomainError("unauthenticated", _GONE)
    if row[0] != incarnation:
        raise DomainError("unavailable", _REPLACED)


def index_epoch(conn: sqlite3.Connection) -> int:
    """The epoch of the recallable memories, as the caller's snapshot sees them."""
    (epoch,) = conn.execute("SELECT index_epoch FROM server_state WHERE id = 1").fetchone()
    return int(epoch)
