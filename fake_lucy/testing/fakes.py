"""The fake in three shapes behind one API: in process, a uvicorn thread, a ``fake-lucy`` process."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from fake_lucy.app import create_app
from fake_lucy.cli import PROTOCOL
from fake_lucy.domain.seed import DEFAULT_ADMIN_TOKEN, DEV_TOKEN
from fake_lucy.runtime import FakeLucy
from fake_lucy.settings import FakeLucySettings
from fake_lucy.testing.admin import FakeAdmin
from fake_lucy.testing.transport import InProcessTransport

__all__ = ["InProcessFake", "LiveServer", "ServeProcess"]

API_PREFIX = "/api/agent-memory/v1"


def _settings(database: Path | str, **options: Any) -> FakeLucySettings:
    return FakeLucySettings(database=str(database), **options)


class _Shape:
    base_url: str
    admin_token: str = DEFAULT_ADMIN_TOKEN
    dev_token: str = DEV_TOKEN

    def _transport(self) -> httpx.AsyncBaseTransport | None:
        return None

    def client(self, token: str | None = DEV_TOKEN, **kwargs: Any) -> httpx.AsyncClient:
        """An ``httpx.AsyncClient`` on the fake's origin, with ``token`` as bearer (if any)."""
        headers = dict(kwargs.pop("headers", {}))
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.AsyncClient(
            base_url=self.base_url, transport=self._transport(), headers=headers, **kwargs
        )

    def admin_client(self) -> httpx.AsyncClient:
        return self.client(self.admin_token)


class InProcessFake(_Shape):
    """The ASGI app called in this process (no socket), on a real SQLite file."""

    def __init__(self, database: Path | str, **options: Any) -> None:
        self.fake = FakeLucy(_settings(database, **options))
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
        )
        response.raise_for_status()
        return float(response.json()["took_ms"])

    @property
    def admin(self) -> FakeAdmin:
        """The control API helper (a short-lived connection per call: safe in any event loop)."""
        return FakeAdmin(client_factory=self.admin_client)

    def _run(self) -> None:
        self.thread.start()
        if not self._settled.wait(timeout=10) or not self.server.started:
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


class ServeProcess(_Shape):
    """``fake-lucy serve`` as a separate process (e.g. ``--workers 2``), as a user runs it."""

    def __init__(self, args: list[str], env: Mapping[str, str] | None = None) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        # quiet unless asked: nobody reads the server log's lines from the pipe while it runs
        environment = {**os.environ, "FAKE_LUCY_QUIET": "true", **(env or {})}
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "fake_lucy", "serve", "--port", str(self.port), *args],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def wait_ready(self, timeout: float = 60) -> None:
        # Another process: nothing to wait on but its socket, so poll /healthz briefly.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                _, err = self.process.communicate()
                raise RuntimeError(f"fake-lucy serve exited with {self.process.returncode}: {err}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(self.base_url + "/healthz", timeout=1).status_code == 200:
                    return
            time.sleep(0.02)
        raise RuntimeError("fake-lucy serve did not become ready")

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
