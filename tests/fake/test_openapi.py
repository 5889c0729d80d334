"""The served OpenAPI documents are generated from the contract and agree with it, field for field.

Issue 7, points 3 and 4: every operation, path, parameter, status code, media type, body schema and
header the contract lists is in the served document (and nothing else), with the problem schema for
every error; the component schemas are ``schemas/`` exactly, with ``$ref`` rewritten.
"""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from lucy_memory._contract import load_contract, load_schema, schema_names

pytestmark = pytest.mark.anyio

DOCUMENTS = [("/openapi.json", "agent-memory-api"), ("/_fake/openapi.json", "fake-control")]
COMPONENTS = "#/components/schemas/"


def _ref(reference: str) -> dict[str, str]:
    """``definitions.schema.json#/$defs/kind`` → ``#/components/schemas/definitions/$defs/kind``."""
    filename, _, fragment = reference.partition("#")
    return {"$ref": COMPONENTS + filename.removesuffix(".schema.json") + fragment}


def _contract_view(name: str) -> dict[tuple[str, str], Any]:
    contract = load_contract(name)
    request_headers = contract.get("headers", {}).get("request", {})
    view = {}
    for op_name, op in contract["operations"].items():
        parameters = {
            ("path", param): (True, _ref(spec["schema"]))
            for param, spec in op.get("path_parameters", {}).items()
        }
        for param, spec in op.get("query", {}).items():
            inline = {k: v for k, v in spec.items() if k != "description"}
            schema = _ref(spec["schema"]) if "schema" in spec else inline
            parameters["query", param] = (False, schema)
        for header in op.get("request_headers", []):
            if header not in ("Authorization", "Content-Type"):  # security scheme and request body
                required = header in op.get("required_request_headers", [])
                parameters["header", header] = (required, request_headers[header]["schema"])
        body = None
        if op.get("request_schema"):
            body = (not op.get("body_optional", False), contract["media_type"], _ref(op["request_schema"]))
        responses = {}
        for status, spec in op["responses"].items():
            media = contract["media_type"] if status.startswith("2") else contract["problem_media_type"]
            schema = (media, _ref(spec["schema"])) if spec.get("schema") else None
            links = {
                link: (value["operation"], value["parameters"])
                for link, value in spec.get("links", {}).items()
            }
            responses[status] = (schema, sorted(spec.get("headers", [])), links)
        view[(contract["base_path"] + op["path"], op["method"].lower())] = (
            op_name,
            parameters,
            body,
            responses,
        )
    events = contract.get("service_endpoints", {}).get("events")
    if events is not None:  # a text/event-stream, not a JSON operation, listed in the document too
        parameters = {("query", param): (False, _inline(spec)) for param, spec in events["query"].items()}
        for header, spec in events["request_headers"].items():
            parameters["header", header] = (False, spec["schema"])
        responses = {
            status: (
                (spec["media_type"], {"type": "string"})
                if status.startswith("2")
                else (contract["problem_media_type"], _ref(spec["schema"])),
                sorted(spec["headers"]),
                {},
            )
            for status, spec in events["responses"].items()
        }
        endpoint = (events["path"], events["method"].lower())
        view[endpoint] = (events["operation_id"], parameters, None, responses)
    return view


def _inline(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k != "description"}


def _document_view(document: dict[str, Any]) -> dict[tuple[str, str], Any]:
    view = {}
    for path, methods in document["paths"].items():
        for method, op in methods.items():
            parameters = {(p["in"], p["name"]): (p["required"], p["schema"]) for p in op["parameters"]}
            body = None
            if "requestBody" in op:
                ((media, content),) = op["requestBody"]["content"].items()
                body = (op["requestBody"]["required"], media, content["schema"])
            responses = {}
            for status, response in op["responses"].items():
                schema = None
                if "content" in response:
                    ((media, content),) = response["content"].items()
                    schema = (media, content["schema"])
                for header in response.get("headers", {}).values():
                    assert header["schema"].get("type") == "string"
                links = {
                    link: (value["operationId"], value["parameters"])
                    for link, value in response.get("links", {}).items()
                }
                responses[status] = (schema, sorted(response.get("headers", {})), links)
            view[(path, method)] = (op["operationId"], parameters, body, responses)
    return view


async def _served(fake, url: str) -> dict[str, Any]:
    async with fake.client(None) as client:
        response = await client.get(url)
    assert response.status_code == 200
    document: dict[str, Any] = response.json()
    return document


@pytest.mark.parametrize(("url", "contract"), DOCUMENTS)
async def test_the_served_document_matches_the_contract(fake, url, contract) -> None:
    document = await _served(fake, url)
    assert document["openapi"].startswith("3.1")
    assert _document_view(document) == _contract_view(contract)


def _rewritten(node: Any, owner: str) -> Any:
    """``schemas/`` as components: ``$id`` / ``$schema`` dropped, every ``$ref`` pointing into components."""
    if isinstance(node, list):
        return [_rewritten(item, owner) for item in node]
    if not isinstance(node, dict):
        return node
    result = {}
    for key, value in node.items():
        if key in ("$id", "$schema"):
            continue
        if key == "$ref":
            filename, _, fragment = value.partition("#")
            target = filename.removesuffix(".schema.json") if filename else owner
            value = COMPONENTS + target + fragment
        result[key] = _rewritten(value, owner)
    return result


@pytest.mark.parametrize(("url", "contract"), DOCUMENTS)
async def test_component_schemas_are_the_schemas_folder(fake, url, contract) -> None:
    components = (await _served(fake, url))["components"]["schemas"]
    expected = {
        name.removesuffix(".schema.json"): _rewritten(load_schema(name), name.removesuffix(".schema.json"))
        for name in schema_names()
    }
    assert components == expected
    for served in components.values():
        Draft202012Validator.check_schema(served)


async def test_the_propose_response_links_to_proposal_status(fake) -> None:
    document = await _served(fake, "/openapi.json")
    links = document["paths"]["/api/agent-memory/v1/proposals"]["post"]["responses"]["201"]["links"]
    assert links["GetProposalStatus"]["operationId"] == "proposal_status"
    assert links["GetProposalStatus"]["parameters"] == {"proposal_id": "$response.body#/proposal/id"}


@pytest.mark.parametrize(("url", "contract"), DOCUMENTS)
async def test_every_error_status_in_the_contract_is_documented_with_the_problem_schema(
    fake, url, contract
) -> None:
    document = await _served(fake, url)
    statuses = {str(entry["status"]) for entry in load_contract(contract)["errors"].values()}
    documented = set()
    for methods in document["paths"].values():
        for op in methods.values():
            for status, response in op["responses"].items():
                if status.startswith(("4", "5")):
                    documented.add(status)
                    schema = response["content"]["application/problem+json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/problem"}
    assert statuses <= documented
