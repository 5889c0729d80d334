"""Closing a connection without sending a byte (the ``drop_connection`` fault).

ASGI has no abort message, and an app that raises gets a 500 from the server. So the fake offers
its own ASGI extension, ``fake_lucy.abort``: an app that finds it in ``scope["extensions"]`` sends
``{"type": "fake_lucy.abort"}`` instead of a response. ``fake-lucy serve`` runs uvicorn with a
protocol class that implements it (closing the socket), and the in-process test transport turns
it into ``httpx.RemoteProtocolError``, as httpx raises for a real dropped connection.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

__all__ = [
    "ABORT_EXTENSION",
    "ABORT_MESSAGE",
    "SHUTDOWN_EXTENSION",
    "DropConnection",
    "NoAnswer",
    "client_gone",
]

log = logging.getLogger("fake_lucy")

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


class NoAnswer(Response):
    """A "response" for a client that already went away (``inputs.ClientGone``): it sends nothing.

    The server saw the disconnect, so an app that returns without a response is not an error to it
    (uvicorn logs nothing and writes nothing to the closed connection).
    """

    def __init__(self) -> None:
        super().__init__(status_code=499)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        return None


def client_gone(request: Request) -> NoAnswer:
    """The one debug line for a client that closed the connection mid-body, and no answer."""
    log.debug("client went away before its body was complete: %s %s", request.method, request.url.path)
    return NoAnswer()
