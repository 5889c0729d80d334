"""The refused derived keys kept across restarts (``lucy_memory.mcp.refusals``): a file that cannot be
read or written costs that memory, never a tool call, and is said once; another file is never
written over; the entries are bounded."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from lucy_memory.mcp import refusals
from lucy_memory.mcp.refusals import FILE_NAME, RefusedKeys


def test_a_refusal_is_read_by_the_next_process_of_the_same_service_and_token(tmp_path: Path) -> None:
    RefusedKeys(tmp_path, origin="https://lucy.example", token="t1").set("key", 1)
    assert RefusedKeys(tmp_path, origin="https://lucy.example", token="t1").get("key") == 1
    assert RefusedKeys(tmp_path, origin="https://other.example", token="t1").get("key") == 0
    assert RefusedKeys(tmp_path, origin="https://lucy.example", token="t2").get("key") == 0


def test_two_processes_keep_each_others_refusals(tmp_path: Path) -> None:
    one, two = RefusedKeys(tmp_path, token="t"), RefusedKeys(tmp_path, token="t")
    assert (one.get("a"), two.get("b")) == (0, 0)  # both have read the (missing) file
    one.set("a", 1)
    two.set("b", 2)  # reads the file again first: a's refusal stays
    assert (RefusedKeys(tmp_path, token="t").get("a"), RefusedKeys(tmp_path, token="t").get("b")) == (1, 2)


def test_a_file_that_is_not_ours_is_never_written_over_and_memory_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / FILE_NAME
    path.write_text('{"something": "else"}')
    keys = RefusedKeys(tmp_path, token="t")
    keys.set("key", 1)
    keys.set("other", 1)
    assert keys.get("key") == 1  # in memory
    assert path.read_text() == '{"something": "else"}'
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "is not a file of refused keys" in warnings[0]
    assert "LUCY_MEMORY_STATE_DIR" in warnings[0]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_folder_that_cannot_be_written_costs_the_memory_across_restarts_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tmp_path.chmod(0o500)
    try:
        keys = RefusedKeys(tmp_path / "state", token="t")
        keys.set("key", 1)
        assert keys.get("key") == 1
    finally:
        tmp_path.chmod(0o700)
    assert [r.getMessage() for r in caplog.records if "cannot write" in r.getMessage()]


def test_a_file_in_the_way_of_the_folder_costs_the_memory_across_restarts_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "state").write_text("a file where the folder would be")
    keys = RefusedKeys(tmp_path / "state", token="t")
    keys.set("key", 1)
    keys.set("key", 2)
    assert keys.get("key") == 2
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(messages) == 1  # said once (its reading fails first: "Not a directory")
    assert f"state/{FILE_NAME} (Not a directory)" in messages[0]


def test_the_entries_are_bounded_the_oldest_going_first(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(refusals, "_MAX_ENTRIES", 3)
    keys = RefusedKeys(tmp_path, token="t")
    for name in ("a", "b", "c", "d"):
        keys.set(name, 1)
    again = RefusedKeys(tmp_path, token="t")
    assert [again.get(name) for name in ("a", "b", "c", "d")] == [0, 1, 1, 1]
    assert len(json.loads((tmp_path / FILE_NAME).read_text())["entries"]) == 3


def test_without_a_folder_the_refusals_are_kept_in_memory(tmp_path: Path) -> None:
    keys = RefusedKeys()
    keys.set("key", 1)
    assert keys.get("key") == 1
    assert list(tmp_path.iterdir()) == []
