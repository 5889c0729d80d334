"""Every exception the SDK raises, in one tree.

```
LucyMemoryError                      code, status, request_id, retryable, operation,
│                                    idempotency_key, attempts, retry_after
├── ConfigurationError (ValueError)  bad arguments to the client or the transport factory
│   └── InsecureTransportError       http:// without allow_insecure_loopback=True and a loopback host
├── SecretDetectedError              the SDK's own pre-flight refusal; nothing was sent
├── ResponseLostError                transport branch: timeout or dropped connection, outcome unknown
├── ConnectionFailedError            transport branch: no connection on the first attempt; nothing sent
├── ClientClosedError                the client was closed; nothing sent
├── InvalidResponseError             a response arrived but is not what the contract promises
└── APIError                         status branch: one class per contract error code
    ├── InvalidJSONError             400 invalid_json (also raised pre-flight, status None)
    ├── InvalidHeaderError           400 invalid_header
    ├── IdempotencyKeyRequiredError  400 idempotency_key_required (also pre-flight, status None)
    ├── MalformedRequestError        400 malformed_request (the server's HTTP parser refused the bytes)
    ├── UnauthenticatedError         401 unauthenticated
    ├── InsufficientCreditsError     402 insufficient_credits
    ├── PermissionDeniedError        403 permission_denied (also pre-flight, status None)
    ├── ScopeForbiddenError          403 scope_forbidden
    ├── NotFoundError                404 not_found
    ├── MemoryNotFoundError          404 memory_not_found
    ├── MethodNotAllowedError        405 method_not_allowed
    ├── VersionConflictError         409 version_conflict (memory_id, expected_version, current_version)
    ├── TopicConflictError           409 topic_conflict
    ├── IdempotencyKeyInUseError     409 idempotency_key_in_use
    ├── PayloadTooLargeError         413 payload_too_large
    ├── RequestHeaderFieldsTooLargeError  431 request_header_fields_too_large
    ├── UnsupportedMediaTypeError    415 unsupported_media_type
    ├── InvalidRequestError          422 invalid_request (errors; also pre-flight, status None)
    ├── IdempotencyKeyReusedError    422 idempotency_key_reused
    ├── RateLimitedError             429 rate_limited (retry_after)
    ├── InternalServerError          500 internal
    ├── BadGatewayError              502 bad_gateway
    ├── BillingUnavailableError      503 billing_unavailable
    ├── ServiceUnavailableError      503 unavailable
    └── GatewayTimeoutError          504 gateway_timeout
```

``status`` is the HTTP status, or ``None`` when the SDK refused the request before sending it (then
``attempts`` is 0 and nothing was charged). Propose errors carry ``idempotency_key`` and ``attempts``;
repeating ``propose(same_json, idempotency_key=err.idempotency_key)`` is the safe recovery. Recall and
proposal-status errors say that repeating may charge again. ``str(error)`` is the code followed by whole
sentences. No message contains the bearer token or an input value.

A problem response becomes an error in ``APIError.from_problem``: the class of its code, which reads
the ``details`` it carries itself (``fields_from_details``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypedDict, Unpack

from lucy_memory._contract import SchemaError, load_contract
from lucy_memory.retry import MAX_RETRY_AFTER_SECONDS, RETRYABLE_STATUSES

__all__ = [
    "APIError",
    "BadGatewayError",
    "BillingUnavailableError",
    "ClientClosedError",
    "ConfigurationError",
    "ConnectionFailedError",
    "ErrorContext",
    "GatewayTimeoutError",
    "IdempotencyKeyInUseError",
    "IdempotencyKeyRequiredError",
    "IdempotencyKeyReusedError",
    "InsecureTransportError",
    "InsufficientCreditsError",
    "InternalServerError",
    "InvalidHeaderError",
    "InvalidJSONError",
    "InvalidRequestError",
    "InvalidResponseError",
    "LucyMemoryError",
    "MalformedRequestError",
    "MemoryNotFoundError",
    "MethodNotAllowedError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitedError",
    "RequestHeaderFieldsTooLargeError",
    "ResponseLostError",
    "ScopeForbiddenError",
    "SecretDetectedError",
    "ServiceUnavailableError",
    "TopicConflictError",
    "UnauthenticatedError",
    "UnsupportedMediaTypeError",
    "VersionConflictError",
]  # the error tree, which the package exports whole; api_error_class and code_for_status are helpers

# Operations whose repetition may charge a second credit (never retried automatically), as the
# subject of a sentence.
_CHARGING_WITHOUT_IDEMPOTENCY = {"recall": "A recall", "proposal_status": "A proposal status request"}


def _sentence(text: str) -> str:
    """``text`` ended as a sentence: a server's detail often has no full stop of its own."""
    text = text.strip()
    return text if not text or text.endswith((".", "!", "?")) else text + "."


class ErrorContext(TypedDict, total=False):
    """What is known of an error besides its message: every error class's keyword arguments."""

    code: str | None  # the class's own code when absent or None
    status: int | None
    request_id: str | None
    retryable: bool
    operation: str | None
    idempotency_key: str | None
    attempts: int
    retry_after: float | None


class LucyMemoryError(Exception):
    """The base class: every error of this SDK."""

    code: str = "error"

    def __init__(self, message: str, **context: Unpack[ErrorContext]) -> None:
        code = context.get("code")
        self.code = code if code is not None else type(self).code
        self.status = context.get("status")
        self.request_id = context.get("request_id")
        self.retryable = context.get("retryable", False)
        self.operation = context.get("operation")
        self.idempotency_key = context.get("idempotency_key")
        self.attempts = context.get("attempts", 0)
        self.retry_after = context.get("retry_after")
        self.detail = message
        super().__init__(str(self))

    def __str__(self) -> str:
        # from the attributes as they are now: a count the client corrects after the error was made
        # (a recovery call's own attempts) is the count the message gives
        outcome = self._outcome()
        return f"{self.code}: {_sentence(self.detail)}" + (f" {outcome}" if outcome else "")

    def _outcome(self) -> str:
        """The sentence after the message that says what happened and what is safe to do."""
        if self.status is None and self.attempts == 0:
            return "Nothing was sent and nothing was charged."
        if self.status is not None and 300 <= self.status < 400:  # a proxy's or a redirector's
            return (
                "A redirect is no answer of the API: the call did not execute there and nothing was"
                " charged. The SDK follows no redirect: base_url must be the deployment's own origin."
            )
        subject = _CHARGING_WITHOUT_IDEMPOTENCY.get(self.operation or "")
        if subject is not None:
            if self.status is not None and 400 <= self.status < 500:  # refused before it executed
                return f"Nothing was executed or charged. {subject} is never retried automatically."
            if self.status is not None and self.status < 400:  # answered: it executed, and was charged
                return (
                    f"It executed and was charged, but its answer cannot be used. {subject} is never retried"
                    " automatically; repeating it charges again."
                )
            # a 5xx or no answer: it may have executed (and been charged) before the failure
            return f"{subject} is never retried automatically; repeating it may charge again."
        if self.operation == "propose" and self.idempotency_key is not None:
            tries = "attempt" if self.attempts == 1 else "attempts"
            key = self.idempotency_key
            outcome = f"The propose failed after {self.attempts} {tries} with idempotency_key {key}."
            if self.retry_after is not None and self.retry_after > MAX_RETRY_AFTER_SECONDS:
                outcome += (
                    f" Lucy asked to wait {self.retry_after:g} s, longer than the"
                    f" {MAX_RETRY_AFTER_SECONDS:g} s this SDK waits by itself: propose again with that key"
                    " after the wait."
                )
            elif self.retries_used_up:
                outcome += (
                    " Its automatic retries are used up: propose again with that key later, once the"
                    " service recovers, not at once (Lucy's rules give a key three attempts in a row)."
                )
            return outcome
        return ""

    @property
    def retries_used_up(self) -> bool:
        """A propose answered 429, 502, 503 or 504 that the SDK did not retry although Lucy's wait was
        one it takes: its retries were used up (or ``max_retries`` is 0)."""
        return (
            self.operation == "propose"
            and self.status in RETRYABLE_STATUSES
            and (self.retry_after is None or self.retry_after <= MAX_RETRY_AFTER_SECONDS)
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, status={self.status!r}, "
            f"request_id={self.request_id!r}, retryable={self.retryable!r}, operation={self.operation!r}, "
            f"idempotency_key={self.idempotency_key!r}, attempts={self.attempts!r})"
        )


class ConfigurationError(LucyMemoryError, ValueError):
    """An argument of the client or of ``create_lucy_http_transport`` is not acceptable."""

    code = "invalid_configuration"


class InsecureTransportError(ConfigurationError):
    """Cleartext ``http://`` needs ``allow_insecure_loopback=True`` *and* a loopback host."""

    code = "insecure_transport"


class SecretDetectedError(LucyMemoryError):
    """Content, justification, topic or the idempotency key looks like a secret (or holds the
    client's own token); the key is then not repeated on the error.

    Raised by the SDK before sending. A server-side ``secret_detected`` rejection is a normal
    ``ProposeResult`` whose proposal is ``rejected``, not this exception.
    """

    code = "secret_detected"

    def __init__(self, message: str, *, field: str, pattern: str, **context: Unpack[ErrorContext]) -> None:
        self.field = field
        self.pattern = pattern
        super().__init__(message, **context)


class ResponseLostError(LucyMemoryError):
    """A timeout or dropped connection: the request may have executed and been charged.

    Never retried automatically. For propose, repeat with ``idempotency_key=err.idempotency_key`` to get
    the original answer without a second proposal or charge.
    """

    code = "response_lost"

    @classmethod
    def for_request(
        cls, *, operation: str, idempotency_key: str | None, attempts: int, cause: str
    ) -> ResponseLostError:
        if operation == "propose" and idempotency_key is not None:
            advice = (
                "the proposal may have been created and charged; repeat propose with the same JSON and "
                "the same idempotency_key to get the original answer without a second charge."
            )
        else:
            advice = f"the {operation} may have executed and been charged."
        return cls(
            f"no complete response ({cause}); {advice}",
            operation=operation,
            idempotency_key=idempotency_key,
            attempts=attempts,
            retryable=operation == "propose" and idempotency_key is not None,
        )


class ConnectionFailedError(LucyMemoryError):
    """No connection to the service could be made (refused, unreachable, TLS or connect timeout) for
    a call's first attempt: nothing was sent and nothing was charged. Not retried automatically;
    calling again is safe. (When a propose retry cannot connect, an earlier attempt reached the
    service, so that is a ``ResponseLostError``.)"""

    code = "connection_failed"

    @classmethod
    def for_request(
        cls, *, operation: str, idempotency_key: str | None, attempts: int, cause: str
    ) -> ConnectionFailedError:
        return cls(
            f"could not connect to the service ({cause}); nothing was sent and nothing was charged, so"
            " calling again is safe.",
            operation=operation,
            idempotency_key=idempotency_key,
            attempts=attempts,
            retryable=True,
        )

    def _outcome(self) -> str:
        return ""  # the message says it: nothing was sent, so no charge and no retry rule to explain


class ClientClosedError(LucyMemoryError):
    """The client (or its transport) was closed: before a call was sent, nothing was sent and nothing
    was charged (``attempts`` 0); while a propose waited to retry, the error carries the attempts
    made, the last one's ``status`` and the key, and the message says so."""

    code = "client_closed"

    def _outcome(self) -> str:
        return ""  # the message says nothing was sent


class InvalidResponseError(LucyMemoryError):
    """A response arrived but does not match the contract (wrong status, body or schema)."""

    code = "invalid_response"


class APIError(LucyMemoryError):
    """A contract error code: a problem response from the server, or the same refusal made pre-flight."""

    @classmethod
    def from_problem(
        cls,
        problem: Mapping[str, Any],
        *,
        status: int,
        request_id: str | None,
        redact: Callable[[str], str],
        **context: Any,
    ) -> APIError:
        """The error for an RFC 9457 ``problem`` answered with ``status``: the class of its ``code``
        (of the status, for a body without one, e.g. from a proxy), with its detail, ``retryable``
        (the contract's, when the body does not say) and request id (``request_id``, the header,
        when the body has none), and what that class reads from ``details``. ``redact`` scrubs text
        the server sent; ``context`` is the call's (operation, idempotency_key, attempts,
        retry_after)."""
        code = problem.get("code")
        if not isinstance(code, str) or not code:
            code = code_for_status(status)
        detail = problem.get("detail")
        message = (
            redact(detail)
            if isinstance(detail, str) and detail
            else f"the service answered HTTP {status} without a problem detail"
        )
        retryable = problem.get("retryable")
        if not isinstance(retryable, bool):
            retryable = _contract_retryable(code)
        body_request_id = problem.get("request_id")
        details = problem.get("details")
        target = api_error_class(code)
        return target(
            message,
            code=code,
            status=status,
            request_id=body_request_id if isinstance(body_request_id, str) else request_id,
            retryable=retryable,
            **target.fields_from_details(details if isinstance(details, Mapping) else {}, redact),
            **context,
        )

    # The constructor's keyword arguments that a problem's ``details`` carry under the same names.
    detail_fields: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def fields_from_details(cls, details: Mapping[str, Any], redact: Callable[[str], str]) -> dict[str, Any]:
        """The constructor arguments this class reads from a problem's ``details``: its
        ``detail_fields``, as sent."""
        return {name: details.get(name) for name in cls.detail_fields}


class InvalidJSONError(APIError):
    code = "invalid_json"


class InvalidHeaderError(APIError):
    code = "invalid_header"


class IdempotencyKeyRequiredError(APIError):
    code = "idempotency_key_required"


class MalformedRequestError(APIError):
    """The server's HTTP parser refused the request before routing (not valid HTTP/1.1)."""

    code = "malformed_request"


class UnauthenticatedError(APIError):
    code = "unauthenticated"


class InsufficientCreditsError(APIError):
    """The balance is below one credit; needs account action, not a retry."""

    code = "insufficient_credits"


class PermissionDeniedError(APIError):
    """The permission is missing: on the credential (status 403) or in the client's own configuration
    (status None, nothing sent)."""

    code = "permission_denied"


class ScopeForbiddenError(APIError):
    code = "scope_forbidden"


class NotFoundError(APIError):
    code = "not_found"


class MemoryNotFoundError(APIError):
    code = "memory_not_found"


class MethodNotAllowedError(APIError):
    code = "method_not_allowed"


class VersionConflictError(APIError):
    """``replaces`` named an older version; ``current_version`` is the active one."""

    code = "version_conflict"
    detail_fields = ("memory_id", "expected_version", "current_version")

    def __init__(
        self,
        message: str,
        *,
        memory_id: str | None = None,
        expected_version: int | None = None,
        current_version: int | None = None,
        **context: Unpack[ErrorContext],
    ) -> None:
        self.memory_id = memory_id
        self.expected_version = expected_version
        self.current_version = current_version
        super().__init__(message, **context)


class TopicConflictError(APIError):
    code = "topic_conflict"


class IdempotencyKeyInUseError(APIError):
    code = "idempotency_key_in_use"


class PayloadTooLargeError(APIError):
    code = "payload_too_large"


class RequestHeaderFieldsTooLargeError(APIError):
    code = "request_header_fields_too_large"


class UnsupportedMediaTypeError(APIError):
    code = "unsupported_media_type"


class InvalidRequestError(APIError):
    """The request does not match its schema; ``errors`` are RFC 6901 pointers with a rule each."""

    code = "invalid_request"

    def __init__(
        self, message: str, *, errors: tuple[SchemaError, ...] = (), **context: Unpack[ErrorContext]
    ) -> None:
        self.errors = errors
        super().__init__(message, **context)

    @classmethod
    def fields_from_details(cls, details: Mapping[str, Any], redact: Callable[[str], str]) -> dict[str, Any]:
        items = details.get("errors")
        return {
            "errors": tuple(
                SchemaError(redact(str(item.get("pointer", ""))), redact(str(item.get("detail", ""))))
                for item in (items if isinstance(items, list) else [])
                if isinstance(item, dict)
            )
        }


class IdempotencyKeyReusedError(APIError):
    code = "idempotency_key_reused"


class RateLimitedError(APIError):
    """429; ``retry_after`` is the server's wait in seconds (when it sent one)."""

    code = "rate_limited"


class InternalServerError(APIError):
    code = "internal"


class BadGatewayError(APIError):
    code = "bad_gateway"


class BillingUnavailableError(APIError):
    """The billing authority could not complete the request; nothing was executed or charged."""

    code = "billing_unavailable"


class ServiceUnavailableError(APIError):
    code = "unavailable"


class GatewayTimeoutError(APIError):
    code = "gateway_timeout"


_BY_CODE: dict[str, type[APIError]] = {
    cls.code: cls
    for cls in (
        InvalidJSONError,
        InvalidHeaderError,
        IdempotencyKeyRequiredError,
        MalformedRequestError,
        UnauthenticatedError,
        InsufficientCreditsError,
        PermissionDeniedError,
        ScopeForbiddenError,
        NotFoundError,
        MemoryNotFoundError,
        MethodNotAllowedError,
        VersionConflictError,
        TopicConflictError,
        IdempotencyKeyInUseError,
        PayloadTooLargeError,
        RequestHeaderFieldsTooLargeError,
        UnsupportedMediaTypeError,
        InvalidRequestError,
        IdempotencyKeyReusedError,
        RateLimitedError,
        InternalServerError,
        BadGatewayError,
        BillingUnavailableError,
        ServiceUnavailableError,
        GatewayTimeoutError,
    )
}

# The code a status stands for when a problem body is missing or unreadable (e.g. from a proxy).
_CODE_BY_STATUS: dict[int, str] = {
    401: "unauthenticated",
    402: "insufficient_credits",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    431: "request_header_fields_too_large",
    429: "rate_limited",
    500: "internal",
    502: "bad_gateway",
    503: "unavailable",
    504: "gateway_timeout",
}


def api_error_class(code: str) -> type[APIError]:
    """The class for a contract error code; ``APIError`` itself for a code this SDK does not know."""
    return _BY_CODE.get(code, APIError)


def code_for_status(status: int) -> str:
    """The contract code a bare HTTP status stands for, or ``http_<status>``."""
    return _CODE_BY_STATUS.get(status, f"http_{status}")


def _contract_retryable(code: str) -> bool:
    """Whether the contract calls ``code`` retryable (False for a code it does not know)."""
    entry = load_contract("agent-memory-api")["errors"].get(code)
    return entry is not None and bool(entry["retryable"])
