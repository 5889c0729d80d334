"""The review console under load (issue 14, must-hold 7): ``python -m benchmarks.bench_console``.

1. Server-side time of each console page with 10,000 proposals in the database (the pages are
   paged): the ASGI app called in process, timed from the call to the last byte of the answer.
   The store is filled through the v1 API itself (proposals, their journal, ledger and events),
   with 100 approved memories and a replacement of each among the pending proposals.
2. v1 throughput over HTTP (wrk against ``fake-lucy serve``, as ``make bench`` measures it) with
   and without a console's event stream open and read, and with the server log on, in
   interleaved rounds, so that the differences show against the noise between rounds.

Writes ``benchmarks/console-results.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from benchmarks.bench_http import DEV_SCOPES, MEMORIES, WrkResult, wrk, wrk_available
from benchmarks.common import (
    ADMIN_TOKEN,
    API,
    DEV_TOKEN,
    Summary,
    free_port,
    machine,
    serve_fake,
    set_credits,
    summarise,
)
from benchmarks.seeding import COMMON_TERM, RARE_TERM, Seeder
from fake_lucy.runtime import FakeLucy
from fake_lucy.settings import FakeLucySettings
from fake_lucy.testing import InProcessFake, InProcessTransport
from fake_lucy.testing.fakes import poll_until

PROPOSALS = 10_000
APPROVED = 100
PAGE_CALLS = 200
ROUNDS = 3
HTTP_SECONDS = 5
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
        fact = {"kind": "fact", "content": f"Service {n} runs on port {8000 + n}.", "scope": SCOPE}
        created = await api.post(API + "/proposals", json=fact, headers={"Idempotency-Key": uuid.uuid4().hex})
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


@contextlib.contextmanager
def _server(database: Path, *, quiet: bool) -> Iterator[str]:
    """``fake-lucy serve`` (one worker) on a seeded file, as ``make bench`` runs it; yields its URL."""
    fake = FakeLucy(FakeLucySettings(database=str(database)))
    Seeder(fake.db.conn, "tenant_dev", DEV_SCOPES).add(MEMORIES)
    fake.close()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with serve_fake(database, port, quiet=quiet):
        set_credits(base, "acct_dev", 10**8)
        yield base


@contextlib.contextmanager
def _stream_open(base: str, directory: Path) -> Iterator[Path]:
    """A console's event stream held open and read (by curl, into a file) for the block."""
    target = directory / f"events-{uuid.uuid4().hex[:8]}.txt"
    reader = subprocess.Popen(  # noqa: S603 - curl with fixed arguments
        [  # noqa: S607 - curl from PATH, as wrk is
            "curl",
            "-sN",
            "-H",
            f"Authorization: Bearer {ADMIN_TOKEN}",
            "-o",
            str(target),
            base + "/_fake/events",
        ],
    )
    try:
        poll_until(lambda: b"connected" in _read(target), "the stream did not open", 10)
        yield target
    finally:
        reader.terminate()
        reader.wait(timeout=10)


def _read(path: Path) -> bytes:
    """What the stream has written to ``path`` so far (nothing before the file exists)."""
    return path.read_bytes() if path.exists() else b""


def _until_streamed(base: str, events: Path) -> None:
    """Until the stream has written the event of the server's newest request to its file."""
    newest = httpx.get(
        base + "/_fake/requests", params={"limit": 1}, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    newest.raise_for_status()
    request_id = newest.json()["items"][-1]["request_id"].encode()
    poll_until(lambda: request_id in events.read_bytes(), "the stream did not reach the newest request", 10)


def _http_with_and_without_stream(directory: Path) -> tuple[dict[str, dict[str, list[WrkResult]]], int]:
    auth = {"Authorization": f"Bearer {DEV_TOKEN}", "Content-Type": "application/json"}
    recall = json.dumps({"query": f"{COMMON_TERM} {RARE_TERM}", "scope": SCOPE})
    propose = json.dumps({"kind": "fact", "content": "A streamed fact.", "scope": SCOPE})
    conditions = ("quiet", "quiet, console stream open", "server log on")
    results: dict[str, dict[str, list[WrkResult]]] = {
        op: {c: [] for c in conditions} for op in ("recall", "propose")
    }
    streamed = 0
    with (
        _server(directory / "quiet.sqlite3", quiet=True) as quiet,
        _server(directory / "log.sqlite3", quiet=False) as logged,
    ):
        for _ in range(ROUNDS):
            for condition in conditions:
                base = logged if condition == "server log on" else quiet
                with contextlib.ExitStack() as stack:
                    events = None
                    if condition == "quiet, console stream open":
                        events = stack.enter_context(_stream_open(base, directory))
                    for op, body in (("recall", recall), ("propose", propose)):
                        path = "/recall" if op == "recall" else "/proposals"
                        result = wrk(
                            f"{op}, {condition}",
                            base + API + path,
                            method="POST",
                            body=body,
                            headers=auth,
                            unique_key=op == "propose",
                            duration_s=HTTP_SECONDS,
                        )
                        results[op][condition].append(result)
                        _progress(f"  {op}, {condition}: {result.rps:,.0f} req/s")
                    if events is not None:
                        _until_streamed(base, events)
                        streamed += events.read_bytes().count(b"\nid: ") + events.read_bytes().startswith(
                            b"id: "
                        )
    return results, streamed


async def _console_pages(directory: Path) -> dict[str, Summary]:
    fake = InProcessFake(directory / "console.sqlite3")
    timed = Timed(fake.app)
    try:
        async with fake.client() as api, fake.client(fake.admin_token) as admin:
            _progress(f"filling the store with {PROPOSALS:,} proposals over v1 …")
            await _fill(api, admin)
            _progress("console pages …")
            return await _pages(fake, timed)
    finally:
        await fake.aclose()


def main() -> None:
    if not wrk_available():
        raise SystemExit("bench_console needs wrk (apt-get install -y wrk)")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        pages = asyncio.run(_console_pages(directory))
        _progress("v1 over HTTP (wrk) with and without a console's event stream, and with the server log …")
        http, streamed = _http_with_and_without_stream(directory)
    _write(pages, http, streamed, time.perf_counter() - started)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def _write(
    pages: dict[str, Summary], http: dict[str, dict[str, list[WrkResult]]], streamed: int, took: float
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
        "## v1 over HTTP with a console's event stream open, and with the server log",
        "",
        f"wrk -t1 -c8 -d{HTTP_SECONDS}s per run, {ROUNDS} interleaved rounds; `fake-lucy serve`, one worker,"
        f' {MEMORIES:,} seeded memories, as `make bench` runs it. "stream open": `GET /_fake/events` held'
        f' open and read by curl during the run ({streamed:,} events streamed in all). "server log on":'
        " without `--quiet`, the log going to /dev/null.",
        "",
        "| operation | condition | req/s per round | median | × quiet |",
        "|---|---|---|---:|---:|",
    ]
    for op, conditions in http.items():
        base = _median([r.rps for r in conditions["quiet"]])
        for condition, runs in conditions.items():
            rates = [r.rps for r in runs]
            lines.append(
                f"| {op} | {condition} | {', '.join(f'{v:,.0f}' for v in rates)} | {_median(rates):,.0f}"
                f" | {_median(rates) / base:.2f}× |"
            )
    RESULTS.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
