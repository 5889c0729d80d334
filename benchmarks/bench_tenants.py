"""One fake shared by many tenants (SPEC 3.6, issue 15 point 5).

``python -m benchmarks.bench_tenants`` (not part of ``make bench``'s default run; needs wrk):

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
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks import bench_http
from benchmarks.bench_http import Scenario, WrkResult
from benchmarks.common import ADMIN_TOKEN, API, DEV_TOKEN, Summary, free_port, process, set_credits, summarise
from benchmarks.seeding import COMMON_TERM, RARE_TERM, Seeder
from fake_lucy.domain import tenants
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


def serve(database: Path, port: int, workers: int = 1) -> contextlib.AbstractContextManager[None]:
    args = [sys.executable, "-m", "fake_lucy", "serve", "--port", str(port), "--database", str(database)]
    return process([*args, "--workers", str(workers)], f"http://127.0.0.1:{port}/healthz")


# -- 1. HTTP under wrk ---------------------------------------------------------------------------


@contextlib.contextmanager
def _fake(database: Path) -> Iterator[list[Scenario]]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {DEV_TOKEN}", "Content-Type": "application/json"}
    new_query = {"query": f"{COMMON_TERM} {RARE_TERM} __N__", "scope": {"kind": "workspace", "id": "ws_dev"}}
    with serve(database, port):
        set_credits(base, "acct_dev", 100_000_000)
        created = httpx.post(
            f"{base}{API}/proposals", json=PROPOSAL, headers={**auth, "Idempotency-Key": "bench-status"}
        )
        created.raise_for_status()
        proposal_id = created.json()["proposal"]["id"]
        yield [
            Scenario(UNCACHED, f"{base}{API}/recall", "POST", json.dumps(new_query), auth, unique_body=True),
            Scenario(STATUS, f"{base}{API}/proposals/{proposal_id}", headers=auth),
            Scenario(PROPOSE, f"{base}{API}/proposals", "POST", json.dumps(PROPOSAL), auth, True),
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
    with serve(database, port, workers=2):
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


def main() -> None:
    directory = Path(tempfile.mkdtemp(prefix="fake-lucy-bench-tenants-"))
    try:
        database = directory / "tenants.sqlite3"
        started = time.perf_counter()
        build_store(database)
        print(f"store: {TENANTS} tenants × {MEMORIES:,} memories in {time.perf_counter() - started:.1f} s")
        direct = run_reset_direct(database)
        over_http = run_reset_http(database)
        print("| per-tenant reset | p50 ms | p99 ms |\n|---|---:|---:|")
        print(f"| in process (domain call in its transaction) | {direct.p50_ms:.3f} | {direct.p99_ms:.3f} |")
        print(f"| HTTP to fake-lucy serve (round trip) | {over_http.p50_ms:.3f} | {over_http.p99_ms:.3f} |")
        results = run_http(database)
        best = {name: bench_http.best(runs) for name, runs in results.items()}
        print("| scenario | req/s (best) | p50 ms | p99 ms | requests | non-2xx | socket errors |")
        for result in best.values():
            print(bench_http.format_result(result))
        get, post = best["bare FastAPI GET"].rps, best["bare FastAPI POST"].rps
        print(f"recall, new query: {best[UNCACHED].rps / post:.2f}× bare POST (target ≥ 0.40×)")
        print(f"status: {best[STATUS].rps / get:.2f}× bare GET (target ≥ 0.60×)")
        print(f"propose: {best[PROPOSE].rps / post:.2f}× bare POST (target ≥ 0.40×)")
        rows = run_capacity(database)
        print(CAPACITY_HEADER)
        for row in rows:
            print(format_capacity(row))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
