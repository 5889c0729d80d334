"""The server clock: real time plus an offset, optionally frozen; stored in the database.

Expiry, idempotency retention, rate-limit refill and every timestamp the fake emits read it.
"""

from __future__ import annotations

import functools
import re
import sqlite3
import time
from datetime import UTC, datetime

from fake_lucy.domain.errors import DomainError, invalid_field

__all__ = [
    "advance",
    "format_us",
    "from_state",
    "now",
    "now_us",
    "parse_timestamp",
    "real_us",
    "set_clock",
    "state",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def real_us() -> int:
    """Real time (µs since 1970), without the server clock's offset."""
    return time.time_ns() // 1000


@functools.lru_cache(maxsize=16)
def _whole_seconds(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")


def format_us(us: int) -> str:
    seconds, micros = divmod(us, 1_000_000)
    return f"{_whole_seconds(seconds)}.{micros:06d}Z"


# RFC 3339 date-time: any number of fraction digits or none, ``Z`` or a numeric offset. The request
# schema (control-clock-set-request.schema.json) holds the same pattern.
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:[Zz]|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)


def parse_timestamp(value: str) -> int:
    """Microseconds since the epoch of an RFC 3339 date-time (``2030-01-01T00:00:00Z``,
    ``2030-01-01T02:00:00.5+02:00``, the fake's own fixed form, …); digits past the microsecond are
    dropped. ``ValueError`` for anything else, an impossible date (30 February, a leap second) or
    an offset beyond ±23:59 included."""
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise ValueError("not an RFC 3339 date-time")
    year, month, day, hour, minute, second = (int(part) for part in match.group(1, 2, 3, 4, 5, 6))
    delta = datetime(year, month, day, hour, minute, second, tzinfo=UTC) - _EPOCH
    micros = int((match.group(7) or "").ljust(6, "0")[:6])
    offset = 0
    if match.group(8) is not None:
        offset_hours, offset_minutes = int(match.group(9)), int(match.group(10))
        if offset_hours > 23 or offset_minutes > 59:
            raise ValueError("the offset must be at most ±23:59")
        offset = (offset_hours * 60 + offset_minutes) * 60 * (1 if match.group(8) == "+" else -1)
    return (delta.days * 86_400 + delta.seconds - offset) * 1_000_000 + micros


def from_state(offset: int, frozen: int | None) -> int:
    """The server time from the stored columns ``clock_offset_us`` and ``clock_frozen_us``."""
    return int(frozen) if frozen is not None else real_us() + int(offset)


def now_us(conn: sqlite3.Connection) -> int:
    offset, frozen = conn.execute(
        "SELECT clock_offset_us, clock_frozen_us FROM server_state WHERE id = 1"
    ).fetchone()
    return from_state(offset, frozen)


def now(conn: sqlite3.Connection) -> str:
    """The server time as the API writes it."""
    return format_us(now_us(conn))


def state(conn: sqlite3.Connection) -> dict[str, object]:
    frozen = conn.execute("SELECT clock_frozen_us FROM server_state WHERE id = 1").fetchone()[0]
    return {"now": format_us(now_us(conn)), "frozen": frozen is not None}


def _store(conn: sqlite3.Connection, target_us: int, frozen: bool) -> None:
    if frozen:
        conn.execute("UPDATE server_state SET clock_frozen_us = ? WHERE id = 1", (target_us,))
    else:
        conn.execute(
            "UPDATE server_state SET clock_frozen_us = NULL, clock_offset_us = ? WHERE id = 1",
            (target_us - real_us(),),
        )


# The latest server time the control API sets: later ones leave no room for a year-long TTL or
# retention before year 10000, which timestamps (and Python's datetime) cannot hold.
LATEST = "9000-01-01T00:00:00.000000Z"


def _within_range(target_us: int, pointer: str) -> None:
    if target_us > parse_timestamp(LATEST):
        raise invalid_field(pointer, f"must not move the clock past {LATEST}")


def advance(conn: sqlite3.Connection, seconds: float) -> dict[str, object]:
    if seconds < 0:
        raise DomainError(
            "clock_regression",
            "the clock never moves backwards; use reset to return to real time",
            details={"now": format_us(now_us(conn))},
        )
    frozen = state(conn)["frozen"] is True
    target = now_us(conn) + round(seconds * 1_000_000)
    _within_range(target, "/seconds")
    _store(conn, target, frozen)
    return state(conn)


def set_clock(conn: sqlite3.Connection, *, now: str | None, frozen: bool | None) -> dict[str, object]:
    current = now_us(conn)
    target = current
    if now is not None:
        try:
            target = parse_timestamp(now)
        except ValueError:  # the schema's pattern takes 2026-02-30 and +99:00; the calendar does not
            raise invalid_field("/now", "must be a real RFC 3339 date-time") from None
        if target < current:
            raise DomainError(
                "clock_regression",
                "the clock never moves backwards; use reset to return to real time",
                details={"now": format_us(current)},
            )
        _within_range(target, "/now")
    keep_frozen = (state(conn)["frozen"] is True) if frozen is None else frozen
    _store(conn, target, keep_frozen)
    return state(conn)
