"""The queries of review console sessions and one-time login links (``console_sessions``,
``console_links``). Only SHA-256 digests of session ids and link tokens are stored."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

__all__ = [
    "SessionRow",
    "delete_expired",
    "delete_session",
    "delete_tenant",
    "insert_link",
    "insert_session",
    "session",
    "take_link",
    "touch_session",
]


@dataclass(frozen=True, slots=True)
class SessionRow:
    tenant_id: str | None
    created_us: int
    seen_us: int


def insert_session(conn: sqlite3.Connection, digest: str, tenant: str | None, now_us: int) -> None:
    conn.execute(
        "INSERT INTO console_sessions (id_sha256, tenant_id, created_us, seen_us) VALUES (?, ?, ?, ?)",
        (digest, tenant, now_us, now_us),
    )


def session(conn: sqlite3.Connection, digest: str) -> SessionRow | None:
    row = conn.execute(
        "SELECT tenant_id, created_us, seen_us FROM console_sessions WHERE id_sha256 = ?", (digest,)
    ).fetchone()
    return None if row is None else SessionRow(row[0], int(row[1]), int(row[2]))


def touch_session(conn: sqlite3.Connection, digest: str, now_us: int) -> None:
    conn.execute("UPDATE console_sessions SET seen_us = ? WHERE id_sha256 = ?", (now_us, digest))


def delete_session(conn: sqlite3.Connection, digest: str) -> None:
    conn.execute("DELETE FROM console_sessions WHERE id_sha256 = ?", (digest,))


def delete_expired(conn: sqlite3.Connection, *, seen_before_us: int, now_us: int) -> None:
    conn.execute("DELETE FROM console_sessions WHERE seen_us < ?", (seen_before_us,))
    conn.execute("DELETE FROM console_links WHERE expires_us < ?", (now_us,))


def insert_link(conn: sqlite3.Connection, digest: str, tenant: str | None, expires_us: int) -> None:
    conn.execute(
        "INSERT INTO console_links (token_sha256, tenant_id, expires_us) VALUES (?, ?, ?)",
        (digest, tenant, expires_us),
    )


def take_link(conn: sqlite3.Connection, digest: str, now_us: int) -> tuple[bool, str | None]:
    """Use a link once: ``(True, tenant)`` if it existed and had not expired; it is gone either way."""
    row = conn.execute(
        "DELETE FROM console_links WHERE token_sha256 = ? RETURNING tenant_id, expires_us", (digest,)
    ).fetchone()
    if row is None or int(row[1]) < now_us:
        return False, None
    return True, row[0]


def delete_tenant(conn: sqlite3.Connection, tenant: str) -> None:
    """A deleted tenant's console sessions and unused login links."""
    conn.execute("DELETE FROM console_sessions WHERE tenant_id = ?", (tenant,))
    conn.execute("DELETE FROM console_links WHERE tenant_id = ?", (tenant,))
