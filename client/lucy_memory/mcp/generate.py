"""Generate the MCP tool schemas from ``schemas/``: ``python -m lucy_memory.mcp.generate``.

Hosts validate tool arguments and structured results with draft-07 validators that silently ignore
newer keywords, so the published schemas are fully inlined (no ``$ref``) and use only keywords whose
meaning is the same in draft-07 and 2020-12. ``x-maxUtf8Bytes`` is dropped from the published copy
(its ``maxLength`` outer bound stays); the server still validates every argument against ``schemas/``
itself, byte limits included. Any other keyword outside the list below stops the generator, so a new
keyword in ``schemas/`` is a deliberate decision, not a silent loss. A drift test regenerates the file
and compares.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

from lucy_memory._contract import load_schema
from lucy_memory.mcp.tools import GENERATED_FILE

__all__ = ["GENERATED_FILE", "TOOL_SOURCES", "generate", "render", "write"]


# tool name -> (arguments schema, result schema) in schemas/
TOOL_SOURCES: dict[str, tuple[str, str]] = {
    "memory_recall": ("recall-request.schema.json", "recall-response.schema.json"),
    "memory_propose": ("propose-request.schema.json", "propose-response.schema.json"),
    "memory_proposal_status": ("proposal-status-request.schema.json", "proposal-status-response.schema.json"),
}

IDEMPOTENCY_KEY_DESCRIPTION = (
    "Optional. The same key with the same arguments within 24 h replays the earlier answer (no second "
    "proposal, no second charge). When omitted it is derived from the other arguments (sha256 of their "
    "RFC 8785 form), so repeating an identical call is safe. Returned with every result and error."
)

# Keywords with the same meaning in draft-07 and 2020-12 (annotations included).
DRAFT7_KEYWORDS = frozenset(
    {
        "type", "enum", "const", "properties", "required", "additionalProperties", "items",
        "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties",
        "minLength", "maxLength", "pattern", "format",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
        "anyOf", "oneOf", "allOf", "not",
        "title", "description", "default", "examples",
    }
)  # fmt: skip
# Dropped: identifiers of the source files, and the byte-limit extension (enforced by the server).
DROPPED_KEYWORDS = frozenset({"$schema", "$id", "$defs", "x-maxUtf8Bytes"})
# Sibling keywords of a $ref that may override the referenced schema's own value.
ANNOTATIONS = frozenset({"title", "description", "default", "examples"})


def _resolve(ref: str, base: str) -> tuple[dict[str, Any], str]:
    """``definitions.schema.json#/$defs/kind`` or ``#/$defs/version`` (relative to ``base``)."""
    filename, _, pointer = ref.partition("#")
    filename = filename or base
    target: Any = load_schema(filename)
    for token in [part for part in pointer.split("/") if part]:
        target = target[token.replace("~1", "/").replace("~0", "~")]
    if not isinstance(target, dict):
        raise ValueError(f"$ref {ref} in {base} does not name a schema")
    return target, filename


def _inline(schema: dict[str, Any], base: str, trail: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "$ref" in schema:
        ref = schema["$ref"]
        if ref in trail:
            raise ValueError(f"recursive $ref {ref} cannot be inlined")
        target, target_base = _resolve(ref, base)
        out = _inline(target, target_base, (*trail, ref))
        out.pop("title", None)  # the referenced file's title names that file, not this property
    for key, value in schema.items():
        if key == "$ref" or key in DROPPED_KEYWORDS:
            continue
        if key not in DRAFT7_KEYWORDS:
            raise ValueError(f"{base}: keyword {key!r} is not draft-07 compatible; decide how to publish it")
        if key in ("properties",):
            value = {name: _inline(sub, base, trail) for name, sub in value.items()}
        elif key in ("items", "not", "additionalProperties") and isinstance(value, dict):
            value = _inline(value, base, trail)
        elif key in ("anyOf", "oneOf", "allOf"):
            value = [_inline(sub, base, trail) for sub in value]
        else:
            value = copy.deepcopy(value)
        if key in out and key not in ANNOTATIONS and out[key] != value:
            raise ValueError(f"{base}: {key!r} next to a $ref conflicts with the referenced schema")
        out[key] = value
    return out


def generate() -> dict[str, dict[str, Any]]:
    """``{tool: {"input": schema, "output": schema}}``, inlined and draft-07 compatible."""
    tools: dict[str, dict[str, Any]] = {}
    for tool, (request, response) in TOOL_SOURCES.items():
        input_schema = _inline(load_schema(request), request)
        input_schema.pop("examples", None)  # request examples would not show idempotency_key
        if tool == "memory_propose":
            key = _inline({"$ref": "definitions.schema.json#/$defs/idempotency_key"}, request)
            key["description"] = IDEMPOTENCY_KEY_DESCRIPTION
            input_schema["properties"]["idempotency_key"] = key
        tools[tool] = {"input": input_schema, "output": _inline(load_schema(response), response)}
    return tools


def render() -> str:
    return json.dumps(generate(), indent=2, ensure_ascii=False) + "\n"


def write(path: Path = GENERATED_FILE) -> None:
    path.write_text(render(), encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else GENERATED_FILE)
