"""``benchmarks.compare_commits``: each fake operation is set against its bare endpoint by the names
section 1 gives its scenarios (the repeated recall is not confused with the new-query one)."""

from __future__ import annotations

import pytest

from benchmarks.bench_http import UNCACHED_RECALL
from benchmarks.compare_commits import best_ratios


def test_each_operation_is_set_against_its_bare_endpoint() -> None:
    best = {
        "bare FastAPI GET": 4000.0,
        "bare FastAPI POST": 2000.0,
        "fake recall": 1000.0,
        UNCACHED_RECALL: 500.0,
        "fake proposal status": 2400.0,
        "fake propose": 800.0,
    }
    assert best_ratios(best) == pytest.approx(
        {"proposal status": 0.6, "recall": 0.5, "recall, new query each request": 0.25, "propose": 0.4}
    )


def test_an_operation_without_its_bare_endpoint_or_its_scenario_has_no_ratio() -> None:
    assert best_ratios(
        {"fake recall": 1000.0, "bare FastAPI GET": 4000.0, "fake proposal status": 100.0}
    ) == {"proposal status": 0.025}


def test_the_notes_of_results_md_are_those_make_bench_writes_again() -> None:
    """``make bench`` rewrites benchmarks/RESULTS.md whole, its notes from ``run_all.NOTES``: a
    note added to the file alone would be lost at the next run."""
    from benchmarks.run_all import NOTES, RESULTS

    written = RESULTS.read_text(encoding="utf-8")
    assert written[written.index("## What was changed for speed") :] == NOTES
