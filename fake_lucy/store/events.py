"""The queries of the event stream (``events``): append, read after an id, prune.

A row holds one event, or all the events one transaction made for one tenant (a v1 request's
``credits.changed`` and ``request``, say): ``type`` is ``batch`` and ``data`` the JSON array of
``[type, at, data]``. A row of ``n`` events takes the ``seq`` of its last one, so its events have
the ids ``seq - n + 1`` … ``seq``: the ids stay one number per event, in commit order, and the next
row's start after them. One row per transaction writes one row where each event wrote its own.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

__all__ = [
    "BATCH",
    "EventRow",
    "append",
    "before_latest_reset",
    "before_oldest",
    "events_after",
    "last_id",
    "seal",
]

BATCH = "batch"  # the type of a row that holds several events
PRUNE_EVERY = 256  # ids between two prunings of the history


@dataclass(frozen=True, slots=True)
class EventRow:
    """One stored event; ``data`` is the JSON text of its object."""

    id: int
    type: str
    tenant_id: str | None
    at: str
    data: str


def append(
    conn: sqlite3.Connection, tenant: str | None, events: Sequence[tuple[str, str, str]], *, keep: int
) -> int:
    """Store one transaction's events of one tenant, each ``(type, at, JSON text)``, in one row;
    returns the last one's id. Every ``PRUNE_EVERY`` ids the history beyond the newest ``keep``
    rows goes (the newest row never does, so ``max(seq) + n`` never gives an id twice).

    A new history (a new file) numbers on from the real time in µs since 1970, not from 0: the ids
    of two files then never meet, so a reader that resumes with an id another file gave (the fake
    started again on a new file) holds an id below or beyond every one of this file's, and gets
    its whole kept history (``resume_after``) instead of starting somewhere inside it. It would
    take a file writing more than one event per µs since the other was made to cross its ids."""
    if len(events) == 1:
        type_, at, data = events[0]
    else:
        type_, at = BATCH, events[0][1]
        data = "[" + ",".join(orjson.dumps([t, a]).decode()[:-1] + "," + d + "]" for t, a, d in events) + "]"
    (seq,) = conn.execute(
        "INSERT INTO events (seq, type, tenant_id, at, data)"
        " VALUES ((SELECT coalesce(max(seq), ?) FROM events) + ?, ?, ?, ?, ?) RETURNING seq",
        (time.time_ns() // 1000, len(events), type_, tenant, at, data),
    ).fetchone()
    if seq // PRUNE_EVERY != (seq - len(events)) // PRUNE_EVERY and seq > keep:
        conn.execute("DELETE FROM events WHERE seq <= ?", (seq - keep,))
    return int(seq)


def _expand(seq: int, type_: str, tenant: str | None, at: str, data: str) -> list[EventRow]:
    if type_ != BATCH:
        return [EventRow(seq, type_, tenant, at, data)]
    items = orjson.loads(data)
    first = seq - len(items) + 1
    return [
        EventRow(first + n, kind, tenant, when, orjson.dumps(value).decode())
        for n, (kind, when, value) in enumerate(items)
    ]


def events_after(conn: sqlite3.Connection, after: int, *, tenant: str | None, limit: int) -> list[EventRow]:
    """Events with an id above ``after``, oldest first, from at most ``limit`` rows; for a tenant
    its own and the server-wide ones, past its horizon (``seal``)."""
    if tenant is None:
        rows = conn.execute(
            "SELECT seq, type, tenant_id, at, data FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
            (after, limit),
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT seq, type, tenant_id, at, data FROM events WHERE seq > ?"
            " AND seq > coalesce((SELECT after_seq FROM event_horizons WHERE tenant_id = ?), 0)"
            " AND (tenant_id = ? OR tenant_id IS NULL) ORDER BY seq LIMIT ?",
            (after, tenant, tenant, limit),
        ).fetchall()
    return [event for r in rows for event in _expand(int(r[0]), r[1], r[2], r[3], r[4]) if event.id > after]


def seal(conn: sqlite3.Connection, tenant: str) -> None:
    """The history so far is not for a tenant made later under the id ``tenant``."""
    conn.execute(
        "INSERT OR REPLACE INTO event_horizons (tenant_id, after_seq)"
        " VALUES (?, (SELECT coalesce(max(seq), 0) FROM events))",
        (tenant,),
    )


def last_id(conn: sqlite3.Connection) -> int:
    """The newest id ever given (0 before the first event), pruned or not."""
    row = conn.execute("SELECT max(seq) FROM events").fetchone()  # the newest row is never pruned
    return 0 if row[0] is None else int(row[0])


def before_latest_reset(conn: sqlite3.Connection, tenant: str | None) -> int | None:
    """The id just before the newest ``reset`` event that starts ``tenant``'s state afresh: the
    server's, or the tenant's own; for the server admin (``None``) the server's alone (a tenant's
    reset leaves the other tenants' history standing). None when none is kept. A reset is a row of
    its own (it is never gathered into a batch)."""
    if tenant is None:
        sql = "SELECT max(seq) FROM events WHERE type = 'reset' AND tenant_id IS NULL"
        row = conn.execute(sql).fetchone()
    else:
        row = conn.execute(
            "SELECT max(seq) FROM events WHERE type = 'reset' AND (tenant_id IS NULL OR tenant_id = ?)",
            (tenant,),
        ).fetchone()
    return None if row[0] is None else int(row[0]) - 1


def before_oldest(conn: sqlite3.Connection) -> int:
    """The id just before the oldest event kept (the first of the oldest row's); 0 when none is."""
    row = conn.execute(
        f"SELECT seq - CASE WHEN type = '{BATCH}' THEN json_array_length(data) ELSE 1 END"  # noqa: S608 - a constant
        " FROM events ORDER BY seq LIMIT 1"
    ).fetchone()
    return 0 if row is None else int(row[0])
