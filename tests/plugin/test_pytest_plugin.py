"""The pytest plugin as a user meets it: registered by entry point, fixtures reset per test."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import httpx
import pytest

from lucy_memory import AgentMemoryClient
from tests.plugin.users_pytest import users_pytest

pytestmark = pytest.mark.anyio


def test_the_plugin_is_registered_as_a_pytest11_entry_point() -> None:
    names = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert names.get("fake_lucy") == "fake_lucy.testing.pytest_plugin"


async def test_lucy_client_talks_to_the_in_process_fake(lucy_client: AgentMemoryClient, fake_lucy) -> None:
    proposed = await lucy_client.propose(
        json.dumps(
            {"kind": "fact", "content": "Plugin fixture works.", "scope": {"kind": "user", "id": "usr_dev"}}
        )
    )
    approved = await fake_lucy.admin.approve(proposed.proposal.id)
    recalled = await lucy_client.recall('{"query": "plugin fixture"}')
    assert [m.id for m in recalled.memories] == [approved["memory"]["id"]]
    assert recalled.memories[0].content == "Plugin fixture works."
    journal = await fake_lucy.admin.requests()
    assert [row["operation"] for row in journal] == ["propose", "recall"]


async def test_fake_lucy_server_is_a_real_socket_with_an_admin_helper(fake_lucy_server) -> None:
    async with httpx.AsyncClient(base_url=fake_lucy_server.base_url) as http:
        assert (await http.get("/healthz")).status_code == 200
    created = await fake_lucy_server.admin.create_credential(credits=2)
    assert created["token"]
    assert (await fake_lucy_server.admin.clock())["frozen"] is False


USER_TESTS = textwrap.dedent(
    """
    import pytest

    pytestmark = pytest.mark.anyio

    @pytest.fixture
    def anyio_backend():
        return "asyncio"

    @pytest.mark.parametrize("n", range(4))
    async def test_each_test_starts_from_the_seed(fake_lucy, n):
        async with fake_lucy.client() as http:
            assert (await http.post("/api/agent-memory/v1/recall", json={"query": "x"})).status_code == 200
        ledger = await fake_lucy.admin.ledger()
        assert [row["balance_after"] for row in ledger] == [999]
    """
)


@pytest.mark.slow
async def test_lucy_mcp_is_a_session_to_the_real_stdio_server(lucy_mcp, fake_lucy_server) -> None:
    tools = {tool.name for tool in (await lucy_mcp.list_tools()).tools}
    assert tools == {"memory_recall", "memory_propose", "memory_proposal_status"}
    result = await lucy_mcp.call_tool("memory_recall", {"query": "anything"})
    assert not result.is_error
    journal = await fake_lucy_server.admin.requests()
    assert [(row["operation"], row["status"]) for row in journal] == [("recall", 200)]


def _readme_examples() -> list[str]:
    """The README's plugin examples: a conftest, an async and a sync test module."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## In your tests: the pytest plugin", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


@pytest.fixture(scope="module")
def users_suite(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """A user's suite (the README's example and USER_TESTS), run once as ``pytest -n 2`` in a process.

    Returns the outcome of each test by file (from the ``-rA`` summary), and the exit status. pytest
    starts three interpreters here (xdist's controller and two workers); this project's own
    test-only plugins (schemathesis, hypothesis) are left out of them: a user's suite has no need
    of them.
    """
    suite = tmp_path_factory.mktemp("users-suite")
    conftest, asynchronous, synchronous = _readme_examples()
    (suite / "conftest.py").write_text(conftest)
    (suite / "test_readme_example.py").write_text(asynchronous)
    (suite / "test_readme_sync_example.py").write_text(synchronous)
    (suite / "test_user_suite.py").write_text(USER_TESTS)
    result = subprocess.run(  # noqa: S603 - our own interpreter
        users_pytest("-rA", "-n", "2", str(suite)),
        cwd=suite,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    outcomes: dict[str, list[str]] = {}
    for outcome, file in re.findall(
        r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\w+)\.py", result.stdout, re.M
    ):
        outcomes.setdefault(file, []).append(outcome)
    outcomes["exit"] = [str(result.returncode), result.stdout[-3000:] + result.stderr[-3000:]]
    return outcomes


@pytest.mark.slow
def test_a_users_suite_gets_the_fixtures_and_isolation_under_xdist(users_suite) -> None:
    assert users_suite.get("test_user_suite") == ["PASSED"] * 4, users_suite["exit"]


@pytest.mark.slow
def test_the_readme_plugin_example_passes_as_a_users_suite(users_suite) -> None:
    _, asynchronous, synchronous = _readme_examples()
    assert users_suite.get("test_readme_example") == ["PASSED"] * asynchronous.count("def test_")
    assert users_suite.get("test_readme_sync_example") == ["PASSED"] * synchronous.count("def test_")
    assert users_suite["exit"][0] == "0", users_suite["exit"]
