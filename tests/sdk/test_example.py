"""Must hold 9: the README's SDK example (docs/sdk_example.py) runs as written against a real server."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "sdk_example.py"


async def test_the_readme_example_runs_as_written_against_a_live_server(live, live_admin) -> None:
    environment = {**os.environ, "LUCY_MEMORY_BASE_URL": live.base_url, "LUCY_MEMORY_TOKEN": "lucy-dev-token"}
    done = await anyio.run_process([sys.executable, str(EXAMPLE)], env=environment, check=False)

    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode()
    [proposal] = (await live_admin.proposals())["items"]
    assert f"proposal {proposal['id']}: pending (not saved yet)" in out
    assert "status now: pending; credits left: 998" in out
    assert "0 approved memories recalled" in out
    assert proposal["source"] == "sdk-example"
    assert [row["operation"] for row in await live_admin.requests()] == [
        "propose",
        "proposal_status",
        "recall",
    ]
    assert [row["operation"] for row in await live_admin.ledger()] == ["propose", "proposal_status", "recall"]
