"""The compiled check (jsonschema-rs) and jsonschema agree on every schema in ``schemas/``.

The fake, the SDK and the MCP server take the compiled check's "valid" without asking jsonschema,
so a value it accepted and jsonschema rejected would let a bad request through; one it rejected and
jsonschema accepted would answer a 422 without errors. Instances are drawn from each schema (valid
ones) and then bent at one place (near misses: a wrong type, a trailing newline, one character too
many, a multi-byte string at a byte limit, an unknown or a missing property, 7.0 for 7).
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal
from enum import IntEnum, StrEnum
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lucy_memory._contract.files import load_schema, schema_names
from lucy_memory._contract.validation import (
    MAX_ERRORS,
    MAX_POINTER,
    SchemaValidator,
    _inline_refs,
    ecma_pattern,
    schema_validator,
)
from tests.contract.fuzzing import PROFILE

SCHEMAS = sorted(schema_names())
MAX_DRAWN = 40  # long strings come from the near misses, not from drawing every length

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)


def _strings(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    low = schema.get("minLength", 0)
    high = min(schema.get("maxLength", MAX_DRAWN), max(low, MAX_DRAWN))
    if "pattern" in schema:
        pattern = schema["pattern"]
        repeated = re.fullmatch(r"\^(\[[^\]]+\])\+\$", pattern)
        if repeated:  # one class repeated: draw the length too, or short draws miss minLength
            pattern = f"^{repeated.group(1)}{{{max(low, 1)},{high}}}$"
        strategy = st.from_regex(re.compile(ecma_pattern(pattern)))
        return strategy.filter(lambda text: low <= len(text) <= schema.get("maxLength", len(text)))
    return st.text(min_size=low, max_size=high)


def _arrays(schema: dict[str, Any]) -> st.SearchStrategy[list[Any]]:
    items = instances(schema.get("items", {}))
    low = schema.get("minItems", 0)
    high = min(schema.get("maxItems", 4), max(low, 4))
    unique = bool(schema.get("uniqueItems"))
    return st.lists(
        items, min_size=low, max_size=high, unique_by=(lambda item: repr(item)) if unique else None
    )


def _objects(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    return st.fixed_dictionaries(
        {name: instances(sub) for name, sub in properties.items() if name in required},
        optional={name: instances(sub) for name, sub in properties.items() if name not in required},
    )


def instances(schema: Any) -> st.SearchStrategy[Any]:
    """Values meant to satisfy ``schema`` (an inlined one); for keywords not modelled here
    (``if``/``then``, ``allOf``), any JSON value, which still tests agreement."""
    if not isinstance(schema, dict) or schema.keys() & {"if", "allOf", "not"}:
        return json_values
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([instances(branch) for branch in schema["anyOf"]])
    kinds = schema.get("type")
    if kinds is None:
        return json_values
    if isinstance(kinds, list):
        return st.one_of([instances({**schema, "type": kind}) for kind in kinds])
    if kinds == "string":
        return _strings(schema)
    if kinds == "integer":
        return st.integers(schema.get("minimum"), schema.get("maximum"))
    if kinds == "number":
        return st.floats(schema.get("minimum"), schema.get("maximum"), allow_nan=False, allow_infinity=False)
    if kinds == "boolean":
        return st.booleans()
    if kinds == "null":
        return st.none()
    if kinds == "array":
        return _arrays(schema)
    return _objects(schema)


def _bend_leaf(value: Any, draw: st.DrawFn) -> Any:
    choices: list[Any] = [draw(json_values)]
    if isinstance(value, str):
        # Two-byte characters just over the byte limits in schemas/ (200, 2048, 8192), under the
        # character limits.
        wide = "é" * draw(st.sampled_from([101, 150, 1025, 1500, 4097, 6000]))
        choices += [value + "\n", "\n" + value, value * 300, wide, value[:-1], ""]
    if isinstance(value, bool):
        choices.append(int(value))
    elif isinstance(value, int):
        choices += [float(value), value + 0.5, value + 1, value - 1, -value, 2**64, str(value), value == 1]
    return draw(st.sampled_from(choices))


@st.composite
def near_misses(draw: st.DrawFn, value: Any) -> Any:
    """``value`` with one place bent; containers may also lose or gain a member."""
    if isinstance(value, dict) and value and draw(st.booleans()):
        name = draw(st.sampled_from(sorted(value)))
        action = draw(st.sampled_from(["bend", "drop", "add"]))
        if action == "drop":
            return {key: item for key, item in value.items() if key != name}
        if action == "add":
            return {**value, draw(st.text(min_size=1, max_size=6)): draw(json_values)}
        return {**value, name: draw(near_misses(value[name]))}
    if isinstance(value, list) and value and draw(st.booleans()):
        index = draw(st.integers(0, len(value) - 1))
        bent = [*value[:index], draw(near_misses(value[index])), *value[index + 1 :]]
        return draw(st.sampled_from([bent, [*value, value[0]], value[1:]]))
    return _bend_leaf(value, draw)


def _agree(validator: SchemaValidator, instance: Any) -> None:
    # The jsonschema validator itself, without the compiled check in front.
    by_jsonschema = not any(True for _ in validator._validator.iter_errors(instance))
    assert validator.accepts(instance) == by_jsonschema, (validator.filename, instance)
    assert (validator.errors(instance) == []) == by_jsonschema


def test_the_error_bounds_are_the_problem_schemas() -> None:
    errors = load_schema("problem.schema.json")["$defs"]["invalid_request_details"]["properties"]["errors"]
    assert (errors["maxItems"], errors["items"]["properties"]["pointer"]["maxLength"]) == (
        MAX_ERRORS,
        MAX_POINTER,
    )


def test_every_schema_has_a_compiled_check() -> None:
    # A schema the compiled check cannot take would silently go back to the slow path.
    assert [name for name in SCHEMAS if schema_validator(name)._fast is None] == []


# What the compiled check gates: request bodies and parameters (more examples), and what the SDK
# checks in answers (fewer; they are large to draw).
REQUESTS = [
    name for name in SCHEMAS if "request" in name or name in ("seed.schema.json", "scope.schema.json")
]
RESPONSES = [name for name in SCHEMAS if name not in REQUESTS]
_SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.filter_too_much]}


# How many: the fuzzing profile's (tests/contract/fuzzing.py; ``make fuzz`` draws many more).
REQUEST_EXAMPLES, RESPONSE_EXAMPLES = PROFILE.agreement_examples


@pytest.mark.parametrize("name", REQUESTS)
@settings(max_examples=REQUEST_EXAMPLES, **_SETTINGS)  # type: ignore[arg-type]
@given(data=st.data())
def test_the_two_validators_agree_on_requests(name: str, data: st.DataObject) -> None:
    _draw_and_compare(name, data)


@pytest.mark.parametrize("name", RESPONSES)
@settings(max_examples=RESPONSE_EXAMPLES, **_SETTINGS)  # type: ignore[arg-type]
@given(data=st.data())
def test_the_two_validators_agree_on_responses(name: str, data: st.DataObject) -> None:
    _draw_and_compare(name, data)


@functools.cache
def _drawn(name: str) -> st.SearchStrategy[Any]:
    """The strategy for one schema, built once (not again for every example)."""
    return instances(_inline_refs(schema_validator(name).schema))


def _draw_and_compare(name: str, data: st.DataObject) -> None:
    validator = schema_validator(name)
    valid = data.draw(_drawn(name), label="drawn")
    _agree(validator, valid)
    _agree(validator, data.draw(near_misses(valid), label="near miss"))


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        ("^[a-z]+$", "db", True),
        ("^[a-z]+$", "db\n", False),
        ("^[$]+$", "$$", True),
        (r"^a\$$", "a$", True),
        (r"^(/[\s\S]*)?$", "/x\n", True),
        ("^a$|^b$", "a\n", False),
    ],
)
def test_end_anchor_follows_ecma_262(pattern: str, text: str, matches: bool) -> None:
    assert bool(re.search(ecma_pattern(pattern), text)) is matches


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({"kind": "fact", "content": "x", "scope": {"kind": "workspace", "id": "ws_dev\n"}}, "/scope/id"),
        (
            {"kind": "fact", "content": "x", "scope": {"kind": "workspace", "id": "ws"}, "topic": "db\n"},
            "/topic",
        ),
    ],
)
def test_a_trailing_newline_does_not_pass_a_pattern(body: dict[str, Any], pointer: str) -> None:
    errors = schema_validator("propose-request.schema.json").errors(body)
    assert [error.pointer for error in errors] == [pointer]
    assert errors[0].detail.startswith("must match the pattern")


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ({"query": "x", "kinds": ("fact",)}, [{"pointer": "/kinds", "detail": "must be of type array"}]),
        ({"query": "x", "limit": Decimal(7)}, [{"pointer": "/limit", "detail": "must be of type integer"}]),
        ({"query": "x", "limit": IntEnum("Limit", {"SEVEN": 7}).SEVEN}, []),  # an int subclass
        ({"query": StrEnum("Query", {"A": "a"}).A}, []),  # a str subclass
    ],
)
def test_values_json_parsing_never_gives_are_decided_by_jsonschema(
    body: dict[str, Any], errors: list[dict[str, str]]
) -> None:
    # jsonschema-rs takes a tuple for an array and a Decimal for an integer; jsonschema does not.
    validator = schema_validator("recall-request.schema.json")
    assert not validator.accepts(body)
    assert [error.as_dict() for error in validator.errors(body)] == errors
    assert validator.is_valid(body) is not errors


@pytest.mark.parametrize(
    ("extra", "pointer", "limit"),
    [
        ({"content": "é" * 4097}, "/content", 8192),
        ({"justification": "é" * 1025}, "/justification", 2048),
        # over the characters too: one error for one rule, the byte limit's (maxLength is as strict)
        ({"content": "x" * 8193}, "/content", 8192),
        ({"topic": "x" * 201}, "/topic", 200),
    ],
)
def test_the_compiled_check_counts_utf8_bytes(extra: dict[str, str], pointer: str, limit: int) -> None:
    validator = schema_validator("propose-request.schema.json")
    body = {"kind": "fact", "content": "x", "scope": {"kind": "workspace", "id": "ws"}, **extra}
    assert not validator.accepts(body)
    assert [error.as_dict() for error in validator.errors(body)] == [
        {"pointer": pointer, "detail": f"must be at most {limit} UTF-8 bytes"}
    ]
