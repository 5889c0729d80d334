"""Where the contract files live: inside the installed package, or at the repository root."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["data_root", "load_contract", "load_json", "load_schema", "schema_names"]

_PACKAGED = Path(__file__).parent / "data"
# client/lucy_memory/_contract/files.py -> the repository root, for a source checkout.
_REPOSITORY = Path(__file__).resolve().parents[3]


@cache
def data_root() -> Path:
    """The folder that holds ``contracts/`` and ``schemas/``."""
    for root in (_PACKAGED, _REPOSITORY):
        if (root / "schemas").is_dir() and (root / "contracts").is_dir():
            return root
    raise FileNotFoundError("the contract files (contracts/, schemas/) are not installed")


@cache
def load_json(relative: str) -> Any:
    """Parse one contract file, e.g. ``schemas/memory.schema.json``. Cached: treat as read-only."""
    with (data_root() / relative).open(encoding="utf-8") as handle:
        return json.load(handle)


def load_contract(name: str) -> Any:
    """``load_contract("agent-memory-api")`` reads ``contracts/agent-memory-api.contract.json``."""
    return load_json(f"contracts/{name}.contract.json")


def load_schema(filename: str) -> dict[str, Any]:
    schema: dict[str, Any] = load_json(f"schemas/{filename}")
    return schema


def schema_names() -> list[str]:
    return sorted(path.name for path in (data_root() / "schemas").glob("*.schema.json"))
