"""What a v1 request needs from the one-row ``server_state`` table, read in one statement each.

``at_start``: once per request, before authentication — the clock (for the journal and the rate
limiter), whether any fault can still fire, and the credential epoch (which keeps the principal
cache of ``principals.PrincipalCache`` honest across workers).
``in_transaction``: once inside the request's write transaction — the clock again (timestamps of
what the transaction writes), the billing authority, the account's balance and, again, whether a
fault can fire (decided under the write lock, so the journal row may join the same commit) and
the epoch of the recallable memories (``bump_index_epoch``).
"""

from __future__ import annotations

import secrets
import sqlite3
from dataclasses import dataclass

from fake_lucy.domain import clock

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
    now_us: int
    faults_armed: bool
    auth_epoch: int


@dataclass(frozen=True, slots=True)
class TransactionState:
    now_us: int
    billing_available: bool
    balance: int  # 0 when the account does not exist
    faults_armed: bool
    index_epoch: int


def at_start(conn: sqlite3.Connection) -> RequestStart:
    offset, frozen, armed, epoch = conn.execute(
        "SELECT clock_offset_us, clock_frozen_us,"
        " EXISTS (SELECT 1 FROM faults WHERE remaining > 0), auth_epoch"
        " FROM server_state WHERE id = 1"
    ).fetchone()
    return RequestStart(clock.from_state(offset, frozen), bool(armed), int(epoch))


def in_transaction(conn: sqlite3.Connection, account: str) -> TransactionState:
    offset, frozen, available, balance, armed, index_epoch = conn.execute(
        "SELECT clock_offset_us, clock_frozen_us, billing_available,"
        " (SELECT balance FROM accounts WHERE id = ?),"
        " EXISTS (SELECT 1 FROM faults WHERE remaining > 0), index_epoch"
        " FROM server_state WHERE id = 1",
        (account,),
    ).fetchone()
    return TransactionState(
        now_us=clock.from_state(offset, frozen),
        billing_available=bool(available),
        balance=0 if balance is None else int(balance),
        faults_armed=bool(armed),
        index_epoch=int(index_epoch),
    )


def index_epoch(conn: sqlite3.Connection) -> int:
    """The epoch of the recallable memories, as the caller's snapshot sees them."""
    (epoch,) = conn.execute("SELECT index_epoch FROM server_state WHERE id = 1").fetchone()
    return int(epoch)


def bump_index_epoch(conn: sqlite3.Connection) -> None:
    """Tell every worker's ``RecallCache`` that the recallable memories changed: called by each
    write to the full-text index, in the writer's transaction.

    A new random value rather than a counter, as for ``auth_epoch``: reset recreates the row.
    """
    conn.execute("UPDATE server_state SET index_epoch = ? WHERE id = 1", (secrets.randbits(62),))
