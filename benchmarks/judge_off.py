"""``python -m benchmarks.judge_off serve …``: ``fake-lucy serve`` with the findings judge taken out.

For ``bench_findings`` only: the same server, command line and database as ``fake-lucy serve``, but
each v1 request skips ``V1Pipeline._observe`` (SPEC 3.8, the judge and its ``finding`` events), so
that the cost of findings on the hot path can be measured against the server without them. One
worker only (``--workers`` starts fresh processes that would not carry the change).
"""

from __future__ import annotations

import sys

from fake_lucy.http import pipeline


def judge_off() -> None:
    """Every later request of this process is journaled without being judged."""

    def no_findings(self: pipeline.V1Pipeline, *args: object, **kwargs: object) -> list[object]:
        return []

    pipeline.V1Pipeline._observe = no_findings  # type: ignore[method-assign,assignment]


if __name__ == "__main__":
    judge_off()
    from fake_lucy.cli import main

    sys.exit(main())
