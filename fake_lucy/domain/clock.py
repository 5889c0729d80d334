"""The server clock: real time plus an offset, optionally frozen; stored in the database.

Expiry, idempotency retention, rate-limit refill and every timestamp the fake emits read it.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from datetime import UTC, datetime

from fake_lucy.domain import events
from fake_lucy.domain.errors import DomainError, invalid_field

__all__ = ["advance", "format_us", "from_state", "now", "now_us", "parse_timestamp", "set_clock", "state"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _real_us() -> int:
    return time.time_ns() // 1000


@functools.lru_cache(maxsize=16)
def _whole_seconds(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")


def format_us(us: int) -> str:
    seconds, micros = divmod(us, 1_000_000)
    return f"{_whole_seconds(seconds)}.{micros:06d}Z"


def parse_timestamp(value: str) -> int:
    moment = datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_state(offset: int, frozen: int | None) -> int:
    """The server time from the stored columns ``clock_offset_us`` and ``clock_frozen_us``."""
    return int(frozen) if frozen is not None else _real_us() + int(offset)


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
            (target_us - _real_us(),),
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
    return _changed(conn)


def _changed(conn: sqlite3.Connection) -> dict[str, object]:
    """The clock's new state, announced as a ``clock.changed`` event (server-wide)."""
    current = state(conn)
    events.emit(conn, "clock.changed", current, at=str(current["now"]), tenant=None)
    return current


def set_clock(conn: sqlite3.Connection, *, now: str | None, frozen: bool | None) -> dict[str, object]:
    current = now_us(conn)
    target = current
    if now is not None:
        try:
            target = parse_timestamp(now)
        except ValueError:  # the schema's pattern takes 2026-02-30; the calendar does not
            raise invalid_field("/now", "must be a real date and time") from None
        if target < current:
            raise DomainError(
                "clock_regression",
                "the clock never moves backwards; use reset to return to real time",
                details={"now": format_us(current)},
            )
        _within_range(target, "/now")
    keep_frozen = (state(conn)["frozen"] is True) if frozen is None else frozen
    _store(conn, target, keep_frozen)
    return _changed(conn)
