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
    sql = (
        f"SELECT m.seq, m.id, m.importance, m.updated_at, {_BM25} AS rank FROM memory_fts"  # noqa: S608 - constant parts; values are bound
        " JOIN memories m ON m.seq = memory_fts.rowid"
        " WHERE memory_fts MATCH ? AND m.tenant_id = ? AND m.status = 'active'"
    )
    params: list[Any] = [_match_expression((scope_tag(tenant, s) for s in scopes), terms), tenant]
    if kinds:
        sql += f" AND m.kind IN ({', '.join('?' for _ in kinds)})"
        params.extend(kinds)
    if topic is not None:
        sql += " AND m.topic = ?"
        params.append(topic)
    sql += " ORDER BY rank"
    # Order by the *rounded* score: read rows in rank order until the rounded score falls below
    # the limit-th row's, so that every row tied with it at the edge takes part in the tie-break.
    cursor = conn.execute(sql, params)
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
    # score desc, importance desc, updated_at desc (fixed-width UTC text sorts as time), id asc:
    # two stable sorts, so that no timestamp needs parsing.
    scored.sort(key=lambda item: item[1]["id"])
    scored.sort(key=lambda item: (item[0], item[1]["importance"], item[1]["updated_at"]), reverse=True)
    del scored[limit:]
    if not scored:
        return []
    ranked = [row for _, row in scored]
    seqs = [r["seq"] for r in ranked]
    placeholders = ", ".join("?" for _ in seqs)
    # The full rows only for the winners (the ranking above reads just the sort keys).
    full = {
        row["seq"]: row
        for row in conn.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.seq IN ({placeholders})",  # noqa: S608 - placeholders only
            seqs,
        )
    }
    conn.execute(
        f"UPDATE memories SET last_accessed_at = ? WHERE seq IN ({placeholders})",  # noqa: S608 - placeholders only
        [now, *seqs],
    )
    result = []
    for row in ranked:
        item = memory_dict(full[row["seq"]])
        item["last_accessed_at"] = now
        item["score"] = _score(row["rank"])
        result.append(item)
    return result
