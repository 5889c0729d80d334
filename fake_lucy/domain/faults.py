"""Fault injection (SPEC 3.4): FIFO among matching faults, counts decremented atomically.

A tenant admin's faults belong to its tenant: they match only its credentials, and it lists and
clears only those (SPEC 3.6). The server admin's match every tenant; it lists and clears them all.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from fake_lucy.domain.errors import invalid_field
from fake_lucy.domain.ids import IdFactory
from fake_lucy.store import queries
from lucy_memory._contract import ERROR_STATUSES

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


def take(
    conn: sqlite3.Connection, *, operation: str, tenant: str, credential_id: str, phase: str
) -> Fault | None:
    """Consume one use of the oldest matching fault, in one statement."""
    row = conn.execute(
        "UPDATE faults SET remaining = remaining - 1 WHERE seq = ("
        " SELECT seq FROM faults WHERE remaining > 0 AND phase = ?"
        " AND operation IN (?, 'any') AND (credential_id IS NULL OR credential_id = ?)"
        " AND (tenant_id IS NULL OR tenant_id = ?)"
        " ORDER BY seq LIMIT 1) RETURNING id, status, code, retry_after, phase, drop_connection,"
        " delay_ms, hold_ms",
        (phase, operation, credential_id, tenant),
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


def create(
    conn: sqlite3.Connection, ids: IdFactory, spec: dict[str, Any], *, tenant: str | None = None
) -> dict[str, Any]:
    """A fault from a spec the schema admitted; the rules the schema cannot state are 422s.
    With a ``tenant`` (a tenant admin's fault) it matches only that tenant's credentials."""
    if spec.get("phase") == "in_flight" and spec["operation"] != "propose":
        raise invalid_field("/phase", "in_flight applies to propose only")
    credential = spec.get("credential_id")
    if credential is not None and not queries.credential_exists(conn, credential, tenant=tenant):
        raise invalid_field("/credential_id", "no credential has this id")
    status = int(spec["status"])
    code = spec.get("code")
    if code is not None and ERROR_STATUSES.get(code, status) != status:
        own = sorted(c for c, s in ERROR_STATUSES.items() if s == status)
        raise invalid_field(
            "/code",
            f"{code} is the code of a {ERROR_STATUSES[code]} answer; a {status} fault takes"
            f" {' or '.join(own)} or a code that is not the contract's",
        )
    fault_id = ids.new(conn, "flt")
    count = int(spec.get("count", 1))
    retry_after = spec.get("retry_after")
    if status == 429 and retry_after is None:
        retry_after = 1
    conn.execute(
        "INSERT INTO faults (id, tenant_id, operation, status, code, retry_after, remaining, phase,"
        " drop_connection, delay_ms, hold_ms, credential_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            fault_id,
            tenant,
            spec["operation"],
            status,
            code or DEFAULT_CODES[status],
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


def list_faults(conn: sqlite3.Connection, *, tenant: str | None = None) -> list[dict[str, Any]]:
    """The armed faults, oldest first: all of them, or a tenant's own."""
    sql = "SELECT * FROM faults WHERE remaining > 0"
    if tenant is not None:
        sql += " AND tenant_id = ?"
    rows = conn.execute(sql + " ORDER BY seq", () if tenant is None else (tenant,)).fetchall()
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


def clear(conn: sqlite3.Connection, *, tenant: str | None = None) -> None:
    """Disarm every fault, or a tenant's own."""
    if tenant is None:
        conn.execute("DELETE FROM faults")
    else:
        conn.execute("DELETE FROM faults WHERE tenant_id = ?", (tenant,))
