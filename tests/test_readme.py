"""The README's example is the file the test suite runs (tests/sdk/test_example.py)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp import Client, StdioServerParameters
from mcp.types import Implementation

from fake_lucy.testing import InProcessFake, LiveServer
from tests.helpers import propose

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_sdk_example_is_the_tested_example_file() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## The Python SDK", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert block is not None
    assert block.group(1) == (ROOT / "docs" / "sdk_example.py").read_text(encoding="utf-8")


def test_the_readme_shows_the_two_commands_and_ci_runs_the_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make serve" in readme
    assert "make test" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def _makefile_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    return {match.group(1) for match in re.finditer(r"^([A-Za-z][\w-]*):", makefile, re.MULTILINE)}


def test_every_make_command_in_the_readme_and_the_example_is_a_makefile_target() -> None:
    texts = [(ROOT / "README.md").read_text(encoding="utf-8")]
    texts.append((ROOT / "docs" / "sdk_example.py").read_text(encoding="utf-8"))
    named = {match.group(1) for text in texts for match in re.finditer(r"\bmake ([a-z][\w-]*)", text)}
    assert {"serve", "test", "fuzz", "example"} <= named
    assert named - {"creates"} <= _makefile_targets()  # "`make` creates .venv/" is prose


def test_no_readme_command_runs_a_bare_uv_that_make_may_not_have_put_on_the_path() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    example = (ROOT / "docs" / "sdk_example.py").read_text(encoding="utf-8")
    for text in (readme, example):
        assert not re.search(r"(^|[\s`(])uv run", text, re.MULTILINE), "use make or .venv/bin/…"


def _docker_section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return readme.split("## Docker", 1)[1].split("\n## ", 1)[0]


def compose_host_configuration() -> dict[str, Any]:
    [block] = re.findall(r"```json\n(.*?)```", _docker_section(), re.DOTALL)
    [server] = json.loads(block)["mcpServers"].values()
    result: dict[str, Any] = server
    return result


def test_the_compose_mcp_host_configuration_uses_the_published_port_and_a_token_of_the_compose_seed() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    fake = compose["services"]["fake-lucy"]
    env = compose_host_configuration()["env"]
    host, port, _ = fake["ports"][0].split(":")
    assert env["LUCY_MEMORY_BASE_URL"] == f"http://{host}:{port}"
    assert env["LUCY_MEMORY_ALLOW_INSECURE_LOOPBACK"] == "1"
    seed = json.loads((ROOT / "docker" / "seed.json").read_text(encoding="utf-8"))
    [credential] = [c for c in seed["credentials"] if c["token"] == env["LUCY_MEMORY_TOKEN"]]
    assert set(env["LUCY_MEMORY_PERMISSIONS"].split(",")) <= set(credential["permissions"])
    assert compose_host_configuration()["command"].endswith("/.venv/bin/lucy-memory-mcp")


@pytest.mark.anyio
@pytest.mark.slow
async def test_the_compose_mcp_host_configuration_serves_recall_against_a_fake_with_the_compose_seed(
    tmp_path: Path,
) -> None:
    env = dict(compose_host_configuration()["env"])
    with LiveServer.start(tmp_path, seed=ROOT / "docker" / "seed.json") as server:
        env["LUCY_MEMORY_BASE_URL"] = server.base_url  # the compose port, but a free one here
        command = Path(sys.executable).parent / "lucy-memory-mcp"
        parameters = StdioServerParameters(command=str(command), args=[], env=env)
        async with Client(parameters, client_info=Implementation(name="readme", version="1")) as client:
            result = await client.call_tool("memory_recall", {"query": "anything"})
            assert not result.is_error
        journal = server.sync_admin.requests()
    assert [(row["operation"], row["credential_id"], row["status"]) for row in journal] == [
        ("recall", "cred_compose_agent", 200)
    ]


@pytest.mark.anyio
async def test_the_readme_auto_approve_suggestion_is_a_request_the_fake_accepts(
    fake_lucy: InProcessFake,
) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    suggestion = re.search(r"curl -s -X PUT localhost:8787(/_fake/\S+) .*?-d '(\{.*?\})'", readme, re.DOTALL)
    assert suggestion is not None
    path, body = suggestion.group(1), json.loads(suggestion.group(2))
    assert body == {"auto_approve": "all"}
    policy = await fake_lucy.admin.call("PUT", path.removeprefix("/_fake"), body)
    assert policy["auto_approve"] == "all"
    async with fake_lucy.client() as http:
        proposed = await propose(http)
    assert proposed.json()["proposal"]["status"] == "approved"


@pytest.mark.slow
def test_the_sdk_example_without_a_fake_ends_with_one_line_naming_the_error() -> None:
    with socket.socket() as unused:  # a port nothing listens on (bound, never listening)
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
        result = subprocess.run(  # noqa: S603 - our own interpreter and example
            [sys.executable, str(ROOT / "docs" / "sdk_example.py")],
            env={
                **os.environ,
                "LUCY_MEMORY_BASE_URL": f"http://127.0.0.1:{port}",
                "LUCY_MEMORY_TOKEN": "lucy-dev-token",
            },
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert (result.returncode, result.stdout) == (1, "")
    [line] = result.stderr.splitlines()
    assert line.startswith("sdk_example: connection_failed: "), line


@pytest.mark.slow
def test_make_example_runs_the_sdk_example_against_a_running_fake(fake_lucy_server: LiveServer) -> None:
    result = subprocess.run(
        ["make", "--no-print-directory", "-s", "example"],  # noqa: S607 - make from the PATH, as a user runs it
        cwd=ROOT,
        env={**os.environ, "LUCY_MEMORY_BASE_URL": fake_lucy_server.base_url},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 approved memories recalled" in result.stdout
    assert [row["operation"] for row in fake_lucy_server.sync_admin.requests()] == [
        "propose",
        "proposal_status",
        "recall",
    ]
