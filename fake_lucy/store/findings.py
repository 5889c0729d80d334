"""The statements of the findings (SPEC 3.8): recorded findings, the watch on failed answers and the
recent status polls. ``domain.findings`` decides; these functions only read and write rows.

The v1 pipeline calls ``watch_rows`` for every recall and propose and ``poll_series`` /
``put_poll_series`` for every proposal status, inside the request's write transaction: each is
one statement on a primary key.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from fake_lucy.store.queries import Page
from fake_lucy.store.records import record_from_row

__all__ = [
    "SETTLED_SERIES",
    "FindingRecord",
    "SeriesRecord",
    "WatchRecord",
    "add_finding",
    "drop_watch",
    "findings_page",
    "newest_findings",
    "next_finding_seq",
    "original_request_id",
    "poll_series",
    "polls_of",
    "put_poll_series",
    "put_watch",
    "watch_rows",
    "with_poll",
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
        return record_from_row(cls, row, request_ids=tuple(json.loads(row["request_ids"])))


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
        return record_from_row(
            cls,
            row,
            request_ids=tuple(json.loads(row["request_ids"])),
            reported=frozenset(filter(None, row["reported"].split(","))),
        )


@dataclass(frozen=True, slots=True)
class SeriesRecord:
    """One credential's current series of polls of one proposal (``poll_series``)."""

    credential_id: str
    proposal_id: str
    polls: int
    grew: bool
    reported: bool
    last_request_id: str
    last_status: int | None
    last_arrived_us: int
    last_clock_us: int
    last_interval_us: int | None
    recent: str  # the series' newest polls until it is reported (``polls_of``, ``with_poll``)
    last_answered_us: int | None  # None in a row from before they were kept
    last_answered_clock_us: int | None


# -- the watch on failed answers ------------------------------------------------------------------


_WATCH_ROW = "SELECT * FROM client_watch WHERE credential_id = ? AND kind = ? AND subject = ?"
_WATCH_ROWS = {1: _WATCH_ROW, 2: f"{_WATCH_ROW} UNION ALL {_WATCH_ROW}"}


def watch_rows(
    conn: sqlite3.Connection, credential_id: str, wanted: Sequence[tuple[str, str]], *, now_us: int
) -> dict[tuple[str, str], WatchRecord]:
    """The live rows of a credential among one or two ``wanted`` (kind, subject) pairs, in one
    statement of primary-key lookups (a credential whose requests never failed finds nothing)."""
    params: list[str] = []
    for kind, subject in wanted:
        params.extend((credential_id, kind, subject))
    rows = conn.execute(_WATCH_ROWS[len(wanted)], params).fetchall()
    if not rows:
        return {}
    records = (WatchRecord.from_row(row) for row in rows if row["expires_us"] >= now_us)
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


# A SQL expression (bound: credential id, proposal id): the proposal's poll series was reported and
# its last answer was no 429, 5xx or dropped connection. A poll of it answered 200 without a retry
# header then changes nothing (``findings.poll_is_settled``).
SETTLED_SERIES = (
    "EXISTS (SELECT 1 FROM poll_series WHERE credential_id = ? AND proposal_id = ? AND reported"
    " AND last_status IS NOT NULL AND last_status <> 429 AND last_status < 500)"
)


def poll_series(conn: sqlite3.Connection, credential_id: str, proposal_id: str) -> SeriesRecord | None:
    row = conn.execute(_POLL_SERIES, (credential_id, proposal_id)).fetchone()
    if row is None:
        return None
    # positionally (read once per status request): the flags are stored as 0 or 1
    credential, proposal, polls, grew, reported, *last = row
    return SeriesRecord(credential, proposal, polls, bool(grew), bool(reported), *last)


_POLL_SERIES = (
    "SELECT credential_id, proposal_id, polls, grew, reported, last_request_id, last_status, last_arrived_us,"
    " last_clock_us, last_interval_us, recent, last_answered_us, last_answered_clock_us"
    " FROM poll_series WHERE credential_id = ? AND proposal_id = ?"
)


def put_poll_series(conn: sqlite3.Connection, series: SeriesRecord, *, new: bool) -> None:
    """Write a series row: an insert for a ``new`` one, else an update of its columns in place."""
    values = (
        series.polls,
        series.grew,
        series.reported,
        series.last_request_id,
        series.last_status,
        series.last_arrived_us,
        series.last_clock_us,
        series.last_interval_us,
        series.recent,
        series.last_answered_us,
        series.last_answered_clock_us,
        series.credential_id,
        series.proposal_id,
    )
    if new:
        conn.execute(
            "INSERT INTO poll_series (polls, grew, reported, last_request_id, last_status, last_arrived_us,"
            " last_clock_us, last_interval_us, recent, last_answered_us, last_answered_clock_us,"
            " credential_id, proposal_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            values,
        )
    else:
        conn.execute(
            "UPDATE poll_series SET polls = ?, grew = ?, reported = ?, last_request_id = ?, last_status = ?,"
            " last_arrived_us = ?, last_clock_us = ?, last_interval_us = ?, recent = ?,"
            " last_answered_us = ?, last_answered_clock_us = ? WHERE credential_id = ? AND proposal_id = ?",
            values,
        )


def with_poll(recent: str, request_id: str, real_us: int, clock_us: int, *, keep: int) -> str:
    """``recent`` (a series' newest polls, oldest first) with one more poll, keeping the newest
    ``keep``. Request ids are the fake's own (``req_`` and URL-safe base64: no blank, no ``;``)."""
    poll = f"{request_id} {real_us} {clock_us}"
    if not recent:
        return poll
    held = recent.count(";") + 1
    over = held + 1 - keep  # the oldest polls to drop for this one
    if over >= held:
        return poll
    if over > 0:
        recent = recent.split(";", over)[-1]
    return f"{recent};{poll}"


def polls_of(recent: str) -> list[tuple[str, int, int]]:
    """The polls of ``recent``, oldest first: (request id, real time, server clock) of each."""
    if not recent:
        return []
    return [
        (request_id, int(real), int(clock)) for request_id, real, clock in map(str.split, recent.split(";"))
    ]


def original_request_id(conn: sqlite3.Connection, credential_id: str, key: str) -> str | None:
    """The request that first used ``key`` for the credential's account (its stored answer)."""
    row = conn.execute(
        "SELECT r.original_request_id FROM idempotency_records r"
        " JOIN credentials c ON c.account_id = r.account_id WHERE c.id = ? AND r.key = ?",
        (credential_id, key),
    ).fetchone()
    return None if row is None else str(row[0])


# -- findings -------------------------------------------------------------------------------------


def next_finding_seq(conn: sqlite3.Connection) -> int:
    """The next finding's number: above every number given since the server was reset, so a
    cursor never skips a finding made after another tenant's reset deleted the newest ones."""
    (seq,) = conn.execute(
        "UPDATE server_state"
        " SET findings_seq = max(findings_seq, (SELECT COALESCE(MAX(seq), 0) FROM findings)) + 1"
        " WHERE id = 1 RETURNING findings_seq"
    ).fetchone()
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


def newest_findings(conn: sqlite3.Connection, *, tenant: str | None, limit: int) -> list[FindingRecord]:
    """The newest ``limit`` findings (of ``tenant``'s credentials when given), newest first."""
    rows = conn.execute(
        "SELECT * FROM findings WHERE :tenant IS NULL OR tenant_id = :tenant ORDER BY seq DESC LIMIT :limit",
        {"tenant": tenant, "limit": limit},
    ).fetchall()
    return [FindingRecord.from_row(row) for row in rows]
