"""SPEC 2.1: bad input follows the pipeline order, never a 500, never a state change."""

from __future__ import annotations

import re
import uuid

import pytest

from lucy_memory._contract import load_contract
from tests.conftest import HOOKS
from tests.helpers import PROJECT, V1, proposal_body, propose

pytestmark = pytest.mark.anyio

JSON = {"Content-Type": "application/json"}


async def _state(admin) -> tuple:
    proposals = (await admin.proposals())["items"]
    memories = (await admin.memories())["items"]
    ledger = await admin.ledger()
    return (len(proposals), len(memories), len(ledger))


async def _post_raw(api, body: bytes, headers: dict[str, str] | None = None):
    return await api.post(
        V1 + "/proposals",
        content=body,
        headers={"Idempotency-Key": uuid.uuid4().hex, **JSON, **(headers or {})},
    )


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'"a string"',
        b'{"kind": "fact", "kind": "rule", "content": "x", "scope": {"kind": "project", "id": "p"}}',
        b'{"kind": "fact", "content": "x", "importance": NaN, "scope": {"kind": "project", "id": "p"}}',
        b'{"kind": "fact", "content": "x", "importance": Infinity, "scope": {}}',
        b'{"kind": "fact", "content": "\\ud800", "scope": {"kind": "project", "id": "p"}}',
        b'{"kind": "fact", "content": "\xff\xfe", "scope": {}}',
        b'{"importance": 1e400}',
    ],
)
async def test_malformed_json_is_400_invalid_json_and_changes_nothing(api, admin, body) -> None:
    before = await _state(admin)
    response = await _post_raw(api, body)
    assert (response.status_code, response.json()["code"]) == (400, "invalid_json")
    assert await _state(admin) == before


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b'{"query": "a\x00b"}', "not valid JSON: Invalid control character at line 1 column 13"),
        (b'{"query": }', "not valid JSON: Expecting value at line 1 column 11"),
    ],
)
async def test_invalid_json_says_where_in_one_plain_sentence(api, body, detail) -> None:
    response = await api.post(V1 + "/recall", content=body, headers={"Content-Type": "application/json"})
    assert (response.status_code, response.json()["detail"]) == (400, detail)


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "application/xml",
        "application/json; charset=latin-1",
        'application/json; charset="x"',
    ],
)
async def test_a_body_that_is_not_application_json_is_415(api, content_type) -> None:
    headers = {"Idempotency-Key": "k1"}
    if content_type:
        headers["Content-Type"] = content_type
    response = await api.post(V1 + "/proposals", content=b'{"kind": "fact"}', headers=headers)
    assert (response.status_code, response.json()["code"]) == (415, "unsupported_media_type")


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "Application/JSON; Charset=UTF-8", 'application/json; charset="utf-8"'],
)
async def test_application_json_with_or_without_a_quoted_utf_8_charset_is_taken(api, content_type) -> None:
    response = await api.post(
        V1 + "/recall", content=b'{"query": "x"}', headers={"Content-Type": content_type}
    )
    assert response.status_code == 200, response.text


async def test_over_64_kib_is_413_before_authentication(fake) -> None:
    async with fake.client("wrong-token") as client:
        response = await client.post(V1 + "/recall", content=b"x" * (64 * 1024 + 1), headers=JSON)
    assert (response.status_code, response.json()["code"]) == (413, "payload_too_large")


async def test_a_missing_idempotency_key_is_400_before_schema_validation(api) -> None:
    response = await api.post(V1 + "/proposals", json={"nonsense": True})
    assert (response.status_code, response.json()["code"]) == (400, "idempotency_key_required")
    bad = await api.post(V1 + "/proposals", json=proposal_body(), headers={"Idempotency-Key": "x" * 256})
    assert bad.json()["code"] == "idempotency_key_required"


@pytest.mark.parametrize(
    ("fields", "pointer", "echo"),
    [
        ({"colour": "blue-ish"}, "/colour", "blue-ish"),
        ({"content": "é" * 4097}, "/content", "é" * 4097),
        ({"topic": "Not Kebab"}, "/topic", "Not Kebab"),
        ({"topic": "main-database\n"}, "/topic", None),  # JSON Schema's ECMA-262 `$`: no final newline
        ({"importance": 11}, "/importance", None),
        ({"importance": 2**53}, "/importance", None),
        ({"importance": 9007199254740993}, "/importance", None),
        ({"kind": "opinion"}, "/kind", "opinion"),
        ({"scope": {"kind": "team", "id": "x"}}, "/scope/kind", "team"),
        ({"scope": {"kind": "project", "id": "bad id!"}}, "/scope/id", "bad id!"),
        ({"scope": {"kind": "project", "id": "project_example\n"}}, "/scope/id", None),
        ({"justification": "j" * 2049}, "/justification", "j" * 2049),
    ],
)
async def test_schema_failures_are_422_with_pointers_and_no_echo(api, admin, fields, pointer, echo) -> None:
    before = await _state(admin)
    response = await propose(api, {**proposal_body(), **fields})
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["code"] == "invalid_request"
    assert pointer in [error["pointer"] for error in problem["details"]["errors"]]
    if echo is not None:
        assert echo not in response.text
    assert await _state(admin) == before


async def test_8192_bytes_of_content_is_accepted_and_8193_refused(api) -> None:
    fits = await propose(api, proposal_body("é" * 4096))
    assert fits.status_code == 201
    too_big = await propose(api, proposal_body("é" * 4096 + "x"))
    assert too_big.status_code == 422


async def test_importance_seven_point_zero_counts_as_the_integer_seven(api) -> None:
    response = await propose(api, proposal_body(importance=7.0))
    assert response.status_code == 201
    assert response.json()["proposal"]["importance"] == 7
    assert '"importance":7,' in response.text


@pytest.mark.parametrize(
    ("body", "parent"),
    [
        ({"query": "x", "k" * 3000: 1}, ""),
        ({"query": "x", "scope": {"kind": "user", "id": "u", "k" * 3000: 1}}, "/scope"),
    ],
)
async def test_an_unknown_property_too_long_to_point_at_is_reported_on_its_object(api, body, parent) -> None:
    # problem.schema.json bounds a pointer at 2,048 characters; the response must still match it
    # (the api fixture checks every response against the schemas).
    response = await api.post(V1 + "/recall", json=body)
    assert response.status_code == 422
    assert response.json()["details"]["errors"] == [
        {"pointer": parent, "detail": "has a property whose name is too long to point at; it is not allowed"}
    ]
    assert "k" * 100 not in response.text


@pytest.mark.parametrize("depth", [300, 511])
async def test_a_deeply_nested_unknown_property_is_422_not_500(api, depth) -> None:
    body = '{"query": "x", "extra": ' + "[" * depth + "]" * depth + "}"
    response = await api.post(V1 + "/recall", content=body, headers={"Content-Type": "application/json"})
    assert (response.status_code, response.json()["code"]) == (422, "invalid_request"), response.text[:200]


@pytest.mark.parametrize("depth", [512, 900, *range(955, 1000, 3), 5000])
async def test_json_nested_over_512_levels_is_400_invalid_json_and_journaled(api, admin, depth) -> None:
    # one level for the object itself: a value at ``depth`` nested arrays is 1 + depth levels deep
    # (near the interpreter's recursion limit the schema check's error message used to fail: 500)
    body = '{"query": "x", "kinds": ' + "[" * depth + '"a"' + "]" * depth + "}"
    response = await api.post(V1 + "/recall", content=body, headers={"Content-Type": "application/json"})
    assert (response.status_code, response.json()["code"]) == (400, "invalid_json"), response.text[:200]
    assert "512 levels" in response.json()["detail"]
    [row] = await admin.requests()
    assert (row["request_id"], row["status"]) == (response.headers["Lucy-Request-Id"], 400)


@pytest.mark.parametrize("depth", [900, *range(940, 1000, 3)])
async def test_a_control_body_nested_too_deep_is_400_invalid_json(fake, depth) -> None:
    body = '{"auto_approve": ' + "[" * depth + "1" + "]" * depth + "}"
    async with fake.client(fake.admin_token, event_hooks=HOOKS) as http:
        response = await http.put(
            "/_fake/tenants/tenant_dev/policy", content=body, headers={"Content-Type": "application/json"}
        )
    assert (response.status_code, response.json()["code"]) == (400, "invalid_json"), response.text[:200]


async def test_at_most_100_errors_are_listed_the_first_in_pointer_order(api) -> None:
    reverse = {f"extra{n:03d}": 1 for n in reversed(range(150))}  # sent last-first
    response = await api.post(V1 + "/recall", json={"query": "x", **reverse})
    assert response.status_code == 422
    errors = response.json()["details"]["errors"]
    assert [error["pointer"] for error in errors] == [f"/extra{n:03d}" for n in range(100)]


async def test_a_missing_required_field_points_at_it(api) -> None:
    response = await propose(api, {"kind": "fact", "scope": PROJECT})
    assert {"pointer": "/content", "detail": "is required"} in response.json()["details"]["errors"]


async def test_unknown_routes_and_methods_are_problems(api) -> None:
    missing = await api.get("/api/agent-memory/v1/nothing")
    assert (missing.status_code, missing.json()["code"]) == (404, "not_found")
    wrong = await api.delete(V1 + "/recall")
    assert (wrong.status_code, wrong.json()["code"]) == (405, "method_not_allowed")
    assert wrong.headers["Allow"] == "POST"
    assert wrong.json()["detail"] == "this path does not answer DELETE"


async def test_a_405_never_echoes_a_method_http_does_not_define(api) -> None:
    """The method is the client's text: one shaped like a token is said as "this method"."""
    secret = "ghp_" + "a" * 36
    wrong = await api.request(secret, V1 + "/recall")
    assert (wrong.status_code, wrong.json()["code"]) == (405, "method_not_allowed")
    assert wrong.json()["detail"] == "this path does not answer this method"
    assert secret not in wrong.text


def _control_paths() -> dict[str, set[str]]:
    """Each control path of the contract (path parameters filled) with the methods it takes."""
    control = load_contract("fake-control")
    paths: dict[str, set[str]] = {}
    for op in control["operations"].values():
        path = control["base_path"] + re.sub(r"\{[a-z_]+\}", "x1", op["path"])
        paths.setdefault(path, set()).add(op["method"])
    return paths


CONTROL_PATHS = _control_paths()


@pytest.mark.parametrize("path", sorted(CONTROL_PATHS))
async def test_a_control_path_asked_with_another_method_is_405_allowing_every_method_it_takes(
    admin, path
) -> None:
    """``Allow`` names all of the path's methods (``/_fake/clock``: GET, PUT), not one route's."""
    taken = CONTROL_PATHS[path]
    other = next(m for m in ("PATCH", "DELETE", "PUT", "POST") if m not in taken)
    response = await admin.http.request(other, path)
    assert (response.status_code, response.json()["code"]) == (405, "method_not_allowed")
    assert set(response.headers["Allow"].split(", ")) == taken


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", V1 + "/recall/"),
        ("POST", V1 + "/proposals/"),
        ("GET", V1 + "/proposals/prop_x/"),
        ("GET", "/_fake/ledger/"),
    ],
)
async def test_a_trailing_slash_is_another_path_not_a_redirect(api, method, path) -> None:
    response = await api.request(method, path, json={"query": "x"} if method == "POST" else None)
    assert (response.status_code, response.json()["code"]) == (404, "not_found")
    assert response.headers["Lucy-Request-Id"].startswith("req_")
    assert "Location" not in response.headers


async def test_proposal_status_with_a_body_is_415_and_not_charged(api, admin) -> None:
    created = await propose(api)
    before = await _state(admin)
    for headers in ({}, {"Content-Type": "application/json"}):
        response = await api.request(
            "GET", f"{V1}/proposals/{created.json()['proposal']['id']}", content=b'{"x":1}', headers=headers
        )
        assert (response.status_code, response.json()["code"]) == (415, "unsupported_media_type")
        assert "Lucy-Credits-Charged" not in response.headers
    assert await _state(admin) == before


async def test_route_errors_come_before_authentication(fake) -> None:
    async with fake.client(None) as client:
        assert (await client.get(V1 + "/recall")).status_code == 405
        assert (await client.get("/nowhere")).status_code == 404


async def test_bad_requests_are_not_charged(api, admin) -> None:
    await _post_raw(api, b"nope")
    await propose(api, {**proposal_body(), "importance": 99})
    assert await admin.ledger() == []


async def test_no_nesting_depth_is_a_500_on_a_real_server(live) -> None:
    """Over uvicorn the stack is shallower than in process: the band of depths that the parser took
    and the schema check's error message did not was there (around 967 levels)."""
    async with live.client(event_hooks=HOOKS) as client:
        for depth in range(900, 1010):
            body = '{"query": "x", "kinds": ' + "[" * depth + '"a"' + "]" * depth + "}"
            headers = {"Content-Type": "application/json"}
            response = await client.post(V1 + "/recall", content=body, headers=headers)
            assert (response.status_code, response.json()["code"]) == (400, "invalid_json"), depth
