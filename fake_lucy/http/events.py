"""The event stream as ``text/event-stream`` (SPEC 3.7), for ``GET /_fake/events`` and the console.

Every worker reads the one ``events`` table, so a stream shows the changes of all workers in
commit order. A stream reads the table (an indexed read of the ids after the last one it sent) as
soon as its own worker writes events (``events.watch``: at most every ``GATHER_SECONDS``, so that a
busy fake's events go out a batch at a time), and every ``POLL_SECONDS`` for those of other
workers; it sends a comment line when it has sent nothing for ``KEEPALIVE_SECONDS``, and ends when
the server shuts down (the ``fake_lucy.shutdown`` extension) or ``still_allowed`` says no: before
every send, and every ``ALLOWED_CHECK_SECONDS`` while idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio
import orjson
from starlette.responses import StreamingResponse

from fake_lucy.domain import events
from fake_lucy.domain.errors import invalid_field
from fake_lucy.domain.events import EventRow
from fake_lucy.http.abort import SHUTDOWN_EXTENSION
from fake_lucy.http.problems import ProblemError
from fake_lucy.runtime import FakeLucy

__all__ = ["EVENT_STREAM", "EventStream", "event_frame", "last_event_id"]

EVENT_STREAM = "text/event-stream"
POLL_SECONDS = 0.2
GATHER_SECONDS = 0.02
KEEPALIVE_SECONDS = 10.0  # SPEC: at least every 15 s
_ID = re.compile(r"[0-9]{1,18}")


def last_event_id(headers: Mapping[str, str], query: Mapping[str, str]) -> int | None:
    """Where the reader resumes: the ``Last-Event-ID`` header (a reconnect; empty is none, as an
    EventSource that saw no id sends it), else the query parameter ``after``. A malformed header is
    400 ``invalid_header``; ``after`` is a query parameter, so 422 ``invalid_request`` at ``/after``."""
    header = headers.get("last-event-id")
    if header:
        if not _ID.fullmatch(header):
            raise ProblemError("invalid_header", "Last-Event-ID must be an event id (ASCII digits)")
        return int(header)
    after = query.get("after")
    if after is None:
        return None
    if not _ID.fullmatch(after):
        rule = "must be an event id (1 to 18 ASCII digits)"
        raise invalid_field("/after", rule, "a query parameter is invalid")
    return int(after)


def event_frame(row: EventRow) -> bytes:
    """One event as the stream sends it: ``id``, ``event`` (the type) and one ``data`` line holding
    ``{id, type, at, tenant, data}`` (JSON never contains a raw newline)."""
    head = orjson.dumps({"id": row.id, "type": row.type, "at": row.at, "tenant": row.tenant_id})
    data = head[:-1] + b',"data":' + row.data.encode() + b"}"
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (row.id, row.type.encode(), data)


class EventStream:
    """Streams of one fake's events (the polling interval and keep-alive can be shortened in tests)."""

    def __init__(
        self, fake: FakeLucy, *, poll: float = POLL_SECONDS, keepalive: float = KEEPALIVE_SECONDS
    ) -> None:
        self.fake = fake
        self.poll = poll
        self.keepalive = keepalive

    def response(
        self,
        scope: Mapping[str, Any],
        resume: int | None,
        *,
        tenant: str | None,
        still_allowed: Callable[[], bool] | None = None,
    ) -> StreamingResponse:
        after = events.resume_after(self.fake.db.conn, resume, tenant)
        shutdown = (scope.get("extensions") or {}).get(SHUTDOWN_EXTENSION, {}).get("event")
        return StreamingResponse(
            self._frames(after, tenant, shutdown, still_allowed),
            media_type=EVENT_STREAM,
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def _frames(
        self,
        after: int,
        tenant: str | None,
        shutdown: asyncio.Event | None,
        still_allowed: Callable[[], bool] | None,
    ) -> AsyncIterator[bytes]:
        # ``retry``: how soon an EventSource reconnects (with Last-Event-ID) after the stream ends.
        yield b"retry: 1000\n: connected\n\n"
        sent = time.monotonic()
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()  # set when this worker writes events, or the server shuts down

        def written() -> None:
            # Never the writer's problem: a stream whose loop has ended (not yet finalised) has
            # nothing left to wake.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(wake.set)

        ending = None if shutdown is None else asyncio.ensure_future(shutdown.wait())
        if ending is not None:
            ending.add_done_callback(lambda _: wake.set())
        try:
            with events.watch(self.fake.db.conn, written):
                while True:
                    wake.clear()  # before the read: what is written after it wakes the wait below
                    self.fake.db.commit_group()  # a stream shows committed events only
                    rows = events.after(self.fake.db.conn, after, tenant=tenant)
                    if rows:
                        # Asked after the read: a tenant deleted (or its session ended) before the
                        # read ends the stream here, so it never sends an event of a tenant made
                        # later under the same id, whatever the time since the last look.
                        if still_allowed is not None and not still_allowed():
                            return
                        after = rows[-1].id
                        yield b"".join(event_frame(row) for row in rows)
                        sent = time.monotonic()
                        await anyio.sleep(GATHER_SECONDS)
                        continue
                    if shutdown is not None and shutdown.is_set():
                        return
                    with anyio.move_on_after(self.poll):
                        await wake.wait()
                    if shutdown is not None and shutdown.is_set():
                        return
                    # and after each wait, so that a deleted tenant's (or an ended session's) stream
                    # ends within a poll on every worker: one indexed lookup, beside the poll's own
                    if still_allowed is not None and not still_allowed():
                        return
                    now = time.monotonic()
                    if now - sent >= self.keepalive:
                        yield b": keep-alive\n\n"
                        sent = now
        finally:
            if ending is not None:
                ending.cancel()
