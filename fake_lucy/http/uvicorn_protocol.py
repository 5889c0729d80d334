"""uvicorn HTTP protocols that offer the ``fake_lucy.abort`` ASGI extension (see ``abort.py``) and
``fake_lucy.shutdown``: an ``asyncio.Event`` set when the server shuts down, so that a response that
never ends by itself (the event stream) ends then, and uvicorn's graceful shutdown does not wait
for it forever."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from fake_lucy.http.abort import ABORT_EXTENSION, ABORT_MESSAGE, SHUTDOWN_EXTENSION

__all__ = ["AbortingH11Protocol"]


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


class AbortingH11Protocol(H11Protocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.app = _AbortingApp(self.app, self)
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
