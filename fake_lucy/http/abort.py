"""Closing a connection without sending a byte (the ``drop_connection`` fault).

ASGI has no abort message, and an app that raises gets a 500 from the server. So the fake offers
its own ASGI extension, ``fake_lucy.abort``: an app that finds it in ``scope["extensions"]`` sends
``{"type": "fake_lucy.abort"}`` instead of a response. ``fake-lucy serve`` runs uvicorn with a
protocol class that implements it (closing the socket), and the in-process test transport turns
it into ``httpx.RemoteProtocolError``, as httpx raises for a real dropped connection.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

__all__ = ["ABORT_EXTENSION", "ABORT_MESSAGE", "SHUTDOWN_EXTENSION", "DropConnection"]

ABORT_EXTENSION = "fake_lucy.abort"
ABORT_MESSAGE = "fake_lucy.abort"
# {"event": asyncio.Event} set when the server shuts down (see ``uvicorn_protocol``)
SHUTDOWN_EXTENSION = "fake_lucy.shutdown"


class DropConnection(Response):
    """A "response" that sends nothing and asks the server to close the connection."""

    def __init__(self) -> None:
        super().__init__(status_code=599)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        extensions: dict[str, Any] = scope.get("extensions") or {}
        if ABORT_EXTENSION not in extensions:
            raise RuntimeError(
                "drop_connection needs a server that offers the fake_lucy.abort extension"
                " (fake-lucy serve, or fake_lucy.testing's in-process transport)"
            )
        await send({"type": ABORT_MESSAGE})
