"""The request journal (SPEC 3.5): one row per v1 request past authentication, bounded."""

from __future__ import annotations

import sqlite3

from fake_lucy.store.records import JOURNAL_COLUMNS, JournalRow

__all__ = ["JournalRow", "append"]

_INSERT = (
    f"INSERT INTO journal ({', '.join(JOURNAL_COLUMNS)})"  # noqa: S608 - the declared columns
    f" VALUES ({', '.join('?' for _ in JOURNAL_COLUMNS)}) RETURNING seq"
)


def append(conn: sqlite3.Connection, row: JournalRow, *, max_rows: int) -> None:
    (seq,) = conn.execute(_INSERT, tuple(getattr(row, name) for name in JOURNAL_COLUMNS)).fetchone()
    if seq > max_rows:
        conn.execute("DELETE FROM journal WHERE seq <= ?", (seq - max_rows,))
