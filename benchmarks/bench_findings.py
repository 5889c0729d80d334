"""What findings (SPEC 3.8) cost the hot path: the fake with its judge against the same fake without.

The judge runs in every journaled v1 request's transaction (``V1Pipeline._observe``:
``findings.observe`` and the ``finding`` events). "Judge off" is the same code with that one method
taken out (``benchmarks.judge_off``); nothing else differs, so the difference is the judge's cost.

- **HTTP**: the four scenarios of ``bench_http`` (wrk, one worker each, same seed) against both
  servers, in interleaved rounds: what ``make bench``'s ratios would lose. The difference of the
  two best rounds is within noise when it is no larger than the spread of one server's own rounds
  (the larger of the two spreads: each best is only known that well).
- **In process**: the CPU time of one call through the ASGI app (no socket, no client: the app's own
  work, so the judge's share is the largest it can look), with the judge switched on and off
  between rounds of the same app and database; the least of the rounds of each. The difference of
  two such figures is only known to a few µs, so the judge is also timed directly: rounds in which
  ``V1Pipeline._observe`` itself is clocked (``perf_counter_ns`` around each call), the least mean.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import bench_http
from benchmarks.common import ADMIN_TOKEN, API, DEV_TOKEN
from benchmarks.judge_off import judge_off
from benchmarks.seeding import COMMON_TERM, RARE_TERM, Seeder
from fake_lucy.app import create_app
from fake_lucy.domain import findings
from fake_lucy.domain.principals import Scope
from fake_lucy.http import pipeline
from fake_lucy.runtime import FakeLucy
from fake_lucy.settings import FakeLucySettings

OFF = " (judge off)"
HTTP_ROUNDS = 3
CALLS = 400
WARMUP = 100  # calls before the rounds of each operation
ROUNDS = 15  # per setting, alternating
MEMORIES = 1_000
SCOPE = {"kind": "workspace", "id": "ws_dev"}
PROPOSAL = {
    "kind": "fact",
    "content": "The team approved Postgres 16 for the billing service.",
    "scope": SCOPE,
}
OPERATIONS = ("fake proposal status", "fake recall", bench_http.UNCACHED_RECALL, "fake propose")
# In process only: each poll is of another proposal, fewer than ten polls each, so its series is never
# reported and every poll is judged in full (a polite client's few polls). The HTTP scenario polls one
# proposal in a tight loop: after its tenth poll the series is reported and settled, and a settled
# poll costs the judge one EXISTS in the request's state statement (``findings.poll_is_settled``).
UNSETTLED_STATUS = "fake proposal status, each poll of another proposal"


@dataclass(frozen=True, slots=True)
class HttpRow:
    name: str
    on: list[float]  # requests/s of each round
    off: list[float]

    @property
    def cost(self) -> float:
        """The share of the judge-off server's best throughput that the judge takes."""
        return 1 - max(self.on) / max(self.off)

    @property
    def noise(self) -> float:
        """The spread of a server's own rounds, the larger of the two."""
        return max(1 - min(rounds) / max(rounds) for rounds in (self.on, self.off))


@dataclass(frozen=True, slots=True)
class CpuRow:
    name: str
    on_us: float
    off_us: float
    judge_us: float  # the judge timed directly: the least mean per call of the timed rounds

    @property
    def cost_us(self) -> float:
        return self.on_us - self.off_us

    @property
    def share(self) -> float:
        """The judge's share of the app's time per call, as timed directly."""
        return self.judge_us / self.on_us


def run_http(rounds: int = HTTP_ROUNDS) -> list[HttpRow]:
    if not bench_http.wrk_available():
        raise RuntimeError("wrk is not installed (apt-get install -y wrk); make bench installs it")
    directory = Path(tempfile.mkdtemp(prefix="fake-lucy-bench-findings-"))
    try:
        with (
            bench_http.fake_scenarios(directory) as on,
            bench_http.fake_scenarios(directory, module="benchmarks.judge_off", label=OFF) as off,
        ):
            scenarios = [*on, *off]
            for scenario in scenarios:
                scenario.run(bench_http.WARMUP_S)
            results: dict[str, list[float]] = {scenario.name: [] for scenario in scenarios}
            for _ in range(rounds):
                for pair in zip(on, off, strict=True):
                    for scenario in pair:
                        result = scenario.run(bench_http.DURATION_S)
                        print(bench_http.format_result(result), file=sys.stderr, flush=True)
                        results[scenario.name].append(result.rps)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return [HttpRow(name, results[name], results[name + OFF]) for name in OPERATIONS]


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes


Send = Callable[[], Awaitable[Answer]]


def run_in_process() -> list[CpuRow]:
    """Pinned to one core (where the system allows it): the rounds then differ less."""
    directory = Path(tempfile.mkdtemp(prefix="fake-lucy-bench-findings-"))
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    try:
        if cores:
            os.sched_setaffinity(0, {max(cores)})
        return asyncio.run(_in_process(directory))
    finally:
        if cores:
            os.sched_setaffinity(0, cores)
        shutil.rmtree(directory, ignore_errors=True)


async def _in_process(directory: Path) -> list[CpuRow]:
    fake = FakeLucy(FakeLucySettings(database=str(directory / "cpu.sqlite3")))
    Seeder(
        fake.db.conn, "tenant_dev", [Scope("workspace", "ws_dev"), Scope("project", "project_example")]
    ).add(MEMORIES)
    app = create_app(fake)

    async def call(method: str, path: str, body: Any = None, token: str = DEV_TOKEN, key: str = "") -> Answer:
        raw = b"" if body is None else json.dumps(body).encode()
        headers = [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {token}".encode())]
        if raw:
            headers += [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
        if key:
            headers.append((b"idempotency-key", key.encode()))
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8787),
            "state": {},
        }
        status, answer = 0, b""
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                await asyncio.Event().wait()  # no disconnect while the app answers
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status, answer
            if message["type"] == "http.response.start":
                status = message["status"]
            else:
                answer += message.get("body", b"")

        await app(scope, receive, send)  # type: ignore[arg-type]
        return Answer(status, answer)

    assert (
        await call("PUT", "/_fake/accounts/acct_dev/credits", {"balance": 10**8}, ADMIN_TOKEN)
    ).status == 200
    fresh = itertools.count()
    recall = {"query": f"{COMMON_TERM} {RARE_TERM}", "scope": SCOPE}
    created = await call("POST", f"{API}/proposals", PROPOSAL, key="bench-status")
    assert created.status == 201, created
    proposal_id = json.loads(created.body)["proposal"]["id"]
    # each operation's calls: the warm-up, the rounds with the judge on and off, the timed rounds
    calls = WARMUP + 3 * ROUNDS * CALLS
    polled = itertools.cycle(await _proposals(call, calls // (findings.FLAT_POLLS - 1) + 1))
    operations: dict[str, Send] = {
        "fake proposal status": lambda: call("GET", f"{API}/proposals/{proposal_id}"),
        "fake recall": lambda: call("POST", f"{API}/recall", recall),
        bench_http.UNCACHED_RECALL: lambda: call(
            "POST", f"{API}/recall", {**recall, "query": f"{recall['query']} n{next(fresh)}x"}
        ),
        "fake propose": lambda: call("POST", f"{API}/proposals", PROPOSAL, key=uuid.uuid4().hex),
        UNSETTLED_STATUS: lambda: call("GET", f"{API}/proposals/{next(polled)}"),
    }
    judged = pipeline.V1Pipeline._observe
    rows = []
    for name, send in operations.items():
        for _ in range(WARMUP):
            answered = await send()
            assert answered.status in (200, 201), answered
        best = {True: float("inf"), False: float("inf")}
        for _ in range(ROUNDS):
            for on in (True, False):
                if on:
                    pipeline.V1Pipeline._observe = judged  # type: ignore[method-assign]
                else:
                    judge_off()
                started = time.process_time()
                for _ in range(CALLS):
                    await send()
                best[on] = min(best[on], (time.process_time() - started) / CALLS * 1e6)
        pipeline.V1Pipeline._observe = judged  # type: ignore[method-assign]
        rows.append(CpuRow(name, best[True], best[False], await _timed_judge(send, judged)))
    # What each row measured: one proposal's polling was reported (in the warm-up, so that row's
    # polls were settled), no other proposal's series was, and nothing else was a finding.
    listing = await call("GET", "/_fake/findings", token=ADMIN_TOKEN)
    found = [item["code"] for item in json.loads(listing.body)["items"]]
    assert found == ["status_polling_unbounded"], found
    fake.close()
    return rows


async def _proposals(call: Callable[..., Awaitable[Answer]], count: int) -> list[str]:
    """``count`` new pending proposals' ids."""
    ids = []
    for n in range(count):
        created = await call("POST", f"{API}/proposals", {**PROPOSAL, "content": f"Fact {n}."}, key=f"p-{n}")
        assert created.status == 201, created
        ids.append(json.loads(created.body)["proposal"]["id"])
    return ids


async def _timed_judge(send: Send, judged: Callable[..., list[Any]]) -> float:
    """µs per call spent in ``V1Pipeline._observe`` (the judge and its events): the least mean of
    ``ROUNDS`` rounds of ``CALLS`` calls, each call clocked. Elapsed time (``perf_counter_ns``, a
    fraction of a µs to read where a CPU clock costs a system call): on one pinned core with nothing
    to wait for, the same as the CPU time the rest of the table shows."""
    spent = [0]

    def clocked(self: pipeline.V1Pipeline, *args: Any, **kwargs: Any) -> list[Any]:
        started = time.perf_counter_ns()
        try:
            return judged(self, *args, **kwargs)
        finally:
            spent[0] += time.perf_counter_ns() - started

    pipeline.V1Pipeline._observe = clocked  # type: ignore[method-assign]
    try:
        best = float("inf")
        for _ in range(ROUNDS):
            spent[0] = 0
            for _ in range(CALLS):
                await send()
            best = min(best, spent[0] / CALLS / 1e3)
    finally:
        pipeline.V1Pipeline._observe = judged  # type: ignore[method-assign]
    return best


def section(http: list[HttpRow], cpu: list[CpuRow]) -> list[str]:
    lines = [
        "## 8. Findings: the judge's cost on the hot path",
        "",
        "The same fake with and without its findings judge (SPEC 3.8; `benchmarks/judge_off.py` takes"
        " out `V1Pipeline._observe`, nothing else): HTTP under wrk as in section 1, each server's"
        f" rounds interleaved ({HTTP_ROUNDS} each); and the app's own CPU time per call in process"
        f" (direct ASGI calls on one core, the least of {ROUNDS} alternating rounds × {CALLS} calls each),"
        " and the judge timed directly in the same app (each call of `V1Pipeline._observe` clocked,"
        f" the least mean of {ROUNDS} rounds): the difference of two CPU figures is only known to a few"
        " µs, the timed judge to a fraction of one. The status scenario polls one proposal in a tight"
        " loop, as wrk does: after its tenth poll the proposal's series is reported (a finding) and"
        " settled, and the judge of each later poll is one `EXISTS` in the request's state statement"
        " (`findings.poll_is_settled`), which the judge-off app runs too, so neither figure holds it"
        " (0.3–1.8 µs, timed on the statement alone). A polite client's few polls are judged in full:"
        " the in-process row that polls another proposal each time (fewer than ten polls each, none"
        " reported: the run checks that the only finding is the tight loop's).",
        "",
        "| operation | req/s judge on (best) | req/s judge off (best) | cost | noise (rounds' spread)"
        " | verdict | CPU µs on | CPU µs off | difference µs | judge timed µs | its share of the app |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    by_name = {row.name: row for row in http}
    for inproc in cpu:
        measured = by_name.get(inproc.name)
        over_http = " — | — | — | — | — in process only"
        if measured is not None:
            verdict = "within noise" if measured.cost <= measured.noise else "**above noise**"
            over_http = (
                f" {max(measured.on):,.0f} | {max(measured.off):,.0f} | {measured.cost * 100:+.1f} %"
                f" | {measured.noise * 100:.1f} % | {verdict}"
            )
        lines.append(
            f"| {inproc.name.removeprefix('fake ')} |{over_http}"
            f" | {inproc.on_us:.0f} | {inproc.off_us:.0f} | {inproc.cost_us:+.0f}"
            f" | {inproc.judge_us:.1f} | {inproc.share * 100:.1f} % |"
        )
    return [*lines, ""]


if __name__ == "__main__":
    print("\n".join(section(run_http(), run_in_process())))
