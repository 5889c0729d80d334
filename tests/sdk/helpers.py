"""Builders for the SDK tests: clients on the fake, a recording sleep, a recording transport wrapper."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from fake_lucy.testing import InProcessFake, LiveServer
from lucy_memory import AgentMemoryClient, TransportRequest, TransportResponse, create_lucy_http_transport
from lucy_memory._contract import canonical_bytes
from lucy_memory.transport import LucyHttpTransport

DEV_TOKEN = "lucy-dev-token"
BOTH = ("memory:read", "memory:propose")
PROJECT = {"kind": "project", "id": "project_example"}
CLIENT_NAME = "sdk-tests"


def proposal_json(content: str = "We use PostgreSQL 16 for the main database.", **fields: Any) -> str:
    body: dict[str, Any] = {"kind": "decision", "content": content, "scope": PROJECT, **fields}
    return json.dumps(body)


def canonical_sha256_of(request_json: str) -> str:
    return hashlib.sha256(canonical_bytes(json.loads(request_json))).hexdigest()


@dataclass
class RecordingSleep:
    """An injected ``sleep`` that returns at once and remembers every delay asked for."""

    delays: list[float] = field(default_factory=list)

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


class Recorder:
    """Wraps a transport: records every request it forwards, optionally rewriting requests or responses
    (a custom ``Transport`` is interchangeable with the built-in one)."""

    def __init__(
        self,
        inner: LucyHttpTransport,
        *,
        rewrite_request: Callable[[TransportRequest], TransportRequest] | None = None,
        rewrite_response: Callable[[TransportResponse], TransportResponse] | None = None,
    ) -> None:
        self.inner = inner
        self.max_retries = inner.max_retries
        self.requests: list[TransportRequest] = []
        self.rewrite_request = rewrite_request
        self.rewrite_response = rewrite_response

    async def send(self, request: TransportRequest) -> TransportResponse:
        if self.rewrite_request is not None:
            request = self.rewrite_request(request)
        self.requests.append(request)
        response = await self.inner.send(request)
        return response if self.rewrite_response is None else self.rewrite_response(response)

    async def aclose(self) -> None:
        await self.inner.aclose()


class RaisingTransport:
    """A custom transport (the ``Transport`` protocol) that raises ``error`` on every request after the
    first ``answered`` ones, which go to ``inner`` (a refused connection, a network error it lets
    through, a ``ResponseLostError`` without the key)."""

    def __init__(self, error: BaseException, *, inner: Any = None, answered: int = 0) -> None:
        self.error = error
        self.inner = inner
        self.answered = answered
        self.sent: list[TransportRequest] = []

    @property
    def keys(self) -> list[str | None]:
        return [request.idempotency_key for request in self.sent]

    async def send(self, request: TransportRequest) -> TransportResponse:
        self.sent.append(request)
        if len(self.sent) <= self.answered:
            response: TransportResponse = await self.inner.send(request)
            return response
        raise self.error


def refused() -> httpx.ConnectError:
    return httpx.ConnectError("[Errno 111] Connection refused")


def with_header(response: TransportResponse, name: str, value: str) -> TransportResponse:
    return replace(response, headers={**response.headers, name.lower(): value})


def http_transport(
    shape: InProcessFake | LiveServer,
    *,
    http: httpx.AsyncBaseTransport | None = None,
    **options: Any,
) -> LucyHttpTransport:
    """The real HTTP transport: over the live socket, or over the in-process fake's httpx transport."""
    if isinstance(shape, InProcessFake) and http is None:
        http = shape.transport
    return create_lucy_http_transport(
        base_url=shape.base_url, allow_insecure_loopback=True, http_transport=http, **options
    )


def make_client(
    shape: InProcessFake | LiveServer,
    *,
    sleep: RecordingSleep | None = None,
    token: str = DEV_TOKEN,
    permissions: tuple[str, ...] = BOTH,
    transport: Any = None,
    client_name: str = CLIENT_NAME,
    **options: Any,
) -> AgentMemoryClient:
    return AgentMemoryClient(
        transport=transport if transport is not None else http_transport(shape),
        token=token,
        permissions=permissions,
        client_name=client_name,
        sleep=sleep if sleep is not None else RecordingSleep(),
        **options,
    )
