"""Lexical recall over the caller's tenant's full-text index (SPEC 2, recall; SPEC 3.6).

The query is data: it is split in code into runs of letters and digits, stop words are dropped,
and the first ``MAX_TERMS`` distinct remaining terms are OR-ed as quoted FTS5 strings, so no query
syntax ever reaches FTS5 and no query costs more than 32 terms.
Each tenant has its own FTS5 table (``store.schema.fts_table``), so bm25's statistics — the row
count, the average row length and each term's document count — are its tenant's alone: a
tenant's scores, order and cut at the limit never depend on what other tenants store.

A recall has two parts (SPEC 2): ``rank`` reads, in a read snapshot that holds no write lock; then
``stamp`` writes the access times in the request's short write transaction, beside its charge,
ledger and journal rows. ``recall`` does both in one transaction (for tests and benchmarks).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fake_lucy.domain.principals import Scope, scope_tag
from fake_lucy.domain.records import ranked_memory_dict
from fake_lucy.store.records import RANKED_MEMORY_COLUMNS, RANKED_MEMORY_POSITIONS
from fake_lucy.store.schema import fts_table

__all__ = [
    "MAX_TERMS",
    "Ranked",
    "RecallCache",
    "RecallQuery",
    "answer",
    "answer_bytes",
    "prepare",
    "query_terms",
    "rank",
    "ranking_statement",
    "recall",
    "stamp",
]

_TERM = re.compile(r"[^\W_]+")
# Weights per FTS column: the scope tag narrows the match but never adds to the score.
_WEIGHTS = "0.0, 1.0, 0.5"
# Positions in a plain row of ``RANKED_MEMORY_COLUMNS`` (then, in the filtered query, its rank).
_SEQ, _ID, _IMPORTANCE, _UPDATED_AT = (
    RANKED_MEMORY_POSITIONS[name] for name in ("seq", "id", "importance", "updated_at")
)


MAX_TERMS = 32  # only the first 32 distinct terms of a query count (the contract's recall.max_terms)


def query_terms(query: str, stop_words: frozenset[str]) -> list[str]:
    """The query's distinct terms in order of first occurrence, stop words dropped, at most 32."""
    seen: dict[str, None] = {}
    for term in _TERM.finditer(query):
        lowered = term.group().lower()
        if lowered not in stop_words:
            seen.setdefault(lowered, None)
            if len(seen) == MAX_TERMS:
                break
    return list(seen)


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _match_expression(tags: Iterable[str], terms: Sequence[str]) -> str:
    scope_part = " OR ".join(_quote(tag) for tag in tags)
    term_part = " OR ".join(_quote(term) for term in terms)
    return f"scope_tag : ({scope_part}) AND {{content topic}} : ({term_part})"


def _score(rank: float) -> float:
    return max(0.0, float(f"{-rank:.3g}"))


def _plain(conn: sqlite3.Connection) -> sqlite3.Cursor:
    """A cursor whose rows are tuples (the connection's ``sqlite3.Row`` looks each field up by name)."""
    cursor = conn.cursor()
    cursor.row_factory = None
    return cursor


def _read_ranked(cursor: sqlite3.Cursor, limit: int) -> list[tuple[float, tuple[Any, ...]]]:
    """Rows in rank order (their rank last) until the rounded score falls below the ``limit``-th
    row's, so that every row tied with it at the edge takes part in the tie-break. Items: (rounded
    score, row)."""
    try:
        scored = [(_score(row[-1]), row) for row in cursor.fetchmany(limit)]
        if len(scored) == limit:
            edge = scored[-1][0]
            for row in cursor:
                score = _score(row[-1])
                if score < edge:
                    break
                scored.append((score, row))
    finally:
        cursor.close()
    return scored


def _full_rows(conn: sqlite3.Connection, tenant: str, seqs: Sequence[int]) -> dict[int, tuple[Any, ...]]:
    placeholders = ", ".join("?" for _ in seqs)
    cursor = _plain(conn).execute(
        # NOT INDEXED: rowid lookups, never a walk of the tenant's index (ix_memories_tenant_id)
        f"SELECT {RANKED_MEMORY_COLUMNS} FROM memories m NOT INDEXED"  # noqa: S608 - constant columns and placeholders
        f" WHERE m.seq IN ({placeholders}) AND m.tenant_id = ? AND m.status = 'active'",
        [*seqs, tenant],
    )
    return {row[_SEQ]: row for row in cursor}


# A ranked answer: (score, memories.seq, the memory without its access time and score), in order.
Ranked = list[tuple[float, int, dict[str, Any]]]
_Key = tuple[str, tuple[str, ...] | None, str | None, int]


# What one cached memory costs beyond its text, roughly: the dict, its nested scope and the short
# strings (ids, timestamps), as ``sys.getsizeof`` counts them on CPython 3.11.
_MEMORY_OVERHEAD_BYTES = 1_500


def answer_bytes(ranked: Ranked) -> int:
    """The approximate memory a ranked answer holds: its texts plus a fixed cost per memory."""
    return sum(
        _MEMORY_OVERHEAD_BYTES + len(memory["content"]) + len(memory["topic"] or "")
        for _, _, memory in ranked
    )


class RecallCache:
    """This process's ranked answers, valid for one ``server_state.index_epoch``.

    A ranked answer depends only on the full-text index and the memories rows it points to, and
    those change only together, in transactions that also change the epoch (``lifecycle``'s index
    helpers, reset). A recall repeated against an unchanged index therefore skips the full-text
    query and the rows; its access times, charge, ledger row and journal row are written as for any
    other. The epoch is read in the same read snapshot as the ranking (``rank``), so every worker of
    one database sees a change at once and an answer is kept under the epoch it describes. Least
    recently used answers go first beyond ``max_entries`` answers or ``max_bytes``
    (``answer_bytes``; an answer larger than that alone is not kept).
    """

    def __init__(self, max_entries: int = 256, max_bytes: int = 16 * 2**20) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self.bytes = 0
        self._epoch: int | None = None
        self._entries: dict[_Key, tuple[Ranked, int]] = {}

    def holds(self, key: _Key) -> bool:
        """Whether an answer for ``key`` is kept (for the epoch of the last ``get``, which may
        have passed: ``get`` decides)."""
        return key in self._entries

    def get(self, epoch: int, key: _Key) -> Ranked | None:
        if epoch != self._epoch:
            self._entries.clear()
            self.bytes = 0
            self._epoch = epoch
        entry = self._entries.pop(key, None)
        if entry is None:
            self.misses += 1
            return None
        self._entries[key] = entry  # the most recently used goes last
        self.hits += 1
        return entry[0]

    def put(self, epoch: int, key: _Key, ranked: Ranked) -> None:
        size = answer_bytes(ranked)
        if epoch != self._epoch or size > self.max_bytes:
            return
        previous = self._entries.pop(key, None)
        if previous is not None:
            self.bytes -= previous[1]
        self._entries[key] = (ranked, size)
        self.bytes += size
        while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
            _, (_, dropped) = next(iter(self._entries.items()))
            del self._entries[next(iter(self._entries))]
            self.bytes -= dropped

    def __len__(self) -> int:
        return len(self._entries)


def ranking_statement(tenant: str) -> str:
    """The full-text statement a recall without ``kinds`` or ``topic`` ranks with: every match's
    row number and bm25, best first (bound: the ``RecallQuery.expression``)."""
    fts = fts_table(tenant)
    return f"SELECT rowid, bm25({fts}, {_WEIGHTS}) AS rank FROM {fts} WHERE {fts} MATCH ? ORDER BY rank"  # noqa: S608 - a digest name


def _rank(
    conn: sqlite3.Connection,
    tenant: str,
    expression: str,
    kinds: Sequence[str] | None,
    topic: str | None,
    limit: int,
) -> Ranked:
    fts = fts_table(tenant)
    if not kinds and topic is None:
        # The index holds only the tenant's active memories, so it ranks alone; the memories'
        # rows are read for the candidates only.
        candidates = _read_ranked(_plain(conn).execute(ranking_statement(tenant), (expression,)), limit)
        rows = _full_rows(conn, tenant, [row[0] for _, row in candidates])
        if len(rows) != len(candidates):  # pragma: no cover - the index and the rows change together
            raise RuntimeError("the full-text index and the memories table disagree")
        scored = [(score, rows[row[0]]) for score, row in candidates]
    else:
        sql = (
            f"SELECT {RANKED_MEMORY_COLUMNS}, bm25({fts}, {_WEIGHTS}) AS rank FROM {fts}"  # noqa: S608 - constant parts and a digest name; values are bound
            f" JOIN memories m ON m.seq = {fts}.rowid"
            f" WHERE {fts} MATCH ? AND m.tenant_id = ? AND m.status = 'active'"
        )
        params: list[Any] = [expression, tenant]
        if kinds:
            sql += f" AND m.kind IN ({', '.join('?' for _ in kinds)})"
            params.extend(kinds)
        if topic is not None:
            sql += " AND m.topic = ?"
            params.append(topic)
        scored = _read_ranked(_plain(conn).execute(sql + " ORDER BY rank", params), limit)
    # score desc, importance desc, updated_at desc (fixed-width UTC text sorts as time), id asc:
    # two stable sorts, so that no timestamp needs parsing.
    scored.sort(key=lambda item: item[1][_ID])
    scored.sort(key=lambda item: (item[0], item[1][_IMPORTANCE], item[1][_UPDATED_AT]), reverse=True)
    return [(score, row[_SEQ], ranked_memory_dict(row)) for score, row in scored[:limit]]


@dataclass(frozen=True, slots=True)
class RecallQuery:
    """What a recall asks the index, once the scopes and terms are known (``prepare``)."""

    tenant: str
    expression: str
    kinds: tuple[str, ...] | None
    topic: str | None
    limit: int

    @property
    def key(self) -> _Key:
        return (self.expression, self.kinds, self.topic, self.limit)


def prepare(
    *,
    tenant: str,
    scopes: Sequence[Scope],
    terms: Sequence[str],
    kinds: Sequence[str] | None,
    topic: str | None,
    limit: int,
) -> RecallQuery | None:
    """The query for the index; ``None`` when nothing can match (no terms left, or no scope)."""
    if not terms or not scopes:
        return None
    expression = _match_expression((scope_tag(tenant, s) for s in scopes), terms)
    return RecallQuery(tenant, expression, tuple(kinds) if kinds else None, topic, limit)


def rank(conn: sqlite3.Connection, query: RecallQuery) -> Ranked:
    """The best ``query.limit`` active memories, in order; reads only (SPEC 2: in a read snapshot,
    with the ``index_epoch`` read in the same snapshot when the answer is to be cached)."""
    return _rank(conn, query.tenant, query.expression, query.kinds, query.topic, query.limit)


def stamp(conn: sqlite3.Connection, ranked: Ranked, now: str, *, index_changed: bool = False) -> None:
    """Set ``last_accessed_at`` of the ranked memories (not re-indexed), in the write transaction.

    ``index_changed``: the index epoch moved since the ranking's snapshot, so a ranked memory may be
    deleted, or gone (a reset) with its row number reused; then only rows that still hold the same
    active memory are stamped. An answer may thus name a memory deleted meanwhile: it was active
    when ranked.
    """
    if not ranked:
        return
    if not index_changed:
        conn.execute(
            f"INSERT INTO memory_access (seq, last_accessed_at) VALUES {', '.join('(?, ?)' for _ in ranked)}"  # noqa: S608 - placeholders only
            " ON CONFLICT (seq) DO UPDATE SET last_accessed_at = excluded.last_accessed_at",
            [value for _, seq, _ in ranked for value in (seq, now)],
        )
        return
    conn.execute(
        "INSERT INTO memory_access (seq, last_accessed_at) SELECT seq, ? FROM memories"  # noqa: S608 - placeholders only
        f" WHERE status = 'active' AND (seq, id) IN (VALUES {', '.join('(?, ?)' for _ in ranked)})"
        " ON CONFLICT (seq) DO UPDATE SET last_accessed_at = excluded.last_accessed_at",
        [now, *(value for _, seq, memory in ranked for value in (seq, memory["id"]))],
    )


def answer(ranked: Ranked, now: str) -> list[dict[str, Any]]:
    """The response's memories: new dicts (the nested scope too), the cached ones are shared by
    every answer of their epoch."""
    return [
        {**memory, "scope": {**memory["scope"]}, "last_accessed_at": now, "score": score}
        for score, _, memory in ranked
    ]


def recall(
    conn: sqlite3.Connection,
    query: RecallQuery | None,
    *,
    now: str,
    cache: RecallCache | None = None,
    index_epoch: int = 0,
) -> list[dict[str, Any]]:
    """Rank (``prepare``'s query) and stamp in the caller's one (write) transaction;
    ``index_epoch`` read in it."""
    if query is None:
        return []
    ranked = None if cache is None else cache.get(index_epoch, query.key)
    if ranked is None:
        ranked = rank(conn, query)
        if cache is not None:
            cache.put(index_epoch, query.key, ranked)
    stamp(conn, ranked, now)
    return answer(ranked, now)
