"""The clocks: the server clock and one per tenant, each real time plus an offset, optionally
frozen; stored in the database (``server_state`` and ``tenants``).

Expiry, idempotency retention, rate-limit refill and every timestamp the fake emits read the clock
of the tenant they belong to (SPEC 3.3, 3.6). A tenant admin moves only its tenant's clock. The
server admin moves the server clock, which every tenant follows: ``advance`` adds to every tenant's
clock, ``set_clock(now=…)`` brings every tenant that is behind ``now`` up to it, ``frozen`` applies
to all; a new tenant starts at the server clock. No clock moves backwards (reset aside).

Every change moves the credential epoch: an authenticated principal carries its tenant's clock.
"""

from __future__ import annotations

import functools
import math
import re
import sqlite3
import time
from datetime import UTC, datetime

from fake_lucy.domain import events
from fake_lucy.domain.epochs import bump_auth_epoch
from fake_lucy.domain.errors import DomainError, invalid_field
from fake_lucy.store import queries

# ``90s``, ``15m``, ``2h``, ``7d``, ``1h30m``, or plain seconds: ASCII digits only (``float`` would also
# read ``1_000``, ``1e3``, ``nan`` and other scripts' digits, which no operator means as a duration)
_DURATION = re.compile(r"(?:[0-9]+(?:\.[0-9]+)?[smhd])+|[0-9]+(?:\.[0-9]+)?")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhd])")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}

__all__ = [
    "LATEST",
    "advance",
    "follow_server",
    "format_us",
    "from_state",
    "now",
    "now_us",
    "parse_duration",
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


def from_state(offset: int, frozen: int | None, at_real_us: int | None = None) -> int:
    """The time of a clock from its stored columns ``clock_offset_us`` and ``clock_frozen_us``
    (at the real time ``at_real_us``, default now)."""
    if frozen is not None:
        return int(frozen)
    return (real_us() if at_real_us is None else at_real_us) + int(offset)


def _columns(conn: sqlite3.Connection, tenant: str | None) -> tuple[int, int | None]:
    """``(clock_offset_us, clock_frozen_us)`` of the server clock (``tenant=None``) or a tenant's."""
    if tenant is None:
        row = conn.execute(
            "SELECT clock_offset_us, clock_frozen_us FROM server_state WHERE id = 1"
        ).fetchone()
    else:
        row = conn.execute(
            "SELECT clock_offset_us, clock_frozen_us FROM tenants WHERE id = ?", (tenant,)
        ).fetchone()
        if row is None:
            raise DomainError("not_found", "no tenant has this id")
    return int(row[0]), None if row[1] is None else int(row[1])


def now_us(conn: sqlite3.Connection, tenant: str | None = None) -> int:
    return from_state(*_columns(conn, tenant))


def now(conn: sqlite3.Connection, tenant: str | None = None) -> str:
    """The time of the server clock, or of a tenant's, as the API writes it."""
    return format_us(now_us(conn, tenant))


def state(conn: sqlite3.Connection, tenant: str | None = None) -> dict[str, object]:
    offset, frozen = _columns(conn, tenant)
    return {"now": format_us(from_state(offset, frozen)), "frozen": frozen is not None}


def _store(conn: sqlite3.Connection, tenant: str | None, target_us: int, frozen: bool, real: int) -> None:
    offset, frozen_us = (None, target_us) if frozen else (target_us - real, None)
    if tenant is None:
        conn.execute(
            "UPDATE server_state SET clock_offset_us = coalesce(?, clock_offset_us),"
            " clock_frozen_us = ? WHERE id = 1",
            (offset, frozen_us),
        )
    else:
        conn.execute(
            "UPDATE tenants SET clock_offset_us = coalesce(?, clock_offset_us), clock_frozen_us = ?"
            " WHERE id = ?",
            (offset, frozen_us, tenant),
        )


def follow_server(conn: sqlite3.Connection, tenant: str) -> None:
    """Put ``tenant``'s clock where the server clock is (a new or reset tenant)."""
    conn.execute(
        "UPDATE tenants SET (clock_offset_us, clock_frozen_us) ="
        " (SELECT clock_offset_us, clock_frozen_us FROM server_state WHERE id = 1) WHERE id = ?",
        (tenant,),
    )
    bump_auth_epoch(conn)


# The latest time the control API sets a clock to: later ones leave no room for a year-long TTL or
# retention before year 10000, which timestamps (and Python's datetime) cannot hold.
LATEST = "9000-01-01T00:00:00.000000Z"


def _within_range(target_us: int, pointer: str) -> None:
    if target_us > parse_timestamp(LATEST):
        raise invalid_field(pointer, f"must not move the clock past {LATEST}")


def _regression(current_us: int) -> DomainError:
    return DomainError(
        "clock_regression",
        "the clock never moves backwards; use reset to return to real time",
        details={"now": format_us(current_us)},
    )


# Each change reads the real time once, so that clocks that agreed (a tenant following the server
# clock) still agree afterwards, to the microsecond.


def advance(conn: sqlite3.Connection, seconds: float, tenant: str | None = None) -> dict[str, object]:
    """Move a tenant's clock, or the server clock and every tenant's with it, ``seconds`` ahead."""
    real = real_us()
    offset, frozen = _columns(conn, tenant)
    current = from_state(offset, frozen, real)
    if seconds < 0:
        raise _regression(current)
    step = round(seconds * 1_000_000)
    _within_range(current + step, "/seconds")
    if tenant is None:
        # Every tenant's clock moves with the server's; one that its admin put near the end of the
        # range stops there, so that no tenant's clock can refuse the server admin's advance (nor
        # tell it that some tenant is there), and none moves backwards: a running clock already at
        # or past the end (it runs on from where its admin set it) keeps its offset. A frozen
        # clock's offset is not read until it runs again: it moves by the step as before. max() and
        # min() of NULL are NULL: a running clock stays running.
        latest = parse_timestamp(LATEST)
        conn.execute(
            "UPDATE tenants SET clock_offset_us = CASE WHEN clock_frozen_us IS NULL"
            " THEN max(clock_offset_us, min(clock_offset_us + :step, :latest - :real))"
            " ELSE clock_offset_us + :step END,"
            " clock_frozen_us = max(clock_frozen_us, min(clock_frozen_us + :step, :latest))",
            {"step": step, "latest": latest, "real": real},
        )
    _store(conn, tenant, current + step, frozen is not None, real)
    bump_auth_epoch(conn)
    return _changed(conn, tenant)


def _changed(conn: sqlite3.Connection, tenant: str | None) -> dict[str, object]:
    """The clock's new state, announced as a ``clock.changed`` event. The server clock's is
    server-wide, and every tenant's clock moved with it: each tenant gets one of its own, with its
    own clock (a tenant's stream shows that one, not the server's)."""
    current = state(conn, tenant)
    events.emit(conn, "clock.changed", current, at=str(current["now"]), tenant=tenant)
    if tenant is None:
        for each in queries.tenant_ids(conn):
            own = state(conn, each)
            events.emit(conn, "clock.changed", own, at=str(own["now"]), tenant=each)
    return current


def set_clock(
    conn: sqlite3.Connection, *, now: str | None, frozen: bool | None, tenant: str | None = None
) -> dict[str, object]:
    """Set a tenant's clock, or the server clock: then every tenant behind ``now`` comes up to
    it and ``frozen`` (when given) applies to every tenant."""
    real = real_us()
    offset, frozen_us = _columns(conn, tenant)
    current = from_state(offset, frozen_us, real)
    target = current
    if now is not None:
        try:
            target = parse_timestamp(now)
        except ValueError:  # the schema's pattern takes 2026-02-30 and +99:00; the calendar does not
            raise invalid_field("/now", "must be a real RFC 3339 date-time") from None
        if target < current:
            raise _regression(current)
        _within_range(target, "/now")
    keep_frozen = (frozen_us is not None) if frozen is None else frozen
    if tenant is None:
        _bring_tenants_up(conn, None if now is None else target, frozen, real)
    _store(conn, tenant, target, keep_frozen, real)
    bump_auth_epoch(conn)
    return _changed(conn, tenant)


def _bring_tenants_up(conn: sqlite3.Connection, floor_us: int | None, frozen: bool | None, real: int) -> None:
    """Every tenant clock at ``floor_us`` at least (never backwards), frozen or not as ``frozen``
    says (each keeps its own when it says nothing)."""
    conn.execute(
        "UPDATE tenants SET"
        " clock_frozen_us = CASE WHEN coalesce(:frozen, clock_frozen_us IS NOT NULL)"
        "  THEN max(coalesce(clock_frozen_us, :real + clock_offset_us), :floor) ELSE NULL END,"
        " clock_offset_us = CASE WHEN coalesce(:frozen, clock_frozen_us IS NOT NULL)"
        "  THEN clock_offset_us"
        "  ELSE max(coalesce(clock_frozen_us, :real + clock_offset_us), :floor) - :real END",
        {"frozen": frozen, "real": real, "floor": -(2**62) if floor_us is None else floor_us},
    )


def parse_duration(text: str) -> float:
    """``90s``, ``15m``, ``2h``, ``7d``, ``1h30m`` or plain seconds → seconds, as the operator CLI and
    the console read what a person typed (surrounding blanks and the letters' case aside);
    ``ValueError`` for anything else, a negative or an endless one included."""
    value = text.strip().lower()
    if _DURATION.fullmatch(value) is None:
        raise ValueError("not a duration")
    if value[-1] in _DURATION_UNITS:
        seconds = sum(float(number) * _DURATION_UNITS[unit] for number, unit in _DURATION_PART.findall(value))
    else:
        seconds = float(value)
    if not math.isfinite(seconds):  # digits enough to overflow a float
        raise ValueError("not a duration")
    return seconds
