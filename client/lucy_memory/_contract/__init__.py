"""The contract files (``contracts/`` and ``schemas/``) and the small pieces of code that read them.

Shared by the fake server, the SDK and the MCP server so that all of them apply the very same rules:
strict JSON parsing, RFC 8785 canonical form, JSON Schema validation with the ``x-maxUtf8Bytes``
keyword, the secret patterns, and the wire rules of ``wire`` (base path, permissions, retryable
statuses, Idempotency-Key, tokens, client names, final states). Import from this package only: the
names of its ``__all__`` are its public face; its modules' other names are private.
"""

from lucy_memory._contract import wire
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
from lucy_memory._contract.wire import *  # noqa: F403 - every wire rule is public: see __all__ below

__all__ = [
    "MAX_ERRORS",
    "MAX_POINTER",
    "InvalidJSONError",
    "SchemaError",
    "SchemaValidator",
    "SecretScanner",
    "canonical_bytes",
    "canonical_sha256",
    "load_contract",
    "load_json",
    "load_schema",
    "long_name_error",
    "parameters_validator",
    "parse_json_object",
    "schema_names",
    "schema_validator",
]
# The wire rules (``wire``) are public whole: its own list names them, once.
__all__ += wire.__all__
