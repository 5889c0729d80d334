"""Every request body, path parameter, response and response header of both served OpenAPI documents
carries an example that validates against its own schema, and a problem example matches its status:
mock servers (Stoplight Prism ``--errors``), Swagger UI and client generators serve and show them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from lucy_memory._contract import load_contract, schema_validator

pytestmark = pytest.mark.anyio

DOCUMENTS = [("/openapi.json", "agent-memory-api"), ("/_fake/openapi.json", "fake-control")]


async def _served(fake: Any, url: str) -> dict[str, Any]:
    async with fake.client(None) as client:
        response = await client.get(url)
    assert response.status_code == 200
    document: dict[str, Any] = response.json()
    return document


def _errors(document: dict[str, Any], schema: dict[str, Any], value: Any) -> list[str]:
    """Validate ``value`` against ``schema`` as the document's own tools do: ``$ref`` into its components."""
    root = {"$schema": "https://json-schema.org/draft/2020-12/schema", "components": document["components"]}
    validator = Draft202012Validator({**root, **schema})
    return [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(value)
    ]


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for methods in document["paths"].values():
        for operation in methods.values():
            yield operation["operationId"], operation


def _described(contract: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The contract's operations by name, and the event stream under its ``operation_id``."""
    events = contract.get("service_endpoints", {}).get("events")
    extra = {events["operation_id"]: events} if events else {}
    return {**contract["operations"], **extra}


def _event_stream_frames(text: str) -> list[dict[str, Any]]:
    """An event stream's events as its reader parses them (comments and ``retry`` dropped); each ``data``
    is the frame's JSON, whose ``id`` and ``type`` are the frame's."""
    assert text.endswith("\n\n")
    frames = []
    for block in text.removesuffix("\n\n").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.split("\n") if not line.startswith(":"))
        if set(fields) <= {"retry"}:  # comments, and how soon to reconnect
            continue
        assert sorted(fields) == ["data", "event", "id"], block
        data = json.loads(fields["data"])
        assert (str(data["id"]), data["type"]) == (fields["id"], fields["event"]), block
        frames.append(data)
    return frames


def _shown(content: dict[str, Any]) -> dict[str, Any]:
    examples = content.get("examples") or {}
    assert examples, "no example"
    return {name: example["value"] for name, example in examples.items()}


@pytest.mark.parametrize(("url", "contract_name"), DOCUMENTS)
async def test_every_request_body_and_path_parameter_has_a_valid_example(fake, url, contract_name) -> None:
    document = await _served(fake, url)
    contract = load_contract(contract_name)
    bodies = 0
    for name, operation in _operations(document):
        if "requestBody" in operation:
            ((_, content),) = operation["requestBody"]["content"].items()
            for value in _shown(content).values():
                assert _errors(document, content["schema"], value) == [], name
                assert schema_validator(contract["operations"][name]["request_schema"]).errors(value) == []
                bodies += 1
        for parameter in operation["parameters"]:
            if parameter["in"] == "path":
                assert "example" in parameter, (name, parameter["name"])
                assert _errors(document, parameter["schema"], parameter["example"]) == [], name
    assert bodies == sum(1 for op in contract["operations"].values() if op.get("request_schema"))


@pytest.mark.parametrize(("url", "contract_name"), DOCUMENTS)
async def test_every_success_response_has_an_example_valid_against_its_schema(
    fake, url, contract_name
) -> None:
    document = await _served(fake, url)
    contract = load_contract(contract_name)
    checked = 0
    for name, operation in _operations(document):
        for status, response in operation["responses"].items():
            if not status.startswith("2") or "content" not in response:
                continue
            ((media, content),) = response["content"].items()
            for value in _shown(content).values():
                assert _errors(document, content["schema"], value) == [], (name, status)
                described = _described(contract)[name]["responses"][status]
                if media == "text/event-stream":
                    assert described["media_type"] == media
                    frames = _event_stream_frames(value)
                    assert frames, "the example shows events"
                    assert [frame["id"] for frame in frames] == sorted({frame["id"] for frame in frames})
                else:
                    assert schema_validator(described["schema"]).errors(value) == [], (name, status)
                checked += 1
    with_body = sum(
        1
        for op in _described(contract).values()
        for status, spec in op["responses"].items()
        if status.startswith("2") and (spec.get("schema") or spec.get("media_type"))
    )
    assert checked == with_body


@pytest.mark.parametrize(("url", "contract_name"), DOCUMENTS)
async def test_every_problem_response_shows_each_of_its_codes_with_its_own_status(
    fake, url, contract_name
) -> None:
    document = await _served(fake, url)
    contract = load_contract(contract_name)
    for name, operation in _operations(document):
        for status, response in operation["responses"].items():
            if status.startswith("2"):
                continue
            ((_, content),) = response["content"].items()
            shown = _shown(content)
            codes = _described(contract)[name]["responses"][status]["codes"]
            assert sorted(shown) == sorted(codes), (name, status)
            for code, value in shown.items():
                assert _errors(document, content["schema"], value) == [], (name, status, code)
                assert schema_validator("problem.schema.json").errors(value) == []
                assert (value["status"], value["code"]) == (int(status), code), (name, status)
                entry = contract["errors"][code]
                assert entry["status"] == int(status), (name, status, code)
                assert value["type"] == contract["problem_type_base"] + code
                assert value["title"] == entry["title"]
                assert value["retryable"] == entry.get("retryable", False)
                assert value["detail"]


@pytest.mark.parametrize(("url", "contract_name"), DOCUMENTS)
async def test_every_response_header_has_an_example_valid_against_its_schema(
    fake, url, contract_name
) -> None:
    document = await _served(fake, url)
    headers = 0
    for name, operation in _operations(document):
        for status, response in operation["responses"].items():
            for header, spec in response.get("headers", {}).items():
                assert "example" in spec, (name, status, header)
                assert isinstance(spec["example"], str)
                assert _errors(document, spec["schema"], spec["example"]) == [], (name, status, header)
                headers += 1
    assert headers > 0


async def test_allow_examples_name_the_methods_the_path_answers(fake) -> None:
    document = await _served(fake, "/_fake/openapi.json")
    for path, methods in document["paths"].items():
        for operation in methods.values():
            allow = operation["responses"]["405"]["headers"]["Allow"]["example"]
            assert allow.split(", ") == sorted(method.upper() for method in methods), path


async def test_a_schema_example_no_longer_overrides_the_problem_examples(fake) -> None:
    # Prism serves a schema's own example before the media type's: one 422 body for every status.
    document = await _served(fake, "/openapi.json")
    assert "examples" not in document["components"]["schemas"]["problem"]
