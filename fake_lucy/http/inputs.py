"""Reading what a client sent: the body (bounded), bearer tokens and the optional headers."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from starlette.requests import ClientDisconnect, Request

from fake_lucy.domain.principals import PERMISSIONS
from fake_lucy.http.problems import ProblemError

__all__ = [
    "ClientGone",
    "bearer_token",
    "client_name",
    "header_map",
    "idempotency_key",
    "permissions_header",
    "read_body",
    "retry_attempt",
]

_IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")
_TOKEN = re.compile(r"[\x21-\x7e]+")  # visible ASCII: no space, tab, control or non-ASCII character
_RETRY_ATTEMPT = re.compile(r"0|[1-9]|10")  # no sign, no leading zeros (the contract's pattern)
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # C0, DEL and C1
_VISIBLE_ASCII = re.compile(r"[\x20-\x7e]+")  # on the wire; other text is percent-encoded
_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")  # a literal % travels as %25
MAX_CLIENT_NAME = 100
MAX_PERMISSIONS_HEADER = 1000  # the contract's maxLength


def header_map(scope: Mapping[str, Any]) -> dict[str, str]:
    """The request's headers by lower-case name, read once. A name sent on several lines is one
    value, its lines joined with ", " (RFC 9110 5.3): a list header such as Lucy-Permissions keeps
    every item, and a repeated single-value header becomes malformed instead of half-read."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        headers[name] = headers[name] + ", " + value if name in headers else value
    return headers


class ClientGone(Exception):
    """The client closed the connection before its body was complete: no one is left to answer.

    Not a ``DomainError`` (there is no response to send) and not a bug (nothing to log but a debug
    line): the request ends before step 3, so it is not charged, changes nothing and is not journaled.
    """


async def read_body(request: Request, limit: int, headers: Mapping[str, str] | None = None) -> bytes:
    """The raw body, refused with 413 as soon as it passes ``limit`` bytes; ``ClientGone`` when the
    client disconnects before sending all of it."""
    if headers is None:
        headers = request.headers
    declared = headers.get("content-length")
    if declared is None and "transfer-encoding" not in headers:
        return b""  # HTTP/1.1: a request with neither header has no body (RFC 9112, 6.3)
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise ProblemError("payload_too_large", f"the body is larger than {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ProblemError("payload_too_large", f"the body is larger than {limit} bytes")
            chunks.append(chunk)
    except ClientDisconnect:
        raise ClientGone from None
    return b"".join(chunks)


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The token of ``Authorization: Bearer <token>``; ``None`` when absent or malformed.

    ``headers`` must come from ``header_map``: a repeated Authorization line is one value joined
    with ", ", so it carries whitespace inside its token and is malformed, never half-read. The
    token is one run of visible ASCII (RFC 6750's b64token and any admin token a person may set).
    """
    value = headers.get("authorization")
    if value is None:
        return None
    scheme, _, token = value.partition(" ")
    token = token.strip(" \t")  # RFC 9110 11.4: one or more spaces after the scheme
    if scheme.lower() != "bearer" or not _TOKEN.fullmatch(token):
        return None
    return token


def _invalid_header(name: str, rule: str) -> ProblemError:
    return ProblemError("invalid_header", f"the {name} header is malformed: {rule}")


def permissions_header(headers: Mapping[str, str]) -> frozenset[str] | None:
    """``Lucy-Permissions``: a comma-separated subset of the known permissions, or ``None``."""
    value = headers.get("lucy-permissions")
    if value is None:
        return None
    if len(value) > MAX_PERMISSIONS_HEADER:
        raise _invalid_header("Lucy-Permissions", f"it must be at most {MAX_PERMISSIONS_HEADER} characters")
    items = [item.strip(" \t") for item in value.split(",")]
    if any(not item for item in items):
        raise _invalid_header("Lucy-Permissions", "it has an empty item")
    if any(item not in PERMISSIONS for item in items):
        raise _invalid_header("Lucy-Permissions", "each item must be one of " + ", ".join(PERMISSIONS))
    return frozenset(items)


def client_name(headers: Mapping[str, str]) -> str | None:
    """``Lucy-Client-Name``: ≤ 100 characters once percent-decoded, no control characters."""
    value = headers.get("lucy-client-name")
    if value is None:
        return None
    rule = f"it must be 1 to {MAX_CLIENT_NAME} characters, percent-encoded UTF-8 if not ASCII"
    if not _VISIBLE_ASCII.fullmatch(value) or _STRAY_PERCENT.search(value):
        raise _invalid_header("Lucy-Client-Name", rule)
    try:
        decoded = unquote(value, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        raise _invalid_header("Lucy-Client-Name", rule) from None
    decoded = decoded.strip()
    if not decoded or len(decoded) > MAX_CLIENT_NAME or _CONTROL_CHARS.search(decoded):
        raise _invalid_header("Lucy-Client-Name", rule)
    return decoded


def retry_attempt(headers: Mapping[str, str]) -> int | None:
    """``Lucy-Retry-Attempt``: an integer 0–10; ``None`` when absent, ``-1`` when malformed."""
    value = headers.get("lucy-retry-attempt")
    if value is None:
        return None
    value = value.strip(" \t")
    if not _RETRY_ATTEMPT.fullmatch(value) or int(value) > 10:
        return -1
    return int(value)


def idempotency_key(headers: Mapping[str, str]) -> str | None:
    """``Idempotency-Key``: 1–255 printable ASCII characters; ``None`` if absent or malformed."""
    value = headers.get("idempotency-key")
    if value is None or not _IDEMPOTENCY_KEY.fullmatch(value):
        return None
    return value
