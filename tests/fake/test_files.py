"""``files.write_atomically``: the files of ``--export-on-exit`` and ``fake-lucy snapshot export``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from fake_lucy.files import write_atomically


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_gets_the_mode_a_plain_open_would_give_it(tmp_path: Path) -> None:
    previous = os.umask(0o027)
    try:
        write_atomically(tmp_path / "new.json", b"{}\n")
    finally:
        os.umask(previous)
    assert _mode(tmp_path / "new.json") == 0o640  # 0o666 under the umask, as open() makes it
    assert [p.name for p in tmp_path.iterdir()] == ["new.json"]


def test_a_file_written_again_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_bytes(b"old\n")
    target.chmod(0o604)
    write_atomically(target, b"new\n")
    assert (target.read_bytes(), _mode(target)) == (b"new\n", 0o604)
