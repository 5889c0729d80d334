"""One fake shared by many tenants (SPEC 3.6, issue 15 point 5).

``python -m benchmarks.bench_tenants`` prints section 6 of ``benchmarks/RESULTS.md`` (``make bench``
runs it as its last part; it needs wrk):

1. HTTP under wrk, as ``bench_http`` measures it, on a store of 100 tenants with 1,000 bulk-seeded
   memories each (the dev tenant and 99 others, in the dev token's two scopes): the dev token's
   recall with a new query each request (every request ranks; no answer comes from the cache),
   proposal status and propose, against the bare FastAPI GET and POST.
2. Per-tenant reset with the 100 other tenants present: the tenant does 3 proposes, 3 status calls
   and 3 recalls, then its admin resets it — timed in process (the domain call in its write
   transaction, as the control API runs it) and over HTTP to ``fake-lucy serve``.
3. Capacity: N concurrent test sessions against ``fake-lucy serve --workers 2``, each in its own
   tenant as ``pytest --lucy-url`` makes it, each running tests one after another; a test is a
   reset, a propose, an approve, a recall and a status call. Reported per N: tests/s and the
   latency of every request (p50/p99). The load generator is this process (one asyncio loop), on
   the same machine, so it takes some of the cores it measures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks import bench_http, bench_instructions
from benchmarks.bench_http import Scenario, WrkResult
from benchmarks.common import (
    ADMIN_TOKEN,
    API,
    DEV_TOKEN,
    Summary,
    free_port,
    serve_fake,
    set_credits,
    summarise,
)
from benchmarks.seeding import COMMON_TERM, RARE_TERM, Seeder
from fake_lucy.domain import recall, tenants
from fake_lucy.domain.principals import Scope
from fake_lucy.runtime import FakeLucy
from fake_lucy.settings import FakeLucySettings
from fake_lucy.testing import InProcessFake

TENANTS = 100  # the dev tenant and 99 others
MEMORIES = 1_000  # per tenant
DEV_SCOPES = [Scope("workspace", "ws_dev"), Scope("project", "project_example")]
RESET_ROUNDS = 300
HTTP_RESET_ROUNDS = 300
SESSIONS = (1, 2, 4, 8, 16, 32)
CAPACITY_SECONDS = float(os.environ.get("BENCH_CAPACITY_SECONDS", "8"))
UNCACHED = "fake recall, new query each request (100 tenants)"
STATUS = "fake proposal status (100 tenants)"
PROPOSE = "fake propose (100 tenants)"
PROPOSAL = {
    "kind": "fact",
    "content": "The team approved Postgres 16 for the billing service.",
    "scope": {"kind": "workspace", "id": "ws_dev"},
}


def build_store(database: Path) -> None:
    """100 tenants × 1,000 memories in one file; the 99 others made as ``POST /_fake/tenants`` does."""
    fake = FakeLucy(FakeLucySettings(database=str(database)))
    with fake.db.write() as conn:
        others = [
            tenants.create(conn, fake.ids, scope=tenants.SERVER, tenant=f"bench-{n:03d}").tenant
            for n in range(TENANTS - 1)
        ]
    for n, tenant in enumerate(["tenant_dev", *others]):
        Seeder(fake.db.conn, tenant, DEV_SCOPES, seed=8 + n).add(MEMORIES)
    fake.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    fake.close()


def serve(
    database: Path, port: int, workers: int = 1, *, quiet: bool = True
) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    """``fake-lucy serve``: ``--quiet`` for throughput and reset, as every section measures them;
    with its server log for the capacity, as the compose service runs."""
    return serve_fake(database, port, workers=workers, quiet=quiet)


# -- 1. HTTP under wrk ---------------------------------------------------------------------------


@contextlib.contextmanager
def _fake(database: Path) -> Iterator[list[Scenario]]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {DEV_TOKEN}", "Content-Type": "application/json"}
    new_query = {"query": f"{COMMON_TERM} {RARE_TERM} __N__", "scope": {"kind": "workspace", "id": "ws_dev"}}
    with serve(database, port) as server:
        set_credits(base, "acct_dev", 100_000_000)
        created = httpx.post(
            f"{base}{API}/proposals", json=PROPOSAL, headers={**auth, "Idempotency-Key": "bench-status"}
        )
        created.raise_for_status()
        proposal_id = created.json()["proposal"]["id"]
        yield [
            Scenario(
                UNCACHED,
                f"{base}{API}/recall",
                "POST",
                json.dumps(new_query),
                auth,
                unique_body=True,
                pid=server.pid,
            ),
            Scenario(STATUS, f"{base}{API}/proposals/{proposal_id}", headers=auth, pid=server.pid),
            Scenario(
                PROPOSE, f"{base}{API}/proposals", "POST", json.dumps(PROPOSAL), auth, True, pid=server.pid
            ),
        ]


def run_http(database: Path, rounds: int = bench_http.ROUNDS) -> dict[str, list[WrkResult]]:
    if not bench_http.wrk_available():
        raise RuntimeError("wrk is not installed (apt-get install -y wrk)")
    with bench_http._bare() as bare, _fake(database) as fake:
        scenarios = [*bare, *fake]
        for scenario in scenarios:
            scenario.run(bench_http.WARMUP_S)
        results: dict[str, list[WrkResult]] = {scenario.name: [] for scenario in scenarios}
        for _ in range(rounds):
            for scenario in scenarios:
                result = scenario.run(bench_http.DURATION_S)
                print(bench_http.format_result(result), file=sys.stderr, flush=True)
                results[scenario.name].append(result)
    return results


# -- what the recall target leaves ----------------------------------------------------------------

FLOOR_CALLS = 500
FLOOR_ROUNDS = 7


@dataclass(frozen=True, slots=True)
class RankingFloor:
    """CPU µs per call in process, on the dev tenant's index, for the HTTP scenario's query (a new
    term each call): the full-text statement alone, and ``recall.rank`` (the statement, the
    candidates' rows and the order); the least of ``FLOOR_ROUNDS`` rounds."""

    statement_us: float
    rank_us: float
    matches: int


def run_floor(database: Path) -> RankingFloor:
    fake = FakeLucy(FakeLucySettings(database=str(database)))
    try:
        conn = fake.db.conn
        counter = iter(range(10**9))

        def query() -> recall.RecallQuery:
            terms = recall.query_terms(f"{COMMON_TERM} {RARE_TERM} floor{next(counter)}", fake.stop_words)
            prepared = recall.prepare(
                tenant="tenant_dev", scopes=DEV_SCOPES[:1], terms=terms, kinds=None, topic=None, limit=10
            )
            assert prepared is not None
            return prepared

        statement = recall.ranking_statement("tenant_dev")
        matches = len(conn.execute(statement, (query().expression,)).fetchall())

        def least(call: Any) -> float:
            best = float("inf")
            for _ in range(FLOOR_ROUNDS):
                queries = [query() for _ in range(FLOOR_CALLS)]
                started = time.process_time()
                for prepared in queries:
                    call(prepared)
                best = min(best, (time.process_time() - started) / FLOOR_CALLS * 1e6)
            return best

        statement_us = least(lambda q: conn.execute(statement, (q.expression,)).fetchall())
        rank_us = least(lambda q: recall.rank(conn, q))
    finally:
        fake.close()
    return RankingFloor(statement_us, rank_us, matches)


# -- 2. per-tenant reset -------------------------------------------------------------------------


async def _tenant_workload(fake: InProcessFake, token: str) -> None:
    async with fake.client(token) as http:
        ids = []
        for n in range(3):
            body = {**PROPOSAL, "content": f"Reset workload {n}: postgres."}
            response = await http.post(
                f"{API}/proposals", json=body, headers={"Idempotency-Key": uuid.uuid4().hex}
            )
            ids.append(response.json()["proposal"]["id"])
        for proposal_id in ids:
            (await http.get(f"{API}/proposals/{proposal_id}")).raise_for_status()
        for n in range(3):
            (await http.post(f"{API}/recall", json={"query": f"postgres r{n}"})).raise_for_status()


def run_reset_direct(database: Path) -> Summary:
    """The tenant's reset as the control API runs it (one write transaction), after a workload."""
    fake = InProcessFake(database)
    try:
        with fake.fake.db.write() as conn:
            created = tenants.create(conn, fake.fake.ids, scope=tenants.SERVER, tenant="bench-measured")
        token = created.credential["token"]
        samples = []
        for _ in range(RESET_ROUNDS):
            asyncio.run(_tenant_workload(fake, token))
            started = time.perf_counter()
            with fake.fake.db.write() as conn:
                tenants.reset(conn, "bench-measured")
            samples.append((time.perf_counter() - started) * 1000)
        with fake.fake.db.write() as conn:
            tenants.delete(conn, "bench-measured", scope=tenants.SERVER)
    finally:
        fake.fake.close()
    return summarise(samples)


def run_reset_http(database: Path) -> Summary:
    """``POST /_fake/reset`` with the tenant admin token, round trip to ``fake-lucy serve``."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with serve(database, port), httpx.Client(base_url=base) as http:
        created = http.post("/_fake/tenants", json={}, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        created.raise_for_status()
        admin = {"Authorization": f"Bearer {created.json()['admin_token']}"}
        v1 = {"Authorization": f"Bearer {created.json()['credential']['token']}"}
        samples = []
        for n in range(HTTP_RESET_ROUNDS):
            http.post(f"{API}/proposals", json=PROPOSAL, headers={**v1, "Idempotency-Key": f"k{n}"})
            http.post(f"{API}/recall", json={"query": f"postgres r{n}"}, headers=v1)
            started = time.perf_counter()
            http.post("/_fake/reset", headers=admin).raise_for_status()
            samples.append((time.perf_counter() - started) * 1000)
        http.delete(f"/_fake/tenants/{created.json()['tenant']}", headers=admin).raise_for_status()
    return summarise(samples)


# -- 3. capacity ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CapacityRow:
    sessions: int
    tests: int
    seconds: float
    requests: Summary
    errors: int

    @property
    def tests_per_s(self) -> float:
        return self.tests / self.seconds


async def _session(base: str, deadline: float, latencies: list[float], counts: dict[str, int]) -> None:
    """One test session: its own tenant, tests one after another until ``deadline``, then deleted."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        created = (
            await http.post("/_fake/tenants", json={}, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        ).json()
        admin = {"Authorization": f"Bearer {created['admin_token']}"}
        v1 = {"Authorization": f"Bearer {created['credential']['token']}"}

        async def timed(method: str, path: str, headers: dict[str, str], body: Any = None) -> httpx.Response:
            started = time.perf_counter()
            response = await http.request(method, path, json=body, headers=headers)
            latencies.append((time.perf_counter() - started) * 1000)
            if response.status_code >= 400:
                counts["errors"] += 1
            return response

        n = 0
        while time.perf_counter() < deadline:
            await timed("POST", "/_fake/reset", admin)
            key = {**v1, "Idempotency-Key": uuid.uuid4().hex}
            proposal = (await timed("POST", f"{API}/proposals", key, PROPOSAL)).json()["proposal"]["id"]
            await timed("POST", f"/_fake/proposals/{proposal}/approve", admin)
            await timed("POST", f"{API}/recall", v1, {"query": f"postgres billing {n}"})
            await timed("GET", f"{API}/proposals/{proposal}", v1)
            counts["tests"] += 1
            n += 1
        await http.delete(f"/_fake/tenants/{created['tenant']}", headers=admin)


async def _capacity_level(base: str, sessions: int) -> CapacityRow:
    latencies: list[float] = []
    counts = {"tests": 0, "errors": 0}
    started = time.perf_counter()
    deadline = started + CAPACITY_SECONDS
    await asyncio.gather(*(_session(base, deadline, latencies, counts) for _ in range(sessions)))
    seconds = time.perf_counter() - started
    return CapacityRow(sessions, counts["tests"], seconds, summarise(latencies), counts["errors"])


def run_capacity(database: Path, levels: tuple[int, ...] = SESSIONS) -> list[CapacityRow]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    rows = []
    with serve(database, port, workers=2, quiet=False):
        asyncio.run(_capacity_level(base, 2))  # warm-up: both workers have served
        for sessions in levels:
            row = asyncio.run(_capacity_level(base, sessions))
            print(format_capacity(row), file=sys.stderr, flush=True)
            rows.append(row)
    return rows


def format_capacity(row: CapacityRow) -> str:
    return (
        f"| {row.sessions} | {row.tests_per_s:,.0f} | {row.tests_per_s / row.sessions:,.1f}"
        f" | {row.requests.p50_ms:.2f} | {row.requests.p99_ms:.2f} | {row.tests:,} | {row.errors} |"
    )


CAPACITY_HEADER = (
    "| concurrent sessions | tests/s (all) | tests/s per session | request p50 ms | request p99 ms"
    " | tests | errors |\n|---:|---:|---:|---:|---:|---:|---:|"
)


@dataclass(frozen=True, slots=True)
class TenantResults:
    reset_direct: Summary
    reset_http: Summary
    http: dict[str, list[WrkResult]]
    capacity: list[CapacityRow]
    floor: RankingFloor
    instructions: list[bench_instructions.Count] | None  # None: valgrind is not installed


def run() -> TenantResults:
    directory = Path(tempfile.mkdtemp(prefix="fake-lucy-bench-tenants-"))
    try:
        database = directory / "tenants.sqlite3"
        build_store(database)
        print("tenants: the ranking statement alone…", file=sys.stderr, flush=True)
        floor = run_floor(database)
        print("tenants: per-tenant reset…", file=sys.stderr, flush=True)
        direct, over_http = run_reset_direct(database), run_reset_http(database)
        print("tenants: HTTP (wrk)…", file=sys.stderr, flush=True)
        http = run_http(database)
        instructions = None
        if bench_instructions.available():
            print("tenants: instructions per request (callgrind)…", file=sys.stderr, flush=True)
            instructions = bench_instructions.run(database)
        print("tenants: concurrent sessions…", file=sys.stderr, flush=True)
        capacity = run_capacity(database)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return TenantResults(direct, over_http, http, capacity, floor, instructions)


def _least_cpu(runs: list[WrkResult]) -> float | None:
    measured = [run.cpu_us for run in runs if run.cpu_us is not None]
    return min(measured) if measured else None


def _us(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _instruction_lines(counts: list[bench_instructions.Count] | None) -> list[str]:
    if counts is None:
        return ["Instructions per request: not counted (valgrind is not installed).", ""]
    return [
        "Instructions per request, counted by callgrind in the server process (benchmarks/"
        f"bench_instructions.py: the same requests, {bench_instructions.REQUESTS} of them over"
        f" {bench_instructions.CONNECTIONS} connections after a warm-up, on a copy of the same file):"
        " other work on the machine does not move it (two runs differ by a few percent: how many"
        " requests share a commit depends on timing). Not time: SQLite's C code retires"
        " about twice as many instructions per µs as the interpreter, so these ratios run above the"
        " req/s ones, the more so for the ranking recall.",
        "",
        *bench_instructions.lines(counts),
        "",
    ]


def _floor_lines(floor: RankingFloor, cpu: dict[str, float | None]) -> list[str]:
    """What the recall target leaves for everything but the ranking statement."""
    bare_post, bare_get, status = cpu["bare FastAPI POST"], cpu["bare FastAPI GET"], cpu[STATUS]
    ranking = cpu[UNCACHED]
    lines = [
        "What the recall target leaves. A recall runs SPEC 2's full-text statement (bm25 over every"
        f" match in the scope; here {floor.matches} matches) on top of what any request costs; timed in"
        f" process on the same file ({FLOOR_CALLS} calls with a new term each, the least of {FLOOR_ROUNDS}"
        " rounds):",
        "",
        "| in process, CPU µs per call | µs |",
        "|---|---:|",
        f"| the ranking statement alone (`recall.ranking_statement`, fetched) | {floor.statement_us:,.0f} |",
        f"| `recall.rank`: the statement, the candidates' rows and the order | {floor.rank_us:,.0f} |",
    ]
    if bare_post is None or bare_get is None or status is None or ranking is None:
        return [*lines, ""]
    alone = bare_post / (bare_post + floor.statement_us)
    bookkeeping = status - bare_get  # what a status call does beyond the bare GET: auth, charge, rows
    with_status = bare_post / (bare_post + floor.statement_us + bookkeeping)
    budget = bare_post / 0.40 - bare_post - floor.statement_us
    spent = ranking - bare_post - floor.statement_us
    return [
        *lines,
        "",
        f"Against the bare POST's {bare_post:,.0f} µs per request, a server whose recall did nothing but"
        f" the statement would reach {alone:.2f}× the bare POST. Adding only the work a status call does"
        f" beyond the bare GET ({bookkeeping:,.0f} µs: authentication, the charge, the ledger, journal"
        f" and event rows, the commit) gives {with_status:.2f}×. The 0.40× target leaves {budget:,.0f} µs"
        " per recall for everything but the statement: its body's parsing and schema, authentication,"
        " the charge, the ledger and journal rows, the access times, the candidates' rows and the answer."
        f" This run's recall spent {spent:,.0f} µs on them ({ranking:,.0f} µs per request in all); a status"
        f" call's share of them alone leaves {budget - bookkeeping:,.0f} µs for the rest.",
        "",
    ]


def _verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def section(results: TenantResults) -> list[str]:
    """Section 7 of ``benchmarks/RESULTS.md``."""
    best = {name: bench_http.best(runs) for name, runs in results.http.items()}
    get, post = best["bare FastAPI GET"].rps, best["bare FastAPI POST"].rps
    lines = [
        "## 7. One fake, many tenants (benchmarks/bench_tenants.py)",
        "",
        f"One SQLite file with {TENANTS} tenants of {MEMORIES:,} bulk-seeded memories each (the dev tenant"
        f" and {TENANTS - 1} made by `POST /_fake/tenants`), in the dev token's two scopes.",
        "",
        f"HTTP, as in section 1 (wrk -t{bench_http.THREADS} -c{bench_http.CONNECTIONS}"
        f" -d{bench_http.DURATION_S}s, {len(next(iter(results.http.values())))} interleaved rounds, best"
        " round shown; one worker, `--quiet` as in every section; the server log's cost is in"
        " benchmarks/console-results.md): the dev token's recall with a new query each request (every request"
        " ranks in the tenant's own index), proposal status and propose.",
        "",
        "| scenario | req/s (best) | req/s range | p50 ms | p99 ms | requests | non-2xx"
        " | server CPU µs per request |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    cpu = {name: _least_cpu(runs) for name, runs in results.http.items()}
    for name, runs in results.http.items():
        top = best[name]
        low = min(run.rps for run in runs)
        lines.append(
            f"| {name} | {top.rps:,.0f} | {low:,.0f}–{top.rps:,.0f} | {top.p50_ms:.2f} | {top.p99_ms:.2f}"
            f" | {top.requests:,} | {sum(r.non_2xx for r in runs)} | {_us(cpu[name])} |"
        )
    ratios = [
        ("recall, new query each request", UNCACHED, post, "bare FastAPI POST", "POST", 0.40),
        ("proposal status", STATUS, get, "bare FastAPI GET", "GET", 0.60),
        ("propose", PROPOSE, post, "bare FastAPI POST", "POST", 0.40),
    ]
    lines += [
        "",
        "Server CPU: the user + system time of the server process during a run, per request (the least"
        " of the rounds). With wrk on the other core the server is the bottleneck, so req/s ratios and"
        " inverse CPU ratios should agree; the CPU time does not count time the process waited for the"
        " machine, so it is the steadier of the two on a shared machine.",
        "",
        "| fake operation, 100 tenants | × bare endpoint (req/s) | × bare endpoint (CPU per request)"
        " | target | verdict (req/s) |",
        "|---|---:|---:|---:|---|",
    ]
    for name, scenario, bare_rps, bare_name, method, target in ratios:
        ratio = best[scenario].rps / bare_rps
        fake_cpu, bare_cpu = cpu[scenario], cpu[bare_name]
        by_cpu = "–" if fake_cpu is None or bare_cpu is None else f"{bare_cpu / fake_cpu:.2f}×"
        lines.append(
            f"| {name} | {ratio:.2f}× (bare {method}) | {by_cpu} | ≥ {target:.2f}×"
            f" | {_verdict(ratio >= target)} |"
        )
    lines += ["", *_instruction_lines(results.instructions), *_floor_lines(results.floor, cpu)]
    direct, over_http = results.reset_direct, results.reset_http
    lines += [
        "",
        f"Per-tenant reset with the {TENANTS} other tenants present, after 3 proposes, 3 status calls and 3"
        f" recalls of the tenant ({RESET_ROUNDS} rounds; over HTTP {HTTP_RESET_ROUNDS} rounds of a propose"
        " and a recall, then `POST /_fake/reset` with the tenant admin token):",
        "",
        "| per-tenant reset | p50 ms | p99 ms | target | verdict |",
        "|---|---:|---:|---:|---|",
        f"| in process (the domain call in its write transaction) | {direct.p50_ms:.3f} | {direct.p99_ms:.3f}"
        f" | ≤ 5 ms | {_verdict(direct.p99_ms <= 5)} |",
        f"| HTTP to fake-lucy serve (round trip) | {over_http.p50_ms:.3f} | {over_http.p99_ms:.3f} | – | – |",
        "",
        "Concurrent test sessions against `fake-lucy serve --workers 2` on the same file, with its"
        " server log on as the compose service runs it,"
        f" {CAPACITY_SECONDS:.0f} s per level: each session creates its tenant, runs tests back to back"
        " (a test: reset, propose, approve, recall, status — five requests) and deletes its tenant."
        " The load generator (one asyncio loop) runs on the same machine.",
        "",
        CAPACITY_HEADER,
        *(format_capacity(row) for row in results.capacity),
        "",
    ]
    return lines


def main() -> None:
    print("\n".join(section(run())))


if __name__ == "__main__":
    main()
