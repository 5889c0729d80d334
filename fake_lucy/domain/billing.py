"""One credit per executed call, the ledger, and the billing authority (SPEC 2.3)."""

from __future__ import annotations

import sqlite3

from fake_lucy.domain import events
from fake_lucy.domain.errors import DomainError
from fake_lucy.store.numbering import next_seq

__all__ = [
    "balance",
    "charge",
    "check_can_charge",
    "set_balance",
    "set_billing",
]


_NEXT = next_seq("ledger")  # a ledger row's number, never one a deleted row held


def set_billing(conn: sqlite3.Connection, available: bool) -> None:
    conn.execute("UPDATE server_state SET billing_available = ? WHERE id = 1", (available,))


def balance(conn: sqlite3.Connection, account: str) -> int:
    row = conn.execute("SELECT balance FROM accounts WHERE id = ?", (account,)).fetchone()
    return 0 if row is None else int(row[0])


def check_can_charge(*, billing_available: bool, balance: int) -> None:
    """Step 12: the billing authority, then the balance (both read in the write transaction)."""
    if not billing_available:
        raise DomainError(
            "billing_unavailable",
            "the billing authority could not complete the request; nothing was executed or charged",
        )
    if balance < 1:
        raise DomainError("insufficient_credits", "the account has no credits left; nothing was executed")


def charge(
    conn: sqlite3.Connection, *, tenant: str, account: str, request_id: str, operation: str, at: str
) -> int:
    """Take one credit with one conditional update and write its ledger row; returns the balance."""
    row = conn.execute(
        "UPDATE accounts SET balance = balance - 1 WHERE id = ? AND balance >= 1 RETURNING balance",
        (account,),
    ).fetchone()
    if row is None:
        raise DomainError("insufficient_credits", "the account has no credits left; nothing was executed")
    remaining = int(row[0])
    conn.execute(
        "INSERT INTO ledger (seq, account_id, tenant_id, request_id, operation, amount, balance_after, at)"  # noqa: S608 - _NEXT is constant SQL
        f" VALUES ({_NEXT}, ?, ?, ?, ?, -1, ?, ?)",
        (account, tenant, request_id, operation, remaining, at),
    )
    _changed(conn, account, -1, remaining, operation, request_id, at=at, tenant=tenant)
    return remaining


def _changed(
    conn: sqlite3.Connection,
    account: str,
    amount: int,
    balance: int,
    operation: str,
    request_id: str,
    *,
    at: str,
    tenant: str | None,
) -> None:
    data = {
        "account": account,
        "amount": amount,
        "balance": balance,
        "operation": operation,
        "request_id": request_id,
    }
    events.emit(conn, "credits.changed", data, at=at, tenant=tenant)


def set_balance(
    conn: sqlite3.Connection, *, account: str, new_balance: int, request_id: str, at: str
) -> None:
    """Set an existing account's balance; the ledger row carries the delta and the account's tenant."""
    row = conn.execute("SELECT balance, tenant_id FROM accounts WHERE id = ?", (account,)).fetchone()
    if row is None:
        raise DomainError("not_found", "no account has this id")
    conn.execute("UPDATE accounts SET balance = ? WHERE id = ?", (new_balance, account))
    amount = new_balance - int(row[0])
    conn.execute(
        "INSERT INTO ledger (seq, account_id, tenant_id, request_id, operation, amount, balance_after, at)"  # noqa: S608 - _NEXT is constant SQL
        f" VALUES ({_NEXT}, ?, ?, ?, 'admin_set', ?, ?, ?)",
        (account, row[1], request_id, new_balance - int(row[0]), new_balance, at),
    )
    _changed(conn, account, amount, new_balance, "admin_set", request_id, at=at, tenant=row[1])
