"""The automatic retry policy, exactly as the Lucy Memory README states it.

Only propose is retried, only on HTTP 429, 502, 503 or 504, at most ``DEFAULT_MAX_RETRIES`` times, with
the same body and idempotency key. A valid ``Retry-After`` (delta-seconds or an HTTP date) of 0–60 s is
waited exactly; over 60 s there is no retry and the error carries ``retry_after``; an absent or
malformed value falls back to capped exponential backoff with jitter. Transport failures (timeouts,
dropped connections) are never retried. ``decide_retry`` is the one decision function; the caller
supplies the clock and the random source, and does the sleeping, so tests never wait.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from lucy_memory._contract import RETRYABLE_OPERATIONS, RETRYABLE_STATUSES

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "INITIAL_BACKOFF_SECONDS",
    "JITTER_FRACTION",
    "MAX_BACKOFF_SECONDS",
    "MAX_RETRIES_LIMIT",
    "MAX_RETRY_AFTER_SECONDS",
    "POLL_INITIAL_SECONDS",
    "POLL_MAX_SECONDS",
    "POLL_MIN_INTERVAL_SECONDS",
    "RETRYABLE_OPERATIONS",
    "RETRYABLE_STATUSES",
    "RetryDecision",
    "backoff_delay",
    "decide_retry",
    "parse_retry_after",
    "poll_delay",
]

DEFAULT_MAX_RETRIES = 2
# Lucy-Retry-Attempt accepts 0 to 10, so no configuration may go beyond ten retries.
MAX_RETRIES_LIMIT = 10
MAX_RETRY_AFTER_SECONDS = 60.0
INITIAL_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 8.0
# The backoff is multiplied by a factor drawn from [1 - JITTER_FRACTION, 1].
JITTER_FRACTION = 0.25
# Wait between wait_for_decision polls: starts here, doubles, never exceeds the cap.
POLL_INITIAL_SECONDS = 1.0
POLL_MAX_SECONDS = 30.0
# The smallest max_interval wait_for_decision takes: with waits of 1 s, 2 s, then 3 s, no 60 s
# holds more than 30 polls, and the waits grow, as Lucy's client rules ask of status polling.
POLL_MIN_INTERVAL_SECONDS = 3.0

_DELTA_SECONDS = re.compile(r"[0-9]+")
# RFC 9111 5.2: a delta-seconds too large to hold is taken as 2^31 seconds (far over any wait).
_DELTA_SECONDS_CAP = 2_147_483_648
# RFC 9110's third HTTP-date form (ANSI C's asctime), which carries no zone: it is GMT by definition.
_ASCTIME = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
    r" (?: [1-9]|[12][0-9]|3[01]) [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4}"
)


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """``retry``: send again after ``delay`` seconds. ``retry_after``: the server's valid wait, if any."""

    retry: bool
    delay: float
    retry_after: float | None


def parse_retry_after(value: str | None, *, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or HTTP date); None when absent or
    malformed. A date in the past means 0. ``now`` is the caller's clock in Unix seconds."""
    if value is None:
        return None
    text = value.strip()
    if _DELTA_SECONDS.fullmatch(text):
        return float(min(int(text), _DELTA_SECONDS_CAP) if len(text) <= 10 else _DELTA_SECONDS_CAP)
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        # RFC 9110 dates are GMT; only the asctime form says so by omitting the zone.
        if not _ASCTIME.fullmatch(text):
            return None
        moment = moment.replace(tzinfo=datetime.UTC)
    seconds = moment.timestamp() - now
    return max(0.0, seconds) if math.isfinite(seconds) else None


def backoff_delay(retry_index: int, random: Callable[[], float]) -> float:
    """Capped exponential backoff with jitter for retry number ``retry_index`` (0 = first retry)."""
    base = min(MAX_BACKOFF_SECONDS, INITIAL_BACKOFF_SECONDS * (2.0**retry_index))
    return base * (1.0 - JITTER_FRACTION * random())


def decide_retry(
    *,
    operation: str,
    status: int,
    retry_after_header: str | None,
    retries_done: int,
    max_retries: int,
    now: float,
    random: Callable[[], float],
) -> RetryDecision:
    """Whether to repeat a request that was answered ``status``, and after how many seconds."""
    retry_after = parse_retry_after(retry_after_header, now=now)
    if (
        operation not in RETRYABLE_OPERATIONS
        or status not in RETRYABLE_STATUSES
        or retries_done >= max_retries
        or (retry_after is not None and retry_after > MAX_RETRY_AFTER_SECONDS)
    ):
        return RetryDecision(retry=False, delay=0.0, retry_after=retry_after)
    if retry_after is not None:
        return RetryDecision(retry=True, delay=retry_after, retry_after=retry_after)
    return RetryDecision(retry=True, delay=backoff_delay(retries_done, random), retry_after=None)


def poll_delay(poll_index: int, max_interval: float | None = None) -> float:
    """The wait after poll number ``poll_index`` (0 = first) of ``wait_for_decision``: 1 s, doubling
    up to ``max_interval`` (30 s when None)."""
    cap = POLL_MAX_SECONDS if max_interval is None else min(POLL_MAX_SECONDS, max_interval)
    return min(cap, POLL_INITIAL_SECONDS * (2.0**poll_index))
