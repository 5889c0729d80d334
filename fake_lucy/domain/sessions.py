"""Review console sessions and one-time login links (SPEC 3.10).

A session id is 32 random bytes (URL-safe) held only in the browser's cookie; the database keeps
its SHA-256, so every worker knows the session and a copy of the file logs nobody in. The CSRF
token of a session is an HMAC of its id: a page can carry it, and only the holder of the cookie
can compute it. Sessions expire after ``IDLE_SECONDS`` without a request (wall time, not the
fake's clock); a login link works once, within ``LINK_SECONDS``. Reset keeps both.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
import time
from dataclasses import dataclass

from fake_lucy.store import sessions as store

__all__ = [
    "IDLE_SECONDS",
    "LINK_SECONDS",
    "Session",
    "create_link",
    "csrf_token",
    "end",
    "end_tenant",
    "resume",
    "start",
    "use_link",
]

IDLE_SECONDS = 12 * 3600
LINK_SECONDS = 600
_TOUCH_EVERY_US = 60 * 10**6  # a session's last use is written at most once a minute


@dataclass(frozen=True, slots=True)
class Session:
    """A live session: ``tenant`` is None for the server admin (everything)."""

    digest: str
    tenant: str | None
    csrf: str


def _now_us() -> int:
    return time.time_ns() // 1000


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def csrf_token(session_id: str) -> str:
    return hmac.new(session_id.encode("utf-8"), b"fake-lucy console csrf", hashlib.sha256).hexdigest()


def start(conn: sqlite3.Connection, tenant: str | None) -> str:
    """A new session; returns its id (for the cookie only)."""
    now = _now_us()
    store.delete_expired(conn, seen_before_us=now - IDLE_SECONDS * 10**6, now_us=now)
    session_id = secrets.token_urlsafe(32)
    store.insert_session(conn, _digest(session_id), tenant, now)
    return session_id


def resume(conn: sqlite3.Connection, session_id: str | None) -> Session | None:
    """The session of a cookie's id, if it exists and has been used within ``IDLE_SECONDS``."""
    if not session_id:
        return None
    digest = _digest(session_id)
    row = store.session(conn, digest)
    now = _now_us()
    if row is None:
        return None
    if now - row.seen_us > IDLE_SECONDS * 10**6:
        store.delete_session(conn, digest)
        return None
    if now - row.seen_us > _TOUCH_EVERY_US:
        store.touch_session(conn, digest, now)
    return Session(digest, row.tenant_id, csrf_token(session_id))


def still_valid(conn: sqlite3.Connection, digest: str) -> bool:
    """Is the session still there and not idle too long (for a stream that stays open)?"""
    row = store.session(conn, digest)
    return row is not None and _now_us() - row.seen_us <= IDLE_SECONDS * 10**6


def end(conn: sqlite3.Connection, session_id: str) -> None:
    store.delete_session(conn, _digest(session_id))


def end_tenant(conn: sqlite3.Connection, tenant: str) -> None:
    """``tenant`` is deleted: its admins' console sessions end and their links stop working."""
    store.delete_tenant(conn, tenant)


def create_link(conn: sqlite3.Connection, tenant: str | None = None) -> str:
    """A one-time login link's token (``fake-lucy serve`` prints the link on a loopback bind)."""
    token = secrets.token_urlsafe(32)
    store.insert_link(conn, _digest(token), tenant, _now_us() + LINK_SECONDS * 10**6)
    return token


def use_link(conn: sqlite3.Connection, token: str) -> str | None:
    """Spend a link: a new session's id, or None when the link is unknown, used or expired."""
    valid, tenant = store.take_link(conn, _digest(token), _now_us())
    return start(conn, tenant) if valid else None
