"""The contract files (``contracts/`` and ``schemas/``) and the small pieces of code that read them.

Shared by the fake server and the SDK so that both validate against the very same files:
strict JSON parsing, RFC 8785 canonical form, JSON Schema validation with the
``x-maxUtf8Bytes`` keyword, and the secret patterns.
"""

from lucy_memory._contract.canonical import canonical_bytes, canonical_sha256
from lucy_memory._contract.files import load_contract, load_json, load_schema, schema_names
from lucy_memory._contract.jsonparse import InvalidJSONError, parse_json_object
from lucy_memory._contract.secrets import SecretScanner
from lucy_memory._contract.validation import SchemaError, SchemaValidator, schema_validator

__all__ = [
    "InvalidJSONError",
    "SchemaError",
    "SchemaValidator",
    "SecretScanner",
    "canonical_bytes",
    "canonical_sha256",
    "load_contract",
    "load_json",
    "load_schema",
    "parse_json_object",
    "schema_names",
    "schema_validator",
]
