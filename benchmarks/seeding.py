"""Bulk seeding of active memories straight into the fake's SQLite tables.

It writes the same rows as ``fake_lucy.domain.lifecycle.create_memory`` (a ``memories`` head, a
``memory_versions`` row and a row of the tenant's full-text table keyed by ``memories.seq`` with the
scope tag, content and topic; the tenant is created first when it does not exist), with
``executemany`` in one transaction per batch instead of one call per memory. The text is
synthetic: 6 to 30 words drawn from a Zipf-like vocabulary, plus a *common* term in about 1
memory in 10 and a *rare* term in about 1 in 1,000.
"""

from __future__ import annotations

import base64
import itertools
import os
import random
import sqlite3
from collections.abc import Iterator

from fake_lucy.domain import clock, server_state
from fake_lucy.domain.principals import Scope, ensure_tenant, scope_tag
from fake_lucy.store.schema import fts_table

COMMON_TERM = "postgres"
RARE_TERM = "zanzibar"
COMMON_EVERY = 10
RARE_EVERY = 1000
KINDS = ("preference", "identity", "fact", "decision", "rule", "brand_note", "editorial_decision")
MIN_WORDS, MAX_WORDS = 6, 30
BATCH = 50_000
VOCABULARY_SIZE = 5000

_CONSONANTS = "bcdfghklmnprstvw"
_VOWELS = "aeiou"


def _vocabulary(size: int, rng: random.Random) -> list[str]:
    syllables = [c + v for c in _CONSONANTS for v in _VOWELS]
    words: set[str] = set()
    while len(words) < size:
        word = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
        if word not in (COMMON_TERM, RARE_TERM):
            words.add(word)
    return sorted(words)


def vocabulary(seed: int = 8) -> list[str]:
    """The words a ``Seeder`` with this seed draws from, most frequent first."""
    return _vocabulary(VOCABULARY_SIZE, random.Random(seed))  # noqa: S311 - synthetic text


def scopes(count: int) -> list[Scope]:
    return [Scope("project", f"bench-{n:03d}") for n in range(count)]


class Seeder:
    """Adds memories to a tenant, spread round-robin over ``scopes``; cumulative across calls."""

    def __init__(self, conn: sqlite3.Connection, tenant: str, scope_list: list[Scope], seed: int = 8) -> None:
        self.conn = conn
        self.tenant = tenant
        self.scopes = scope_list
        self.tags = [scope_tag(tenant, scope) for scope in scope_list]
        self.rng = random.Random(seed)  # noqa: S311 - synthetic text, not security
        self.vocabulary = _vocabulary(VOCABULARY_SIZE, self.rng)
        self.weights = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(self.vocabulary))))
        self.count = 0

    def _ids(self, n: int) -> Iterator[str]:
        raw = os.urandom(18 * n)
        for i in range(n):
            yield "mem_" + base64.urlsafe_b64encode(raw[18 * i : 18 * i + 18]).decode("ascii")[:22]

    def _text(self, n: int) -> list[str]:
        words = self.rng.choices(self.vocabulary, cum_weights=self.weights, k=n * MAX_WORDS)
        texts = []
        for i in range(n):
            chosen = words[i * MAX_WORDS : i * MAX_WORDS + self.rng.randint(MIN_WORDS, MAX_WORDS)]
            if self.rng.random() < 1 / COMMON_EVERY:
                chosen[self.rng.randrange(len(chosen))] = COMMON_TERM
            if self.rng.random() < 1 / RARE_EVERY:
                chosen[self.rng.randrange(len(chosen))] = RARE_TERM
            texts.append(" ".join(chosen).capitalize() + ".")
        return texts

    def add(self, n: int) -> None:
        """Add ``n`` active memories (batches of ``BATCH``, one transaction each)."""
        now = clock.format_us(clock.now_us(self.conn))
        self.conn.execute("BEGIN IMMEDIATE")
        ensure_tenant(self.conn, self.tenant)
        self.conn.execute("COMMIT")
        while n > 0:
            size = min(n, BATCH)
            self._batch(size, now)
            n -= size

    def _batch(self, n: int, now: str) -> None:
        conn = self.conn
        (last,) = conn.execute("SELECT coalesce(max(seq), 0) FROM memories").fetchone()
        texts = self._text(n)
        ids = list(self._ids(n))
        importance = [self.rng.randint(1, 10) for _ in range(n)]
        kinds = [self.rng.choice(KINDS) for _ in range(n)]
        where = [(self.count + i) % len(self.scopes) for i in range(n)]
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(
                "INSERT INTO memories (seq, id, tenant_id, scope_kind, scope_id, version, kind, topic,"
                " content, importance, status, source, created_at, updated_at, approved_at)"
                " VALUES (?, ?, ?, ?, ?, 1, ?, NULL, ?, ?, 'active', 'bench', ?, ?, ?)",
                (
                    (
                        last + 1 + i,
                        ids[i],
                        self.tenant,
                        self.scopes[where[i]].kind,
                        self.scopes[where[i]].id,
                        kinds[i],
                        texts[i],
                        importance[i],
                        now,
                        now,
                        now,
                    )
                    for i in range(n)
                ),
            )
            conn.executemany(
                "INSERT INTO memory_versions (memory_id, version, kind, topic, content, importance,"
                " status, source, updated_at, approved_at) VALUES (?, 1, ?, NULL, ?, ?, 'active',"
                " 'bench', ?, ?)",
                ((ids[i], kinds[i], texts[i], importance[i], now, now) for i in range(n)),
            )
            conn.executemany(
                f"INSERT INTO {fts_table(self.tenant)} (rowid, scope_tag, content, topic)"  # noqa: S608 - a digest name
                " VALUES (?, ?, ?, '')",
                ((last + 1 + i, self.tags[where[i]], texts[i]) for i in range(n)),
            )
            server_state.bump_index_epoch(conn)  # a running server's recall caches must not outlive this
        except BaseException:  # anything, Ctrl-C included: roll back, then let it go on
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        self.count += n
