"""Per-test reset cost of the fake: in process (direct) and over HTTP to a real uvicorn server.

Run with ``make bench``; prints p50/p99 in milliseconds.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import httpx

from fake_lucy.testing import InProcessFake, LiveServer

ROUNDS = 500


def _summary(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p99 = ordered[int(len(ordered) * 0.99) - 1]
    return f"{name:<34} p50 {p50:7.3f} ms   p99 {p99:7.3f} ms   ({len(samples)} rounds)"


def run() -> tuple[list[float], list[float]]:
    """Reset times in milliseconds: in process (direct), and over HTTP to uvicorn (round trip)."""
    with tempfile.TemporaryDirectory() as directory:
        fake = InProcessFake(Path(directory) / "bench.sqlite3")
        direct = [fake.reset() for _ in range(ROUNDS)]
        fake.fake.close()
        with LiveServer.start(Path(directory)) as server, httpx.Client(base_url=server.base_url) as http:
            headers = {"Authorization": f"Bearer {server.admin_token}"}
            over_http = []
            for _ in range(ROUNDS):
                started = time.perf_counter()
                http.post("/_fake/reset", headers=headers).raise_for_status()
                over_http.append((time.perf_counter() - started) * 1000)
    return direct, over_http


def main() -> None:
    direct, over_http = run()
    print(_summary("reset, in process (direct)", direct))
    print(_summary("reset, HTTP to uvicorn (round trip)", over_http))


if __name__ == "__main__":
    main()
