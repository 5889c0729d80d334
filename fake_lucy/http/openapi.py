"""The OpenAPI 3.1 documents, generated from ``contracts/`` and ``schemas/`` (never by FastAPI).

Every request body, path parameter, response body and response header carries an example, so mock
servers (Stoplight Prism), Swagger UI and client generators show and serve valid data: request and
2xx bodies come from ``contracts/openapi-examples.json``; each problem example is built from the
contract's errors table (type, title, status, retryable) and that file's detail for the code.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from fake_lucy import __version__
from fake_lucy.runtime import FakeLucy
from lucy_memory._contract import load_contract, load_json, load_schema, schema_names

__all__ = [
    "EXAMPLES_FILE",
    "component_name",
    "control_openapi",
    "openapi_document",
    "problem_example",
    "v1_openapi",
]

EXAMPLES_FILE = "contracts/openapi-examples.json"

_REF = re.compile(r"^([a-z0-9-]+)\.schema\.json(#.*)?$")
_HEADER_SCHEMAS: dict[str, dict[str, Any]] = {
    "Lucy-Credits-Charged": {"type": "string", "pattern": "^[01]$"},
    "Lucy-Credits-Remaining": {"type": "string", "pattern": "^[0-9]+$"},
    "Retry-After": {"type": "string"},
    "Idempotent-Replayed": {"type": "string", "enum": ["true"]},
}


def component_name(filename: str) -> str:
    return filename.removesuffix(".schema.json")


def _rewrite(node: Any, owner: str) -> Any:
    if isinstance(node, dict):
        result = {}
        for key, value in node.items():
            if key in ("$id", "$schema"):
                continue
            if key == "$ref" and isinstance(value, str):
                match = _REF.match(value)
                if match:
                    fragment = (match.group(2) or "#")[1:]
                    value = f"#/components/schemas/{match.group(1)}{fragment}"
                elif value.startswith("#"):
                    value = f"#/components/schemas/{owner}{value[1:]}"
            result[key] = _rewrite(value, owner)
        return result
    if isinstance(node, list):
        return [_rewrite(item, owner) for item in node]
    return node


def _components() -> dict[str, Any]:
    return {
        component_name(name): _rewrite(copy.deepcopy(load_schema(name)), component_name(name))
        for name in schema_names()
    }


def _schema_ref(reference: str) -> dict[str, Any]:
    match = _REF.match(reference)
    if match is None:
        raise ValueError(f"not a schemas/ reference: {reference}")
    fragment = (match.group(2) or "#")[1:]
    return {"$ref": f"#/components/schemas/{match.group(1)}{fragment}"}


def problem_example(
    contract: dict[str, Any], examples: dict[str, Any], operation: str, status: int, code: str
) -> dict[str, Any]:
    """The problem body ``operation`` answers with ``code`` under HTTP ``status``."""
    entry = contract["errors"][code]
    spec = {
        **examples["problems"].get(code, {}),
        **examples["operations"][operation].get("problems", {}).get(code, {}),
    }
    body: dict[str, Any] = {
        "type": contract["problem_type_base"] + code,
        "title": entry["title"],
        "status": status,
        "detail": spec["detail"],
        "code": code,
        "request_id": load_json(EXAMPLES_FILE)["request_id"],
        "retryable": bool(entry.get("retryable", False)),
    }
    if "details" in spec:
        body["details"] = spec["details"]
    return body


def _header_example(
    header: str, operation: str, op: dict[str, Any], contract: dict[str, Any], examples: dict[str, Any]
) -> str:
    if header == "Fake-Lucy-Version":
        return __version__
    if header == "Allow":  # every method the operation's path answers
        same_path = (other for other in contract["operations"].values() if other["path"] == op["path"])
        methods = {other["method"] for other in same_path}
        return ", ".join(sorted(methods | {op["method"]}))
    shared: dict[str, str] = load_json(EXAMPLES_FILE)["headers"]
    own: dict[str, str] = examples["operations"][operation].get("headers", {})
    return own[header] if header in own else shared[header]


def _query_parameters(query: dict[str, Any]) -> list[dict[str, Any]]:
    """An operation's query parameters: a ``schemas/`` reference or an inline schema each."""
    return [
        {
            "name": param,
            "in": "query",
            "required": False,
            "schema": _schema_ref(spec["schema"])
            if "schema" in spec
            else {k: v for k, v in spec.items() if k != "description"},
            "description": spec.get("description", ""),
        }
        for param, spec in query.items()
    ]


def _problems(
    contract: dict[str, Any], examples: dict[str, Any], name: str, status: str, codes: list[str]
) -> dict[str, Any]:
    """One example problem body per code that ``name`` answers ``status`` with."""
    return {
        code: {
            "summary": contract["errors"][code]["title"],
            "value": problem_example(contract, examples, name, int(status), code),
        }
        for code in codes
    }


def _response_headers(
    headers: list[str], name: str, op: dict[str, Any], contract: dict[str, Any], examples: dict[str, Any]
) -> dict[str, Any]:
    described = contract.get("headers", {}).get("response", {})
    return {
        header: {
            "description": described.get(header, {}).get("description", header),
            "schema": _HEADER_SCHEMAS.get(header, {"type": "string"}),
            "example": _header_example(header, name, op, contract, examples),
        }
        for header in headers
    }


def _operation(
    name: str, op: dict[str, Any], contract: dict[str, Any], base_path: str, examples: dict[str, Any]
) -> dict[str, Any]:
    own = examples["operations"][name]
    request_headers = contract.get("headers", {}).get("request", {})
    parameters: list[dict[str, Any]] = []
    for param, spec in op.get("path_parameters", {}).items():
        schema = _schema_ref(spec["schema"]) if "schema" in spec else {"type": "string"}
        parameters.append(
            {
                "name": param,
                "in": "path",
                "required": True,
                "schema": schema,
                "description": spec.get("description", ""),
                "example": own["parameters"][param],
            }
        )
    parameters += _query_parameters(op.get("query", {}))
    required_headers = set(op.get("required_request_headers", []))
    for header in op.get("request_headers", []):
        if header in ("Authorization", "Content-Type"):
            continue  # described by the security scheme and the request body
        spec = request_headers.get(header, {})
        schema = spec.get("schema", {"type": "string"})
        parameters.append(
            {
                "name": header,
                "in": "header",
                "required": header in required_headers,
                "schema": schema,
                "description": spec.get("description", ""),
            }
        )
    responses: dict[str, Any] = {}
    for status, spec in op["responses"].items():
        is_success = status.startswith("2")
        media = contract["media_type"] if is_success else contract["problem_media_type"]
        response: dict[str, Any] = {
            "description": spec.get("description")
            or ("Success" if is_success else "Error: " + ", ".join(spec.get("codes", [])))
        }
        if spec.get("schema"):
            if is_success:
                shown = {name: {"value": own["response"]}}
            else:
                shown = _problems(contract, examples, name, status, spec["codes"])
            response["content"] = {media: {"schema": _schema_ref(spec["schema"]), "examples": shown}}
        headers = _response_headers(spec.get("headers", []), name, op, contract, examples)
        if headers:
            response["headers"] = headers
        if "links" in spec:
            response["links"] = {
                link: {
                    "operationId": value["operation"],
                    "parameters": value["parameters"],
                    "description": value.get("description", ""),
                }
                for link, value in spec["links"].items()
            }
        responses[status] = response
    document: dict[str, Any] = {
        "operationId": name,
        "summary": op.get("summary") or op.get("description", name),
        "parameters": parameters,
        "responses": responses,
    }
    if op.get("summary") and op.get("description"):
        document["description"] = op["description"]
    if op.get("request_schema"):
        document["requestBody"] = {
            "required": not op.get("body_optional", False),
            "content": {
                contract["media_type"]: {
                    "schema": _schema_ref(op["request_schema"]),
                    "examples": {name: {"value": own["request"]}},
                }
            },
        }
    return document


def openapi_document(
    contract: dict[str, Any], title: str, security: str, examples: dict[str, Any]
) -> dict[str, Any]:
    """``examples`` is the contract's part of ``EXAMPLES_FILE``."""
    base = contract["base_path"]
    paths: dict[str, Any] = {}
    for name, op in contract["operations"].items():
        paths.setdefault(base + op["path"], {})[op["method"].lower()] = _operation(
            name, op, contract, base, examples
        )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": title,
            "version": __version__,
            "description": contract.get("description", ""),
        },
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "paths": paths,
        "components": {
            "schemas": _components(),
            "securitySchemes": {security: {"type": "http", "scheme": "bearer"}},
        },
        "security": [{security: []}],
    }


def _document(name: str, title: str, security: str) -> dict[str, Any]:
    return openapi_document(load_contract(name), title, security, load_json(EXAMPLES_FILE)[name])


def _event_stream(contract: dict[str, Any], examples: dict[str, Any]) -> dict[str, Any]:
    """``GET /_fake/events`` (the contract's ``service_endpoints/events``): not a JSON operation but
    a ``text/event-stream``, described so that Swagger UI and client generators list it too."""
    spec = contract["service_endpoints"]["events"]
    name = spec["operation_id"]
    own = examples["operations"][name]
    parameters = _query_parameters(spec["query"])
    parameters += [
        {
            "name": header,
            "in": "header",
            "required": False,
            "schema": described["schema"],
            "description": described["description"],
        }
        for header, described in spec["request_headers"].items()
    ]
    responses: dict[str, Any] = {}
    for status, answer in spec["responses"].items():
        if status.startswith("2"):
            response: dict[str, Any] = {
                "description": "The stream: one event per change (id, event, data), until the server stops",
                "content": {
                    answer["media_type"]: {
                        "schema": {"type": "string"},
                        "examples": {name: {"value": own["response"]}},
                    }
                },
            }
        else:
            response = {
                "description": "Error: " + ", ".join(answer["codes"]),
                "content": {
                    contract["problem_media_type"]: {
                        "schema": _schema_ref(answer["schema"]),
                        "examples": _problems(contract, examples, name, status, answer["codes"]),
                    }
                },
            }
        response["headers"] = _response_headers(answer["headers"], name, spec, contract, examples)
        responses[status] = response
    return {
        "operationId": name,
        "summary": "The event stream (SPEC 3.7)",
        "description": spec["description"],
        "parameters": parameters,
        "responses": responses,
    }


def v1_openapi(fake: FakeLucy | None = None) -> dict[str, Any]:
    return _document("agent-memory-api", "Lucy Agent Memory HTTP v1", "lucyBearer")


def control_openapi(fake: FakeLucy | None = None) -> dict[str, Any]:
    document = _document("fake-control", "Fake Lucy control API", "adminBearer")
    contract = load_contract("fake-control")
    events = contract["service_endpoints"]["events"]
    operation = _event_stream(contract, load_json(EXAMPLES_FILE)["fake-control"])
    document["paths"][events["path"]] = {events["method"].lower(): operation}
    return document
