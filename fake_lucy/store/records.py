"""Typed records at the store boundary: a row becomes a frozen dataclass here, once.

The domain passes these instead of ``sqlite3.Row`` so that ``mypy --strict`` sees every column.
Only the recall hot path (``domain.recall``) keeps raw rows, where building objects per memory
would cost a measurable share of a ranked answer (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import operator
import sqlite3
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    R = TypeVar("R", bound=DataclassInstance)
else:
    R = TypeVar("R")

_FIELD_NAMES: dict[type[Any], tuple[str, ...]] = {}
# Where each field of a record is in a row of given column names (a query's shape is fixed).
_POSITIONS: dict[tuple[type[Any], tuple[str, ...]], tuple[int, ...]] = {}


def record_from_row(cls: type[R], row: sqlite3.Row, **converted: Any) -> R:
    """A record read back: each field from the row's column of its name, but for ``converted``,
    the fields whose stored form differs (a JSON list, a flag stored as 0 or 1), given ready."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    if not converted:  # the common case, on the hot path (a status call reads its proposal):
        # by position, the positions found once per query shape: ``row[name]`` compares the name
        # with each column's in turn, and a proposal has 25
        shape = (cls, tuple(row.keys()))
        positions = _POSITIONS.get(shape)
        if positions is None:
            positions = _POSITIONS[shape] = tuple(shape[1].index(name) for name in names)
        return cls(*[row[n] for n in positions])  # positional: half the cost of keywords
    return cls(**{name: row[name] for name in names if name not in converted}, **converted)


__all__ = [
    "JOURNAL_COLUMNS",
    "LAST_ACCESSED_AT",
    "MEMORY_COLUMNS",
    "RANKED_MEMORY_COLUMNS",
    "RANKED_MEMORY_POSITIONS",
    "VERSION_COLUMNS",
    "JournalRow",
    "LedgerRecord",
    "MemoryRecord",
    "ProposalRecord",
    "TenantPolicy",
    "TenantSummary",
]

# ``memories m``'s access time, kept in its own narrow table (see ``store.tables.MemoryAccess``).
LAST_ACCESSED_AT = "(SELECT a.last_accessed_at FROM memory_access a WHERE a.seq = m.seq) AS last_accessed_at"
_HEAD_COLUMNS = (
    "m.seq, m.id, m.tenant_id, m.scope_kind, m.scope_id, m.version, m.kind, m.topic, m.content,"
    " m.importance, m.status, m.source, m.created_at, m.updated_at, m.approved_at"
)
# The columns of ``MemoryRecord`` read from a memory's head (``memories m``).
MEMORY_COLUMNS = f"{_HEAD_COLUMNS}, {LAST_ACCESSED_AT}"
# The same for a memory a recall ranks: its answer carries the recall's own time as the access
# time (it is stamped after the ranking), so the stored one is not read (one lookup a memory less).
RANKED_MEMORY_COLUMNS = f"{_HEAD_COLUMNS}, NULL AS last_accessed_at"
# Each of their names' position in a plain (tuple) row.
RANKED_MEMORY_POSITIONS = {
    name: n
    for n, name in enumerate(
        (*(column.strip().removeprefix("m.") for column in _HEAD_COLUMNS.split(",")), "last_accessed_at")
    )
}
# The columns of ``MemoryRecord`` read from one version (``memory_versions v``) of a memory ``m``.
VERSION_COLUMNS = (
    f"m.seq, m.id, m.tenant_id, m.scope_kind, m.scope_id, m.created_at, {LAST_ACCESSED_AT},"
    " v.version, v.kind, v.topic, v.content, v.importance, v.status, v.source, v.updated_at,"
    " v.approved_at"
)


@dataclass(frozen=True, slots=True)
class ProposalRecord:
    """One row of ``proposals``."""

    seq: int
    id: str
    tenant_id: str
    account_id: str
    credential_id: str
    status: str
    kind: str
    topic: str | None
    content: str
    importance: int
    scope_kind: str
    scope_id: str
    justification: str | None
    replaces_memory_id: str | None
    replaces_version: int | None
    memory_id: str | None
    memory_version: int | None
    reason: str | None
    reason_detail: str | None
    source: str | None
    created_at: str
    updated_at: str
    expires_at: str
    decided_at: str | None
    target_key: str | None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> ProposalRecord:
        return record_from_row(cls, row)


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """A memory version: the head's identity and scope with one version's fields.

    ``seq`` is the head's full-text rowid.
    """

    seq: int
    id: str
    tenant_id: str
    scope_kind: str
    scope_id: str
    version: int
    kind: str
    topic: str | None
    content: str
    importance: int
    status: str
    source: str | None
    created_at: str
    updated_at: str
    approved_at: str
    last_accessed_at: str | None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> MemoryRecord:
        return record_from_row(cls, row)


@dataclass(slots=True)
class JournalRow:
    """One journal item (SPEC 3.5), declared here once: the v1 pipeline fills one in as a request
    proceeds and ``domain.journal`` writes it; the control API lists rows read back with
    ``from_row``. Its fields are the ``journal`` table's columns besides ``seq``."""

    request_id: str
    at: str
    operation: str
    credential_id: str
    tenant: str
    idempotency_key: str | None
    retry_attempt: int
    body_sha256: str
    status: int | None = None
    charged: bool = False
    replayed: bool = False
    dropped: bool = False
    fault_id: str | None = None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> JournalRow:
        flags = ("charged", "replayed", "dropped")
        return record_from_row(cls, row, **{flag: bool(row[flag]) for flag in flags})

    def values(self) -> tuple[Any, ...]:
        """The fields' values in ``JOURNAL_COLUMNS`` order (once per request: one C call)."""
        values: tuple[Any, ...] = _JOURNAL_VALUES(self)
        return values


JOURNAL_COLUMNS = tuple(f.name for f in fields(JournalRow))
_JOURNAL_VALUES = operator.attrgetter(*JOURNAL_COLUMNS)


@dataclass(frozen=True, slots=True)
class LedgerRecord:
    request_id: str
    account_id: str
    tenant_id: str
    operation: str
    amount: int
    balance_after: int
    at: str

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> LedgerRecord:
        return record_from_row(cls, row)


@dataclass(frozen=True, slots=True)
class TenantPolicy:
    """A tenant's policy (SPEC 3.2); ``auto_approve`` is "off", "all" or a list of kinds."""

    auto_approve: Any
    proposal_ttl_seconds: int
    rate_limit_per_minute: int | None


@dataclass(frozen=True, slots=True)
class TenantSummary:
    """One tenant as ``GET /_fake/tenants`` lists it: when it was made and what it holds."""

    id: str
    created_at: str | None
    tenant_admin: bool
    credentials: int
    memories: int
    pending_proposals: int

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> TenantSummary:
        return cls(row[1], row[2], bool(row[3]), row[4], row[5], row[6])
