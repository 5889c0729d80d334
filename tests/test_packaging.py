"""The SDK and the MCP server install alone: a fresh virtual environment with only ``client/``.

``uv pip install ./client`` resolves the distribution's own dependencies (pinned to the versions in
uv.lock, so the uv cache serves them), then the environment is checked as a user would meet it.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp_types import Implementation

from fake_lucy.testing import LiveServer
from fake_lucy.testing.fakes import STARTUP_LIMIT

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
# The fake's own dependencies, never installed with the SDK.
SERVER_ONLY = {"lucy-agent-memory-reference", "fastapi", "sqlmodel", "sqlalchemy", "orjson"}
# The official MCP SDK needs these for its HTTP transports: they come with `mcp`, never from us.
VIA_MCP = {"uvicorn", "starlette"}
REQUIRED_BY = r"""
import json, re
from importlib.metadata import distributions
def norm(name): return re.sub(r"[-_.]+", "-", name).lower()
required_by = {norm(dist.metadata["Name"]): [] for dist in distributions()}
for dist in distributions():
    for requirement in dist.requires or []:
        name = norm(re.split(r"[<>=!~;\[ (]", requirement.strip())[0])
        if "extra ==" not in requirement and name in required_by:
            required_by[name].append(norm(dist.metadata["Name"]))
print(json.dumps(required_by))
"""


def _uv() -> str:
    found = shutil.which("uv") or shutil.which("uv", path=str(ROOT / ".tools" / "bin"))
    assert found, "uv is on the PATH or in .tools/bin (make sync installs it)"
    return found


def _run(
    *command: str | Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - uv and the fresh environment's own programs
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _plain_env() -> dict[str, str]:
    """This process's environment without what points at the project's own virtual environment."""
    dropped = {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "UV_PROJECT_ENVIRONMENT", "PYTEST_ADDOPTS"}
    return {name: value for name, value in os.environ.items() if name not in dropped}


class FreshEnv:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.bin = directory / "venv" / "bin"
        self.python = self.bin / "python"

    def run(self, *command: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
        return _run(*command, cwd=self.directory, env={**_plain_env(), **env})

    def installed(self) -> dict[str, list[str]]:
        """Each installed distribution -> the installed distributions that require it."""
        listed = self.run(self.python, "-c", REQUIRED_BY)
        assert listed.returncode == 0, listed.stderr
        installed: dict[str, list[str]] = json.loads(listed.stdout)
        return installed


@pytest.fixture(scope="module")
def sdk_env(tmp_path_factory: pytest.TempPathFactory) -> FreshEnv:
    """A new virtual environment with ``client/`` (not editable) and pytest, nothing else asked for."""
    directory = tmp_path_factory.mktemp("sdk-alone")
    fresh = FreshEnv(directory)
    uv = _uv()
    created = _run(uv, "venv", "--quiet", "--python", sys.executable, directory / "venv", cwd=directory)
    assert created.returncode == 0, created.stderr
    # The locked versions as constraints: the resolution still starts from client/pyproject.toml
    # alone (a constraint installs nothing by itself), but picks what the uv cache already holds.
    constraints = directory / "constraints.txt"
    exported = _run(
        uv, "export", "--frozen", "--all-groups", "--no-hashes", "--no-emit-workspace", "--no-header",
        "--output-file", constraints, cwd=ROOT,
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    installed = _run(
        uv, "pip", "install", "--quiet", "--python", fresh.python, "--constraint", constraints,
        ROOT / "client", "pytest", cwd=directory, env=_plain_env(),
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    return fresh


def test_the_sdk_alone_brings_no_web_server_and_no_database_layer(sdk_env: FreshEnv) -> None:
    installed = sdk_env.installed()
    assert {"lucy-memory", "httpx", "mcp", "jsonschema", "pytest"} <= installed.keys()
    assert installed.keys().isdisjoint(SERVER_ONLY), installed.keys() & SERVER_ONLY
    for name in VIA_MCP & installed.keys():
        assert set(installed[name]) <= {"mcp", "sse-starlette"}, (name, installed[name])


def _imported_distributions(package: Path) -> set[str]:
    """The distributions whose top-level modules the package's files import (outside the stdlib)."""
    modules: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    third_party = modules - set(sys.stdlib_module_names) - {package.name}
    providers = packages_distributions()
    assert third_party <= providers.keys(), third_party - providers.keys()
    return {_normalized(dist) for module in third_party for dist in providers[module]}


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_sdk_declares_exactly_what_it_imports_and_the_mcp_console_script() -> None:
    client = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text(encoding="utf-8"))
    declared = {_normalized(re.split(r"[<>=!~;\[ ]", req)[0]) for req in client["project"]["dependencies"]}
    assert declared == _imported_distributions(ROOT / "client" / "lucy_memory")
    assert declared.isdisjoint(SERVER_ONLY | VIA_MCP)
    assert client["project"]["scripts"] == {"lucy-memory-mcp": "lucy_memory.mcp.__main__:main"}


def test_the_installed_sdk_imports_and_reads_its_packaged_contract(sdk_env: FreshEnv) -> None:
    script = (
        "import lucy_memory, lucy_memory.mcp, sys\n"
        "from lucy_memory._contract import load_contract, schema_names\n"
        "from lucy_memory._contract.files import data_root\n"
        "assert 'site-packages' in lucy_memory.__file__, lucy_memory.__file__\n"
        "assert data_root().name == 'data', data_root()\n"
        "assert load_contract('agent-memory-api')['operations'] and schema_names()\n"
        "assert 'fake_lucy' not in sys.modules and 'fastapi' not in sys.modules\n"
        "print(lucy_memory.AgentMemoryClient.__name__)\n"
    )
    result = sdk_env.run(sdk_env.python, "-c", script)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "AgentMemoryClient\n"
    missing = sdk_env.run(sdk_env.python, "-c", "import fake_lucy")
    assert "ModuleNotFoundError" in missing.stderr


def test_lucy_memory_mcp_without_configuration_exits_2_with_one_line(sdk_env: FreshEnv) -> None:
    result = subprocess.run(  # noqa: S603 - the fresh environment's console script
        [str(sdk_env.bin / "lucy-memory-mcp")],
        env={"PATH": os.environ.get("PATH", "")},
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("lucy-memory-mcp: invalid configuration: LUCY_MEMORY_TOKEN is required")


@pytest.mark.anyio
async def test_lucy_memory_mcp_from_the_sdk_alone_serves_a_host_against_the_fake(
    sdk_env: FreshEnv, live: LiveServer
) -> None:
    params = StdioServerParameters(
        command=str(sdk_env.bin / "lucy-memory-mcp"),
        args=[],
        env={
            "PATH": os.environ.get("PATH", ""),
            "LUCY_MEMORY_TOKEN": live.dev_token,
            "LUCY_MEMORY_PERMISSIONS": "memory:read,memory:propose",
            "LUCY_MEMORY_BASE_URL": live.base_url,
            "LUCY_MEMORY_ALLOW_INSECURE_LOOPBACK": "1",
        },
    )
    with anyio.fail_after(STARTUP_LIMIT):
        async with Client(params, client_info=Implementation(name="sdk-alone", version="1")) as client:
            assert client.server_info is not None
            assert (client.server_info.name, client.server_info.version) == ("lucy-memory-mcp", "0.1.0")
            result = await client.call_tool("memory_recall", {"query": "anything"})
            assert not result.is_error
    journal = await live.admin.requests()
    assert [(row["operation"], row["status"]) for row in journal] == [("recall", 200)]


def test_pytest_runs_in_an_environment_without_the_fake(sdk_env: FreshEnv) -> None:
    (sdk_env.directory / "test_user.py").write_text(
        "import lucy_memory\n\ndef test_the_sdk_is_there():\n    assert lucy_memory.AgentMemoryClient\n"
    )
    result = sdk_env.run(
        sdk_env.bin / "pytest", "-q", "-p", "no:cacheprovider", "-W", "error", "test_user.py"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    plugins = sdk_env.run(
        sdk_env.python,
        "-c",
        "from importlib.metadata import entry_points as e; print([p.name for p in e(group='pytest11')])",
    )
    assert "fake_lucy" not in plugins.stdout
