"""The event stream (SPEC 3.7): one event per change, in commit order, across all workers.

A change emits its event with ``emit`` inside the transaction that makes it, so the event exists
exactly when the change committed, and its id (the row's never-reused ``seq``) orders it among the
events of every worker on the database. Readers (``GET /_fake/events``, the review console) ask
for the events after the last id they saw; history is bounded (the newest ``HISTORY``).

| type | data |
|---|---|
| ``proposal.created`` | ``proposal_id, status, kind, scope, account, credential_id`` |
| ``proposal.decided`` | ``proposal_id, status, memory, decided_by`` (admin, policy, expiry, supersession) |
| ``memory.changed`` | ``memory_id, version, change`` (created, superseded, deleted, restored) |
| ``request`` | the journal item (SPEC 3.5) |
| ``finding`` | the finding (SPEC 3.8) |
| ``clock.changed`` | ``now, frozen`` |
| ``fault.fired`` | ``fault_id, operation, status, phase, request_id`` |
| ``credits.changed`` | ``account, amount, balance, operation, request_id`` |
| ``reset`` | ``{}`` (or ``tenant``) |
"""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson

from fake_lucy.store import events as store
from fake_lucy.store.events import EventRow

__all__ = ["EVENT_TYPES", "HISTORY", "EventRow", "after", "emit", "resume_after"]

EVENT_TYPES = frozenset(
    {
        "proposal.created",
        "proposal.decided",
        "memory.changed",
        "request",
        "finding",
        "clock.changed",
        "fault.fired",
        "credits.changed",
        "reset",
    }
)
HISTORY = 10_000
DECIDED_BY = frozenset({"admin", "policy", "expiry", "supersession"})


def emit(conn: sqlite3.Connection, type_: str, data: dict[str, Any], *, at: str, tenant: str | None) -> int:
    """Record one event in the caller's transaction; returns its id. ``tenant`` is the tenant the
    change belongs to (``None``: server-wide); ``at`` the server time of the change."""
    if type_ not in EVENT_TYPES:
        raise ValueError(f"unknown event type {type_!r}")
    return store.append(conn, type_, tenant, at, orjson.dumps(data).decode(), keep=HISTORY)


def after(conn: sqlite3.Connection, last_id: int, *, tenant: str | None, limit: int = 500) -> list[EventRow]:
    """The events after ``last_id``, oldest first (a tenant: its own and the server-wide ones)."""
    return store.events_after(conn, last_id, tenant=tenant, limit=limit)


def resume_after(conn: sqlite3.Connection, last_event_id: int | None) -> int:
    """Where a new reader starts: after ``Last-Event-ID`` when given (from the oldest event still
    kept when it is older than the history), else after the newest event (new events only)."""
    newest = store.last_id(conn)
    if last_event_id is None or last_event_id > newest:  # an id of another database: from now on
        return newest
    oldest = store.oldest_id(conn)
    if oldest is not None and last_event_id < oldest - 1:
        return oldest - 1
    return last_event_id
