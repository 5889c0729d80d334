"""The ASGI application: v1 under ``/api/agent-memory/v1``, control under ``/_fake``."""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import signal
import sqlite3
import sys
import time
from typing import Any

from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fake_lucy import __version__
from fake_lucy.addresses import loopback_host
from fake_lucy.domain.errors import DomainError
from fake_lucy.domain.ids import random_request_id
from fake_lucy.http.console import PREFIX as CONSOLE
from fake_lucy.http.console import console_root, console_router
from fake_lucy.http.control import control_router
from fake_lucy.http.events import EventStream
from fake_lucy.http.openapi import control_openapi, v1_openapi
from fake_lucy.http.pipeline import RequestLog, V1Pipeline
from fake_lucy.http.problems import (
    JSON,
    PROBLEM,
    BytesResponse,
    allowed_methods,
    json_bytes,
    problem_body,
    problem_response,
)
from fake_lucy.runtime import FakeLucy
from fake_lucy.server_log import RequestLogger
from fake_lucy.settings import FakeLucySettings, load_settings
from fake_lucy.store.connection import storage_failure
from fake_lucy.text import one_line
from lucy_memory._contract import load_contract

# The methods HTTP defines (RFC 9110 9.3, and PATCH): an error names one of these, and only these.
_HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"})

__all__ = ["create_app", "create_app_from_environment"]

log = logging.getLogger("fake_lucy")


class VersionHeader:
    """Adds ``Fake-Lucy-Version`` to every response (a plain ASGI middleware: no body copies)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.header = (b"fake-lucy-version", __version__.encode("ascii"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_version(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), self.header]
            await send(message)

        await self.app(scope, receive, send_with_version)


def _internal_error(method: str, path: str, exc: BaseException) -> Response:
    """An unexpected error: a database file the fake cannot write (a full disk, a read-only file)
    is one line in the log and 503 ``unavailable`` (SQLite rolled the transaction back: nothing was
    done, and the same request succeeds once the file can be written); anything else is a bug in
    the fake, logged with its traceback and answered 500 ``internal``."""
    reason = storage_failure(exc)
    if reason is not None:
        log.error("cannot write the database while serving %s %s: %s", method, path, reason)
        detail = f"the fake cannot write its database ({reason}); nothing was done"
        return problem_response(DomainError("unavailable", detail), random_request_id())
    log.exception("unexpected error while serving %s %s", method, path)
    return problem_response(
        DomainError("internal", "the fake hit an unexpected error; see its log"), random_request_id()
    )


class V1Routes:
    """The three v1 operations straight to the pipeline, outside FastAPI's middleware stack.

    Only an exact match (``POST …/recall``, ``POST …/proposals``, ``GET …/proposals/{id}`` with
    ``{id}`` as the router's ``[^/]+``) is taken here, with the same handler the routes below call;
    anything else (other methods → 405, unknown paths → 404, the control API) goes on to FastAPI.
    Taking the hot path out of the stack saves its per-request layers; what they did for these
    routes is done here: the version header, and a 500 problem (logged) for an unexpected error.
    """

    def __init__(self, app: ASGIApp, pipeline: V1Pipeline, base: str) -> None:
        self.app = app
        self.pipeline = pipeline
        self.recall = f"{base}/recall"
        self.proposals = f"{base}/proposals"
        self.status_prefix = f"{base}/proposals/"
        self.version = (b"fake-lucy-version", __version__.encode("ascii"))
        self.base = base

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            method, path = scope["method"], scope["path"]
            operation: str | None = None
            proposal_id: str | None = None
            if method == "POST" and path == self.recall:
                operation = "recall"
            elif method == "POST" and path == self.proposals:
                operation = "propose"
            elif method == "GET" and path.startswith(self.status_prefix):
                proposal_id = path[len(self.status_prefix) :]
                if proposal_id and "/" not in proposal_id:
                    operation = "proposal_status"
            if operation is not None:
                try:
                    response = await self.pipeline.handle(Request(scope, receive), operation, proposal_id)
                # Broad on purpose: this is the last handler of the hot path (outside FastAPI's), and a
                # bug can raise anything; the client still gets the contract's problem (503 for a
                # storage failure, else 500 internal, logged), never a dropped connection.
                except Exception as exc:
                    response = _internal_error(method, path, exc)
                response.raw_headers.append(self.version)
                await response(scope, receive, send)
                return
            if self.pipeline.log is not None and path.startswith(self.base):
                await self._logged(scope, receive, send)  # a v1 path no operation has: 404, 405
                return
        await self.app(scope, receive, send)

    async def _logged(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer through the app, and write the server log's line: ``GET /unknown  404``."""
        started = time.perf_counter()
        status: list[int] = []

        async def send_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        await self.app(scope, receive, send_status)
        assert self.pipeline.log is not None
        shown = one_line(f"{scope['method']} {scope['path'][len(self.base) :] or '/'}")  # never two lines
        self.pipeline.log(shown, None, status[0] if status else None, (time.perf_counter() - started) * 1000)


_LOOPBACK_HOSTS: dict[str, Any] = load_contract("fake-control")["loopback_hosts"]
_MISDIRECTED = (
    "this fake listens on a loopback address and answers only requests addressed to this machine"
    " (Host localhost, 127.0.0.1 or a name without a dot); bind another address to serve other names"
)


def _misdirected() -> Response:
    request_id = random_request_id()
    body = problem_body(_LOOPBACK_HOSTS["code"], _MISDIRECTED, request_id, entry=_LOOPBACK_HOSTS)
    headers = {"Lucy-Request-Id": request_id, "Fake-Lucy-Version": __version__}
    return BytesResponse(json_bytes(body), status_code=body["status"], headers=headers, media_type=PROBLEM)


class LoopbackHosts:
    """On a loopback bind, a request whose ``Host`` names another host is 421: a page of another
    site whose name was made to point at 127.0.0.1 (DNS rebinding) must not reach a fake whose
    built-in tokens are public. A request without ``Host`` (HTTP/1.0) is let through."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for name, value in scope["headers"]:
                if name == b"host":
                    if not loopback_host(value):
                        await _misdirected()(scope, receive, send)
                        return
                    break
        await self.app(scope, receive, send)


class _FakeLucyApp(FastAPI):
    """FastAPI with the v1 routes in front of its middleware stack (see ``V1Routes``), and on a
    loopback bind the ``Host`` check in front of everything (``LoopbackHosts``)."""

    v1_routes: V1Routes | None = None
    loopback: bool = False

    def build_middleware_stack(self) -> ASGIApp:
        stack = super().build_middleware_stack()
        if self.v1_routes is not None:
            self.v1_routes.app = stack
            stack = self.v1_routes
        return LoopbackHosts(stack) if self.loopback else stack


@functools.cache
def _openapi_documents() -> tuple[bytes, bytes]:
    """Both OpenAPI documents, serialized once per process: they are made from the packaged contract
    alone (a test process makes many apps; each spent ~15 ms building them again)."""
    return json_bytes(v1_openapi()), json_bytes(control_openapi())


def create_app(
    fake: FakeLucy, *, request_log: RequestLog | None = None, event_stream: EventStream | None = None
) -> FastAPI:
    """The app; ``request_log`` is the server log's hook (one call per v1 request), ``event_stream``
    the streams' polling and keep-alive (the defaults unless a test shortens them)."""
    base = fake.contract["base_path"]
    app = _FakeLucyApp(
        title="Fake Lucy Agent Memory",
        version=__version__,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        # A path with a trailing slash is another path: 404 not_found with a problem body (SPEC 2.1
        # step 1), never Starlette's bare 307 to the path without it.
        redirect_slashes=False,
        # FastAPI's native OpenTelemetry checks the global providers on every request (~9 µs);
        # a fake has nothing to trace.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.fake = fake
    pipeline = V1Pipeline(fake, request_log)
    stream = event_stream or EventStream(fake)
    v1_document, control_document = _openapi_documents()

    async def recall(request: Request) -> Response:
        return await pipeline.handle(request, "recall")

    async def propose(request: Request) -> Response:
        return await pipeline.handle(request, "propose")

    async def proposal_status(request: Request, proposal_id: str) -> Response:
        return await pipeline.handle(request, "proposal_status", proposal_id)

    async def healthz() -> Response:
        return Response(json_bytes({"status": "ok", "version": __version__}), media_type=JSON)

    async def openapi_v1() -> Response:
        return Response(v1_document, media_type=JSON)

    async def openapi_control() -> Response:
        return Response(control_document, media_type=JSON)

    app.add_api_route(f"{base}/recall", recall, methods=["POST"], include_in_schema=False)
    app.add_api_route(f"{base}/proposals", propose, methods=["POST"], include_in_schema=False)
    app.add_api_route(
        f"{base}/proposals/{{proposal_id}}",
        proposal_status,
        methods=["GET"],
        include_in_schema=False,
    )
    # HEAD too: a probe such as `wget --spider` or `curl -I` asks for the headers alone
    probed = ["GET", "HEAD"]
    app.add_api_route("/healthz", healthz, methods=probed, include_in_schema=False)
    app.add_api_route("/openapi.json", openapi_v1, methods=probed, include_in_schema=False)
    app.add_api_route("/_fake/openapi.json", openapi_control, methods=probed, include_in_schema=False)
    control, console = control_router(fake, stream), console_router(fake, stream)
    app.include_router(control)
    app.include_router(console)
    app.add_api_route(CONSOLE, console_root, methods=["GET"], include_in_schema=False)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # a method of HTTP's own is named; any other is the client's text, never echoed
            method = request.method if request.method in _HTTP_METHODS else "this method"
            error = DomainError(
                "method_not_allowed",
                f"this path does not answer {method}",
                headers={
                    "Allow": ", ".join(
                        allowed_methods(request.scope, [*app.router.routes, *control.routes, *console.routes])
                    )
                    or headers.get("Allow", "")
                },
            )
        else:
            error = DomainError("not_found", "no route matches this path")
        return problem_response(error, random_request_id())

    async def unexpected(request: Request, exc: Exception) -> Response:
        response = _internal_error(request.method, request.url.path, exc)
        # Starlette answers this outside every middleware, so the version header is added here.
        response.raw_headers.append((b"fake-lucy-version", __version__.encode("ascii")))
        return response

    async def database_error(request: Request, exc: Exception) -> Response:
        # Handled inside the middleware stack (a handler of Exception itself is Starlette's last
        # resort, which answers and then raises again, for the server to log a traceback too).
        return _internal_error(request.method, request.url.path, exc)

    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(sqlite3.Error, database_error)
    app.add_exception_handler(Exception, unexpected)
    app.add_middleware(VersionHeader)
    app.v1_routes = V1Routes(app, pipeline, base)
    app.loopback = fake.loopback
    return app


# The pid of the ``fake-lucy serve`` that supervises the workers (set by it for them).
SUPERVISOR_VARIABLE = "FAKE_LUCY_SUPERVISOR_PID"


def _end_with_the_supervisor() -> None:
    """A worker stops when its supervisor ends, even by ``kill -9`` (which lets it stop nothing):
    on Linux the kernel sends the worker SIGTERM when its parent dies, and a worker whose parent is
    already gone stops at once. Elsewhere, nothing (the supervisor stops its workers itself)."""
    supervisor = os.environ.pop(SUPERVISOR_VARIABLE, None)
    if supervisor is None or not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        return  # not allowed here (a sandbox): the supervisor's own stop is all there is
    if os.getppid() != int(supervisor):  # it died before the line above
        os.kill(os.getpid(), signal.SIGTERM)


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def create_app_from_environment() -> FastAPI:
    """Factory for uvicorn workers: settings from ``FAKE_LUCY_*`` (the parent initialised the DB)."""
    _end_with_the_supervisor()
    settings: FakeLucySettings = load_settings()
    return create_app(
        FakeLucy(settings, initialise=False), request_log=None if settings.quiet else RequestLogger()
    )
