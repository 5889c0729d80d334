"""Files written whole or not at all: to a temporary file in the target's directory, flushed and
fsynced, then renamed over the target (and the directory fsynced), so the file is always either the
previous one or a complete new one, whenever the process is stopped or killed. A link is followed
(the file it points at is replaced), and a pipe or a terminal (``/dev/stdout``) is written into."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import TextIO

__all__ = [
    "check_writable",
    "file_to_write",
    "flush_standard_streams",
    "is_stream",
    "quiet_stream",
    "read_admin_token_file",
    "write_atomically",
]


def read_admin_token_file(path: str | os.PathLike[str]) -> str:
    """The admin token a file holds, stripped (``serve``, the operator commands and the plugin read
    it alike); a file that cannot be read is ``ValueError`` with one line naming it and why."""
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ValueError(f"cannot read the admin token file {path} ({reason})") from None


def quiet_stream(stream: TextIO) -> None:
    """Let nothing more be written to a standard stream whose reader went away (not even at exit):
    it writes to the null device from here on."""
    for standard in (sys.stdout, sys.stderr):
        if stream is standard:
            os.dup2(os.open(os.devnull, os.O_WRONLY), standard.fileno())


def flush_standard_streams() -> None:
    """Flush stdout and stderr as the interpreter's exit would: a stream that is closed (``>&-``:
    ``None``) or whose reader went away is passed over, never an error."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            try:
                stream.flush()
            except BrokenPipeError:
                quiet_stream(stream)
            except (OSError, ValueError):  # a stream closed by the program itself: nothing to flush
                pass


def is_stream(path: Path) -> bool:
    """Is ``path`` (its links followed) a pipe or a character device (``/dev/stdout``, a FIFO,
    ``/dev/null``): written into as it is, never replaced by a file."""
    try:
        mode = path.stat().st_mode
    except OSError:  # nothing there (yet), or a link to nothing
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def _target(path: Path) -> Path:
    """The file that ``path`` names: a link's target (the link stays a link, and the file it points
    at is the one replaced); anything there but a regular file or a stream is ``ValueError``."""
    try:
        mode: int | None = path.stat().st_mode
    except OSError:  # nothing there, or a file on the way (the checks of the folders say which)
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise ValueError(f"{path} is a folder, not a file")
    if mode is not None and not stat.S_ISREG(mode):
        raise ValueError(f"{path} is neither a regular file nor a pipe or a terminal, so it is not written")
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def file_to_write(text: str, *, example: str = "state.json") -> Path:
    """``text`` (a command line's or a setting's) as the path of a file to write. One that ends with
    a separator names a folder: ``Path`` would drop the separator, and a file of the folder's name
    would be written (made with the folders above it), so it is ``ValueError``."""
    if text.endswith(("/", os.sep)):
        raise ValueError(
            f"{text} ends with {text[-1]}, so it names a folder, not a file: add the file's name"
            f" (for example {text}{example})"
        )
    return Path(text)


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file renamed over it (fsynced, the rename
    too). The file keeps the mode it had; a new one gets what ``open`` would give it (0o666 under
    the umask), not the temporary file's 0o600. A link is followed (its target is replaced, the link
    stays); a pipe or a character device (``/dev/stdout``) is written into as it is."""
    if is_stream(path):
        with path.open("wb") as stream:
            stream.write(data)
        return
    path = _target(path)
    directory = path.parent if str(path.parent) else Path()
    directory.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=directory)
    temporary = Path(name)
    try:
        os.fchmod(handle, mode)
        with os.fdopen(handle, "wb") as output:
            output.write(data)
            output.flush()
            os.fsync(output.fileno())
        temporary.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)  # the rename itself survives a crash
    finally:
        os.close(descriptor)


def _umask() -> int:
    """The process's umask: read from /proc where Linux offers it (reading it otherwise means
    setting it for a moment, which another thread creating a file then would meet)."""
    try:
        with Path("/proc/self/status").open(encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):  # not Linux, or no such line: the portable way
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def check_writable(path: Path) -> None:
    """Whether ``write_atomically(path, …)`` could write there: ``path`` is not a folder, and its
    nearest existing ancestor is a folder this process may create files in (the folders below it
    are made then); an empty file (in ``path``'s own folder) or folder (in the nearest ancestor, when
    folders are to be made) is made there and removed, as permissions alone do not tell (root on a
    read-only or pseudo file system such as ``/proc``).
    ``ValueError`` saying what is in the way. A pipe or a character device needs only to be
    writable; a link is checked where it points."""
    if is_stream(path):
        if not os.access(path, os.W_OK):
            raise ValueError(f"{path} cannot be written: no permission")
        return
    path = _target(path)
    ancestor = path.parent if str(path.parent) else Path()
    while not ancestor.exists():
        if ancestor.is_symlink():  # a link to nothing: mkdir would fail there
            raise ValueError(f"{ancestor} is a broken link, so {path} cannot be written")
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ValueError(f"{ancestor} is a file, so {path} cannot be written (it needs a folder there)")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ValueError(f"{path} cannot be written: no permission to create files in {ancestor}")
    if ancestor == (path.parent if str(path.parent) else Path()):
        try:
            descriptor, probe = tempfile.mkstemp(dir=ancestor, prefix=f".{path.name}.", suffix=".probe")
        except OSError as exc:
            raise ValueError(f"{path} cannot be written ({exc.strerror or exc})") from None
        os.close(descriptor)
        Path(probe).unlink()
        return
    try:  # the folders to make: an empty one is made in the ancestor and removed
        folder = tempfile.mkdtemp(dir=ancestor, prefix=f".{path.name}.", suffix=".probe")
    except OSError as exc:
        raise ValueError(
            f"{path} cannot be written: no folder can be made in {ancestor} ({exc.strerror or exc})"
        ) from None
    Path(folder).rmdir()
