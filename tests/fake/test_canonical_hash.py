"""The propose body's hash (``fake_lucy.http.canonical``): orjson where it writes RFC 8785's bytes,
``rfc8785`` elsewhere; always the digest ``canonical_sha256`` gives."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from fake_lucy.http import canonical
from fake_lucy.http.canonical import body_sha256
from lucy_memory._contract import canonical_sha256, parse_json_object
from lucy_memory._contract.jsonparse import MAX_DEPTH

# What a parsed body can hold: any text (the parser refuses lone surrogates), integers on both sides
# of the exactly-held range, finite floats, and keys in and out of ASCII (UTF-16 order differs from
# code-point order only beyond the Basic Multilingual Plane).
_TEXT = st.text(st.characters(exclude_categories=["Cs"]))
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) - 5, max_value=2**53 + 5)
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT
)
_KEYS = _TEXT | st.sampled_from(["kind", "content", "scope", "id", "topic", "\ue000", "\U0001f600", "a"])
_JSON = st.recursive(
    _SCALARS,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(_KEYS, children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=500)
@given(st.dictionaries(_KEYS, _JSON, max_size=6))
def test_the_hash_is_the_rfc_8785_hash_of_any_body(body: dict[str, Any]) -> None:
    try:
        expected = canonical_sha256(body)
    except rfc8785.IntegerDomainError:  # an integer a double cannot hold: such a body has no hash
        with pytest.raises(rfc8785.IntegerDomainError):
            body_sha256(body)
        return
    assert body_sha256(body) == expected


def test_a_propose_body_takes_orjson_and_a_float_or_a_wide_key_does_not() -> None:
    body = {
        "kind": "fact",
        "content": "Tab\there, “quotes”, \u2028 and 😀.",
        "scope": {"kind": "workspace", "id": "w"},
    }
    assert canonical._plain(body)
    assert body_sha256(body) == canonical_sha256(body)
    assert not canonical._plain({**body, "importance": 5.0})
    assert not canonical._plain({**body, "\U0001f600": 1})
    assert not canonical._plain({**body, "importance": 2**53})
    assert body_sha256({**body, "importance": 5.0}) == canonical_sha256({**body, "importance": 5.0})


def test_a_body_nested_as_deep_as_the_parser_allows_has_the_same_hash() -> None:
    depth = MAX_DEPTH - 1  # the object itself is the first level
    body = parse_json_object(b'{"a":' + b"[" * depth + b"]" * depth + b"}")
    assert body_sha256(body) == canonical_sha256(body)
