"""Issue 17, point 7: what ``lucy-memory-mcp`` prints says it all: ``--help`` is the usage (not a
server), an unknown argument is one line and exit 2, the log names how a call ended (never
``HTTP None``), and scores are plain decimals a person reads."""

from __future__ import annotations

import logging
import subprocess
import sysconfig
from pathlib import Path

import pytest

from lucy_memory.mcp.__main__ import main
from lucy_memory.mcp.render import format_score, render_recall
from lucy_memory.models import Credits, RecalledMemory, RecallResult
from tests.mcp.helpers import READ_ONLY, connect, proposal_args

SCRIPT = Path(sysconfig.get_path("scripts")) / "lucy-memory-mcp"


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_the_usage_on_stdout_and_exits_0_without_serving(flag, capsys, monkeypatch) -> None:
    monkeypatch.delenv("LUCY_MEMORY_TOKEN", raising=False)  # a server would refuse to start without it
    assert main([flag]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: lucy-memory-mcp [-h]\n")
    for name in (
        "LUCY_MEMORY_TOKEN",
        "LUCY_MEMORY_PERMISSIONS",
        "LUCY_MEMORY_BASE_URL",
        "LUCY_MEMORY_TRANSPORT_MODULE",
    ):
        assert name in out
    assert "refused-keys.json" in out  # the file a user finds, not a module of the package
    assert ".py)" not in out
    assert err == ""


@pytest.mark.parametrize("arguments", [["--port", "8080"], ["serve"], ["--help", "extra"]])
def test_an_unknown_argument_is_a_one_line_usage_error_with_exit_2(arguments, capsys) -> None:
    assert main(arguments) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("lucy-memory-mcp: unrecognized arguments")
    assert "--help" in err
    assert all(argument not in err for argument in arguments if argument != "--help")


@pytest.mark.slow
def test_the_installed_command_answers_help_and_exits_at_once() -> None:
    finished = subprocess.run(  # noqa: S603 - our own console script, fixed arguments
        [str(SCRIPT), "--help"], input=b"", capture_output=True, env={}, timeout=60, check=False
    )
    assert (finished.returncode, finished.stderr) == (0, b"")
    assert finished.stdout.startswith(b"usage: lucy-memory-mcp")


@pytest.mark.anyio
async def test_the_log_says_a_refusal_before_sending_never_http_none(fake, caplog) -> None:
    caplog.set_level(logging.INFO, logger="lucy_memory.mcp")
    async with connect(fake, permissions=READ_ONLY) as client:
        result = await client.call_tool("memory_propose", proposal_args())
    assert result.is_error is True
    failures = [record.getMessage() for record in caplog.records if "failed" in record.getMessage()]
    assert failures == ["memory_propose failed: permission_denied (refused before sending)"]
    assert "HTTP None" not in caplog.text


@pytest.mark.anyio
async def test_the_log_names_the_http_status_of_a_service_error(fake, admin, caplog) -> None:
    await admin.add_fault("recall", 503, retry_after=0)
    caplog.set_level(logging.INFO, logger="lucy_memory.mcp")
    async with connect(fake) as client:
        await client.call_tool("memory_recall", {"query": "database"})
    assert "memory_recall failed: unavailable (HTTP 503)" in caplog.text


@pytest.mark.parametrize(
    ("score", "shown"),
    [
        (1e-06, "0.000001"),
        (0.000123456, "0.000123"),
        (12.3456, "12.3"),
        (2.0, "2"),
        (0.0, "0"),
        (1234.5, "1230"),
    ],
)
def test_a_score_is_a_plain_decimal_of_at_most_three_significant_digits(score, shown) -> None:
    assert format_score(score) == shown


def test_a_recalled_memory_shows_its_score_without_an_exponent() -> None:
    memory = {
        "id": "mem_" + "a" * 22,
        "version": 1,
        "kind": "fact",
        "topic": None,
        "content": "A faint match.",
        "importance": 5,
        "scope": {"kind": "project", "id": "project_example"},
        "status": "active",
        "source": None,
        "created_at": "2026-01-01T00:00:00.000000Z",
        "updated_at": "2026-01-01T00:00:00.000000Z",
        "approved_at": "2026-01-01T00:00:00.000000Z",
        "last_accessed_at": None,
        "score": 1e-06,
    }
    result = RecallResult(
        memories=(RecalledMemory.from_json(memory),),
        request_id="req_" + "A" * 22,
        credits=Credits(1, 9),
        body="{}",
    )
    text = render_recall(result, nonce_factory=lambda: "f00d")
    assert " score=0.000001>>>" in text
    assert "e-0" not in text
