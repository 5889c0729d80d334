"""Issue 7, point 1: schemathesis over the served ``/openapi.json``, authenticated, every v1 operation.

The fake is reset before every example (and every stateful scenario), so each one starts from the
seeded state with a million credits: no example depends on another, and 402 never drowns the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from schemathesis import Case, Response
from schemathesis.core.result import Ok

from lucy_memory._contract import load_contract
from tests.contract.fuzzing import (
    FUZZ_TOKEN,
    TALLY,
    OperationTests,
    close_throwaway,
    fuzz_config,
    repair_positive_headers,
    stateful_settings,
    throwaway_fake,
)

FAKE, _DIRECTORY = throwaway_fake("v1")
schema = schemathesis.openapi.from_asgi(
    "/openapi.json", FAKE.app, config=fuzz_config("lucyBearer", FUZZ_TOKEN)
)
CONTRACT = load_contract("agent-memory-api")


# Closed when the session ends, not with the module: the fake is made at import, once, and under
# pytest-xdist's worksteal a worker may run this module's tests in two stretches.
@pytest.fixture(scope="session", autouse=True)
def _close_the_fake() -> Iterator[None]:
    yield
    close_throwaway(FAKE, _DIRECTORY)


def test_the_fuzzer_sees_every_v1_operation_of_the_contract() -> None:
    seen = {result.ok().label for result in schema.get_all_operations() if isinstance(result, Ok)}
    expected = {
        f"{op['method']} {CONTRACT['base_path']}{op['path']}" for op in CONTRACT["operations"].values()
    }
    assert seen == expected


def _every_case(case: Case) -> None:
    FAKE.reset()
    repair_positive_headers(case)
    TALLY.start("v1")
    response = case.call_and_validate()
    TALLY.record("v1", response.status_code)
    assert response.status_code != 402, "the reset should have restored the fuzzing credits"


FUZZ = OperationTests(schema, _every_case)


@pytest.mark.parametrize("operation", FUZZ.labels)
def test_every_v1_operation_holds_the_contract_under_fuzzing(
    operation: str, request: pytest.FixtureRequest
) -> None:
    FUZZ.run(operation, request.config)


class _V1Workflow(schema.as_state_machine()):  # type: ignore[misc]
    """propose → (link GetProposalStatus) → proposal_status, with every check after every step."""

    linked_status_found = 0

    def setup(self) -> None:
        FAKE.reset()
        TALLY.start("v1 stateful")

    def after_call(self, response: Response, case: Case) -> None:
        TALLY.record("v1 stateful", response.status_code)
        is_status = case.operation.label.startswith("GET ")
        if is_status and response.status_code == 200 and case.path_parameters:
            _V1Workflow.linked_status_found += 1

    def validate_response(self, response: Response, case: Case, *args: Any, **kwargs: Any) -> None:
        super().validate_response(response, case, *args, **kwargs)
        assert response.status_code != 402, "the reset should have restored the fuzzing credits"


def test_stateful_propose_then_status_through_the_openapi_link() -> None:
    _V1Workflow.linked_status_found = 0
    _V1Workflow.run(settings=stateful_settings())
    # A random proposal id is never found: a 200 from proposal_status means the link carried the id.
    assert _V1Workflow.linked_status_found > 0
