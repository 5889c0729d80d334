"""Test-side check of every response against ``contracts/`` and ``schemas/`` (never trust)."""

from __future__ import annotations

import re
from typing import Any

import httpx

from lucy_memory._contract import load_contract, schema_validator

__all__ = ["check_response", "response_hook"]


def _routes(name: str) -> list[tuple[str, re.Pattern[str], dict[str, Any], dict[str, Any]]]:
    contract = load_contract(name)
    routes = []
    for op in contract["operations"].values():
        pattern = re.sub(r"\{[^}]+\}", "[^/]+", contract["base_path"] + op["path"])
        routes.append((op["method"], re.compile(pattern + "$"), op, contract))
    return routes


_ROUTES = _routes("agent-memory-api") + _routes("fake-control")
_V1_ERRORS: dict[str, dict[str, Any]] = load_contract("agent-memory-api")["errors"]
_V1_BASE: str = load_contract("agent-memory-api")["base_path"]


def check_response(response: httpx.Response) -> None:
    request = response.request
    path = request.url.path
    versions = response.headers.get_list("fake-lucy-version")
    assert len(versions) == 1, "every response carries Fake-Lucy-Version, once"
    assert versions[0], "Fake-Lucy-Version is not empty"
    if path in ("/healthz",):
        assert not schema_validator("health.schema.json").errors(response.json())
        return
    if path.endswith("openapi.json"):
        return
    if path == "/_fake/events" or path == "/_fake/console" or path.startswith("/_fake/console/"):
        return  # an event stream and HTML pages, outside the JSON contracts (tests/console, test_events)
    matched = [(op, c) for method, rx, op, c in _ROUTES if rx.match(path) and method == request.method]
    if not matched:
        status = response.status_code
        assert status in (404, 405), f"{request.method} {path} is not in the contract but got {status}"
        _check_problem(response, None)
        return
    op, _ = matched[0]
    status = str(response.status_code)
    assert status in op["responses"], (
        f"{request.method} {path} answered {status}, which the contract does not list"
    )
    spec = op["responses"][status]
    assert response.headers.get("lucy-request-id", "").startswith("req_")
    if response.status_code >= 400:
        _check_problem(response, spec)
        return
    if spec.get("schema"):
        body = response.json()
        errors = schema_validator(spec["schema"]).errors(body)
        assert not errors, f"{request.method} {path} {status} body breaks {spec['schema']}: {errors}"


def _check_problem(response: httpx.Response, spec: dict[str, Any] | None) -> None:
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    errors = schema_validator("problem.schema.json").errors(body)
    assert not errors, f"problem body breaks problem.schema.json: {errors}"
    assert body["status"] == response.status_code
    injected = "fake-lucy-fault" in response.headers
    if spec is not None and not injected:
        assert body["code"] in spec["codes"], f"code {body['code']} not listed for this status"
    v1_error = _V1_ERRORS.get(body["code"])
    if v1_error is not None and response.request.url.path.startswith(_V1_BASE):
        # SPEC 2.2: details only where the error lists them (the contract's details_schema).
        assert ("details" in body) == ("details_schema" in v1_error), (
            f"{body['code']}: details {body.get('details')}"
        )


async def response_hook(response: httpx.Response) -> None:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return  # a stream that does not end: read by the test itself
    await response.aread()
    check_response(response)
