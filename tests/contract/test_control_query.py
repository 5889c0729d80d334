"""The control API's query and body rules: the contract lists every query parameter an operation
takes, and an unknown one is 422 invalid_request with the pointer ``/<name>`` on every control
operation (and the event stream); an operation without a request schema takes no body but ``{}``.
Either way the operation does nothing: a reset with a tenant named in its query or body resets
nothing, rather than the whole server."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from lucy_memory._contract import load_contract, load_json
from tests.helpers import approved_memory

pytestmark = pytest.mark.anyio

CONTROL = load_contract("fake-control")
EXAMPLES = load_json("contracts/openapi-examples.json")["fake-control"]["operations"]
GETS = {
    name: op
    for name, op in CONTROL["operations"].items()
    if op["method"] == "GET" and not op["path_parameters"]
} | {"get_policy": CONTROL["operations"]["get_policy"]}


def _url(op: dict[str, Any]) -> str:
    return CONTROL["base_path"] + op["path"].replace("{tenant}", "tenant_dev")


@pytest.mark.parametrize("name", sorted(GETS))
async def test_an_unknown_query_parameter_on_a_control_get_is_422_with_its_pointer(admin, name) -> None:
    response = await admin.http.get(_url(GETS[name]), params={"surprise": "1"})
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_request"
    assert response.json()["details"]["errors"] == [
        {"pointer": "/surprise", "detail": "is not a parameter of this operation"}
    ]


async def test_an_unknown_query_parameter_too_long_to_point_at_is_reported_on_the_parameters(admin) -> None:
    response = await admin.http.get(_url(GETS["list_proposals"]), params={"z" * 3000: "1"})
    assert response.status_code == 422
    assert response.json()["details"]["errors"] == [
        {"pointer": "", "detail": "has a parameter whose name is too long to point at; it is not allowed"}
    ]


_VALUES = {"integer": "1", "boolean": "true", "string": "x"}
_IDS = {
    "definitions.schema.json#/$defs/tenant_id": "tenant_dev",
    "definitions.schema.json#/$defs/credential_id": "cred_dev_default",
    "definitions.schema.json#/$defs/account_id": "acct_dev",
    "scope.schema.json#/properties/id": "ws_dev",
}


def _value(spec: dict[str, Any]) -> str:
    """A value the contract's query parameter takes."""
    if "enum" in spec:
        return str(spec["enum"][0])
    return _IDS[spec["schema"]] if "schema" in spec else _VALUES[spec["type"]]


@pytest.mark.parametrize("name", sorted(GETS))
async def test_every_query_parameter_the_contract_lists_is_accepted(admin, name) -> None:
    op = GETS[name]
    params = {param: _value(spec) for param, spec in op["query"].items() if param != "cursor"}
    response = await admin.http.get(_url(op), params=params)
    assert response.status_code == 200, response.text


REPEATABLE = sorted(name for name, op in GETS.items() if op["query"])


@pytest.mark.parametrize("name", REPEATABLE)
async def test_a_query_parameter_given_twice_is_422_at_its_pointer_whichever_value_comes_last(
    admin, name
) -> None:
    """Refused rather than half-read: ``?status=bogus&status=pending`` used to pass as pending."""
    op = GETS[name]
    param, spec = next(iter(op["query"].items()))
    good = _value(spec)
    for values in ([good, good], ["bogus!", good], [good, "bogus!"]):
        response = await admin.http.get(_url(op), params=[(param, value) for value in values])
        assert response.status_code == 422, (param, values)
        assert response.json()["details"]["errors"] == [
            {"pointer": f"/{param}", "detail": "is given more than once; give it once"}
        ]


async def test_the_event_stream_refuses_a_repeated_query_parameter_too(admin) -> None:
    response = await admin.http.get("/_fake/events", params=[("after", "abc"), ("after", "5")])
    assert response.status_code == 422
    assert response.json()["details"]["errors"][0]["pointer"] == "/after"


@pytest.mark.parametrize(
    ("path", "kind"), [("/_fake/proposals", "proposals"), ("/_fake/memories", "memories")]
)
async def test_proposals_and_memories_take_the_documented_limit(api, admin, path, kind) -> None:
    assert CONTROL["operations"][f"list_{kind}"]["query"]["limit"]["maximum"] == 1000
    for content in ("We use PostgreSQL 16.", "We deploy on Fridays.", "Answers are short."):
        await approved_memory(api, admin, content)
    first = (await admin.http.get(path, params={"limit": 2})).json()
    assert len(first["items"]) == 2
    assert first["next_cursor"] is not None
    rest = (await admin.http.get(path, params={"limit": 2, "cursor": first["next_cursor"]})).json()
    assert len(rest["items"]) == 1
    assert rest["next_cursor"] is None
    for bad in ("0", "1001", "two"):
        refused = await admin.http.get(path, params={"limit": bad})
        assert refused.status_code == 422
        assert refused.json()["details"]["errors"][0]["pointer"] == "/limit"


async def test_memories_include_every_version_unless_include_history_is_false(api, admin) -> None:
    assert CONTROL["operations"]["list_memories"]["query"]["include_history"]["default"] is True
    first = await approved_memory(api, admin, "We use PostgreSQL 15.", topic="main-database")
    await approved_memory(api, admin, "We use PostgreSQL 16.", topic="main-database")
    assert first["memory"]["version"] == 1
    versions = [(m["id"], m["version"]) for m in (await admin.memories())["items"]]
    assert versions == [(first["memory"]["id"], 1), (first["memory"]["id"], 2)]
    latest = [(m["id"], m["version"]) for m in (await admin.memories(include_history="false"))["items"]]
    assert latest == [(first["memory"]["id"], 2)]


def _forged(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    ("path", "cursor"),
    [
        ("/proposals", 9 * 10**29),  # too large for a SQLite integer
        ("/proposals", -1),
        ("/proposals", True),
        ("/proposals", "12"),
        ("/requests", 2**63),
        ("/ledger", [1, 2]),
        ("/memories", [{"a": 1}, 2]),  # a value SQLite cannot bind
        ("/memories", ["mem_x", 2**64]),
        ("/memories", ["mem_x", False]),
        ("/memories", 5),
    ],
)
async def test_a_forged_cursor_is_422_never_a_500(admin, path, cursor) -> None:
    response = await admin.http.get(CONTROL["base_path"] + path, params={"cursor": _forged(cursor)})
    assert response.status_code == 422, response.text
    assert response.json()["details"]["errors"] == [
        {"pointer": "/cursor", "detail": "is not a cursor this server issued"}
    ]


@pytest.mark.parametrize("limit", ["²", "５", "١", "+5", " 5", "5.0", "1" * 30])
async def test_a_limit_that_is_not_ascii_digits_is_422_never_a_500(admin, limit) -> None:
    for path in ("/proposals", "/memories", "/requests"):
        response = await admin.http.get(CONTROL["base_path"] + path, params={"limit": limit})
        assert response.status_code == 422, (path, response.text)
        assert response.json()["details"]["errors"][0]["pointer"] == "/limit"


def _any_url(name: str) -> str:
    """The operation's URL with the examples' path parameters (valid ones: the path is checked first)."""
    path = CONTROL["operations"][name]["path"]
    for param, value in (EXAMPLES[name].get("parameters") or {}).items():
        path = path.replace("{" + param + "}", value)
    return CONTROL["base_path"] + path


@pytest.mark.parametrize("name", sorted(CONTROL["operations"]))
async def test_an_unknown_query_parameter_is_422_on_every_control_operation(admin, name) -> None:
    op = CONTROL["operations"][name]
    response = await admin.http.request(op["method"], _any_url(name), params={"tenant_x": "ci-42"})
    assert response.status_code == 422, response.text
    assert response.json()["details"]["errors"] == [
        {"pointer": "/tenant_x", "detail": "is not a parameter of this operation"}
    ]


NO_BODY = sorted(name for name, op in CONTROL["operations"].items() if op["request_schema"] is None)


@pytest.mark.parametrize("name", NO_BODY)
async def test_an_operation_without_a_request_schema_refuses_a_body_but_an_empty_object(admin, name) -> None:
    op = CONTROL["operations"][name]
    url = _any_url(name)
    sent = await admin.http.request(op["method"], url, json={"tenant": "ci-42", "a/b": 1})
    assert sent.status_code == 422, sent.text
    assert sent.json()["details"]["errors"] == [
        {"pointer": "/tenant", "detail": "is not an allowed property: this operation takes no body"},
        {"pointer": "/a~1b", "detail": "is not an allowed property: this operation takes no body"},
    ]
    plain, json_type = {"Content-Type": "text/plain"}, {"Content-Type": "application/json"}
    text = await admin.http.request(op["method"], url, content=b"hello", headers=plain)
    assert (text.status_code, text.json()["code"]) == (415, "unsupported_media_type")
    broken = await admin.http.request(op["method"], url, content=b"{", headers=json_type)
    assert (broken.status_code, broken.json()["code"]) == (400, "invalid_json")


async def test_a_reset_that_names_a_tenant_resets_nothing(admin, api) -> None:
    """POST /_fake/reset is the whole server's (a tenant's is its tenant admin token's): a tenant
    named in the query or the body is refused, not read as the whole server's reset."""
    await admin.create_tenant("ci-42")
    await admin.set_clock(frozen=True)
    frozen = await admin.clock()
    for query, body in (({"tenant": "ci-42"}, None), ({}, {"tenant": "ci-42"})):
        refused = await admin.http.post("/_fake/reset", params=query, json=body)
        assert refused.status_code == 422, refused.text
    assert "ci-42" in {tenant["tenant"] for tenant in await admin.tenants()}
    assert await admin.clock() == frozen
    assert (await admin.http.post("/_fake/reset", json={})).status_code == 200  # {} is no body
    assert "ci-42" not in {tenant["tenant"] for tenant in await admin.tenants()}


async def test_clearing_the_faults_of_one_credential_is_refused_not_taken_for_all(admin) -> None:
    await admin.add_fault("recall", 503)
    refused = await admin.http.delete("/_fake/faults", params={"credential_id": "cred_dev_default"})
    assert refused.status_code == 422
    assert len(await admin.faults()) == 1


@pytest.mark.parametrize("path", ["/proposals", "/memories", "/requests", "/ledger", "/findings", "/tenants"])
async def test_an_empty_cursor_was_never_issued_and_is_422(admin, path) -> None:
    response = await admin.http.get(CONTROL["base_path"] + path, params={"cursor": ""})
    assert response.status_code == 422, response.text
    assert response.json()["details"]["errors"] == [
        {"pointer": "/cursor", "detail": "is not a cursor this server issued"}
    ]


@pytest.mark.parametrize(
    ("params", "headers", "status", "pointer"),
    [
        ({"surprise": "1"}, {}, 422, "/surprise"),
        ({"after": "12x"}, {}, 422, "/after"),
        ({}, {"Last-Event-ID": "12x"}, 400, None),
    ],
)
async def test_the_event_stream_takes_its_documented_query_and_header_only(
    admin, params, headers, status, pointer
) -> None:
    response = await admin.http.get(
        "/_fake/events", params=params, headers={"Accept": "text/event-stream", **headers}
    )
    assert response.status_code == status, response.text
    if pointer is None:
        assert response.json()["code"] == "invalid_header"
    else:
        assert [error["pointer"] for error in response.json()["details"]["errors"]] == [pointer]


@pytest.mark.parametrize(
    ("path", "param", "value"),
    [
        ("/proposals", "tenant", "bad!"),
        ("/memories", "tenant", "a tenant"),
        ("/requests", "credential_id", "dev"),
        ("/findings", "credential_id", "cred_"),
        ("/ledger", "account", "acct dev"),
        ("/memories", "scope_id", "bad!"),
        ("/memories", "scope_id", ""),
    ],
)
async def test_an_id_filter_that_is_no_id_of_its_kind_is_422_not_an_empty_page(
    admin, path, param, value
) -> None:
    """A typo that cannot name anything (a space, a missing prefix) is told, not answered with nothing."""
    response = await admin.http.get(CONTROL["base_path"] + path, params={param: value})
    assert response.status_code == 422, response.text
    [error] = response.json()["details"]["errors"]
    assert error["pointer"] == f"/{param}"
    assert error["detail"].startswith("must match the pattern")
