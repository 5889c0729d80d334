"""Readiness waits adapt to a busy machine: a live process is waited for, a dead one fails at once."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from fake_lucy.testing import ServeProcess, fakes
from fake_lucy.testing.fakes import STARTUP_LIMIT


class SteppingClock:
    """Stands in for ``time`` in fakes.py: each sleep moves the clock, nothing really waits."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SteppingClock:
    stepping = SteppingClock()
    monkeypatch.setattr(fakes, "time", stepping)
    return stepping


class Starting:
    """A process that stays alive until ``give_up()``, then says why on stderr and exits 1."""

    def __init__(self) -> None:
        read_end, self._write_end = os.pipe()
        code = "import os, sys; os.read(int(sys.argv[1]), 1); sys.exit('cannot open the database')"
        self.server = ServeProcess.__new__(ServeProcess)  # the poll loop needs only the process
        self.server.process = subprocess.Popen(  # noqa: S603 - our own interpreter
            [sys.executable, "-c", code, str(read_end)],
            pass_fds=(read_end,),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(read_end)

    def give_up(self) -> None:
        os.close(self._write_end)
        self.server.process.wait()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._write_end)
        self.server.process.communicate()


@pytest.fixture
def starting() -> Iterator[Starting]:
    process = Starting()
    yield process
    process.close()


def test_a_live_process_that_is_still_starting_is_waited_for_as_long_as_it_takes(
    clock: SteppingClock, starting: Starting
) -> None:
    checks: list[float] = []

    def ready() -> bool:
        checks.append(clock.now)
        return clock.now >= 90  # far past the 20 s that used to be the limit

    starting.server.wait_until(ready, "ready")
    assert checks[-1] >= 90
    assert max(clock.sleeps) <= 0.1  # it keeps looking often


def test_a_live_process_that_never_gets_ready_fails_after_the_generous_limit(
    clock: SteppingClock, starting: Starting
) -> None:
    with pytest.raises(RuntimeError, match=f"running but not ready after {STARTUP_LIMIT:.0f} s"):
        starting.server.wait_until(lambda: False, "ready")
    assert STARTUP_LIMIT <= clock.now < STARTUP_LIMIT + 1


def test_a_process_that_exits_while_starting_fails_at_once_with_its_stderr(
    clock: SteppingClock, starting: Starting
) -> None:
    checks = 0

    def ready() -> bool:
        nonlocal checks
        checks += 1
        if checks == 3:  # the process gives up while it is being waited for
            starting.give_up()
        return False

    with pytest.raises(RuntimeError, match="exited with 1: cannot open the database"):
        starting.server.wait_until(ready, "ready")
    assert checks == 3  # not one more look once it was gone
    assert clock.now < 1
