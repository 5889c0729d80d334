"""``benchmarks.judge_off`` (the findings benchmark's server without its judge) takes out the judge and
nothing else: the request is still answered and journaled, and no finding is recorded; with the judge
back, the same request is a finding."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks.judge_off import judge_off
from fake_lucy.http import pipeline
from tests.helpers import V1

pytestmark = pytest.mark.anyio
RETRIED = {"Lucy-Retry-Attempt": "1"}


@pytest.fixture
def judge() -> Iterator[object]:
    original = pipeline.V1Pipeline._observe
    yield original
    pipeline.V1Pipeline._observe = original  # type: ignore[method-assign]


async def test_with_the_judge_off_a_retried_recall_is_journaled_but_is_no_finding(fake, admin, judge) -> None:
    async with fake.client() as http:
        judge_off()
        unjudged = await http.post(V1 + "/recall", json={"query": "deploy"}, headers=RETRIED)
        pipeline.V1Pipeline._observe = judge  # type: ignore[method-assign]
        judged = await http.post(V1 + "/recall", json={"query": "deploy"}, headers=RETRIED)
    assert (unjudged.status_code, judged.status_code) == (200, 200)
    ids = [response.headers["lucy-request-id"] for response in (unjudged, judged)]
    assert [entry["request_id"] for entry in await admin.requests()] == ids
    assert [(item["code"], item["request_ids"]) for item in await admin.findings()] == [
        ("recall_retried", ids[1:])
    ]


def test_the_in_process_part_times_the_judge_within_each_call_and_puts_it_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from benchmarks import bench_findings

    for name, value in (("ROUNDS", 2), ("CALLS", 5), ("MEMORIES", 20)):
        monkeypatch.setattr(bench_findings, name, value)
    original = pipeline.V1Pipeline._observe
    rows = bench_findings.run_in_process()
    assert pipeline.V1Pipeline._observe is original
    assert [row.name for row in rows] == [*bench_findings.OPERATIONS, bench_findings.UNSETTLED_STATUS]
    for row in rows:
        assert row.off_us > 0, row
        if row.name == "fake proposal status":  # one proposal polled over and over: settled
            assert row.judge_us == 0, row
        else:
            assert 0 < row.judge_us < row.on_us, row
    table = bench_findings.section([], rows)
    assert table[0] == "## 8. Findings: the judge's cost on the hot path"
