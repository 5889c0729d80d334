"""The one exception the domain raises; ``http.problems`` turns it into an RFC 9457 response."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["DomainError"]


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
