"""The pytest plugin as a user meets it: registered by entry point, fixtures reset per test, and
users' own suites run as their own project under pytest-xdist."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import textwrap
from dataclasses import dataclass
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


SUITE = Path(__file__).resolve().parent / "user_suite"


@dataclass(frozen=True)
class UsersRun:
    outcomes: dict[str, list[str]]  # file name (without .py) -> each test's outcome, from -rA
    passed: list[str]  # "folder/file.py::test" of each test that passed
    exit: tuple[int, str]  # the exit status and the end of the output

    def explain(self) -> str:
        return f"exit {self.exit[0]}: {self.exit[1]}"


@pytest.fixture(scope="module")
def users_suites(tmp_path_factory: pytest.TempPathFactory) -> UsersRun:
    """Two users' suites, each a folder with its own conftest, run as one ``pytest -n 2`` in a process:
    ``readme/`` (the README's example and USER_TESTS) and ``user_suite/`` (written from the README's
    plugin section: sync tests, the SDK and MCP sharing one fake, and a rate limit).

    One run for both: pytest starts three interpreters here (xdist's controller and two workers),
    each of which imports the fake for its fixtures. This project's own test-only plugins
    (schemathesis, hypothesis) are left out of them: a user's suite has no need of them.
    """
    root = tmp_path_factory.mktemp("users-suites")
    readme = root / "readme"
    readme.mkdir()
    conftest, asynchronous, synchronous = _readme_examples()
    (readme / "conftest.py").write_text(conftest)
    (readme / "test_readme_example.py").write_text(asynchronous)
    (readme / "test_readme_sync_example.py").write_text(synchronous)
    (readme / "test_user_suite.py").write_text(USER_TESTS)
    shutil.copytree(SUITE, root / "user_suite", ignore=shutil.ignore_patterns("__pycache__"))
    result = subprocess.run(  # noqa: S603 - our own interpreter
        users_pytest("-rA", "-n", "2", "readme", "user_suite"),
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    outcomes: dict[str, list[str]] = {}
    for outcome, file in re.findall(
        r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (?:\w+/)*(\w+)\.py", result.stdout, re.M
    ):
        outcomes.setdefault(file, []).append(outcome)
    passed = sorted(
        line.split(" ", 1)[1] for line in result.stdout.splitlines() if line.startswith("PASSED ")
    )
    return UsersRun(outcomes, passed, (result.returncode, result.stdout[-3000:] + result.stderr[-3000:]))


@pytest.mark.slow
def test_a_users_suite_gets_the_fixtures_and_isolation_under_xdist(users_suites: UsersRun) -> None:
    assert users_suites.outcomes.get("test_user_suite") == ["PASSED"] * 4, users_suites.explain()


@pytest.mark.slow
def test_the_readme_plugin_example_passes_as_a_users_suite(users_suites: UsersRun) -> None:
    _, asynchronous, synchronous = _readme_examples()
    outcomes = users_suites.outcomes
    assert outcomes.get("test_readme_example") == ["PASSED"] * asynchronous.count("def test_")
    assert outcomes.get("test_readme_sync_example") == ["PASSED"] * synchronous.count("def test_")
    assert users_suites.exit[0] == 0, users_suites.explain()


@pytest.mark.slow
def test_a_users_suite_written_from_the_readme_passes_under_two_xdist_workers(users_suites: UsersRun) -> None:
    passed = [
        name.removeprefix("user_suite/") for name in users_suites.passed if name.startswith("user_suite/")
    ]
    assert len(passed) == 10, users_suites.explain()
    assert "test_async_host.py::test_a_429_with_retry_after_3_is_retried_without_sleeping" in passed
    assert "test_async_host.py::test_what_the_sdk_proposes_the_mcp_host_recalls" in passed
    assert "test_sync_review.py::test_a_memory_is_recalled_only_after_a_reviewer_approves_it" in passed
    assert users_suites.exit[0] == 0, users_suites.explain()
