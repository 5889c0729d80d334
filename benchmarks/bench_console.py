"""The review console under load (issue 14, must-hold 7): ``python -m benchmarks.bench_console``.

1. Server-side time of each console page with 10,000 proposals in the database (the pages are
   paged): the ASGI app called in process, timed from the call to the last byte of the answer.
   The store is filled through the v1 API itself (proposals, their journal, ledger and events),
   with 100 approved memories and a replacement of each among the pending proposals.
2. v1 latency (in process, p50) with and without a console's event stream open and read,
   in interleaved rounds, so that the stream's cost shows against the noise between rounds.

Writes ``benchmarks/console-results.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from benchmarks.common import API, Summary, machine, summarise
from fake_lucy.testing import InProcessFake, InProcessTransport

PROPOSALS = 10_000
APPROVED = 100
PAGE_CALLS = 200
V1_CALLS = 1_000
ROUNDS = 3
TARGET_MS = 50.0
RESULTS = Path(__file__).resolve().parent / "console-results.md"
PAGES = (
    "/_fake/console/",
    "/_fake/console/?after=5000",
    "/_fake/console/proposals",
    "/_fake/console/proposals?status=pending&after=9000",
    "/_fake/console/memories?history=true",
    "/_fake/console/requests",
    "/_fake/console/credits",
    "/_fake/console/settings",
)
SCOPE = {"kind": "workspace", "id": "ws_dev"}


class Timed:
    """ASGI wrapper: the time from the call to the end of the answer's body (server side)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.samples: list[float] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        started = time.perf_counter()
        await self.app(scope, receive, send)
        self.samples.append((time.perf_counter() - started) * 1000)


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def _fill(api: httpx.AsyncClient, admin: httpx.AsyncClient) -> None:
    await admin.put("/_fake/accounts/acct_dev/credits", json={"balance": 10**8})
    memories: list[dict[str, Any]] = []
    for n in range(APPROVED):
        body = {"kind": "fact", "content": f"Service {n} runs on port {8000 + n}.", "scope": SCOPE}
        created = await api.post(API + "/proposals", json=body, headers={"Idempotency-Key": uuid.uuid4().hex})
        approved = await admin.post(f"/_fake/proposals/{created.json()['proposal']['id']}/approve")
        memories.append(approved.json()["proposal"]["memory"])
    for n in range(PROPOSALS - APPROVED):
        body: dict[str, Any] = {
            "kind": "decision",
            "content": f"Decision {n}: use tool {n % 37}.",
            "scope": SCOPE,
        }
        if n % 10 == 0:
            memory = memories[(n // 10) % APPROVED]
            body = {
                "kind": "fact",
                "content": f"Service {(n // 10) % APPROVED} runs on port {9000 + n} behind a proxy.",
                "scope": SCOPE,
                "replaces": {"memory_id": memory["id"], "version": memory["version"]},
            }
        response = await api.post(
            API + "/proposals", json=body, headers={"Idempotency-Key": uuid.uuid4().hex}
        )
        assert response.status_code == 201, response.text
        if n % 2000 == 0:
            _progress(f"  {APPROVED + n:,} proposals")


async def _pages(fake: InProcessFake, timed: Timed) -> dict[str, Summary]:
    async with httpx.AsyncClient(base_url=fake.base_url, transport=InProcessTransport(timed)) as browser:
        login = await browser.post(
            "/_fake/console/login", data={"token": fake.admin_token}, headers={"Origin": fake.base_url}
        )
        assert login.status_code == 303
        results: dict[str, Summary] = {}
        for path in PAGES:
            timed.samples.clear()
            for _ in range(PAGE_CALLS):
                response = await browser.get(path)
                assert response.status_code == 200, (path, response.status_code)
            results[path] = summarise(timed.samples)
            _progress(f"  {path}: p50 {results[path].p50_ms:.2f} ms, p99 {results[path].p99_ms:.2f} ms")
    return results


@contextlib.asynccontextmanager
async def _stream_open(admin: httpx.AsyncClient) -> AsyncIterator[list[int]]:
    """A console's event stream, open and read (counting events) for the block."""
    received = [0]

    async def read() -> None:
        async with admin.stream("GET", "/_fake/events", headers={"Accept": "text/event-stream"}) as response:
            async for line in response.aiter_lines():
                if line.startswith("id:"):
                    received[0] += 1

    task = asyncio.ensure_future(read())
    try:
        yield received
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _v1_round(api: httpx.AsyncClient, call: Callable[[], Awaitable[httpx.Response]]) -> float:
    samples = []
    for _ in range(V1_CALLS):
        started = time.perf_counter()
        response = await call()
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code < 300, response.text
    return summarise(samples).p50_ms


async def _v1_with_and_without_stream(
    api: httpx.AsyncClient, admin: httpx.AsyncClient
) -> tuple[dict[str, dict[str, list[float]]], int]:
    calls: dict[str, Callable[[], Awaitable[httpx.Response]]] = {
        "recall": lambda: api.post(
            API + "/recall", json={"query": "service port", "scope": SCOPE, "limit": 5}
        ),
        "propose": lambda: api.post(
            API + "/proposals",
            json={"kind": "fact", "content": "A streamed fact.", "scope": SCOPE},
            headers={"Idempotency-Key": uuid.uuid4().hex},
        ),
    }
    results: dict[str, dict[str, list[float]]] = {name: {"without": [], "with": []} for name in calls}
    streamed = 0
    for _ in range(ROUNDS):
        for name, call in calls.items():
            results[name]["without"].append(await _v1_round(api, call))
            async with _stream_open(admin) as received:
                results[name]["with"].append(await _v1_round(api, call))
                await asyncio.sleep(0.5)  # the stream's last poll: its events are read
                streamed += received[0]
    return results, streamed


async def main() -> None:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as directory:
        fake = InProcessFake(Path(directory) / "console.sqlite3")
        timed = Timed(fake.app)
        try:
            async with fake.client() as api, fake.client(fake.admin_token) as admin:
                _progress(f"filling the store with {PROPOSALS:,} proposals over v1 …")
                await _fill(api, admin)
                _progress("console pages …")
                pages = await _pages(fake, timed)
                _progress("v1 with and without an open event stream …")
                v1, streamed = await _v1_with_and_without_stream(api, admin)
        finally:
            await fake.aclose()
    _write(pages, v1, streamed, time.perf_counter() - started)


def _write(
    pages: dict[str, Summary], v1: dict[str, dict[str, list[float]]], streamed: int, took: float
) -> None:
    worst = max(s.p99_ms for s in pages.values())
    lines = [
        "# Console benchmark",
        "",
        f"Machine: {machine()}. `python -m benchmarks.bench_console` in {took / 60:.1f} min;"
        " figures from one run, other processes may share the machine.",
        "",
        f"## Console pages with {PROPOSALS:,} proposals (server side, in process)",
        "",
        f"{PAGE_CALLS} requests per page with a session; time from the ASGI call to the last byte. The store"
        f" was filled over v1: {APPROVED} approved memories, {PROPOSALS - APPROVED:,} pending proposals"
        " (every tenth a replacement, so the queue draws differences), their journal, ledger and events.",
        "",
        "| page | p50 ms | p99 ms | mean ms |",
        "|---|---:|---:|---:|",
        *(f"| `{path}` | {s.p50_ms:.2f} | {s.p99_ms:.2f} | {s.mean_ms:.2f} |" for path, s in pages.items()),
        "",
        f"Target ≤ {TARGET_MS:.0f} ms server side: slowest p99 {worst:.2f} ms, "
        + ("met." if worst <= TARGET_MS else "**missed**."),
        "",
        "## v1 with a console's event stream open (in process, p50 ms per round)",
        "",
        f"{ROUNDS} interleaved rounds of {V1_CALLS:,} calls per operation, without and with an open"
        f" `GET /_fake/events` being read ({streamed:,} events streamed in all).",
        "",
        "| operation | without stream | with stream | change of the medians |",
        "|---|---|---|---:|",
    ]
    for name, runs in v1.items():
        without = sorted(runs["without"])[len(runs["without"]) // 2]
        with_stream = sorted(runs["with"])[len(runs["with"]) // 2]
        lines.append(
            f"| {name} | {', '.join(f'{v:.3f}' for v in runs['without'])}"
            f" | {', '.join(f'{v:.3f}' for v in runs['with'])} | {100 * (with_stream / without - 1):+.1f}% |"
        )
    RESULTS.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(re.sub(r"\n{3,}", "\n\n", "\n".join(lines)))


if __name__ == "__main__":
    asyncio.run(main())
