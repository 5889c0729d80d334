"""The request journal (SPEC 3.5): one row per v1 request past authentication, bounded."""

from __future__ import annotations

import sqlite3

from fake_lucy.store.records import JOURNAL_COLUMNS, JournalRow

__all__ = ["JournalRow", "append", "trim_batch"]

_INSERT = (
    f"INSERT INTO journal ({', '.join(JOURNAL_COLUMNS)})"  # noqa: S608 - the declared columns
    f" VALUES ({', '.join('?' for _ in JOURNAL_COLUMNS)}) RETURNING seq"
)


def trim_batch(max_rows: int) -> int:
    """How many of the oldest rows go at once: 1 for a small journal, up to 64 (1 % of it)."""
    return min(64, max(1, max_rows // 100))


def append(conn: sqlite3.Connection, row: JournalRow, *, max_rows: int) -> None:
    """Add a row; the journal never holds more than ``max_rows``. The oldest go ``trim_batch`` at
    a time, one delete every so many requests rather than one per request (whose pages — the
    oldest rows and their index entries — each commit would write again)."""
    (seq,) = conn.execute(_INSERT, row.values()).fetchone()
    if seq <= max_rows:
        return
    batch = trim_batch(max_rows)
    # Rows are numbered in order (new numbers after the newest), so after a delete at ``seq`` the
    # next ``batch - 1`` rows still fit; the first ``batch`` rows past the bound delete each time.
    if seq % batch == 0 or seq - max_rows < batch:
        conn.execute("DELETE FROM journal WHERE seq <= ?", (seq - max_rows + batch - 1,))
