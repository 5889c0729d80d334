"""The secret patterns of ``contracts/secret-patterns.json``, shared by the fake and the SDK.

Matching sees through disguises (SPEC 1.5): the text is stripped of invisible characters (Unicode
category Cf: zero-width space and joiner, soft hyphen, …; control characters other than tab, line
feed, vertical tab, form feed and carriage return; the contract's other default-ignorable
characters) and NFKC-normalised (fullwidth letters and digits become ASCII) before the patterns and
the caller's-token rule run. It is also matched as written, only stripped (NFKC turns a superscript
² or a circled ① into a digit, which would glue itself to a key and hide it behind a pattern's ASCII
word boundary), and with each invisible character read as a space (a NUL between two environment
variables separates them: removed, it would glue the key to the next name).
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


def _spaced(text: str) -> str:
    """``text`` with each invisible character read as a space: a separator (a NUL between two
    environment variables, say) keeps the key beside it apart from the next word."""
    if text.isascii():
        return _ASCII_CONTROL.sub(" ", text)
    return "".join(" " if _invisible(char) else char for char in text)


def _forms(text: str) -> tuple[str, ...]:
    """The forms of ``text`` that are matched: normalised, as written (only stripped), and with
    each invisible character read as a space; one form when they are all the same text."""
    normalised = undisguised(text)
    forms = [normalised]
    if not text.isascii():
        forms.append(_visible(text))
    if normalised != text or len(forms) > 1:  # something was removed or changed
        forms.append(_spaced(text))
    return tuple(dict.fromkeys(forms))


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
