"""The fuzzing modules' fakes leave nothing behind: each pytest-xdist worker imports every module to
collect it, also one whose tests (and so whose closing fixture) run on another worker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_throwaway_fake_that_no_test_closed_is_removed_when_the_process_ends(tmp_path: Path) -> None:
    made = subprocess.run(
        [
            sys.executable,
            "-c",
            "from tests.contract.fuzzing import throwaway_fake\n"
            "fake, folder = throwaway_fake('probe')\n"
            "print(folder, flush=True)\n"
            "assert (folder / 'fake-lucy.sqlite3').exists()\n",
        ],
        cwd=ROOT,
        env={"TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    folder = Path(made.stdout.strip())
    assert folder.parent == tmp_path
    assert not folder.exists()
    assert list(tmp_path.iterdir()) == []
