"""SDK clients for tests: every wait the client asks for is recorded and returns at once.

A ``Retry-After: 3`` answer then costs a test no wall time, and the test can still check the wait:

```python
await fake_lucy.admin.add_fault("propose", 429, retry_after=3)
await lucy_client.propose(...)
assert lucy_client.waits == [3.0]
```

The waits are the SDK's own decisions (``lucy_memory.retry``): retry delays and the pauses of
``wait_for_decision`` between polls. The fake's clock does not move with them.
"""

from __future__ import annotations

from typing import Any

from lucy_memory import AgentMemoryClient, SyncAgentMemoryClient

__all__ = ["RecordedWaits", "RecordingAgentMemoryClient", "RecordingSyncAgentMemoryClient"]


class RecordedWaits:
    """An injectable ``sleep`` that returns at once and appends each delay (seconds) to ``waits``."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(float(seconds))


class _RecordsWaits:
    """What both recording clients add to their SDK client: ``waits``, and the sleep that fills it."""

    _recorded: RecordedWaits

    def _with_recorded_sleep(self, options: dict[str, Any]) -> dict[str, Any]:
        """The client's options with the recording sleep (a ``sleep`` of the caller's is refused)."""
        if "sleep" in options:
            raise TypeError(f"{type(self).__name__} brings its own sleep")
        self._recorded = RecordedWaits()
        return {**options, "sleep": self._recorded}

    @property
    def waits(self) -> list[float]:
        """Every delay this client asked to sleep, in order (seconds)."""
        return self._recorded.waits


class RecordingAgentMemoryClient(_RecordsWaits, AgentMemoryClient):
    """An ``AgentMemoryClient`` whose waits are recorded in ``waits`` instead of slept."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**self._with_recorded_sleep(options))


class RecordingSyncAgentMemoryClient(_RecordsWaits, SyncAgentMemoryClient):
    """A ``SyncAgentMemoryClient`` whose waits are recorded in ``waits`` instead of slept."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**self._with_recorded_sleep(options))
