"""Idempotent proposals (SPEC 2.3): ``(account, Idempotency-Key) → (body hash, status, body)``.

Only successful responses are stored. A record is ``in_flight`` while its request executes after a
separate commit (the ``in_flight`` fault), so that a concurrent request with the same key meets 409.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from fake_lucy.domain.errors import DomainError
from fake_lucy.domain.principals import Principal, Scope

__all__ = ["Replay", "after_hold", "discard", "discard_held", "lookup", "record"]

# An in-flight marker older than this belongs to a request that died; it no longer blocks the key.
IN_FLIGHT_GRACE_SECONDS = 120


@dataclass(frozen=True, slots=True)
class Replay:
    status: int
    body: bytes
    original_request_id: str


def lookup(
    conn: sqlite3.Connection,
    principal: Principal,
    key: str,
    body_sha256: str,
    *,
    now: str,
) -> Replay | None:
    """Step 10: a replay, a refusal, or ``None`` (the key is free)."""
    row = conn.execute(
        "SELECT * FROM idempotency_records WHERE account_id = ? AND key = ?",
        (principal.account_id, key),
    ).fetchone()
    if row is None:
        return None
    stale = row["state"] == "in_flight" and (row["in_flight_until"] or "") <= now
    if row["expires_at"] <= now or stale:
        discard(conn, principal.account_id, key)
        return None
    if row["body_sha256"] != body_sha256:
        raise DomainError(
            "idempotency_key_reused",
            "this Idempotency-Key was used with a different request body; use a new key",
        )
    if row["state"] == "in_flight":
        raise DomainError(
            "idempotency_key_in_use",
            "a request with this Idempotency-Key is still in flight; repeat it later",
        )
    if not principal.sees(Scope(row["scope_kind"], row["scope_id"])):
        raise DomainError("scope_forbidden", "the credential cannot see this scope")
    return Replay(
        status=int(row["status_code"]),
        body=bytes(row["response_body"]),
        original_request_id=row["original_request_id"],
    )


def record(
    conn: sqlite3.Connection,
    principal: Principal,
    key: str,
    body_sha256: str,
    scope: Scope,
    *,
    request_id: str,
    now: str,
    expires_at: str,
    answer: tuple[int, bytes] | None = None,
    in_flight_until: str | None = None,
) -> None:
    """Keep a successful ``answer`` (status, body) for replays until ``expires_at``; without one,
    hold the key while its request executes after a separate commit (409 to any other) until
    ``in_flight_until``."""
    status, body = answer if answer is not None else (None, None)
    conn.execute(
        "INSERT OR REPLACE INTO idempotency_records (account_id, key, body_sha256, state, status_code,"
        " response_body, original_request_id, scope_kind, scope_id, created_at, expires_at,"
        " in_flight_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            principal.account_id,
            key,
            body_sha256,
            "in_flight" if answer is None else "done",
            status,
            body,
            request_id,
            scope.kind,
            scope.id,
            now,
            expires_at,
            None if answer is not None else in_flight_until,
        ),
    )


def after_hold(
    conn: sqlite3.Connection, principal: Principal, key: str, body_sha256: str, *, request_id: str, now: str
) -> Replay | None:
    """Once a request that held ``key`` in flight goes on: ``None`` while the key is still its own
    (or free: a reset took it), so it executes; else what another request with the key would meet —
    a replay of that request's answer, or 409 while it holds the key. (Another request takes the key
    over when the marker went stale meanwhile: the fake's clock moved past the hold and its grace.)"""
    row = conn.execute(
        "SELECT state, original_request_id FROM idempotency_records WHERE account_id = ? AND key = ?",
        (principal.account_id, key),
    ).fetchone()
    if row is None or (row["state"] == "in_flight" and row["original_request_id"] == request_id):
        return None
    return lookup(conn, principal, key, body_sha256, now=now)


def discard_held(conn: sqlite3.Connection, account: str, key: str, request_id: str) -> None:
    """Give up the in-flight marker of ``request_id`` (not one another request holds by now)."""
    conn.execute(
        "DELETE FROM idempotency_records WHERE account_id = ? AND key = ? AND state = 'in_flight'"
        " AND original_request_id = ?",
        (account, key, request_id),
    )


def discard(conn: sqlite3.Connection, account: str, key: str) -> None:
    conn.execute("DELETE FROM idempotency_records WHERE account_id = ? AND key = ?", (account, key))
