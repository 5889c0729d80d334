"""``make serve`` (``fake-lucy serve``) prints a ready MCP host configuration that works as printed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp_types import Implementation

from fake_lucy.serve import mcp_host_configuration
from fake_lucy.testing import ServeProcess
from fake_lucy.testing.fakes import STARTUP_LIMIT
from tests.mcp.helpers import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

HEADER = "MCP host configuration"


async def _read_configuration(server: ServeProcess) -> dict[str, Any]:
    """The JSON block after the header line of the startup banner."""
    stdout = server.process.stdout
    assert stdout is not None
    block: list[str] = []
    with anyio.fail_after(STARTUP_LIMIT):
        while True:
            line = await anyio.to_thread.run_sync(stdout.readline)
            assert line, "the banner ended without an MCP host configuration"
            if HEADER in line:
                break
        while not block or block[-1] != "}\n":
            block.append(await anyio.to_thread.run_sync(stdout.readline))
    parsed: dict[str, Any] = json.loads("".join(block))
    return parsed


async def test_serve_prints_an_mcp_host_configuration_that_runs_against_it(tmp_path) -> None:
    server = ServeProcess(["--database", str(tmp_path / "serve.sqlite3")])
    try:
        configuration = await _read_configuration(server)
        await anyio.to_thread.run_sync(server.wait_ready)
        entry = configuration["mcpServers"]["lucy-memory-dev"]
        command = Path(entry["command"])
        assert command.is_absolute()
        assert command.name == "lucy-memory-mcp"
        assert await anyio.Path(command).is_file()
        assert os.access(command, os.X_OK)
        assert entry["env"] == {
            "LUCY_MEMORY_BASE_URL": server.base_url,
            "LUCY_MEMORY_ALLOW_INSECURE_LOOPBACK": "1",
            "LUCY_MEMORY_PERMISSIONS": "memory:read,memory:propose",
            "LUCY_MEMORY_TOKEN": "lucy-dev-token",
        }
        params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"])
        with anyio.fail_after(STARTUP_LIMIT):
            async with Client(
                params, mode="legacy", client_info=Implementation(name="banner", version="1")
            ) as c:
                result = await c.call_tool("memory_recall", {"query": "database"})
        assert result.is_error is False, text_of(result)
    finally:
        server.stop()


def test_with_a_custom_seed_no_configuration_is_printed(tmp_path) -> None:
    seed = tmp_path / "seed.json"
    seed.write_text("{}", encoding="utf-8")
    server = ServeProcess(["--database", str(tmp_path / "seeded.sqlite3"), "--seed", str(seed)])
    try:
        server.wait_ready()
    finally:
        out, _ = server.stop()
    assert f"127.0.0.1:{server.port}" in out
    assert HEADER not in out
    assert "lucy-dev-token" not in out


def test_over_https_the_configuration_trusts_the_ca_this_process_trusts_and_allows_no_cleartext(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host starts its MCP servers with an environment of its own: the CA the fake's operator
    trusts (a CA of their own, for a certificate ``fake-lucy serve --tls-certfile`` serves) goes
    into the configuration, or ``lucy-memory-mcp`` would refuse the fake's certificate."""
    monkeypatch.setenv("SSL_CERT_FILE", "/etc/ci/ca.pem")
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)

    def env_of(base_url: str) -> Any:
        return json.loads(json.dumps(mcp_host_configuration(base_url)))["mcpServers"]["lucy-memory-dev"][
            "env"
        ]

    served = env_of("https://127.0.0.1:8787")
    assert served["SSL_CERT_FILE"] == "/etc/ci/ca.pem"
    assert "LUCY_MEMORY_ALLOW_INSECURE_LOOPBACK" not in served
    assert "SSL_CERT_FILE" not in env_of("http://127.0.0.1:8787")
