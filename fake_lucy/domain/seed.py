"""The seed (tenants, credentials, pre-approved memories) and reset (SPEC 3.1, 3.2)."""

from __future__ import annotations

import hashlib
import sqlite3
from typing import Any

from fake_lucy.domain import clock, server_state, tenants
from fake_lucy.domain.defaults import BUILTIN_TOKENS, DEFAULTS, DEV_TOKEN
from fake_lucy.domain.epochs import bump_auth_epoch
from fake_lucy.domain.errors import DomainError
from fake_lucy.domain.ids import IdFactory
from fake_lucy.domain.lifecycle import VersionContent, clear_index, create_memory
from fake_lucy.domain.principals import NewCredential, Scope, create_credential, ensure_tenant
from fake_lucy.store import queries
from fake_lucy.store.schema import STATE_TABLES
from lucy_memory._contract import SecretScanner, canonical_bytes, schema_validator

__all__ = [
    "DEFAULT_SEED",
    "applied_seed",
    "apply_seed",
    "is_initialised",
    "reset",
    "seed_digest",
    "validate_seed",
]

DEFAULT_SEED: dict[str, Any] = {
    "tenants": [{"id": DEFAULTS["tenant"]}],
    "credentials": [
        {
            "credential_id": "cred_dev_default",
            "token": DEV_TOKEN,
            "tenant": DEFAULTS["tenant"],
            "account": DEFAULTS["account"],
            "user": DEFAULTS["user"],
            "permissions": list(DEFAULTS["permissions"]),
            "scopes": list(DEFAULTS["scopes"]),
            "credits": DEFAULTS["credits"],
        }
    ],
    "memories": [],
}

# Tables cleared by reset, in an order with no dangling references (the tenants' full-text
# indexes go first, see ``reset``).
_TABLES = STATE_TABLES


def validate_seed(seed: Any) -> dict[str, Any]:
    errors = schema_validator("seed.schema.json").errors(seed)
    if errors:
        first = errors[0]
        raise ValueError(f"the seed file does not match seed.schema.json: {first.pointer} {first.detail}")
    result: dict[str, Any] = seed
    _refuse_repeats(result)
    _refuse_secrets(result)
    return result


def _refuse_repeats(seed: dict[str, Any]) -> None:
    """A tenant id, a credential id or a token listed twice: the second one, named by its pointer and
    the first's, as a one-line ``ValueError`` (a tenant listed twice with two policies would leave
    which one holds to the order of the file; a token is never repeated in the message)."""
    lists = (("tenants", "id"), ("credentials", "credential_id"), ("credentials", "token"))
    for collection, field in lists:
        first: dict[Any, int] = {}
        for i, item in enumerate(seed.get(collection, [])):
            value = item.get(field)
            if value is None:
                continue
            if value in first:
                what = "the token" if field == "token" else repr(value)
                raise ValueError(
                    f"/{collection}/{i}/{field} repeats {what} of /{collection}/{first[value]}/{field}:"
                    f" each is listed once"
                )
            first[value] = i


def _refuse_secrets(seed: dict[str, Any]) -> None:
    """A seed stores no secret-looking text (SPEC 1.5), a seeded credential's own token included:
    the first one found, as a one-line ``ValueError``."""
    scanner = SecretScanner()
    tokens = [credential["token"] for credential in seed.get("credentials", [])]
    for m, memory in enumerate(seed.get("memories", [])):
        for field in ("content", "topic", "source"):
            text = memory.get(field)
            if not isinstance(text, str):
                continue
            found = scanner.find(text)
            for token in tokens:
                found = found or scanner.find(text, caller_token=token)
            if found is not None:
                raise ValueError(
                    f"/memories/{m}/{field} holds secret-looking text ({found}); a seed never brings one in"
                )


def is_initialised(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM server_state WHERE id = 1").fetchone() is not None


def seed_digest(seed: dict[str, Any]) -> str:
    """SHA-256 of the seed's RFC 8785 form: the same seed in another layout has the same digest."""
    return hashlib.sha256(canonical_bytes(seed)).hexdigest()


def applied_seed(conn: sqlite3.Connection) -> str | None:
    """The digest of the seed the database was created or last reset with; ``None`` when it was
    seeded by a fake-lucy that did not record it."""
    row = conn.execute("SELECT seed_sha256 FROM server_state WHERE id = 1").fetchone()
    return None if row is None else row[0]


def apply_seed(conn: sqlite3.Connection, ids: IdFactory, seed: dict[str, Any]) -> None:
    """Seed an empty database (inside the caller's transaction)."""
    conn.execute(
        "INSERT INTO server_state (id, clock_offset_us, clock_frozen_us, billing_available,"
        " id_sequence, auth_epoch, index_epoch, seed_sha256, findings_seq)"
        " VALUES (1, 0, NULL, 1, 0, 0, 0, ?, 0)",
        (seed_digest(seed),),
    )
    bump_auth_epoch(conn)  # new epochs after a reset, whatever the caches hold
    server_state.bump_index_epoch(conn)
    now = clock.format_us(clock.now_us(conn))
    for tenant in seed.get("tenants", []):
        ensure_tenant(conn, tenant["id"])
        policy = tenant.get("policy") or {}
        queries.update_tenant_policy(conn, tenant["id"], policy)
    for cred in seed.get("credentials", []):
        try:
            new = NewCredential(
                tenant=cred["tenant"],
                permissions=cred["permissions"],
                scopes=cred.get("scopes", []),
                account=cred.get("account"),
                user=cred.get("user"),
                credits=cred.get("credits"),
                credential_id=cred.get("credential_id"),
                token=cred["token"],
                builtin=cred["token"] in BUILTIN_TOKENS,
            )
            create_credential(conn, ids, new)
        except sqlite3.IntegrityError:
            raise ValueError("the seed lists the same token or credential id twice") from None
        except DomainError as exc:
            raise ValueError(f"the seed is inconsistent: {exc.detail}") from None
    for memory in seed.get("memories", []):
        ensure_tenant(conn, memory["tenant"])
        try:
            create_memory(
                conn,
                ids,
                tenant=memory["tenant"],
                scope=Scope(memory["scope"]["kind"], memory["scope"]["id"]),
                content=VersionContent(
                    kind=memory["kind"],
                    topic=memory.get("topic"),
                    content=memory["content"],
                    importance=int(memory.get("importance", 5)),
                    source=memory.get("source"),
                ),
                now=now,
            )
        except sqlite3.IntegrityError:
            raise ValueError("the seed has two active memories with one topic in a scope") from None


def _seed_tenants(seed: dict[str, Any]) -> set[str]:
    named = [item["id"] for item in seed.get("tenants", [])]
    named += [item["tenant"] for key in ("credentials", "memories") for item in seed.get(key, [])]
    return set(named)


def reset(conn: sqlite3.Connection, ids: IdFactory, seed: dict[str, Any]) -> None:
    """Back to a fresh database with the seed (inside the caller's transaction).

    A seed tenant's full-text index is emptied and kept, any other tenant's dropped: a reset of a
    database that holds only the seed changes no table definitions (which would make every worker
    re-read the schema).
    """
    keep = _seed_tenants(seed)
    before = tenants.incarnations(conn)
    for tenant in before:
        clear_index(conn, tenant, drop=tenant not in keep)
    for table in _TABLES:
        conn.execute(f"DELETE FROM {table}")  # noqa: S608 - table names are constants
    apply_seed(conn, ids, seed)
    tenants.retire_replaced(conn, before)
