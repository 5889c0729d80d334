"""Files written whole or not at all: to a temporary file in the target's directory, flushed and
fsynced, then renamed over the target (and the directory fsynced), so the file is always either the
previous one or a complete new one, whenever the process is stopped or killed."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["write_atomically"]


def write_atomically(path: Path, data: bytes) -> None:
    directory = path.parent if str(path.parent) else Path()
    directory.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=directory)
    temporary = Path(name)
    try:
        with os.fdopen(handle, "wb") as output:
            output.write(data)
            output.flush()
            os.fsync(output.fileno())
        temporary.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)  # the rename itself survives a crash
    finally:
        os.close(descriptor)
