"""Strict JSON: one object, no duplicate keys, no NaN/Infinity, no lone surrogates, at most
``MAX_DEPTH`` levels of nesting.

Python's ``json`` module accepts all three of those; a server that hashes canonical bodies must not.
Error details describe *where* and *what kind* of problem, never the offending input itself.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from lucy_memory._contract.files import load_contract

__all__ = ["MAX_DEPTH", "InvalidJSONError", "parse_json_object"]

# The contract's limit (the object itself is the first level): far above any body of the API (four
# levels), and far enough below the interpreter's recursion limit (1,000) that nothing walking the
# parsed value (the schema check, its error messages) can run out of stack.
MAX_DEPTH: int = int(load_contract("agent-memory-api")["limits"]["json_max_depth"])

_SURROGATE = re.compile("[\ud800-\udfff]")


class InvalidJSONError(ValueError):
    """The text is not a strict JSON object. ``str()`` never contains the input."""


def _reject_constant(_name: str) -> Any:
    raise InvalidJSONError("NaN and Infinity are not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InvalidJSONError("a number is out of the range of a double")
    return value


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise InvalidJSONError("an object has a duplicate key")
        result[key] = value
    return result


def _check_strings(value: Any, depth: int) -> None:
    """Lone surrogates and the nesting depth, in one walk (``depth``: the levels around ``value``)."""
    if isinstance(value, str):
        if _SURROGATE.search(value):
            raise InvalidJSONError("a string contains a lone surrogate")
    elif isinstance(value, dict | list):
        if depth >= MAX_DEPTH:
            raise InvalidJSONError(f"the JSON is nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            for key, item in value.items():
                _check_strings(key, depth)
                _check_strings(item, depth + 1)
        else:
            for item in value:
                _check_strings(item, depth + 1)


def parse_json_object(data: bytes | str, *, subject: str = "the body") -> dict[str, Any]:
    """Parse a strict JSON object from UTF-8 bytes or text; ``subject`` names the input in the
    errors that speak of it as a whole ("the file is empty")."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidJSONError(f"{subject} is not valid UTF-8") from None
    else:
        text = data
    if not text.strip():
        raise InvalidJSONError(f"{subject} is empty")
    try:
        value = json.loads(
            text,
            object_pairs_hook=_unique_pairs,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
        )
    except InvalidJSONError:
        raise
    except json.JSONDecodeError as exc:
        # msg/lineno/colno describe the position only; exc.doc (the input) is never used.
        # ("Invalid control character at" ends in its own "at")
        where = f"at line {exc.lineno} column {exc.colno}"
        raise InvalidJSONError(f"not valid JSON: {exc.msg.removesuffix(' at')} {where}") from None
    except (ValueError, RecursionError):
        # int() refuses numbers with too many digits; deep nesting exhausts the stack.
        raise InvalidJSONError(
            f"the JSON is too large to parse, or nested deeper than {MAX_DEPTH} levels"
        ) from None
    if not isinstance(value, dict):
        raise InvalidJSONError("the JSON value must be an object")
    _check_strings(value, 0)
    return value
