"""MCP over stdio: cold start to the ``tools/list`` answer, one tool call, and the e2e lifecycle.

``lucy-memory-mcp`` (the console script, as a host launches it) against ``benchmarks.mcp_floor``
(a minimal server on the same ``mcp`` SDK with one no-op tool). The client is the SDK's own
``Client`` over ``stdio_client``; the fake is ``fake-lucy serve`` (one worker, a separate process).
The lifecycle is propose → approve (control API) → status → recall, the three v1 steps over MCP.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from benchmarks.common import ADMIN_TOKEN, DEV_TOKEN, Summary, free_port, serve_fake, summarise

COLD_STARTS = 15
CALLS = 200
LIFECYCLES = 30
SCRIPT = Path(sysconfig.get_path("scripts")) / "lucy-memory-mcp"


@dataclass(frozen=True, slots=True)
class McpResults:
    cold_lucy: Summary
    cold_floor: Summary
    call_recall: Summary
    call_noop: Summary
    lifecycle_warm: Summary
    lifecycle_cold_ms: float


def _env(base_url: str) -> dict[str, str]:
    env = {name: os.environ[name] for name in ("PATH", "HOME") if name in os.environ}
    env.update(
        LUCY_MEMORY_TOKEN=DEV_TOKEN,
        LUCY_MEMORY_BASE_URL=base_url,
        LUCY_MEMORY_ALLOW_INSECURE_LOOPBACK="1",
        LUCY_MEMORY_PERMISSIONS="memory:read,memory:propose",
    )
    return env


def _lucy(base_url: str) -> StdioServerParameters:
    return StdioServerParameters(command=str(SCRIPT), args=[], env=_env(base_url))


def _floor() -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "benchmarks.mcp_floor"], env=_env(""), cwd=str(Path.cwd())
    )


async def _cold(params: StdioServerParameters, errlog: TextIO) -> float:
    started = time.perf_counter()
    async with Client(stdio_client(params, errlog=errlog)) as client:
        await client.list_tools()
        return (time.perf_counter() - started) * 1000


async def _calls(
    params: StdioServerParameters, name: str, arguments: dict[str, Any], errlog: TextIO
) -> Summary:
    async with Client(stdio_client(params, errlog=errlog)) as client:
        for _ in range(20):
            await client.call_tool(name, arguments)
        samples = []
        for _ in range(CALLS):
            started = time.perf_counter()
            result = await client.call_tool(name, arguments)
            samples.append((time.perf_counter() - started) * 1000)
            assert not result.is_error, result
    return summarise(samples)


async def _lifecycle(client: Client, admin: httpx.AsyncClient) -> None:
    unique = uuid.uuid4().hex[:12]
    proposed = await client.call_tool(
        "memory_propose",
        {
            "kind": "decision",
            "content": f"Benchmark decision {unique}: the team approved Postgres.",
            "scope": {"kind": "workspace", "id": "ws_dev"},
        },
    )
    assert not proposed.is_error, proposed
    structured: Any = proposed.structured_content
    proposal_id = structured["proposal"]["id"]
    (await admin.post(f"/_fake/proposals/{proposal_id}/approve")).raise_for_status()
    status = await client.call_tool("memory_proposal_status", {"proposal_id": proposal_id})
    assert not status.is_error, status
    recalled = await client.call_tool(
        "memory_recall", {"query": unique, "scope": {"kind": "workspace", "id": "ws_dev"}}
    )
    assert not recalled.is_error, recalled
    memories: Any = recalled.structured_content
    assert len(memories["memories"]) == 1, memories


async def _run(base_url: str, errlog: TextIO) -> McpResults:
    cold_lucy, cold_floor = [], []
    for _ in range(COLD_STARTS):  # interleaved, so that both see the same machine
        cold_lucy.append(await _cold(_lucy(base_url), errlog))
        cold_floor.append(await _cold(_floor(), errlog))
    recall_args = {"query": "postgres", "scope": {"kind": "workspace", "id": "ws_dev"}}
    recall = await _calls(_lucy(base_url), "memory_recall", recall_args, errlog)
    noop = await _calls(_floor(), "noop", {}, errlog)
    async with httpx.AsyncClient(
        base_url=base_url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    ) as admin:
        started = time.perf_counter()
        async with Client(stdio_client(_lucy(base_url), errlog=errlog)) as client:
            await _lifecycle(client, admin)
        cold = (time.perf_counter() - started) * 1000
        async with Client(stdio_client(_lucy(base_url), errlog=errlog)) as client:
            warm = []
            for _ in range(LIFECYCLES):
                started = time.perf_counter()
                await _lifecycle(client, admin)
                warm.append((time.perf_counter() - started) * 1000)
    return McpResults(summarise(cold_lucy), summarise(cold_floor), recall, noop, summarise(warm), cold)


def available() -> bool:
    return SCRIPT.exists()


def run() -> McpResults:
    with tempfile.TemporaryDirectory(prefix="fake-lucy-bench-mcp-") as directory:
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        with serve_fake(Path(directory) / "mcp.sqlite3", port), Path(os.devnull).open("w") as errlog:
            httpx.put(
                f"{base_url}/_fake/accounts/acct_dev/credits",
                json={"balance": 1_000_000},
                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            ).raise_for_status()
            return anyio.run(_run, base_url, errlog)


if __name__ == "__main__":
    results = run()
    for field in ("cold_lucy", "cold_floor", "call_recall", "call_noop", "lifecycle_warm"):
        summary: Summary = getattr(results, field)
        print(f"{field:16} p50 {summary.p50_ms:8.2f} ms  p99 {summary.p99_ms:8.2f} ms")
    print(f"lifecycle_cold   {results.lifecycle_cold_ms:8.2f} ms")
