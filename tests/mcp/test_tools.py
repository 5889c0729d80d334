"""tools/list: exactly three tools, their annotations, and schemas generated from ``schemas/``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft7Validator

from lucy_memory._contract import load_schema
from lucy_memory.mcp import generate
from lucy_memory.mcp.tools import tool_schemas
from tests.mcp.helpers import MODES, connect

pytestmark = pytest.mark.anyio

NAMES = ["memory_recall", "memory_propose", "memory_proposal_status"]


@pytest.mark.parametrize("mode", MODES)
async def test_tools_list_gives_exactly_the_three_tools_with_the_generated_schemas(fake, mode) -> None:
    async with connect(fake, mode=mode) as client:
        listed = (await client.list_tools()).tools
    assert [tool.name for tool in listed] == NAMES
    for tool in listed:
        assert tool.input_schema == tool_schemas()[tool.name]["input"]
        assert tool.output_schema == tool_schemas()[tool.name]["output"]
        assert tool.description


@pytest.mark.parametrize("mode", MODES)
async def test_annotations_say_recall_and_status_read_and_propose_is_idempotent(fake, mode) -> None:
    async with connect(fake, mode=mode) as client:
        listed = {tool.name: tool.annotations for tool in (await client.list_tools()).tools}
    hints = {
        name: (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint)
        for name, a in listed.items()
        if a is not None
    }
    assert hints == {
        "memory_recall": (True, None, None, False),
        "memory_propose": (False, False, True, False),
        "memory_proposal_status": (True, None, None, False),
    }


def test_the_committed_tool_schemas_are_what_the_generator_makes_from_schemas() -> None:
    committed = generate.GENERATED_FILE.read_text(encoding="utf-8")
    assert committed == generate.render(), "run: python -m lucy_memory.mcp.generate"


def _walk(schema: Any) -> Iterator[tuple[str, Any]]:
    """Every (keyword, value) of every subschema (property names are not keywords)."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            yield key, value
            if key == "properties":
                for sub in value.values():
                    yield from _walk(sub)
            elif key in ("items", "not", "additionalProperties"):
                yield from _walk(value)
            elif key in ("anyOf", "oneOf", "allOf"):
                for sub in value:
                    yield from _walk(sub)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("side", ["input", "output"])
def test_published_schemas_are_inlined_and_use_only_draft07_keywords(name, side) -> None:
    schema = tool_schemas()[name][side]
    keywords = {key for key, _ in _walk(schema)}
    assert keywords <= generate.DRAFT7_KEYWORDS
    assert "$ref" not in json.dumps(schema)
    assert schema["type"] == "object"
    Draft7Validator.check_schema(schema)


def test_propose_input_is_the_propose_body_plus_an_optional_idempotency_key() -> None:
    source = load_schema("propose-request.schema.json")
    published = tool_schemas()["memory_propose"]["input"]
    assert set(published["properties"]) == {*source["properties"], "idempotency_key"}
    assert published["required"] == source["required"]
    assert published["additionalProperties"] is False
    key = published["properties"]["idempotency_key"]
    assert (key["type"], key["minLength"], key["maxLength"]) == ("string", 1, 255)
    assert tool_schemas()["memory_proposal_status"]["input"]["required"] == ["proposal_id"]


def test_a_draft07_host_accepts_the_contract_examples_and_refuses_what_schemas_refuse() -> None:
    recall = Draft7Validator(tool_schemas()["memory_recall"]["input"])
    for example in load_schema("recall-request.schema.json")["examples"]:
        assert recall.is_valid(example)
    assert not recall.is_valid({"query": ""})
    assert not recall.is_valid({"query": "x", "limit": 51})
    assert not recall.is_valid({"query": "x", "surprise": 1})
    propose = Draft7Validator(tool_schemas()["memory_propose"]["input"])
    for example in load_schema("propose-request.schema.json")["examples"]:
        assert propose.is_valid({**example, "idempotency_key": "k-1"})
    assert not propose.is_valid({**example, "kind": "secret"})
    assert not propose.is_valid({**example, "topic": "Not Kebab"})
    assert not propose.is_valid({**example, "idempotency_key": "has space"})


def test_the_generator_refuses_a_keyword_draft07_hosts_would_ignore() -> None:
    with pytest.raises(ValueError, match="prefixItems"):
        generate._inline({"type": "array", "prefixItems": [{"type": "string"}]}, "recall-request.schema.json")


def test_a_ref_with_sibling_annotations_inlines_the_target_and_keeps_the_siblings() -> None:
    inlined = generate._inline(
        {"$ref": "definitions.schema.json#/$defs/topic", "description": "Exact topic match."},
        "recall-request.schema.json",
    )
    assert inlined == {
        "description": "Exact topic match.",
        "type": "string",
        "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$",
        "maxLength": 200,
    }
