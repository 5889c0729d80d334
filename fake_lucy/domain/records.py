"""Records → the API's JSON objects (``schemas/memory.schema.json``, ``schemas/proposal.schema.json``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from fake_lucy.store.records import (
    JOURNAL_COLUMNS,
    RANKED_MEMORY_POSITIONS,
    JournalRow,
    LedgerRecord,
    MemoryRecord,
    ProposalRecord,
    TenantSummary,
)

__all__ = [
    "control_memory_dict",
    "control_proposal_dict",
    "journal_dict",
    "ledger_dict",
    "memory_dict",
    "proposal_dict",
    "ranked_memory_dict",
    "tenant_dict",
]


def _memory(get: Callable[[str], Any]) -> dict[str, Any]:
    return {
        "id": get("id"),
        "version": get("version"),
        "kind": get("kind"),
        "topic": get("topic"),
        "content": get("content"),
        "importance": get("importance"),
        "scope": {"kind": get("scope_kind"), "id": get("scope_id")},
        "status": get("status"),
        "source": get("source"),
        "created_at": get("created_at"),
        "updated_at": get("updated_at"),
        "approved_at": get("approved_at"),
        "last_accessed_at": get("last_accessed_at"),
    }


def memory_dict(record: MemoryRecord) -> dict[str, Any]:
    return _memory(functools.partial(getattr, record))


_R = RANKED_MEMORY_POSITIONS
_ID, _VERSION, _KIND, _TOPIC, _CONTENT = (_R[n] for n in ("id", "version", "kind", "topic", "content"))
_IMPORTANCE, _SCOPE_KIND, _SCOPE_ID = (_R[n] for n in ("importance", "scope_kind", "scope_id"))
_STATUS, _SOURCE, _CREATED, _UPDATED = (_R[n] for n in ("status", "source", "created_at", "updated_at"))
_APPROVED, _ACCESSED = _R["approved_at"], _R["last_accessed_at"]


def ranked_memory_dict(row: tuple[Any, ...]) -> dict[str, Any]:
    """``memory_dict`` of a plain row of ``RANKED_MEMORY_COLUMNS``, by position: recall's hot path,
    where a record, or a lookup by name per field, would cost a measurable share of the answer."""
    return {
        "id": row[_ID],
        "version": row[_VERSION],
        "kind": row[_KIND],
        "topic": row[_TOPIC],
        "content": row[_CONTENT],
        "importance": row[_IMPORTANCE],
        "scope": {"kind": row[_SCOPE_KIND], "id": row[_SCOPE_ID]},
        "status": row[_STATUS],
        "source": row[_SOURCE],
        "created_at": row[_CREATED],
        "updated_at": row[_UPDATED],
        "approved_at": row[_APPROVED],
        "last_accessed_at": row[_ACCESSED],
    }


def proposal_dict(record: ProposalRecord) -> dict[str, Any]:
    replaces = None
    if record.replaces_memory_id is not None:
        replaces = {"memory_id": record.replaces_memory_id, "version": record.replaces_version}
    memory = None
    if record.memory_id is not None:
        memory = {"id": record.memory_id, "version": record.memory_version}
    return {
        "id": record.id,
        "status": record.status,
        "kind": record.kind,
        "topic": record.topic,
        "content": record.content,
        "importance": record.importance,
        "scope": {"kind": record.scope_kind, "id": record.scope_id},
        "justification": record.justification,
        "replaces": replaces,
        "memory": memory,
        "reason": record.reason,
        "reason_detail": record.reason_detail,
        "source": record.source,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "expires_at": record.expires_at,
        "decided_at": record.decided_at,
    }


def control_proposal_dict(record: ProposalRecord) -> dict[str, Any]:
    """The control API's proposal (``schemas/control-proposal.schema.json``): the v1 object, with
    its tenant and the credential that proposed it (a server admin sees every tenant's)."""
    return {**proposal_dict(record), "tenant": record.tenant_id, "credential_id": record.credential_id}


def control_memory_dict(record: MemoryRecord) -> dict[str, Any]:
    """The control API's memory version (``schemas/control-memory.schema.json``): with its tenant."""
    return {**memory_dict(record), "tenant": record.tenant_id}


def journal_dict(record: JournalRow) -> dict[str, Any]:
    return dict(zip(JOURNAL_COLUMNS, record.values(), strict=True))


def ledger_dict(record: LedgerRecord) -> dict[str, Any]:
    return {
        "request_id": record.request_id,
        "account": record.account_id,
        "tenant": record.tenant_id,
        "operation": record.operation,
        "amount": record.amount,
        "balance_after": record.balance_after,
        "at": record.at,
    }


def tenant_dict(summary: TenantSummary) -> dict[str, Any]:
    return {
        "tenant": summary.id,
        "created_at": summary.created_at,
        "tenant_admin": summary.tenant_admin,
        "credentials": summary.credentials,
        "memories": summary.memories,
        "pending_proposals": summary.pending_proposals,
    }
