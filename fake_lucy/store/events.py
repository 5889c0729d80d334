"""The queries of the event stream (``events``): append, read after an id, prune."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

__all__ = ["EventRow", "append", "events_after", "last_id", "oldest_id"]


@dataclass(frozen=True, slots=True)
class EventRow:
    """One stored event; ``data`` is the JSON text of its object."""

    id: int
    type: str
    tenant_id: str | None
    at: str
    data: str


def append(conn: sqlite3.Connection, type_: str, tenant: str | None, at: str, data: str, *, keep: int) -> int:
    """Store one event; every ``prune_every`` ids the history beyond the newest ``keep`` goes."""
    (seq,) = conn.execute(
        "INSERT INTO events (type, tenant_id, at, data) VALUES (?, ?, ?, ?) RETURNING seq",
        (type_, tenant, at, data),
    ).fetchone()
    if seq % 256 == 0 and seq > keep:
        conn.execute("DELETE FROM events WHERE seq <= ?", (seq - keep,))
    return int(seq)


def events_after(conn: sqlite3.Connection, after: int, *, tenant: str | None, limit: int) -> list[EventRow]:
    """Events with an id above ``after``, oldest first; for a tenant its own and the server-wide ones."""
    if tenant is None:
        rows = conn.execute(
            "SELECT seq, type, tenant_id, at, data FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
            (after, limit),
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT seq, type, tenant_id, at, data FROM events WHERE seq > ?"
            " AND (tenant_id = ? OR tenant_id IS NULL) ORDER BY seq LIMIT ?",
            (after, tenant, limit),
        ).fetchall()
    return [EventRow(int(r[0]), r[1], r[2], r[3], r[4]) for r in rows]


def last_id(conn: sqlite3.Connection) -> int:
    """The newest id ever given (0 before the first event), pruned or not."""
    row = conn.execute("SELECT max(seq) FROM events").fetchone()  # the newest row is never pruned
    return 0 if row[0] is None else int(row[0])


def oldest_id(conn: sqlite3.Connection) -> int | None:
    row = conn.execute("SELECT min(seq) FROM events").fetchone()
    return None if row[0] is None else int(row[0])
