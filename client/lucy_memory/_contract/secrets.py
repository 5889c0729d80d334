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

import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from lucy_memory._contract.files import load_json

__all__ = ["SecretPattern", "SecretScanner", "undisguised"]


@dataclass(frozen=True, slots=True)
class SecretPattern:
    """``regex`` is the contract's pattern as written; ``found`` answers the same question faster."""

    name: str
    regex: re.Pattern[str]
    # A pattern that opens with a word boundary, ``(?<![A-Za-z0-9_])…``: the rest, and the boundary's
    # character class. Python's re tries a leading lookbehind at every position of the text (about
    # 4 µs for 120 characters); the rest, which opens with its literal, is found ten times faster,
    # and the character before each match is then checked once.
    rest: re.Pattern[str] | None = None
    before: re.Pattern[str] | None = None
    # characters one of which every match contains (the contract's requires_any): a text without
    # any is passed over, as most prose holds no "=" or ":" for an assignment's pattern to look at
    requires: re.Pattern[str] | None = None

    def found(self, text: str) -> bool:
        """Whether ``regex`` finds a match in ``text``."""
        if self.requires is not None and self.requires.search(text) is None:
            return False
        if self.rest is None or self.before is None:
            return self.regex.search(text) is not None
        at = 0
        while (match := self.rest.search(text, at)) is not None:
            start = match.start()
            if start == 0 or self.before.fullmatch(text, start - 1, start) is None:
                return True
            at = start + 1  # the leftmost match broke the boundary: the next one may not
        return False


# ``(?<![class])`` at the start of a pattern, and what follows it
_LEADING_BOUNDARY = re.compile(r"\(\?<!(\[[^\]\\]*\])\)(.*)", re.DOTALL)


def _top_level_branch(regex: str) -> bool:
    """Whether ``regex`` has a ``|`` outside every group and class (a leading boundary then binds
    only its first branch, and cannot be checked apart)."""
    depth, in_class, escaped = 0, False, False
    for char in regex:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            return True
    return False


def _compile(entry: dict[str, Any]) -> SecretPattern:
    flags = 0
    for flag in entry.get("flags", []):
        flags |= getattr(re, flag)
    regex = re.compile(entry["regex"], flags)
    # one character class: a single search in C, where a loop over the characters costs a microsecond
    required = entry.get("requires_any")
    requires = re.compile("[" + re.escape("".join(required)) + "]") if required else None
    split = _LEADING_BOUNDARY.fullmatch(entry["regex"])
    if split is None or _top_level_branch(split[2]):
        return SecretPattern(name=entry["name"], regex=regex, requires=requires)
    return SecretPattern(
        name=entry["name"],
        regex=regex,
        rest=re.compile(split[2], flags),
        before=re.compile(split[1], flags),
        requires=requires,
    )


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


@functools.lru_cache(maxsize=4096)  # a text repeats its few non-ASCII characters; Unicode has 1.1 M
def _invisible(char: str) -> bool:
    category = unicodedata.category(char)
    return category == "Cf" or (category == "Cc" and char not in _KEPT_CONTROLS) or char in _IGNORABLE


# Runs of non-ASCII characters: only they are looked at one by one (an ASCII one is invisible
# exactly when _ASCII_CONTROL matches it), so a text with an accent or a dash here and there costs
# a regex pass, not a Python loop over every character.
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def _without_invisible(run: re.Match[str]) -> str:
    return "".join(char for char in run[0] if not _invisible(char))


def _invisible_as_space(run: re.Match[str]) -> str:
    return "".join(" " if _invisible(char) else char for char in run[0])


def _visible(text: str) -> str:
    """``text`` without its invisible characters (the same text when it has none)."""
    stripped = _ASCII_CONTROL.sub("", text)
    return stripped if stripped.isascii() else _NON_ASCII.sub(_without_invisible, stripped)


def _normalised(visible: str) -> str:
    """A text without invisible characters, NFKC applied (then those removed again, in case
    normalising produced one)."""
    if visible.isascii() or unicodedata.is_normalized("NFKC", visible):
        return visible
    return _visible(unicodedata.normalize("NFKC", visible))


def undisguised(text: str) -> str:
    """``text`` as the patterns see it: invisible characters removed, NFKC applied (then those
    removed again, in case normalising produced one). Plain ASCII text is already in that form."""
    return _normalised(_visible(text))


def _spaced(text: str) -> str:
    """``text`` with each invisible character read as a space: a separator (a NUL between two
    environment variables, say) keeps the key beside it apart from the next word."""
    spaced = _ASCII_CONTROL.sub(" ", text)
    return spaced if spaced.isascii() else _NON_ASCII.sub(_invisible_as_space, spaced)


def _forms(text: str) -> tuple[str, ...]:
    """The forms of ``text`` that are matched: normalised, as written (only stripped), and with
    each invisible character read as a space; one form when they are all the same text."""
    visible = _visible(text)
    forms = [_normalised(visible), visible]
    if visible != text:  # something invisible was removed: read it as a space too
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
        if len(forms) == 1:  # most text: nothing invisible, nothing to normalise (no generator per pattern)
            [form] = forms
            return next((pattern.name for pattern in self.patterns if pattern.found(form)), None)
        for pattern in self.patterns:
            if any(pattern.found(form) for form in forms):
                return pattern.name
        return None
