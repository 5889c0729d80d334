"""Builders shared by the tests."""

from __future__ import annotations

import contextlib
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx

V1 = "/api/agent-memory/v1"
PROJECT = {"kind": "project", "id": "project_example"}
WORKSPACE = {"kind": "workspace", "id": "ws_dev"}


def proposal_body(
    content: str = "We use PostgreSQL 16 for the main database.", **fields: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "decision", "content": content, "scope": PROJECT}
    body.update(fields)
    return body


async def propose(
    client: httpx.AsyncClient,
    body: dict[str, Any] | None = None,
    *,
    key: str | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    return await client.post(
        V1 + "/proposals",
        json=body if body is not None else proposal_body(),
        headers={"Idempotency-Key": key or uuid.uuid4().hex, **(headers or {})},
    )


async def recall(client: httpx.AsyncClient, query: str, **fields: Any) -> httpx.Response:
    return await client.post(V1 + "/recall", json={"query": query, **fields})


async def status(client: httpx.AsyncClient, proposal_id: str) -> httpx.Response:
    return await client.get(f"{V1}/proposals/{proposal_id}")


async def approved_memory(
    client: httpx.AsyncClient, admin: Any, content: str = "We use PostgreSQL 16.", **fields: Any
) -> dict[str, Any]:
    """Propose and approve; returns the proposal after approval."""
    response = await propose(client, proposal_body(content, **fields))
    assert response.status_code == 201, response.text
    proposal: dict[str, Any] = await admin.approve(response.json()["proposal"]["id"])
    return proposal


@contextlib.contextmanager
def proxy_trap() -> Iterator[tuple[str, list[bytes]]]:
    """A proxy's address that answers nothing: every connection made to it is closed at once, and
    what arrived first is kept in the list (for ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY``)."""
    arrived: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(1)
                try:
                    arrived.append(connection.recv(65536))
                except OSError:
                    arrived.append(b"")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", arrived
    finally:
        done.set()
        thread.join(timeout=5)
        listener.close()
