"""The request journal (SPEC 3.5): one row per v1 request past authentication, bounded."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

__all__ = ["JournalRow", "append"]


@dataclass(slots=True)
class JournalRow:
    request_id: str
    at: str
    operation: str
    credential_id: str
    idempotency_key: str | None
    retry_attempt: int
    body_sha256: str
    status: int | None = None
    charged: bool = False
    replayed: bool = False
    dropped: bool = False
    fault_id: str | None = None


def append(conn: sqlite3.Connection, row: JournalRow, *, max_rows: int) -> None:
    (seq,) = conn.execute(
        "INSERT INTO journal (request_id, at, operation, credential_id, idempotency_key,"
        " retry_attempt, body_sha256, status, charged, replayed, dropped, fault_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
        (
            row.request_id,
            row.at,
            row.operation,
            row.credential_id,
            row.idempotency_key,
            row.retry_attempt,
            row.body_sha256,
            row.status,
            row.charged,
            row.replayed,
            row.dropped,
            row.fault_id,
        ),
    ).fetchone()
    if seq > max_rows:
        conn.execute("DELETE FROM journal WHERE seq <= ?", (seq - max_rows,))
