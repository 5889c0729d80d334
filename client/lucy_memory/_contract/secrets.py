"""The secret patterns of ``contracts/secret-patterns.json``, shared by the fake and the SDK.

Matching sees through disguises (SPEC 1.5): the text is stripped of invisible format characters
(Unicode category Cf: zero-width space and joiner, soft hyphen, …) and NFKC-normalised (fullwidth
letters and digits become ASCII) before the patterns and the caller's-token rule run.
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


def _without_format_characters(text: str) -> str:
    return "".join(char for char in text if unicodedata.category(char) != "Cf")


def undisguised(text: str) -> str:
    """``text`` as the patterns see it: Cf characters removed, NFKC applied (then Cf removed again,
    in case normalising produced one). ASCII text is already in that form."""
    if text.isascii():
        return text
    normalised = unicodedata.normalize("NFKC", _without_format_characters(text))
    return _without_format_characters(normalised)


class SecretScanner:
    """Finds secret-looking text. ``find`` returns the name of the first matching pattern."""

    def __init__(self) -> None:
        document = load_json("contracts/secret-patterns.json")
        self.patterns: tuple[SecretPattern, ...] = tuple(_compile(entry) for entry in document["patterns"])
        self.caller_token_min_length: int = int(document["caller_token_min_length"])

    def find(self, text: str, *, caller_token: str | None = None) -> str | None:
        text = undisguised(text)
        if (
            caller_token is not None
            and len(caller_token) >= self.caller_token_min_length
            and undisguised(caller_token) in text
        ):
            return "caller_token"
        for pattern in self.patterns:
            if pattern.regex.search(text):
                return pattern.name
        return None
