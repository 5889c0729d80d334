"""Snapshots (SPEC 3.9): the whole state as one versioned JSON document, and back.

``export_state`` writes ``schemas/snapshot.schema.json``; ``restore_state`` replaces the state with
a document in one transaction (a refused document changes nothing). Tokens travel only as their
sha256 (as they are stored), so a restored fake accepts the same tokens; no admin token is ever
in a snapshot. ``version`` counts format changes: a newer one is refused, an older one is migrated
(``_MIGRATIONS``) before it is read.

Both take an optional ``tenant``: the document then holds, and a restore replaces, that tenant
only (for a tenant admin, SPEC 3.6). Each tenant carries its own clock and, for one made by
``POST /_fake/tenants``, its admin token's sha256, first credential and initial credits (what a
tenant reset returns to); a restore rebuilds each tenant's full-text table from its memories.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from fake_lucy.domain import clock, events, journal, server_state
from fake_lucy.domain import tenants as tenancy
from fake_lucy.domain.defaults import BUILTIN_TOKENS, DEFAULT_ADMIN_TOKEN
from fake_lucy.domain.epochs import new_incarnation
from fake_lucy.domain.errors import invalid_field, invalid_request
from fake_lucy.domain.lifecycle import clear_index, create_index, expire_due, index_memory
from fake_lucy.domain.principals import Scope, bump_auth_epoch, hash_token
from fake_lucy.domain.seed import applied_seed
from fake_lucy.store import snapshot as store
from lucy_memory._contract import InvalidJSONError, SecretScanner, parse_json_object, schema_validator

__all__ = ["FORMAT", "VERSION", "export_state", "restore_state", "validate"]

FORMAT = "fake-lucy-snapshot"
VERSION = 2
SCHEMA = "snapshot.schema.json"


# version n → a function that turns a version-n document into a version n+1 one.
def _version_1_to_2(document: dict[str, Any]) -> dict[str, Any]:
    """Version 2 added each tenant's optional ``created_at``: a version 1 document is one as it is."""
    return {**document, "version": 2}


_MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _version_1_to_2}


def _scope(kind: str, scope_id: str) -> dict[str, str]:
    return {"kind": kind, "id": scope_id}


# -- out -------------------------------------------------------------------------------------------


def export_state(
    conn: sqlite3.Connection, *, fake_version: str, tenant: str | None = None, include_journal: bool = False
) -> dict[str, Any]:
    """The state as a snapshot document (read in the caller's transaction, so it is consistent),
    with each proposal's effective status: one past its expiry is expired (and persisted so, as
    every listing does), never the pending a dump's reader would take for what the API answers."""
    server = store.server_row(conn)
    tenants = [tenant] if tenant is not None else store.tenant_ids(conn)
    for each in tenants:
        expire_due(conn, each, clock.now(conn, each))
    return {
        "format": FORMAT,
        "version": VERSION,
        "fake_version": fake_version,
        "taken_at": clock.now(conn),
        "clocks": {
            "server": {
                "now": clock.now(conn),
                "frozen": server["clock_frozen_us"] is not None,
                "offset_us": int(server["clock_offset_us"]),
            }
        },
        "server": {
            "billing_available": bool(server["billing_available"]),
            "id_sequence": int(server["id_sequence"]),
        },
        "tenants": [
            _export_tenant(conn, tenant_id, include_journal)
            for tenant_id in tenants
            if store.tenant_rows(conn, "tenants", tenant_id)
        ],
    }


def _export_tenant(conn: sqlite3.Connection, tenant: str, include_journal: bool) -> dict[str, Any]:
    [row] = store.tenant_rows(conn, "tenants", tenant)
    versions: dict[str, list[dict[str, Any]]] = {}
    for version in store.tenant_rows(conn, "memory_versions", tenant):
        versions.setdefault(version["memory_id"], []).append(
            {
                "version": version["version"],
                "kind": version["kind"],
                "topic": version["topic"],
                "content": version["content"],
                "importance": version["importance"],
                "status": version["status"],
                "source": version["source"],
                "updated_at": version["updated_at"],
                "approved_at": version["approved_at"],
            }
        )
    frozen = row["clock_frozen_us"]
    document: dict[str, Any] = {
        "id": tenant,
        "created_at": row["created_at"],
        "policy": {
            "auto_approve": json.loads(row["auto_approve"]),
            "proposal_ttl_seconds": row["proposal_ttl_seconds"],
            "rate_limit_per_minute": row["rate_limit_per_minute"],
        },
        "clock": {
            "now": clock.format_us(clock.from_state(row["clock_offset_us"], frozen)),
            "frozen": frozen is not None,
            "offset_us": int(row["clock_offset_us"]),
        },
        "admin_token_sha256": row["admin_token_sha256"],
        "first_credential_id": row["first_credential_id"],
        "initial_credits": row["initial_credits"],
        "accounts": [
            {"id": account["id"], "balance": account["balance"]}
            for account in store.tenant_rows(conn, "accounts", tenant)
        ],
        "credentials": [
            {
                "credential_id": credential["id"],
                "token_sha256": credential["token_sha256"],
                "account": credential["account_id"],
                "user": credential["user_id"],
                "permissions": [p for p in credential["permissions"].split(",") if p],
                "scopes": json.loads(credential["scopes"]),
                "builtin": bool(credential["builtin"]),
                "revoked": bool(credential["revoked"]),
            }
            for credential in store.tenant_rows(conn, "credentials", tenant)
        ],
        "memories": [
            {
                "id": memory["id"],
                "scope": _scope(memory["scope_kind"], memory["scope_id"]),
                "created_at": memory["created_at"],
                "last_accessed_at": memory["last_accessed_at"],
                "version": memory["version"],
                "versions": versions.get(memory["id"], []),
            }
            for memory in store.tenant_rows(conn, "memories", tenant)
        ],
        "proposals": [
            _export_proposal(proposal) for proposal in store.tenant_rows(conn, "proposals", tenant)
        ],
        "idempotency_records": [
            {
                "account": record["account_id"],
                "key": record["key"],
                "body_sha256": record["body_sha256"],
                "state": record["state"],
                "status": record["status_code"],
                "body": None
                if record["response_body"] is None
                else bytes(record["response_body"]).decode("utf-8"),
                "original_request_id": record["original_request_id"],
                "scope": _scope(record["scope_kind"], record["scope_id"]),
                "created_at": record["created_at"],
                "expires_at": record["expires_at"],
                "in_flight_until": record["in_flight_until"],
            }
            for record in store.tenant_rows(conn, "idempotency_records", tenant)
        ],
        "ledger": [
            {
                "request_id": entry["request_id"],
                "account": entry["account_id"],
                "tenant": tenant,
                "operation": entry["operation"],
                "amount": entry["amount"],
                "balance_after": entry["balance_after"],
                "at": entry["at"],
            }
            for entry in store.tenant_rows(conn, "ledger", tenant)
        ],
    }
    if include_journal:
        document["journal"] = [
            {**entry, **{flag: bool(entry[flag]) for flag in ("charged", "replayed", "dropped")}}
            for entry in store.journal_rows(conn, tenant)
        ]
    return document


def _export_proposal(row: dict[str, Any]) -> dict[str, Any]:
    replaces = None
    if row["replaces_memory_id"] is not None:
        replaces = {"memory_id": row["replaces_memory_id"], "version": row["replaces_version"]}
    memory = None
    if row["memory_id"] is not None:
        memory = {"id": row["memory_id"], "version": row["memory_version"]}
    return {
        "id": row["id"],
        "account": row["account_id"],
        "credential_id": row["credential_id"],
        "status": row["status"],
        "kind": row["kind"],
        "topic": row["topic"],
        "content": row["content"],
        "importance": row["importance"],
        "scope": _scope(row["scope_kind"], row["scope_id"]),
        "justification": row["justification"],
        "replaces": replaces,
        "memory": memory,
        "reason": row["reason"],
        "reason_detail": row["reason_detail"],
        "source": row["source"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "expires_at": row["expires_at"],
        "decided_at": row["decided_at"],
        "target": row["target_key"],
    }


# -- in --------------------------------------------------------------------------------------------


def validate(document: Any) -> dict[str, Any]:
    """A document this fake can restore (migrated to ``VERSION``), or a 422 ``invalid_request`` with
    pointers. A newer format version is refused before anything else is read. JSON has one kind of
    number: ``2.0`` is the integer 2 (SPEC 1.1), so a whole number written so is read as one."""
    document = _whole_numbers(document)
    if isinstance(document, dict) and document.get("format") == FORMAT:
        version = document.get("version")
        if type(version) is int and version > VERSION:
            raise invalid_field(
                "/version",
                f"is a newer snapshot format than this fake reads (up to {VERSION}); upgrade fake-lucy",
                "the snapshot was written by a newer fake-lucy",
            )
        while type(version) is int and version in _MIGRATIONS:
            document = _MIGRATIONS[version](document)
            version = document.get("version")
    errors = schema_validator(SCHEMA).errors(document)
    if errors:
        raise invalid_request(
            (error.as_dict() for error in errors), "the snapshot does not match snapshot.schema.json"
        )
    result: dict[str, Any] = document
    _check_references(result)
    return result


def _whole_numbers(document: Any) -> Any:
    """The document with each whole number written as a float (``2.0``) an integer, in place; the
    snapshot has no number that is not an integer (a fraction stays, for the schema to refuse)."""
    stack = [document]
    while stack:  # not recursive: a document nested deeper than Python's stack is the schema's to refuse
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in list(items):
            if type(value) is float and value.is_integer():
                node[key] = int(value)
            elif isinstance(value, dict | list):
                stack.append(value)
    return document


# The references a tenant's rows hold: per collection, the fields of each item that must name an
# account or a credential of the same tenant.
_REFERENCES: dict[str, tuple[tuple[str, str], ...]] = {
    "credentials": (("account", "account"),),
    "proposals": (("account", "account"), ("credential_id", "credential")),
    "idempotency_records": (("account", "account"),),
    "ledger": (("account", "account"),),
    "journal": (("credential_id", "credential"),),
}


def _check_references(document: dict[str, Any]) -> None:
    """What the schema cannot say: each reference names something the snapshot holds (the
    problems in the document's order)."""
    problems: list[dict[str, str]] = []
    request_ids: dict[str, set[str]] = {"ledger": set(), "journal": set()}  # ids are server-wide
    first_of: dict[str, int] = {}
    for t, tenant in enumerate(document["tenants"]):  # a tenant twice: said as that, before its rows
        if tenant["id"] in first_of:
            problems.append(
                {
                    "pointer": f"/tenants/{t}/id",
                    "detail": f"repeats the tenant of /tenants/{first_of[tenant['id']]}",
                }
            )
        first_of.setdefault(tenant["id"], t)
    for t, tenant in enumerate(document["tenants"]):
        base = f"/tenants/{t}"
        held = {
            "account": {account["id"] for account in tenant["accounts"]},
            "credential": {credential["credential_id"] for credential in tenant["credentials"]},
        }
        first = tenant.get("first_credential_id")
        if first is not None and first not in held["credential"]:
            problems.append(_dangling(f"{base}/first_credential_id", "credential"))
        if (first is None) != (tenant.get("initial_credits") is None):  # a tenant reset reads both
            problems.append(
                {
                    "pointer": f"{base}/initial_credits",
                    "detail": "must be given exactly when first_credential_id is (a tenant reset needs both)",
                }
            )
        for i, record in enumerate(tenant["idempotency_records"]):
            if record["state"] == "done":  # a replay answers with the stored status and body
                problems.extend(
                    {"pointer": f"{base}/idempotency_records/{i}/{name}", "detail": "must be set once done"}
                    for name in ("status", "body")
                    if record[name] is None
                )
                if record["body"] is not None and _propose_answer(record["body"]) is None:
                    problems.append(
                        {
                            "pointer": f"{base}/idempotency_records/{i}/body",
                            "detail": "must be the JSON of a propose answer (a replay sends it as it is)",
                        }
                    )
        problems.extend(_unheld(tenant, base, "credentials", held))
        for m, memory in enumerate(tenant["memories"]):
            problems.extend(_version_problems(f"{base}/memories/{m}", memory))
        memories = {memory["id"]: memory for memory in tenant["memories"]}
        for i, proposal in enumerate(tenant["proposals"]):
            problems.extend(_proposal_problems(f"{base}/proposals/{i}", proposal, memories))
        problems.extend(_secrets(tenant, base))
        for collection in ("proposals", "idempotency_records", "ledger", "journal"):
            problems.extend(_unheld(tenant, base, collection, held))
        problems.extend(_ledger_problems(tenant, base))
        problems.extend(
            {"pointer": f"{base}/{collection}/{i}/tenant", "detail": f"must be its tenant, {tenant['id']}"}
            for collection in ("ledger", "journal")
            for i, entry in enumerate(tenant.get(collection, []))
            if entry["tenant"] != tenant["id"]
        )
        for collection, seen in request_ids.items():
            for i, entry in enumerate(tenant.get(collection, [])):
                if entry["request_id"] in seen:
                    problems.append(
                        {
                            "pointer": f"{base}/{collection}/{i}/request_id",
                            "detail": f"is the request id of another {collection} row",
                        }
                    )
                seen.add(entry["request_id"])
    problems.extend(_unreal_times(document, ""))
    if problems:
        raise invalid_request(problems[:100], "the snapshot is inconsistent")


def _unreal_times(node: Any, pointer: str) -> list[dict[str, str]]:
    """Every time (a field named ``at``, ``now`` or ``…_at`` / ``…_until``) that the schema's
    pattern lets through but the calendar does not (30 February, a 61st second)."""
    problems: list[dict[str, str]] = []
    if isinstance(node, dict):
        for name, value in node.items():
            here = f"{pointer}/{name}"
            is_time = name in ("at", "now") or name.endswith(("_at", "_until"))
            if is_time and isinstance(value, str):
                try:
                    clock.parse_timestamp(value)
                except ValueError:
                    problems.append({"pointer": here, "detail": "must be a real date and time"})
            elif isinstance(value, dict | list):
                problems.extend(_unreal_times(value, here))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            problems.extend(_unreal_times(item, f"{pointer}/{i}"))
    return problems


def _unheld(
    tenant: dict[str, Any], base: str, collection: str, held: dict[str, set[str]]
) -> list[dict[str, str]]:
    """The references of ``collection``'s items to an account or credential the tenant does not hold."""
    return [
        _dangling(f"{base}/{collection}/{i}/{field}", kind)
        for i, item in enumerate(tenant.get(collection, []))
        for field, kind in _REFERENCES[collection]
        if item[field] not in held[kind]
    ]


def _dangling(pointer: str, kind: str) -> dict[str, str]:
    return {"pointer": pointer, "detail": f"names no {kind} of its tenant"}


_SCANNER = SecretScanner()


def _secret_found(pointer: str, text: Any) -> list[dict[str, str]]:
    found = _SCANNER.find(text) if isinstance(text, str) else None
    if found is None:
        return []
    return [
        {"pointer": pointer, "detail": f"holds secret-looking text ({found}); a snapshot never brings one in"}
    ]


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [text for value in node.values() for text in _strings(value)]
    if isinstance(node, list):
        return [text for value in node for text in _strings(value)]
    return []


def _secrets(tenant: dict[str, Any], base: str) -> list[dict[str, str]]:
    """Secret-looking text the fake would store (SPEC 1.5): a restore is no way around the scan
    a propose meets. Memory versions, proposals, idempotency keys and the stored answers a replay
    would send."""
    problems: list[dict[str, str]] = []
    for m, memory in enumerate(tenant["memories"]):
        for v, version in enumerate(memory["versions"]):
            for field in ("content", "topic", "source"):
                problems += _secret_found(f"{base}/memories/{m}/versions/{v}/{field}", version[field])
    for i, proposal in enumerate(tenant["proposals"]):
        for field in ("content", "justification", "topic", "source", "reason_detail"):
            problems += _secret_found(f"{base}/proposals/{i}/{field}", proposal[field])
    for i, record in enumerate(tenant["idempotency_records"]):
        # its key, which a live request with one shaped like a secret never leaves behind
        problems += _secret_found(f"{base}/idempotency_records/{i}/key", record["key"])
        answer = None if record["body"] is None else _propose_answer(record["body"])
        if answer is not None:  # one that is no answer is refused already (_check_references)
            for text in _strings(answer):  # each string alone, as stored
                found = _secret_found(f"{base}/idempotency_records/{i}/body", text)
                if found:
                    problems += found
                    break
    for i, entry in enumerate(tenant.get("journal", [])):  # the keys the journal kept, as above
        problems += _secret_found(f"{base}/journal/{i}/idempotency_key", entry["idempotency_key"])
    return problems


def _propose_answer(body: str) -> dict[str, Any] | None:
    """A stored answer as the propose answer it must be, or None when it is none."""
    try:
        answer = parse_json_object(body)
    except InvalidJSONError:
        return None
    return None if schema_validator("propose-response.schema.json").errors(answer) else answer


def _proposal_problems(
    pointer: str, proposal: dict[str, Any], memories: dict[str, dict[str, Any]]
) -> list[dict[str, str]]:
    """An approved proposal names the memory version it made, of its tenant, and only an approved
    one does; what a proposal replaces is a version of a memory of its tenant, in the proposal's
    scope (SPEC 1.3: an approval would otherwise put the memory's next version, and so the memory,
    in front of whoever sees the proposal's scope)."""
    problems: list[dict[str, str]] = []
    memory, replaces = proposal["memory"], proposal["replaces"]
    if (memory is None) == (proposal["status"] == "approved"):
        detail = (
            "must name the memory an approved proposal made"
            if memory is None
            else "must be null unless approved"
        )
        problems.append({"pointer": f"{pointer}/memory", "detail": detail})
    elif memory is not None and not _holds_version(memories, memory["id"], memory["version"]):
        problems.append({"pointer": f"{pointer}/memory", "detail": "names no memory version of its tenant"})
    if replaces is not None and not _holds_version(memories, replaces["memory_id"], replaces["version"]):
        problems.append({"pointer": f"{pointer}/replaces", "detail": "names no memory version of its tenant"})
    elif replaces is not None and proposal["scope"] != memories[replaces["memory_id"]]["scope"]:
        problems.append(
            {"pointer": f"{pointer}/scope", "detail": "must equal the scope of the memory it replaces"}
        )
    return problems


def _ledger_problems(tenant: dict[str, Any], base: str) -> list[dict[str, str]]:
    """The ledger is each account's history: a charge takes one credit, each
    row's balance is the one before it plus its amount, and the last is the account's balance (a
    ledger that says otherwise would show, in the listing and the console's chart, balances the
    account never had)."""
    problems: list[dict[str, str]] = []
    last: dict[str, tuple[int, int]] = {}  # account → (row, balance after it)
    for i, entry in enumerate(tenant["ledger"]):
        here = f"{base}/ledger/{i}"
        if entry["operation"] != "admin_set" and entry["amount"] != -1:
            problems.append({"pointer": f"{here}/amount", "detail": "must be -1: a charge takes one credit"})
        before = last.get(entry["account"])
        if before is not None and entry["balance_after"] != before[1] + entry["amount"]:
            problems.append(
                {
                    "pointer": f"{here}/balance_after",
                    "detail": f"must be the balance after ledger/{before[0]} ({before[1]}) plus amount",
                }
            )
        last[entry["account"]] = (i, entry["balance_after"])
    for a, account in enumerate(tenant["accounts"]):
        held = last.get(account["id"])
        if held is not None and account["balance"] != held[1]:
            problems.append(
                {
                    "pointer": f"{base}/accounts/{a}/balance",
                    "detail": f"must be the balance after its last ledger row, ledger/{held[0]} ({held[1]})",
                }
            )
    return problems


def _holds_version(memories: dict[str, dict[str, Any]], memory_id: str, version: int) -> bool:
    return memory_id in memories and 1 <= version <= len(memories[memory_id]["versions"])


def _version_problems(pointer: str, memory: dict[str, Any]) -> list[dict[str, str]]:
    """A memory's versions are 1, 2, … in order; its current version is the last, active or
    deleted, and every earlier one superseded (what replacements, deletions and restores make: a
    memory with another history would break the next of them, or have two active versions)."""
    numbers = [version["version"] for version in memory["versions"]]
    if numbers != list(range(1, len(numbers) + 1)):
        return [{"pointer": f"{pointer}/versions", "detail": "must be versions 1, 2, … in order"}]
    if memory["version"] != numbers[-1]:
        return [{"pointer": f"{pointer}/version", "detail": f"must be the last version, {numbers[-1]}"}]
    *earlier, last = memory["versions"]
    problems = [
        {
            "pointer": f"{pointer}/versions/{v}/status",
            "detail": "must be superseded: a later version replaced it",
        }
        for v, version in enumerate(earlier)
        if version["status"] != "superseded"
    ]
    if last["status"] not in ("active", "deleted"):
        problems.append(
            {
                "pointer": f"{pointer}/versions/{len(earlier)}/status",
                "detail": "must be active or deleted: the current version is superseded by none",
            }
        )
    return problems


def restore_state(
    conn: sqlite3.Connection,
    document: Any,
    *,
    tenant: str | None = None,
    server_admin_token_sha256: str | None = None,
) -> None:
    """Replace the state (or one tenant's) with a snapshot, inside the caller's transaction: a
    refused document raises before the transaction commits, so nothing changes.

    A credential whose token hash is an admin token's (a tenant's, or the server's when its hash is
    given) is refused: an admin token is never a v1 token (SPEC 3.6)."""
    snapshot = validate(document)
    admin_tokens: dict[str, str | None] = {}
    # when each tenant was made: a tenant restoring itself keeps its own, a restore of the whole
    # state takes the snapshot's (a version 1 snapshot has none: the tenant is made now)
    created: dict[str, str | None] = {}
    places: dict[str, int] = {}
    before: tenancy.Incarnations = {}  # a restore of the whole state: the tenants it replaces
    if tenant is not None:
        others = [i for i, item in enumerate(snapshot["tenants"]) if item["id"] != tenant]
        if others:
            raise invalid_field(f"/tenants/{others[0]}/id", "names another tenant than the one restored")
        if not snapshot["tenants"]:
            raise invalid_field("/tenants", "must hold the tenant restored")
        _held_elsewhere(conn, snapshot["tenants"], tenant)
        # the tenant admin restoring its tenant keeps its token: the document's hash is not taken
        kept = store.tenant_rows(conn, "tenants", tenant)
        admin_tokens = {row["id"]: row["admin_token_sha256"] for row in kept}
        created = {row["id"]: row["created_at"] for row in kept}
        # and its place among the tenants (the listing's order and its cursors)
        places = {row["id"]: row["place"] for row in kept}
        clear_index(conn, tenant, drop=True)
        store.clear_tenant(conn, tenant)
    else:
        # The file keeps the seed it was made with (``fake-lucy serve`` checks it at start): a
        # restored state is the snapshot's, in a database that is still the seed's.
        seed_sha256 = applied_seed(conn)
        before = tenancy.incarnations(conn)
        for existing in before:
            clear_index(conn, existing, drop=True)
        store.clear_all(conn)
        frozen_us, offset_us = _clock_columns(snapshot["clocks"]["server"], "/clocks/server")
        store.write_server_row(
            conn,
            offset_us=offset_us,
            frozen_us=frozen_us,
            billing_available=snapshot["server"]["billing_available"],
            id_sequence=snapshot["server"]["id_sequence"],
            seed_sha256=seed_sha256,
        )
    server = store.server_row(conn)
    server_clock = (server["clock_frozen_us"], int(server["clock_offset_us"]))
    now = clock.now(conn)
    for t, item in enumerate(snapshot["tenants"]):
        base = f"/tenants/{t}"
        clock_columns = _clock_columns(item["clock"], f"{base}/clock") if "clock" in item else server_clock
        admin_token = admin_tokens.get(item["id"]) if tenant is not None else item.get("admin_token_sha256")
        _restore_tenant(
            conn,
            item,
            base,
            clock_columns=clock_columns,
            admin_token_sha256=admin_token,
            created_at=(created.get(item["id"]) if tenant is not None else item.get("created_at")) or now,
            place=places.get(item["id"]),
        )
    admin_hashes = store.admin_token_hashes(conn) | {server_admin_token_sha256, _BUILTIN_ADMIN_HASH} - {None}
    for t, item in enumerate(snapshot["tenants"]):
        if tenant is None and item.get("admin_token_sha256") in _BUILTIN_HASHES:
            raise invalid_field(
                f"/tenants/{t}/admin_token_sha256",
                "is the hash of a built-in token: public, so never a tenant's admin token",
            )
        for i, credential in enumerate(item["credentials"]):
            if credential["token_sha256"] in admin_hashes:
                raise invalid_field(
                    f"/tenants/{t}/credentials/{i}/token_sha256",
                    "is the hash of an admin token: a v1 credential's token is never an admin token",
                )
    tenancy.retire_replaced(conn, before)
    bump_auth_epoch(conn)
    server_state.bump_index_epoch(conn)
    # the state was replaced: a reset, to the snapshot's state (a live page reloads on it)
    events.emit(conn, "reset", {"snapshot": True}, at=clock.now(conn, tenant), tenant=tenant)


def _held_elsewhere(conn: sqlite3.Connection, documents: list[dict[str, Any]], tenant: str) -> None:
    """A tenant's restore brings no ledger or journal row naming a request that a row of another
    tenant names: request ids are server-wide, and the server's own snapshot (which a restore of the
    whole state checks so) must stay one it can restore."""
    problems: list[dict[str, str]] = []
    for t, document in enumerate(documents):
        for collection in ("ledger", "journal"):
            entries = document.get(collection, [])
            held = store.request_ids_elsewhere(conn, collection, tenant, [e["request_id"] for e in entries])
            problems.extend(
                {
                    "pointer": f"/tenants/{t}/{collection}/{i}/request_id",
                    "detail": f"is the request id of a {collection} row of another tenant",
                }
                for i, entry in enumerate(entries)
                if entry["request_id"] in held
            )
    if problems:
        raise invalid_request(problems[:100], "the snapshot is inconsistent")


def _clock_columns(written: dict[str, Any], pointer: str) -> tuple[int | None, int]:
    """The stored clock columns (frozen µs, offset µs) of a snapshot's clock (the server's or a
    tenant's): frozen at ``now``, or running with its offset; either way within the range the
    control API allows."""
    try:
        now_us = clock.parse_timestamp(written["now"])
    except ValueError:  # the schema's pattern takes 2031-02-30; the calendar does not
        raise invalid_field(f"{pointer}/now", "must be a real date and time") from None
    latest = clock.parse_timestamp(clock.LATEST)
    if written["frozen"]:
        if not 0 <= now_us <= latest:
            raise invalid_field(f"{pointer}/now", f"must be between 1970 and {clock.LATEST}")
        # a frozen clock's offset is not read until it runs again, which sets a new one; kept as
        # written so that a restored state exports the same document
        return now_us, int(written["offset_us"])
    # A running clock goes on where its snapshot left it: one set at the end of the range has run
    # past it since (the range holds what a clock is set to; the schema bounds the offset by it).
    offset_us = int(written["offset_us"])
    if clock.real_us() + offset_us < 0:
        raise invalid_field(f"{pointer}/offset_us", "must keep the clock after 1970")
    return None, offset_us


_BUILTIN_HASHES = frozenset(hash_token(token) for token in BUILTIN_TOKENS)
_BUILTIN_ADMIN_HASH = hash_token(DEFAULT_ADMIN_TOKEN)

# Per table, the columns a snapshot item holds under the same name; ``_restore_tenant`` spells out
# the others (renamed, nested or converted). Kept as a compact table (fmt: skip), not a name a line.
_SAME_NAMED = {
    "credentials": ("token_sha256", "builtin", "revoked"),
    "memory_versions": (
        "kind", "topic", "content", "importance", "status", "source", "updated_at", "approved_at"
    ),
    "proposals": (
        "id", "credential_id", "status", "kind", "topic", "content", "importance", "justification",
        "reason", "reason_detail", "source", "created_at", "updated_at", "expires_at", "decided_at",
    ),
    "idempotency_records": (
        "key", "body_sha256", "state", "original_request_id", "created_at", "expires_at", "in_flight_until"
    ),
    "ledger": ("request_id", "operation", "amount", "balance_after", "at"),
}  # fmt: skip


def _same_named(item: dict[str, Any], table: str) -> dict[str, Any]:
    return {name: item[name] for name in _SAME_NAMED[table]}


def _insert(
    conn: sqlite3.Connection,
    table: str,
    values: dict[str, Any],
    pointer: str,
    unique: dict[str, str] | None = None,
) -> int:
    """``unique``: the pointer of each other column that must be unique (a token hash), named when
    it is that column the row repeats."""
    try:
        return store.insert(conn, table, values)
    except sqlite3.IntegrityError as exc:
        repeated = str(exc).removeprefix("UNIQUE constraint failed: ")
        for column, at in (unique or {}).items():
            if repeated == f"{table}.{column}":
                raise invalid_field(at, "repeats a value that another item holds") from None
        raise invalid_field(
            pointer, "repeats an id (or an active topic of its scope) held elsewhere"
        ) from None


def _restore_tenant(
    conn: sqlite3.Connection,
    tenant: dict[str, Any],
    base: str,
    *,
    clock_columns: tuple[int | None, int],
    admin_token_sha256: str | None,
    created_at: str,
    place: int | None,
) -> None:
    tenant_id = tenant["id"]
    policy = tenant["policy"]
    frozen_us, offset_us = clock_columns
    _insert(
        conn,
        "tenants",
        {
            "id": tenant_id,
            "auto_approve": json.dumps(policy["auto_approve"]),
            "proposal_ttl_seconds": policy["proposal_ttl_seconds"],
            "rate_limit_per_minute": policy["rate_limit_per_minute"],
            "clock_offset_us": offset_us,
            "clock_frozen_us": frozen_us,
            "admin_token_sha256": admin_token_sha256,
            "first_credential_id": tenant.get("first_credential_id"),
            "initial_credits": tenant.get("initial_credits"),
            "created_at": created_at,
            "incarnation": new_incarnation(),
            **({} if place is None else {"rowid": place}),
        },
        f"{base}/id",
        unique={"admin_token_sha256": f"{base}/admin_token_sha256"},
    )
    create_index(conn, tenant_id)
    for i, account in enumerate(tenant["accounts"]):
        values = {"id": account["id"], "tenant_id": tenant_id, "balance": account["balance"]}
        _insert(conn, "accounts", values, f"{base}/accounts/{i}/id")
    for i, credential in enumerate(tenant["credentials"]):
        values = {
            **_same_named(credential, "credentials"),
            # built-in (public, refused off loopback) by its hash, whatever the document says
            "builtin": credential["token_sha256"] in _BUILTIN_HASHES,
            "id": credential["credential_id"],
            "tenant_id": tenant_id,
            "account_id": credential["account"],
            "user_id": credential["user"],
            "permissions": ",".join(credential["permissions"]),
            "scopes": json.dumps(credential["scopes"]),
        }
        pointer = f"{base}/credentials/{i}"
        _insert(
            conn,
            "credentials",
            values,
            f"{pointer}/credential_id",
            unique={"token_sha256": f"{pointer}/token_sha256"},
        )
    for i, memory in enumerate(tenant["memories"]):
        _restore_memory(conn, tenant_id, memory, f"{base}/memories/{i}")
    for i, proposal in enumerate(tenant["proposals"]):
        _insert(conn, "proposals", _proposal_row(tenant_id, proposal), f"{base}/proposals/{i}/id")
    for i, record in enumerate(tenant["idempotency_records"]):
        values = {
            **_same_named(record, "idempotency_records"),
            "account_id": record["account"],
            "status_code": record["status"],
            "response_body": None if record["body"] is None else record["body"].encode("utf-8"),
            "scope_kind": record["scope"]["kind"],
            "scope_id": record["scope"]["id"],
        }
        _insert(conn, "idempotency_records", values, f"{base}/idempotency_records/{i}/key")
    for i, entry in enumerate(tenant["ledger"]):
        values = {**_same_named(entry, "ledger"), "account_id": entry["account"], "tenant_id": tenant_id}
        _insert(conn, "ledger", values, f"{base}/ledger/{i}")
    for i, entry in enumerate(tenant.get("journal", [])):
        _insert(conn, "journal", {**entry, "tenant": tenant_id}, f"{base}/journal/{i}")
    journal.recount(conn, tenant_id)


def _restore_memory(conn: sqlite3.Connection, tenant: str, memory: dict[str, Any], pointer: str) -> None:
    current = memory["versions"][memory["version"] - 1]
    scope = Scope(memory["scope"]["kind"], memory["scope"]["id"])
    head = {
        "id": memory["id"],
        "tenant_id": tenant,
        "scope_kind": scope.kind,
        "scope_id": scope.id,
        "version": memory["version"],
        "created_at": memory["created_at"],
        **_same_named(current, "memory_versions"),
    }
    seq = _insert(conn, "memories", head, f"{pointer}/id")
    if memory["last_accessed_at"] is not None:
        store.insert(conn, "memory_access", {"seq": seq, "last_accessed_at": memory["last_accessed_at"]})
    for version in memory["versions"]:
        values = {
            **_same_named(version, "memory_versions"),
            "memory_id": memory["id"],
            "version": version["version"],
        }
        _insert(conn, "memory_versions", values, f"{pointer}/versions/{version['version'] - 1}")
    if current["status"] == "active":
        index_memory(conn, seq, tenant, scope, current["content"], current["topic"])


def _proposal_row(tenant: str, proposal: dict[str, Any]) -> dict[str, Any]:
    replaces = proposal["replaces"] or {}
    memory = proposal["memory"] or {}
    return {
        **_same_named(proposal, "proposals"),
        "tenant_id": tenant,
        "account_id": proposal["account"],
        "scope_kind": proposal["scope"]["kind"],
        "scope_id": proposal["scope"]["id"],
        "replaces_memory_id": replaces.get("memory_id"),
        "replaces_version": replaces.get("version"),
        "memory_id": memory.get("id"),
        "memory_version": memory.get("version"),
        "target_key": proposal["target"],
    }
