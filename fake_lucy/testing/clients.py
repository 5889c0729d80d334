"""SDK clients for tests: every wait the client asks for is recorded and returns at once.

A ``Retry-After: 3`` answer then costs a test no wall time, and the test can still check the wait:

```python
await fake_lucy.admin.add_fault("propose", 429, retry_after=3)
await lucy_client.propose(...)
assert lucy_client.waits == [3.0]
```

The waits are the SDK's own decisions (``lucy_memory.retry``): retry delays and the pauses of
``wait_for_decision`` between polls. Given ``advance`` (the plugin's fixtures give the fake's clock
advance), each wait moves the fake's clock by as much instead, so the fake sees the client wait as
it asked (``--lucy-strict`` judges the retry's timing by that clock).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from lucy_memory import AgentMemoryClient, SyncAgentMemoryClient

__all__ = ["RecordedWaits", "RecordingAgentMemoryClient", "RecordingSyncAgentMemoryClient"]


Advance = Callable[[float], Awaitable[None]]


class RecordedWaits:
    """An injectable ``sleep`` that returns at once and appends each delay (seconds) to ``waits``;
    with ``advance``, it moves the fake's clock by the delay instead of sleeping."""

    def __init__(self, advance: Advance | None = None) -> None:
        self.waits: list[float] = []
        self._advance = advance

    async def __call__(self, seconds: float) -> None:
        self.waits.append(float(seconds))
        if self._advance is not None and seconds > 0:
            await self._advance(seconds)


class _RecordsWaits:
    """What both recording clients add to their SDK client: ``waits``, and the sleep that fills it."""

    _recorded: RecordedWaits

    def _with_recorded_sleep(self, options: dict[str, Any], advance: Advance | None) -> dict[str, Any]:
        """The client's options with the recording sleep (a ``sleep`` of the caller's is refused)."""
        if "sleep" in options:
            raise TypeError(f"{type(self).__name__} brings its own sleep")
        self._recorded = RecordedWaits(advance)
        return {**options, "sleep": self._recorded}

    @property
    def waits(self) -> list[float]:
        """Every delay this client asked to sleep, in order (seconds)."""
        return self._recorded.waits


class RecordingAgentMemoryClient(_RecordsWaits, AgentMemoryClient):
    """An ``AgentMemoryClient`` whose waits are recorded in ``waits`` instead of slept (and, with
    ``advance``, move the fake's clock)."""

    def __init__(self, *, advance: Advance | None = None, **options: Any) -> None:
        super().__init__(**self._with_recorded_sleep(options, advance))


class RecordingSyncAgentMemoryClient(_RecordsWaits, SyncAgentMemoryClient):
    """A ``SyncAgentMemoryClient`` whose waits are recorded in ``waits`` instead of slept (and, with
    ``advance``, move the fake's clock)."""

    def __init__(self, *, advance: Advance | None = None, **options: Any) -> None:
        super().__init__(**self._with_recorded_sleep(options, advance))
