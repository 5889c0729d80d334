"""Rows → the API's JSON objects (``schemas/memory.schema.json``, ``schemas/proposal.schema.json``)."""

from __future__ import annotations

import sqlite3
from typing import Any

__all__ = ["LAST_ACCESSED_AT", "MEMORY_COLUMNS", "PROPOSAL_COLUMNS", "memory_dict", "proposal_dict"]

# ``memories m``'s access time, kept in its own narrow table (see ``store.tables.MemoryAccess``).
LAST_ACCESSED_AT = "(SELECT a.last_accessed_at FROM memory_access a WHERE a.seq = m.seq) AS last_accessed_at"
MEMORY_COLUMNS = (
    "m.seq, m.id, m.tenant_id, m.scope_kind, m.scope_id, m.version, m.kind, m.topic, m.content,"
    " m.importance, m.status, m.source, m.created_at, m.updated_at, m.approved_at,"
    f" {LAST_ACCESSED_AT}"
)
PROPOSAL_COLUMNS = "p.*"


def memory_dict(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "version": row["version"],
        "kind": row["kind"],
        "topic": row["topic"],
        "content": row["content"],
        "importance": row["importance"],
        "scope": {"kind": row["scope_kind"], "id": row["scope_id"]},
        "status": row["status"],
        "source": row["source"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "approved_at": row["approved_at"],
        "last_accessed_at": row["last_accessed_at"],
    }


def proposal_dict(row: sqlite3.Row) -> dict[str, Any]:
    replaces = None
    if row["replaces_memory_id"] is not None:
        replaces = {"memory_id": row["replaces_memory_id"], "version": row["replaces_version"]}
    memory = None
    if row["memory_id"] is not None:
        memory = {"id": row["memory_id"], "version": row["memory_version"]}
    return {
        "id": row["id"],
        "status": row["status"],
        "kind": row["kind"],
        "topic": row["topic"],
        "content": row["content"],
        "importance": row["importance"],
        "scope": {"kind": row["scope_kind"], "id": row["scope_id"]},
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
    }
