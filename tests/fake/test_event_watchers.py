"""A stream is told at once when its worker writes events (``events.watch``); the telling never
fails the write, whatever became of the stream."""

from __future__ import annotations

import asyncio
import gc
import warnings
from pathlib import Path

from fake_lucy.domain import clock, events
from fake_lucy.http.events import EventStream
from fake_lucy.runtime import FakeLucy
from fake_lucy.settings import FakeLucySettings


def _emit_reset(fake: FakeLucy) -> None:
    with fake.db.write() as conn:
        events.emit(conn, "reset", {}, at=clock.now(conn), tenant=None)


def test_a_stream_whose_event_loop_ended_without_closing_it_never_fails_a_write(tmp_path: Path) -> None:
    fake = FakeLucy(FakeLucySettings(database=str(tmp_path / "left.sqlite3")))
    try:
        frames = EventStream(fake, poll=3600).response({}, None, tenant=None).body_iterator
        loop = asyncio.new_event_loop()
        loop.run_until_complete(anext(frames))  # ": connected"
        waiting = loop.create_task(anext(frames))  # the stream now waits for a write
        loop.call_soon(loop.stop)  # one turn of the loop: the task runs until it waits
        loop.run_forever()
        assert not waiting.done()
        loop.close()  # a test's loop ends with the stream still open, as a leaked stream does
        _emit_reset(fake)  # told to a loop that is closed: nothing to wake, and the write stands
        with fake.db.read() as conn:
            assert [e.type for e in events.after(conn, 0, tenant=None)][-1] == "reset"
    finally:
        with warnings.catch_warnings():  # the abandoned task and generator, collected here
            warnings.simplefilter("ignore")
            del waiting, frames
            gc.collect()
        fake.close()


def test_a_watcher_is_told_of_each_write_of_events_on_its_connection_while_it_watches(tmp_path: Path) -> None:
    fake = FakeLucy(FakeLucySettings(database=str(tmp_path / "told.sqlite3")))
    told: list[str] = []
    try:
        with events.watch(fake.db.conn, lambda: told.append("first")):
            with events.watch(fake.db.conn, lambda: told.append("second")):
                _emit_reset(fake)
            _emit_reset(fake)
        _emit_reset(fake)
    finally:
        fake.close()
    assert told == ["first", "second", "first"]
