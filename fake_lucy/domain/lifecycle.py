"""The proposal state machine and memory versions (SPEC 1.3).

```
pending ──approve (reviewer or auto-memory policy)──▶ approved
pending ──reject (reviewer, or server policy)───────▶ rejected
pending ──now ≥ expires_at──────────────────────────▶ expired
pending ──another proposal for the same target──────▶ superseded
pending ──its target memory deleted─────────────────▶ superseded (target_deleted)
```
Every function runs inside the caller's write transaction and either completes or raises.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from fake_lucy.domain import events
from fake_lucy.domain.epochs import bump_index_epoch
from fake_lucy.domain.errors import DomainError, invalid_field
from fake_lucy.domain.ids import IdFactory
from fake_lucy.domain.principals import Principal, Scope, scope_tag
from fake_lucy.store import queries
from fake_lucy.store.numbering import next_seq
from fake_lucy.store.records import MemoryRecord, ProposalRecord
from fake_lucy.store.schema import fts_ddl, fts_table
from lucy_memory._contract import FINAL_PROPOSAL_STATES as FINAL_STATES

__all__ = [
    "FINAL_STATES",
    "Placeholder",
    "ProposalPlan",
    "VersionContent",
    "approve",
    "clear_index",
    "create_index",
    "create_memory",
    "create_proposal",
    "delete_memory",
    "expire",
    "expire_due",
    "index_memory",
    "load_proposal",
    "plan_proposal",
    "reject",
    "require_deletable",
    "restore_memory",
    "secret_plan",
    "visible_proposal",
]

_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class VersionContent:
    """What one version of a memory says, in the column order of ``memories`` and ``memory_versions``."""

    kind: str
    topic: str | None
    content: str
    importance: int
    source: str | None

    @classmethod
    def of(cls, record: ProposalRecord) -> VersionContent:
        return cls(record.kind, record.topic, record.content, record.importance, record.source)

    def values(self) -> tuple[str, str | None, str, int, str | None]:
        return (self.kind, self.topic, self.content, self.importance, self.source)


@dataclass(frozen=True, slots=True)
class Placeholder:
    """What a secret-looking proposal stores instead of its text."""

    text: str


_NEXT_PROPOSAL = next_seq("proposals")  # a proposal's row number, never one a deleted row held


def expire_due(conn: sqlite3.Connection, tenant: str, now: str) -> None:
    """Persist the effective status: every pending proposal of ``tenant`` past ``expires_at``
    (``now`` is the tenant's clock) becomes expired."""
    expired = conn.execute(
        "UPDATE proposals SET status = 'expired', reason = 'expired',"
        " decided_at = expires_at, updated_at = expires_at"
        " WHERE status = 'pending' AND expires_at <= ? AND tenant_id = ? RETURNING id",
        (now, tenant),
    ).fetchall()
    for (proposal_id,) in expired:
        _decided(conn, proposal_id, tenant, "expired", "expiry", now=now)


def _decided(
    conn: sqlite3.Connection,
    proposal_id: str,
    tenant: str,
    status: str,
    decided_by: str,
    *,
    now: str,
    memory: tuple[str, int] | None = None,
) -> None:
    data = {
        "proposal_id": proposal_id,
        "status": status,
        "decided_by": decided_by,
        "memory": None if memory is None else {"id": memory[0], "version": memory[1]},
    }
    events.emit(conn, "proposal.decided", data, at=now, tenant=tenant)


def _memory_changed(
    conn: sqlite3.Connection, memory_id: str, version: int, change: str, *, tenant: str, now: str
) -> None:
    data = {"memory_id": memory_id, "version": version, "change": change}
    events.emit(conn, "memory.changed", data, at=now, tenant=tenant)


def _active_topic_owner(conn: sqlite3.Connection, tenant: str, scope: Scope, topic: str) -> str | None:
    """The id of the active memory of ``scope`` that holds ``topic``, if any."""
    owner = queries.active_topic_owner(conn, tenant, scope.kind, scope.id, topic)
    return None if owner is None else owner[0]


def _topic_target(tenant: str, scope: Scope, topic: str) -> str:
    return "t:" + json.dumps([tenant, scope.kind, scope.id, topic])


def _require_version(head: MemoryRecord, expected: int) -> None:
    """A replacement must name the memory's active version (else ``version_conflict``)."""
    if head.version != expected:
        # the number given is in the details alone: a detail never echoes an input value (SPEC 1.5)
        never = f"a version the memory never had (its active version is {head.version})"
        raise DomainError(
            "version_conflict",
            "the replacement names "
            + ("a version that is no longer the active one" if expected < head.version else never),
            # a JSON 1.0 is the integer 1 (SPEC 1.1): the details say it as an integer
            details={
                "memory_id": head.id,
                "expected_version": int(expected),
                "current_version": head.version,
            },
        )


def _topic_conflict(memory_id: str | None = None) -> DomainError:
    # SPEC 2.2 lists no details for topic_conflict, so the holder's id (an id, never an input value)
    # goes into the sentence.
    holder = f" ({memory_id})" if memory_id else ""
    return DomainError(
        "topic_conflict", f"another active memory in this scope{holder} already has this topic"
    )


@dataclass(frozen=True, slots=True)
class ProposalPlan:
    """What a valid proposal will store: the resolved topic, replacement and target."""

    scope: Scope
    topic: str | None
    replaces_id: str | None
    replaces_version: int | None
    target_key: str | None


def plan_proposal(conn: sqlite3.Connection, principal: Principal, body: dict[str, Any]) -> ProposalPlan:
    """Step 11 for a propose: scope visibility, then the replacement and topic rules.

    Raises ``scope_forbidden``, ``memory_not_found``, ``version_conflict``, ``topic_conflict``
    or ``invalid_request`` (scope differs from the replaced memory's).
    """
    scope = Scope(kind=body["scope"]["kind"], id=body["scope"]["id"])
    if not principal.sees(scope):
        raise DomainError("scope_forbidden", "the credential cannot see this scope")
    tenant = principal.tenant_id
    topic: str | None = body.get("topic", _UNSET)
    replaces = body.get("replaces")
    if replaces is not None:
        head = _replaced_head(conn, principal, scope, replaces)
        if topic is _UNSET:
            topic = head.topic
        elif topic is not None and topic != head.topic:
            owner = _active_topic_owner(conn, tenant, scope, topic)
            if owner is not None and owner != head.id:
                raise _topic_conflict(owner)
        return ProposalPlan(scope, topic, head.id, head.version, "m:" + head.id)
    if topic is _UNSET or topic is None:
        return ProposalPlan(scope, None, None, None, None)
    holder = queries.active_topic_owner(conn, tenant, scope.kind, scope.id, topic)
    if holder is not None:  # topic upsert: replace that memory's current version
        holder_id, holder_version = holder
        return ProposalPlan(scope, topic, holder_id, holder_version, "m:" + holder_id)
    return ProposalPlan(scope, topic, None, None, _topic_target(tenant, scope, topic))


def _replaced_head(
    conn: sqlite3.Connection, principal: Principal, scope: Scope, replaces: dict[str, Any]
) -> MemoryRecord:
    """The memory ``replaces`` names, checked: visible and active, that version, the same scope."""
    head = queries.memory_head(conn, replaces["memory_id"], tenant=principal.tenant_id)
    if head is None or head.status == "deleted" or not principal.sees(Scope(head.scope_kind, head.scope_id)):
        raise DomainError("memory_not_found", "no visible active memory has this id")
    _require_version(head, replaces["version"])
    if (head.scope_kind, head.scope_id) != (scope.kind, scope.id):
        raise invalid_field("/scope", "must equal the scope of the replaced memory")
    return head


def secret_plan(conn: sqlite3.Connection, principal: Principal, body: dict[str, Any]) -> ProposalPlan:
    """Step 11 for a secret-looking propose: the scope and the ``replaces`` rules, which it keeps;
    no topic upsert, topic conflict or competition target (it is stored rejected)."""
    scope = Scope(kind=body["scope"]["kind"], id=body["scope"]["id"])
    if not principal.sees(scope):
        raise DomainError("scope_forbidden", "the credential cannot see this scope")
    replaces = body.get("replaces")
    if replaces is None:
        return ProposalPlan(scope, None, None, None, None)
    head = _replaced_head(conn, principal, scope, replaces)
    return ProposalPlan(scope, None, head.id, head.version, None)


def create_proposal(
    conn: sqlite3.Connection,
    ids: IdFactory,
    principal: Principal,
    body: dict[str, Any],
    plan: ProposalPlan,
    *,
    now: str,
    expires_at: str,
    source: str | None,
    secret: Placeholder | None,
) -> ProposalRecord:
    """Step 13 for a propose: store it; auto-approve it when the tenant's policy says so.

    ``secret`` is set when the secret policy matched: the proposal is stored already rejected,
    with its text replaced before anything is written, and never auto-approved.
    """
    topic, target_key = plan.topic, plan.target_key
    content: str = body["content"]
    justification: str | None = body.get("justification")
    status, reason, decided_at = "pending", None, None
    if secret is not None:
        content, topic = secret.text, None
        justification = None if justification is None else secret.text
        status, reason, decided_at = "rejected", "secret_detected", now
        target_key = None
    proposal_id = ids.new(conn, "prop")
    row = conn.execute(
        "INSERT INTO proposals (seq, id, tenant_id, account_id, credential_id, status, kind, topic,"  # noqa: S608 - constant SQL
        " content, importance, scope_kind, scope_id, justification, replaces_memory_id,"
        " replaces_version, reason, source, created_at, updated_at, expires_at, decided_at,"
        f" target_key) VALUES ({_NEXT_PROPOSAL}, {', '.join('?' * 21)})"
        " RETURNING *",  # the row as stored (its defaults too): no read back
        (
            proposal_id,
            principal.tenant_id,
            principal.account_id,
            principal.credential_id,
            status,
            body["kind"],
            topic,
            content,
            int(body.get("importance", 5)),
            plan.scope.kind,
            plan.scope.id,
            justification,
            plan.replaces_id,
            plan.replaces_version,
            reason,
            source,
            now,
            now,
            expires_at,
            decided_at,
            target_key,
        ),
    ).fetchone()
    record = ProposalRecord.from_row(row)
    created = {
        "proposal_id": proposal_id,
        "status": status,
        "kind": record.kind,
        "scope": {"kind": record.scope_kind, "id": record.scope_id},
        "account": record.account_id,
        "credential_id": record.credential_id,
    }
    events.emit(conn, "proposal.created", created, at=now, tenant=record.tenant_id)
    if secret is not None:
        _decided(conn, proposal_id, record.tenant_id, status, "policy", now=now)
    elif _auto_approves(principal.auto_approve, body["kind"]):
        return approve(conn, ids, record, now=now, decided_by="policy")
    return record


@functools.lru_cache(maxsize=256)
def _auto_approves(policy_json: str, kind: str) -> bool:
    """Whether the tenant's auto-approve policy (its stored JSON) approves this kind at once."""
    policy = json.loads(policy_json)
    if policy == "all":
        return True
    return isinstance(policy, list) and kind in policy


def load_proposal(conn: sqlite3.Connection, proposal_id: str) -> ProposalRecord:
    record = queries.proposal(conn, proposal_id)
    if record is None:
        raise DomainError("not_found", "no proposal has this id")
    return record


def visible_proposal(conn: sqlite3.Connection, principal: Principal, proposal_id: str) -> ProposalRecord:
    """A proposal as its proposer sees it (SPEC 1.4): the same account and a visible scope."""
    record = queries.proposal(conn, proposal_id)
    if (
        record is None
        or record.account_id != principal.account_id
        or not principal.sees(Scope(record.scope_kind, record.scope_id))
    ):
        raise DomainError("not_found", "no proposal with this id is visible to the caller")
    return record


def _require_pending(record: ProposalRecord, action: str) -> None:
    if record.status != "pending":
        raise DomainError(
            "invalid_transition",
            f"the proposal is {record.status} already: a proposal in a final state cannot be {action}",
            details={"status": record.status},
        )


# Every write to a full-text index (one per tenant, ``store.schema.fts_table``) goes through these
# three, which also change the index epoch (the memories rows a recall returns change only together
# with the index).
def _insert_fts(
    conn: sqlite3.Connection, seq: int, tenant: str, scope: Scope, text: str, topic: str | None
) -> None:
    conn.execute(
        f"INSERT INTO {fts_table(tenant)} (rowid, scope_tag, content, topic) VALUES (?, ?, ?, ?)",  # noqa: S608 - a digest name
        (seq, scope_tag(tenant, scope), text, (topic or "").replace("-", " ")),
    )
    bump_index_epoch(conn)


# A restored snapshot (``domain.snapshot``) indexes its active memories the same way.
index_memory = _insert_fts


def _delete_fts(conn: sqlite3.Connection, tenant: str, seq: int) -> None:
    conn.execute(f"DELETE FROM {fts_table(tenant)} WHERE rowid = ?", (seq,))  # noqa: S608 - a digest name
    bump_index_epoch(conn)


def create_index(conn: sqlite3.Connection, tenant: str) -> None:
    """``tenant``'s full-text table, empty, unless it exists (a restored snapshot's tenant)."""
    conn.execute(fts_ddl(tenant))


def clear_index(conn: sqlite3.Connection, tenant: str, *, drop: bool = False) -> None:
    """Empty ``tenant``'s full-text index (a reset), or ``drop`` it (the tenant is deleted)."""
    table = fts_table(tenant)
    conn.execute(f"DROP TABLE IF EXISTS {table}" if drop else f"DELETE FROM {table}")  # noqa: S608 - a digest name
    bump_index_epoch(conn)


def approve(
    conn: sqlite3.Connection, ids: IdFactory, record: ProposalRecord, *, now: str, decided_by: str = "admin"
) -> ProposalRecord:
    """Approve a pending proposal: a new memory (version 1) or version n+1 of its target."""
    _require_pending(record, "approved")
    if record.replaces_memory_id is not None:
        memory_id, version = _approve_replacement(conn, record, record.replaces_memory_id, now=now)
        change = "superseded"
    else:
        memory_id, version = _approve_new(conn, ids, record, now=now)
        change = "created"
    conn.execute(
        "UPDATE proposals SET status = 'approved', memory_id = ?, memory_version = ?,"
        " decided_at = ?, updated_at = ? WHERE id = ?",
        (memory_id, version, now, now, record.id),
    )
    _memory_changed(conn, memory_id, version, change, tenant=record.tenant_id, now=now)
    _decided(conn, record.id, record.tenant_id, "approved", decided_by, now=now, memory=(memory_id, version))
    _supersede_competitors(conn, record, memory_id, version, now)
    return load_proposal(conn, record.id)


def _approve_replacement(
    conn: sqlite3.Connection, record: ProposalRecord, memory_id: str, *, now: str
) -> tuple[str, int]:
    """Version n+1 of the replaced memory becomes active and version n superseded."""
    tenant = record.tenant_id
    scope = Scope(record.scope_kind, record.scope_id)
    head = queries.memory_head(conn, memory_id, tenant=tenant)
    if head is None or head.status != "active":
        raise DomainError("memory_not_found", "the memory this proposal replaces is gone")
    assert record.replaces_version is not None  # stored together with replaces_memory_id
    _require_version(head, record.replaces_version)
    if record.topic is not None:
        owner = _active_topic_owner(conn, tenant, scope, record.topic)
        if owner is not None and owner != head.id:
            raise _topic_conflict(owner)
    version = head.version + 1
    conn.execute(
        "UPDATE memory_versions SET status = 'superseded' WHERE memory_id = ? AND version = ?",
        (memory_id, head.version),
    )
    content = VersionContent.of(record)
    conn.execute(
        "UPDATE memories SET version = ?, kind = ?, topic = ?, content = ?, importance = ?,"
        " source = ?, updated_at = ?, approved_at = ? WHERE seq = ?",
        (version, *content.values(), now, now, head.seq),
    )
    _delete_fts(conn, tenant, head.seq)
    _insert_fts(conn, head.seq, tenant, scope, record.content, record.topic)
    _insert_version(conn, memory_id, version, content, now)
    return memory_id, version


def _approve_new(
    conn: sqlite3.Connection, ids: IdFactory, record: ProposalRecord, *, now: str
) -> tuple[str, int]:
    """Version 1 of a new memory; its topic must be free in its scope."""
    scope = Scope(record.scope_kind, record.scope_id)
    if (
        record.topic is not None
        and _active_topic_owner(conn, record.tenant_id, scope, record.topic) is not None
    ):
        raise _topic_conflict()
    memory_id = create_memory(
        conn, ids, tenant=record.tenant_id, scope=scope, content=VersionContent.of(record), now=now
    )
    return memory_id, 1


def _supersede_competitors(
    conn: sqlite3.Connection, record: ProposalRecord, memory_id: str, version: int, now: str
) -> None:
    if record.target_key is None:
        return
    superseded = conn.execute(
        "UPDATE proposals SET status = 'superseded', reason = 'superseded', reason_detail = ?,"
        " decided_at = ?, updated_at = ? WHERE target_key = ? AND status = 'pending' AND tenant_id = ?"
        " RETURNING id",
        (
            f"superseded by proposal {record.id}, approved as {memory_id} version {version}",
            now,
            now,
            record.target_key,
            record.tenant_id,  # a target is the tenant's own (a restored snapshot may say otherwise)
        ),
    ).fetchall()
    for (proposal_id,) in superseded:
        _decided(conn, proposal_id, record.tenant_id, "superseded", "supersession", now=now)


def create_memory(
    conn: sqlite3.Connection, ids: IdFactory, *, tenant: str, scope: Scope, content: VersionContent, now: str
) -> str:
    """Insert version 1 of a new active memory (an approval, or a seed's pre-approved memory)."""
    memory_id = ids.new(conn, "mem")
    (seq,) = conn.execute(
        "INSERT INTO memories (id, tenant_id, scope_kind, scope_id, version, kind, topic,"
        " content, importance, source, status, created_at, updated_at, approved_at)"
        " VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?, 'active', ?, ?, ?) RETURNING seq",
        (memory_id, tenant, scope.kind, scope.id, *content.values(), now, now, now),
    ).fetchone()
    _insert_fts(conn, seq, tenant, scope, content.content, content.topic)
    _insert_version(conn, memory_id, 1, content, now)
    return memory_id


def _insert_version(
    conn: sqlite3.Connection, memory_id: str, version: int, content: VersionContent, now: str
) -> None:
    conn.execute(
        "INSERT INTO memory_versions (memory_id, version, kind, topic, content, importance, source,"
        " status, updated_at, approved_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'active', ?, ?)",
        (memory_id, version, *content.values(), now, now),
    )


def reject(
    conn: sqlite3.Connection, record: ProposalRecord, *, now: str, reason_detail: str | None
) -> ProposalRecord:
    return _decide(conn, record, "rejected", "rejected_by_reviewer", reason_detail, now=now)


def expire(conn: sqlite3.Connection, record: ProposalRecord, *, now: str) -> ProposalRecord:
    """Expire now (an administrator's shortcut): ``expires_at = decided_at = now``."""
    return _decide(conn, record, "expired", "expired", None, now=now)


def _decide(
    conn: sqlite3.Connection,
    record: ProposalRecord,
    status: str,
    reason: str,
    reason_detail: str | None,
    *,
    now: str,
) -> ProposalRecord:
    """A pending proposal to a final state without a memory (an early expiry moves ``expires_at``)."""
    _require_pending(record, status)
    expires_at = now if status == "expired" else record.expires_at
    conn.execute(
        "UPDATE proposals SET status = ?, reason = ?, reason_detail = ?, expires_at = ?,"
        " decided_at = ?, updated_at = ? WHERE id = ?",
        (status, reason, reason_detail, expires_at, now, now, record.id),
    )
    _decided(conn, record.id, record.tenant_id, status, "admin", now=now)
    return load_proposal(conn, record.id)


def _load_memory(conn: sqlite3.Connection, memory_id: str) -> MemoryRecord:
    head = queries.memory_head(conn, memory_id)
    if head is None:
        raise DomainError("not_found", "no memory has this id")
    return head


def require_deletable(head: MemoryRecord) -> None:
    """Only an active memory can be deleted (``invalid_transition`` naming its status)."""
    if head.status != "active":
        raise DomainError(
            "invalid_transition", "only an active memory can be deleted", details={"status": head.status}
        )


def delete_memory(conn: sqlite3.Connection, memory_id: str, *, now: str) -> MemoryRecord:
    """Administrative delete: not recallable; pending proposals that target it are superseded."""
    head = _load_memory(conn, memory_id)
    require_deletable(head)
    expire_due(conn, head.tenant_id, now)  # one past its expiry is expired, not superseded by this
    conn.execute("UPDATE memories SET status = 'deleted' WHERE seq = ?", (head.seq,))
    conn.execute(
        "UPDATE memory_versions SET status = 'deleted' WHERE memory_id = ? AND version = ?",
        (memory_id, head.version),
    )
    _delete_fts(conn, head.tenant_id, head.seq)
    _memory_changed(conn, memory_id, head.version, "deleted", tenant=head.tenant_id, now=now)
    superseded = conn.execute(
        "UPDATE proposals SET status = 'superseded', reason = 'target_deleted',"
        " reason_detail = ?, decided_at = ?, updated_at = ? WHERE target_key = ? AND status = 'pending'"
        " AND tenant_id = ? RETURNING id",
        (f"memory {memory_id} was deleted by an administrator", now, now, "m:" + memory_id, head.tenant_id),
    ).fetchall()
    for (proposal_id,) in superseded:
        _decided(conn, proposal_id, head.tenant_id, "superseded", "supersession", now=now)
    return _load_memory(conn, memory_id)


def restore_memory(conn: sqlite3.Connection, memory_id: str, *, now: str) -> MemoryRecord:
    head = _load_memory(conn, memory_id)
    if head.status != "deleted":
        raise DomainError(
            "invalid_transition", "only a deleted memory can be restored", details={"status": head.status}
        )
    scope = Scope(head.scope_kind, head.scope_id)
    if head.topic is not None and _active_topic_owner(conn, head.tenant_id, scope, head.topic):
        raise _topic_conflict()
    conn.execute("UPDATE memories SET status = 'active' WHERE seq = ?", (head.seq,))
    conn.execute(
        "UPDATE memory_versions SET status = 'active' WHERE memory_id = ? AND version = ?",
        (memory_id, head.version),
    )
    _insert_fts(conn, head.seq, head.tenant_id, scope, head.content, head.topic)
    _memory_changed(conn, memory_id, head.version, "restored", tenant=head.tenant_id, now=now)
    return _load_memory(conn, memory_id)
