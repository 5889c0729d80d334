"""The request journal (SPEC 3.5): one row per v1 request past authentication, bounded per tenant."""

from __future__ import annotations

import sqlite3

from fake_lucy.store.numbering import next_seq
from fake_lucy.store.records import JOURNAL_COLUMNS, JournalRow

__all__ = ["JournalRow", "append", "recount", "trim_batch"]

_INSERT = (
    f"INSERT INTO journal (seq, {', '.join(JOURNAL_COLUMNS)})"  # noqa: S608 - the declared columns
    f" VALUES ({next_seq('journal')}, {', '.join('?' for _ in JOURNAL_COLUMNS)})"
)


_COUNT = (
    "INSERT INTO journal_counts (tenant, rows) VALUES (?, 1)"
    " ON CONFLICT (tenant) DO UPDATE SET rows = rows + 1 RETURNING rows"
)
_TRIM = "DELETE FROM journal WHERE seq IN (SELECT seq FROM journal WHERE tenant = ? ORDER BY seq LIMIT ?)"


def trim_batch(max_rows: int) -> int:
    """How many of the oldest rows go at once: 1 for a small journal, up to 64 (1 % of it)."""
    return min(64, max(1, max_rows // 100))


def append(conn: sqlite3.Connection, row: JournalRow, *, max_rows: int) -> None:
    """Add a row; the row's tenant never holds more than ``max_rows``, whatever other tenants send.
    The tenant's oldest go ``trim_batch`` at a time, one delete every so many requests rather than
    one per request (whose pages — the oldest rows and their index entries — each commit would
    write again)."""
    conn.execute(_INSERT, row.values())
    (rows,) = conn.execute(_COUNT, (row.tenant,)).fetchone()
    if rows <= max_rows:
        return
    # After a trim the next ``batch - 1`` rows still fit; a count far past the bound (rows a
    # restored snapshot brought in) goes back to the same level at once.
    gone = conn.execute(_TRIM, (row.tenant, rows - max_rows + trim_batch(max_rows) - 1)).rowcount
    conn.execute("UPDATE journal_counts SET rows = rows - ? WHERE tenant = ?", (gone, row.tenant))


def recount(conn: sqlite3.Connection, tenant: str) -> None:
    """Count the tenant's rows again, after a statement other than ``append`` added some."""
    conn.execute(
        "INSERT OR REPLACE INTO journal_counts (tenant, rows)"
        " SELECT ?, count(*) FROM journal WHERE tenant = ?",
        (tenant, tenant),
    )
