"""Section 1's HTTP scenarios of another commit and of this checkout, side by side.

``python -m benchmarks.compare_commits REV [--seconds 4] [--rounds 4]`` (needs wrk and git): checks
REV out into a temporary git worktree, starts its fake (seeded by its own code, through its own
``benchmarks.bench_http``), this checkout's fake and the bare FastAPI app at once, and runs every
scenario's wrk rounds interleaved, so that both commits meet the same machine in the same minutes
(on a shared machine, two `make bench` runs an hour apart differ by more than most changes). Prints
each scenario's best round and each fake operation's ratio to the bare endpoint, as section 1 does.
Not part of `make bench`; benchmarks/RESULTS.md's notes quote its runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from benchmarks import bench_http
from benchmarks.bench_http import Scenario
from benchmarks.common import ROOT

# Run in a commit's own tree: its fake, seeded by its own code, until stdin closes.
_SIDE = """
import dataclasses, json, sys, tempfile
from pathlib import Path
from benchmarks import bench_http
scenarios = getattr(bench_http, "fake_scenarios", None) or getattr(bench_http, "_fake")
with tempfile.TemporaryDirectory() as directory, scenarios(Path(directory)) as found:
    print(json.dumps([dataclasses.asdict(s) for s in found]), flush=True)
    sys.stdin.read()
"""

# (operation, the scenario's name starts with, the bare endpoint it is set against)
OPERATIONS = (
    ("proposal status", "fake proposal status", "bare FastAPI GET"),
    ("recall", "fake recall", "bare FastAPI POST"),
    ("recall, new query each request", "fake recall, new query", "bare FastAPI POST"),
    ("propose", "fake propose", "bare FastAPI POST"),
)


@contextlib.contextmanager
def _worktree(rev: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="fake-lucy-compare-") as directory:
        tree = Path(directory) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), rev], cwd=ROOT, check=True)  # noqa: S603, S607 - git, a revision argument
        try:
            yield tree
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)  # noqa: S603, S607


@contextlib.contextmanager
def _side(tree: Path) -> Iterator[list[Scenario]]:
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'client'}"}
    side = subprocess.Popen(  # noqa: S603 - our interpreter and our own code
        [sys.executable, "-c", _SIDE],
        cwd=tree,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert side.stdout is not None
        line = side.stdout.readline()
        if not line:
            raise RuntimeError(f"the fake of {tree} did not start")
        yield [Scenario(**fields) for fields in json.loads(line)]
    finally:
        assert side.stdin is not None
        side.stdin.close()
        side.wait(timeout=60)


def best_ratios(best: dict[str, float]) -> dict[str, float]:
    """Each fake operation's best req/s over its bare endpoint's best (``best``: by scenario name)."""
    ratios = {}
    for operation, prefix, bare in OPERATIONS:
        fakes = [
            rps for name, rps in best.items() if name.startswith(prefix) and not name.startswith(prefix + ",")
        ]
        if fakes and best.get(bare):
            ratios[operation] = max(fakes) / best[bare]
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev", help="the commit to set against this checkout")
    parser.add_argument("--seconds", type=int, default=4, help="wrk's duration per round")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    runs: dict[tuple[str, str], list[float]] = {}
    with _worktree(args.rev) as tree, _side(tree) as theirs, _side(ROOT) as ours, bench_http._bare() as bare:
        sides = (("bare", bare), (args.rev, theirs), ("this checkout", ours))
        for round_ in range(args.rounds):
            for label, scenarios in sides:
                for scenario in scenarios:
                    if round_ == 0:
                        scenario.run(1)  # warm-up
                    runs.setdefault((label, scenario.name), []).append(scenario.run(args.seconds).rps)
    print("| side | scenario | req/s (best) | rounds |\n|---|---|---:|---|")
    for (label, name), values in runs.items():
        print(f"| {label} | {name} | {max(values):,.0f} | {' '.join(f'{v:,.0f}' for v in values)} |")
    bare_best = {name: max(v) for (label, name), v in runs.items() if label == "bare"}
    print("\n| operation | " + " | ".join(label for label, _ in sides[1:]) + " |\n|---|---:|---:|")
    ratios = {
        label: best_ratios(
            {**bare_best, **{name: max(v) for (side, name), v in runs.items() if side == label}}
        )
        for label, _ in sides[1:]
    }
    for operation, _, bare_name in OPERATIONS:
        cells = " | ".join(f"{ratios[label].get(operation, float('nan')):.2f}×" for label, _ in sides[1:])
        print(f"| {operation} (× {bare_name}) | {cells} |")


if __name__ == "__main__":
    main()
