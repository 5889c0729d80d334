"""The fake in three shapes behind one API: in process, a uvicorn thread, a ``fake-lucy`` process."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from fake_lucy.addresses import loopback_url
from fake_lucy.app import create_app
from fake_lucy.domain.defaults import DEFAULT_ADMIN_TOKEN, DEV_TOKEN
from fake_lucy.domain.principals import authenticate
from fake_lucy.runtime import FakeLucy
from fake_lucy.serve import PROTOCOL
from fake_lucy.settings import FakeLucySettings
from fake_lucy.testing.admin import FakeAdmin
from fake_lucy.testing.sync_admin import SyncFakeAdmin
from fake_lucy.testing.tls import shared_tls_context
from fake_lucy.testing.transport import InProcessTransport

__all__ = ["STARTUP_LIMIT", "InProcessFake", "LiveServer", "ServeProcess", "poll_until"]

# How long a server that is alive and still starting is waited for. Generous: on a busy 2-core
# machine a process that imports the app can take tens of seconds; one that dies fails at once.
STARTUP_LIMIT = 120.0


class _FixtureSettings(FakeLucySettings):
    """The settings of a fake a fixture makes (``InProcessFake``, ``LiveServer``): the built-in
    defaults and what the fixture passes. The ``FAKE_LUCY_*`` environment configures a served fake
    (a CI job may set its admin token, host or seed for ``pytest --lucy-url``); it must not change
    the fixtures' own fakes, whose tokens the fixtures know."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def _settings(database: Path | str, **options: Any) -> FakeLucySettings:
    return _FixtureSettings(database=str(database), **options)


def poll_until(ready: Callable[[], bool], failure: str, timeout: float = STARTUP_LIMIT) -> None:
    """Poll ``ready()`` until it is true, at most ``timeout`` seconds; then ``RuntimeError`` with
    ``failure`` and the time waited. For another process's socket or file, which give nothing to
    wait on: polled, less often as it goes (5 ms, doubling up to 100 ms)."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while not ready():
        if time.monotonic() >= deadline:
            raise RuntimeError(f"{failure} after {timeout:g} s")
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


class _Shape:
    base_url: str
    admin_token: str = DEFAULT_ADMIN_TOKEN
    dev_token: str = DEV_TOKEN
    # the dev token's credential, as a shared tenant's (``SharedTenant``) names its own; None when
    # the fake's seed has no credential for the dev token
    tenant: str | None = None
    account: str | None = None
    credential_id: str | None = None
    user: str | None = None

    def _name_the_dev_credential(self, fake: FakeLucy) -> None:
        """Read once, before anything is served: the seed makes the same ids at every reset."""
        with fake.db.read() as conn:
            principal = authenticate(conn, self.dev_token)
        if principal is not None:
            self.tenant, self.account = principal.tenant_id, principal.account_id
            self.credential_id, self.user = principal.credential_id, principal.user_id

    def _transport(self) -> httpx.AsyncBaseTransport | None:
        return None

    def client(self, token: str | None = DEV_TOKEN, **kwargs: Any) -> httpx.AsyncClient:
        """An ``httpx.AsyncClient`` on the fake's origin, with ``token`` as bearer (if any)."""
        headers = dict(kwargs.pop("headers", {}))
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        kwargs.setdefault("verify", shared_tls_context())
        kwargs.setdefault("trust_env", not loopback_url(self.base_url))  # no HTTP_PROXY to 127.0.0.1
        return httpx.AsyncClient(
            base_url=self.base_url, transport=self._transport(), headers=headers, **kwargs
        )

    def admin_client(self) -> httpx.AsyncClient:
        return self.client(self.admin_token)


class InProcessFake(_Shape):
    """The ASGI app called in this process (no socket), on a real SQLite file."""

    def __init__(self, database: Path | str, **options: Any) -> None:
        self.fake = FakeLucy(_settings(database, **options))
        self._name_the_dev_credential(self.fake)
        self.app = create_app(self.fake)
        self.base_url = "http://127.0.0.1:8787"
        self.transport = InProcessTransport(self.app)
        self._admin_http = self.admin_client()
        self.admin = FakeAdmin(self._admin_http)

    def _transport(self) -> httpx.AsyncBaseTransport:
        return self.transport

    def reset(self) -> float:
        """Back to the fresh seeded state (directly, no HTTP); returns milliseconds."""
        return self.fake.reset()

    async def aclose(self) -> None:
        await self._admin_http.aclose()
        self.fake.close()

    @classmethod
    @contextlib.asynccontextmanager
    async def start(cls, directory: Path, **options: Any) -> AsyncIterator[InProcessFake]:
        fake = cls(directory / "fake-lucy.sqlite3", **options)
        try:
            yield fake
        finally:
            await fake.aclose()


class LiveServer(_Shape):
    """A real uvicorn server on 127.0.0.1, port 0, in a background thread of this process."""

    def __init__(self, database: Path | str, **options: Any) -> None:
        self.fake = FakeLucy(_settings(database, **options))
        self._name_the_dev_credential(self.fake)
        config = uvicorn.Config(create_app(self.fake), http=PROTOCOL, lifespan="off", log_level="warning")
        self.server = uvicorn.Server(config)
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.bind(("127.0.0.1", 0))
        self.port: int = self.socket.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._settled = threading.Event()  # set once the server is serving, or has given up
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        server = self.server
        settled = self._settled

        async def startup_then_signal(sockets: list[socket.socket] | None = None) -> None:
            await original_startup(sockets=sockets)
            settled.set()

        original_startup = server.startup
        server.startup = startup_then_signal  # type: ignore[method-assign]  # uvicorn has no started event
        try:
            server.run(sockets=[self.socket])
        finally:
            settled.set()

    def reset(self) -> float:
        response = httpx.post(
            self.base_url + "/_fake/reset",
            headers={"Authorization": f"Bearer {self.admin_token}"},
            verify=shared_tls_context(),
            trust_env=False,  # its own server, on this machine: never through HTTP_PROXY
        )
        response.raise_for_status()
        return float(response.json()["took_ms"])

    @property
    def admin(self) -> FakeAdmin:
        """The control API helper (a short-lived connection per call: safe in any event loop)."""
        return FakeAdmin(client_factory=self.admin_client)

    @property
    def sync_admin(self) -> SyncFakeAdmin:
        """The same helper for synchronous tests: every ``admin`` method, blocking."""
        return SyncFakeAdmin(self.base_url, self.admin_token)

    def _run(self) -> None:
        self.thread.start()
        # Settled as soon as the server serves or its thread ends (a failed start fails at once).
        if not self._settled.wait(timeout=STARTUP_LIMIT) or not self.server.started:
            raise RuntimeError("the fake's uvicorn server did not start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.socket.close()
        self.fake.close()

    @classmethod
    @contextlib.contextmanager
    def start(cls, directory: Path, **options: Any) -> Iterator[LiveServer]:
        server = cls(directory / "fake-lucy-live.sqlite3", **options)
        server._run()
        try:
            yield server
        finally:
            server.stop()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _admin_token_given(args: list[str], environment: Mapping[str, str]) -> str | None:
    """The admin token ``fake-lucy serve`` takes from these arguments and environment (the token
    file first, as it does), so that ``ServeProcess.admin`` holds the one the fake accepts."""
    for n, arg in enumerate(args):
        name, _, value = arg.partition("=")
        if name == "--admin-token-file":
            path = value or (args[n + 1] if n + 1 < len(args) else "")
            return Path(path).read_text(encoding="utf-8").strip() or None
    if environment.get("FAKE_LUCY_ADMIN_TOKEN_FILE"):
        return Path(environment["FAKE_LUCY_ADMIN_TOKEN_FILE"]).read_text(encoding="utf-8").strip() or None
    return environment.get("FAKE_LUCY_ADMIN_TOKEN", "").strip() or None


class ServeProcess(_Shape):
    """``fake-lucy serve`` as a separate process (e.g. ``--workers 2``), as a user runs it.

    Configured by ``args`` and ``env`` alone: as for the in-process fixtures (``_FixtureSettings``),
    a ``FAKE_LUCY_*`` variable of this process's environment (a CI job's admin token, a container's
    ``FAKE_LUCY_HOST=0.0.0.0``) is not passed on, so the fake has the tokens this object knows."""

    def __init__(self, args: list[str], env: Mapping[str, str] | None = None) -> None:
        self.port = free_port()
        inherited = {name: value for name, value in os.environ.items() if not name.startswith("FAKE_LUCY_")}
        # quiet unless asked: nobody reads the server log's lines from the pipe while it runs
        environment = {**inherited, "FAKE_LUCY_QUIET": "true", **(env or {})}
        self.admin_token = _admin_token_given(args, environment) or DEFAULT_ADMIN_TOKEN
        tls = any(arg.split("=", 1)[0] == "--tls-certfile" for arg in args) or bool(
            environment.get("FAKE_LUCY_TLS_CERTFILE")
        )
        self.base_url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "fake_lucy", "serve", "--port", str(self.port), *args],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def wait_until(self, ready: Callable[[], bool], what: str, timeout: float = STARTUP_LIMIT) -> None:
        """Poll ``ready()`` as long as the process lives, at most ``timeout`` seconds.

        A busy machine can take many seconds to start ``--workers 2``, so there is no short fixed
        limit; a process that exits fails at once, with its stderr. Another process gives nothing to
        wait on but its socket, so this polls, less often as it goes.
        """

        def alive_and_ready() -> bool:
            if self.process.poll() is not None:
                _, err = self.process.communicate()
                raise RuntimeError(f"fake-lucy serve exited with {self.process.returncode}: {err.strip()}")
            return ready()

        poll_until(alive_and_ready, f"fake-lucy serve is running but not {what}", timeout)

    def healthy(self) -> bool:
        """Whether ``/healthz`` answers 200 now. A certificate this process does not trust is a
        ``RuntimeError`` at once (waiting would not change it): ``SSL_CERT_FILE`` in this process's
        environment names the CA, not one passed to the server in ``env``."""
        try:
            url = self.base_url + "/healthz"
            return httpx.get(url, timeout=5, verify=shared_tls_context(), trust_env=False).status_code == 200
        except httpx.ConnectError as exc:
            if "CERTIFICATE_VERIFY_FAILED" in str(exc):
                raise RuntimeError(
                    f"fake-lucy serve answers with a certificate not trusted here: {exc}"
                ) from None
            return False
        except httpx.TransportError:
            return False

    def wait_ready(self, timeout: float = STARTUP_LIMIT) -> None:
        """Until ``/healthz`` answers (see ``wait_until``)."""
        self.wait_until(self.healthy, "ready", timeout)

    def stop(self) -> tuple[str, str]:
        self.process.terminate()
        try:
            out, err = self.process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate()
        return out, err

    @classmethod
    @contextlib.contextmanager
    def start(cls, args: list[str], env: Mapping[str, str] | None = None) -> Iterator[ServeProcess]:
        server = cls(args, env)
        try:
            server.wait_ready()
            yield server
        finally:
            server.stop()
