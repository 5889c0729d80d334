"""Failure dumps (``pytest --lucy-dump-on-failure``): ``{test, fixture, snapshot, journal, findings}``.

Every reader of a snapshot file — ``fake-lucy serve --import``, ``fake-lucy snapshot import`` and
``@pytest.mark.lucy_snapshot`` — takes a dump too, and reads the snapshot in it: a failed test's
state goes into a fake as the dump was written.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DUMP_KEYS", "snapshot_in"]

DUMP_KEYS = frozenset({"test", "fixture", "snapshot", "journal", "findings"})
# SPEC 3.9's dump, which a dump written before it named its fixture still is
_REQUIRED_KEYS = DUMP_KEYS - {"fixture"}


def snapshot_in(document: dict[str, Any]) -> dict[str, Any]:
    """The snapshot a failure dump holds; ``document`` itself when it is not a dump."""
    inner = document.get("snapshot")
    if _REQUIRED_KEYS <= document.keys() <= DUMP_KEYS and isinstance(inner, dict):
        return inner
    return document
