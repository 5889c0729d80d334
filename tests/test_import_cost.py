"""What a process imports to start: the fake's server and the SDK's contract rules leave out what
they never use (each of these costs every process tens to hundreds of milliseconds of CPU; the test
suite alone starts dozens of servers). The operator CLI's own check: tests/test_operator_cli.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _imported(script: str, cwd: Path) -> list[list[str]]:
    """Run ``script`` in a new interpreter; each line it prints is a JSON list."""
    result = subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_serving_a_new_file_imports_neither_the_table_declarations_nor_an_http_client(tmp_path) -> None:
    script = (
        "import json, sys\n"
        "unused = ['sqlalchemy', 'sqlmodel', 'httpx', 'fake_lucy.store.tables', 'lucy_memory.client']\n"
        "from fake_lucy.app import create_app\n"
        "from fake_lucy.runtime import FakeLucy\n"
        "from fake_lucy.settings import load_settings\n"
        f"fake = FakeLucy(load_settings(database={str(tmp_path / 'new.sqlite3')!r}))\n"
        "create_app(fake)\n"
        "fake.close()\n"
        "print(json.dumps([fake.seed_outcome]))\n"
        "print(json.dumps([m for m in unused if m in sys.modules]))\n"
        "import fake_lucy.store.tables, lucy_memory.client\n"  # the declarations and the SDK, for contrast
        "print(json.dumps([m for m in unused if m in sys.modules]))\n"
    )
    outcome, serving, contrast = _imported(script, tmp_path)
    assert outcome == ["applied"]
    assert serving == []
    assert contrast == ["sqlalchemy", "sqlmodel", "httpx", "fake_lucy.store.tables", "lucy_memory.client"]


def test_the_contract_rules_load_without_the_sdks_client_and_every_public_name_resolves(tmp_path) -> None:
    script = (
        "import json, sys\n"
        "unused = ['httpx', 'anyio', 'lucy_memory.client', 'lucy_memory.transport']\n"
        "from lucy_memory._contract import PERMISSIONS, schema_validator\n"
        "print(json.dumps([m for m in unused if m in sys.modules]))\n"
        "import lucy_memory\n"
        "print(json.dumps([m for m in unused if m in sys.modules]))\n"
        "missing = [name for name in lucy_memory.__all__ if getattr(lucy_memory, name, None) is None]\n"
        "print(json.dumps(missing))\n"
        "print(json.dumps([m for m in unused if m in sys.modules]))\n"
    )
    contract, package, missing, used = _imported(script, tmp_path)
    assert contract == []
    assert package == []  # the package alone: errors, result types and the retry constants
    assert missing == []
    assert used == ["httpx", "anyio", "lucy_memory.client", "lucy_memory.transport"]


def test_a_refused_mcp_configuration_and_help_import_none_of_the_mcp_sdk(tmp_path) -> None:
    """``lucy-memory-mcp`` reads its configuration before it loads the MCP SDK (its types alone are
    most of a start's CPU): a host that gets the configuration wrong hears so at once."""
    script = (
        "import contextlib, io, json, os, sys\n"
        "sdk = ['mcp', 'mcp_types', 'lucy_memory.mcp.server']\n"
        "os.environ.pop('LUCY_MEMORY_TOKEN', None)\n"
        "from lucy_memory.mcp.__main__ import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['--help']) == 0\n"
        "with contextlib.redirect_stderr(io.StringIO()) as err:\n"
        "    code = main([])\n"
        "print(json.dumps([code, err.getvalue().splitlines()]))\n"
        "print(json.dumps([m for m in sdk if m in sys.modules]))\n"
        "from lucy_memory.mcp import TOOL_NAMES, tools\n"
        "print(json.dumps([list(TOOL_NAMES), [tool.name for tool in tools()]]))\n"
    )
    refused, imported, (names, tools) = _imported(script, tmp_path)
    assert refused[0] == 2
    assert [line.split(": ")[:2] for line in refused[1]] == [["lucy-memory-mcp", "invalid configuration"]]
    assert imported == []
    assert names == tools == ["memory_recall", "memory_propose", "memory_proposal_status"]


def test_the_schema_libraries_load_when_first_needed_and_a_refusal_is_still_worded(tmp_path) -> None:
    """``referencing`` (the schemas' registry) with the first validator, ``jsonschema`` (which words
    errors) with the first refused instance: the SDK's import, and a body that passes, need neither."""
    script = (
        "import json, sys\n"
        "libraries = ['referencing', 'jsonschema']\n"
        "import lucy_memory\n"
        "print(json.dumps([m for m in libraries if m in sys.modules]))\n"
        "from lucy_memory._contract import schema_validator\n"
        "validator = schema_validator('recall-request.schema.json')\n"
        "passed = validator.errors({'query': 'deploys'})\n"
        "print(json.dumps([passed, [m for m in libraries if m in sys.modules]]))\n"
        "refused = [[e.pointer, e.detail] for e in validator.errors({'query': 7, 'extra': 1})]\n"
        "print(json.dumps([refused, [m for m in libraries if m in sys.modules]]))\n"
    )
    package, (passed, after_valid), (refused, after_refused) = _imported(script, tmp_path)
    assert package == []
    assert (passed, after_valid) == ([], ["referencing"])
    assert refused == [["/extra", "is not an allowed property"], ["/query", "must be of type string"]]
    assert after_refused == ["referencing", "jsonschema"]
