"""A slow recall stalls nobody (issue 18, point 5): two scenarios over HTTP on a 3,000-memory store.

1. Long query: a 1,000-character recall (the vocabulary's most frequent words, so most of the store
   matches) against a recall with one matching term, one request at a time to ``fake-lucy serve``
   with one worker. Each request starts with a unique term that matches nothing, so that none is
   served from recall's cache of ranked answers. Target: long p50 ≤ 10× one-term p50.
2. Stall: proposal status p99 on ``fake-lucy serve --workers 2`` while four clients (a separate
   process, four threads) loop long recalls, against its p99 on the same fake idle.
   Target: loaded p99 ≤ 3× idle p99.

``python -m benchmarks.bench_recall_stall`` runs both and writes their section into
``benchmarks/RESULTS.md`` (replacing an earlier one); ``make bench`` runs them through ``run_all``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import random
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.common import (
    API,
    DEV_TOKEN,
    Summary,
    free_port,
    machine,
    serve_fake,
    set_credits,
    summarise,
)
from benchmarks.seeding import COMMON_TERM, Seeder, vocabulary
from fake_lucy.domain.principals import Scope
from fake_lucy.runtime import FakeLucy
from fake_lucy.settings import FakeLucySettings

MEMORIES = 3_000
QUERY_CHARS = 1_000
RECALLS = 200  # per query shape, scenario 1
STATUS_CALLS = 1_000  # per state, scenario 2
LOAD_CLIENTS = 4
LOAD_WARMUP_RECALLS = 8  # long recalls the load must have answered before status is measured
DEV_SCOPES = [Scope("workspace", "ws_dev"), Scope("project", "project_example")]
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
SECTION = "## 6. A slow recall stalls nobody"
AUTH = {"Authorization": f"Bearer {DEV_TOKEN}"}


_FREQUENT = vocabulary()[:400]  # the store's most frequent words (the Seeder's default seed)


def long_query(unique: str) -> str:
    """``unique`` and then the store's most frequent words, shuffled, up to 1,000 characters."""
    words = list(_FREQUENT)
    rng = random.Random(unique)  # noqa: S311 - synthetic text
    rng.shuffle(words)
    text = unique
    for word in words:
        if len(text) + 1 + len(word) > QUERY_CHARS:
            break
        text += " " + word
    return text


@contextlib.contextmanager
def _store() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="fake-lucy-bench-stall-"))
    try:
        database = directory / "stall.sqlite3"
        fake = FakeLucy(FakeLucySettings(database=str(database)))
        Seeder(fake.db.conn, "tenant_dev", DEV_SCOPES).add(MEMORIES)
        fake.close()
        yield database
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def _serve(database: Path, workers: int) -> Iterator[str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with serve_fake(database, port, workers=workers):
        set_credits(base, "acct_dev", 100_000_000)
        yield base


def _timed_recalls(client: httpx.Client, queries: list[str]) -> Summary:
    samples = []
    for query in queries:
        started = time.perf_counter()
        response = client.post(f"{API}/recall", json={"query": query})
        samples.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    return summarise(samples)


@dataclass(frozen=True, slots=True)
class LongQueryResult:
    one_term: Summary
    long: Summary
    matches_one_term: int
    terms_in_long: int

    @property
    def ratio(self) -> float:
        return self.long.p50_ms / self.one_term.p50_ms


def long_query_scenario(database: Path) -> LongQueryResult:
    with _serve(database, workers=1) as base, httpx.Client(base_url=base, headers=AUTH) as client:
        # warm-up: connections, the principal cache, SQLite's pages
        _timed_recalls(client, [f"warm{n}x {COMMON_TERM}" for n in range(20)])
        _timed_recalls(client, [long_query(f"warm{n}y") for n in range(5)])
        one_term = _timed_recalls(client, [f"u{n}x {COMMON_TERM}" for n in range(RECALLS)])
        long = _timed_recalls(client, [long_query(f"v{n}x") for n in range(RECALLS)])
        matches = client.post(f"{API}/recall", json={"query": COMMON_TERM, "limit": 50}).json()["memories"]
    terms = len(set(re.findall(r"[^\W_]+", long_query("v0x").lower())))
    return LongQueryResult(one_term, long, len(matches), terms)


def _client(base: str, stop: threading.Event, answered: Any, warmed: Any) -> None:
    """One client: long recalls back to back until ``stop``."""
    n = 0
    with httpx.Client(base_url=base, headers=AUTH, timeout=60) as client:
        while not stop.is_set():
            n += 1
            query = long_query(f"{threading.get_ident()}n{n}x")
            client.post(f"{API}/recall", json={"query": query}).raise_for_status()
            with answered.get_lock():
                answered.value += 1
                if answered.value >= LOAD_WARMUP_RECALLS:
                    warmed.set()


def load(base: str, answered: Any, warmed: Any, stop: Any) -> None:
    """The load process: ``LOAD_CLIENTS`` threads looping long recalls until ``stop`` is set."""
    done = threading.Event()
    threads = [
        threading.Thread(target=_client, args=(base, done, answered, warmed)) for _ in range(LOAD_CLIENTS)
    ]
    for thread in threads:
        thread.start()
    stop.wait()
    done.set()
    for thread in threads:
        thread.join()


@dataclass(frozen=True, slots=True)
class StallResult:
    idle: Summary
    loaded: Summary
    recalls_during: int
    seconds_during: float

    @property
    def ratio(self) -> float:
        return self.loaded.p99_ms / self.idle.p99_ms


def _timed_status(client: httpx.Client, proposal_id: str) -> Summary:
    samples = []
    for _ in range(STATUS_CALLS):
        started = time.perf_counter()
        response = client.get(f"{API}/proposals/{proposal_id}")
        samples.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    return summarise(samples)


def stall_scenario(database: Path) -> StallResult:
    with _serve(database, workers=2) as base, httpx.Client(base_url=base, headers=AUTH) as client:
        created = client.post(
            f"{API}/proposals",
            json={"kind": "fact", "content": "Status under load.", "scope": DEV_SCOPES[0].as_dict()},
            headers={"Idempotency-Key": "bench-stall-status"},
        )
        created.raise_for_status()
        proposal_id = created.json()["proposal"]["id"]
        _timed_status(client, proposal_id)  # warm-up, both workers
        idle = _timed_status(client, proposal_id)
        context = multiprocessing.get_context("spawn")
        answered, warmed, stop = context.Value("i", 0), context.Event(), context.Event()
        clients = context.Process(target=load, args=(base, answered, warmed, stop))
        clients.start()
        try:
            if not warmed.wait(timeout=120):
                raise RuntimeError("the long recalls did not start")
            before = answered.value
            started = time.perf_counter()
            loaded = _timed_status(client, proposal_id)
            seconds = time.perf_counter() - started
            after = answered.value
        finally:
            stop.set()
            clients.join(timeout=120)
    return StallResult(idle, loaded, after - before, seconds)


def section(long: LongQueryResult, stall: StallResult) -> list[str]:
    def verdict(ok: bool) -> str:
        return "met" if ok else "**missed**"

    return [
        SECTION,
        "",
        f"One store of {MEMORIES:,} bulk-seeded memories in the dev token's two scopes"
        " (benchmarks/seeding.py), `fake-lucy serve` as a separate process, requests over HTTP from"
        " one client one at a time (benchmarks/bench_recall_stall.py). Every recall starts with a"
        " unique term that matches nothing, so none is answered from recall's cache of ranked answers.",
        "",
        f"1. A {QUERY_CHARS:,}-character query (the store's most frequent words: {long.terms_in_long}"
        " distinct terms, of which the first 32 count) against one matching term"
        f" (`{COMMON_TERM}`, in ~1 memory in 10), {RECALLS} recalls each, one worker:",
        "",
        "| recall | p50 ms | p99 ms |",
        "|---|---:|---:|",
        f"| one matching term | {long.one_term.p50_ms:.2f} | {long.one_term.p99_ms:.2f} |",
        f"| {QUERY_CHARS:,}-character query | {long.long.p50_ms:.2f} | {long.long.p99_ms:.2f} |",
        "",
        f"Long ÷ one term (p50): {long.ratio:.1f}× (target ≤ 10×: {verdict(long.ratio <= 10)}).",
        "",
        f"2. Proposal status, {STATUS_CALLS:,} calls, on `--workers 2`: idle, then while"
        f" {LOAD_CLIENTS} clients (another process) loop {QUERY_CHARS:,}-character recalls"
        f" ({stall.recalls_during} of them answered during the measurement,"
        f" {stall.recalls_during / stall.seconds_during:.0f}/s):",
        "",
        "| proposal status | p50 ms | p99 ms |",
        "|---|---:|---:|",
        f"| idle | {stall.idle.p50_ms:.2f} | {stall.idle.p99_ms:.2f} |",
        f"| during long recalls | {stall.loaded.p50_ms:.2f} | {stall.loaded.p99_ms:.2f} |",
        "",
        f"Loaded ÷ idle (p99): {stall.ratio:.1f}× (target ≤ 3×: {verdict(stall.ratio <= 3)}).",
        "",
    ]


def run() -> list[str]:
    with _store() as database:
        long = long_query_scenario(database)
        stall = stall_scenario(database)
    return section(long, stall)


def write_section(lines: list[str]) -> None:
    """Put this section into RESULTS.md: replace an earlier one, else insert it before the notes."""
    text = RESULTS.read_text(encoding="utf-8")
    block = "\n".join(lines)
    existing = re.search(rf"^{re.escape(SECTION)}\n.*?(?=^## )", text, flags=re.S | re.M)
    if existing is not None:
        text = text[: existing.start()] + block + "\n" + text[existing.end() :]
    else:
        notes = text.index("## What was changed for speed")
        text = text[:notes] + block + "\n" + text[notes:]
    RESULTS.write_text(text, encoding="utf-8")


def main() -> None:
    started = time.perf_counter()
    lines = run()
    lines.insert(2, f"Machine: {machine()}; this section took {time.perf_counter() - started:.0f} s.\n")
    print("\n".join(lines))
    write_section(lines)


if __name__ == "__main__":
    main()
