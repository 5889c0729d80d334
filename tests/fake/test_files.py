"""``files.write_atomically``: the files of ``--export-on-exit`` and ``fake-lucy snapshot export``."""

from __future__ import annotations

import concurrent.futures
import os
import socket
import stat
from pathlib import Path

import pytest

from fake_lucy.files import check_writable, is_stream, write_atomically


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


def test_a_link_is_followed_its_target_replaced_and_the_link_kept(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "state.json").write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real / "state.json")
    check_writable(link)
    write_atomically(link, b"new")
    assert link.is_symlink()
    assert (real / "state.json").read_bytes() == b"new"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(real / "later.json")
    write_atomically(dangling, b"made")
    assert dangling.is_symlink()
    assert (real / "later.json").read_bytes() == b"made"


def test_a_pipe_or_a_character_device_is_written_into_never_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "p.fifo"
    os.mkfifo(fifo)
    with concurrent.futures.ThreadPoolExecutor(1) as reader:
        read = reader.submit(fifo.read_bytes)
        check_writable(fifo)
        write_atomically(fifo, b"through the pipe")
        assert read.result(timeout=10) == b"through the pipe"
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    devnull = Path(os.devnull)
    write_atomically(devnull, b"nothing")
    assert stat.S_ISCHR(devnull.stat().st_mode)
    assert is_stream(fifo)
    assert is_stream(devnull)
    assert not is_stream(tmp_path / "plain.json")


def test_a_socket_is_refused_as_no_file_and_left_there(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(path))
        for attempt in (check_writable, lambda target: write_atomically(target, b"x")):
            with pytest.raises(ValueError, match="neither a regular file nor a pipe"):
                attempt(path)
        assert stat.S_ISSOCK(path.stat().st_mode)
