"""An httpx transport that calls the ASGI app in process, with the ``fake_lucy.abort`` extension."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import anyio
import httpx

from fake_lucy.http.abort import ABORT_EXTENSION, ABORT_MESSAGE

__all__ = ["InProcessTransport"]


class InProcessTransport(httpx.AsyncBaseTransport):
    """Like ``httpx.ASGITransport``; a dropped connection raises ``httpx.RemoteProtocolError``."""

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
            elif message["type"] == "http.response.body":
                parts.append(message.get("body", b""))
                if not message.get("more_body", False):
                    complete.set()

        await self.app(scope, receive, send)
        if aborted:
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a response.", request=request
            )
        if status is None or not complete.is_set():
            raise httpx.RemoteProtocolError("the app returned without a response", request=request)
        return httpx.Response(status, headers=headers, content=b"".join(parts), request=request)
