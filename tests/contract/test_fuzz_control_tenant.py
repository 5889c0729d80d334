"""Issue 15: schemathesis over ``/_fake/openapi.json`` with a *tenant* admin token.

A tenant admin may call every control operation: what it reaches is its own tenant, and what it
may not do is answered as the contract says (403 ``forbidden`` for the server-wide operations, 404
for another tenant's objects). So no operation is left out of random generation here: before each
example the tenant is reset to its created state (its admin token kept), and after it the rest of
the fake is checked to be as it was. The server admin token's run, the new tenant operations
included, is ``test_fuzz_control.py``.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from schemathesis import Case
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok

from fake_lucy.domain import tenants
from lucy_memory._contract import load_contract
from tests.contract.fuzzing import (
    FUZZ_TOKEN,
    STREAMING_CONTROL_OPERATIONS,
    TALLY,
    OperationTests,
    close_throwaway,
    fuzz_config,
    not_a_server_error_unless_injected,
    throwaway_fake,
)

FAKE, _DIRECTORY = throwaway_fake("control-tenant")
# A name no generated path parameter meets by chance, so that the fuzzer's DELETE /tenants/{tenant}
# cannot delete the tenant whose token it holds.
TENANT = "fuzz-" + secrets.token_hex(12)
with FAKE.fake.db.write() as _conn:
    _CREATED = tenants.create(_conn, FAKE.fake.ids, scope=tenants.SERVER, tenant=TENANT)
SERVED = schemathesis.openapi.from_asgi(
    "/_fake/openapi.json", FAKE.app, config=fuzz_config("adminBearer", _CREATED.admin_token)
)
CONTROL = SERVED.exclude(operation_id=list(STREAMING_CONTROL_OPERATIONS))
CONTRACT = load_contract("fake-control")
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


def _reset_the_tenant() -> None:
    with FAKE.fake.db.write() as conn:
        tenants.reset(conn, TENANT)


def _everything_but_the_tenant() -> dict[str, Any]:
    """The rows of every other tenant, the server clock and the billing switch."""
    conn = FAKE.fake.db.conn
    queries = {
        "tenants": "SELECT * FROM tenants WHERE id != ? ORDER BY id",
        "credentials": "SELECT * FROM credentials WHERE tenant_id != ? ORDER BY id",
        "accounts": "SELECT * FROM accounts WHERE tenant_id != ? ORDER BY id",
        "memories": "SELECT * FROM memories WHERE tenant_id != ? ORDER BY seq",
        "proposals": "SELECT * FROM proposals WHERE tenant_id != ? ORDER BY seq",
        "ledger": "SELECT * FROM ledger WHERE tenant_id != ? ORDER BY seq",
        "faults": "SELECT * FROM faults WHERE tenant_id IS NOT ? ORDER BY seq",
    }
    state = {name: [tuple(row) for row in conn.execute(sql, (TENANT,))] for name, sql in queries.items()}
    state["server"] = [
        tuple(conn.execute("SELECT clock_offset_us, clock_frozen_us, billing_available FROM server_state"))
    ]
    return state


BEFORE = _everything_but_the_tenant()


def test_random_generation_covers_every_control_operation() -> None:
    covered = {
        result.ok().definition.raw["operationId"]
        for result in CONTROL.get_all_operations()
        if isinstance(result, Ok)
    }
    served = {result.ok().definition.raw["operationId"] for result in SERVED.get_all_operations()}
    assert served == set(CONTRACT["operations"]) | set(STREAMING_CONTROL_OPERATIONS)
    assert covered == set(CONTRACT["operations"])
    assert {"create_tenant", "delete_tenant"} <= covered


def _every_case(case: Case) -> None:
    _reset_the_tenant()
    TALLY.start("control, tenant admin")
    response = case.call_and_validate(**INJECTED_SAFE)
    TALLY.record("control, tenant admin", response.status_code)
    assert _everything_but_the_tenant() == BEFORE, "a tenant admin changed something outside its tenant"


FUZZ = OperationTests(CONTROL, _every_case)


@pytest.mark.parametrize("operation", FUZZ.labels)
def test_every_control_operation_holds_the_contract_with_a_tenant_admin_token(
    operation: str, request: pytest.FixtureRequest
) -> None:
    FUZZ.run(operation, request.config)


def test_the_server_wide_operations_are_403_forbidden_by_example() -> None:
    TALLY.start("control, tenant admin")
    headers = {"Authorization": f"Bearer {_CREATED.admin_token}"}
    for operation_id, body in (
        ("create_tenant", {"tenant": "another"}),
        ("set_billing", {"available": False}),
    ):
        case = CONTROL.find_operation_by_id(operation_id).Case(headers=headers, body=body)
        response = case.call_and_validate(**INJECTED_SAFE)
        TALLY.record("control, tenant admin", response.status_code)
        assert (response.status_code, response.json()["code"]) == (403, "forbidden")
    assert _everything_but_the_tenant() == BEFORE


def test_the_tenant_admin_token_is_refused_on_v1() -> None:
    v1 = load_contract("agent-memory-api")["base_path"]
    loaded = schemathesis.openapi.from_asgi(
        "/openapi.json", FAKE.app, config=fuzz_config("lucyBearer", FUZZ_TOKEN)
    )
    case = loaded[f"{v1}/recall"]["POST"].Case(
        body={"query": "database"}, headers={"Authorization": f"Bearer {_CREATED.admin_token}"}
    )
    response = case.call()
    assert (response.status_code, response.json()["code"]) == (401, "unauthenticated")
