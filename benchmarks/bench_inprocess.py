"""In process: one call through the fixture's ASGI path against a respx stub, and the per-test reset.

The fixture's path is ``InProcessFake.client()``: an ``httpx.AsyncClient`` whose transport calls
the ASGI app in this process (no socket), on a real SQLite file. The stub is what a user writes
by hand instead: ``respx`` routes on a plain ``httpx.AsyncClient`` returning a canned response (the
body the fake returned for the same call). Both send the same request; times are per call. The
store holds 100 bulk-seeded memories (``seeding.py``) for the recall. "recall" repeats one query
(answered from recall's cache of ranked answers after the first call); "recall, new query each
call" adds a unique term that matches nothing, so every call ranks.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import respx

from benchmarks.common import API, Summary, summarise
from benchmarks.seeding import COMMON_TERM, RARE_TERM, Seeder
from fake_lucy.domain.principals import Scope
from fake_lucy.testing import InProcessFake

CALLS = 2_000
ROUNDS = 3
RESETS = 500
PROPOSAL = {
    "kind": "fact",
    "content": "The team approved Postgres 16 for the billing service.",
    "scope": {"kind": "workspace", "id": "ws_dev"},
}
MEMORIES = 100
RECALL = {"query": f"{COMMON_TERM} {RARE_TERM}", "scope": {"kind": "workspace", "id": "ws_dev"}, "limit": 5}


@dataclass(frozen=True, slots=True)
class CallRow:
    operation: str
    fixture: Summary
    stub: Summary

    @property
    def ratio(self) -> float:
        return self.fixture.p50_ms / self.stub.p50_ms


@dataclass(frozen=True, slots=True)
class ResetRow:
    name: str
    summary: Summary


Call = Callable[[httpx.AsyncClient], Awaitable[httpx.Response]]


async def _time(client: httpx.AsyncClient, call: Call) -> Summary:
    for _ in range(100):  # warm-up
        (await call(client)).raise_for_status()
    best: Summary | None = None
    for _ in range(ROUNDS):  # the quietest of a few rounds: other processes share the machine
        samples = []
        for _ in range(CALLS):
            started = time.perf_counter()
            response = await call(client)
            samples.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
        summary = summarise(samples)
        if best is None or summary.p50_ms < best.p50_ms:
            best = summary
    assert best is not None
    return best


async def _calls(fake: InProcessFake) -> list[CallRow]:
    async with fake.client() as http:
        created = await http.post(f"{API}/proposals", json=PROPOSAL, headers={"Idempotency-Key": "seed"})
        created.raise_for_status()
        proposal_id = created.json()["proposal"]["id"]

        async def status(client: httpx.AsyncClient) -> httpx.Response:
            return await client.get(f"{API}/proposals/{proposal_id}")

        async def recall(client: httpx.AsyncClient) -> httpx.Response:
            return await client.post(f"{API}/recall", json=RECALL)

        fresh = itertools.count()

        async def recall_new_query(client: httpx.AsyncClient) -> httpx.Response:
            query = f"{RECALL['query']} n{next(fresh)}"
            return await client.post(f"{API}/recall", json={**RECALL, "query": query})

        async def propose(client: httpx.AsyncClient) -> httpx.Response:
            key = uuid.uuid4().hex
            return await client.post(f"{API}/proposals", json=PROPOSAL, headers={"Idempotency-Key": key})

        operations: list[tuple[str, str, str, Call]] = [
            ("proposal status", "GET", f"{API}/proposals/{proposal_id}", status),
            ("recall", "POST", f"{API}/recall", recall),
            ("recall, new query each call", "POST", f"{API}/recall", recall_new_query),
            ("propose", "POST", f"{API}/proposals", propose),
        ]
        rows = []
        for name, method, path, call in operations:
            canned = await call(http)
            fixture = await _time(http, call)
            with respx.mock(base_url=fake.base_url, assert_all_called=False) as router:
                router.route(method=method, path=path).mock(
                    return_value=httpx.Response(
                        canned.status_code, content=canned.content, headers=canned.headers
                    )
                )
                async with httpx.AsyncClient(
                    base_url=fake.base_url, headers={"Authorization": f"Bearer {fake.dev_token}"}
                ) as plain:
                    stub = await _time(plain, call)
            rows.append(CallRow(name, fixture, stub))
    return rows


async def _resets(fake: InProcessFake) -> list[ResetRow]:
    clean = [fake.reset() for _ in range(RESETS)]
    dirty = []
    async with fake.client() as http:
        for _ in range(RESETS // 5):
            # What a typical test leaves behind: a few proposals, recalls and a status call.
            for _ in range(3):
                response = await http.post(
                    f"{API}/proposals", json=PROPOSAL, headers={"Idempotency-Key": uuid.uuid4().hex}
                )
                await http.get(f"{API}/proposals/{response.json()['proposal']['id']}")
                await http.post(f"{API}/recall", json=RECALL)
            dirty.append(fake.reset())
    return [
        ResetRow("reset of a clean database (direct)", summarise(clean)),
        ResetRow("reset after 3 propose + 3 status + 3 recall", summarise(dirty)),
    ]


async def _run(directory: Path) -> tuple[list[CallRow], list[ResetRow]]:
    fake = InProcessFake(directory / "inprocess.sqlite3")
    try:
        fake.fake.db.conn.execute("UPDATE accounts SET balance = 100000000")
        scopes = [Scope("workspace", "ws_dev"), Scope("project", "project_example")]
        Seeder(fake.fake.db.conn, "tenant_dev", scopes).add(MEMORIES)
        calls = await _calls(fake)
        resets = await _resets(fake)
    finally:
        await fake.aclose()
    return calls, resets


def run() -> tuple[list[CallRow], list[ResetRow]]:
    with tempfile.TemporaryDirectory(prefix="fake-lucy-bench-inprocess-") as directory:
        return asyncio.run(_run(Path(directory)))


if __name__ == "__main__":
    call_rows, reset_rows = run()
    for row in call_rows:
        print(
            f"{row.operation:16} fixture p50 {row.fixture.p50_ms:.3f} p99 {row.fixture.p99_ms:.3f}"
            f"  stub p50 {row.stub.p50_ms:.3f} p99 {row.stub.p99_ms:.3f}  ratio {row.ratio:.2f}"
        )
    for reset in reset_rows:
        print(f"{reset.name:48} p50 {reset.summary.p50_ms:.3f} p99 {reset.summary.p99_ms:.3f}")
