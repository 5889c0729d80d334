"""The secret patterns of ``contracts/secret-patterns.json``, shared by the fake and the SDK.

Matching sees through disguises (SPEC 1.5): the text is stripped of invisible characters (Unicode
category Cf: zero-width space and joiner, soft hyphen, …; control characters other than the
whitespace ones; the contract's other default-ignorable characters) and NFKC-normalised (fullwidth
letters and digits become ASCII) before the patterns and the caller's-token rule run. It is also
matched as written, only stripped: NFKC turns a superscript ² or a circled ① into a digit, which
would glue itself to a key and hide it behind a pattern's ASCII word boundary.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from lucy_memory._contract.files import load_json

__all__ = ["SecretPattern", "SecretScanner", "undisguised"]


@dataclass(frozen=True, slots=True)
class SecretPattern:
    name: str
    regex: re.Pattern[str]


def _compile(entry: dict[str, Any]) -> SecretPattern:
    flags = 0
    for flag in entry.get("flags", []):
        flags |= getattr(re, flag)
    return SecretPattern(name=entry["name"], regex=re.compile(entry["regex"], flags))


def _code_points(ranges: list[str]) -> frozenset[str]:
    """``["U+034F", "U+FE00-U+FE0F"]`` as the characters they name."""
    chars: set[str] = set()
    for item in ranges:
        first, _, last = item.partition("-")
        chars.update(chr(c) for c in range(int(first[2:], 16), int((last or first)[2:], 16) + 1))
    return frozenset(chars)


_DOCUMENT: dict[str, Any] = load_json("contracts/secret-patterns.json")
_IGNORABLE = _code_points(_DOCUMENT["ignorable_characters"])
_KEPT_CONTROLS = frozenset("\t\n\x0b\x0c\r")
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


def _invisible(char: str) -> bool:
    category = unicodedata.category(char)
    return category == "Cf" or (category == "Cc" and char not in _KEPT_CONTROLS) or char in _IGNORABLE


def _visible(text: str) -> str:
    """``text`` without its invisible characters (the same text when it has none)."""
    if text.isascii():
        return _ASCII_CONTROL.sub("", text)
    return "".join(char for char in text if not _invisible(char))


def undisguised(text: str) -> str:
    """``text`` as the patterns see it: invisible characters removed, NFKC applied (then those
    removed again, in case normalising produced one). Plain ASCII text is already in that form."""
    if text.isascii():
        return _ASCII_CONTROL.sub("", text)
    return _visible(unicodedata.normalize("NFKC", _visible(text)))


def _forms(text: str) -> tuple[str, ...]:
    """The forms of ``text`` that are matched: normalised, and as written (only stripped)."""
    normalised = undisguised(text)
    if text.isascii():
        return (normalised,)
    written = _visible(text)
    return (normalised,) if written == normalised else (normalised, written)


class SecretScanner:
    """Finds secret-looking text. ``find`` returns the name of the first matching pattern."""

    def __init__(self) -> None:
        self.patterns: tuple[SecretPattern, ...] = tuple(_compile(entry) for entry in _DOCUMENT["patterns"])
        self.caller_token_min_length: int = int(_DOCUMENT["caller_token_min_length"])

    def find(self, text: str, *, caller_token: str | None = None) -> str | None:
        forms = _forms(text)
        if caller_token is not None and len(caller_token) >= self.caller_token_min_length:
            token = undisguised(caller_token)
            if any(token in form for form in forms):
                return "caller_token"
        for pattern in self.patterns:
            if any(pattern.regex.search(form) for form in forms):
                return pattern.name
        return None
