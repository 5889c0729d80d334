"""Snapshot files (SPEC 3.9): ``fake-lucy serve --import FILE`` and ``--export-on-exit FILE``.

An export is written atomically: to a temporary file in the target's directory, flushed and
fsynced, then renamed over the target (and the directory fsynced), so the file is always either
the previous snapshot or a complete new one, whenever the process is stopped or killed.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from fake_lucy import __version__
from fake_lucy.domain import snapshot
from fake_lucy.domain.errors import DomainError
from fake_lucy.http.problems import json_bytes
from fake_lucy.runtime import FakeLucy
from lucy_memory._contract import InvalidJSONError, parse_json_object

__all__ = ["export_file", "import_file", "write_atomically"]


def import_file(fake: FakeLucy, path: Path) -> None:
    """Replace the fake's state with the snapshot in ``path`` (nothing changes when it is refused)."""
    try:
        document = parse_json_object(path.read_bytes())
    except OSError as exc:
        raise ValueError(f"cannot read the snapshot {path} ({exc.strerror or exc})") from None
    except InvalidJSONError as exc:
        raise ValueError(f"the snapshot {path} is not a JSON object ({exc})") from None
    try:
        with fake.db.write() as conn:
            snapshot.restore_state(conn, document)
    except DomainError as exc:
        errors = (exc.details or {}).get("errors") or []
        where = "; ".join(f"{error['pointer'] or '/'} {error['detail']}" for error in errors[:3])
        raise ValueError(f"the snapshot {path} cannot be imported: {exc.detail}: {where}") from None


def export_file(fake: FakeLucy, path: Path) -> None:
    """Write the fake's state to ``path`` atomically."""
    with fake.db.write() as conn:  # one transaction: a consistent state
        document = snapshot.export_state(conn, fake_version=__version__)
    write_atomically(path, json_bytes(document) + b"\n")


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
