"""A token bucket per credential on the server clock (SPEC 2.3, rate limit)."""

from __future__ import annotations

import math
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


def take_token(
    conn: sqlite3.Connection, *, credential_id: str, per_minute: int, now_us: int, take: bool = True
) -> BucketState:
    """Take one token (``take=False``: only report the bucket, for a request refused before step 6)."""
    rate_per_us = per_minute / 60 / 1_000_000
    row = conn.execute(
        "SELECT tokens, updated_us FROM rate_buckets WHERE credential_id = ?", (credential_id,)
    ).fetchone()
    tokens = float(per_minute)
    if row is not None:
        elapsed = max(0, now_us - int(row[1]))
        tokens = min(float(per_minute), float(row[0]) + elapsed * rate_per_us)
    allowed = tokens >= 1.0
    if not take:
        return _state(True, per_minute, tokens)
    if allowed:
        tokens -= 1.0
    conn.execute(
        "INSERT OR REPLACE INTO rate_buckets (credential_id, tokens, updated_us) VALUES (?, ?, ?)",
        (credential_id, tokens, now_us),
    )
    return _state(allowed, per_minute, tokens)


def _state(allowed: bool, per_minute: int, tokens: float) -> BucketState:
    per_second = per_minute / 60
    retry_after = max(1, math.ceil((1.0 - tokens) / per_second)) if not allowed else 0
    reset = max(0, math.ceil((per_minute - tokens) / per_second))
    return BucketState(
        allowed=allowed,
        limit=per_minute,
        remaining=int(tokens),
        retry_after=retry_after,
        reset=reset,
    )
