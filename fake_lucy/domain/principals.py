"""Credentials: bearer tokens (stored as sha256), their permissions and visible scopes (SPEC 1.4)."""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from fake_lucy.domain import billing, clock
from fake_lucy.domain.epochs import bump_auth_epoch, new_incarnation
from fake_lucy.domain.errors import DomainError
from fake_lucy.domain.ids import IdFactory
from fake_lucy.store.numbering import next_seq
from fake_lucy.store.schema import fts_ddl
from lucy_memory._contract import PERMISSIONS

__all__ = [
    "PERMISSIONS",
    "NewCredential",
    "Principal",
    "PrincipalCache",
    "Scope",
    "authenticate",
    "bump_auth_epoch",
    "create_credential",
    "ensure_account",
    "ensure_tenant",
    "hash_token",
    "revoke_credential",
    "scope_tag",
]

DEFAULT_PROPOSAL_TTL_SECONDS = 7 * 24 * 3600


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Scope:
    kind: str
    id: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "id": self.id}


def scope_tag(tenant: str, scope: Scope) -> str:
    """One opaque full-text token per (tenant, scope): the same scope id in two tenants differs."""
    digest = hashlib.sha256(f"{tenant}\x1f{scope.kind}\x1f{scope.id}".encode()).hexdigest()
    return "s" + digest[:24]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: one credential of one account of one tenant."""

    credential_id: str
    tenant_id: str
    account_id: str
    user_id: str
    permissions: frozenset[str]
    scopes: tuple[Scope, ...]
    builtin: bool
    auto_approve: str
    proposal_ttl_seconds: int
    rate_limit_per_minute: int | None
    clock_offset_us: int  # the tenant's clock, as of the credential epoch it was loaded in
    clock_frozen_us: int | None
    incarnation: int  # the tenant's, when the principal was loaded (``server_state.in_transaction``)

    def sees(self, scope: Scope) -> bool:
        return scope in self.scopes

    def now_us(self) -> int:
        """The tenant's clock (every change to it moves the epoch, so a cached principal's is current)."""
        return clock.from_state(self.clock_offset_us, self.clock_frozen_us)

    def __repr__(self) -> str:
        return f"Principal(credential_id={self.credential_id!r}, tenant_id={self.tenant_id!r})"


def _scopes(user_id: str, listed: Iterable[dict[str, str]]) -> tuple[Scope, ...]:
    result = [Scope(kind=item["kind"], id=item["id"]) for item in listed]
    own = Scope(kind="user", id=user_id)
    if own not in result:
        result.append(own)
    return tuple(result)


def authenticate(conn: sqlite3.Connection, token: str) -> Principal | None:
    return _load(conn, hash_token(token))


def _load(conn: sqlite3.Connection, token_sha256: str) -> Principal | None:
    row = conn.execute(
        "SELECT c.id, c.tenant_id, c.account_id, c.user_id, c.permissions, c.scopes, c.builtin,"
        " t.auto_approve, t.proposal_ttl_seconds, t.rate_limit_per_minute, t.clock_offset_us,"
        " t.clock_frozen_us, t.incarnation FROM credentials c JOIN tenants t ON t.id = c.tenant_id"
        " WHERE c.token_sha256 = ? AND c.revoked = 0",
        (token_sha256,),
    ).fetchone()
    if row is None:
        return None
    return Principal(
        credential_id=row[0],
        tenant_id=row[1],
        account_id=row[2],
        user_id=row[3],
        permissions=frozenset(p for p in row[4].split(",") if p),
        scopes=_scopes(row[3], json.loads(row[5])),
        builtin=bool(row[6]),
        auto_approve=row[7],
        proposal_ttl_seconds=int(row[8]),
        rate_limit_per_minute=None if row[9] is None else int(row[9]),
        clock_offset_us=int(row[10]),
        clock_frozen_us=None if row[11] is None else int(row[11]),
        incarnation=int(row[12]),
    )


class PrincipalCache:
    """This process's authenticated principals by token hash, valid for one ``auth_epoch``.

    The caller reads the epoch from ``server_state`` before asking, so a credential revoked or a
    policy changed by any worker is seen by the next request of every worker. Unknown tokens are
    not cached; the cache is emptied when it would pass ``max_entries``.
    """

    def __init__(self, max_entries: int = 10_000) -> None:
        self._epoch: int | None = None
        self._by_hash: dict[str, Principal] = {}
        self._max_entries = max_entries

    def authenticate(self, conn: sqlite3.Connection, token: str, *, epoch: int) -> Principal | None:
        if epoch != self._epoch or len(self._by_hash) >= self._max_entries:
            self._by_hash.clear()
            self._epoch = epoch
        digest = hash_token(token)
        principal = self._by_hash.get(digest)
        if principal is None:
            principal = _load(conn, digest)
            if principal is not None:
                self._by_hash[digest] = principal
        return principal


# a tenant's row number (the tenants listing's cursor), never one a deleted tenant held
_NEXT_TENANT = next_seq("tenants")


def ensure_tenant(conn: sqlite3.Connection, tenant: str) -> bool:
    """Create the tenant on first use: the default policy, the server clock's time (its clock and
    its ``created_at``), its own full-text index. Returns whether it was created."""
    created = conn.execute(
        "INSERT OR IGNORE INTO tenants (rowid, id, auto_approve, proposal_ttl_seconds,"  # noqa: S608 - constant SQL
        " rate_limit_per_minute, clock_offset_us, clock_frozen_us, created_at, incarnation)"
        f" SELECT {_NEXT_TENANT}, ?, ?, ?, NULL, clock_offset_us, clock_frozen_us, ?, ?"
        " FROM server_state WHERE id = 1",
        (tenant, '"off"', DEFAULT_PROPOSAL_TTL_SECONDS, clock.now(conn), new_incarnation()),
    ).rowcount
    if created:
        conn.execute(fts_ddl(tenant))
        bump_auth_epoch(conn)
    return created == 1


def ensure_account(
    conn: sqlite3.Connection, tenant: str, account: str, credits: int | None, *, request_id: str | None = None
) -> None:
    """Create the account on first use; ``credits`` sets its balance. Through the control API
    (``request_id`` given) a changed balance writes the ``admin_set`` ledger row, as PUT credits does."""
    row = conn.execute("SELECT tenant_id, balance FROM accounts WHERE id = ?", (account,)).fetchone()
    if row is None:
        conn.execute(
            "INSERT INTO accounts (id, tenant_id, balance) VALUES (?, ?, ?)",
            (account, tenant, 1000 if credits is None else credits),
        )
        return
    if row[0] != tenant:
        raise DomainError(
            "account_conflict",
            "the account id already belongs to another tenant; account ids are global",
        )
    if credits is not None and request_id is not None:
        if int(row[1]) != credits:
            billing.set_balance(
                conn, account=account, new_balance=credits, request_id=request_id, at=clock.now(conn, tenant)
            )
    elif credits is not None:
        conn.execute("UPDATE accounts SET balance = ? WHERE id = ?", (credits, account))


@dataclass(frozen=True, slots=True)
class NewCredential:
    """What a credential is made of, as the control API, the seed and a new tenant ask for one:
    ``account`` and ``user`` (None: ids derived from the credential's) and ``tenant`` are made on
    first use; ``credits`` (when given) sets the account's balance. The seed names the credential's
    id and token, and marks the built-in ones; otherwise both are new."""

    tenant: str
    permissions: Sequence[str]
    scopes: Sequence[dict[str, str]]
    account: str | None = None
    user: str | None = None
    credits: int | None = None
    credential_id: str | None = None
    token: str | None = field(default=None, repr=False)
    builtin: bool = False


def create_credential(
    conn: sqlite3.Connection,
    ids: IdFactory,
    new: NewCredential,
    *,
    request_id: str | None = None,
) -> dict[str, str]:
    """Create tenant and account on first use, then the credential. Returns the token once.
    Through the control API (``request_id`` given) a changed balance writes a ledger row."""
    credential_id = new.credential_id or ids.new(conn, "cred")
    tenant = new.tenant
    account = new.account or ("acct_" + credential_id.removeprefix("cred_")[:16])
    user = new.user or ("usr_" + credential_id.removeprefix("cred_")[:16])
    token = new.token or ("lucy_" + secrets.token_urlsafe(32))
    ensure_tenant(conn, tenant)
    ensure_account(conn, tenant, account, new.credits, request_id=request_id)
    unique_scopes = list({(s["kind"], s["id"]): s for s in new.scopes}.values())
    conn.execute(
        "INSERT INTO credentials (id, token_sha256, tenant_id, account_id, user_id, permissions,"
        " scopes, builtin, revoked) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)",
        (
            credential_id,
            hash_token(token),
            tenant,
            account,
            user,
            ",".join(p for p in PERMISSIONS if p in new.permissions),
            json.dumps([{"kind": s["kind"], "id": s["id"]} for s in unique_scopes]),
            new.builtin,
        ),
    )
    bump_auth_epoch(conn)
    return {
        "credential_id": credential_id,
        "token": token,
        "tenant": tenant,
        "account": account,
        "user": user,
    }


def revoke_credential(conn: sqlite3.Connection, credential_id: str) -> None:
    cursor = conn.execute("UPDATE credentials SET revoked = 1 WHERE id = ?", (credential_id,))
    if cursor.rowcount == 0:
        raise DomainError("not_found", "no credential has this id")
    bump_auth_epoch(conn)
