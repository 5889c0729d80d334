"""The statements of the findings (SPEC 3.8): recorded findings, the watch on failed answers and the
recent status polls. ``domain.findings`` decides; these functions only read and write rows.

The v1 pipeline calls ``watch_rows`` for every recall and propose and ``recent_polls`` /
``add_poll`` for every proposal status, inside the request's write transaction: each is one
statement on a primary key or an index.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

from fake_lucy.store.queries import Page

__all__ = [
    "FindingRecord",
    "PollRecord",
    "WatchRecord",
    "add_finding",
    "add_poll",
    "drop_watch",
    "finding_exists",
    "findings_page",
    "next_finding_seq",
    "original_request_id",
    "put_watch",
    "recent_polls",
    "watch_rows",
]


@dataclass(frozen=True, slots=True)
class FindingRecord:
    seq: int
    id: str
    tenant_id: str
    credential_id: str
    code: str
    subject: str
    request_ids: tuple[str, ...]
    at: str
    detail: str

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> FindingRecord:
        return cls(
            seq=row["seq"],
            id=row["id"],
            tenant_id=row["tenant_id"],
            credential_id=row["credential_id"],
            code=row["code"],
            subject=row["subject"],
            request_ids=tuple(json.loads(row["request_ids"])),
            at=row["at"],
            detail=row["detail"],
        )


@dataclass(frozen=True, slots=True)
class WatchRecord:
    """The last failed answer to one request body (``kind`` recall or propose, ``subject`` its
    sha256) or one idempotency key (``kind`` key)."""

    credential_id: str
    kind: str
    subject: str
    tenant_id: str
    key: str | None
    body_sha256: str
    request_ids: tuple[str, ...]
    status: int | None
    code: str | None
    retry_after: float | None
    answered_us: int
    clock_us: int
    reported: frozenset[str]
    expires_us: int

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> WatchRecord:
        return cls(
            credential_id=row["credential_id"],
            kind=row["kind"],
            subject=row["subject"],
            tenant_id=row["tenant_id"],
            key=row["key"],
            body_sha256=row["body_sha256"],
            request_ids=tuple(json.loads(row["request_ids"])),
            status=row["status"],
            code=row["code"],
            retry_after=row["retry_after"],
            answered_us=row["answered_us"],
            clock_us=row["clock_us"],
            reported=frozenset(filter(None, row["reported"].split(","))),
            expires_us=row["expires_us"],
        )


@dataclass(frozen=True, slots=True)
class PollRecord:
    seq: int
    request_id: str
    status: int | None
    arrived_us: int
    clock_us: int


# -- the watch on failed answers ------------------------------------------------------------------


def watch_rows(
    conn: sqlite3.Connection, credential_id: str, wanted: Iterable[tuple[str, str]], *, now_us: int
) -> dict[tuple[str, str], WatchRecord]:
    """The live rows of a credential among ``wanted`` (kind, subject) pairs, in one statement on
    the primary key (a credential's requests that never failed find nothing)."""
    pairs = list(wanted)
    if not pairs:
        return {}
    matches = " OR ".join("(kind = ? AND subject = ?)" for _ in pairs)
    params: list[object] = [credential_id, now_us]
    for kind, subject in pairs:
        params.extend((kind, subject))
    rows = conn.execute(
        f"SELECT * FROM client_watch WHERE credential_id = ? AND expires_us >= ? AND ({matches})",  # noqa: S608 - placeholders only
        params,
    ).fetchall()
    records = (WatchRecord.from_row(row) for row in rows)
    return {(record.kind, record.subject): record for record in records}


def put_watch(conn: sqlite3.Connection, record: WatchRecord) -> None:
    """Insert or replace a row; rows past their time go at the same moment (a failure is rare)."""
    conn.execute("DELETE FROM client_watch WHERE expires_us < ?", (record.answered_us,))
    conn.execute(
        "INSERT OR REPLACE INTO client_watch (credential_id, kind, subject, tenant_id, key, body_sha256,"
        " request_ids, status, code, retry_after, answered_us, clock_us, reported, expires_us)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.credential_id,
            record.kind,
            record.subject,
            record.tenant_id,
            record.key,
            record.body_sha256,
            json.dumps(list(record.request_ids)),
            record.status,
            record.code,
            record.retry_after,
            record.answered_us,
            record.clock_us,
            ",".join(sorted(record.reported)),
            record.expires_us,
        ),
    )


def drop_watch(conn: sqlite3.Connection, credential_id: str, kind: str, subject: str) -> None:
    conn.execute(
        "DELETE FROM client_watch WHERE credential_id = ? AND kind = ? AND subject = ?",
        (credential_id, kind, subject),
    )


# -- status polls ---------------------------------------------------------------------------------


def recent_polls(
    conn: sqlite3.Connection, credential_id: str, proposal_id: str, *, limit: int
) -> list[PollRecord]:
    """The newest ``limit`` polls of one proposal by one credential, newest first."""
    rows = conn.execute(
        "SELECT seq, request_id, status, arrived_us, clock_us FROM status_polls"
        " WHERE credential_id = ? AND proposal_id = ? ORDER BY seq DESC LIMIT ?",
        (credential_id, proposal_id, limit),
    ).fetchall()
    return [PollRecord(row[0], row[1], row[2], row[3], row[4]) for row in rows]


def add_poll(
    conn: sqlite3.Connection,
    *,
    credential_id: str,
    proposal_id: str,
    request_id: str,
    status: int | None,
    arrived_us: int,
    clock_us: int,
    forget_before: int | None,
    max_rows: int,
) -> None:
    """Append a poll; drop this proposal's polls older than seq ``forget_before`` and, like the
    journal, the oldest rows past ``max_rows``."""
    (seq,) = conn.execute(
        "INSERT INTO status_polls (credential_id, proposal_id, request_id, status, arrived_us, clock_us)"
        " VALUES (?, ?, ?, ?, ?, ?) RETURNING seq",
        (credential_id, proposal_id, request_id, status, arrived_us, clock_us),
    ).fetchone()
    if forget_before is not None:
        conn.execute(
            "DELETE FROM status_polls WHERE credential_id = ? AND proposal_id = ? AND seq < ?",
            (credential_id, proposal_id, forget_before),
        )
    if seq > max_rows:
        conn.execute("DELETE FROM status_polls WHERE seq <= ?", (seq - max_rows,))


def original_request_id(conn: sqlite3.Connection, credential_id: str, key: str) -> str | None:
    """The request that first used ``key`` for the credential's account (its stored answer)."""
    row = conn.execute(
        "SELECT r.original_request_id FROM idempotency_records r"
        " JOIN credentials c ON c.account_id = r.account_id WHERE c.id = ? AND r.key = ?",
        (credential_id, key),
    ).fetchone()
    return None if row is None else str(row[0])


# -- findings -------------------------------------------------------------------------------------


def finding_exists(conn: sqlite3.Connection, credential_id: str, code: str, subject: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM findings WHERE credential_id = ? AND code = ? AND subject = ?",
        (credential_id, code, subject),
    ).fetchone()
    return row is not None


def next_finding_seq(conn: sqlite3.Connection) -> int:
    (seq,) = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM findings").fetchone()
    return int(seq)


def add_finding(conn: sqlite3.Connection, record: FindingRecord) -> None:
    conn.execute(
        "INSERT INTO findings (seq, id, tenant_id, credential_id, code, subject, request_ids, at, detail)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.seq,
            record.id,
            record.tenant_id,
            record.credential_id,
            record.code,
            record.subject,
            json.dumps(list(record.request_ids)),
            record.at,
            record.detail,
        ),
    )


def findings_page(
    conn: sqlite3.Connection,
    *,
    credential_id: str | None,
    code: str | None,
    tenant: str | None,
    after: int,
    limit: int,
) -> Page[FindingRecord]:
    """Findings in the order they were recorded."""
    clauses: list[str] = ["seq > ?"]
    params: list[object] = [after]
    for column, value in (("credential_id", credential_id), ("code", code), ("tenant_id", tenant)):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    rows = conn.execute(
        f"SELECT * FROM findings WHERE {' AND '.join(clauses)} ORDER BY seq LIMIT ?",  # noqa: S608 - constant clauses
        [*params, limit + 1],
    ).fetchall()
    items = [FindingRecord.from_row(row) for row in rows[:limit]]
    return Page(items, rows[limit - 1]["seq"] if len(rows) > limit else None)
