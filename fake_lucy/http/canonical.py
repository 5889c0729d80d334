"""The RFC 8785 (JCS) hash of a propose body, by orjson when that gives JCS's bytes.

For strings, booleans, null, integers a double holds exactly and objects with ASCII keys, JCS's
form is orjson's with sorted keys: the same escapes (``\\"``, ``\\\\``, ``\\b \\f \\n \\r \\t``, other
controls as ``\\u00xx``, everything else as itself in UTF-8), no spaces, and ASCII keys sort the
same by UTF-16 code units as by code points. A float (ECMAScript's number form), a larger integer or
a key outside ASCII goes to ``rfc8785`` itself, as does anything orjson refuses. A propose body is
hashed on every call (the Idempotency-Key's body check), and ``rfc8785`` walks it in Python.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from lucy_memory._contract import canonical_bytes

__all__ = ["body_sha256"]

_EXACT = 2**53 - 1  # the largest integer JCS writes as itself (a double holds it exactly)


def _plain(value: Any) -> bool:
    """Whether orjson's sorted form of ``value`` is its JCS form."""
    if value is None or isinstance(value, str | bool):
        return True
    if isinstance(value, int):
        return -_EXACT <= value <= _EXACT
    if isinstance(value, dict):
        return all(isinstance(key, str) and key.isascii() and _plain(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_plain(item) for item in value)
    return False


def body_sha256(body: dict[str, Any]) -> str:
    """``canonical_sha256(body)``, the same hex digest."""
    try:
        data = orjson.dumps(body, option=orjson.OPT_SORT_KEYS) if _plain(body) else canonical_bytes(body)
    except (RecursionError, orjson.JSONEncodeError):  # nested past this walk or orjson; a lone surrogate
        data = canonical_bytes(body)
    return hashlib.sha256(data).hexdigest()
