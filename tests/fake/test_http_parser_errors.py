"""Issue 18, point 4: a request the HTTP parser refuses is answered in the problem envelope too —
400 ``malformed_request`` (431 ``request_header_fields_too_large`` for an oversized header section)
with ``Lucy-Request-Id`` and ``Fake-Lucy-Version`` — and the connection is closed."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from pathlib import Path

import h11
import httpx
import pytest

from fake_lucy import __version__
from fake_lucy.http.openapi import control_openapi, v1_openapi
from fake_lucy.testing import LiveServer
from lucy_memory._contract import load_contract, schema_validator
from tests.helpers import V1

ERRORS = load_contract("agent-memory-api")["errors"]
RECALL = f"POST {V1}/recall HTTP/1.1\r\n".encode("ascii")
AUTH = b"Authorization: Bearer lucy-dev-token\r\nContent-Type: application/json\r\n"

CASES = {
    "no Host": (b"GET /healthz HTTP/1.1\r\n\r\n", 400),
    "raw non-ASCII in the path": (b"GET /caf\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    "conflicting Content-Length": (
        RECALL + b"Host: x\r\n" + AUTH + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\n{}",
        400,
    ),
    "a bad chunk size": (
        RECALL + b"Host: x\r\n" + AUTH + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        400,
    ),
    "NUL in a header": (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Note: a\x00b\r\n\r\n", 400),
    "bare CR in a header": (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Note: a\rb\r\n\r\n", 400),
    "a 200 KiB header": (
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (200 * 1024) + b"\r\n\r\n",
        431,
    ),
    # whole in one write: h11's own limit is only on what it buffers of a head not yet complete
    "a 17 KiB header in one write": (
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (17 * 1024) + b"\r\n\r\n",
        431,
    ),
    "a recall with 40 KiB of headers in one write": (
        RECALL + b"Host: x\r\n" + AUTH + b"X-Big: " + b"a" * (40 * 1024) + b"\r\nContent-Length: 2\r\n\r\n{}",
        431,
    ),
}
HEAD_LIMIT = load_contract("agent-memory-api")["http_parser"]["max_header_bytes"]
EXAMPLE_DETAILS = json.loads((Path(__file__).parents[2] / "contracts" / "openapi-examples.json").read_text())[
    "agent-memory-api"
]["problems"]


def _exchange(port: int, request: bytes) -> tuple[h11.Response, bytes, bool]:
    """Send ``request`` (from a thread: the server may answer and close before reading it all) and read
    until the server closes. Returns the response head, its body and whether the connection closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:

        def send() -> None:
            with contextlib.suppress(OSError):  # the server closed first: what matters is its answer
                sock.sendall(request)

        sender = threading.Thread(target=send)
        sender.start()
        client = h11.Connection(h11.CLIENT)
        head: h11.Response | None = None
        body = b""
        closed = False
        while not closed:
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                data = b""
            client.receive_data(data)
            while True:
                event = client.next_event()
                if event is h11.NEED_DATA:
                    break
                if isinstance(event, h11.Response):
                    head = event
                elif isinstance(event, h11.Data):
                    body += bytes(event.data)
                elif isinstance(event, h11.ConnectionClosed):
                    closed = True
                    break
                elif isinstance(event, h11.EndOfMessage):
                    continue
        sender.join(timeout=10)
    assert head is not None, "no response before the connection closed"
    return head, body, closed


@pytest.mark.parametrize(("request_bytes", "status"), list(CASES.values()), ids=list(CASES))
def test_a_request_the_parser_refuses_is_a_problem_and_the_connection_closes(
    live: LiveServer, request_bytes: bytes, status: int
) -> None:
    head, raw, closed = _exchange(live.port, request_bytes)
    headers = {name.decode("ascii"): value.decode("ascii") for name, value in head.headers}
    assert head.status_code == status
    assert headers["content-type"] == "application/problem+json"
    assert headers["connection"] == "close"
    assert headers["fake-lucy-version"] == __version__
    body = json.loads(raw)
    assert schema_validator("problem.schema.json").errors(body) == []
    code = "request_header_fields_too_large" if status == 431 else "malformed_request"
    assert (body["code"], body["status"], body["retryable"]) == (code, status, ERRORS[code]["retryable"])
    assert body["request_id"] == headers["lucy-request-id"]
    assert body["detail"] == EXAMPLE_DETAILS[code]["detail"]  # what both OpenAPI documents show
    assert closed, "the server keeps the connection open"
    # the server goes on answering everyone else
    assert httpx.get(live.base_url + "/healthz").status_code == 200


def test_a_refused_request_is_never_journaled_or_charged(live: LiveServer) -> None:
    admin = {"Authorization": f"Bearer {live.admin_token}"}
    journal = httpx.get(live.base_url + "/_fake/requests", headers=admin).json()["items"]
    for request_bytes, _ in CASES.values():
        _exchange(live.port, request_bytes)
    assert httpx.get(live.base_url + "/_fake/requests", headers=admin).json()["items"] == journal
    assert httpx.get(live.base_url + "/_fake/ledger", headers=admin).json()["items"] == []


def test_every_operation_of_both_openapi_documents_lists_the_parser_refusals() -> None:
    for document in (v1_openapi(), control_openapi()):
        for path, methods in document["paths"].items():
            for method, operation in methods.items():
                responses = operation["responses"]
                assert "malformed_request" in responses["400"]["description"], (method, path)
                assert responses["431"]["description"] == "Error: request_header_fields_too_large"


def test_a_head_of_exactly_the_limit_is_served_and_one_byte_more_is_431(live: LiveServer) -> None:
    def head_of(size: int) -> bytes:
        start = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: "
        return start + b"a" * (size - len(start) - 4) + b"\r\n\r\n"

    assert len(head_of(HEAD_LIMIT)) == HEAD_LIMIT
    assert _exchange_one(live.port, head_of(HEAD_LIMIT)) == 200
    assert _exchange_one(live.port, head_of(HEAD_LIMIT + 1)) == 431


def _exchange_one(port: int, request: bytes) -> int:
    """The status of the answer to ``request`` sent in one write, on a connection of its own."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        client = h11.Connection(h11.CLIENT)
        while True:
            client.receive_data(sock.recv(65536))
            event = client.next_event()
            if isinstance(event, h11.Response):
                return event.status_code
