"""Typed, immutable results. Built only from response bodies that passed their schema in ``schemas/``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, cast

from lucy_memory._contract import FINAL_PROPOSAL_STATES

__all__ = [
    "FINAL_PROPOSAL_STATUSES",
    "Credits",
    "Memory",
    "MemoryRef",
    "MemoryVersionRef",
    "Proposal",
    "ProposalStatusResult",
    "ProposeResult",
    "RecallResult",
    "RecalledMemory",
    "Scope",
]

MemoryKind = Literal["preference", "identity", "fact", "decision", "rule", "brand_note", "editorial_decision"]
ProposalStatus = Literal["pending", "approved", "rejected", "expired", "superseded"]
MemoryStatus = Literal["active", "superseded", "deleted"]
FINAL_PROPOSAL_STATUSES: frozenset[str] = FINAL_PROPOSAL_STATES


def _time(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def _optional_time(value: str | None) -> datetime | None:
    return None if value is None else _time(value)


@dataclass(frozen=True, slots=True)
class Scope:
    kind: Literal["user", "workspace", "project"]
    id: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Scope:
        return cls(kind=data["kind"], id=data["id"])


@dataclass(frozen=True, slots=True)
class MemoryRef:
    """A memory version named by a proposal's ``replaces``."""

    memory_id: str
    version: int


@dataclass(frozen=True, slots=True)
class MemoryVersionRef:
    """The memory an approved proposal created or replaced."""

    id: str
    version: int


@dataclass(frozen=True, slots=True)
class Credits:
    charged: int
    remaining: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Credits:
        return cls(charged=int(data["charged"]), remaining=int(data["remaining"]))


def _memory_fields(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": data["id"],
        "version": int(data["version"]),
        "kind": data["kind"],
        "topic": data["topic"],
        "content": data["content"],
        "importance": int(data["importance"]),
        "scope": Scope.from_json(data["scope"]),
        "status": data["status"],
        "source": data["source"],
        "created_at": _time(data["created_at"]),
        "updated_at": _time(data["updated_at"]),
        "approved_at": _time(data["approved_at"]),
        "last_accessed_at": _optional_time(data["last_accessed_at"]),
    }


@dataclass(frozen=True, slots=True)
class Memory:
    """An approved, durable memory version."""

    id: str
    version: int
    kind: MemoryKind
    topic: str | None
    content: str
    importance: int
    scope: Scope
    status: MemoryStatus
    source: str | None
    created_at: datetime
    updated_at: datetime
    approved_at: datetime
    last_accessed_at: datetime | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Memory:
        return cls(**_memory_fields(data))


@dataclass(frozen=True, slots=True)
class RecalledMemory(Memory):
    """A memory as recall returns it, with its ``score`` (higher is better, ≥ 0)."""

    score: float

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RecalledMemory:
        return cls(**_memory_fields(data), score=float(data["score"]))


@dataclass(frozen=True, slots=True)
class Proposal:
    """A request to create or replace a memory; never recallable itself."""

    id: str
    status: ProposalStatus
    kind: MemoryKind
    topic: str | None
    content: str
    importance: int
    scope: Scope
    justification: str | None
    replaces: MemoryRef | None
    memory: MemoryVersionRef | None
    reason: str | None
    reason_detail: str | None
    source: str | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    decided_at: datetime | None

    @property
    def is_final(self) -> bool:
        """True once approved, rejected, expired or superseded (no later change)."""
        return self.status in FINAL_PROPOSAL_STATUSES

    @property
    def is_saved(self) -> bool:
        """True only when approved: a pending proposal is not saved or recallable."""
        return self.status == "approved"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Proposal:
        replaces = data["replaces"]
        memory = data["memory"]
        return cls(
            id=data["id"],
            status=cast(ProposalStatus, data["status"]),
            kind=data["kind"],
            topic=data["topic"],
            content=data["content"],
            importance=int(data["importance"]),
            scope=Scope.from_json(data["scope"]),
            justification=data["justification"],
            replaces=None if replaces is None else MemoryRef(replaces["memory_id"], int(replaces["version"])),
            memory=None if memory is None else MemoryVersionRef(memory["id"], int(memory["version"])),
            reason=data["reason"],
            reason_detail=data["reason_detail"],
            source=data["source"],
            created_at=_time(data["created_at"]),
            updated_at=_time(data["updated_at"]),
            expires_at=_time(data["expires_at"]),
            decided_at=_optional_time(data["decided_at"]),
        )


@dataclass(frozen=True, slots=True)
class RecallResult:
    memories: tuple[RecalledMemory, ...]
    request_id: str
    credits: Credits
    body: str = field(repr=False)
    """The v1 response body as received (JSON text)."""


@dataclass(frozen=True, slots=True)
class ProposeResult:
    """``replayed`` is True when the server answered from its idempotency store: the proposal then shows
    its status at creation time (poll ``proposal_status`` for the current one), ``request_id`` is this
    request's (``Lucy-Request-Id``), ``original_request_id`` the one that created it, and ``credits``
    describe this request (charged 0, the current balance).
    ``attempts`` counts the HTTP requests this call sent (retries included).
    ``recovered`` is True for a replay of what an earlier attempt of this call made: that attempt
    was executed and charged one credit, and its answer was an error (a 5xx after the commit), so
    the retry with the same key returned the proposal. The call then made one proposal and cost one
    credit, although ``credits`` (this request's) says 0."""

    proposal: Proposal
    request_id: str
    credits: Credits
    idempotency_key: str
    replayed: bool
    original_request_id: str | None
    attempts: int
    body: str = field(repr=False)
    recovered: bool = False


@dataclass(frozen=True, slots=True)
class ProposalStatusResult:
    proposal: Proposal
    request_id: str
    credits: Credits
    body: str = field(repr=False)
