"""The retry decision function on its own: every status, the budget, and each form of Retry-After."""

from __future__ import annotations

import pytest

from lucy_memory.retry import (
    MAX_BACKOFF_SECONDS,
    backoff_delay,
    decide_retry,
    parse_retry_after,
)

NOW = 1_900_000_000.0  # 2030-03-17T17:46:40Z


def _decide(operation: str = "propose", status: int = 503, header: str | None = None, done: int = 0):
    return decide_retry(
        operation=operation,
        status=status,
        retry_after_header=header,
        retries_done=done,
        max_retries=2,
        now=NOW,
        random=lambda: 0.0,
    )


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_propose_is_retried_on_the_four_retryable_statuses(status) -> None:
    assert _decide(status=status).retry is True


@pytest.mark.parametrize("status", [400, 401, 402, 403, 404, 405, 409, 413, 415, 422, 500, 501, 505])
def test_propose_is_not_retried_on_any_other_status(status) -> None:
    assert _decide(status=status).retry is False


@pytest.mark.parametrize("operation", ["recall", "proposal_status"])
@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_recall_and_status_are_never_retried(operation, status) -> None:
    assert _decide(operation=operation, status=status, header="1").retry is False


def test_the_retry_budget_is_max_retries() -> None:
    assert [_decide(done=done).retry for done in range(4)] == [True, True, False, False]


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("0", 0.0),
        ("7", 7.0),
        (" 60 ", 60.0),
        ("Tue, 17 Mar 2030 17:47:22 GMT", 42.0),
        ("Tue, 17 Mar 2030 17:40:00 GMT", 0.0),  # in the past: now
        ("Tuesday, 17-Mar-30 17:47:22 GMT", 42.0),  # RFC 850, obsolete but an HTTP-date
        ("Tue Mar 17 17:47:22 2030", 42.0),  # asctime: no zone, GMT by definition
    ],
)
def test_valid_retry_after_values_are_waited_exactly(header, seconds) -> None:
    decision = _decide(header=header)
    assert (decision.retry, decision.delay, decision.retry_after) == (True, seconds, seconds)


@pytest.mark.parametrize(
    "header",
    ["61", "3600", "99999999999", "9" * 5000, "Tue, 17 Mar 2030 17:48:00 GMT", "Tue Mar 17 18:46:40 2030"],
)
def test_retry_after_over_60_seconds_is_not_retried_and_reported(header) -> None:
    decision = _decide(header=header)
    assert decision.retry is False
    assert decision.retry_after is not None
    assert decision.retry_after > 60


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "soon",
        "-1",
        "1.5",
        "7 seconds",
        "Tue, 17 Mar 2030 17:47:22",
        "17 Mar 2030 17:47:22",
        "Tue Mar 17 2030",
    ],
)
def test_absent_or_malformed_retry_after_falls_back_to_backoff(header) -> None:
    assert parse_retry_after(header, now=NOW) is None
    decision = _decide(header=header, done=1)
    assert (decision.retry, decision.delay, decision.retry_after) == (True, 1.0, None)


def test_backoff_grows_is_capped_and_jittered_downwards() -> None:
    assert [backoff_delay(i, lambda: 0.0) for i in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert backoff_delay(10, lambda: 0.0) == MAX_BACKOFF_SECONDS
    assert backoff_delay(2, lambda: 1.0) == 1.5
