"""The command line of a user's own pytest run, as the plugin tests start one."""

from __future__ import annotations

import sys

# Without this project's own test-only plugins (schemathesis, hypothesis: ~1 s of imports in each
# interpreter, and -n 2 starts three), which a user's suite has no need of.
USERS_PYTEST = [
    sys.executable,
    "-m",
    "pytest",
    "-q",
    "-W",
    "error",
    "-p",
    "no:cacheprovider",
    "-p",
    "no:schemathesis",
    "-p",
    "no:hypothesispytest",
]


def users_pytest(*args: str) -> list[str]:
    """``pytest -q -W error`` without the cache and this project's test-only plugins, then ``args``."""
    return [*USERS_PYTEST, *args]
