"""RFC 8785 (JSON Canonicalization Scheme) form of a parsed JSON value."""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

__all__ = ["canonical_bytes", "canonical_sha256"]


def canonical_bytes(value: Any) -> bytes:
    return rfc8785.dumps(value)


def canonical_sha256(value: Any) -> str:
    return hashlib.sha256(canonical_bytes(value)).hexdigest()
