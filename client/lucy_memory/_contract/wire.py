"""The wire rules of Agent Memory HTTP v1 that the fake, the SDK and the MCP server all apply, each
written once, here.

Where ``contracts/agent-memory-api.contract.json`` states a rule, the value is read from it: the base
path, the permissions and which operation needs which, the statuses a propose is retried on, the
Idempotency-Key pattern, the client-name length and control characters, and the final proposal states.
Two rules belong to the clients alone (the contract bounds neither): how long a bearer token may be
before the SDK refuses it, and how long a token must be before it is scrubbed from text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import unquote

from lucy_memory._contract.files import load_contract
from lucy_memory._contract.validation import ecma_pattern

__all__ = [
    "API_BASE_PATH",
    "CLIENT_NAME_MAX_CHARS",
    "ERROR_STATUSES",
    "FINAL_PROPOSAL_STATES",
    "IDEMPOTENCY_KEY_MAX_CHARS",
    "IDEMPOTENCY_KEY_RULE",
    "OPERATION_PERMISSIONS",
    "PERMISSIONS",
    "PROPOSAL_STATES",
    "REDACTED",
    "REDACTION_MIN_LENGTH",
    "RETRYABLE_OPERATIONS",
    "RETRYABLE_STATUSES",
    "TOKEN_MAX_CHARS",
    "TOKEN_RULE",
    "clean_client_name",
    "decode_client_name",
    "encode_client_name",
    "is_loopback",
    "redact",
    "valid_client_name",
    "valid_idempotency_key",
    "valid_token",
]

_API: dict[str, Any] = load_contract("agent-memory-api")
_HEADERS: dict[str, Any] = _API["headers"]["request"]

# -- this machine -----------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """Does ``host`` name this machine: ``localhost`` (any case, a final dot too), or an address of
    127.0.0.0/8 or ``::1`` (an IPv4-mapped one too, bracketed or not). The SDK allows cleartext
    ``http://`` only to such a host, and the fake accepts its built-in tokens only there."""
    import ipaddress  # only for a host that is no name

    if host.lower().removesuffix(".") == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


# -- paths and permissions ---------------------------------------------------------------------------

API_BASE_PATH: str = _API["base_path"]
"""``/api/agent-memory/v1``: every v1 path is relative to it."""

PERMISSIONS: tuple[str, ...] = tuple(_API["permissions"])
"""Every permission a credential (and ``Lucy-Permissions``) can name, in the contract's order."""

OPERATION_PERMISSIONS: Mapping[str, str] = MappingProxyType(
    {name: operation["permission"] for name, operation in _API["operations"].items()}
)
"""The permission each operation needs: ``recall`` → ``memory:read``, the others ``memory:propose``."""

# -- errors ------------------------------------------------------------------------------------------

ERROR_STATUSES: Mapping[str, int] = MappingProxyType(
    {code: int(error["status"]) for code, error in _API["errors"].items()}
)
"""The status each v1 error code is answered with (``internal`` → 500, ``rate_limited`` → 429, …)."""

# -- retries -----------------------------------------------------------------------------------------

RETRYABLE_OPERATIONS: frozenset[str] = frozenset(
    name for name, operation in _API["operations"].items() if operation["client_retry"]["automatic"]
)
"""The operations a client repeats on its own (propose only: it is the idempotent one)."""

RETRYABLE_STATUSES: frozenset[int] = frozenset(
    int(status)
    for operation in _API["operations"].values()
    if operation["client_retry"]["automatic"]
    for status in operation["client_retry"]["statuses"]
)
"""429, 502, 503 and 504: the statuses a propose is retried on, and those whose problem is
``retryable`` when no contract code says otherwise (an injected fault with a code of its own)."""

# -- Idempotency-Key ---------------------------------------------------------------------------------

IDEMPOTENCY_KEY_MAX_CHARS: int = int(_API["limits"]["idempotency_key_max_chars"])
IDEMPOTENCY_KEY_RULE = f"1 to {IDEMPOTENCY_KEY_MAX_CHARS} printable ASCII characters without spaces"
_IDEMPOTENCY_KEY = re.compile(ecma_pattern(_HEADERS["Idempotency-Key"]["schema"]["pattern"]))


def valid_idempotency_key(value: object) -> bool:
    """``Idempotency-Key``: 1 to 255 printable ASCII characters (0x21-0x7E, no space)."""
    return isinstance(value, str) and _IDEMPOTENCY_KEY.search(value) is not None


# -- bearer tokens (the clients' rule) ---------------------------------------------------------------

# The contract takes any bearer token; a client refuses one that cannot travel as a header value
# (printable ASCII without spaces) or that is far longer than any real credential.
TOKEN_MAX_CHARS = 4096
TOKEN_RULE = f"1 to {TOKEN_MAX_CHARS} printable ASCII characters without spaces"
_TOKEN = re.compile(rf"[\x21-\x7E]{{1,{TOKEN_MAX_CHARS}}}")


def valid_token(value: object) -> bool:
    return isinstance(value, str) and _TOKEN.fullmatch(value) is not None


# Shorter tokens are not scrubbed from text: replacing them would garble ordinary words.
REDACTION_MIN_LENGTH = 8
REDACTED = "[redacted]"


def redact(text: str, secret: str) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``[redacted]`` (when it is long enough
    to be told apart from ordinary words)."""
    return text.replace(secret, REDACTED) if len(secret) >= REDACTION_MIN_LENGTH else text


# -- Lucy-Client-Name --------------------------------------------------------------------------------

_CLIENT_NAME = _HEADERS["Lucy-Client-Name"]
CLIENT_NAME_MAX_CHARS: int = int(_API["limits"]["client_name_max_chars"])
# What may not be in a client name: control characters (C0, DEL and C1, from the contract) and lone
# surrogates (text that has no UTF-8 form).
_NOT_IN_NAME = re.compile(_CLIENT_NAME["control_characters"] + r"|[\uD800-\uDFFF]")
_ON_THE_WIRE = re.compile(ecma_pattern(_CLIENT_NAME["schema"]["pattern"]))  # visible ASCII and spaces
_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")  # a literal % travels as %25


def valid_client_name(name: object) -> bool:
    """A name the server takes: no control characters, UTF-8 encodable, and 1 to 100 characters once
    leading and trailing whitespace is trimmed."""
    return (
        isinstance(name, str)
        and _NOT_IN_NAME.search(name) is None
        and 1 <= len(name.strip()) <= CLIENT_NAME_MAX_CHARS
    )


def encode_client_name(name: str) -> str:
    """The header value: the name without spaces around it (a header value cannot begin or end with
    one: HTTP clients refuse to send it; the server trims the name anyway), then visible ASCII and
    spaces as they are, and anything else (and ``%``) percent-encoded as UTF-8 (so a control
    character at either end still reaches the server, which refuses it)."""
    out: list[str] = []
    for char in name.strip(" "):
        if " " <= char <= "~" and char != "%":
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8"))
    return "".join(out)


def decode_client_name(value: str) -> str | None:
    """The name a ``Lucy-Client-Name`` header carries, trimmed; ``None`` when the header breaks the
    rule: not visible ASCII, a stray ``%``, not UTF-8 once decoded, or a decoded name
    ``valid_client_name`` refuses (so a control character is refused even at either end, as the SDK
    refuses it, rather than trimmed away)."""
    if not _ON_THE_WIRE.search(value) or _STRAY_PERCENT.search(value):
        return None
    try:
        decoded = unquote(value, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        return None
    return decoded.strip() if valid_client_name(decoded) else None


def clean_client_name(value: object) -> str | None:
    """A name from elsewhere (an MCP host's client info) made valid: forbidden characters removed,
    trimmed, cut to the maximum length; ``None`` when nothing is left."""
    if not isinstance(value, str):
        return None
    name = _NOT_IN_NAME.sub("", value).strip()[:CLIENT_NAME_MAX_CHARS].strip()
    return name or None


# -- proposals ---------------------------------------------------------------------------------------

PROPOSAL_STATES: tuple[str, ...] = tuple(_API["state_machine"]["states"])
FINAL_PROPOSAL_STATES: frozenset[str] = frozenset(_API["state_machine"]["final"])
"""approved, rejected, expired and superseded: a proposal in one of them never changes again."""
