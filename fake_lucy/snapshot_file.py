"""Snapshot files (SPEC 3.9): ``fake-lucy serve --import FILE`` and ``--export-on-exit FILE``.

An export is written atomically (``files.write_atomically``): the file is always either the previous
snapshot or a complete new one, whenever the process is stopped or killed.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from fake_lucy import __version__
from fake_lucy.domain import snapshot
from fake_lucy.domain.errors import DomainError
from fake_lucy.domain.principals import hash_token
from fake_lucy.dumps import snapshot_in
from fake_lucy.files import write_atomically
from fake_lucy.http.problems import json_bytes
from fake_lucy.runtime import FakeLucy
from lucy_memory._contract import InvalidJSONError, parse_json_object

__all__ = ["export_file", "import_file", "read_snapshot", "restore_snapshot"]


def import_file(fake: FakeLucy, path: Path) -> None:
    """Replace the fake's state with the snapshot in ``path`` (nothing changes when it is refused)."""
    document = read_snapshot(path)
    with fake.db.write() as conn:
        restore_snapshot(fake, conn, path, document)


def read_snapshot(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (the snapshot in it, when it is a failure dump); ``ValueError``
    (one line naming the file) when it is none."""
    try:
        return snapshot_in(parse_json_object(path.read_bytes(), subject="the file"))
    except OSError as exc:
        raise ValueError(f"cannot read the snapshot {path} ({exc.strerror or exc})") from None
    except InvalidJSONError as exc:
        raise ValueError(f"the snapshot {path} is not a JSON object ({exc})") from None


def restore_snapshot(fake: FakeLucy, conn: sqlite3.Connection, path: Path, document: dict[str, Any]) -> None:
    """Restore ``document`` (read from ``path``) in the caller's transaction; ``ValueError`` (one
    line) when it is refused, and the caller's transaction then changes nothing."""
    try:
        snapshot.restore_state(conn, document, server_admin_token_sha256=hash_token(fake.admin_token))
    except DomainError as exc:
        errors = (exc.details or {}).get("errors") or []
        where = "; ".join(f"{error['pointer'] or '/'} {error['detail']}" for error in errors[:3])
        raise ValueError(f"the snapshot {path} cannot be imported: {exc.detail}: {where}") from None


def export_file(fake: FakeLucy, path: Path) -> None:
    """Write the fake's state to ``path`` atomically; ``OSError`` naming the file when it cannot be
    written (a full disk, say), with whatever was there left as it was."""
    with fake.db.write() as conn:  # one transaction: a consistent state
        document = snapshot.export_state(conn, fake_version=__version__)
    try:
        write_atomically(path, json_bytes(document) + b"\n")
    except (OSError, ValueError) as exc:  # ValueError: something there that is no file to replace
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise OSError(f"cannot write the snapshot {path} ({reason}); what was there is as it was") from None
