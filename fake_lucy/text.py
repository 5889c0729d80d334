"""Stored text as a person may see it: invisible and control characters made visible.

The console and the operator CLI show what agents wrote. A zero-width space, a right-to-left
override or an escape sequence would otherwise hide text, reorder it or drive the terminal, so each
such character is shown as ``⟨U+200B⟩``. Line breaks and tabs stay what they are.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterator
from typing import Literal

__all__ = ["DiffPart", "invisible", "one_line", "pieces", "visible", "word_diff"]

_KEPT = frozenset("\n\t ")
# Characters that render as nothing (or as blank) although they are not the plain space: Hangul
# fillers, the combining grapheme joiner, the Khmer inherent vowels, the Mongolian free variation
# selectors and vowel separator, braille blank, and the variation selectors (U+FE00–FE0F and the
# supplement U+E0100–E01EF, which can spell a hidden text one byte per character).
_BLANK = frozenset(
    "\u115f\u1160\u3164\uffa0\u034f\u17b4\u17b5\u180b\u180c\u180d\u180f\u180e\u2800"
    + "".join(chr(c) for c in range(0xFE00, 0xFE10))
    + "".join(chr(c) for c in range(0xE0100, 0xE01F0))
)
_UNSEEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})


def invisible(char: str) -> bool:
    """Would this character be invisible, blank or a control in a page or a terminal?"""
    if char in _KEPT:
        return False
    return char in _BLANK or unicodedata.category(char) in _UNSEEN_CATEGORIES


def _marker(char: str) -> str:
    return f"⟨U+{ord(char):04X}⟩"


def pieces(text: str) -> Iterator[tuple[str, bool]]:
    """``text`` as runs ``(run, False)`` of ordinary text and ``(marker, True)`` per invisible character."""
    run: list[str] = []
    for char in text:
        if invisible(char):
            if run:
                yield "".join(run), False
                run = []
            yield _marker(char), True
        else:
            run.append(char)
    if run:
        yield "".join(run), False


def visible(text: str | None) -> str:
    """The plain-text form (for the CLI): every invisible character replaced by its marker."""
    if text is None:
        return ""
    return "".join(piece for piece, _ in pieces(text))


def one_line(text: str) -> str:
    """``visible``, with line breaks and tabs marked too: a message that must stay one line (a
    CLI error quoting a file name or a document's key)."""
    return visible(text).replace("\n", _marker("\n")).replace("\t", _marker("\t"))


DiffPart = tuple[Literal["equal", "insert", "delete"], str]
_TOKENS = re.compile(r"\s+|[^\s]+")


def word_diff(before: str, after: str) -> list[DiffPart]:
    """The difference between two texts, word by word: equal, deleted and inserted runs in order."""
    old, new = _TOKENS.findall(before), _TOKENS.findall(after)
    parts: list[DiffPart] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            parts.append(("equal", "".join(old[i1:i2])))
            continue
        if i2 > i1:
            parts.append(("delete", "".join(old[i1:i2])))
        if j2 > j1:
            parts.append(("insert", "".join(new[j1:j2])))
    return parts
