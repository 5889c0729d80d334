"""The contract files (``contracts/`` and ``schemas/``) and the small pieces of code that read them.

Shared by the fake server, the SDK and the MCP server so that all of them apply the very same rules:
strict JSON parsing, RFC 8785 canonical form, JSON Schema validation with the ``x-maxUtf8Bytes``
keyword, the secret patterns, and the wire rules of ``wire`` (base path, permissions, retryable
statuses, Idempotency-Key, tokens, client names, final states). Import from this package only: the
names below are its public face; its modules' other names are private.
"""

from lucy_memory._contract.canonical import canonical_bytes, canonical_sha256
from lucy_memory._contract.files import load_contract, load_json, load_schema, schema_names
from lucy_memory._contract.jsonparse import InvalidJSONError, parse_json_object
from lucy_memory._contract.secrets import SecretScanner
from lucy_memory._contract.validation import (
    MAX_ERRORS,
    MAX_POINTER,
    SchemaError,
    SchemaValidator,
    long_name_error,
    parameters_validator,
    schema_validator,
)
from lucy_memory._contract.wire import (
    API_BASE_PATH,
    CLIENT_NAME_MAX_CHARS,
    FINAL_PROPOSAL_STATES,
    IDEMPOTENCY_KEY_MAX_CHARS,
    IDEMPOTENCY_KEY_RULE,
    OPERATION_PERMISSIONS,
    PERMISSIONS,
    PROPOSAL_STATES,
    REDACTED,
    REDACTION_MIN_LENGTH,
    RETRYABLE_OPERATIONS,
    RETRYABLE_STATUSES,
    TOKEN_MAX_CHARS,
    TOKEN_RULE,
    clean_client_name,
    decode_client_name,
    encode_client_name,
    redact,
    valid_client_name,
    valid_idempotency_key,
    valid_token,
)

__all__ = [
    "API_BASE_PATH",
    "CLIENT_NAME_MAX_CHARS",
    "FINAL_PROPOSAL_STATES",
    "IDEMPOTENCY_KEY_MAX_CHARS",
    "IDEMPOTENCY_KEY_RULE",
    "MAX_ERRORS",
    "MAX_POINTER",
    "OPERATION_PERMISSIONS",
    "PERMISSIONS",
    "PROPOSAL_STATES",
    "REDACTED",
    "REDACTION_MIN_LENGTH",
    "RETRYABLE_OPERATIONS",
    "RETRYABLE_STATUSES",
    "TOKEN_MAX_CHARS",
    "TOKEN_RULE",
    "InvalidJSONError",
    "SchemaError",
    "SchemaValidator",
    "SecretScanner",
    "canonical_bytes",
    "canonical_sha256",
    "clean_client_name",
    "decode_client_name",
    "encode_client_name",
    "load_contract",
    "load_json",
    "load_schema",
    "long_name_error",
    "parameters_validator",
    "parse_json_object",
    "redact",
    "schema_names",
    "schema_validator",
    "valid_client_name",
    "valid_idempotency_key",
    "valid_token",
]
