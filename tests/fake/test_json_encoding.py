"""The fake's response encoder: orjson, with the standard library as the fallback."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from fake_lucy.http.problems import json_bytes

_SCALARS = st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text()
_JSON = st.recursive(
    _SCALARS,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5),
    max_leaves=30,
)


def _stdlib(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@given(_JSON)
def test_without_floats_the_bytes_are_the_standard_librarys(value: Any) -> None:
    try:
        expected = _stdlib(value)
    except UnicodeEncodeError:  # a lone surrogate: neither encoder can write it as UTF-8
        return
    assert json_bytes(value) == expected


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=5))
def test_floats_decode_to_the_same_values(values: list[float]) -> None:
    # orjson may spell a float another way (0.00001 for 1e-05); the value is the same.
    assert json.loads(json_bytes(values)) == values


def test_values_orjson_refuses_take_the_standard_librarys_path() -> None:
    assert json_bytes({"balance": 2**70}) == b'{"balance":1180591620717411303424}'
    assert json_bytes({1: "a"}) == b'{"1":"a"}'


def test_a_recall_shaped_body_is_compact_utf8_in_insertion_order() -> None:
    body = {"memories": [{"content": "café \u2028 \x00", "score": 7.48}], "request_id": "req_x"}
    expected = '{"memories":[{"content":"café \u2028 \\u0000","score":7.48}],"request_id":"req_x"}'
    assert json_bytes(body) == expected.encode()
