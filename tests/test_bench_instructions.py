"""The instruction counts' table (benchmarks/bench_instructions.py): each operation against its bare
endpoint, status against the GET and the others against the POST."""

from __future__ import annotations

from benchmarks import bench_instructions
from benchmarks.bench_instructions import BARE_GET, BARE_POST, FAKE, Count


def test_each_operation_is_set_against_its_own_bare_endpoint() -> None:
    counts = [
        Count(BARE_GET, 900_000),
        Count(BARE_POST, 1_000_000),
        Count(FAKE["recall"], 4_000_000),
        Count(FAKE["proposal_status"], 1_500_000),
        Count(FAKE["propose"], 2_500_000),
    ]
    rows = bench_instructions.lines(counts)
    assert rows[2:] == [
        f"| {BARE_GET} | 900 | – |",
        f"| {BARE_POST} | 1,000 | – |",
        f"| {FAKE['recall']} | 4,000 | 0.25× |",
        f"| {FAKE['proposal_status']} | 1,500 | 0.60× |",
        f"| {FAKE['propose']} | 2,500 | 0.40× |",
    ]
