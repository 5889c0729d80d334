"""Listing cursors of the control API: opaque to clients, and only ever what this server issued.

A cursor is the unpadded URL-safe base64 of ``json.dumps`` of a row position: a row number
(``seq``) for proposals, the journal and the ledger, ``[memory id, version]`` for memories. A
cursor is read back only if it is exactly one this server could have written: strict base64,
UTF-8, the expected JSON shape and an integer SQLite can bind, and re-encoding it gives the same
text. Anything else — arbitrary bytes, JSON nested thousands deep, a lone surrogate, the wrong
types — is 422 ``invalid_request`` with the pointer ``/cursor``, never a 500.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from fake_lucy.http.problems import ProblemError

__all__ = ["MAX_CURSOR", "decode_pair", "decode_seq", "encode", "invalid_cursor"]

# The longest cursor this server issues is a memory id and a version; 1,024 characters is far above it.
MAX_CURSOR = 1024
_MAX_SQLITE_INTEGER = 2**63 - 1


def invalid_cursor() -> ProblemError:
    return ProblemError(
        "invalid_request",
        "a query parameter is invalid",
        details={"errors": [{"pointer": "/cursor", "detail": "is not a cursor this server issued"}]},
    )


def encode(value: int | tuple[str, int] | list[Any]) -> str:
    """The cursor for a row position: ``seq`` or ``(memory id, version)``."""
    if isinstance(value, tuple):
        value = list(value)
    return base64.urlsafe_b64encode(json.dumps(value).encode("ascii")).decode("ascii").rstrip("=")


def _is_row_number(value: Any) -> bool:
    # a SQLite integer (a bool, a float or an int too large to bind is not)
    return type(value) is int and 0 <= value <= _MAX_SQLITE_INTEGER


def _decode(raw: str) -> Any:
    if not raw or len(raw) > MAX_CURSOR or not raw.isascii():
        raise invalid_cursor()
    try:
        # validate=True: every character must be of the URL-safe alphabet (no silently skipped junk)
        text = base64.b64decode(raw + "=" * (-len(raw) % 4), altchars=b"-_", validate=True).decode("utf-8")
        value = json.loads(text)
    except (ValueError, binascii.Error, RecursionError):  # UnicodeDecodeError and JSONDecodeError included
        raise invalid_cursor() from None
    return value


def _issued(raw: str, value: Any) -> Any:
    """``value`` if this server writes exactly ``raw`` for it (no other spelling of the same JSON)."""
    try:
        if encode(value) != raw:
            raise invalid_cursor()
    except (TypeError, ValueError):  # not JSON this module writes
        raise invalid_cursor() from None
    return value


def decode_seq(raw: str | None) -> int:
    """The row number after which a seq-ordered listing continues (0 without a cursor; an empty
    one was not issued here: a client that sends it back would read the first page again)."""
    if raw is None:
        return 0
    value = _decode(raw)
    if not _is_row_number(value):
        raise invalid_cursor()
    return int(_issued(raw, value))


def decode_pair(raw: str | None) -> tuple[str, int] | None:
    """The ``(memory id, version)`` after which the memories listing continues (``None`` without one)."""
    if raw is None:
        return None
    value = _decode(raw)
    if not (
        isinstance(value, list) and len(value) == 2 and type(value[0]) is str and _is_row_number(value[1])
    ):
        raise invalid_cursor()
    memory_id, version = value
    try:
        memory_id.encode("utf-8")  # a lone surrogate cannot be bound as SQLite text
    except UnicodeEncodeError:
        raise invalid_cursor() from None
    _issued(raw, value)
    return memory_id, version
