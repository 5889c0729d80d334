"""RFC 9457 problem responses: the one place where errors become HTTP."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.responses import Response

from fake_lucy.domain.errors import DomainError
from lucy_memory._contract import load_contract

__all__ = ["ERRORS", "JSON", "PROBLEM", "TYPE_BASE", "ProblemError", "json_bytes", "problem_response"]

JSON = "application/json"
PROBLEM = "application/problem+json"

_API = load_contract("agent-memory-api")
_CONTROL = load_contract("fake-control")
ERRORS: dict[str, dict[str, Any]] = {**_CONTROL["errors"], **_API["errors"]}
TYPE_BASE: str = _API["problem_type_base"]


class ProblemError(DomainError):
    """A refusal raised by the HTTP layer itself (routing, headers, body)."""


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def problem_body(
    code: str, detail: str, request_id: str, details: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    entry = ERRORS[code]
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
    return Response(json_bytes(body), status_code=body["status"], headers=all_headers, media_type=PROBLEM)
