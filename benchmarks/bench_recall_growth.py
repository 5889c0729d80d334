"""Recall latency as the store grows: 1k, 10k, 100k, 1M active memories over 100 scopes.

One database grows in steps (bulk-seeded, see ``seeding.py``). At each size: a recall in one scope
for one common and one rare term, timed (a) server side, calling the domain recall function in
its write transaction as the pipeline does, and (b) over HTTP to ``fake-lucy serve`` (one
uvicorn worker, a separate process), one request at a time. Both rank every time: the direct call
has no cache, and each HTTP request adds a unique term that matches nothing, so no answer comes
from recall's cache of ranked answers. The databases live in a temporary directory that is
deleted at the end.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks.common import API, Summary, free_port, serve_fake, summarise
from benchmarks.seeding import COMMON_TERM, RARE_TERM, Seeder, scopes
from fake_lucy.domain import clock
from fake_lucy.domain.principals import NewCredential, create_credential, scope_tag
from fake_lucy.domain.recall import prepare, query_terms, recall
from fake_lucy.runtime import FakeLucy
from fake_lucy.settings import FakeLucySettings
from fake_lucy.store.schema import fts_table

SIZES = (1_000, 10_000, 100_000, 1_000_000)
SCOPES = 100
TENANT = "tenant_bench"
TOKEN = "bench-token-recall-growth-0123456789"  # noqa: S105 - a throwaway token for a temp database
QUERY = f"{COMMON_TERM} {RARE_TERM}"
DIRECT_ROUNDS = 500
HTTP_ROUNDS = 300


@dataclass(frozen=True, slots=True)
class GrowthRow:
    size: int
    seed_s: float
    matches: int
    direct: Summary
    http: Summary
    db_mib: float


def _direct(fake: FakeLucy, scope_index: int) -> tuple[Summary, int]:
    scope = scopes(SCOPES)[scope_index]
    terms = query_terms(QUERY, fake.stop_words)
    conn = fake.db.conn
    match = (
        f'scope_tag : "{scope_tag(TENANT, scope)}" AND {{content topic}} : ("{COMMON_TERM}" OR "{RARE_TERM}")'
    )
    index = fts_table(TENANT)
    (matches,) = conn.execute(f"SELECT count(*) FROM {index} WHERE {index} MATCH ?", (match,)).fetchone()  # noqa: S608 - a digest name
    samples = []
    for _ in range(DIRECT_ROUNDS):
        started = time.perf_counter()
        with fake.db.write() as tx:
            now = clock.format_us(clock.now_us(tx, TENANT))
            query = prepare(tenant=TENANT, scopes=(scope,), terms=terms, kinds=None, topic=None, limit=10)
            recall(tx, query, now=now)
        samples.append((time.perf_counter() - started) * 1000)
    return summarise(samples), int(matches)


def _over_http(database: Path, scope_index: int) -> Summary:
    port = free_port()
    scope = scopes(SCOPES)[scope_index]
    body = {"query": QUERY, "scope": scope.as_dict(), "limit": 10}
    with (
        serve_fake(database, port),
        httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {TOKEN}"}
        ) as http,
    ):
        for n in range(20):  # warm-up
            http.post(f"{API}/recall", json={**body, "query": f"{QUERY} w{n}"}).raise_for_status()
        samples = []
        for n in range(HTTP_ROUNDS):
            fresh = {**body, "query": f"{QUERY} r{n}"}  # a new query: ranked, not from the cache
            started = time.perf_counter()
            response = http.post(f"{API}/recall", json=fresh)
            samples.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
    return summarise(samples)


def run(sizes: tuple[int, ...] = SIZES) -> list[GrowthRow]:
    directory = Path(tempfile.mkdtemp(prefix="fake-lucy-bench-"))
    rows: list[GrowthRow] = []
    try:
        database = directory / "growth.sqlite3"
        fake = FakeLucy(FakeLucySettings(database=str(database)))
        with fake.db.write() as conn:
            create_credential(
                conn,
                fake.ids,
                NewCredential(
                    tenant=TENANT,
                    account="acct_bench",
                    user="usr_bench",
                    permissions=["memory:read", "memory:propose"],
                    scopes=[s.as_dict() for s in scopes(SCOPES)],
                    credits=100_000_000,
                    token=TOKEN,
                ),
            )
        seeder = Seeder(fake.db.conn, TENANT, scopes(SCOPES))
        for size in sizes:
            started = time.perf_counter()
            seeder.add(size - seeder.count)
            fake.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            seed_s = time.perf_counter() - started
            direct, matches = _direct(fake, 42)
            http = _over_http(database, 42)
            size_mib = sum(p.stat().st_size for p in directory.iterdir()) / 2**20
            row = GrowthRow(size, seed_s, matches, direct, http, size_mib)
            rows.append(row)
            print(format_row(row), file=sys.stderr, flush=True)
        fake.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return rows


def format_row(row: GrowthRow) -> str:
    return (
        f"| {row.size:>9,} | {row.matches:>7,} | {row.direct.p50_ms:6.3f} | {row.direct.p99_ms:6.3f}"
        f" | {row.http.p50_ms:6.3f} | {row.http.p99_ms:6.3f} | {row.seed_s:6.1f} | {row.db_mib:7.0f} |"
    )


HEADER = (
    "| memories | matches in scope | server p50 ms | server p99 ms | HTTP p50 ms | HTTP p99 ms"
    " | seeding s | DB MiB |\n|---:|---:|---:|---:|---:|---:|---:|---:|"
)


if __name__ == "__main__":
    print(HEADER)
    for result in run():
        print(format_row(result))
