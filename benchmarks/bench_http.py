"""Throughput and latency over HTTP with wrk: the fake, a bare FastAPI endpoint, and moto's SQS.

Every server is a separate process with one worker on 127.0.0.1: ``fake-lucy serve`` (uvicorn),
``benchmarks.bare_app`` (the same uvicorn configuration; the stack's ceiling) and ``moto_server``
(moto's own server: werkzeug, threaded). Each scenario is a short wrk warm-up, then a measured run
with one wrk thread and a few connections; ``benchmarks/wrk/request.lua`` builds the requests
(a unique ``Idempotency-Key`` per propose; for the uncached recall, a unique extra query term per
request) and reports requests/s, p50/p99 and error counts.

Recall keeps ranked answers per index state (``domain.recall.RecallCache``), so "fake recall", one
query repeated against an unchanged store, is answered from that cache after its first request;
"fake recall, new query each request" adds a term that matches nothing but makes every query new,
so each request ranks every match as a first recall does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks.common import (
    API,
    DEV_TOKEN,
    ROOT,
    cpu_seconds,
    free_port,
    process,
    serve_fake,
    set_credits,
)
from benchmarks.seeding import COMMON_TERM, RARE_TERM, Seeder
from fake_lucy.domain.principals import Scope
from fake_lucy.runtime import FakeLucy
from fake_lucy.settings import FakeLucySettings

SCRIPT = ROOT / "benchmarks" / "wrk" / "request.lua"
THREADS = 1
CONNECTIONS = 8
DURATION_S = int(os.environ.get("BENCH_HTTP_SECONDS", "6"))
ROUNDS = int(os.environ.get("BENCH_HTTP_ROUNDS", "3"))
WARMUP_S = 2
MEMORIES = 1_000
UNCACHED_RECALL = "fake recall, new query each request"
DEV_SCOPES = [Scope("workspace", "ws_dev"), Scope("project", "project_example")]
SQS_AUTH = (
    "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=0"
)


@dataclass(frozen=True, slots=True)
class WrkResult:
    name: str
    requests: int
    rps: float
    p50_ms: float
    p99_ms: float
    non_2xx: int
    socket_errors: int
    # the server process's CPU time (user + system) per request during the run, in µs; None when
    # the server's pid is not known or /proc cannot be read
    cpu_us: float | None = None


def wrk_available() -> bool:
    return shutil.which("wrk") is not None


def wrk(
    name: str,
    url: str,
    *,
    method: str = "GET",
    body: str | None = None,
    headers: dict[str, str] | None = None,
    unique_key: bool = False,
    unique_body: bool = False,
    duration_s: int = DURATION_S,
) -> WrkResult:
    env = {
        **os.environ,
        "WRK_METHOD": method,
        "WRK_HEADERS": "\n".join(f"{k}: {v}" for k, v in (headers or {}).items()),
    }
    if body is not None:
        env["WRK_BODY"] = body
    if unique_key:
        env["WRK_UNIQUE_KEY"] = "bench-" + uuid.uuid4().hex[:12]
    if unique_body:
        env["WRK_UNIQUE_BODY"] = "1"
    completed = subprocess.run(  # noqa: S603 - wrk from PATH with fixed arguments
        [  # noqa: S607
            "wrk",
            f"-t{THREADS}",
            f"-c{CONNECTIONS}",
            f"-d{duration_s}s",
            "--timeout",
            "5s",
            "-s",
            str(SCRIPT),
            url,
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(row for row in completed.stdout.splitlines() if row.startswith("WRK_JSON "))
    data = json.loads(line.removeprefix("WRK_JSON "))
    return WrkResult(
        name=name,
        requests=data["requests"],
        rps=data["requests"] / (data["duration_us"] / 1e6),
        p50_ms=data["p50_us"] / 1000,
        p99_ms=data["p99_us"] / 1000,
        non_2xx=data["non_2xx_3xx"],
        socket_errors=data["connect_errors"] + data["read_errors"] + data["write_errors"] + data["timeouts"],
    )


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    url: str
    method: str = "GET"
    body: str | None = None
    headers: dict[str, str] | None = None
    unique_key: bool = False
    unique_body: bool = False
    pid: int | None = None  # the server's: its CPU time per request is measured too

    def run(self, duration_s: int) -> WrkResult:
        before = None if self.pid is None else cpu_seconds(self.pid)
        result = wrk(
            self.name,
            self.url,
            method=self.method,
            body=self.body,
            headers=self.headers,
            unique_key=self.unique_key,
            unique_body=self.unique_body,
            duration_s=duration_s,
        )
        after = None if self.pid is None else cpu_seconds(self.pid)
        if before is None or after is None or not result.requests:
            return result
        return dataclasses.replace(result, cpu_us=(after - before) / result.requests * 1e6)


@contextlib.contextmanager
def _bare() -> Iterator[list[Scenario]]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/bare"
    with process([sys.executable, "-m", "benchmarks.bare_app", "--port", str(port)], url) as server:
        post = json.dumps({"query": f"{COMMON_TERM} {RARE_TERM}", "scope": {"kind": "workspace", "id": "x"}})
        yield [
            Scenario("bare FastAPI GET", url, pid=server.pid),
            Scenario(
                "bare FastAPI POST", url, "POST", post, {"Content-Type": "application/json"}, pid=server.pid
            ),
        ]


@contextlib.contextmanager
def fake_scenarios(
    directory: Path, *, module: str = "fake_lucy", label: str = ""
) -> Iterator[list[Scenario]]:
    """The fake's four scenarios against ``python -m <module> serve`` on a seeded database of its
    own; ``label`` follows each scenario's name."""
    database = directory / f"http{label.replace(' ', '_')}.sqlite3"
    fake = FakeLucy(FakeLucySettings(database=str(database)))
    Seeder(fake.db.conn, "tenant_dev", DEV_SCOPES).add(MEMORIES)
    fake.close()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {DEV_TOKEN}", "Content-Type": "application/json"}
    proposal = {
        "kind": "fact",
        "content": "The team approved Postgres 16 for the billing service.",
        "scope": {"kind": "workspace", "id": "ws_dev"},
    }
    recall_body = {"query": f"{COMMON_TERM} {RARE_TERM}", "scope": {"kind": "workspace", "id": "ws_dev"}}
    new_query = {**recall_body, "query": f"{COMMON_TERM} {RARE_TERM} __N__"}
    with serve_fake(database, port, module=module):
        set_credits(base, "acct_dev", 100_000_000)
        created = httpx.post(
            f"{base}{API}/proposals", json=proposal, headers={**auth, "Idempotency-Key": "bench-status"}
        )
        created.raise_for_status()
        proposal_id = created.json()["proposal"]["id"]
        yield [
            Scenario(f"fake recall{label}", f"{base}{API}/recall", "POST", json.dumps(recall_body), auth),
            Scenario(
                f"{UNCACHED_RECALL}{label}",
                f"{base}{API}/recall",
                "POST",
                json.dumps(new_query),
                auth,
                unique_body=True,
            ),
            Scenario(f"fake proposal status{label}", f"{base}{API}/proposals/{proposal_id}", headers=auth),
            Scenario(
                f"fake propose{label}", f"{base}{API}/proposals", "POST", json.dumps(proposal), auth, True
            ),
        ]


@contextlib.contextmanager
def _moto() -> Iterator[list[Scenario]]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": SQS_AUTH, "Content-Type": "application/x-amz-json-1.0"}
    with process([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], base):
        created = httpx.post(
            base + "/",
            headers={**headers, "X-Amz-Target": "AmazonSQS.CreateQueue"},
            json={"QueueName": "bench"},
        )
        created.raise_for_status()
        queue_url = created.json()["QueueUrl"]
        send = json.dumps({"QueueUrl": queue_url, "MessageBody": "The team approved Postgres 16."})
        attributes = json.dumps({"QueueUrl": queue_url, "AttributeNames": ["All"]})
        yield [
            Scenario(
                "moto SQS SendMessage",
                base + "/",
                "POST",
                send,
                {**headers, "X-Amz-Target": "AmazonSQS.SendMessage"},
            ),
            Scenario(
                "moto SQS GetQueueAttributes",
                base + "/",
                "POST",
                attributes,
                {**headers, "X-Amz-Target": "AmazonSQS.GetQueueAttributes"},
            ),
        ]


def run(rounds: int = ROUNDS) -> dict[str, list[WrkResult]]:
    """Every scenario ``rounds`` times, interleaved, all servers up at once (idle when not measured)."""
    if not wrk_available():
        raise RuntimeError("wrk is not installed (apt-get install -y wrk); make bench installs it")
    directory = Path(tempfile.mkdtemp(prefix="fake-lucy-bench-http-"))
    try:
        with _bare() as bare, fake_scenarios(directory) as fake, _moto() as moto:
            scenarios = [*bare, *fake, *moto]
            for scenario in scenarios:
                scenario.run(WARMUP_S)
            results: dict[str, list[WrkResult]] = {scenario.name: [] for scenario in scenarios}
            for _ in range(rounds):
                for scenario in scenarios:
                    result = scenario.run(DURATION_S)
                    print(format_result(result), file=sys.stderr, flush=True)
                    results[scenario.name].append(result)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return results


def best(results: list[WrkResult]) -> WrkResult:
    """The run with the most requests/s: the least disturbed by other processes on the machine."""
    return max(results, key=lambda result: result.rps)


def format_result(result: WrkResult) -> str:
    return (
        f"| {result.name} | {result.rps:,.0f} | {result.p50_ms:.2f} | {result.p99_ms:.2f}"
        f" | {result.requests:,} | {result.non_2xx} | {result.socket_errors} |"
    )


if __name__ == "__main__":
    for runs in run().values():
        print(format_result(best(runs)))
