"""``fake-lucy serve``: run the fake under uvicorn.

Imported by ``fake_lucy.cli`` for this command alone: the operator commands talk to a running fake
over HTTP and start without the server (uvicorn, FastAPI, the app, the database).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import ssl
import sys
import sysconfig
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import uvicorn
from pydantic import ValidationError

from fake_lucy import __version__
from fake_lucy.app import SUPERVISOR_VARIABLE, create_app
from fake_lucy.domain import principals, sessions
from fake_lucy.domain.defaults import DEFAULT_ADMIN_TOKEN, DEV_TOKEN
from fake_lucy.files import check_writable, flush_standard_streams, quiet_stream
from fake_lucy.http.console import PREFIX as CONSOLE
from fake_lucy.runtime import FakeLucy, SeedMismatchError
from fake_lucy.server_log import RequestLogger
from fake_lucy.settings import ENV_PREFIX, FakeLucySettings, load_settings
from fake_lucy.snapshot_file import export_file, read_snapshot, restore_snapshot
from fake_lucy.store.connection import fold_wal
from fake_lucy.text import one_line
from lucy_memory._contract import PERMISSIONS

__all__ = ["PROTOCOL", "mcp_host_configuration", "run", "serve"]

log = logging.getLogger("fake_lucy")
PROTOCOL = "fake_lucy.http.uvicorn_protocol:AbortingH11Protocol"
MCP_SERVER_SCRIPT = "lucy-memory-mcp"


def mcp_host_configuration(base_url: str) -> dict[str, object]:
    """A ready ``mcpServers`` block that runs this environment's ``lucy-memory-mcp`` against the fake with
    the dev seed. The dev token is the fake's public, built-in token (refused off loopback), so printing
    it is safe; a real deployment's token belongs in the host's secret store. Over HTTPS the cleartext
    allowance is left out, and the CA this process was told to trust (``SSL_CERT_FILE``,
    ``SSL_CERT_DIR``) is passed on: a host starts its MCP servers with an environment of its own."""
    command = str(Path(sysconfig.get_path("scripts")) / MCP_SERVER_SCRIPT)
    env = {"LUCY_MEMORY_BASE_URL": base_url}
    if base_url.startswith("https://"):
        env.update(
            {name: os.environ[name] for name in ("SSL_CERT_FILE", "SSL_CERT_DIR") if os.environ.get(name)}
        )
    else:
        env["LUCY_MEMORY_ALLOW_INSECURE_LOOPBACK"] = "1"
    env.update({"LUCY_MEMORY_PERMISSIONS": ",".join(PERMISSIONS), "LUCY_MEMORY_TOKEN": DEV_TOKEN})
    return {"mcpServers": {"lucy-memory-dev": {"command": command, "args": [], "env": env}}}


_SEEDING: dict[str, str] = {
    "applied": "applied to this new database",
    "reset": "applied again: --reset-on-start wiped the database",
    "kept": "applied when this database was created; its state since then is kept",
}


def _console_line(settings: FakeLucySettings, fake: FakeLucy, origin: str) -> str:
    """``console: <url>``: on a loopback bind a one-time login link (single use, 10 minutes)."""
    if not fake.loopback:
        return f"  console:      {origin}{CONSOLE}/   (log in with the admin token)"
    with fake.db.write() as conn:
        token = sessions.create_link(conn, fake.admin_token)
    return f"  console:      {origin}{CONSOLE}/login/{token}   (one-time login link, 10 minutes)"


# A bind to every address: no client connects to it (browsers refuse 0.0.0.0), so the URLs the
# banner prints name this machine's loopback address, which the bind includes.
_EVERY_ADDRESS = {"0.0.0.0": "127.0.0.1", "::": "::1"}  # noqa: S104 - names, not a bind


def _announce(settings: FakeLucySettings, fake: FakeLucy) -> None:
    def url_host(name: str) -> str:
        return name if ":" not in name else f"[{name}]"

    bound = f"{settings.scheme}://{url_host(settings.host)}:{settings.port}"
    origin = (
        f"{settings.scheme}://{url_host(_EVERY_ADDRESS.get(settings.host, settings.host))}:{settings.port}"
    )
    about = f"database {settings.database}"
    if settings.host in _EVERY_ADDRESS:
        about = f"every address of this machine, {about}"
    lines = [
        f"fake-lucy {__version__} on {bound} ({about})",
        f"  v1 base URL:  {origin}   (API under {fake.contract['base_path']})",
        _console_line(settings, fake, origin),
    ]
    refused = "" if fake.loopback else "   REFUSED here (401): not a loopback address"
    with fake.db.read() as conn:
        dev_token_held = principals.authenticate(conn, DEV_TOKEN) is not None
    if settings.seed is None and not dev_token_held:
        # a snapshot without tenant_dev was imported (now or into this file before), or the
        # credential revoked: the built-in token would answer 401, so it is not offered, nor an MCP
        # configuration with it
        lines.append(
            f"  dev token:    none: {DEV_TOKEN} is no active credential in this database (a snapshot"
            " without tenant_dev was imported, or the credential was revoked); fake-lucy tenants create"
            " makes a tenant and prints its tokens"
        )
    elif settings.seed is None:
        lines.append(f"  dev token:    {DEV_TOKEN}   (tenant_dev / acct_dev, read + propose){refused}")
    else:
        lines.append(
            f"  seed:         {settings.seed} ({_SEEDING[fake.seed_outcome]}; tokens as listed in the seed)"
        )
    if fake.admin_token_is_builtin:
        lines.append(f"  admin token:  {DEFAULT_ADMIN_TOKEN}   (control API under /_fake){refused}")
    else:
        lines.append("  admin token:  as configured (FAKE_LUCY_ADMIN_TOKEN or --admin-token-file)")
    if settings.tls_certfile is not None:
        lines.append(
            f"  TLS:          {settings.tls_certfile}   (clients trust it: a public CA's, or SSL_CERT_FILE)"
        )
    if not fake.loopback:
        log.warning("listening on a non-loopback address: the built-in tokens are refused (401)")
    elif settings.seed is None and dev_token_held:
        lines.append("  MCP host configuration (lucy-memory-mcp on this fake, with the public dev token):")
        lines.append(json.dumps(mcp_host_configuration(origin), indent=2))
    try:
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # the banner's reader went away (``| head -1``): the fake serves all the same
        quiet_stream(sys.stdout)


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before the banner: the banner then names a port that answers
    (``--port 0`` included), and a port in use or a bad host is one line, not a banner and a log."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        # One worker: from here on a client that read the banner is queued until uvicorn accepts.
        # Several: the supervisor binds the port again once this socket is closed, so a client
        # that connects in between (a fraction of a second) is refused and tries again.
        sock.listen(2048)
    except OSError as exc:  # socket.gaierror included
        sock.close()
        raise OSError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
    return sock


class _Stop:
    """The stop signals received while ``_stopping_gracefully`` holds them, and the one-worker
    server to stop (a signal before it serves stops it as soon as it does)."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.server: uvicorn.Server | None = None

    def __call__(self, sig: int, frame: object) -> None:
        self.received.append(sig)
        if self.server is not None:
            self.server.should_exit = True


_current_stop: _Stop | None = None


@contextmanager
def _stopping_gracefully() -> Iterator[_Stop]:
    """SIGTERM and SIGINT stop the server and then let this process finish its work.

    uvicorn restores the handlers it found when it stops and raises the signal again; these
    handlers are the ones it finds, so the signal is taken as "stop" (and a second one during the
    export is ignored) instead of ending the process before the export is written. One received
    before uvicorn takes the signals over is not lost: ``_run`` does not start serving, or the
    server stops as soon as it serves. Nested, the outer one holds the signals.
    """
    global _current_stop
    if _current_stop is not None:
        yield _current_stop
        return
    stop = _current_stop = _Stop()
    previous = {sig: signal.signal(sig, stop) for sig in _STOP_SIGNALS}
    try:
        yield stop
    finally:
        _current_stop = None
        for sig, handler in previous.items():
            signal.signal(sig, handler)


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def serve(settings: FakeLucySettings) -> None:
    if settings.import_file is None:
        fake = FakeLucy(settings)  # creates and seeds the database before any worker starts
    else:
        # the seed (or --reset-on-start's reset) and the import in one transaction: a refused
        # snapshot leaves the database as it was
        path = settings.import_file
        document = read_snapshot(path)
        fake = FakeLucy(settings, initialise=False)
        try:
            fake.initialise(then=lambda conn: restore_snapshot(fake, conn, path, document))
        # any exception, Ctrl-C included: the database is closed before it goes on up unchanged
        except BaseException:
            fake.close()
            raise
    try:
        if settings.export_on_exit is None:
            _run(settings, fake)
            return
        with _stopping_gracefully():
            _run(settings, fake)
            if fake.db.closed:  # several workers: the parent closed its connection before they started
                fake = FakeLucy(settings, initialise=False)
            export_file(fake, settings.export_on_exit)
            log.info("wrote the snapshot %s", settings.export_on_exit)
    finally:
        if not fake.db.closed:  # the database closed here (WAL checkpointed), not at teardown
            fake.close()


def end_process(status: int) -> NoReturn:
    """End ``fake-lucy serve`` once it has stopped, without the interpreter's teardown: with the
    web framework's models loaded, tearing the modules down takes ~0.1 s of CPU after the server is
    gone, which a test suite that starts many servers (or a Ctrl-C) waits for. Everything is closed
    by then (the database by ``serve``, the workers joined by uvicorn's supervisor); the log and
    the standard streams are flushed first."""
    logging.shutdown()
    flush_standard_streams()
    os._exit(status)


WORKER_HEALTHCHECK_SECONDS = 60
# An idle keep-alive connection stays open this long (uvicorn's default is 5 s): a test's client that
# pauses between requests (a slow CI machine, a breakpoint) keeps its connection, instead of racing
# the server's close with its next request.
KEEP_ALIVE_SECONDS = 30
# What one worker and several have in common.
_UVICORN: dict[str, Any] = {
    "http": PROTOCOL,
    "lifespan": "off",
    "log_level": "warning",
    "timeout_keep_alive": KEEP_ALIVE_SECONDS,
}


class _EncryptedKeyError(Exception):
    """The TLS key asks for a passphrase (OpenSSL would prompt for it on the terminal)."""


def _no_passphrase() -> bytes:
    raise _EncryptedKeyError


def check_tls(settings: FakeLucySettings) -> None:
    """Load the certificate and key once before serving, so that a wrong file is one line at start
    (``ValueError``), not a traceback from inside uvicorn."""
    if settings.tls_certfile is None or settings.tls_keyfile is None:
        return
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
            settings.tls_certfile, settings.tls_keyfile, password=_no_passphrase
        )
    except _EncryptedKeyError:
        reason = "the key is encrypted: give its unencrypted form (each worker would ask for a passphrase)"
    except ssl.SSLError as exc:  # not PEM, or a key that does not match the certificate
        reason = str(exc.reason or exc)
    except OSError as exc:  # missing or unreadable
        reason = str(exc.strerror or exc)
    else:
        return
    raise ValueError(
        f"cannot load the TLS certificate {settings.tls_certfile} with the key {settings.tls_keyfile}"
        f" ({reason})"
    )


def _run(settings: FakeLucySettings, fake: FakeLucy) -> None:
    # One worker: this process listens. Several: uvicorn's supervisor binds the port, which is
    # bound here first all the same (and let go just before), so that a port in use or a bad host
    # is one line before the banner, and --port 0 a port that was free a moment ago.
    bound = _listen(settings.host, settings.port)
    settings = settings.model_copy(update={"port": bound.getsockname()[1]})
    _announce(settings, fake)
    if settings.workers == 1:
        config = uvicorn.Config(
            create_app(fake, request_log=None if settings.quiet else RequestLogger()),
            host=settings.host,
            port=settings.port,
            **_UVICORN,
            ssl_certfile=settings.tls_certfile,
            ssl_keyfile=settings.tls_keyfile,
        )
        # A stop by SIGTERM is a normal end (exit 0, as with several workers), not the signal
        # raised again once uvicorn has stopped (exit 143); installed here, just before uvicorn
        # takes the signals over, so that one sent while the fake starts still ends it at once.
        with _stopping_gracefully() as stop:
            stop.server = server = uvicorn.Server(config)
            if stop.received:  # a stop asked for while the fake was starting: it ends here
                bound.close()
            else:
                server.run(sockets=[bound])
        return
    bound.close()  # the workers' supervisor binds the port it was given (free a moment ago)
    fake.close()
    if _current_stop is not None and _current_stop.received:  # stopped while it was starting
        return
    parent_only = {"admin_token", "admin_token_file", "import_file", "export_on_exit"}
    for name, value in settings.model_dump(exclude=parent_only).items():
        if value is not None:
            os.environ[f"FAKE_LUCY_{name.upper()}"] = str(value)
    # what only this process does (it reset, imported, and will export): never the workers' business
    for name in (
        "FAKE_LUCY_RESET_ON_START",
        "FAKE_LUCY_IMPORT",
        "FAKE_LUCY_IMPORT_FILE",
        "FAKE_LUCY_EXPORT_ON_EXIT",
    ):
        os.environ.pop(name, None)
    admin = settings.resolved_admin_token()
    if admin is not None:
        os.environ["FAKE_LUCY_ADMIN_TOKEN"] = admin
    os.environ[SUPERVISOR_VARIABLE] = str(os.getpid())  # the workers end with this process
    try:
        _run_workers(settings)
    finally:  # the workers have ended (uvicorn joined them) without closing the database
        fold_wal(settings.database)


def _run_workers(settings: FakeLucySettings) -> None:
    uvicorn.run(
        "fake_lucy.app:create_app_from_environment",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        **_UVICORN,
        ssl_certfile=settings.tls_certfile,
        ssl_keyfile=settings.tls_keyfile,
        # The supervisor pings each worker every half second and replaces one that has not
        # answered within this many seconds, dropping its connections: on a busy CI machine a
        # worker is slow, not hung (uvicorn's default is 5 s).
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_SECONDS,
    )


def _setting_problem(location: tuple[int | str, ...], message: str) -> str:
    """``--option (FAKE_LUCY_OPTION): what is wrong``, named as the user sets it; a rule of several
    settings (both TLS files) has no one setting, and a rule's own sentence loses pydantic's
    ``Value error,`` prefix."""
    message = message.removeprefix("Value error, ")
    if not location:
        return message
    field = str(location[0])
    name = "import" if field == "import_file" else field  # --import is FAKE_LUCY_IMPORT
    return f"--{name.replace('_', '-')} ({ENV_PREFIX}{name.upper()}): {message}"


def _check_seed(settings: FakeLucySettings) -> None:
    """A seed file that cannot be read is a configuration error, named so, before anything starts."""
    if settings.seed is None:
        return
    try:
        settings.seed.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read the seed {settings.seed} ({exc.strerror or exc})") from None


def run(args: argparse.Namespace) -> int:
    """``fake-lucy serve`` with the parsed command line; returns the exit code."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:  # started with it closed (``>&-``): what goes there goes nowhere
            setattr(sys, name, Path(os.devnull).open("w", encoding="utf-8"))  # noqa: SIM115 - for good
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    overrides = {k: v for k, v in vars(args).items() if k != "command"}
    try:
        settings = load_settings(**overrides)
        settings.resolved_admin_token()
        check_tls(settings)
        _check_seed(settings)
        if settings.export_on_exit is not None:  # found out now, not when the state is to be kept
            check_writable(settings.export_on_exit)
    except ValidationError as exc:  # one line per setting, never pydantic's multi-line dump
        problems = "; ".join(_setting_problem(error["loc"], error["msg"]) for error in exc.errors())
        print(f"fake-lucy: invalid configuration: {one_line(problems)}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        print(f"fake-lucy: invalid configuration: {one_line(str(exc))}", file=sys.stderr)
        return 2
    try:
        serve(settings)
    except SeedMismatchError as exc:  # a usage error like a bad setting: exit 2
        print(f"fake-lucy: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        print(f"fake-lucy: {one_line(str(exc))}", file=sys.stderr)
        return 1
    return 0
