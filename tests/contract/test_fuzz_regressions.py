"""Issue 7, point 5: each defect the schemathesis runs found, fixed, and named after what was found."""

from __future__ import annotations

import pytest

from tests.contract.fuzzing import FUZZ_TOKEN, fuzz_config
from tests.helpers import V1, proposal_body, propose

pytestmark = pytest.mark.anyio


# -- v1, negative_data_rejection on the Lucy-Client-Name header ---------------------------------------


@pytest.mark.parametrize("raw", ["×ø\u009b".encode(), b"caf\xe9", b"tab\there"])
async def test_lucy_client_name_with_raw_bytes_outside_visible_ascii_is_400_invalid_header(api, raw) -> None:
    """Found: ``Lucy-Client-Name: ×ø\\xc2\\x9b`` was accepted and stored as ``source``; the contract
    allows visible ASCII and spaces only, anything else percent-encoded."""
    for response in (
        await api.post(V1 + "/recall", json={"query": "database"}, headers={"Lucy-Client-Name": raw}),
        await propose(api, proposal_body(), headers={"Lucy-Client-Name": raw}),
    ):
        assert response.status_code == 400
        assert response.json()["code"] == "invalid_header"
        assert "Lucy-Client-Name" in response.json()["detail"]
        assert "details" not in response.json()  # SPEC 2.2: details only where the error lists them


async def test_lucy_client_name_decoding_to_a_c1_control_character_is_400_invalid_header(api) -> None:
    """Found with the case above: a C1 control character (U+009B) passed the control-character rule."""
    refused = await propose(api, proposal_body(), headers={"Lucy-Client-Name": "agent%C2%9B"})
    assert (refused.status_code, refused.json()["code"]) == (400, "invalid_header")
    accepted = await propose(api, proposal_body(), headers={"Lucy-Client-Name": "caf%C3%A9 agent"})
    assert accepted.status_code == 201
    assert accepted.json()["proposal"]["source"] == "café agent"


# -- control API, negative_data_rejection on query and path parameters -------------------------------


async def test_list_memories_with_a_scope_kind_outside_the_enum_is_422(admin) -> None:
    """Found: ``GET /_fake/memories?scope_kind=AAA`` answered 200 with no items."""
    response = await admin.http.get("/_fake/memories", params={"scope_kind": "AAA"})
    assert response.status_code == 422
    assert response.json()["details"]["errors"][0]["pointer"] == "/scope_kind"
    assert (await admin.http.get("/_fake/memories", params={"scope_kind": "project"})).status_code == 200


async def test_a_control_path_parameter_that_breaks_its_schema_is_422_and_creates_nothing(admin) -> None:
    """Found: ``PUT /_fake/tenants/<201 characters>/policy`` answered 200 and created that tenant."""
    tenant = "0" * 201
    response = await admin.http.put(f"/_fake/tenants/{tenant}/policy", json={"auto_approve": "all"})
    assert response.status_code == 422
    assert response.json()["details"]["errors"][0]["pointer"] == "/tenant"
    assert (await admin.http.get(f"/_fake/tenants/{'0' * 200}/policy")).status_code == 404
    for method, path in [
        ("DELETE", "/_fake/credentials/not a credential"),
        ("PUT", "/_fake/accounts/bad account/credits"),
        ("POST", "/_fake/proposals/prop_short/approve"),
        ("DELETE", "/_fake/memories/memory-1"),
    ]:
        refused = await admin.http.request(method, path, json={"balance": 1} if method == "PUT" else None)
        assert refused.status_code == 422, (method, path)
        assert refused.json()["code"] == "invalid_request"


async def test_a_control_query_parameter_named_like_an_internal_argument_is_just_unknown(admin) -> None:
    """Found while fixing the path parameters: FastAPI read the control endpoints' default arguments
    (``_schema``, ``_handler``) as query parameters, so ``?_schema=…`` reached the handler."""
    response = await admin.http.get("/_fake/clock", params={"_schema": "control-clock.schema.json"})
    assert response.status_code == 422
    assert response.json()["details"]["errors"][0]["pointer"] == "/_schema"


# -- v1, the proposal_status path parameter -----------------------------------------------------------


@pytest.mark.parametrize("proposal_id", ["bad", "prop_short", "mem_aaaaaaaaaaaaaaaaaaaaaaaa"])
async def test_a_malformed_proposal_id_is_422_pointing_to_proposal_id_and_uncharged(api, proposal_id) -> None:
    """Found while triaging the fuzzer's negative path parameters (it accepts any 4xx): a malformed id
    answered 404 not_found, where the contract says 422 invalid_request with pointer /proposal_id."""
    response = await api.get(f"{V1}/proposals/{proposal_id}")
    assert response.status_code == 422
    assert response.json()["details"]["errors"] == [
        {"pointer": "/proposal_id", "detail": "must match the pattern ^prop_[A-Za-z0-9_-]{20,}$"}
    ]
    assert "lucy-credits-charged" not in response.headers
    unknown = await api.get(f"{V1}/proposals/prop_{'a' * 22}")
    assert (unknown.status_code, unknown.json()["code"]) == (404, "not_found")


@pytest.mark.parametrize("path", ["/_fake/requests", "/_fake/ledger", "/_fake/clock"])
async def test_a_pointer_to_an_unknown_query_parameter_with_a_newline_matches_the_problem_schema(
    admin, path
) -> None:
    """Found by the deep profile: ``GET /_fake/requests?bP\\x9f\\n=…`` answered a 422 whose pointer
    ``/bP\\x9f\\n`` broke ``problem.schema.json``: its pattern ``^(/.*)?$`` refused a newline, which a
    JSON Pointer may contain. (The ``admin`` client checks every problem body against the schema.)"""
    response = await admin.http.get(path, params={"bad\nname": "x"})
    assert response.status_code == 422
    assert response.json()["details"]["errors"] == [
        {"pointer": "/bad\nname", "detail": "is not a parameter of this operation"}
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("value", ["05", "00", "+1", "010"])
async def test_retry_attempt_with_a_sign_or_leading_zeros_is_invalid_header(api, value) -> None:
    response = await api.post(
        "/api/agent-memory/v1/recall", json={"query": "x"}, headers={"Lucy-Retry-Attempt": value}
    )
    assert (response.status_code, response.json()["code"]) == (400, "invalid_header")


def test_the_negative_data_check_counts_413_and_431_as_refusals() -> None:
    # A stateful run drew a body over 64 KiB in a negative case: 413 is the contract's refusal (step 2),
    # as 431 is for a header section over the parser's limit; neither is schema-violating data accepted.
    for scheme, token in (("lucyBearer", FUZZ_TOKEN), ("adminBearer", "fake-admin-token")):
        checks = fuzz_config(scheme, token).projects.get_default().checks
        assert checks.negative_data_rejection.enabled
        assert {"413", "431", "400", "422"} <= set(checks.negative_data_rejection.expected_statuses)
        assert "200" not in checks.negative_data_rejection.expected_statuses
