"""The derived idempotency keys Lucy refused for good, kept across restarts of the server.

``memory_propose`` without an ``idempotency_key`` derives one from its arguments. Once Lucy refused a
proposal for good (a 4xx but 429 and 409 ``idempotency_key_in_use``), Lucy's rules forbid sending the
same body under that key again: the same arguments are a new request, under ``<derived>-1``, ``-2``,
and so on. A host restarts its MCP servers (a new session, a changed configuration), so the count of
each key's refusals is kept in a small JSON file as well as in memory, and read again before each
derived key is used (another server process of the same user may have been refused meanwhile).

The file holds no token and no proposal text: each entry is named by a digest of the service's origin
and the token (a key is the account's on Lucy's side) and the key, itself a digest of the arguments.
It is written whole through a temporary file renamed over it, readable by its owner alone. A file
that cannot be read or written costs the memory across restarts, never a tool call: it is said once
on stderr (the log) and the server goes on with what it holds in memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path

__all__ = ["FILE_NAME", "RefusedKeys", "default_state_dir"]

FILE_NAME = "refused-keys.json"
_FORMAT = "lucy-memory-mcp-refused-keys"
_MAX_ENTRIES = 1024  # the newest kept, over every service and token: a refusal is rare

logger = logging.getLogger("lucy_memory.mcp")


def default_state_dir() -> Path | None:
    """``$XDG_STATE_HOME/lucy-memory-mcp``, else ``~/.local/state/lucy-memory-mcp``; None when the
    home folder is unknown (the refusals are then kept in memory only)."""
    base = os.environ.get("XDG_STATE_HOME")
    if base and Path(base).is_absolute():
        return Path(base) / "lucy-memory-mcp"
    try:
        return Path.home() / ".local" / "state" / "lucy-memory-mcp"
    except RuntimeError:  # no HOME and no password entry
        return None


class RefusedKeys:
    """How many times Lucy refused each derived key for good, for one service and token."""

    def __init__(self, directory: Path | None = None, *, origin: str = "", token: str = "") -> None:
        self._path = None if directory is None else directory / FILE_NAME
        digest = hashlib.sha256(f"{_FORMAT}\0{origin}\0{token}".encode()).hexdigest()[:32]
        self._prefix = digest + ":"
        self._counts: dict[str, int] = {}  # the entries of every service, as the file holds them
        self._warned = False

    def __repr__(self) -> str:
        return f"RefusedKeys(path={self._path!r})"

    def get(self, key: str) -> int:
        self._read()
        return self._counts.get(self._prefix + key, 0)

    def set(self, key: str, refusals: int) -> None:
        self._read()
        self._counts.pop(self._prefix + key, None)
        self._counts[self._prefix + key] = refusals  # the newest last
        while len(self._counts) > _MAX_ENTRIES:
            del self._counts[next(iter(self._counts))]
        self._write()

    def _read(self) -> None:
        if self._path is None:
            return
        try:
            document = json.loads(self._path.read_bytes())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            self._warn(f"cannot read {self._path} ({_reason(exc)})")
            return
        entries = document.get("entries") if isinstance(document, dict) else None
        if not isinstance(entries, dict) or document.get("format") != _FORMAT:
            self._warn(f"{self._path} is not a file of refused keys; it is left as it is")
            self._path = None  # never written over
            return
        merged = {
            name: count
            for name, count in entries.items()
            if isinstance(name, str) and isinstance(count, int) and not isinstance(count, bool) and count > 0
        }
        for name, count in self._counts.items():  # what this process knows, and another does not yet
            merged[name] = max(count, merged.get(name, 0))
        self._counts = merged

    def _write(self) -> None:
        if self._path is None:
            return
        data = json.dumps({"format": _FORMAT, "version": 1, "entries": self._counts}).encode()
        temporary: Path | None = None
        try:
            self._path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            handle, name = tempfile.mkstemp(prefix=f".{FILE_NAME}.", dir=self._path.parent)
            temporary = Path(name)
            with os.fdopen(handle, "wb") as output:  # mkstemp's file is its owner's alone (0o600)
                output.write(data)
            temporary.replace(self._path)
        except OSError as exc:
            if temporary is not None:
                with contextlib.suppress(OSError):
                    temporary.unlink()
            self._warn(f"cannot write {self._path} ({_reason(exc)})")

    def _warn(self, problem: str) -> None:
        if not self._warned:
            self._warned = True
            logger.warning(
                "%s: the derived keys Lucy refused are kept in memory only, so a restarted server may"
                " send one again (set LUCY_MEMORY_STATE_DIR to a folder it can write)",
                problem,
            )


def _reason(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
