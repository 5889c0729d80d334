"""The queries of review console sessions and one-time login links (``console_sessions``,
``console_links``). Only SHA-256 digests of session ids, link tokens and admin tokens are stored."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

__all__ = [
    "LinkRow",
    "SessionRow",
    "delete_expired",
    "delete_session",
    "delete_tenant",
    "insert_link",
    "insert_session",
    "session",
    "take_link",
    "tenant_admin_sha256",
    "touch_session",
]


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A session, the admin token that started it (``admin_sha256``) and, for a tenant admin's, the
    tenant's admin token now (``tenant_admin_sha256``: None once no tenant of that id has one)."""

    tenant_id: str | None
    created_us: int
    seen_us: int
    admin_sha256: str | None
    tenant_admin_sha256: str | None


def insert_session(
    conn: sqlite3.Connection, digest: str, tenant: str | None, admin_sha256: str, now_us: int
) -> None:
    conn.execute(
        "INSERT INTO console_sessions (id_sha256, tenant_id, created_us, seen_us, admin_sha256)"
        " VALUES (?, ?, ?, ?, ?)",
        (digest, tenant, now_us, now_us, admin_sha256),
    )


def session(conn: sqlite3.Connection, digest: str) -> SessionRow | None:
    row = conn.execute(
        "SELECT s.tenant_id, s.created_us, s.seen_us, s.admin_sha256, t.admin_token_sha256"
        " FROM console_sessions AS s LEFT JOIN tenants AS t ON t.id = s.tenant_id WHERE s.id_sha256 = ?",
        (digest,),
    ).fetchone()
    return None if row is None else SessionRow(row[0], int(row[1]), int(row[2]), row[3], row[4])


def touch_session(conn: sqlite3.Connection, digest: str, now_us: int) -> None:
    conn.execute("UPDATE console_sessions SET seen_us = ? WHERE id_sha256 = ?", (now_us, digest))


def delete_session(conn: sqlite3.Connection, digest: str) -> None:
    conn.execute("DELETE FROM console_sessions WHERE id_sha256 = ?", (digest,))


def delete_expired(conn: sqlite3.Connection, *, seen_before_us: int, now_us: int) -> None:
    conn.execute("DELETE FROM console_sessions WHERE seen_us < ?", (seen_before_us,))
    conn.execute("DELETE FROM console_links WHERE expires_us < ?", (now_us,))


def insert_link(
    conn: sqlite3.Connection, digest: str, tenant: str | None, admin_sha256: str, expires_us: int
) -> None:
    conn.execute(
        "INSERT INTO console_links (token_sha256, tenant_id, expires_us, admin_sha256) VALUES (?, ?, ?, ?)",
        (digest, tenant, expires_us, admin_sha256),
    )


@dataclass(frozen=True, slots=True)
class LinkRow:
    tenant_id: str | None
    expires_us: int
    admin_sha256: str | None


def take_link(conn: sqlite3.Connection, digest: str) -> LinkRow | None:
    """Use a link once: its row, if it existed; it is gone either way."""
    row = conn.execute(
        "DELETE FROM console_links WHERE token_sha256 = ? RETURNING tenant_id, expires_us, admin_sha256",
        (digest,),
    ).fetchone()
    return None if row is None else LinkRow(row[0], int(row[1]), row[2])


def tenant_admin_sha256(conn: sqlite3.Connection, tenant: str) -> str | None:
    row = conn.execute("SELECT admin_token_sha256 FROM tenants WHERE id = ?", (tenant,)).fetchone()
    return None if row is None else row[0]


def delete_tenant(conn: sqlite3.Connection, tenant: str) -> None:
    """A deleted tenant's console sessions and unused login links."""
    conn.execute("DELETE FROM console_sessions WHERE tenant_id = ?", (tenant,))
    conn.execute("DELETE FROM console_links WHERE tenant_id = ?", (tenant,))
