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
    "in_transaction",
    "index_epoch",
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
    " EXISTS (SELECT 1 FROM faults WHERE remaining > 0), s.index_epoch,"
    " EXISTS (SELECT 1 FROM client_watch),"
    " (SELECT min(expires_at) FROM proposals WHERE tenant_id = t.id AND status = 'pending'){}"
    " FROM server_state s JOIN tenants t ON t.id = ? WHERE s.id = 1"
)
_STATE = _IN_TRANSACTION.format("")
_STATE_AND_SERIES = _IN_TRANSACTION.format(", " + SETTLED_SERIES)


def in_transaction(
    conn: sqlite3.Connection, tenant: str, account: str, *, poll: tuple[str, str] | None = None
) -> TransactionState:
    """``poll``: the credential and proposal id of a status poll, whose series is read too."""
    if poll is None:
        row = conn.execute(_STATE, (account, tenant)).fetchone()
    else:
        row = conn.execute(_STATE_AND_SERIES, (account, *poll, tenant)).fetchone()
    if row is None:  # deleted by another request since this one authenticated
        raise DomainError("unauthenticated", "the bearer token's tenant has been deleted")
    offset, frozen, available, balance, armed, index_epoch, watching, earliest, *settled = row
    return TransactionState(
        now_us=clock.from_state(offset, frozen),
        billing_available=bool(available),
        balance=0 if balance is None else int(balance),
        faults_armed=bool(armed),
        index_epoch=int(index_epoch),
        watching=bool(watching),
        earliest_pending_expiry=earliest,
        series_settled=bool(settled and settled[0]),
    )


def index_epoch(conn: sqlite3.Connection) -> int:
    """The epoch of the recallable memories, as the caller's snapshot sees them."""
    (epoch,) = conn.execute("SELECT index_epoch FROM server_state WHERE id = 1").fetchone()
    return int(epoch)
