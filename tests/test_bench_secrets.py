"""``benchmarks.bench_secrets`` measures what it names: each text's row, and every adversarial text at
the content's limit (a shorter one would understate what a pattern can be made to cost)."""

from __future__ import annotations

from benchmarks import bench_secrets


def test_each_text_gets_a_row_with_its_length_and_a_cost() -> None:
    lines = bench_secrets.table({"a short note": "Deploys wait for the window."}, calls=1)
    assert lines[:2] == ["| text | characters | µs per find |", "|---|---:|---:|"]
    name, length, cost = (cell.strip() for cell in lines[2].strip("|").split("|"))
    assert (name, length) == ("a short note", "28")
    assert float(cost.replace(",", "")) > 0


def test_the_adversarial_texts_are_as_long_as_content_may_be() -> None:
    assert {len(text) for text in bench_secrets.ADVERSARIAL.values()} == {bench_secrets.LIMIT}
    assert len(bench_secrets.ORDINARY["8 KB of prose"]) == bench_secrets.LIMIT
