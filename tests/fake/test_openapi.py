"""The served OpenAPI documents are generated from the contract and agree with it."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from lucy_memory._contract import load_contract, load_schema, schema_names

pytestmark = pytest.mark.anyio


def _contract_view(name: str) -> dict:
    contract = load_contract(name)
    view = {}
    for op_name, op in contract["operations"].items():
        view[(contract["base_path"] + op["path"], op["method"].lower())] = (
            op_name,
            {status: sorted(spec.get("headers", [])) for status, spec in op["responses"].items()},
        )
    return view


def _document_view(document: dict) -> dict:
    view = {}
    for path, methods in document["paths"].items():
        for method, op in methods.items():
            view[(path, method)] = (
                op["operationId"],
                {status: sorted(r.get("headers", {})) for status, r in op["responses"].items()},
            )
    return view


@pytest.mark.parametrize(
    ("url", "contract"), [("/openapi.json", "agent-memory-api"), ("/_fake/openapi.json", "fake-control")]
)
async def test_the_served_document_matches_the_contract(fake, url, contract) -> None:
    async with fake.client(None) as client:
        response = await client.get(url)
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.1")
    assert _document_view(document) == _contract_view(contract)


async def test_component_schemas_are_the_schemas_folder(fake) -> None:
    async with fake.client(None) as client:
        document = (await client.get("/openapi.json")).json()
    components = document["components"]["schemas"]
    assert sorted(components) == sorted(name.removesuffix(".schema.json") for name in schema_names())
    for name in schema_names():
        original = load_schema(name)
        served = components[name.removesuffix(".schema.json")]
        assert set(served) == set(original) - {"$id", "$schema"}
        Draft202012Validator.check_schema(served)


async def test_the_propose_response_links_to_proposal_status(fake) -> None:
    async with fake.client(None) as client:
        document = (await client.get("/openapi.json")).json()
    links = document["paths"]["/api/agent-memory/v1/proposals"]["post"]["responses"]["201"]["links"]
    assert links["GetProposalStatus"]["operationId"] == "proposal_status"
    assert links["GetProposalStatus"]["parameters"] == {"proposal_id": "$response.body#/proposal/id"}


async def test_every_error_status_in_the_contract_is_documented_with_the_problem_schema(fake) -> None:
    async with fake.client(None) as client:
        document = (await client.get("/openapi.json")).json()
    contract = load_contract("agent-memory-api")
    statuses = {str(entry["status"]) for entry in contract["errors"].values()}
    documented = set()
    for methods in document["paths"].values():
        for op in methods.values():
            for status, response in op["responses"].items():
                if status.startswith(("4", "5")):
                    documented.add(status)
                    schema = response["content"]["application/problem+json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/problem"}
    assert statuses <= documented
