"""Issue 7, point 4: every copy of the contract is the same as its source, and each test fails on any
difference. (Contracts ↔ served OpenAPI documents and ``schemas/`` ↔ component schemas live in
``tests/fake/test_openapi.py``.)
"""

from __future__ import annotations

import copy
import dataclasses
import re
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from fake_lucy.runtime import FakeLucy
from fake_lucy.settings import FakeLucySettings
from lucy_memory import client as sdk_client
from lucy_memory import models
from lucy_memory._contract import SecretScanner, load_contract, load_json, load_schema, schema_names
from lucy_memory._contract.files import data_root
from lucy_memory._contract.secrets import undisguised
from lucy_memory._contract.validation import schema_validator
from lucy_memory.mcp.tools import TOOL_NAMES, tool_schemas

REPOSITORY = Path(__file__).resolve().parents[2]
V1 = load_contract("agent-memory-api")


def _resolve(node: dict[str, Any], base: str) -> tuple[dict[str, Any], str]:
    """Follow ``$ref`` chains (``definitions.schema.json#/$defs/kind``, ``#/$defs/x``) to a schema."""
    while "$ref" in node:
        filename, _, pointer = node["$ref"].partition("#")
        base = filename or base
        target: Any = load_schema(base)
        for token in [part for part in pointer.split("/") if part]:
            target = target[token]
        node = target
    return node, base


def _enum(node: dict[str, Any], base: str) -> set[Any] | None:
    node, _ = _resolve(node, base)
    return set(node["enum"]) if "enum" in node else None


def _nullable(node: dict[str, Any], base: str) -> bool:
    node, base = _resolve(node, base)
    kinds = node.get("type")
    if kinds == "null" or (isinstance(kinds, list) and "null" in kinds):
        return True
    return any(_nullable(branch, base) for branch in node.get("anyOf", []) + node.get("oneOf", []))


def _non_null(node: dict[str, Any], base: str) -> dict[str, Any]:
    node, base = _resolve(node, base)
    for branch in node.get("anyOf", []):
        resolved, _ = _resolve(branch, base)
        if resolved.get("type") != "null":
            return resolved
    return node


# -- schemas/ ↔ the SDK's result models -------------------------------------------------------------

SCOPE_PROPERTIES = load_schema("scope.schema.json")["properties"]
PROPOSAL_PROPERTIES = load_schema("proposal.schema.json")["properties"]

# model -> (the schema object it mirrors, the file that object's $refs are relative to)
MIRRORED: list[tuple[type, dict[str, Any], str]] = [
    (models.Memory, load_schema("memory.schema.json"), "memory.schema.json"),
    (models.RecalledMemory, load_schema("recalled-memory.schema.json"), "recalled-memory.schema.json"),
    (models.Proposal, load_schema("proposal.schema.json"), "proposal.schema.json"),
    (models.Credits, load_schema("credits.schema.json"), "credits.schema.json"),
    (models.Scope, load_schema("scope.schema.json"), "scope.schema.json"),
    (
        models.MemoryRef,
        _non_null(PROPOSAL_PROPERTIES["replaces"], "proposal.schema.json"),
        "definitions.schema.json",
    ),
    (
        models.MemoryVersionRef,
        _non_null(PROPOSAL_PROPERTIES["memory"], "proposal.schema.json"),
        "definitions.schema.json",
    ),
]

# result model -> (response schema, the fields the SDK adds from headers or the transport, not the body)
RESULTS: list[tuple[type, str, set[str]]] = [
    (models.RecallResult, "recall-response.schema.json", {"body"}),
    (
        models.ProposeResult,
        "propose-response.schema.json",
        {"body", "replayed", "original_request_id", "attempts", "recovered"},
    ),
    (models.ProposalStatusResult, "proposal-status-response.schema.json", {"body"}),
]


def _hints(model: type) -> dict[str, Any]:
    return typing.get_type_hints(model, globalns=vars(models))


def _args(hint: Any) -> tuple[Any, ...]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


@pytest.mark.parametrize(("model", "schema", "base"), MIRRORED, ids=lambda v: getattr(v, "__name__", ""))
def test_an_sdk_model_has_exactly_the_fields_of_its_schema(model: type, schema: dict, base: str) -> None:
    fields = [field.name for field in dataclasses.fields(model)]
    assert sorted(fields) == sorted(schema["properties"])
    assert set(schema["required"]) == set(schema["properties"]), "every property is always present"


@pytest.mark.parametrize(("model", "schema", "base"), MIRRORED, ids=lambda v: getattr(v, "__name__", ""))
def test_an_sdk_model_field_is_optional_exactly_where_its_schema_allows_null(
    model: type, schema: dict, base: str
) -> None:
    hints = _hints(model)
    optional = {name for name, hint in hints.items() if type(None) in _args(hint)}
    nullable = {name for name, node in schema["properties"].items() if _nullable(node, base)}
    assert optional == nullable


@pytest.mark.parametrize(("model", "schema", "base"), MIRRORED, ids=lambda v: getattr(v, "__name__", ""))
def test_an_sdk_literal_type_lists_exactly_the_schema_enum(model: type, schema: dict, base: str) -> None:
    checked = 0
    for name, hint in _hints(model).items():
        literals = [arg for arg in _args(hint) if typing.get_origin(arg) is typing.Literal]
        if literals:
            assert set(typing.get_args(literals[0])) == _enum(schema["properties"][name], base), name
            checked += 1
    if model in (models.Memory, models.RecalledMemory, models.Proposal, models.Scope):
        assert checked >= 1  # kind / status are Literal types in these models


@pytest.mark.parametrize(("model", "schema_file", "extra"), RESULTS, ids=lambda v: getattr(v, "__name__", ""))
def test_an_sdk_result_has_the_fields_of_its_response_body_plus_named_extras(
    model: type, schema_file: str, extra: set[str]
) -> None:
    fields = {field.name for field in dataclasses.fields(model)}
    assert fields - extra == set(load_schema(schema_file)["properties"])
    assert extra <= fields


def test_the_sdk_operations_validate_against_the_contract_schemas() -> None:
    operations = {op.name: op for op in (sdk_client._RECALL, sdk_client._PROPOSE, sdk_client._STATUS)}
    assert set(operations) == set(V1["operations"])
    for name, contract in V1["operations"].items():
        sdk = operations[name]
        assert (sdk.method, sdk.permission) == (contract["method"], contract["permission"])
        success = next(status for status in contract["responses"] if status.startswith("2"))
        assert (str(sdk.success), sdk.response_schema) == (success, contract["responses"][success]["schema"])
        if contract.get("request_schema"):
            assert sdk.request_schema == contract["request_schema"]
        else:  # proposal_status: the path parameter, validated by the status request schema
            status_request = load_schema(sdk.request_schema)
            parameters = {k: v["schema"] for k, v in contract["path_parameters"].items()}
            assert {k: v["$ref"] for k, v in status_request["properties"].items()} == parameters


def test_the_sdk_loads_exactly_the_repository_contract_files() -> None:
    root = data_root()
    for folder, pattern in (("schemas", "*.schema.json"), ("contracts", "*.json")):
        loaded = sorted(path.name for path in (root / folder).glob(pattern))
        assert loaded == sorted(path.name for path in (REPOSITORY / folder).glob(pattern))
        for name in loaded:
            assert (root / folder / name).read_bytes() == (REPOSITORY / folder / name).read_bytes(), name
    for name in schema_names():
        assert schema_validator(name).schema == load_json(f"schemas/{name}")


# -- the secret patterns ↔ their examples -------------------------------------------------------------

PATTERNS = load_json("contracts/secret-patterns.json")["patterns"]


def _scanners(tmp_path: Path) -> dict[str, SecretScanner]:
    fake = FakeLucy(FakeLucySettings(database=str(tmp_path / "fake.sqlite3")))
    try:
        sdk = sdk_client.AgentMemoryClient(
            transport=object(),  # type: ignore[arg-type]
            token="not-a-real-token",
            permissions=["memory:read"],
        )
        return {"fake": fake.scanner, "sdk": sdk._scanner}
    finally:
        fake.close()


@pytest.mark.parametrize("entry", PATTERNS, ids=[entry["name"] for entry in PATTERNS])
def test_each_positive_example_matches_its_own_pattern(entry: dict[str, Any], tmp_path: Path) -> None:
    assert entry["positive"]
    for side, scanner in _scanners(tmp_path).items():
        (pattern,) = [p for p in scanner.patterns if p.name == entry["name"]]
        for example in entry["positive"]:
            assert pattern.regex.search(example), f"{side}: {entry['name']} misses {example!r}"


@pytest.mark.parametrize("entry", PATTERNS, ids=[entry["name"] for entry in PATTERNS])
def test_no_pattern_uses_a_unicode_word_boundary(entry: dict[str, Any]) -> None:
    # Python's \b treats every Unicode letter as a word character (ECMAScript's does not): a key
    # glued to "ключ" or "é" would slip through. Boundaries are ASCII lookarounds instead.
    assert "\\b" not in entry["regex"]
    assert "\\w" not in entry["regex"].replace("[A-Za-z0-9_]", "")


@pytest.mark.parametrize("entry", PATTERNS, ids=[entry["name"] for entry in PATTERNS])
def test_each_negative_example_matches_no_pattern(entry: dict[str, Any], tmp_path: Path) -> None:
    assert entry["negative"]
    for side, scanner in _scanners(tmp_path).items():
        for example in entry["negative"]:
            assert scanner.find(example) is None, f"{side}: {example!r} is flagged"


DISGUISED = load_json("contracts/secret-patterns.json")["disguised"]


@pytest.mark.parametrize(
    "example", DISGUISED["examples"], ids=[f"{e['pattern']}-{i}" for i, e in enumerate(DISGUISED["examples"])]
)
def test_a_disguised_secret_is_found_once_normalised_and_missed_as_written(
    example: dict[str, Any], tmp_path: Path
) -> None:
    text, token = example["text"], example.get("caller_token")
    for side, scanner in _scanners(tmp_path).items():
        assert not any(p.regex.search(text) for p in scanner.patterns), f"{side}: not a disguise"
        assert token is None or token not in text
        assert scanner.find(text, caller_token=token) == example["pattern"], side


COMPATIBILITY = load_json("contracts/secret-patterns.json")["compatibility_examples"]["examples"]
SEPARATORS = load_json("contracts/secret-patterns.json")["separator_examples"]["examples"]


# Secrets the normalised form alone would miss: NFKC glues a digit to the key (compatibility), or
# removing an invisible separator glues the key to the next word (separator).
HIDDEN_WHEN_NORMALISED = [("compatibility", e) for e in COMPATIBILITY] + [
    ("separator", e) for e in SEPARATORS
]


@pytest.mark.parametrize(
    ("kind", "example"),
    HIDDEN_WHEN_NORMALISED,
    ids=[f"{kind}-{e['pattern']}-{i}" for i, (kind, e) in enumerate(HIDDEN_WHEN_NORMALISED)],
)
def test_a_secret_that_the_normalised_form_would_hide_is_found(
    kind: str, example: dict[str, Any], tmp_path: Path
) -> None:
    text = example["text"]
    for side, scanner in _scanners(tmp_path).items():
        assert not any(p.regex.search(undisguised(text)) for p in scanner.patterns), (
            f"{side}: not hidden once normalised ({kind})"
        )
        assert scanner.find(text) == example["pattern"], side


@pytest.mark.parametrize("text", DISGUISED["negative"])
def test_normalising_an_ordinary_text_does_not_make_it_a_secret(text: str, tmp_path: Path) -> None:
    for side, scanner in _scanners(tmp_path).items():
        assert scanner.find(text) is None, side


def test_the_fake_and_the_sdk_compile_the_same_patterns_from_the_contract(tmp_path: Path) -> None:
    expected = [(entry["name"], entry["regex"]) for entry in PATTERNS]
    for side, scanner in _scanners(tmp_path).items():
        assert [(p.name, p.regex.pattern) for p in scanner.patterns] == expected, side
        for pattern, entry in zip(scanner.patterns, PATTERNS, strict=True):
            flags = 0
            for flag in entry.get("flags", []):
                flags |= getattr(re, flag)
            assert pattern.regex.flags & flags == flags, side


# -- schemas/ ↔ the MCP tools' inputSchema / outputSchema -------------------------------------------

_DROPPED = {"$schema", "$id", "$defs", "x-maxUtf8Bytes"}


def _inlined(node: Any, base: str) -> Any:
    """``schemas/`` as a draft-07 host must see it: every $ref replaced by its target, the identifiers
    and the byte-limit extension (the server enforces it) dropped. Written independently of the
    generator; the one rule copied from it is that an inlined file's own ``title`` is not kept."""
    if isinstance(node, list):
        return [_inlined(item, base) for item in node]
    if not isinstance(node, dict):
        return node
    result: dict[str, Any] = {}
    if "$ref" in node:
        target, target_base = _resolve({"$ref": node["$ref"]}, base)
        result = _inlined(target, target_base)
        result.pop("title", None)
    for key, value in node.items():
        if key == "$ref" or key in _DROPPED:
            continue
        if key == "properties":
            result[key] = {name: _inlined(sub, base) for name, sub in value.items()}
        else:
            result[key] = (
                _inlined(value, base) if key in ("items", "anyOf", "oneOf", "allOf", "not") else value
            )
            if key == "additionalProperties" and isinstance(value, dict):
                result[key] = _inlined(value, base)
    return result


def test_the_mcp_tools_are_the_contract_operations() -> None:
    assert list(TOOL_NAMES) == [op["mcp_tool"] for op in V1["operations"].values()]


@pytest.mark.parametrize("operation", list(V1["operations"]))
def test_an_mcp_tool_input_and_output_schema_are_its_operation_schemas_inlined(operation: str) -> None:
    contract = V1["operations"][operation]
    published = tool_schemas()[contract["mcp_tool"]]
    request = contract.get("request_schema") or "proposal-status-request.schema.json"
    success = next(status for status in contract["responses"] if status.startswith("2"))
    response = contract["responses"][success]["schema"]
    expected_input = _inlined(copy.deepcopy(load_schema(request)), request)
    expected_input.pop("examples", None)
    published_input = copy.deepcopy(published["input"])
    if operation == "propose":  # plus the optional idempotency key, the header's own definition
        key = published_input["properties"].pop("idempotency_key")
        definition = _inlined({"$ref": "definitions.schema.json#/$defs/idempotency_key"}, request)
        assert {k: v for k, v in key.items() if k != "description"} == {
            k: v for k, v in definition.items() if k != "description"
        }
        assert "idempotency_key" not in published_input.get("required", [])
    assert published_input == expected_input
    assert published["output"] == _inlined(copy.deepcopy(load_schema(response)), response)
