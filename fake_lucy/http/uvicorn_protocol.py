"""uvicorn's h11 protocol, extended: the ``fake_lucy.abort`` ASGI extension (see ``abort.py``), and
requests its HTTP parser refuses answered in the contract's problem envelope.

uvicorn answers a request h11 cannot parse (no Host, a non-ASCII request target, conflicting
Content-Length, a bad chunk size, a NUL or bare CR in a header, a header section over h11's limit)
with a ``text/plain`` "Invalid HTTP request received." Such a request never reaches the app, so the
fake answers it here: 400 ``malformed_request``, or 431 ``request_header_fields_too_large`` when
h11 gives that hint (the receive buffer outgrew its limit), as ``application/problem+json`` with
``Lucy-Request-Id`` and ``Fake-Lucy-Version``, then closes the connection.

It also offers ``fake_lucy.shutdown``: an ``asyncio.Event`` set when the server shuts down, so that
a response that never ends by itself (the event stream) ends then, and uvicorn's graceful shutdown
does not wait for it forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

import h11
from h11._connection import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE  # what uvicorn uses when unconfigured
from uvicorn.protocols.http.h11_impl import STATUS_PHRASES, H11Protocol

from fake_lucy import __version__
from fake_lucy.domain.ids import random_request_id
from fake_lucy.http.abort import ABORT_EXTENSION, ABORT_MESSAGE, SHUTDOWN_EXTENSION
from fake_lucy.http.problems import PROBLEM, json_bytes, problem_body

__all__ = ["AbortingH11Protocol", "parser_refusal"]


class _AbortingApp:
    """Wraps the app for one connection: adds the extension, and closes the socket on abort."""

    def __init__(self, app: Any, protocol: AbortingH11Protocol) -> None:
        self.app = app
        self.protocol = protocol

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        protocol = self.protocol
        extensions = {
            **(scope.get("extensions") or {}),
            ABORT_EXTENSION: {},
            SHUTDOWN_EXTENSION: {"event": protocol.closing},
        }
        scope = {**scope, "extensions": extensions}

        async def send_or_abort(message: Any) -> None:
            if message["type"] == ABORT_MESSAGE:
                cycle = getattr(protocol, "cycle", None)
                if cycle is not None:
                    cycle.disconnected = True  # uvicorn then sends nothing for this cycle
                if protocol.transport is not None:
                    protocol.transport.close()  # FIN without a single byte of response
                return
            await send(message)

        await self.app(scope, receive, send_or_abort)


class _RememberingConnection(h11.Connection):
    """An h11 connection that keeps the last parse error (uvicorn catches it and keeps only a string),
    and that holds every request head to the size limit.

    h11's limit is on what it buffers of an event not yet complete: a request line and headers that
    arrive in one read are parsed whatever their size, and only a slow sender met the limit. So the
    head of each request is measured as it is taken from the buffer (the bytes that went, up to and
    including the blank line) and one over the limit is refused as h11 refuses it, with the 431 hint,
    before the app sees the request."""

    parse_error: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        buffered = len(self._receive_buffer)  # h11's own buffer: the only place the raw head is seen
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as error:
            self.parse_error = error
            raise
        head_bytes = buffered - len(self._receive_buffer)
        if type(event) is h11.Request and head_bytes > self._max_incomplete_event_size:
            self.parse_error = h11.RemoteProtocolError("request head too large", error_status_hint=431)
            raise self.parse_error
        return event


def parser_refusal(error: h11.RemoteProtocolError | None, max_header_bytes: int) -> tuple[int, bytes, bytes]:
    """(status, request id, problem body) for a request the parser refused; never echoes its bytes."""
    request_id = random_request_id()
    if error is not None and error.error_status_hint == 431:
        code = "request_header_fields_too_large"
        detail = f"the request line and headers exceed {max_header_bytes} bytes"
    else:
        code = "malformed_request"
        detail = "the request is not valid HTTP/1.1 (request line, headers or body framing)"
    body = problem_body(code, detail, request_id)
    return int(body["status"]), request_id.encode("ascii"), json_bytes(body)


class AbortingH11Protocol(H11Protocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.app = _AbortingApp(self.app, self)
        configured = self.config.h11_max_incomplete_event_size
        self.max_header_bytes = DEFAULT_MAX_INCOMPLETE_EVENT_SIZE if configured is None else configured
        self.conn = _RememberingConnection(h11.SERVER, self.max_header_bytes)
        self.closing = asyncio.Event()

    def shutdown(self) -> None:
        self.closing.set()
        super().shutdown()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # asyncio sets TCP_NODELAY only on sockets created with proto=IPPROTO_TCP; a socket handed
        # in by a caller (port 0 fixtures) may not be, and then Nagle + delayed ACK add ~40 ms.
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)  # type: ignore[arg-type]

    def send_400_response(self, msg: str) -> None:
        """uvicorn calls this when h11 refuses the request: answer with a problem, then close."""
        conn = self.conn
        error = conn.parse_error if isinstance(conn, _RememberingConnection) else None
        status, request_id, body = parser_refusal(error, self.max_header_bytes)
        headers = [
            (b"content-type", PROBLEM.encode("ascii")),
            (b"content-length", str(len(body)).encode("ascii")),
            (b"lucy-request-id", request_id),
            (b"fake-lucy-version", __version__.encode("ascii")),
            (b"connection", b"close"),
        ]
        try:
            events = (
                h11.Response(status_code=status, headers=headers, reason=STATUS_PHRASES[status]),
                h11.Data(data=body),
                h11.EndOfMessage(),
            )
            output = b"".join(conn.send(event) or b"" for event in events)
        except h11.LocalProtocolError:
            output = b""  # a response had already begun on this connection: closing is all that is left
        if output:
            self.transport.write(output)
        self.transport.close()
