"""A user's own suite (``user_suite/``, written from the README's plugin section) runs as its own
project under pytest-xdist: sync tests, the SDK and MCP sharing one fake, and a rate limit."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.plugin.users_pytest import users_pytest

SUITE = Path(__file__).resolve().parent / "user_suite"


@pytest.mark.slow
def test_a_users_suite_written_from_the_readme_passes_under_two_xdist_workers(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(SUITE, project, ignore=shutil.ignore_patterns("__pycache__"))
    result = subprocess.run(  # noqa: S603 - our own interpreter
        users_pytest("-n", "2", "-rA", str(project)),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    passed = sorted(
        line.split(" ", 1)[1] for line in result.stdout.splitlines() if line.startswith("PASSED ")
    )
    assert len(passed) == 10, result.stdout
    assert "test_async_host.py::test_a_429_with_retry_after_3_is_retried_without_sleeping" in passed
    assert "test_async_host.py::test_what_the_sdk_proposes_the_mcp_host_recalls" in passed
    assert "test_sync_review.py::test_a_memory_is_recalled_only_after_a_reviewer_approves_it" in passed
    assert "10 passed" in result.stdout
