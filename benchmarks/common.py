"""Shared helpers for the benchmarks: percentiles, the machine's description, processes on loopback."""

from __future__ import annotations

import contextlib
import os
import platform
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx

from fake_lucy.testing.fakes import poll_until
from lucy_memory._contract import API_BASE_PATH

ROOT = Path(__file__).resolve().parent.parent
DEV_TOKEN = "lucy-dev-token"  # noqa: S105 - the fake's documented development token
ADMIN_TOKEN = "fake-admin-token"  # noqa: S105 - the fake's documented admin token
API = API_BASE_PATH
PROTOCOL = "fake_lucy.http.uvicorn_protocol:AbortingH11Protocol"


@dataclass(frozen=True, slots=True)
class Summary:
    n: int
    p50_ms: float
    p99_ms: float
    mean_ms: float


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted sequence."""
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def summarise(samples_ms: Sequence[float]) -> Summary:
    ordered = sorted(samples_ms)
    return Summary(
        n=len(ordered),
        p50_ms=percentile(ordered, 50),
        p99_ms=percentile(ordered, 99),
        mean_ms=sum(ordered) / len(ordered),
    )


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        kib = int(Path("/proc/meminfo").read_text().splitlines()[0].split()[1])
        memory = f", {kib / 1024 / 1024:.0f} GiB RAM"
    return (
        f"{os.cpu_count()} cores ({cpu}){memory}, {platform.system()} {platform.release()},"
        f" Python {platform.python_version()}, SQLite {sqlite3.sqlite_version},"
        f" {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_http(url: str, timeout: float = 30, process: subprocess.Popen[bytes] | None = None) -> None:
    """Until ``url`` answers at all; a ``process`` that exits meanwhile fails at once."""

    def answers() -> bool:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server process exited with {process.returncode}")
        with contextlib.suppress(httpx.TransportError):
            httpx.get(url, timeout=1)
            return True
        return False

    poll_until(answers, f"{url} did not answer", timeout)


@contextlib.contextmanager
def process(
    args: list[str], ready_url: str, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server process until the block ends (the block gets it); stop it by its own pid."""
    proc = subprocess.Popen(  # noqa: S603 - our own interpreter and fixed arguments
        args,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_http(ready_url, process=proc)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def serve_fake(
    database: Path, port: int, *, quiet: bool = True, module: str = "fake_lucy", workers: int = 1
) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    """``fake-lucy serve`` as a separate process, by default with one uvicorn worker and without the
    server log (its cost is measured on its own by ``bench_console``; every other section measures
    with ``--quiet``); ``module`` is the one ``python -m`` runs (``benchmarks.judge_off``: the same
    server without the findings judge)."""
    return process(
        [
            sys.executable,
            "-m",
            module,
            "serve",
            "--port",
            str(port),
            "--database",
            str(database),
            "--workers",
            str(workers),
            *(["--quiet"] if quiet else []),
        ],
        f"http://127.0.0.1:{port}/healthz",
    )


def set_credits(base_url: str, account: str, balance: int) -> None:
    httpx.put(
        f"{base_url}/_fake/accounts/{account}/credits",
        json={"balance": balance},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    ).raise_for_status()


def cpu_seconds(pid: int) -> float | None:
    """The user + system CPU time a process has used so far (Linux ``/proc``; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
