"""Reading what a client sent: the body (bounded), bearer tokens and the optional headers."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from starlette.requests import ClientDisconnect, Request

from fake_lucy.http.problems import ProblemError
from lucy_memory._contract import (
    CLIENT_NAME_MAX_CHARS,
    PERMISSIONS,
    decode_client_name,
    valid_idempotency_key,
    valid_token,
)

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

_RETRY_ATTEMPT = re.compile(r"0|[1-9]|10")  # no sign, no leading zeros (the contract's pattern)
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
    if scheme.lower() != "bearer" or not valid_token(token):
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
    """``Lucy-Client-Name``, percent-decoded and trimmed (the rule is ``decode_client_name``)."""
    value = headers.get("lucy-client-name")
    if value is None:
        return None
    name = decode_client_name(value)
    if name is None:
        raise _invalid_header(
            "Lucy-Client-Name",
            f"it must be 1 to {CLIENT_NAME_MAX_CHARS} characters, percent-encoded UTF-8 if not ASCII",
        )
    return name


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
    """``Idempotency-Key`` (``valid_idempotency_key``); ``None`` if absent or malformed."""
    value = headers.get("idempotency-key")
    return value if valid_idempotency_key(value) else None
