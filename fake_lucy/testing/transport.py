"""An httpx transport that calls the ASGI app in process, with the ``fake_lucy.abort`` extension."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import anyio
import httpx

from fake_lucy.http.abort import ABORT_EXTENSION, ABORT_MESSAGE

__all__ = ["InProcessTransport"]

_EVENT_STREAM = b"text/event-stream"


class InProcessTransport(httpx.AsyncBaseTransport):
    """Like ``httpx.ASGITransport``; a dropped connection raises ``httpx.RemoteProtocolError``.

    A request that accepts ``text/event-stream`` gets an event stream handed over as it streams
    (read it with ``client.stream(...)``); closing it ends the app's response, as a client
    disconnecting does.
    """

    def __init__(self, app: Any, client: tuple[str, int] = ("127.0.0.1", 50000)) -> None:
        self.app = app
        self.client = client

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "headers": [(k.lower(), v) for (k, v) in request.headers.raw],
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "server": (request.url.host, request.url.port),
            "client": self.client,
            "root_path": "",
            "extensions": {ABORT_EXTENSION: {}},
        }
        sent_body = False
        status: int | None = None
        headers: list[tuple[bytes, bytes]] = []
        parts: list[bytes] = []
        complete = anyio.Event()
        streaming = anyio.Event()  # the response is an event stream: hand it over as it comes
        chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        aborted = False

        async def receive() -> dict[str, Any]:
            nonlocal sent_body
            if sent_body:
                await complete.wait()
                return {"type": "http.disconnect"}
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: MutableMapping[str, Any]) -> None:
            nonlocal status, headers, aborted
            if message["type"] == ABORT_MESSAGE:
                aborted = True
                complete.set()
            elif message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                if any(k.lower() == b"content-type" and v.startswith(_EVENT_STREAM) for k, v in headers):
                    streaming.set()
            elif message["type"] == "http.response.body":
                if complete.is_set():  # the reader closed the stream
                    raise OSError("the client closed the stream")
                if streaming.is_set():
                    chunks.put_nowait(message.get("body", b""))
                else:
                    parts.append(message.get("body", b""))
                if not message.get("more_body", False):
                    complete.set()

        if _EVENT_STREAM in request.headers.get("accept", "").encode("latin-1"):
            # A stream may never end: run the app beside the caller and return once it started.
            app = asyncio.ensure_future(self.app(scope, receive, send))
            handed_over = asyncio.ensure_future(streaming.wait())
            try:
                await asyncio.wait((app, handed_over), return_when=asyncio.FIRST_COMPLETED)
            finally:
                handed_over.cancel()
                if not streaming.is_set():
                    app.cancel()
            if streaming.is_set() and not app.done():
                app.add_done_callback(lambda _: chunks.put_nowait(None))
                assert status is not None
                stream = _Stream(chunks, app, complete)
                return httpx.Response(status, headers=headers, stream=stream, request=request)
            app.result()  # the app's exception, if any
            while not chunks.empty():
                parts.append(chunks.get_nowait() or b"")
        else:
            await self.app(scope, receive, send)
        if aborted:
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a response.", request=request
            )
        if status is None or not complete.is_set():
            raise httpx.RemoteProtocolError("the app returned without a response", request=request)
        return httpx.Response(status, headers=headers, content=b"".join(parts), request=request)


class _Stream(httpx.AsyncByteStream):
    """A streaming response body (the event stream) read as the app sends it; closing it stops the app."""

    def __init__(
        self, chunks: asyncio.Queue[bytes | None], app: asyncio.Future[None], done: anyio.Event
    ) -> None:
        self.chunks = chunks
        self.app = app
        self.done = done

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while (chunk := await self.chunks.get()) is not None:
            yield chunk

    async def aclose(self) -> None:
        self.done.set()
        self.app.cancel()
        with contextlib.suppress(asyncio.CancelledError, OSError):
            await self.app
