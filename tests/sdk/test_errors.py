"""Must hold 7: typed errors with code, status, request id and ``retryable``; ``VersionConflictError``
carries ``current_version``; a server-side ``secret_detected`` rejection is a normal result."""

from __future__ import annotations

import httpx
import pytest

from lucy_memory import (
    APIError,
    BillingUnavailableError,
    InsufficientCreditsError,
    LucyMemoryError,
    NotFoundError,
    PermissionDeniedError,
    TransportResponse,
    UnauthenticatedError,
    VersionConflictError,
)
from lucy_memory._contract import load_contract
from lucy_memory.errors import api_error_class
from tests.helpers import V1
from tests.helpers import proposal_body as raw_proposal_body
from tests.sdk.helpers import PROJECT, proposal_json

pytestmark = pytest.mark.anyio

CONTRACT_ERRORS = load_contract("agent-memory-api")["errors"]


def test_every_contract_error_code_has_its_own_class() -> None:
    classes = {code: api_error_class(code) for code in CONTRACT_ERRORS}
    assert all(cls is not APIError and cls.code == code for code, cls in classes.items())
    assert len(set(classes.values())) == len(classes)
    assert api_error_class("something_new") is APIError


async def test_version_conflict_carries_the_current_version(fake, admin, new_client) -> None:
    client = new_client(fake)
    first = await client.propose(proposal_json("We use PostgreSQL 15.", topic="main-database"))
    memory = (await admin.approve(first.proposal.id))["memory"]
    second = await client.propose(proposal_json("We use PostgreSQL 16.", topic="main-database"))
    await admin.approve(second.proposal.id)
    stale = {"memory_id": memory["id"], "version": 1}

    with pytest.raises(VersionConflictError) as caught:
        await client.propose(proposal_json("We use PostgreSQL 17.", replaces=stale), idempotency_key="k-409")

    error = caught.value
    assert (error.memory_id, error.expected_version, error.current_version) == (memory["id"], 1, 2)
    assert (error.status, error.code, error.retryable) == (409, "version_conflict", False)
    assert error.idempotency_key == "k-409"
    [row] = await admin.requests(operation="propose", limit=1)
    assert error.request_id == row["request_id"]


async def _arrange(case, fake, admin):
    """Returns (client options, method name, request JSON) for a server-side error."""
    if case == "insufficient_credits":
        await admin.set_balance("acct_dev", 0)
        return {}, "recall", '{"query": "database"}'
    if case == "billing_unavailable":
        await admin.set_billing(False)
        return {}, "propose", proposal_json()
    if case == "permission_denied":
        credential = await admin.create_credential(permissions=("memory:read",), scopes=[PROJECT])
        return {"token": credential["token"]}, "propose", proposal_json()
    if case == "not_found":
        return {}, "proposal_status", '{"proposal_id": "prop_aaaaaaaaaaaaaaaaaaaaaaaa"}'
    return {"token": "x" * 40}, "recall", '{"query": "database"}'  # unauthenticated


@pytest.mark.parametrize(
    ("case", "error_class", "status", "retryable"),
    [
        ("insufficient_credits", InsufficientCreditsError, 402, False),
        ("billing_unavailable", BillingUnavailableError, 503, True),
        ("permission_denied", PermissionDeniedError, 403, False),
        ("not_found", NotFoundError, 404, False),
        ("unauthenticated", UnauthenticatedError, 401, False),
    ],
)
async def test_every_server_error_carries_code_status_request_id_and_retryable(
    fake, admin, new_client, case, error_class, status, retryable
) -> None:
    options, method, request_json = await _arrange(case, fake, admin)
    client = new_client(fake, **options)

    with pytest.raises(error_class) as caught:
        await getattr(client, method)(request_json)

    error = caught.value
    assert (error.code, error.status, error.retryable) == (case, status, retryable)
    assert retryable is CONTRACT_ERRORS[case]["retryable"]
    assert error.request_id is not None
    assert error.request_id.startswith("req_")
    journal = await admin.requests()
    if case != "unauthenticated":  # a 401 comes before the journal (pipeline step 3)
        assert journal[-1]["request_id"] == error.request_id
    assert error.operation == {"recall": "recall", "propose": "propose"}.get(method, "proposal_status")


async def test_billing_unavailable_on_propose_is_retried_and_then_carries_key_and_attempts(
    fake, admin, new_client, sleeps
) -> None:
    await admin.set_billing(False)
    client = new_client(fake, random=lambda: 0.0)
    with pytest.raises(BillingUnavailableError) as caught:
        await client.propose(proposal_json(), idempotency_key="billing-key")
    assert (caught.value.attempts, caught.value.idempotency_key) == (3, "billing-key")
    assert len(await admin.requests(operation="propose")) == 3
    assert sleeps.delays == [0.5, 1.0]


class ReplaysAStoredAnswer:
    """A custom ``Transport``: answers every request with one recorded response."""

    max_retries = 2

    def __init__(self, response: httpx.Response) -> None:
        self.response = TransportResponse(
            status=response.status_code,
            headers={k.lower(): v for k, v in response.headers.items()},
            body=response.content,
        )
        self.sent = 0

    async def send(self, request):
        self.sent += 1
        return self.response


async def test_a_server_side_secret_detected_rejection_is_a_normal_result(fake, api, new_client) -> None:
    # The SDK refuses secrets itself, so the server's answer to one is recorded with plain httpx …
    answer = await api.post(
        V1 + "/proposals",
        json=raw_proposal_body("password=hunter22"),
        headers={"Idempotency-Key": "raw-secret"},
    )
    assert answer.status_code == 201
    # … and handed to the client by a custom transport, as a server with a wider secret policy would.
    transport = ReplaysAStoredAnswer(answer)
    client = new_client(fake, transport=transport)

    result = await client.propose(proposal_json("An innocent sentence."), idempotency_key="raw-secret")

    assert transport.sent == 1
    assert result.proposal.status == "rejected"
    assert result.proposal.reason == "secret_detected"
    assert result.proposal.is_saved is False
    assert result.proposal.is_final is True
    assert result.credits.charged == 1


async def test_an_answer_that_breaks_the_contract_is_an_invalid_response_error(fake, new_client) -> None:
    transport = ReplaysAStoredAnswer(httpx.Response(200, json={"memories": "nope"}))
    client = new_client(fake, transport=transport)
    with pytest.raises(LucyMemoryError) as caught:
        await client.recall('{"query": "database"}')
    assert caught.value.code == "invalid_response"


async def test_a_problem_body_without_json_still_maps_by_status(fake, new_client) -> None:
    transport = ReplaysAStoredAnswer(httpx.Response(502, text="<html>proxy</html>"))
    client = new_client(fake, transport=transport)
    with pytest.raises(LucyMemoryError) as caught:
        await client.recall('{"query": "database"}')
    assert (caught.value.code, caught.value.status, caught.value.retryable) == ("bad_gateway", 502, True)
    assert transport.sent == 1
