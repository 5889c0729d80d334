"""Every section of ``make bench`` measures ``fake-lucy serve`` as the README says: with ``--quiet``
(the server log's own cost is the console section's to measure), started in one place
(``benchmarks.common.serve_fake``)."""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks import bench_recall_stall, bench_tenants, common

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The argument lists of the server processes the benchmarks would start."""
    calls: list[list[str]] = []

    @contextlib.contextmanager
    def process(args: list[str], ready_url: str, env: Any = None) -> Iterator[None]:
        calls.append(args)
        yield None

    monkeypatch.setattr(common, "process", process)
    monkeypatch.setattr(bench_recall_stall, "set_credits", lambda *args: None)
    return calls


def _option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_the_tenants_section_serves_quietly(started: list[list[str]], tmp_path: Path) -> None:
    with bench_tenants.serve(tmp_path / "s.sqlite3", 8123):
        pass
    with bench_tenants.serve(tmp_path / "s.sqlite3", 8124, workers=2):
        pass
    with bench_tenants.serve(tmp_path / "s.sqlite3", 8125, workers=2, quiet=False):
        pass
    assert [("--quiet" in args, _option(args, "--workers")) for args in started] == [
        (True, "1"),
        (True, "2"),
        (False, "2"),
    ]
    assert _option(started[0], "--database") == str(tmp_path / "s.sqlite3")


def test_the_stall_section_serves_quietly(started: list[list[str]], tmp_path: Path) -> None:
    with bench_recall_stall._serve(tmp_path / "s.sqlite3", 2) as base:
        assert base.startswith("http://127.0.0.1:")
    assert "--quiet" in started[0]
    assert _option(started[0], "--workers") == "2"


def test_the_capacity_runs_as_the_compose_service_does(
    started: list[list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the server log (compose runs ``fake-lucy serve``), on two workers; no level measured."""

    async def no_sessions(base: str, sessions: int) -> None:
        return None

    monkeypatch.setattr(bench_tenants, "_capacity_level", no_sessions)
    assert bench_tenants.run_capacity(tmp_path / "s.sqlite3", levels=()) == []
    assert "--quiet" not in started[0]
    assert _option(started[0], "--workers") == "2"


def test_only_the_console_and_capacity_log(started: list[list[str]], tmp_path: Path) -> None:
    with common.serve_fake(tmp_path / "s.sqlite3", 8125, quiet=False):
        pass
    assert "--quiet" not in started[0]
    callers = {
        path.name
        for path in BENCHMARKS.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.keyword) and node.arg == "quiet"
    }
    assert callers == {"bench_console.py", "bench_tenants.py"}


def test_a_fake_started_outside_serve_fake_is_quiet_too() -> None:
    """``bench_instructions`` starts the fake under valgrind, so not through ``serve_fake``."""
    starters = {path.name: path.read_text() for path in BENCHMARKS.glob("*.py")}
    own = {name for name, text in starters.items() if '"fake_lucy", "serve"' in text}
    assert own == {"bench_instructions.py"}
    assert '[*args, "--quiet"]' in starters["bench_instructions.py"]


FLOOR = bench_tenants.RankingFloor(statement_us=240.0, rank_us=340.0, matches=51)


def _cpu(recall_us: float | None) -> dict[str, float | None]:
    """Server CPU µs per request of the section's scenarios, the recall's as given."""
    return {
        "bare FastAPI GET": 300.0,
        "bare FastAPI POST": 360.0,
        bench_tenants.STATUS: 550.0,
        bench_tenants.UNCACHED: recall_us,
    }


def test_the_recall_floor_names_what_the_target_leaves_and_what_a_recall_spent() -> None:
    text = " ".join(bench_tenants._floor_lines(FLOOR, _cpu(1400.0)))
    # 360 / (360 + 240) = 0.60; with the status call's 250 µs: 360 / 850 = 0.42
    assert "would reach 0.60× the bare POST" in text
    assert "(250 µs: authentication" in text
    assert "gives 0.42×" in text
    # 360 / 0.40 - 360 - 240 = 300 µs left; the recall spent 1,400 - 360 - 240 = 800 µs
    assert "The 0.40× target leaves 300 µs per recall" in text
    assert "This run's recall spent 800 µs on them (1,400 µs per request in all)" in text
    assert "leaves 50 µs for the rest" in text


def test_the_recall_floor_without_cpu_figures_shows_the_statement_alone() -> None:
    lines = bench_tenants._floor_lines(FLOOR, _cpu(None))
    assert "| the ranking statement alone (`recall.ranking_statement`, fetched) | 240 |" in lines
    assert not any("The 0.40× target leaves" in line for line in lines)
