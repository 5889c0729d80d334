"""Lexical recall over the full-text index (SPEC 2, recall).

The query is data: it is split in code into runs of letters and digits, stop words are dropped,
and the remaining terms are OR-ed as quoted FTS5 strings, so no query syntax ever reaches FTS5.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from fake_lucy.domain.clock import parse_timestamp
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
        f"SELECT {MEMORY_COLUMNS}, {_BM25} AS rank FROM memory_fts"  # noqa: S608 - constant parts; values are bound
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
    sql += " ORDER BY rank LIMIT ?"
    # Order by the *rounded* score: fetch a margin past the limit, and everything when the
    # rounded score still ties at the edge of what was fetched.
    fetch = limit * 2 + 8
    rows = conn.execute(sql, [*params, fetch]).fetchall()
    if len(rows) == fetch and _score(rows[-1]["rank"]) == _score(rows[limit - 1]["rank"]):
        rows = conn.execute(sql, [*params, -1]).fetchall()
    ranked = sorted(
        rows,
        key=lambda r: (
            -_score(r["rank"]),
            -r["importance"],
            -parse_timestamp(r["updated_at"]),
            r["id"],
        ),
    )[:limit]
    if not ranked:
        return []
    seqs = [r["seq"] for r in ranked]
    conn.execute(
        f"UPDATE memories SET last_accessed_at = ? WHERE seq IN ({', '.join('?' for _ in seqs)})",  # noqa: S608 - placeholders only
        [now, *seqs],
    )
    result = []
    for row in ranked:
        item = memory_dict(row)
        item["last_accessed_at"] = now
        item["score"] = _score(row["rank"])
        result.append(item)
    return result
