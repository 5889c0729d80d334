"""The secret patterns of ``contracts/secret-patterns.json``, shared by the fake and the SDK."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lucy_memory._contract.files import load_json

__all__ = ["SecretPattern", "SecretScanner"]


@dataclass(frozen=True, slots=True)
class SecretPattern:
    name: str
    regex: re.Pattern[str]


def _compile(entry: dict[str, Any]) -> SecretPattern:
    flags = 0
    for flag in entry.get("flags", []):
        flags |= getattr(re, flag)
    return SecretPattern(name=entry["name"], regex=re.compile(entry["regex"], flags))


class SecretScanner:
    """Finds secret-looking text. ``find`` returns the name of the first matching pattern."""

    def __init__(self) -> None:
        document = load_json("contracts/secret-patterns.json")
        self.patterns: tuple[SecretPattern, ...] = tuple(_compile(entry) for entry in document["patterns"])
        self.caller_token_min_length: int = int(document["caller_token_min_length"])

    def find(self, text: str, *, caller_token: str | None = None) -> str | None:
        if (
            caller_token is not None
            and len(caller_token) >= self.caller_token_min_length
            and caller_token in text
        ):
            return "caller_token"
        for pattern in self.patterns:
            if pattern.regex.search(text):
                return pattern.name
        return None
