"""The ``Transport`` interface, the built-in HTTP transport on httpx, and the one translation of
network failures into SDK errors.

A transport sends one prepared request and returns status, headers and body; it never retries and never
interprets the answer (the client's retry policy wraps whichever transport is used). When no connection
could be made it raises ``ConnectionFailedError`` (nothing was sent); when no complete response arrives
(timeout, dropped connection) it raises ``ResponseLostError``: the outcome is unknown.
``map_transport_errors`` makes that translation, for the built-in transport and for any custom one.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable
from urllib.parse import urlsplit

import anyio
import httpx

from lucy_memory._closing import AsyncClosing
from lucy_memory._contract import API_BASE_PATH, is_loopback
from lucy_memory.errors import (
    ClientClosedError,
    ConfigurationError,
    ConnectionFailedError,
    InsecureTransportError,
    ResponseLostError,
)
from lucy_memory.retry import DEFAULT_MAX_RETRIES, MAX_RETRIES_LIMIT

__all__ = [
    "API_PREFIX",
    "LucyHttpTransport",
    "Transport",
    "TransportRequest",
    "TransportResponse",
    "create_lucy_http_transport",
    "map_transport_errors",
]

API_PREFIX = API_BASE_PATH


@dataclass(frozen=True, slots=True)
class TransportRequest:
    """One prepared request. ``path`` is relative to the v1 prefix (``/recall``); ``headers`` hold the
    bearer token and are therefore left out of ``repr``."""

    method: str
    path: str
    headers: Mapping[str, str] = field(repr=False)
    body: bytes | None
    operation: str
    idempotency_key: str | None
    attempt: int


@dataclass(frozen=True, slots=True)
class TransportResponse:
    """A complete response; header names are lower-case."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


@runtime_checkable
class Transport(Protocol):
    """Sends one request. Raises ``ConnectionFailedError`` when no connection could be made and
    ``ResponseLostError`` when no complete response arrived (``map_transport_errors`` does both)."""

    async def send(self, request: TransportRequest) -> TransportResponse: ...


# No connection was made, so nothing was sent: httpx's connect failures, or the OS refusing outright.
_NOT_CONNECTED = (httpx.ConnectError, httpx.ConnectTimeout, ConnectionRefusedError)
# Any other failure on the way: the request may have arrived and executed. httpx.RequestError covers
# timeouts, dropped connections and undecodable bodies; OSError what a custom transport lets through
# (TimeoutError, ConnectionResetError, …).
_LOST = (httpx.RequestError, OSError)


def _lost(request: TransportRequest, exc: BaseException) -> ResponseLostError:
    return ResponseLostError.for_request(
        operation=request.operation,
        idempotency_key=request.idempotency_key,
        attempts=request.attempt + 1,
        cause=type(exc).__name__,
    )


@contextlib.contextmanager
def map_transport_errors(request: TransportRequest) -> Iterator[None]:
    """The one place where a failed exchange becomes an SDK error (as httpx's
    ``map_httpcore_exceptions`` turns httpcore's errors into its own), each ``raise … from`` the cause:

    - no connection on a call's first attempt: ``ConnectionFailedError``, nothing was sent;
    - no connection on a retry: ``ResponseLostError``, since an earlier attempt reached the service;
    - any other network failure: ``ResponseLostError``, the outcome is unknown;
    - a ``ResponseLostError`` a custom transport raised without the propose's idempotency key: the
      same error with the key, so that repeating with it stays possible.

    Anything else (a bug in a custom transport) passes through unchanged. The built-in transport and
    the client both use it, so a custom transport that lets a network error through is covered too.
    """
    try:
        yield
    except ConnectionFailedError as exc:
        if request.attempt == 0:
            raise
        raise _lost(request, exc) from exc
    except ResponseLostError as exc:
        if exc.idempotency_key is not None or request.idempotency_key is None:
            raise
        raise _lost(request, exc) from exc
    except _NOT_CONNECTED as exc:
        if request.attempt > 0:
            raise _lost(request, exc) from exc
        raise ConnectionFailedError.for_request(
            operation=request.operation,
            idempotency_key=request.idempotency_key,
            attempts=1,
            cause=_connect_cause(exc),
        ) from exc
    except _LOST as exc:
        raise _lost(request, exc) from exc


def _connect_cause(exc: BaseException) -> str:
    """The failure's class, and what to do when it is the one a cause can be named for: a
    certificate this process does not trust (a private CA's, or a self-signed one)."""
    if "CERTIFICATE_VERIFY_FAILED" in str(exc):
        return (
            f"{type(exc).__name__}: the service's TLS certificate is not trusted; SSL_CERT_FILE names"
            " the CA certificate that signed it"
        )
    return type(exc).__name__


# A host name: dot-separated labels of ASCII letters, digits, hyphens and underscores (container
# and service names use them; IDNs come as punycode), or an IP address (``_is_ip``).
_HOST_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?"
_HOST_NAME = re.compile(rf"{_HOST_LABEL}(?:\.{_HOST_LABEL})*\.?")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _check_base_url(base_url: str, *, allow_insecure_loopback: bool) -> str:
    if not isinstance(base_url, str) or not base_url:
        raise ConfigurationError("base_url must be a non-empty string such as https://lucy.example")
    unreadable = ConfigurationError("base_url is not a valid URL: its host or port cannot be read")
    try:
        parts = urlsplit(base_url)
        port = parts.port  # raises for a port that is not a number from 0 to 65535
    except ValueError:
        raise unreadable from None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http") or not parts.hostname:
        raise ConfigurationError("base_url must be an https:// origin")
    if port == 0 or not (_HOST_NAME.fullmatch(parts.hostname) or _is_ip(parts.hostname)):
        raise unreadable
    if parts.username is not None or parts.password is not None:
        raise ConfigurationError("base_url must not contain credentials; pass the token to the client")
    if parts.query or parts.fragment or parts.path not in ("", "/"):
        raise ConfigurationError(
            "base_url must be the deployment's origin (scheme, host, port) without a path; "
            f"the SDK appends {API_PREFIX}"
        )
    if scheme == "http":
        if not allow_insecure_loopback:
            raise InsecureTransportError(
                "cleartext http:// is refused; use https://, or allow_insecure_loopback=True for a "
                "loopback development server"
            )
        if not is_loopback(parts.hostname):
            raise InsecureTransportError(
                "cleartext http:// is allowed only to a loopback host (localhost, 127.0.0.0/8, ::1)"
            )
    origin = f"{scheme}://{parts.netloc}"
    try:
        httpx.URL(origin + API_PREFIX)
    except httpx.InvalidURL:
        raise unreadable from None
    return origin


def _check_seconds(name: str, value: float) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigurationError(f"{name} must be a positive number of seconds")
    return float(value)


class LucyHttpTransport(AsyncClosing):
    """The built-in transport: httpx, one connection pool, no retries of its own.

    ``max_retries`` is the retry budget the client applies to propose when it uses this transport.
    An attempt as a whole takes at most ``connect_timeout + timeout``: connecting at most
    ``connect_timeout`` (past it: ``ConnectionFailedError``, nothing was sent), the rest at most
    ``timeout`` more (httpx's ``timeout`` bounds each read alone, so a server that sends a byte now
    and then would hold a call for ever). Its connections belong to the event loop it first sends in.
    """

    def __init__(
        self,
        *,
        origin: str,
        timeout: float,
        connect_timeout: float,
        max_retries: int,
        http_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.origin = origin
        self.max_retries = max_retries
        self.attempt_limit = connect_timeout + timeout
        self._loop: object | None = None  # the asyncio loop its connections belong to
        if http_transport is None and is_loopback(urlsplit(origin).hostname or ""):
            # this machine: never through a proxy from the environment (HTTP_PROXY, ALL_PROXY),
            # which would see the token of a cleartext request and cannot reach 127.0.0.1 anyway;
            # a network layer of its own keeps the environment's certificate settings
            http_transport = httpx.AsyncHTTPTransport()
        self._http = httpx.AsyncClient(
            base_url=origin + API_PREFIX,
            transport=http_transport,
            timeout=httpx.Timeout(timeout, connect=connect_timeout),
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return f"LucyHttpTransport(origin={self.origin!r}, max_retries={self.max_retries!r})"

    async def send(self, request: TransportRequest) -> TransportResponse:
        self._check_usable(request)
        with map_transport_errors(request):
            with anyio.fail_after(self.attempt_limit):  # TimeoutError: a lost response (an OSError)
                response = await self._http.request(
                    request.method, request.path, content=request.body, headers=dict(request.headers)
                )
        headers = {name.lower(): value for name, value in response.headers.items()}
        return TransportResponse(status=response.status_code, headers=headers, body=response.content)

    def _check_usable(self, request: TransportRequest) -> None:
        """Before anything is sent: a closed transport (closed itself, or by a client that shared
        it) is ``ClientClosedError``, and one used from another event loop than its first (each
        ``asyncio.run`` makes a new one) ``ConfigurationError``: httpx would send the request on a
        new connection and fail afterwards, on the old loop's, with the call done and charged."""
        earlier = (
            ""
            if request.attempt == 0 or request.idempotency_key is None
            else f"; if an earlier attempt executed, proposing again with idempotency_key"
            f" {request.idempotency_key} replays its answer without a second charge"
        )
        if self._http.is_closed:
            raise ClientClosedError(
                f"the transport is closed (by its aclose, or by a client that shared it); this attempt"
                f" was not sent{earlier}",
                operation=request.operation,
                idempotency_key=request.idempotency_key,
                attempts=request.attempt,
            )
        loop = _running_asyncio_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise ConfigurationError(
                "this client's connections belong to the event loop it first ran in, and this call runs"
                " in another (each asyncio.run makes a new one): make the client inside the asyncio.run"
                " that uses it, or use SyncAgentMemoryClient (each client with a transport of its own);"
                f" this attempt was not sent{earlier}",
                operation=request.operation,
                idempotency_key=request.idempotency_key,
                attempts=request.attempt,
            )

    async def aclose(self) -> None:
        await self._http.aclose()


def _running_asyncio_loop() -> object | None:
    """The running asyncio loop; None under another event loop library (trio), whose runs httpx
    does not share connections across either."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def create_lucy_http_transport(
    *,
    base_url: str,
    allow_insecure_loopback: bool = False,
    timeout: float = 30.0,
    connect_timeout: float = 5.0,
    max_retries: int = DEFAULT_MAX_RETRIES,
    http_transport: httpx.AsyncBaseTransport | None = None,
) -> LucyHttpTransport:
    """The HTTP transport for a Lucy deployment's origin. Checks every argument now: a refused URL raises
    ``InsecureTransportError`` or ``ConfigurationError`` here, not on first use.

    ``http_transport`` replaces httpx's network layer (e.g. an in-process test transport); the Lucy
    request and response handling stays the same.
    """
    if not isinstance(allow_insecure_loopback, bool):
        raise ConfigurationError(
            f"allow_insecure_loopback must be True or False, not a {type(allow_insecure_loopback).__name__}"
        )
    origin = _check_base_url(base_url, allow_insecure_loopback=allow_insecure_loopback)
    if (
        isinstance(max_retries, bool)
        or not isinstance(max_retries, int)
        or not 0 <= max_retries <= MAX_RETRIES_LIMIT
    ):
        raise ConfigurationError(f"max_retries must be an integer from 0 to {MAX_RETRIES_LIMIT}")
    return LucyHttpTransport(
        origin=origin,
        timeout=_check_seconds("timeout", timeout),
        connect_timeout=_check_seconds("connect_timeout", connect_timeout),
        max_retries=max_retries,
        http_transport=http_transport,
    )
