"""``fake-lucy serve`` as a user runs it: a real process on a real port."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from fake_lucy import __version__
from fake_lucy import serve as serve_module
from fake_lucy.cli import main
from fake_lucy.domain import snapshot
from fake_lucy.runtime import FakeLucy
from fake_lucy.serve import _announce, serve
from fake_lucy.settings import FakeLucySettings, load_settings
from fake_lucy.snapshot_file import restore_snapshot
from fake_lucy.testing import ServeProcess
from fake_lucy.testing.fakes import STARTUP_LIMIT, free_port, poll_until


@pytest.mark.slow
def test_serve_answers_healthz_and_prints_the_tokens_it_accepts(tmp_path) -> None:
    database = tmp_path / "serve.sqlite3"
    server = ServeProcess(["--database", str(database)])
    try:
        server.wait_ready()
        health = httpx.get(server.base_url + "/healthz")
        assert health.json()["status"] == "ok"
        assert health.headers["Fake-Lucy-Version"]
        # a probe that asks for the headers alone (wget --spider, curl -I) gets them, and no body
        for path in ("/healthz", "/openapi.json", "/_fake/openapi.json"):
            head = httpx.head(server.base_url + path)
            assert (head.status_code, head.content) == (200, b""), path
            assert int(head.headers["Content-Length"]) > 0
        recall = httpx.post(
            server.base_url + "/api/agent-memory/v1/recall",
            json={"query": "anything"},
            headers={"Authorization": "Bearer lucy-dev-token"},
        )
        assert recall.status_code == 200
    finally:
        out, err = server.stop()
    assert server.process.returncode == 0  # SIGTERM is a normal stop, as with several workers
    assert "Traceback" not in err
    # the process ends without the interpreter's teardown, but with its database closed: the WAL
    # checkpointed into the file and removed, and what the recall wrote is there
    assert sorted(path.name for path in tmp_path.iterdir()) == ["serve.sqlite3"]
    with contextlib.closing(sqlite3.connect(database)) as conn:
        assert conn.execute("SELECT operation, status FROM journal").fetchall() == [("recall", 200)]
    assert "lucy-dev-token" in out
    assert "fake-admin-token" in out
    assert f"127.0.0.1:{server.port}" in out


def test_the_defaults_are_loopback_port_8787() -> None:
    settings = FakeLucySettings()
    assert (settings.host, settings.port, settings.workers) == ("127.0.0.1", 8787, 1)


@pytest.mark.slow
def test_a_bad_configuration_exits_with_one_clear_line(tmp_path) -> None:
    server = ServeProcess(["--database", ":memory:", "--workers", "2"])
    with pytest.raises(RuntimeError, match="exited with") as exited:  # at once, not after a time limit
        server.wait_ready()
    assert server.process.returncode != 0
    message = str(exited.value)
    assert len(message.splitlines()) == 1, message
    assert ":memory:" in message


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--database", ":memory:", "--workers", "2"], "--database :memory: is one process's"),
        (["--seed", "{dir}/none.json"], "cannot read the seed {dir}/none.json (No such file or directory)"),
        (["--workers", "0"], "--workers (FAKE_LUCY_WORKERS): Input should be greater than or equal to 1"),
    ],
)
def test_a_configuration_error_names_what_the_user_set_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    database = ["--database", str(tmp_path / "x.sqlite3")] if "--database" not in args else []
    assert main(["serve", *database, *(a.format(dir=tmp_path) for a in args)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fake-lucy: invalid configuration: {expected.format(dir=tmp_path)}"), err
    assert err.count("\n") == 1
    assert not (tmp_path / "x.sqlite3").exists()  # refused before the database was made


def _foreign_database(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (name TEXT)")
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("make", "args", "env", "expected"),
    [
        ("random", ["--database", "{db}"], {}, "cannot be opened as a SQLite database"),
        (None, ["--database", "{dir}"], {}, "is a folder, not a file: add the file's name"),
        ("foreign", ["--database", "{db}"], {}, "holds tables of another application"),
        (None, ["--database", ""], {}, "--database (FAKE_LUCY_DATABASE): "),
        (None, ["--port", "70000"], {}, "--port (FAKE_LUCY_PORT): "),
        (None, [], {"FAKE_LUCY_PORT": "abc"}, "--port (FAKE_LUCY_PORT): "),
        (None, [], {"FAKE_LUCY_QUIET": "banana"}, "--quiet (FAKE_LUCY_QUIET): "),
        (None, ["--database", "{db}"], {"FAKE_LUCY_IMPORT": "{dir}/none.json"}, "cannot read the snapshot"),
        ("bad-seed", ["--seed", "{seed}", "--database", "{db}"], {}, "the seed file"),
        ("deep-seed", ["--seed", "{seed}", "--database", "{db}"], {}, "nested deeper than"),
        (
            None,
            ["--database", "{db}"],
            {"FAKE_LUCY_ADMIN_TOKEN": ""},
            "FAKE_LUCY_ADMIN_TOKEN is set but empty",
        ),
        # found out at start, not at SIGTERM when the session's state is to be kept
        ("bad-seed", ["--database", "{db}", "--export-on-exit", "{seed}/state.json"], {}, "is a file"),
        (None, ["--database", "{db}", "--export-on-exit", "{dir}"], {}, "is a folder, not a file"),
        # a folder still to be made, named with its slash: not a file of the folder's name
        (None, ["--database", "{db}", "--export-on-exit", "{dir}/later/"], {}, "so it names a folder, not"),
        (None, ["--database", "{db}"], {"FAKE_LUCY_EXPORT_ON_EXIT": "{dir}/later/"}, "names a folder, not a"),
        # a folder where files cannot be made whatever the permissions say (root on /proc)
        (
            None,
            ["--database", "{db}", "--export-on-exit", "/proc/fake-lucy-state.json"],
            {},
            "cannot be written",
        ),
        (  # and where the folders on the way cannot be made
            None,
            ["--database", "{db}", "--export-on-exit", "/proc/fake-lucy/state.json"],
            {},
            "/proc/fake-lucy/state.json cannot be written: no folder can be made in /proc",
        ),
        ("bad-seed", ["--database", "{db}"], {"FAKE_LUCY_IMPORT": "{seed}"}, "is not a JSON object"),
        # the database's folders, or the admin token file, named as what they are
        ("bad-seed", ["--database", "{seed}/x.sqlite3"], {}, "seed.json is a file, so "),
        ("bad-seed", ["--database", "{seed}/sub/x.sqlite3"], {}, "(it needs a folder there)"),
        (
            None,
            ["--database", "{db}", "--admin-token-file", "{dir}/none.tok"],
            {},
            "none.tok (No such file or directory)",
        ),
        # set but empty (a compose file's ${X:-}): an empty host would listen on every address, an
        # empty path would be the current folder
        (None, ["--database", "{db}", "--host", ""], {}, "--host (FAKE_LUCY_HOST): is set but empty"),
        (None, ["--database", "{db}"], {"FAKE_LUCY_HOST": ""}, "--host (FAKE_LUCY_HOST): is set but empty"),
        (None, ["--database", "{db}"], {"FAKE_LUCY_SEED": ""}, "--seed (FAKE_LUCY_SEED): is set but empty"),
        (
            None,
            ["--database", "{db}"],
            {"FAKE_LUCY_ADMIN_TOKEN_FILE": " "},
            "(FAKE_LUCY_ADMIN_TOKEN_FILE): is set",
        ),
        (
            None,
            ["--database", "{db}"],
            {"FAKE_LUCY_EXPORT_ON_EXIT": ""},
            "(FAKE_LUCY_EXPORT_ON_EXIT): is set but",
        ),
        (None, ["--database", "{db}"], {"FAKE_LUCY_IMPORT": ""}, "FAKE_LUCY_IMPORT is set but empty"),
        (None, [], {"FAKE_LUCY_PORT": ""}, "--port (FAKE_LUCY_PORT): is set but empty"),
        (
            None,
            ["--database", "{db}"],
            {"FAKE_LUCY_WORKERS": ""},
            "--workers (FAKE_LUCY_WORKERS): is set but",
        ),
        (
            None,
            ["--database", "{db}"],
            {"FAKE_LUCY_QUIET": ""},
            "--quiet (FAKE_LUCY_QUIET): is set but empty",
        ),
        (None, [], {"FAKE_LUCY_DATABASE": ""}, "--database (FAKE_LUCY_DATABASE): is set but empty"),
    ],
)
def test_a_bad_file_or_setting_is_one_line_and_a_non_zero_exit(
    tmp_path: Path, capsys, monkeypatch, make, args, env, expected
) -> None:
    db, seed = tmp_path / "x.sqlite3", tmp_path / "seed.json"
    if make == "random":
        db.write_bytes(bytes(range(256)) * 20)
    elif make == "foreign":
        _foreign_database(db)
    elif make == "bad-seed":
        seed.write_text("{", encoding="utf-8")
    elif make == "deep-seed":
        seed.write_text("[" * 100_000, encoding="utf-8")
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(seed=seed, dir=tmp_path))
    argv = ["serve", *(a.format(db=db, dir=tmp_path, seed=seed) for a in args)]
    assert main(argv) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("fake-lucy: ")
    assert expected in err
    if make == "foreign":  # refused before anything was written to it
        conn = sqlite3.connect(db)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert [row[0] for row in conn.execute("SELECT name FROM sqlite_master")] == ["customers"]
        conn.close()
    if make in ("bad-seed", "deep-seed") and "FAKE_LUCY_IMPORT" not in env:
        assert not db.exists()  # nothing half-seeded (nor made before a setting was refused)


@pytest.mark.parametrize("given", ["flag", "env"])
def test_a_database_path_ending_with_a_slash_is_refused_not_made_a_file_of_the_folders_name(
    tmp_path: Path, capsys, monkeypatch, given: str
) -> None:
    """As ``--export-on-exit`` and ``snapshot export``: ``--database dir/`` names a folder."""
    folder = f"{tmp_path}/state/"
    if given == "env":
        monkeypatch.setenv("FAKE_LUCY_DATABASE", folder)
    assert main(["serve", *(["--database", folder] if given == "flag" else [])]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"fake-lucy: invalid configuration: --database (FAKE_LUCY_DATABASE): {folder} ends with /, so it"
        f" names a folder, not a file: add the file's name (for example {folder}fake-lucy.sqlite3)\n"
    )
    assert not (tmp_path / "state").exists()


def test_the_admin_token_file_wins_over_the_environment(tmp_path: Path, monkeypatch) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text("from-the-file-0123456789\n", encoding="utf-8")
    monkeypatch.setenv("FAKE_LUCY_ADMIN_TOKEN", "from-the-environment-0123")
    assert load_settings(admin_token_file=token_file).resolved_admin_token() == "from-the-file-0123456789"
    assert load_settings().resolved_admin_token() == "from-the-environment-0123"


@pytest.mark.slow
def test_port_0_serves_on_a_free_port_and_the_banner_names_it(tmp_path: Path) -> None:
    process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments
        [
            sys.executable,
            "-m",
            "fake_lucy",
            "serve",
            "--port",
            "0",
            "--database",
            str(tmp_path / "p.sqlite3"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+) ", banner)
        assert match, banner
        assert int(match[1]) != 0
        health = httpx.get(f"http://127.0.0.1:{match[1]}/healthz", timeout=STARTUP_LIMIT)
        assert health.json()["status"] == "ok"
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_off_loopback_the_banner_says_the_built_in_tokens_are_refused(tmp_path: Path, capsys) -> None:
    settings = load_settings(host="0.0.0.0", database=str(tmp_path / "b.sqlite3"))  # noqa: S104 - the point
    fake = FakeLucy(settings)
    try:
        _announce(settings, fake)
    finally:
        fake.close()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        f"fake-lucy {__version__} on http://0.0.0.0:8787"
        f" (every address of this machine, database {settings.database})"
    )
    # the URLs name an address a client can use (browsers refuse 0.0.0.0), which the bind includes
    assert lines[1].split()[:4] == ["v1", "base", "URL:", "http://127.0.0.1:8787"]
    assert lines[2].split()[:2] == ["console:", "http://127.0.0.1:8787/_fake/console/"]
    for token in ("lucy-dev-token", "fake-admin-token"):
        (line,) = [line for line in lines if token in line]
        assert "REFUSED here (401)" in line
    assert not any('"mcpServers"' in line for line in lines)  # no MCP block with a refused token


def test_after_a_snapshot_without_the_dev_tenant_the_banner_offers_no_dev_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A snapshot (or a failure dump) of another tenant replaced tenant_dev: the built-in token
    would answer 401, so neither it nor an MCP configuration with it is offered."""
    first = FakeLucy(load_settings(database=str(tmp_path / "first.sqlite3")))
    try:
        with first.db.write() as conn:
            document = snapshot.export_state(conn, fake_version="test")
    finally:
        first.close()
    document["tenants"] = [tenant for tenant in document["tenants"] if tenant["id"] != "tenant_dev"]
    path = tmp_path / "other-tenants.json"
    path.write_text(json.dumps(document))
    settings = load_settings(database=str(tmp_path / "imported.sqlite3"))
    fake = FakeLucy(settings, initialise=False)
    try:
        fake.initialise(then=lambda conn: restore_snapshot(fake, conn, path, document))
        _announce(settings, fake)
    finally:
        fake.close()
    lines = capsys.readouterr().out.splitlines()
    (line,) = [line for line in lines if "dev token:" in line]
    assert " ".join(line.split()) == (
        "dev token: none: lucy-dev-token is no active credential in this database (a snapshot without"
        " tenant_dev was imported, or the credential was revoked); fake-lucy tenants create makes a"
        " tenant and prints its tokens"
    )
    assert not any('"mcpServers"' in line for line in lines)
    assert any("admin token:  fake-admin-token" in line for line in lines)  # still the way in


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_in_use_or_an_unknown_host_is_one_line_before_any_banner(
    tmp_path: Path, capsys, workers: str
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["--port", str(port), "--workers", workers, "--database", str(tmp_path / "a.sqlite3")]
        assert main(["serve", *args]) == 1
        first = capsys.readouterr()
    assert first.out == ""  # no banner naming a server that never ran
    assert first.err.strip() == f"fake-lucy: cannot listen on 127.0.0.1:{port} (Address already in use)"
    args = ["--host", "host.invalid", "--workers", workers, "--database", str(tmp_path / "b.sqlite3")]
    assert main(["serve", *args]) == 1
    second = capsys.readouterr()
    assert second.out == ""
    assert len(second.err.strip().splitlines()) == 1
    assert second.err.startswith("fake-lucy: cannot listen on host.invalid:8787")


@pytest.mark.parametrize(
    "content",
    [
        '{"format": "fake-lucy-snapshot", "version": 99}',  # refused by the restore
        "not json",  # refused when read
    ],
)
def test_a_refused_import_with_reset_on_start_leaves_the_database_as_it_was(
    tmp_path: Path, content: str
) -> None:
    database = str(tmp_path / "kept.sqlite3")
    before = FakeLucy(FakeLucySettings(database=database))
    with before.db.write() as conn:
        conn.execute("UPDATE accounts SET balance = 4242 WHERE id = 'acct_dev'")  # not the seed's state
    before.close()
    refused = tmp_path / "refused.json"
    refused.write_text(content, encoding="utf-8")
    settings = FakeLucySettings(database=database, reset_on_start=True, import_file=refused)
    with pytest.raises(ValueError, match=r"refused\.json"):
        serve(settings)  # refused before it serves
    balance = (
        sqlite3.connect(database).execute("SELECT balance FROM accounts WHERE id = 'acct_dev'").fetchone()
    )
    assert balance == (4242,)


def test_a_serve_process_is_configured_by_its_arguments_not_by_the_fake_lucy_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A container's FAKE_LUCY_HOST=0.0.0.0 or a CI job's admin token (the README's `export`) must
    not reach the fake a test starts: it would refuse the built-in tokens the test holds."""
    monkeypatch.setenv("FAKE_LUCY_HOST", "0.0.0.0")  # noqa: S104 - what the image sets
    monkeypatch.setenv("FAKE_LUCY_ADMIN_TOKEN", "exported-admin-token-0123456789abcdef")
    with ServeProcess.start(["--database", str(tmp_path / "x.sqlite3")]) as server:
        answer = httpx.get(
            server.base_url + "/_fake/clock", headers={"Authorization": f"Bearer {server.admin_token}"}
        )
        assert answer.status_code == 200  # on loopback, with the built-in admin token this object knows


@pytest.mark.parametrize("given", ["env", "file"])
def test_a_serve_process_given_an_admin_token_holds_it(tmp_path: Path, given: str) -> None:
    token = "given-admin-token-0123456789abcdef0123"
    args = ["--database", str(tmp_path / "x.sqlite3")]
    env = None
    if given == "env":
        env = {"FAKE_LUCY_ADMIN_TOKEN": token}
    else:
        (tmp_path / "admin-token").write_text(token + "\n", encoding="utf-8")
        args += ["--admin-token-file", str(tmp_path / "admin-token")]
    with ServeProcess.start(args, env=env) as server:
        assert server.admin_token == token
        answer = httpx.get(server.base_url + "/_fake/clock", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200


@pytest.mark.parametrize("workers", [1, 2])
def test_a_stop_signal_while_the_fake_starts_ends_it_and_the_export_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """SIGTERM between the banner and uvicorn's own handlers is not lost: the fake never serves
    (or stops as soon as it does), and --export-on-exit still writes the state."""
    export = tmp_path / "state.json"
    settings = load_settings(
        database=str(tmp_path / "starting.sqlite3"), port=0, workers=workers, export_on_exit=str(export)
    )
    environment = dict(os.environ)
    announce = serve_module._announce

    def announce_then_stopped(*args: Any) -> None:
        announce(*args)
        os.kill(os.getpid(), signal.SIGTERM)  # as a supervisor's stop right after the start

    monkeypatch.setattr(serve_module, "_announce", announce_then_stopped)

    def too_long(sig: int, frame: object) -> None:
        raise TimeoutError("the fake kept serving after SIGTERM")

    previous = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(20)
    try:
        serve_module.serve(settings)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert json.loads(export.read_text(encoding="utf-8"))["format"] == "fake-lucy-snapshot"
    assert dict(os.environ) == environment  # nothing set for workers that never started


def _answers(url: str, process: subprocess.Popen[str]) -> bool:
    assert process.poll() is None, process.communicate()[1]  # a process that ended fails at once
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("stdout", ["closed", "its reader gone"])
def test_the_fake_serves_and_ends_with_0_whatever_became_of_its_standard_output(
    tmp_path: Path, stdout: str
) -> None:
    """``fake-lucy serve >&-`` (a service manager's), or ``| head -1`` that read a line of the banner
    and left: the banner goes nowhere, the fake serves all the same and a stop is a normal end."""
    port = free_port()
    command = [sys.executable, "-m", "fake_lucy", "serve", "--port", str(port)]
    command += ["--database", str(tmp_path / "out.sqlite3"), "--quiet"]
    if stdout == "closed":
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and fixed arguments
            ["/bin/sh", "-c", 'exec "$@" >&-', "sh", *command], stderr=subprocess.PIPE, text=True
        )
    else:
        read_end, write_end = os.pipe()
        os.close(read_end)  # gone before the banner's first byte
        process = subprocess.Popen(command, stdout=write_end, stderr=subprocess.PIPE, text=True)  # noqa: S603
        os.close(write_end)
    try:
        poll_until(lambda: _answers(f"http://127.0.0.1:{port}/healthz", process), "the fake did not answer")
    finally:
        process.terminate()
        _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert err == ""
