"""The one exception the domain raises; ``http.problems`` turns it into an RFC 9457 response."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["SCHEMA_MISMATCH", "DomainError", "invalid_field", "invalid_request"]

SCHEMA_MISMATCH = "the request does not match the schema"


class DomainError(Exception):
    """A refusal with a contract error ``code`` (the contract gives its status and ``retryable``)."""

    def __init__(
        self,
        code: str,
        detail: str,
        *,
        details: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail
        self.details = dict(details) if details is not None else None
        self.headers = dict(headers) if headers is not None else {}


def invalid_request(errors: Iterable[Mapping[str, str]], detail: str = SCHEMA_MISMATCH) -> DomainError:
    """The 422 ``invalid_request`` with ``details.errors`` (``{pointer, detail}`` each), for the
    schema's verdict and for the rules of the fake that refine it."""
    return DomainError("invalid_request", detail, details={"errors": [dict(error) for error in errors]})


def invalid_field(pointer: str, rule: str, detail: str = SCHEMA_MISMATCH) -> DomainError:
    """``invalid_request`` for one field: ``pointer`` (RFC 6901) and the ``rule`` it breaks."""
    return invalid_request([{"pointer": pointer, "detail": rule}], detail)
