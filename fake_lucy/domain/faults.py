"""Fault injection (SPEC 3.4): FIFO among matching faults, counts decremented atomically."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from fake_lucy.domain.errors import invalid_field
from fake_lucy.domain.ids import IdFactory
from fake_lucy.store import queries

__all__ = ["DEFAULT_CODES", "Fault", "clear", "create", "list_faults", "take"]

DEFAULT_CODES = {
    429: "rate_limited",
    500: "internal",
    502: "bad_gateway",
    503: "unavailable",
    504: "gateway_timeout",
}


@dataclass(frozen=True, slots=True)
class Fault:
    id: str
    status: int
    code: str
    retry_after: int | None
    phase: str
    drop_connection: bool
    delay_ms: int | None
    hold_ms: int | None


def take(conn: sqlite3.Connection, *, operation: str, credential_id: str, phase: str) -> Fault | None:
    """Consume one use of the oldest matching fault, in one statement."""
    row = conn.execute(
        "UPDATE faults SET remaining = remaining - 1 WHERE seq = ("
        " SELECT seq FROM faults WHERE remaining > 0 AND phase = ?"
        " AND operation IN (?, 'any') AND (credential_id IS NULL OR credential_id = ?)"
        " ORDER BY seq LIMIT 1) RETURNING id, status, code, retry_after, phase, drop_connection,"
        " delay_ms, hold_ms",
        (phase, operation, credential_id),
    ).fetchone()
    if row is None:
        return None
    return Fault(
        id=row[0],
        status=int(row[1]),
        code=row[2],
        retry_after=row[3],
        phase=row[4],
        drop_connection=bool(row[5]),
        delay_ms=row[6],
        hold_ms=row[7],
    )


def create(conn: sqlite3.Connection, ids: IdFactory, spec: dict[str, Any]) -> dict[str, Any]:
    """A fault from a spec the schema admitted; the rules the schema cannot state are 422s."""
    if spec.get("phase") == "in_flight" and spec["operation"] != "propose":
        raise invalid_field("/phase", "in_flight applies to propose only")
    credential = spec.get("credential_id")
    if credential is not None and not queries.credential_exists(conn, credential):
        raise invalid_field("/credential_id", "no credential has this id")
    status = int(spec["status"])
    fault_id = ids.new(conn, "flt")
    count = int(spec.get("count", 1))
    retry_after = spec.get("retry_after")
    if status == 429 and retry_after is None:
        retry_after = 1
    conn.execute(
        "INSERT INTO faults (id, operation, status, code, retry_after, remaining, phase,"
        " drop_connection, delay_ms, hold_ms, credential_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            fault_id,
            spec["operation"],
            status,
            spec.get("code") or DEFAULT_CODES[status],
            retry_after,
            count,
            spec.get("phase", "before"),
            bool(spec.get("drop_connection", False)),
            spec.get("delay_ms"),
            spec.get("hold_ms"),
            spec.get("credential_id"),
        ),
    )
    return {"fault_id": fault_id, "remaining": count}


def list_faults(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT * FROM faults WHERE remaining > 0 ORDER BY seq").fetchall()
    return [
        {
            "fault_id": r["id"],
            "operation": r["operation"],
            "status": r["status"],
            "code": r["code"],
            "retry_after": r["retry_after"],
            "remaining": r["remaining"],
            "phase": r["phase"],
            "drop_connection": bool(r["drop_connection"]),
            "delay_ms": r["delay_ms"],
            "hold_ms": r["hold_ms"],
            "credential_id": r["credential_id"],
        }
        for r in rows
    ]


def clear(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM faults")
