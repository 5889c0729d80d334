"""JSON Schema 2020-12 validation against ``schemas/``, with the ``x-maxUtf8Bytes`` keyword.

Errors are reported as ``SchemaError(pointer, detail)``: an RFC 6901 pointer into the instance and a
sentence that names the rule broken, never the value that broke it.

Two validators share the work. ``jsonschema-rs`` (compiled) answers whether an instance is valid, in
well under a microsecond for a request body; only an instance it does not accept goes to
``jsonschema``, which finds and words the errors. Both follow the ECMA-262 regular-expression
dialect that JSON Schema specifies: ``$`` matches only at the end of the string, never before a
final newline as it does in Python's ``re``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any

import jsonschema_rs

from lucy_memory._contract.files import load_schema, schema_names

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from referencing import Registry

# ``referencing`` (the schemas' registry, ~40 ms of imports) is imported by the first validator
# made, and ``jsonschema`` (~35 ms more) by the first instance refused: importing the SDK, and a
# process that never validates or never refuses, pays for neither.

__all__ = [
    "MAX_ERRORS",
    "MAX_POINTER",
    "SchemaError",
    "SchemaValidator",
    "long_name_error",
    "parameters_validator",
    "schema_registry",
    "schema_validator",
]

BYTES_KEYWORD = "x-maxUtf8Bytes"
# The bounds of ``details.errors`` in problem.schema.json (a test holds them equal): at most this
# many errors, the first in pointer order; a pointer that would be longer points at the object
# holding the unnamable property instead (only an unknown property's name can be that long).
MAX_ERRORS = 100
MAX_POINTER = 2048


def _max_utf8_bytes(
    _validator: Any, limit: int, instance: Any, _schema: dict[str, Any]
) -> Iterator[ValidationError]:
    from jsonschema.exceptions import ValidationError

    if isinstance(instance, str):
        try:
            size = len(instance.encode("utf-8"))
        except UnicodeEncodeError:
            yield ValidationError("is not encodable as UTF-8")
            return
        if size > limit:
            yield ValidationError(f"must be at most {limit} UTF-8 bytes")


def _max_length(
    _validator: Any, limit: int, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    """``maxLength`` (worded by ``_describe``), unless the schema's byte limit is as strict: a
    string over ``limit`` characters is over as many bytes, and one rule gets one error."""
    from jsonschema.exceptions import ValidationError

    if not isinstance(instance, str) or schema.get(BYTES_KEYWORD, limit + 1) <= limit:
        return
    if len(instance) > limit:
        yield ValidationError(f"is longer than {limit} characters")


def ecma_pattern(pattern: str) -> str:
    """``pattern`` for Python's ``re`` with ECMA-262's end anchor: each ``$`` outside a character
    class becomes ``\\Z`` (Python's ``$`` also matches before a final newline, so ``^[a-z]+$``
    would accept ``"db\\n"``)."""
    out: list[str] = []
    index = 0
    in_class = False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append(pattern[index : index + 2])
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "$":
            char = "\\Z"
        out.append(char)
        index += 1
    return "".join(out)


@cache
def _compiled_pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(ecma_pattern(pattern))


def _pattern(
    _validator: Any, pattern: str, instance: Any, _schema: dict[str, Any]
) -> Iterator[ValidationError]:
    from jsonschema.exceptions import ValidationError

    if isinstance(instance, str) and not _compiled_pattern(pattern).search(instance):
        yield ValidationError("does not match the pattern")


@cache
def _wording_validator_class() -> Any:
    """jsonschema's Draft 2020-12 validator with the fake's keywords (``extend`` is untyped in its
    stubs)."""
    from jsonschema import Draft202012Validator, validators

    return validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator, {BYTES_KEYWORD: _max_utf8_bytes, "maxLength": _max_length, "pattern": _pattern}
    )


class _MaxUtf8BytesKeyword:
    """``x-maxUtf8Bytes`` for jsonschema-rs (its custom-keyword protocol: raise to reject)."""

    def __init__(self, _parent_schema: Any, value: int, _schema_path: Any) -> None:
        self.limit = value

    def validate(self, instance: Any) -> None:
        if isinstance(instance, str) and len(instance.encode("utf-8")) > self.limit:
            raise ValueError(f"must be at most {self.limit} UTF-8 bytes")


_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain_json(value: Any) -> bool:
    """Whether ``value`` is made of exactly the types JSON parsing gives. jsonschema-rs also takes a
    tuple for an array and a ``Decimal`` for a number, which jsonschema rejects; for anything but
    plain JSON values the compiled check is skipped and jsonschema decides alone."""
    pending = [value]  # a stack, not recursion: a body may nest as deep as the JSON parser allows
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is dict:
            if not all(type(key) is str for key in item):
                return False
            pending.extend(item.values())
        elif kind is list:
            pending.extend(item)
        elif kind not in _JSON_SCALARS:
            return False
    return True


def _fast_validator(schema: dict[str, Any]) -> Any:
    """The jsonschema-rs validator of a schema whose references are all inlined; None otherwise
    (a reference would need the registry, and jsonschema alone is enough for those few)."""
    if '"$ref"' in json.dumps(schema):
        return None
    return jsonschema_rs.Draft202012Validator(schema, keywords={BYTES_KEYWORD: _MaxUtf8BytesKeyword})


@dataclass(frozen=True, slots=True)
class SchemaError:
    pointer: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"pointer": self.pointer, "detail": self.detail}


def _escape(token: str | int) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def _pointer(path: Any) -> str:
    return "".join("/" + _escape(token) for token in path)


def long_name_error(parent: str, what: str) -> SchemaError:
    """The error for an unknown property (or parameter) whose pointer would exceed ``MAX_POINTER``."""
    return SchemaError(parent, f"has a {what} whose name is too long to point at; it is not allowed")


def _unknown_property(base: list[Any], name: str) -> SchemaError:
    pointer = _pointer([*base, name])
    if len(pointer) > MAX_POINTER:
        return long_name_error(_pointer(base), "property")
    return SchemaError(pointer, "is not an allowed property")


def _type_names(expected: Any) -> str:
    names = expected if isinstance(expected, list) else [expected]
    return " or ".join(str(name) for name in names)


# The sentence for each keyword whose message only names its value.
_MESSAGES = {
    "const": "must be {value}",
    "pattern": "must match the pattern {value}",
    "minLength": "must be at least {value} characters long",
    "maxLength": "must be at most {value} characters long",
    "minimum": "must be at least {value}",
    "maximum": "must be at most {value}",
    "exclusiveMinimum": "must be greater than {value}",
    "exclusiveMaximum": "must be less than {value}",
    "minItems": "must have at least {value} items",
    "maxItems": "must have at most {value} items",
    "uniqueItems": "must not contain duplicate items",
    "minProperties": "must have at least {value} properties",
}


def _describe(error: ValidationError) -> str:
    keyword = error.validator
    value: Any = error.validator_value
    if keyword == "type":
        return f"must be of type {_type_names(value)}"
    if keyword in ("enum",):
        return "must be one of: " + ", ".join(str(item) for item in value)
    if keyword in _MESSAGES:
        return _MESSAGES[keyword].format(value=value)
    if keyword == BYTES_KEYWORD:
        return f"must be at most {value} UTF-8 bytes"
    if keyword in ("anyOf", "oneOf"):
        forms = _refused_forms(error)
        if forms and len(forms) == len(value):  # refused by every branch for its type: name them
            words = [form for form in forms if form.startswith("one of: ")]
            if len(words) == 1:  # the words first, then the other forms: "one of: off, all (or a list)"
                others = [form for form in forms if form != words[0]]
                return f"must be {words[0]}" + (f" (or {' or '.join(others)})" if others else "")
            return "must be " + " or ".join(forms)
        return "does not match any of the allowed forms"
    return f"does not satisfy the schema keyword {keyword}"


def _refused_forms(error: ValidationError) -> list[str]:
    """What each branch of an anyOf/oneOf that refused the instance for its type alone allows, as
    a sentence names it: "a list", "null", or its words when it allows only those ("one of: off, all")."""
    forms = []
    for item in error.context or ():
        if item.validator != "type" or item.relative_path or not isinstance(item.validator_value, str):
            continue
        branches: Any = error.validator_value  # the anyOf's list of subschemas
        branch = branches[item.relative_schema_path[0]]
        words = branch.get("enum") if isinstance(branch, dict) else None
        if isinstance(words, list) and words:
            forms.append("one of: " + ", ".join(str(word) for word in words))
        else:
            forms.append(_FORMS.get(item.validator_value, item.validator_value))
    return forms


def _specific(error: ValidationError) -> ValidationError:
    """For anyOf/oneOf (nullable fields, a word or a list), report the one branch that fits the
    instance's type; when none or several fit, the anyOf itself (``_describe`` names its types)."""
    while error.validator in ("anyOf", "oneOf") and error.context:
        branches: dict[Any, list[ValidationError]] = {}
        for item in error.context:
            branches.setdefault(item.relative_schema_path[0], []).append(item)
        fitting = [
            items
            for items in branches.values()
            if not any(item.validator == "type" and not item.relative_path for item in items)
        ]
        if len(fitting) != 1:
            return error
        error = min(fitting[0], key=lambda item: -len(item.relative_path))
    return error


# How a sentence names a value of a JSON type.
_FORMS = {"array": "a list", "object": "an object", "string": "a string", "integer": "an integer",
          "number": "a number", "boolean": "true or false", "null": "null"}  # fmt: skip


def _other_forms(error: ValidationError, specific: ValidationError) -> str:
    """For an anyOf/oneOf refused by its branch of the instance's type (``specific``, at the same
    place): the other (non-null) types it allows, as ``" (or a list)"``, so that the sentence does
    not hide a form that would do (``auto_approve`` "must be one of: off, all" is also a list of kinds)."""
    if specific is error or specific.absolute_path != error.absolute_path:
        return ""
    others = [form for form in _refused_forms(error) if form != "null"]
    return f" (or {' or '.join(others)})" if others else ""


def _flatten(error: ValidationError) -> list[SchemaError]:
    specific = _specific(error)
    forms = _other_forms(error, specific)
    error = specific
    if forms and error.validator not in ("required", "additionalProperties", "unevaluatedProperties"):
        return [SchemaError(_pointer(list(error.absolute_path)), _describe(error) + forms)]
    base = list(error.absolute_path)
    if error.validator == "required":
        present = error.instance if isinstance(error.instance, dict) else {}
        required: Any = error.validator_value
        return [
            SchemaError(_pointer([*base, name]), "is required") for name in required if name not in present
        ]
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        schema: Any = error.schema
        allowed = set(schema.get("properties", {}))
        return [_unknown_property(base, name) for name in error.instance if name not in allowed]
    if error.validator == "unevaluatedProperties" and isinstance(error.instance, dict):
        return [SchemaError(_pointer(base), "has properties that are not allowed")]
    return [SchemaError(_pointer(base), _describe(error))]


@cache
def schema_registry() -> Registry[Any]:
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    resources = []
    for name in schema_names():
        schema = load_schema(name)
        resources.append((schema["$id"], Resource.from_contents(schema, DRAFT202012)))
    registry: Registry[Any] = Registry().with_resources(resources)
    return registry


# Keywords whose value is one subschema, a list of subschemas, or a map of names to subschemas.
_ONE_SCHEMA = frozenset(
    {
        "items", "additionalProperties", "additionalItems", "contains", "not", "if", "then", "else",
        "propertyNames", "unevaluatedItems", "unevaluatedProperties",
    }
)  # fmt: skip
_SCHEMA_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_MAP = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})
_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment"}
)
_NOT_INLINABLE = frozenset({"$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor", "$anchor"})


class _CannotInline(Exception):
    pass


def _inline(node: Any, resolver: Any, active: frozenset[int]) -> Any:
    if not isinstance(node, dict):
        return node
    if _NOT_INLINABLE & node.keys():
        raise _CannotInline
    if "$ref" in node:
        if not node.keys() - _ANNOTATIONS <= {"$ref"}:
            raise _CannotInline  # a $ref with validating siblings: leave the schema as it is
        resolved = resolver.lookup(node["$ref"])
        key = id(resolved.contents)
        if key in active:
            raise _CannotInline  # recursive
        target = _inline(resolved.contents, resolved.resolver, active | {key})
        if not isinstance(target, dict):
            return target
        return {k: v for k, v in target.items() if k not in ("$id", "$schema", "$defs")}
    if "$id" in node:
        from referencing import Resource
        from referencing.jsonschema import DRAFT202012

        resolver = resolver.in_subresource(Resource.from_contents(node, DRAFT202012))
    result: dict[str, Any] = {}
    for keyword, value in node.items():
        if keyword in _ONE_SCHEMA:
            result[keyword] = _inline(value, resolver, active)
        elif keyword in _SCHEMA_LIST and isinstance(value, list):
            result[keyword] = [_inline(item, resolver, active) for item in value]
        elif keyword in _SCHEMA_MAP and isinstance(value, dict):
            result[keyword] = {name: _inline(item, resolver, active) for name, item in value.items()}
        else:
            result[keyword] = value
    return result


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with every ``$ref`` replaced by its target, for speed: resolving a reference
    costs more than the check it leads to, on every call. Only a ``$ref`` with nothing but
    annotations beside it is replaced, so errors (keyword, instance path) are unchanged; a schema
    with anything else (recursion, dynamic or sibling-validated references) is used as it is."""
    try:
        inlined: dict[str, Any] = _inline(schema, schema_registry().resolver(), frozenset())
    except _CannotInline:
        return schema
    return inlined


class SchemaValidator:
    """A compiled validator for one schema file."""

    def __init__(self, filename: str, schema: dict[str, Any] | None = None) -> None:
        self.filename = filename
        self.schema = load_schema(filename) if schema is None else schema
        self._inlined = _inline_refs(self.schema)
        self._fast = _fast_validator(self._inlined)

    @cached_property
    def _validator(self) -> Any:
        """jsonschema's validator, for the errors' words (and the few schemas jsonschema-rs cannot
        take): made when first needed."""
        return _wording_validator_class()(self._inlined, registry=schema_registry())

    def accepts(self, instance: Any) -> bool:
        """The compiled check alone: True means valid; False means invalid or not decidable there
        (a value JSON cannot hold, such as a lone surrogate, a non-string key or a tuple)."""
        if self._fast is None or not _plain_json(instance):
            return False
        try:
            return bool(self._fast.is_valid(instance))
        except ValueError:  # UnicodeEncodeError included: jsonschema then decides and words it
            return False

    def errors(self, instance: Any) -> list[SchemaError]:
        if self.accepts(instance):
            return []
        found: list[SchemaError] = []
        seen: set[tuple[str, str]] = set()
        ordered = sorted(self._validator.iter_errors(instance), key=lambda e: list(map(str, e.path)))
        for error in ordered:
            for item in _flatten(error):
                if (item.pointer, item.detail) not in seen:
                    seen.add((item.pointer, item.detail))
                    found.append(item)
        found.sort(key=lambda item: item.pointer)  # stable: one pointer's errors keep their order
        return found[:MAX_ERRORS]

    def is_valid(self, instance: Any) -> bool:
        return self.accepts(instance) or bool(self._validator.is_valid(instance))


@cache
def schema_validator(filename: str) -> SchemaValidator:
    """The compiled validator for ``schemas/<filename>``, built once per process."""
    return SchemaValidator(filename)


@cache
def parameters_validator(parameters: tuple[tuple[str, str], ...]) -> SchemaValidator:
    """An object of named parameters (e.g. path parameters), each a reference into ``schemas/`` such as
    ``definitions.schema.json#/$defs/tenant_id``; errors point to ``/<name>``."""
    base = load_schema("definitions.schema.json")["$id"].rpartition("/")[0]
    schema = {
        "$id": f"{base}/parameters",
        "type": "object",
        "properties": {name: {"$ref": reference} for name, reference in parameters},
    }
    return SchemaValidator("parameters", schema)
