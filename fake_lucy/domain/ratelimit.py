"""A token bucket per credential on the server clock (SPEC 2.3, rate limit)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

__all__ = ["BucketState", "take_token"]


@dataclass(frozen=True, slots=True)
class BucketState:
    allowed: bool
    limit: int
    remaining: int
    retry_after: int  # seconds to the next token (≥ 1) when refused
    reset: int  # seconds until the bucket is full again


# A bucket counts in units of 1/60,000,000 token, so that it refills by exactly ``per_minute`` units
# per microsecond and every figure is integer arithmetic: with float tokens, 20 s at 2 per minute
# left 0.6666… and the next token seemed 10.000000000000002 s away (Retry-After 11, not 10). The
# table keeps tokens (a REAL); units are recovered by rounding, exact far beyond any bucket size.
_UNITS_PER_TOKEN = 60 * 1_000_000


def take_token(
    conn: sqlite3.Connection, *, credential_id: str, per_minute: int, now_us: int, take: bool = True
) -> BucketState:
    """Take one token (``take=False``: only report the bucket, for a request refused before step 6)."""
    capacity = per_minute * _UNITS_PER_TOKEN
    row = conn.execute(
        "SELECT tokens, updated_us FROM rate_buckets WHERE credential_id = ?", (credential_id,)
    ).fetchone()
    units = capacity
    if row is not None:
        elapsed = max(0, now_us - int(row[1]))
        units = min(capacity, round(float(row[0]) * _UNITS_PER_TOKEN) + elapsed * per_minute)
    allowed = units >= _UNITS_PER_TOKEN
    if not take:
        return _state(True, per_minute, units)
    if allowed:
        units -= _UNITS_PER_TOKEN
    conn.execute(
        "INSERT OR REPLACE INTO rate_buckets (credential_id, tokens, updated_us) VALUES (?, ?, ?)",
        (credential_id, units / _UNITS_PER_TOKEN, now_us),
    )
    return _state(allowed, per_minute, units)


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def _state(allowed: bool, per_minute: int, units: int) -> BucketState:
    per_second = per_minute * 1_000_000  # units refilled per second
    retry_after = max(1, _ceil_div(_UNITS_PER_TOKEN - units, per_second)) if not allowed else 0
    reset = max(0, _ceil_div(per_minute * _UNITS_PER_TOKEN - units, per_second))
    return BucketState(
        allowed=allowed,
        limit=per_minute,
        remaining=units // _UNITS_PER_TOKEN,
        retry_after=retry_after,
        reset=reset,
    )
