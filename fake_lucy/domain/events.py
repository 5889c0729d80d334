"""The event stream (SPEC 3.7): one event per change, in commit order, across all workers.

A change emits its event with ``emit`` inside the transaction that makes it, so the event exists
exactly when the change committed, and its id (from the row's never-reused ``seq``) orders it among
the events of every worker on the database. A v1 request gathers its events (``batch``) into one
row: each keeps an id of its own (``store.events``). Readers (``GET /_fake/events``, the review console) ask
for the events after the last id they saw; history is bounded (the newest ``HISTORY``). A reader in
this process can ``watch`` the connection its events are written on, to be told at once when some
are (those of other workers it finds by asking again).

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from fake_lucy.store import events as store
from fake_lucy.store.events import EventRow

__all__ = [
    "EVENT_TYPES",
    "HISTORY",
    "EventRow",
    "after",
    "batch",
    "emit",
    "resume_after",
    "seal_tenant",
    "watch",
]

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


# The events of the transactions that ``batch`` gathers, by connection (one transaction at a time
# on a connection): (type, at, tenant, JSON text), in the order they were emitted.
_gathering: dict[int, list[tuple[str, str, str | None, str]]] = {}


# Who is told when events are written on a connection (``watch``), by connection: a tuple, replaced
# whole on every change, so a writer on another thread iterates a consistent one without a lock.
_watchers: dict[int, tuple[Callable[[], None], ...]] = {}


@contextmanager
def watch(conn: sqlite3.Connection, written: Callable[[], None]) -> Iterator[None]:
    """While the block runs, call ``written()`` each time events are written on ``conn``, from the
    writing thread and before that transaction commits: the reader asks for them once it has
    (``Database.commit_group`` commits a group still open)."""
    key = id(conn)
    _watchers[key] = (*_watchers.get(key, ()), written)
    try:
        yield
    finally:
        left = tuple(callback for callback in _watchers.get(key, ()) if callback is not written)
        if left:
            _watchers[key] = left
        else:
            _watchers.pop(key, None)


def _append(conn: sqlite3.Connection, tenant: str | None, events: list[tuple[str, str, str]]) -> None:
    store.append(conn, tenant, events, keep=HISTORY)
    for written in _watchers.get(id(conn), ()):
        written()


def emit(conn: sqlite3.Connection, type_: str, data: dict[str, Any], *, at: str, tenant: str | None) -> None:
    """Record one event in the caller's transaction (inside ``batch``: when the batch ends).
    ``tenant`` is the tenant the change belongs to (``None``: server-wide); ``at`` the server time
    of the change."""
    if type_ not in EVENT_TYPES:
        raise ValueError(f"unknown event type {type_!r}")
    text = orjson.dumps(data).decode()
    gathered = _gathering.get(id(conn))
    if gathered is None:
        _append(conn, tenant, [(type_, at, text)])
    else:
        gathered.append((type_, at, tenant, text))


@contextmanager
def batch(conn: sqlite3.Connection) -> Iterator[None]:
    """Gather the events emitted inside into one row per tenant, written as the block ends (before
    the caller's transaction commits; nothing is written when the block raises). Nested, the
    outermost block writes."""
    key = id(conn)
    if key in _gathering:
        yield
        return
    gathered = _gathering[key] = []
    try:
        yield
        start = 0
        for end in range(1, len(gathered) + 1):
            if end == len(gathered) or gathered[end][2] != gathered[start][2]:
                run = gathered[start:end]
                _append(conn, run[0][2], [(t, a, d) for t, a, _, d in run])
                start = end
    finally:
        del _gathering[key]


def after(conn: sqlite3.Connection, last_id: int, *, tenant: str | None, limit: int = 500) -> list[EventRow]:
    """The events after ``last_id``, oldest first (a tenant: its own and the server-wide ones, since
    the tenant was made)."""
    found = store.events_after(conn, last_id, tenant=tenant, limit=limit)
    if tenant is None:
        return found
    # a server clock change reaches the tenant as its own clock.changed, with its clock (``clock``)
    return [event for event in found if event.tenant_id is not None or event.type != "clock.changed"]


def seal_tenant(conn: sqlite3.Connection, tenant: str) -> None:
    """The history so far is not ``tenant``'s: it is being made (its admin reads no event from
    before), or deleted (a tenant made again under its id sees none of its events)."""
    store.seal(conn, tenant)


def resume_after(conn: sqlite3.Connection, last_event_id: int | None, tenant: str | None = None) -> int:
    """Where a new reader starts: after ``Last-Event-ID`` when given (from the oldest event still
    kept when it is older than the history), else after the newest event (new events only).

    ``0`` asks for the history from the start, which is the newest reset that started the
    reader's state afresh (a reset is back to a fresh database: what came before is not the state's
    history), or the oldest event kept when there was none: the server's, and for a tenant admin's
    reader (``tenant``) its tenant's too; another tenant's reset leaves the server admin's
    history standing. A reader resuming after an id it was given keeps every event since, a reset among
    them.

    An id beyond the newest, or before the oldest kept, may have been given by another database:
    the fake was started again on another file (``--import`` into a fresh one, say). A file's ids
    begin at the time of its first event (``store.append``), so another file's ids are all below or all
    beyond this one's. None of its events was seen, so the reader gets every one still kept —
    among them the reset an import makes, on which a live page reloads — instead of only those
    still to come, or those after an id that means nothing here."""
    newest = store.last_id(conn)
    if last_event_id is None:
        return newest
    floor = store.before_oldest(conn)
    if last_event_id == 0:
        reset = store.before_latest_reset(conn, tenant)
        return floor if reset is None else max(reset, floor)
    return floor if last_event_id > newest else max(last_event_id, floor)
