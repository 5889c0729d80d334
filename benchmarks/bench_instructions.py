"""Instructions per request, counted by callgrind: the HTTP ratios of section 7 without the noise.

``python -m benchmarks.bench_instructions [DATABASE]`` (``make bench`` runs it inside section 7,
on the 100-tenant store). Each server (``benchmarks.bare_app``, ``fake-lucy serve``) runs under
``valgrind --tool=callgrind`` with counting off; once it has answered a warm-up, counting is turned
on (``callgrind_control -i on``), the same requests as the wrk scenarios are sent (8 keep-alive
connections, one request each at a time), counting is turned off, and the server's total divided by
the requests is its instructions per request: all that the server process runs in user space
(uvicorn, the app, SQLite), not the kernel's work for its system calls.

Other work on the machine does not change the count, where it moves req/s on a shared machine by a
third between rounds; two runs differ by a few percent only (how many requests share a commit
depends on timing, and the ids and keys are random). It is not time: SQLite's C
code retires about twice as many instructions per microsecond as the interpreter's, so a ratio of
instructions runs above the req/s one for an operation whose share of SQLite is larger (a
ranking recall). Use it to see what a change does; the targets are set on req/s.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.common import API, DEV_TOKEN, ROOT, free_port, set_credits, wait_http
from benchmarks.seeding import COMMON_TERM, RARE_TERM

REQUESTS = 300
WARMUP = 50
CONNECTIONS = 8
STARTUP_S = 300.0  # a server under valgrind starts some 20 times slower
PROPOSAL = {
    "kind": "fact",
    "content": "The team approved Postgres 16 for the billing service.",
    "scope": {"kind": "workspace", "id": "ws_dev"},
}

# (method, path, JSON body or None, headers) of request number n
Request = Callable[[int], tuple[str, str, Any, dict[str, str]]]


@dataclass(frozen=True, slots=True)
class Count:
    name: str
    instructions_per_request: float


def available() -> bool:
    return shutil.which("valgrind") is not None and shutil.which("callgrind_control") is not None


async def _drive(base: str, request: Request, count: int, start: int) -> None:
    numbers = itertools.count(start)
    end = start + count
    limits = httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as http:

        async def connection() -> None:
            while (n := next(numbers)) < end:
                method, path, body, headers = request(n)
                content = None if body is None else json.dumps(body)
                response = await http.request(method, path, content=content, headers=headers)
                if response.status_code >= 300:
                    raise RuntimeError(f"{method} {path}: {response.status_code} {response.text}")

        await asyncio.gather(*(connection() for _ in range(CONNECTIONS)))


def _control(pid: int, switch: str) -> None:
    subprocess.run(["callgrind_control", "-i", switch, str(pid)], check=True, capture_output=True)  # noqa: S603, S607


def _count(
    name: str, args: list[str], port: int, prepare: Callable[[str], Request], directory: Path
) -> Count:
    log = directory / f"{uuid.uuid4().hex}.valgrind"
    command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null", *args]
    with log.open("w") as stderr:
        server = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr)  # noqa: S603
        try:
            base = f"http://127.0.0.1:{port}"
            wait_http(f"{base}/healthz", timeout=STARTUP_S, process=server)
            request = prepare(base)
            asyncio.run(_drive(base, request, WARMUP, 0))
            _control(server.pid, "on")
            asyncio.run(_drive(base, request, REQUESTS, WARMUP))
            _control(server.pid, "off")
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=STARTUP_S)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    collected = [int(n) for n in re.findall(r"Collected : (\d+)", log.read_text())]
    if not collected:
        raise RuntimeError(f"callgrind reported no count for {name}")
    return Count(name, sum(collected) / REQUESTS)


def _bare(method: str) -> Callable[[str], Request]:
    body = {"query": f"{COMMON_TERM} {RARE_TERM}", "scope": {"kind": "workspace", "id": "x"}}
    headers = {"Content-Type": "application/json"}

    def prepare(_base: str) -> Request:
        return lambda n: (method, "/bare", body if method == "POST" else None, headers)

    return prepare


def _fake(operation: str) -> Callable[[str], Request]:
    auth = {"Authorization": f"Bearer {DEV_TOKEN}", "Content-Type": "application/json"}

    def prepare(base: str) -> Request:
        set_credits(base, "acct_dev", 100_000_000)
        if operation == "recall":
            scope = {"kind": "workspace", "id": "ws_dev"}
            return lambda n: (
                "POST",
                f"{API}/recall",
                {"query": f"{COMMON_TERM} {RARE_TERM} c{n}x{uuid.uuid4().hex[:8]}", "scope": scope},
                auth,
            )
        if operation == "propose":
            return lambda n: (
                "POST",
                f"{API}/proposals",
                PROPOSAL,
                {**auth, "Idempotency-Key": uuid.uuid4().hex},
            )
        key = {**auth, "Idempotency-Key": f"instructions-{uuid.uuid4().hex}"}
        created = httpx.post(f"{base}{API}/proposals", json=PROPOSAL, headers=key, timeout=120)
        created.raise_for_status()
        path = f"{API}/proposals/{created.json()['proposal']['id']}"
        return lambda n: ("GET", path, None, auth)

    return prepare


BARE_GET, BARE_POST = "bare FastAPI GET", "bare FastAPI POST"
FAKE = {
    "recall": "fake recall, new query each request (100 tenants)",
    "proposal_status": "fake proposal status (100 tenants)",
    "propose": "fake propose (100 tenants)",
}


def run(database: Path) -> list[Count]:
    """The counts of the bare endpoints and of the fake's three operations on a copy of ``database``."""
    directory = Path(tempfile.mkdtemp(prefix="fake-lucy-bench-instructions-"))
    try:
        counts = []
        for name, method in ((BARE_GET, "GET"), (BARE_POST, "POST")):
            port = free_port()
            args = [sys.executable, "-m", "benchmarks.bare_app", "--port", str(port)]
            counts.append(_count(name, args, port, _bare(method), directory))
        for operation, name in FAKE.items():
            copy = directory / "store.sqlite3"
            shutil.copyfile(database, copy)
            port = free_port()
            args = [sys.executable, "-m", "fake_lucy", "serve", "--port", str(port), "--database", str(copy)]
            counts.append(_count(name, [*args, "--quiet"], port, _fake(operation), directory))
            for leftover in directory.glob("store.sqlite3*"):
                leftover.unlink()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return counts


def lines(counts: list[Count]) -> list[str]:
    """The table of section 7."""
    by_name = {count.name: count.instructions_per_request for count in counts}
    bare = {"proposal_status": by_name[BARE_GET], "recall": by_name[BARE_POST], "propose": by_name[BARE_POST]}
    rows = [
        "| scenario | thousand instructions per request | × bare endpoint (by instructions) |",
        "|---|---:|---:|",
        f"| {BARE_GET} | {by_name[BARE_GET] / 1000:,.0f} | – |",
        f"| {BARE_POST} | {by_name[BARE_POST] / 1000:,.0f} | – |",
    ]
    for operation, name in FAKE.items():
        rows.append(f"| {name} | {by_name[name] / 1000:,.0f} | {bare[operation] / by_name[name]:.2f}× |")
    return rows


def main() -> None:
    if not available():
        raise SystemExit("valgrind (with callgrind_control) is not installed: apt-get install -y valgrind")
    if len(sys.argv) != 2:
        raise SystemExit(
            "usage: python -m benchmarks.bench_instructions DATABASE (a fake-lucy database file)"
        )
    print("\n".join(lines(run(Path(sys.argv[1])))))


if __name__ == "__main__":
    main()
