"""``AgentMemoryClient``: recall, propose and proposal status over any ``Transport``.

```python
client = AgentMemoryClient(
    transport=create_lucy_http_transport(base_url=os.environ["LUCY_MEMORY_BASE_URL"]),
    token=os.environ["LUCY_MEMORY_TOKEN"],
    permissions=["memory:read", "memory:propose"],
)
result = await client.recall('{"query": "Which database did we approve?", "limit": 3}')
```

Every method takes a JSON string, parses it strictly, validates it against ``schemas/``, refuses before
sending what the client may not or should not send (permissions, secrets, schema), and sends the
RFC 8785 canonical form. Only propose is retried automatically (see ``lucy_memory.retry``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import random as _random
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from lucy_memory._closing import AsyncClosing
from lucy_memory._contract import (
    CLIENT_NAME_MAX_CHARS,
    IDEMPOTENCY_KEY_RULE,
    OPERATION_PERMISSIONS,
    PERMISSIONS,
    TOKEN_RULE,
    SchemaError,
    SecretScanner,
    canonical_bytes,
    encode_client_name,
    parse_json_object,
    redact,
    schema_validator,
    valid_client_name,
    valid_idempotency_key,
    valid_token,
)
from lucy_memory._contract import InvalidJSONError as _ParseError
from lucy_memory._recent import RecentCounts
from lucy_memory.errors import (
    APIError,
    ClientClosedError,
    ConfigurationError,
    IdempotencyKeyRequiredError,
    InvalidJSONError,
    InvalidRequestError,
    InvalidResponseError,
    LucyMemoryError,
    PermissionDeniedError,
    ResponseLostError,
    SecretDetectedError,
)
from lucy_memory.models import (
    Credits,
    Proposal,
    ProposalStatusResult,
    ProposeResult,
    RecalledMemory,
    RecallResult,
)
from lucy_memory.retry import (
    DEFAULT_MAX_RETRIES,
    MAX_RETRIES_LIMIT,
    POLL_MIN_INTERVAL_SECONDS,
    decide_retry,
    poll_delay,
)
from lucy_memory.transport import Transport, TransportRequest, TransportResponse, map_transport_errors

__all__ = ["DEFAULT_CLIENT_NAME", "PERMISSIONS", "AgentMemoryClient", "SyncAgentMemoryClient"]

logger = logging.getLogger("lucy_memory")

DEFAULT_CLIENT_NAME = "lucy-memory-python"
_SECRET_FIELDS = ("content", "justification", "topic")

_T = TypeVar("_T")
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class _Operation:
    name: str
    method: str
    permission: str
    request_schema: str
    response_schema: str
    success: int


_RECALL = _Operation(
    "recall",
    "POST",
    OPERATION_PERMISSIONS["recall"],
    "recall-request.schema.json",
    "recall-response.schema.json",
    200,
)
_PROPOSE = _Operation(
    "propose",
    "POST",
    OPERATION_PERMISSIONS["propose"],
    "propose-request.schema.json",
    "propose-response.schema.json",
    201,
)
_STATUS = _Operation(
    "proposal_status",
    "GET",
    OPERATION_PERMISSIONS["proposal_status"],
    "proposal-status-request.schema.json",
    "proposal-status-response.schema.json",
    200,
)


# How many keys of failed proposes a client remembers (each a string and an int).
_KEYS_KEPT = 1024


class _Token:
    """Holds the bearer token; its ``repr`` and ``str`` never show it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<token redacted>"

    __str__ = __repr__


def _check_permissions(permissions: Iterable[str]) -> tuple[str, ...]:
    if isinstance(permissions, str):
        raise ConfigurationError(f"permissions must be a list such as {list(PERMISSIONS)!r}")
    chosen = tuple(dict.fromkeys(permissions))
    if not chosen or any(item not in PERMISSIONS for item in chosen):
        raise ConfigurationError("permissions must be a non-empty subset of: " + ", ".join(PERMISSIONS))
    return chosen


class AgentMemoryClient(AsyncClosing):
    """The async client. ``permissions`` are the ones this client may use (sent as ``Lucy-Permissions``
    on every request); ``sleep``, ``clock`` (Unix seconds) and ``random`` are injectable for tests."""

    def __init__(
        self,
        *,
        transport: Transport,
        token: str,
        permissions: Iterable[str],
        client_name: str = DEFAULT_CLIENT_NAME,
        max_retries: int | None = None,
        sleep: Sleep = anyio.sleep,
        clock: Callable[[], float] = time.time,
        random: Callable[[], float] = _random.random,
    ) -> None:
        if not valid_token(token):
            raise ConfigurationError(f"token must be {TOKEN_RULE}")
        if not valid_client_name(client_name):
            raise ConfigurationError(
                f"client_name must be 1 to {CLIENT_NAME_MAX_CHARS} characters (not counting leading and"
                " trailing spaces), without control characters"
            )
        retries = (
            getattr(transport, "max_retries", DEFAULT_MAX_RETRIES) if max_retries is None else max_retries
        )
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES_LIMIT:
            raise ConfigurationError(f"max_retries must be an integer from 0 to {MAX_RETRIES_LIMIT}")
        self._transport = transport
        self._closed = False
        self._waits: set[anyio.CancelScope] = set()  # the retry waits under way (aclose cancels them)
        self._token = _Token(token)
        self.permissions = _check_permissions(permissions)
        self.client_name = client_name
        self.max_retries: int = retries
        self._sleep = sleep
        self._clock = clock
        self._random = random
        self._scanner = SecretScanner()
        pattern = self._scanner.find(client_name, caller_token=token)
        if pattern is not None:  # Lucy would refuse every request (invalid_header): said now, not echoed
            raise ConfigurationError(
                f"client_name looks like a secret (pattern {pattern}); choose another name"
            )
        # Idempotency-Keys whose propose ended without its answer (lost, or failed with 429, 409
        # or a 5xx), and how many attempts each used: a repeat with the key (the recovery the
        # errors advise) goes on counting from there, its retry header at most ``max_retries``
        # (a bounded number of keys; the oldest go first)
        self._key_attempts = RecentCounts(_KEYS_KEPT)

    def __repr__(self) -> str:
        return (
            f"AgentMemoryClient(transport={self._transport!r}, permissions={list(self.permissions)!r}, "
            f"client_name={self.client_name!r}, max_retries={self.max_retries!r})"
        )

    async def aclose(self) -> None:
        """Closes the transport when it has an ``aclose`` (the HTTP transport does). Idempotent; a call
        made afterwards raises ``ClientClosedError`` without sending anything."""
        if self._closed:
            return
        self._closed = True
        for waiting in list(self._waits):  # a propose waiting to retry ends now, ClientClosedError
            waiting.cancel()
        close = getattr(self._transport, "aclose", None)
        if close is not None:
            await close()

    # -- public operations -------------------------------------------------------------------------

    async def recall(self, request_json: str) -> RecallResult:
        """Recall approved, active memories. Charged one credit; never retried automatically."""
        _, body = self._prepare(_RECALL, request_json, idempotency_key=None)
        response, _, _ = await self._exchange(_RECALL, "/recall", body, idempotency_key=None)
        data = self._parse_success(_RECALL, response, idempotency_key=None, attempts=1)
        with self._building(_RECALL, response, idempotency_key=None, attempts=1):
            return RecallResult(
                memories=tuple(RecalledMemory.from_json(item) for item in data["memories"]),
                request_id=data["request_id"],
                credits=Credits.from_json(data["credits"]),
                body=response.body.decode("utf-8"),
            )

    async def propose(self, request_json: str, idempotency_key: str | None = None) -> ProposeResult:
        """Propose a memory (or a replacement). A key is generated when absent and kept across retries;
        it is on the result and on every error. The memory is saved only when the proposal is approved."""
        if idempotency_key is None:
            idempotency_key = f"lm-{uuid.uuid4().hex}"
        _, body = self._prepare(_PROPOSE, request_json, idempotency_key=idempotency_key)
        response, attempts, earlier = await self._exchange(
            _PROPOSE,
            "/proposals",
            body,
            idempotency_key=idempotency_key,
            first_attempt=min(self._key_attempts.pop(idempotency_key), self.max_retries),
        )
        data = self._parse_success(_PROPOSE, response, idempotency_key=idempotency_key, attempts=attempts)
        replayed = (response.header("Idempotent-Replayed") or "").strip().lower() == "true"
        with self._building(_PROPOSE, response, idempotency_key=idempotency_key, attempts=attempts):
            credits = Credits.from_json(data["credits"])
            request_id = data["request_id"]
            original_request_id = None
            if replayed:
                # A replay's body is the stored original; its headers describe this (uncharged) request.
                credits = _header_credits(response) or Credits(charged=0, remaining=credits.remaining)
                original_request_id = response.header("Lucy-Original-Request-Id") or request_id
                request_id = response.header("Lucy-Request-Id") or request_id
            return ProposeResult(
                # the replayed proposal was made by an earlier attempt of this very call, whose
                # answer was an error after the commit (that attempt was charged)
                recovered=replayed and original_request_id in earlier,
                proposal=Proposal.from_json(data["proposal"]),
                request_id=request_id,
                credits=credits,
                idempotency_key=data["idempotency_key"],
                replayed=replayed,
                original_request_id=original_request_id,
                attempts=attempts,
                body=response.body.decode("utf-8"),
            )

    async def proposal_status(self, request_json: str) -> ProposalStatusResult:
        """The current state of a proposal: ``'{"proposal_id": "prop_…"}'``. Charged one credit; never
        retried automatically."""
        request, _ = self._prepare(_STATUS, request_json, idempotency_key=None)
        path = "/proposals/" + request["proposal_id"]
        response, _, _ = await self._exchange(_STATUS, path, None, idempotency_key=None)
        data = self._parse_success(_STATUS, response, idempotency_key=None, attempts=1)
        with self._building(_STATUS, response, idempotency_key=None, attempts=1):
            return ProposalStatusResult(
                proposal=Proposal.from_json(data["proposal"]),
                request_id=data["request_id"],
                credits=Credits.from_json(data["credits"]),
                body=response.body.decode("utf-8"),
            )

    async def wait_for_decision(
        self,
        proposal_id: str,
        *,
        max_polls: int,
        max_interval: float | None = None,
    ) -> ProposalStatusResult:
        """Poll ``proposal_status`` until the proposal is final or ``max_polls`` polls were made (each poll
        costs a credit; the limit is yours). Waits between polls with capped backoff (1 s, 2 s, 4 s, …,
        at most ``max_interval`` or 30 s; ``max_interval`` is at least 3 s, so that the waits grow
        and no minute holds more than 30 polls). Returns the last status; check
        ``result.proposal.is_final``."""
        if isinstance(max_polls, bool) or not isinstance(max_polls, int) or max_polls < 1:
            raise ConfigurationError("max_polls must be a positive integer")
        if max_interval is not None and (
            isinstance(max_interval, bool)
            or not isinstance(max_interval, int | float)
            or not math.isfinite(max_interval)
            or max_interval < POLL_MIN_INTERVAL_SECONDS
        ):
            raise ConfigurationError(
                f"max_interval must be a finite number of seconds, at least {POLL_MIN_INTERVAL_SECONDS:g}"
                " (status polls back off: Lucy's client rules)"
            )
        request_json = '{"proposal_id":' + _json_string(proposal_id) + "}"
        poll = 0
        while True:
            result = await self.proposal_status(request_json)
            poll += 1
            if result.proposal.is_final or poll >= max_polls:
                return result
            await self._sleep(poll_delay(poll - 1, max_interval))

    # -- the request path --------------------------------------------------------------------------

    def _prepare(
        self, operation: _Operation, request_json: str, *, idempotency_key: str | None
    ) -> tuple[dict[str, Any], bytes]:
        """Every client-side refusal, before anything is sent; returns the parsed and canonical body."""
        refusal: dict[str, Any] = {"operation": operation.name, "idempotency_key": idempotency_key}
        if operation.permission not in self.permissions:
            raise PermissionDeniedError(
                f"this client is not configured with {operation.permission}, which {operation.name} needs",
                **refusal,
            )
        if idempotency_key is not None and not valid_idempotency_key(idempotency_key):
            refusal["idempotency_key"] = None
            raise IdempotencyKeyRequiredError(f"idempotency_key must be {IDEMPOTENCY_KEY_RULE}", **refusal)
        if idempotency_key is not None:
            # Lucy refuses such a key (invalid_header): refused here, it is neither sent nor echoed
            pattern = self._scanner.find(idempotency_key, caller_token=self._token.reveal())
            if pattern is not None:
                refusal["idempotency_key"] = None
                raise SecretDetectedError(
                    f"idempotency_key looks like a secret (pattern {pattern}); use another key, or none"
                    " (one is generated)",
                    field="idempotency_key",
                    pattern=pattern,
                    **refusal,
                )
        if not isinstance(request_json, str):
            raise InvalidJSONError("the request must be a JSON string", **refusal)
        try:
            request = parse_json_object(request_json)
        except _ParseError as exc:
            raise InvalidJSONError(str(exc), **refusal) from None
        # a property's name is in its pointer, and the caller's token may be one
        problems = [
            SchemaError(self._redact(item.pointer), self._redact(item.detail))
            for item in schema_validator(operation.request_schema).errors(request)
        ]
        if problems:
            listed = "; ".join(f"{item.pointer or '/'} {item.detail}" for item in problems[:10])
            raise InvalidRequestError(
                f"the request does not match {operation.request_schema}: {listed}",
                errors=tuple(problems),
                **refusal,
            )
        if operation is _PROPOSE:
            self._refuse_secrets(request, refusal)
        return request, canonical_bytes(request)

    def _refuse_secrets(self, request: Mapping[str, Any], refusal: dict[str, Any]) -> None:
        for name in _SECRET_FIELDS:
            value = request.get(name)
            if isinstance(value, str):
                pattern = self._scanner.find(value, caller_token=self._token.reveal())
                if pattern is not None:
                    raise SecretDetectedError(
                        f"{name} looks like a secret (pattern {pattern}); do not propose credentials",
                        field=name,
                        pattern=pattern,
                        **refusal,
                    )

    def _headers(
        self, operation: _Operation, body: bytes | None, key: str | None, attempt: int
    ) -> dict[str, str]:
        headers = {
            "Authorization": f"Bearer {self._token.reveal()}",
            "Accept": "application/json",
            "Lucy-Permissions": ",".join(self.permissions),
            "Lucy-Client-Name": encode_client_name(self.client_name),
        }
        if body is not None:
            headers["Content-Type"] = "application/json"
        if key is not None:
            headers["Idempotency-Key"] = key
        if attempt > 0:
            headers["Lucy-Retry-Attempt"] = str(attempt)
        return headers

    async def _send(self, request: TransportRequest) -> TransportResponse:
        """One ``Transport.send``. Network failures become SDK errors in ``map_transport_errors``, so a
        custom transport that lets one through (or loses the key) is covered as the built-in one is."""
        if self._closed:
            raise ClientClosedError(
                "this client is closed; nothing was sent and nothing was charged",
                operation=request.operation,
                idempotency_key=request.idempotency_key,
            )
        try:
            with map_transport_errors(request):
                return await self._transport.send(request)
        except LucyMemoryError as exc:
            # a custom transport's own error may quote the request's headers: never the token, in
            # the error or in the ones it was raised from (a traceback shows them too)
            self._scrub(exc)
            raise

    def _scrub(self, error: BaseException) -> None:
        """Redact the token from ``error`` and the errors chained to it, in place."""
        seen: set[int] = set()
        current: BaseException | None = error
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            if isinstance(current, LucyMemoryError):
                current.detail = self._redact(current.detail)
            redacted = tuple(self._redact(arg) if isinstance(arg, str) else arg for arg in current.args)
            with contextlib.suppress(AttributeError, TypeError):  # an exception whose args are fixed
                current.args = redacted
            current = current.__cause__ or current.__context__

    async def _exchange(
        self,
        operation: _Operation,
        path: str,
        body: bytes | None,
        *,
        idempotency_key: str | None,
        first_attempt: int = 0,
    ) -> tuple[TransportResponse, int, tuple[str, ...]]:
        """Send, and repeat only as ``decide_retry`` allows. Returns the 2xx response, this call's
        attempts, and the request ids the earlier (retried) attempts' answers named.
        ``first_attempt``: the attempts an earlier call made with the key (its answer was lost)."""
        attempt = first_attempt
        earlier: list[str] = []
        while True:
            request = TransportRequest(
                method=operation.method,
                path=path,
                headers=self._headers(operation, body, idempotency_key, attempt),
                body=body,
                operation=operation.name,
                idempotency_key=idempotency_key,
                attempt=attempt,
            )
            logger.debug("%s attempt %d", operation.name, attempt)
            try:
                response = await self._send(request)
            except ResponseLostError as lost:
                lost.attempts = attempt + 1 - first_attempt  # this call's, as on every result and error
                if idempotency_key is not None:
                    self._key_attempts.set(idempotency_key, attempt + 1)
                raise
            except BaseException as exc:
                # cancelled (a caller's timeout, a host's cancellation) while the attempt may have
                # reached Lucy: it counts, as a lost answer's does, so a repeat with the key never
                # makes more attempts than Lucy allows (an SDK error says itself what was sent)
                if idempotency_key is not None and not isinstance(exc, Exception):
                    self._key_attempts.set(idempotency_key, attempt + 1)
                raise
            logger.debug(
                "%s attempt %d answered %d (request %s)",
                operation.name,
                attempt,
                response.status,
                response.header("Lucy-Request-Id"),
            )
            if 200 <= response.status < 300:
                return response, attempt + 1 - first_attempt, tuple(earlier)
            decision = decide_retry(
                operation=operation.name,
                status=response.status,
                retry_after_header=response.header("Retry-After"),
                retries_done=attempt,
                max_retries=self.max_retries,
                now=self._clock(),
                random=self._random,
            )
            if not decision.retry:
                if idempotency_key is not None and (response.status in (409, 429) or response.status >= 500):
                    self._key_attempts.set(idempotency_key, attempt + 1)  # a failed attempt: may be repeated
                raise self._error(
                    operation,
                    response,
                    idempotency_key=idempotency_key,
                    attempts=attempt + 1 - first_attempt,
                    retry_after=decision.retry_after,
                )
            logger.info(
                "%s answered %d; retry %d of %d in %.3f s with the same body and key",
                operation.name,
                response.status,
                attempt + 1,
                self.max_retries,
                decision.delay,
            )
            answered_by = response.header("Lucy-Request-Id")
            if answered_by:
                earlier.append(answered_by)
            # a close cuts the wait short (the sync facade's close() would otherwise block through it)
            with anyio.CancelScope() as waiting:
                self._waits.add(waiting)
                try:
                    await self._sleep(decision.delay)
                except BaseException:  # cancelled while it waited: the answered attempts stand
                    if idempotency_key is not None:
                        self._key_attempts.set(idempotency_key, attempt + 1)
                    raise
                finally:
                    self._waits.discard(waiting)
            if self._closed:  # closed while it waited: the attempts made stand, as on any other error
                if idempotency_key is not None:
                    self._key_attempts.set(idempotency_key, attempt + 1)
                tries = attempt + 1 - first_attempt
                raise ClientClosedError(
                    f"this client was closed while it waited to retry; the last of this call's {tries}"
                    f" {'attempt' if tries == 1 else 'attempts'} was answered {response.status}, and if one"
                    f" executed, proposing again with idempotency_key {idempotency_key} replays its answer"
                    " without a second charge",
                    operation=operation.name,
                    idempotency_key=idempotency_key,
                    attempts=tries,
                    status=response.status,
                    request_id=answered_by,
                )
            attempt += 1

    @contextlib.contextmanager
    def _building(
        self,
        operation: _Operation,
        response: TransportResponse,
        *,
        idempotency_key: str | None,
        attempts: int,
    ) -> Iterator[None]:
        """A valid-looking answer the models still cannot take (a 30 February that matches the
        timestamp pattern) is an ``InvalidResponseError`` carrying the key, never a bare ValueError."""
        try:
            yield
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidResponseError(
                f"the response holds a value this SDK cannot read ({type(exc).__name__})",
                operation=operation.name,
                idempotency_key=idempotency_key,
                attempts=attempts,
                status=response.status,
                request_id=response.header("Lucy-Request-Id"),
            ) from exc

    def _parse_success(
        self,
        operation: _Operation,
        response: TransportResponse,
        *,
        idempotency_key: str | None,
        attempts: int,
    ) -> dict[str, Any]:
        context: dict[str, Any] = {
            "operation": operation.name,
            "idempotency_key": idempotency_key,
            "attempts": attempts,
            "status": response.status,
            "request_id": response.header("Lucy-Request-Id"),
        }
        if response.status != operation.success:
            raise InvalidResponseError(
                f"{operation.name} answered HTTP {response.status}, not the {operation.success} the contract"
                " promises",
                **context,
            )
        try:
            data = parse_json_object(response.body)
        except _ParseError as exc:
            raise InvalidResponseError(f"the response body is not a JSON object ({exc})", **context) from None
        problems = schema_validator(operation.response_schema).errors(data)
        if problems:
            first = problems[0]
            raise InvalidResponseError(
                self._redact(
                    f"the response does not match {operation.response_schema}"
                    f" ({first.pointer} {first.detail})"
                ),
                **context,
            )
        return data

    def _redact(self, text: str) -> str:
        return redact(text, self._token.reveal())

    def _error(
        self,
        operation: _Operation,
        response: TransportResponse,
        *,
        idempotency_key: str | None,
        attempts: int,
        retry_after: float | None,
    ) -> APIError:
        """An error answer as an exception (an unreadable body is a problem without fields)."""
        try:
            problem: Mapping[str, Any] = parse_json_object(response.body)
        except _ParseError:
            problem = {}
        return APIError.from_problem(
            problem,
            status=response.status,
            request_id=response.header("Lucy-Request-Id"),
            redact=self._redact,
            operation=operation.name,
            idempotency_key=idempotency_key,
            attempts=attempts,
            retry_after=retry_after,
        )


def _header_credits(response: TransportResponse) -> Credits | None:
    charged, remaining = response.header("Lucy-Credits-Charged"), response.header("Lucy-Credits-Remaining")
    if (
        charged is None
        or remaining is None
        or not all(v.isascii() and v.isdigit() for v in (charged, remaining))
    ):
        return None
    return Credits(charged=int(charged), remaining=int(remaining))


def _json_string(value: str) -> str:
    """A JSON string literal (the id is validated by the schema afterwards)."""
    if not isinstance(value, str):
        raise ConfigurationError("proposal_id must be a string")
    return canonical_bytes(value).decode("utf-8")


class SyncAgentMemoryClient:
    """A blocking facade for scripts: the same client, run on an event loop in a helper thread.

    ```python
    with SyncAgentMemoryClient(transport=..., token=..., permissions=["memory:read"]) as client:
        result = client.recall('{"query": "database"}')
    ```

    A client that is never closed is closed when it is garbage-collected or, at the latest, when the
    interpreter exits (while its helper thread can still run), so a script that just ends exits.
    """

    # A deliberate sync mirror of ``AgentMemoryClient``: the same parameters, handed on unchanged.
    def __init__(
        self,
        *,
        transport: Transport,
        token: str,
        permissions: Iterable[str],
        client_name: str = DEFAULT_CLIENT_NAME,
        max_retries: int | None = None,
        sleep: Sleep = anyio.sleep,
        clock: Callable[[], float] = time.time,
        random: Callable[[], float] = _random.random,
    ) -> None:
        self._client = AgentMemoryClient(
            transport=transport,
            token=token,
            permissions=permissions,
            client_name=client_name,
            max_retries=max_retries,
            sleep=sleep,
            clock=clock,
            random=random,
        )
        stack = contextlib.ExitStack()
        self._portal: BlockingPortal = stack.enter_context(start_blocking_portal())
        self._closed = False
        # Left to garbage collection during interpreter shutdown, the portal's own clean-up would ask
        # its (by then frozen) thread to stop and wait for it forever; a finalizer runs at exit first.
        self._finalizer = weakref.finalize(self, _shut_down, self._portal, self._client, stack)

    def __repr__(self) -> str:
        return f"SyncAgentMemoryClient({self._client!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Closes the client and its event-loop thread. Idempotent; a call made afterwards raises
        ``ClientClosedError`` without sending anything."""
        if self._closed:
            return
        self._closed = True
        self._finalizer()

    def _call(self, function: Callable[..., Awaitable[_T]], *args: Any) -> _T:
        if self._closed:
            raise ClientClosedError("this client is closed; nothing was sent and nothing was charged")
        return self._portal.call(function, *args)

    def recall(self, request_json: str) -> RecallResult:
        return self._call(self._client.recall, request_json)

    def propose(self, request_json: str, idempotency_key: str | None = None) -> ProposeResult:
        return self._call(self._client.propose, request_json, idempotency_key)

    def proposal_status(self, request_json: str) -> ProposalStatusResult:
        return self._call(self._client.proposal_status, request_json)

    def wait_for_decision(
        self, proposal_id: str, *, max_polls: int, max_interval: float | None = None
    ) -> ProposalStatusResult:
        return self._call(_wait, self._client, proposal_id, max_polls, max_interval)


def _shut_down(portal: BlockingPortal, client: AgentMemoryClient, stack: contextlib.ExitStack) -> None:
    """Close the client on its event loop, then stop the loop and join its thread."""
    try:
        portal.call(client.aclose)
    finally:
        stack.close()


async def _wait(
    client: AgentMemoryClient, proposal_id: str, max_polls: int, max_interval: float | None
) -> ProposalStatusResult:
    return await client.wait_for_decision(proposal_id, max_polls=max_polls, max_interval=max_interval)
