"""Review console sessions and one-time login links (SPEC 3.10).

A session id is 32 random bytes (URL-safe) held only in the browser's cookie; the database keeps
its SHA-256, so every worker knows the session and a copy of the file logs nobody in. The CSRF
token of a session is an HMAC of its id: a page can carry it, and only the holder of the cookie
can compute it. Sessions expire after ``IDLE_SECONDS`` without a request (wall time, not the
fake's clock); a login link works once, within ``LINK_SECONDS``. Reset keeps both.

Each session and link holds the SHA-256 of the admin token that made it, and lasts only while that
token is still the admin token of its reach: the server's (``server_admin``: the digest of the
token this process was given, None when that token is refused, as the built-in one off loopback)
or its tenant's. A fake started again with another admin token, or a tenant whose admin token
changed, logs out whoever logged in with the old one.
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
    "server_admin_digest",
    "start",
    "still_valid",
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


def start(conn: sqlite3.Connection, tenant: str | None, admin_token: str) -> str:
    """A new session of the holder of ``admin_token`` (the server's, or ``tenant``'s); returns its
    id (for the cookie only)."""
    return _start(conn, tenant, _digest(admin_token))


def _start(conn: sqlite3.Connection, tenant: str | None, admin_sha256: str) -> str:
    now = _now_us()
    store.delete_expired(conn, seen_before_us=now - IDLE_SECONDS * 10**6, now_us=now)
    session_id = secrets.token_urlsafe(32)
    store.insert_session(conn, _digest(session_id), tenant, admin_sha256, now)
    return session_id


def _admin_holds(
    made_by: str | None, tenant_admin: str | None, *, tenant: str | None, server_admin: str | None
) -> bool:
    """Is the admin token a session or link was made with (``made_by``) still the admin token of
    its reach: the server's, or ``tenant``'s (``tenant_admin``: that tenant's now, if any)?"""
    now = server_admin if tenant is None else tenant_admin
    return made_by is not None and now is not None and hmac.compare_digest(made_by, now)


def _valid(row: store.SessionRow, server_admin: str | None, now: int) -> bool:
    """Used within ``IDLE_SECONDS``, and its admin token still the admin token of its reach."""
    return now - row.seen_us <= IDLE_SECONDS * 10**6 and _admin_holds(
        row.admin_sha256, row.tenant_admin_sha256, tenant=row.tenant_id, server_admin=server_admin
    )


def resume(conn: sqlite3.Connection, session_id: str | None, server_admin: str | None) -> Session | None:
    """The session of a cookie's id, if it exists and is still valid (``_valid``); a session that
    is no longer is deleted."""
    if not session_id:
        return None
    digest = _digest(session_id)
    row = store.session(conn, digest)
    now = _now_us()
    if row is None:
        return None
    if not _valid(row, server_admin, now):
        store.delete_session(conn, digest)
        return None
    if now - row.seen_us > _TOUCH_EVERY_US:
        store.touch_session(conn, digest, now)
    return Session(digest, row.tenant_id, csrf_token(session_id))


def still_valid(conn: sqlite3.Connection, digest: str, server_admin: str | None) -> bool:
    """Is the session still there and valid (for a stream that stays open)?"""
    row = store.session(conn, digest)
    return row is not None and _valid(row, server_admin, _now_us())


def server_admin_digest(admin_token: str | None) -> str | None:
    """``server_admin`` of the functions here: the digest of the server admin token in force, or
    None when there is none (the built-in one off loopback)."""
    return None if admin_token is None else _digest(admin_token)


def end(conn: sqlite3.Connection, session_id: str) -> None:
    store.delete_session(conn, _digest(session_id))


def end_tenant(conn: sqlite3.Connection, tenant: str) -> None:
    """``tenant`` is deleted: its admins' console sessions end and their links stop working."""
    store.delete_tenant(conn, tenant)


def create_link(conn: sqlite3.Connection, admin_token: str, tenant: str | None = None) -> str:
    """A one-time login link's token, for the holder of ``admin_token`` (the server's, or
    ``tenant``'s): ``fake-lucy serve`` prints the link on a loopback bind."""
    token = secrets.token_urlsafe(32)
    store.insert_link(conn, _digest(token), tenant, _digest(admin_token), _now_us() + LINK_SECONDS * 10**6)
    return token


def use_link(conn: sqlite3.Connection, token: str, server_admin: str | None) -> str | None:
    """Spend a link: a new session's id, or None when the link is unknown, used or expired, or the
    admin token it was made for is no longer the admin token of its reach."""
    link = store.take_link(conn, _digest(token))
    if link is None or link.expires_us < _now_us():
        return None
    tenant_admin = None if link.tenant_id is None else store.tenant_admin_sha256(conn, link.tenant_id)
    if link.admin_sha256 is None or not _admin_holds(
        link.admin_sha256, tenant_admin, tenant=link.tenant_id, server_admin=server_admin
    ):
        return None
    return _start(conn, link.tenant_id, link.admin_sha256)
