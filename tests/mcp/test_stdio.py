"""``lucy-memory-mcp`` as a host launches it: a real process on stdio, given only command, args and env.

One test per startup path (base URL; transport module) and one per kind of misconfiguration. The
misconfigured servers are started together (they are independent processes) to keep this file fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import Implementation

from fake_lucy.testing.fakes import STARTUP_LIMIT
from tests.mcp.helpers import BOTH, PROJECT, one_line, proposal_args, text_of, write_transport_module

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SCRIPT = Path(sysconfig.get_path("scripts")) / "lucy-memory-mcp"
TOKEN = "tok-MCP-stdio-8d3f0b6c1e2a47f5b9c0"
NOBODY = 65534
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw-host", "version": "1"},
    },
}


def host_env(**variables: str) -> dict[str, str]:
    """What a host passes: its own PATH/HOME and the LUCY_MEMORY_* of its configuration."""
    env = {name: os.environ[name] for name in ("PATH", "HOME") if name in os.environ}
    env.update({"LUCY_MEMORY_" + name: value for name, value in variables.items()})
    return env


async def credential(live_admin: Any) -> str:
    created = await live_admin.create_credential(permissions=BOTH, scopes=[PROJECT], account="acct_dev")
    token: str = created["token"]
    return token


# -- startup path 1: base URL, a 2026-07-28 host (the SDK's own client), `python -m lucy_memory.mcp` ------


async def test_the_base_url_path_serves_a_2026_07_28_host(live, live_admin, tmp_path) -> None:
    token = await credential(live_admin)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lucy_memory.mcp"],
        env=host_env(
            TOKEN=token,
            BASE_URL=live.base_url,
            ALLOW_INSECURE_LOOPBACK="1",
            PERMISSIONS="memory:read,memory:propose",
        ),
    )
    stderr_path = tmp_path / "stderr.txt"
    with stderr_path.open("w") as errlog, anyio.fail_after(STARTUP_LIMIT):
        async with Client(
            stdio_client(params, errlog=errlog),
            mode="2026-07-28",
            client_info=Implementation(name="stdio-host-2026", version="1"),
        ) as client:
            assert client.protocol_version == "2026-07-28"
            names = [tool.name for tool in (await client.list_tools()).tools]
            proposed = await client.call_tool("memory_propose", proposal_args(topic="main-database"))
            assert proposed.structured_content is not None, text_of(proposed)
            proposal = proposed.structured_content["proposal"]
            await live_admin.approve(proposal["id"])
            status = await client.call_tool("memory_proposal_status", {"proposal_id": proposal["id"]})
            recalled = await client.call_tool("memory_recall", {"query": "database"})
    assert names == ["memory_recall", "memory_propose", "memory_proposal_status"]
    assert proposal["status"] == "pending"
    assert proposal["source"] == "stdio-host-2026"
    assert text_of(status).startswith(f"Saved: proposal {proposal['id']} is approved")
    assert "We use PostgreSQL 16 for the main database." in text_of(recalled)
    stderr = stderr_path.read_text()
    assert f"serving on stdio: Lucy at {live.base_url}, permissions memory:read,memory:propose" in stderr
    assert token not in stderr


async def test_a_restarted_server_does_not_repeat_a_key_lucy_refused(live, live_admin, tmp_path) -> None:
    """A 402 in one server process, the balance topped up, the same call in the next process (a host
    restart): sent under a key of its own, so the fake reports no propose_retry_not_retryable."""
    created = await live_admin.create_credential(permissions=BOTH, scopes=[PROJECT], credits=0)
    state = tmp_path / "state"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lucy_memory.mcp"],
        env=host_env(
            TOKEN=created["token"],
            BASE_URL=live.base_url,
            ALLOW_INSECURE_LOOPBACK="1",
            PERMISSIONS="memory:read,memory:propose",
            STATE_DIR=str(state),
        ),
    )
    arguments = proposal_args("Proposed again after a restart.")
    answers = []
    for balance in (None, 10):
        if balance is not None:
            await live_admin.set_balance(created["account"], balance)
        with (tmp_path / "stderr.txt").open("a") as errlog, anyio.fail_after(STARTUP_LIMIT):
            async with Client(stdio_client(params, errlog=errlog)) as client:
                answers.append(await client.call_tool("memory_propose", arguments))
    assert answers[0].is_error
    assert "insufficient_credits" in text_of(answers[0])
    assert answers[1].structured_content is not None, text_of(answers[1])
    assert answers[1].structured_content["idempotency_key"].endswith("-1")
    assert await live_admin.findings(credential_id=created["credential_id"]) == []
    assert created["token"] not in (state / "refused-keys.json").read_text()


# -- startup path 2: transport module, an `initialize` host on raw JSON-RPC, the console script ---------


class RawSession:
    """Drives the server with raw JSON-RPC lines and keeps every line it wrote to stdout."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.stdout_lines: list[str] = []

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        self.process.stdin.flush()

    async def request(self, request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.send({"id": request_id, "method": method, "params": params})
        assert self.process.stdout is not None
        stdout: IO[str] = self.process.stdout
        while True:
            with anyio.fail_after(STARTUP_LIMIT):
                line = await anyio.to_thread.run_sync(stdout.readline)
            assert line, "the server closed stdout"
            self.stdout_lines.append(line)
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == request_id:
                return message


def call(name: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "tools/call", {"name": name, "arguments": arguments}


async def test_the_transport_module_path_serves_an_initialize_host_with_only_protocol_on_stdout(
    live, live_admin, tmp_path
) -> None:
    token = await credential(live_admin)
    module = write_transport_module(tmp_path, live.base_url)
    # our own console script; starting it does not block, and its pipes are read in worker threads
    process = subprocess.Popen(  # noqa: S603, ASYNC220
        [str(SCRIPT)],
        env=host_env(TOKEN=token, TRANSPORT_MODULE=str(module), PERMISSIONS="memory:read,memory:propose"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    session = RawSession(process)
    try:
        init = await session.request(1, "initialize", INITIALIZE["params"])
        session.send({"method": "notifications/initialized"})
        listed = await session.request(2, "tools/list", {})
        proposed = await session.request(3, *call("memory_propose", proposal_args()))
        await live_admin.approve(proposed["result"]["structuredContent"]["proposal"]["id"])
        recalled = await session.request(4, *call("memory_recall", {"query": "database"}))
        missing = await session.request(
            5, *call("memory_proposal_status", {"proposal_id": "prop_" + "Q" * 22})
        )
        unknown = await session.request(6, *call("memory_write", {}))
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        process.stdin.close()  # the host goes away: the server must end on its own
        with anyio.fail_after(STARTUP_LIMIT):
            rest = await anyio.to_thread.run_sync(process.stdout.read)
            stderr = await anyio.to_thread.run_sync(process.stderr.read)
            await anyio.to_thread.run_sync(process.wait)
    finally:
        if process.poll() is None:
            process.kill()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()
        process.wait()
    session.stdout_lines.extend(rest.splitlines(keepends=True))

    assert process.returncode == 0
    assert init["result"]["protocolVersion"] == "2025-11-25"
    assert init["result"]["serverInfo"]["name"] == "lucy-memory-mcp"
    assert [tool["name"] for tool in listed["result"]["tools"]] == [
        "memory_recall",
        "memory_propose",
        "memory_proposal_status",
    ]
    proposal = proposed["result"]["structuredContent"]["proposal"]
    assert proposal["source"] == "raw-host"
    assert recalled["result"]["isError"] is False
    assert "We use PostgreSQL 16" in recalled["result"]["content"][0]["text"]
    for error in (missing, unknown):
        assert error["result"]["isError"] is True
        assert "structuredContent" not in error["result"]
    assert one_line(missing["result"]["content"][0]["text"]).startswith("Error not_found (HTTP 404)")

    assert len(session.stdout_lines) >= 6
    for line in session.stdout_lines:
        assert line.endswith("\n")
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0"
        assert "id" in message or "method" in message
    assert "transport module: loading" in stderr
    assert "transport module: sending recall" in stderr  # printed while serving: diverted to stderr
    # the process ends without the interpreter's teardown, its log flushed to the last call's line
    assert "INFO lucy_memory.mcp: memory_proposal_status failed: not_found" in stderr
    assert token not in stderr
    assert all(token not in line for line in session.stdout_lines)


# -- misconfigurations: non-zero exit before serving, one stderr line, no token anywhere -----------------


def _misconfigurations(root: Path) -> dict[str, tuple[dict[str, str], Path | None, str]]:
    """name -> (LUCY_MEMORY_* variables, working directory, what the stderr line must say)."""
    safe = root / "safe"
    safe.mkdir()
    good = write_transport_module(safe, "http://127.0.0.1:1")
    group = root / "group"
    group.mkdir()
    write_transport_module(group, "http://127.0.0.1:1").chmod(0o664)
    foreign = root / "foreign"
    foreign.mkdir()
    os.chown(write_transport_module(foreign, "http://127.0.0.1:1"), NOBODY, NOBODY)
    shared = root / "shared"
    shared.mkdir()
    target = write_transport_module(shared, "http://127.0.0.1:1")
    shared.chmod(0o777)
    link = safe / "linked.py"
    link.symlink_to(target)
    return {
        "no token": ({"BASE_URL": "https://lucy.example"}, None, "LUCY_MEMORY_TOKEN is required"),
        "both": (
            {"TOKEN": TOKEN, "BASE_URL": "https://lucy.example", "TRANSPORT_MODULE": str(good)},
            None,
            "(both are set)",
        ),
        "neither": ({"TOKEN": TOKEN}, None, "(neither is set)"),
        "http without the loopback switch": (
            {"TOKEN": TOKEN, "BASE_URL": "http://127.0.0.1:8787"},
            None,
            "set LUCY_MEMORY_ALLOW_INSECURE_LOOPBACK=1",
        ),
        "relative module": (
            {"TOKEN": TOKEN, "TRANSPORT_MODULE": "lucy_transport.py"},
            safe,
            "must be an absolute path",
        ),
        "group-writable module": (
            {"TOKEN": TOKEN, "TRANSPORT_MODULE": str(group / "lucy_transport.py")},
            None,
            "must not be writable by group or others",
        ),
        "foreign-owned module": (
            {"TOKEN": TOKEN, "TRANSPORT_MODULE": str(foreign / "lucy_transport.py")},
            None,
            "must be owned by the current user or root",
        ),
        "symlink to an unsafe module": (
            {"TOKEN": TOKEN, "TRANSPORT_MODULE": str(link)},
            None,
            f"writable by group or others (without the sticky bit): {shared}",
        ),
    }


@pytest.fixture(scope="module")
def misconfigured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[int, str, str, str]]]:
    """Every misconfigured server started at once; name -> (exit code, stdout, stderr, expected)."""
    if os.geteuid() != 0:
        pytest.skip("the foreign-owned case needs root to chown a file")
    cases = _misconfigurations(tmp_path_factory.mktemp("misconfigured"))
    started = {
        name: (
            subprocess.Popen(  # noqa: S603 - our own console script
                [str(SCRIPT)],
                env=host_env(**variables),
                cwd=cwd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
            expected,
        )
        for name, (variables, cwd, expected) in cases.items()
    }
    results = {}
    try:
        for name, (process, expected) in started.items():
            out, err = process.communicate(json.dumps(INITIALIZE) + "\n", timeout=STARTUP_LIMIT)
            results[name] = (process.returncode, out, err, expected)
    finally:
        for process, _ in started.values():
            if process.poll() is None:
                process.kill()
                process.communicate()
    return results


@pytest.mark.parametrize(
    "case",
    [
        "no token",
        "both",
        "neither",
        "http without the loopback switch",
        "relative module",
        "group-writable module",
        "foreign-owned module",
        "symlink to an unsafe module",
    ],
)
def test_a_misconfiguration_exits_before_serving_with_one_clear_stderr_line(misconfigured, case) -> None:
    code, out, err, expected = misconfigured[case]
    assert code == 2
    assert out == ""  # the initialize request on stdin was never answered
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("lucy-memory-mcp: invalid configuration: ")
    assert expected in lines[0]
    assert TOKEN not in out
    assert TOKEN not in err
