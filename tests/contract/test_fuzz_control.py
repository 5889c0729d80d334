"""Issue 7, point 2: schemathesis over ``/_fake/openapi.json`` against a throwaway fake.

Operations that change the whole fake by design (reset, faults, billing, clock, revoke) are left out
of random generation and covered by the example tests below, each sent as a schemathesis ``Case`` and
validated with the same checks. A response produced by an injected fault (``Fake-Lucy-Fault``) is
exempt from the server-error check, and only such a response.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from schemathesis import Case
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.core.result import Ok

from lucy_memory._contract import load_contract
from tests.contract.fuzzing import (
    DISRUPTIVE_CONTROL_OPERATIONS,
    FUZZ_CREDITS,
    FUZZ_TOKEN,
    STREAMING_CONTROL_OPERATIONS,
    TALLY,
    OperationTests,
    close_throwaway,
    fuzz_config,
    not_a_server_error_unless_injected,
    throwaway_fake,
)

FAKE, _DIRECTORY = throwaway_fake("control")
SERVED = schemathesis.openapi.from_asgi(
    "/_fake/openapi.json", FAKE.app, config=fuzz_config("adminBearer", FAKE.admin_token)
)
CONTROL = SERVED.exclude(operation_id=list(STREAMING_CONTROL_OPERATIONS))
schema = CONTROL.exclude(operation_id=list(DISRUPTIVE_CONTROL_OPERATIONS))
V1 = schemathesis.openapi.from_asgi("/openapi.json", FAKE.app, config=fuzz_config("lucyBearer", FUZZ_TOKEN))
CONTRACT = load_contract("fake-control")
V1_BASE = load_contract("agent-memory-api")["base_path"]
INJECTED_SAFE = {
    "excluded_checks": [not_a_server_error],
    "additional_checks": [not_a_server_error_unless_injected],
}


# Closed when the session ends, not with the module: the fake is made at import, once, and under
# pytest-xdist's worksteal a worker may run this module's tests in two stretches.
@pytest.fixture(scope="session", autouse=True)
def _close_the_fake() -> Iterator[None]:
    yield
    close_throwaway(FAKE, _DIRECTORY)


@pytest.fixture(autouse=True)
def _fresh() -> None:
    FAKE.reset()


def _operation_ids(loaded: Any) -> set[str]:
    return {
        result.ok().definition.raw["operationId"]
        for result in loaded.get_all_operations()
        if isinstance(result, Ok)
    }


def test_random_generation_covers_every_control_operation_but_the_disruptive_ones() -> None:
    assert set(DISRUPTIVE_CONTROL_OPERATIONS) <= set(CONTRACT["operations"])
    assert _operation_ids(SERVED) == set(CONTRACT["operations"]) | set(STREAMING_CONTROL_OPERATIONS)
    assert _operation_ids(CONTROL) == set(CONTRACT["operations"])
    assert _operation_ids(schema) == set(CONTRACT["operations"]) - set(DISRUPTIVE_CONTROL_OPERATIONS)


def _every_case(case: Case) -> None:
    FAKE.reset()
    TALLY.start("control")
    response = case.call_and_validate(**INJECTED_SAFE)
    TALLY.record("control", response.status_code)


FUZZ = OperationTests(schema, _every_case)


@pytest.mark.parametrize("operation", FUZZ.labels)
def test_every_other_control_operation_holds_the_contract_under_fuzzing(
    operation: str, request: pytest.FixtureRequest
) -> None:
    FUZZ.run(operation, request.config)


# -- the disruptive operations, by example ---------------------------------------------------------


def _control(operation_id: str, **fields: Any) -> Any:
    headers = {"Authorization": f"Bearer {FAKE.admin_token}"}  # a hand-made Case carries no auth
    case = CONTROL.find_operation_by_id(operation_id).Case(headers=headers, **fields)
    response = case.call_and_validate(**INJECTED_SAFE)
    TALLY.record("control examples", response.status_code)
    return response


def _recall(*, billing_down: bool = False) -> Any:
    case = V1[f"{V1_BASE}/recall"]["POST"].Case(
        body={"query": "Which database did we approve?"}, headers={"Authorization": f"Bearer {FUZZ_TOKEN}"}
    )
    # with billing down the documented answer is 503 billing_unavailable: every other check still applies
    checks: dict[str, Any] = {"excluded_checks": [not_a_server_error]} if billing_down else INJECTED_SAFE
    response = case.call_and_validate(**checks)
    TALLY.record("control examples", response.status_code)
    return response


def test_reset_forgets_what_a_test_did() -> None:
    TALLY.start("control examples")
    _control("set_balance", path_parameters={"account": "acct_dev"}, body={"balance": 3})
    assert _control("reset").json()["reset"] is True
    assert _recall().headers["lucy-credits-remaining"] == [str(FUZZ_CREDITS - 1)]


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_an_injected_fault_conforms_to_the_contract_and_is_exempt_only_from_the_server_error_check(
    status: int,
) -> None:
    TALLY.start("control examples")
    created = _control("create_fault", body={"operation": "recall", "status": status})
    assert created.status_code == 201
    assert [f["fault_id"] for f in _control("list_faults").json()["items"]] == [created.json()["fault_id"]]
    injected = _recall()
    assert injected.status_code == status
    assert injected.headers["fake-lucy-fault"] == [created.json()["fault_id"]]
    if status >= 500:
        case = V1[f"{V1_BASE}/recall"]["POST"].Case(body={"query": "database"})
        with pytest.raises(FailureGroup):  # the plain check does flag it: the exemption is what passes it
            case.validate_response(injected, checks=[not_a_server_error])


def test_clear_faults_disarms_every_fault() -> None:
    TALLY.start("control examples")
    _control("create_fault", body={"operation": "any", "status": 503, "count": 5})
    assert _control("clear_faults").status_code == 204
    assert _control("list_faults").json()["items"] == []
    assert _recall().status_code == 200


def test_billing_down_answers_503_billing_unavailable() -> None:
    TALLY.start("control examples")
    assert _control("set_billing", body={"available": False}).json() == {"available": False}
    response = _recall(billing_down=True)
    assert (response.status_code, response.json()["code"]) == (503, "billing_unavailable")
    _control("set_billing", body={"available": True})
    assert _recall().status_code == 200


def test_the_clock_moves_forward_only() -> None:
    TALLY.start("control examples")
    frozen = _control("set_clock", body={"frozen": True}).json()
    advanced = _control("advance_clock", body={"seconds": 3600}).json()
    assert advanced["now"] > frozen["now"]
    backwards = _control("set_clock", body={"now": frozen["now"]})
    assert (backwards.status_code, backwards.json()["code"]) == (409, "clock_regression")
    impossible = _control("set_clock", body={"now": "2999-02-30T00:00:00.000000Z"})
    assert (impossible.status_code, impossible.json()["details"]["errors"][0]["pointer"]) == (422, "/now")
    negative = _control("advance_clock", body={"seconds": -5})
    assert (negative.status_code, negative.json()["code"]) == (409, "clock_regression")
    assert negative.json()["details"] == {"now": advanced["now"]}
    assert _control("get_clock").json()["now"] == advanced["now"]
    for operation, body, pointer in (
        ("set_clock", {"now": "9999-12-31T23:59:59.999999Z"}, "/now"),
        ("advance_clock", {"seconds": 315_360_000}, "/seconds"),  # ten years, allowed by the schema
    ):
        if operation == "advance_clock":
            _control("set_clock", body={"now": "8995-01-01T00:00:00.000000Z"})
        too_late = _control(operation, body=body)
        assert (too_late.status_code, too_late.json()["code"]) == (422, "invalid_request"), too_late.text
        assert too_late.json()["details"]["errors"][0]["pointer"] == pointer


def test_a_revoked_credential_is_answered_401() -> None:
    TALLY.start("control examples")
    created = _control(
        "create_credential",
        body={"tenant": "tenant_dev", "permissions": ["memory:read"], "scopes": []},
    ).json()
    assert (
        _control("revoke_credential", path_parameters={"credential_id": created["credential_id"]}).status_code
        == 204
    )
    case = V1[f"{V1_BASE}/recall"]["POST"].Case(
        body={"query": "database"}, headers={"Authorization": f"Bearer {created['token']}"}
    )
    response = case.call()
    assert response.status_code == 401


def test_a_snapshot_put_back_restores_the_state_and_a_broken_one_is_a_422() -> None:
    TALLY.start("control examples")
    taken = _control("get_snapshot").json()
    _control("set_balance", path_parameters={"account": "acct_dev"}, body={"balance": 3})
    assert _control("put_snapshot", body=taken).json() == {"restored": True}
    assert _recall().headers["lucy-credits-remaining"] == [str(FUZZ_CREDITS - 1)]
    broken = _control("put_snapshot", body={**taken, "tenants": "none"})
    assert (broken.status_code, broken.json()["details"]["errors"][0]["pointer"]) == (422, "/tenants")


# -- issue 18: the new refusals, as schemathesis cases under the same checks ------------------------

_FORGED = {
    "lone surrogate": base64.urlsafe_b64encode(b'["\\ud800", 1]').decode().rstrip("="),
    "nested deep": base64.urlsafe_b64encode(b"[" * 5000 + b"]" * 5000).decode().rstrip("="),
    "not base64": "%%%",
}


@pytest.mark.parametrize("operation_id", ["list_proposals", "list_memories", "list_requests", "list_ledger"])
@pytest.mark.parametrize("cursor", list(_FORGED.values()), ids=list(_FORGED))
def test_a_cursor_the_fake_did_not_issue_is_the_documented_422(operation_id: str, cursor: str) -> None:
    TALLY.start("control examples")
    response = _control(operation_id, query={"cursor": cursor})
    assert response.status_code == 422
    assert response.json()["details"]["errors"] == [
        {"pointer": "/cursor", "detail": "is not a cursor this server issued"}
    ]


@pytest.mark.parametrize(
    "headers",
    [
        {"Idempotency-Key": "AKIAIOSFODNN7EXAMPLE"},
        {"Lucy-Client-Name": "ghp_1234567890abcdefghijABCDEFGHIJ123456"},
    ],
    ids=["idempotency key", "client name"],
)
def test_a_secret_looking_header_is_the_documented_400_invalid_header(headers: dict[str, str]) -> None:
    TALLY.start("control examples")
    project = {"kind": "project", "id": "project_example"}
    case = V1[f"{V1_BASE}/proposals"]["POST"].Case(
        body={"kind": "fact", "content": "A harmless note.", "scope": project},
        headers={"Authorization": f"Bearer {FUZZ_TOKEN}", "Idempotency-Key": "fuzz-example-1", **headers},
    )
    response = case.call_and_validate(**INJECTED_SAFE)
    TALLY.record("control examples", response.status_code)
    assert (response.status_code, response.json()["code"]) == (400, "invalid_header")
    assert "AKIAIOSFODNN7EXAMPLE" not in response.text
    assert "ghp_1234567890" not in response.text
