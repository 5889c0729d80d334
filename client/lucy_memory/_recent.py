"""A count per idempotency key, for the few keys a client or the MCP server must remember."""

from __future__ import annotations

__all__ = ["RecentCounts"]


class RecentCounts:
    """At most ``limit`` keys, each with a count; the key set longest ago is forgotten first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._counts: dict[str, int] = {}

    def get(self, key: str) -> int:
        return self._counts.get(key, 0)

    def pop(self, key: str) -> int:
        return self._counts.pop(key, 0)

    def set(self, key: str, count: int) -> None:
        self._counts.pop(key, None)  # newest last
        self._counts[key] = count
        while len(self._counts) > self.limit:
            del self._counts[next(iter(self._counts))]
