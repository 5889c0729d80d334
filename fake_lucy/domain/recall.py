"""Lexical recall over the full-text index (SPEC 2, recall).

The query is data: it is split in code into runs of letters and digits, stop words are dropped,
and the remaining terms are OR-ed as quoted FTS5 strings, so no query syntax ever reaches FTS5.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from fake_lucy.domain.principals import Scope, scope_tag
from fake_lucy.domain.records import MEMORY_COLUMNS, memory_dict

__all__ = ["query_terms", "recall"]

_TERM = re.compile(r"[^\W_]+")
# Weights per FTS column: the scope tag narrows the match but never adds to the score.
_BM25 = "bm25(memory_fts, 0.0, 1.0, 0.5)"


def query_terms(query: str, stop_words: frozenset[str]) -> list[str]:
    seen: dict[str, None] = {}
    for term in _TERM.findall(query):
        lowered = term.lower()
        if lowered not in stop_words:
            seen.setdefault(lowered, None)
    return list(seen)


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _match_expression(tags: Iterable[str], terms: Sequence[str]) -> str:
    scope_part = " OR ".join(_quote(tag) for tag in tags)
    term_part = " OR ".join(_quote(term) for term in terms)
    return f"scope_tag : ({scope_part}) AND {{content topic}} : ({term_part})"


def _score(rank: float) -> float:
    return max(0.0, float(f"{-rank:.3g}"))


def _read_ranked(cursor: sqlite3.Cursor, limit: int) -> list[tuple[float, Any]]:
    """Rows in rank order until the rounded score falls below the ``limit``-th row's, so that every
    row tied with it at the edge takes part in the tie-break. Items: (rounded score, row)."""
    try:
        scored = [(_score(row["rank"]), row) for row in cursor.fetchmany(limit)]
        if len(scored) == limit:
            edge = scored[-1][0]
            for row in cursor:
                score = _score(row["rank"])
                if score < edge:
                    break
                scored.append((score, row))
    finally:
        cursor.close()
    return scored


def _full_rows(conn: sqlite3.Connection, tenant: str, seqs: Sequence[int]) -> dict[int, sqlite3.Row]:
    placeholders = ", ".join("?" for _ in seqs)
    return {
        row["seq"]: row
        for row in conn.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories m"  # noqa: S608 - constant columns and placeholders
            f" WHERE m.seq IN ({placeholders}) AND m.tenant_id = ? AND m.status = 'active'",
            [*seqs, tenant],
        )
    }


def recall(
    conn: sqlite3.Connection,
    *,
    tenant: str,
    scopes: Sequence[Scope],
    terms: Sequence[str],
    kinds: Sequence[str] | None,
    topic: str | None,
    limit: int,
    now: str,
) -> list[dict[str, Any]]:
    """The best ``limit`` active memories; sets their ``last_accessed_at`` (not re-indexed)."""
    if not terms or not scopes:
        return []
    expression = _match_expression((scope_tag(tenant, s) for s in scopes), terms)
    if not kinds and topic is None:
        # The index holds only active memories and its scope tags carry the tenant, so it ranks
        # alone; the memories' rows are read for the candidates only.
        cursor = conn.execute(
            f"SELECT rowid, {_BM25} AS rank FROM memory_fts WHERE memory_fts MATCH ? ORDER BY rank",  # noqa: S608 - constant
            (expression,),
        )
        candidates = _read_ranked(cursor, limit)
        rows = _full_rows(conn, tenant, [row[0] for _, row in candidates])
        if len(rows) != len(candidates):  # pragma: no cover - only on a 96-bit scope-tag collision
            raise RuntimeError("the full-text index and the memories table disagree")
        scored = [(score, rows[row[0]]) for score, row in candidates]
    else:
        sql = (
            f"SELECT {MEMORY_COLUMNS}, {_BM25} AS rank FROM memory_fts"  # noqa: S608 - constant parts; values are bound
            " JOIN memories m ON m.seq = memory_fts.rowid"
            " WHERE memory_fts MATCH ? AND m.tenant_id = ? AND m.status = 'active'"
        )
        params: list[Any] = [expression, tenant]
        if kinds:
            sql += f" AND m.kind IN ({', '.join('?' for _ in kinds)})"
            params.extend(kinds)
        if topic is not None:
            sql += " AND m.topic = ?"
            params.append(topic)
        cursor = conn.execute(sql + " ORDER BY rank", params)
        scored = _read_ranked(cursor, limit)
    # score desc, importance desc, updated_at desc (fixed-width UTC text sorts as time), id asc:
    # two stable sorts, so that no timestamp needs parsing.
    scored.sort(key=lambda item: item[1]["id"])
    scored.sort(key=lambda item: (item[0], item[1]["importance"], item[1]["updated_at"]), reverse=True)
    del scored[limit:]
    if not scored:
        return []
    seqs = [row["seq"] for _, row in scored]
    conn.execute(
        f"INSERT INTO memory_access (seq, last_accessed_at) VALUES {', '.join('(?, ?)' for _ in seqs)}"  # noqa: S608 - placeholders only
        " ON CONFLICT (seq) DO UPDATE SET last_accessed_at = excluded.last_accessed_at",
        [value for seq in seqs for value in (seq, now)],
    )
    result = []
    for score, row in scored:
        item = memory_dict(row)
        item["last_accessed_at"] = now
        item["score"] = score
        result.append(item)
    return result
