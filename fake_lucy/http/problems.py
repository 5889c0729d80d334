"""RFC 9457 problem responses: the one place where errors become HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Scope

from fake_lucy.domain.errors import SCHEMA_MISMATCH, DomainError, invalid_request
from lucy_memory._contract import SchemaError, load_contract

__all__ = [
    "ERRORS",
    "JSON",
    "PROBLEM",
    "TYPE_BASE",
    "BytesResponse",
    "ProblemError",
    "allowed_methods",
    "json_bytes",
    "problem_response",
    "schema_problem",
]

JSON = "application/json"
PROBLEM = "application/problem+json"

_API = load_contract("agent-memory-api")
_CONTROL = load_contract("fake-control")
ERRORS: dict[str, dict[str, Any]] = {**_CONTROL["errors"], **_API["errors"]}
TYPE_BASE: str = _API["problem_type_base"]


def allowed_methods(scope: Scope, routes: Iterable[BaseRoute]) -> list[str]:
    """The methods a request's path takes among ``routes``, sorted (a 405's ``Allow``): each
    operation of a path is a route of its own, and Starlette's 405 names only the first one's."""
    return sorted(
        {
            method
            for route in routes
            if isinstance(route, Route) and route.matches(scope)[0] is Match.PARTIAL
            for method in route.methods or ()
        }
    )


class BytesResponse(Response):
    """A response whose body is already bytes and whose headers are plain ASCII: it encodes them
    once, without Starlette's general header handling (the v1 hot path builds one per request)."""

    def __init__(self, body: bytes, *, status_code: int, headers: Mapping[str, str], media_type: str) -> None:
        self.status_code = status_code
        self.body = body
        self.background = None
        self.raw_headers = [
            *((name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()),
            (b"content-type", media_type.encode("latin-1")),
            (b"content-length", str(len(body)).encode("latin-1")),
        ]


class ProblemError(DomainError):
    """A refusal raised by the HTTP layer itself (routing, headers, body)."""


def schema_problem(errors: Iterable[SchemaError], detail: str = SCHEMA_MISMATCH) -> DomainError:
    """A validator's errors as the 422 ``invalid_request`` (v1 and control alike)."""
    return invalid_request((error.as_dict() for error in errors), detail)


def json_bytes(value: Any) -> bytes:
    """Compact UTF-8 JSON (keys in insertion order, no ASCII escaping).

    orjson writes the bytes of ``json.dumps(..., ensure_ascii=False, separators=(",", ":"))``
    ~15× faster (a recall answer: 25 µs → 1.6 µs); only a float may be spelled another way
    (``0.00001`` for ``1e-05``), with the same value. A value orjson refuses (an integer beyond
    64 bits, a non-string key) takes the standard library's path.
    """
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def problem_body(
    code: str,
    detail: str,
    request_id: str,
    details: Mapping[str, Any] | None = None,
    *,
    entry: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The RFC 9457 body of ``code``: its title, status and retryable from the contract's errors
    table, or from ``entry`` (a problem the contract states elsewhere)."""
    entry = ERRORS[code] if entry is None else entry
    body: dict[str, Any] = {
        "type": TYPE_BASE + code,
        "title": entry["title"],
        "status": entry["status"],
        "detail": detail,
        "code": code,
        "request_id": request_id,
        "retryable": entry["retryable"],
    }
    if details is not None:
        body["details"] = dict(details)
    return body


def problem_response(
    error: DomainError, request_id: str, headers: Mapping[str, str] | None = None
) -> Response:
    body = problem_body(error.code, error.detail, request_id, error.details)
    all_headers = {"Lucy-Request-Id": request_id, **error.headers, **(headers or {})}
    if error.code == "unauthenticated":
        all_headers.setdefault("WWW-Authenticate", "Bearer")
    return BytesResponse(
        json_bytes(body), status_code=body["status"], headers=all_headers, media_type=PROBLEM
    )
