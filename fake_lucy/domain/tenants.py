"""Tenants as namespaces (SPEC 3.6): who acts through the control API, and a tenant's life.

A control call acts for the server admin or for the admin of one tenant (``AdminScope``): the
control layer authenticates the bearer token into one and hands it to every domain call, so the
console, the CLI and the control API draw the same lines. A tenant admin acts only within its
tenant: another tenant's object is ``not_found``, a server-wide operation ``forbidden``.

``create`` makes a tenant shaped like the dev seed plus its admin token (stored hashed);
``reset`` puts it back to that state; ``delete`` removes it and everything of it. Each runs in the
caller's write transaction and moves the credential epoch, so every worker sees it at once.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fake_lucy.domain import clock, events, lifecycle, sessions
from fake_lucy.domain.defaults import DEFAULTS
from fake_lucy.domain.epochs import bump_auth_epoch, new_incarnation
from fake_lucy.domain.errors import DomainError
from fake_lucy.domain.ids import IdFactory
from fake_lucy.domain.principals import (
    DEFAULT_PROPOSAL_TTL_SECONDS,
    PERMISSIONS,
    NewCredential,
    create_credential,
    ensure_tenant,
    hash_token,
)
from fake_lucy.store import queries

__all__ = [
    "SERVER",
    "AdminScope",
    "CreatedTenant",
    "Incarnations",
    "admin_check",
    "authenticate_admin",
    "create",
    "date_the_undated",
    "delete",
    "incarnations",
    "reset",
    "retire_replaced",
    "still_valid",
]

DEFAULT_CREDITS: int = DEFAULTS["credits"]
ADMIN_TOKEN_PREFIX = "lucy_tadm_"  # noqa: S105 - a prefix that marks the kind of token, not a secret


@dataclass(frozen=True, slots=True)
class AdminScope:
    """Who acts through the control API: the server admin (``tenant`` None) or one tenant's admin."""

    tenant: str | None = None

    def sees(self, tenant: str) -> bool:
        """Whether an object of ``tenant`` is within reach (else it answers ``not_found``)."""
        return self.tenant is None or self.tenant == tenant

    def narrow(self, tenant: str | None) -> tuple[str | None, bool]:
        """A listing's tenant filter within reach: ``(filter, empty)``; ``empty`` when a tenant
        admin asks for another tenant, which it cannot see."""
        if self.tenant is None:
            return tenant, False
        return self.tenant, tenant is not None and tenant != self.tenant

    def require_server(self, operation: str) -> None:
        if self.tenant is not None:
            raise DomainError(
                "forbidden", f"{operation} acts on the whole server: it needs the server admin token"
            )


SERVER = AdminScope()


def authenticate_admin(conn: sqlite3.Connection, token: str) -> AdminScope | None:
    """The tenant whose admin token this is, or ``None`` (the server admin token is the caller's)."""
    tenant = queries.tenant_by_admin_token(conn, hash_token(token))
    return None if tenant is None else AdminScope(tenant)


def admin_check(conn: sqlite3.Connection, token: str, scope: AdminScope) -> Callable[[], bool] | None:
    """For an answer that lasts (the event stream): whether this admin token still acts for its
    tenant — false once the tenant is deleted, or made again with another token. ``None`` for the
    server admin, whose token lasts as long as the process."""
    if scope.tenant is None:
        return None
    digest, tenant = hash_token(token), scope.tenant
    return lambda: queries.tenant_by_admin_token(conn, digest) == tenant


def still_valid(conn: sqlite3.Connection, scope: AdminScope) -> None:
    """Inside the write transaction: a tenant admin's tenant may have been deleted meanwhile."""
    if scope.tenant is not None and queries.tenant(conn, scope.tenant) is None:
        raise DomainError("unauthenticated", "the tenant of this admin token has been deleted")


@dataclass(frozen=True, slots=True)
class CreatedTenant:
    tenant: str
    admin_token: str
    credential: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"tenant": self.tenant, "admin_token": self.admin_token, "credential": self.credential}

    def __repr__(self) -> str:  # the tokens stay out of logs and tracebacks
        return f"CreatedTenant(tenant={self.tenant!r})"


def create(
    conn: sqlite3.Connection,
    ids: IdFactory,
    *,
    scope: AdminScope,
    tenant: str | None = None,
    credits: int | None = None,
) -> CreatedTenant:
    """A new tenant shaped like the dev seed — one account with a fresh id, user ``usr_dev``, a
    read + propose credential on ``ws_dev`` and ``project_example``, ``credits`` (default 1,000),
    the default policy, the server clock's time — and its admin token."""
    scope.require_server("creating a tenant")
    tenant = tenant or ids.new(conn, "tenant")
    if not ensure_tenant(conn, tenant):
        raise DomainError("tenant_conflict", "a tenant with this id exists already")
    events.seal_tenant(conn, tenant)  # its admin reads no event from before it was made
    initial = DEFAULT_CREDITS if credits is None else credits
    scopes = [dict(item) for item in DEFAULTS["scopes"]]
    new = NewCredential(
        tenant, PERMISSIONS, scopes, account=ids.new(conn, "acct"), user=DEFAULTS["user"], credits=initial
    )
    created = create_credential(conn, ids, new)
    admin_token = ADMIN_TOKEN_PREFIX + secrets.token_urlsafe(32)
    queries.set_tenant_admin(
        conn,
        tenant,
        token_sha256=hash_token(admin_token),
        first_credential_id=created["credential_id"],
        credits=initial,
    )
    credential = {
        "credential_id": created["credential_id"],
        "token": created["token"],
        "account": created["account"],
        "user": created["user"],
        "permissions": list(PERMISSIONS),
        "scopes": scopes,
    }
    return CreatedTenant(tenant, admin_token, credential)


def date_the_undated(conn: sqlite3.Connection) -> None:
    """A file written before tenants had ``created_at``: its tenants are dated now (server clock),
    when this fake-lucy first opens it, so that a test session's tenant left over from before is
    pruned once it is old enough."""
    queries.date_undated_tenants(conn, clock.now(conn))


def _existing(conn: sqlite3.Connection, scope: AdminScope, tenant: str) -> queries.TenantRecord:
    record = queries.tenant(conn, tenant)
    if record is None or not scope.sees(tenant):
        raise DomainError("not_found", "no tenant has this id")
    return record


def reset(conn: sqlite3.Connection, tenant: str) -> None:
    """Back to the state ``create`` made: its first credential (usable again) and admin token,
    the balance at the initial credits, the default policy, the clock where the server clock is;
    every memory, proposal, idempotency record, bucket, fault, journal and ledger row, other
    credential and account gone."""
    record = _existing(conn, SERVER, tenant)
    lifecycle.clear_index(conn, tenant)
    if record.first_credential_id is None or record.first_account_id is None:
        queries.purge_tenant(conn, tenant, keep=None)
    else:
        queries.purge_tenant(conn, tenant, keep=record)
        queries.restore_tenant_start(conn, record, proposal_ttl_seconds=DEFAULT_PROPOSAL_TTL_SECONDS)
    queries.set_incarnation(conn, tenant, new_incarnation())  # a request in flight stays out of it
    clock.follow_server(conn, tenant)
    bump_auth_epoch(conn)
    events.emit(conn, "reset", {}, at=clock.now(conn, tenant), tenant=tenant)


def delete(conn: sqlite3.Connection, tenant: str, *, scope: AdminScope) -> None:
    """Remove the tenant and everything of it; its tokens (v1 and admin) are refused at once."""
    _existing(conn, scope, tenant)
    lifecycle.clear_index(conn, tenant, drop=True)
    queries.purge_tenant(conn, tenant, keep=None)
    queries.delete_tenant_row(conn, tenant)
    _retire(conn, tenant)
    bump_auth_epoch(conn)


def _retire(conn: sqlite3.Connection, tenant: str) -> None:
    """This tenant (this id with this admin token) is gone: a tenant made later under its id sees
    none of its events, and its admins' console sessions and login links end."""
    events.seal_tenant(conn, tenant)
    sessions.end_tenant(conn, tenant)


Incarnations = dict[str, str | None]


def incarnations(conn: sqlite3.Connection) -> Incarnations:
    """Each tenant and its admin token's hash: what ``retire_replaced`` compares after a server
    reset or a restore of the whole state."""
    return queries.tenant_admin_hashes(conn)


def retire_replaced(conn: sqlite3.Connection, before: Incarnations) -> None:
    """After a change of the whole state (a server reset, a restore of every tenant): each tenant
    of ``before`` that is gone, or is there again under another admin token, is retired as a
    deletion retires it. Otherwise a console session or an open event stream of its admin, or a
    ``Last-Event-ID`` resume, would reach the tenant made later under its id. A tenant that was not
    there before reads no event from before it came, as one made by ``create``."""
    after = queries.tenant_admin_hashes(conn)
    for tenant, admin_hash in before.items():
        if tenant not in after or after[tenant] != admin_hash:
            _retire(conn, tenant)
    for tenant in after.keys() - before.keys():
        events.seal_tenant(conn, tenant)
