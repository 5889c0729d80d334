"""Every error is a tool result with isError true, no structuredContent, and a text that names the code,
the idempotency_key where there is one, and what is safe to do next."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lucy_memory import TransportRequest, TransportResponse
from lucy_memory._contract import load_contract
from tests.mcp.helpers import DEV_TOKEN, PROJECT, connect, one_line, proposal_args, text_of
from tests.sdk.helpers import RaisingTransport, RecordingSleep, refused

pytestmark = pytest.mark.anyio

CONTRACT_ERRORS: dict[str, Any] = load_contract("agent-memory-api")["errors"]
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "recall": ("memory_recall", {"query": "database"}),
    "propose": ("memory_propose", {**proposal_args(), "idempotency_key": "key-under-test"}),
    "proposal_status": ("memory_proposal_status", {"proposal_id": "prop_AAAAAAAAAAAAAAAAAAAAAA"}),
}


class CannedProblem:
    """A transport that answers every request with one contract problem (for codes the fake cannot be
    made to answer on demand, and to hold every code of the contract to the same rules)."""

    def __init__(self, code: str) -> None:
        entry = CONTRACT_ERRORS[code]
        self.status = entry["status"]
        self.body = {
            "type": f"https://agent-memory.invalid/problems/{code}",
            "title": entry["title"],
            "status": entry["status"],
            "detail": f"canned {code}",
            "code": code,
            "request_id": "req_" + "C" * 22,
            "retryable": entry["retryable"],
        }
        self.sent: list[TransportRequest] = []

    async def send(self, request: TransportRequest) -> TransportResponse:
        self.sent.append(request)
        headers = {"content-type": "application/problem+json", "lucy-request-id": "req_" + "C" * 22}
        if self.status == 429:
            headers["retry-after"] = "2"
        return TransportResponse(self.status, headers, json.dumps(self.body).encode())


def _error_text(result: Any) -> str:
    assert result.is_error is True
    assert result.structured_content is None
    return one_line(text_of(result))


@pytest.mark.parametrize("operation", list(CALLS))
@pytest.mark.parametrize("code", sorted(CONTRACT_ERRORS))
async def test_every_contract_error_code_is_an_error_result_naming_the_code_and_the_next_step(
    fake, code, operation
) -> None:
    transport = CannedProblem(code)
    tool, arguments = CALLS[operation]
    sleeps = RecordingSleep()
    async with connect(fake, transport=transport, sleep=sleeps) as client:
        text = _error_text(await client.call_tool(tool, arguments))
    status = CONTRACT_ERRORS[code]["status"]
    assert text.startswith(f"Error {code} (HTTP {status}) from {operation}: canned {code}")
    next_step = text.split(" Next: ", 1)[1]
    assert len(next_step) > 20
    if operation == "propose":
        assert "idempotency_key: key-under-test" in text
        retried = status in (429, 502, 503, 504)
        assert len(transport.sent) == (3 if retried else 1)
        if CONTRACT_ERRORS[code]["retryable"]:
            assert "same arguments and idempotency_key key-under-test" in next_step
    else:
        assert "idempotency_key: " not in text
        assert len(transport.sent) == 1
        if CONTRACT_ERRORS[code]["retryable"]:
            assert f"Repeating {operation} may charge a credit" in next_step
    if not CONTRACT_ERRORS[code]["retryable"] and code != "internal":  # a 500 may have executed
        assert "same arguments and idempotency_key" not in next_step


async def test_an_unknown_proposal_is_not_found_and_nothing_was_charged(fake, admin) -> None:
    async with connect(fake) as client:
        text = _error_text(
            await client.call_tool("memory_proposal_status", {"proposal_id": "prop_AAAAAAAAAAAAAAAAAAAAAA"})
        )
    assert text.startswith("Error not_found (HTTP 404) from proposal_status")
    assert "Nothing was executed or charged" in text
    assert "check the proposal_id" in text
    assert await admin.ledger(account="acct_dev") == []


@pytest.mark.parametrize(
    ("tool", "arguments", "pointer"),
    [
        ("memory_recall", {"query": ""}, "/query"),
        ("memory_recall", {"query": "x", "idempotency_key": "k"}, "/idempotency_key"),
        ("memory_propose", proposal_args("é" * 4097), "/content"),  # 4097 chars but 8194 UTF-8 bytes
        ("memory_proposal_status", {"proposal_id": "mem_nope"}, "/proposal_id"),
    ],
)
async def test_invalid_arguments_are_refused_before_sending_with_the_pointer(
    fake, admin, tool, arguments, pointer
) -> None:
    async with connect(fake) as client:
        text = _error_text(await client.call_tool(tool, arguments))
    assert "Error invalid_request (refused before sending)" in text
    assert f"Problems: {pointer} " in text
    assert "Nothing was executed or charged. Fix the arguments" in text
    assert await admin.requests() == []


async def test_a_secret_is_refused_before_sending(fake, admin) -> None:
    async with connect(fake) as client:
        text = _error_text(await client.call_tool("memory_propose", proposal_args("db password=hunter22!")))
    assert text.startswith("Error secret_detected (refused before sending) from propose")
    assert "hunter22" not in text
    assert "Field: content" in text
    assert "idempotency_key: " in text
    assert await admin.requests() == []


async def test_a_secret_looking_idempotency_key_is_refused_naming_the_key_not_the_text(fake, admin) -> None:
    arguments = {**proposal_args(), "idempotency_key": "AKIAIOSFODNN7EXAMPLE"}
    async with connect(fake) as client:
        text = _error_text(await client.call_tool("memory_propose", arguments))
    assert text.startswith("Error secret_detected (refused before sending) from propose")
    assert "AKIAIOSFODNN7EXAMPLE" not in text
    assert "Field: idempotency_key" in text
    next_step = text.split("Next: ", 1)[1]
    assert "another idempotency_key, or none" in next_step
    assert "Remove the secret-looking text" not in next_step
    assert await admin.requests() == []


async def test_a_malformed_idempotency_key_is_refused_before_sending(fake, admin) -> None:
    async with connect(fake) as client:
        text = _error_text(
            await client.call_tool("memory_propose", {**proposal_args(), "idempotency_key": "has space"})
        )
    assert text.startswith("Error idempotency_key_required (refused before sending)")
    assert "or omit it to have one derived" in text
    assert await admin.requests() == []


async def test_a_refused_token_is_unauthenticated_and_retrying_will_not_help(fake) -> None:
    async with connect(fake, token="not-a-known-token-at-all") as client:
        text = _error_text(await client.call_tool("memory_recall", {"query": "x"}))
    assert text.startswith("Error unauthenticated (HTTP 401) from recall")
    assert "retrying will not help until LUCY_MEMORY_TOKEN is fixed" in text
    assert "not-a-known-token-at-all" not in text


async def test_a_credential_without_propose_is_permission_denied_by_the_service(fake, admin) -> None:
    credential = await admin.create_credential(permissions=("memory:read",), scopes=[PROJECT])
    async with connect(fake, token=credential["token"]) as client:
        text = _error_text(await client.call_tool("memory_propose", proposal_args()))
    assert text.startswith("Error permission_denied (HTTP 403) from propose")
    assert "retrying will not help" in text
    assert "idempotency_key: " in text


async def test_an_invisible_scope_is_scope_forbidden(fake) -> None:
    arguments = proposal_args(scope={"kind": "project", "id": "someone-elses"})
    async with connect(fake) as client:
        text = _error_text(await client.call_tool("memory_propose", arguments))
    assert text.startswith("Error scope_forbidden (HTTP 403) from propose")
    assert "use one of its visible scopes" in text


async def _approved(client: Any, admin: Any, content: str, **fields: Any) -> dict[str, Any]:
    result = await client.call_tool("memory_propose", proposal_args(content, **fields))
    assert result.structured_content is not None, text_of(result)
    proposal: dict[str, Any] = await admin.approve(result.structured_content["proposal"]["id"])
    return proposal


async def test_replacing_errors_say_how_to_recover(fake, admin) -> None:
    async with connect(fake) as client:
        first = await _approved(client, admin, "We use PostgreSQL 15.", topic="main-database")
        memory_id = first["memory"]["id"]
        await _approved(client, admin, "We use PostgreSQL 16.", topic="main-database")
        await _approved(client, admin, "Deploys on Fridays are frozen.", topic="deploy-freeze")

        stale = await client.call_tool(
            "memory_propose",
            proposal_args("We use PostgreSQL 17.", replaces={"memory_id": memory_id, "version": 1}),
        )
        unknown = await client.call_tool(
            "memory_propose",
            proposal_args("x y z", replaces={"memory_id": "mem_" + "Z" * 22, "version": 1}),
        )
        taken = await client.call_tool(
            "memory_propose",
            proposal_args(
                "Deploys are frozen.", topic="deploy-freeze", replaces={"memory_id": memory_id, "version": 2}
            ),
        )
    stale_text = _error_text(stale)
    assert stale_text.startswith("Error version_conflict (HTTP 409) from propose")
    assert f"Current version of {memory_id}: 2." in stale_text
    assert "propose against its current version" in stale_text
    assert _error_text(unknown).startswith("Error memory_not_found (HTTP 404)")
    assert "recall the memory to get its current id" in _error_text(unknown)
    assert _error_text(taken).startswith("Error topic_conflict (HTTP 409)")


async def test_a_key_reused_for_other_arguments_says_to_omit_it_or_use_a_new_one(fake) -> None:
    async with connect(fake) as client:
        await client.call_tool("memory_propose", {**proposal_args("A."), "idempotency_key": "shared-key"})
        result = await client.call_tool(
            "memory_propose", {**proposal_args("B."), "idempotency_key": "shared-key"}
        )
    text = _error_text(result)
    assert text.startswith("Error idempotency_key_reused (HTTP 422) from propose")
    assert "idempotency_key: shared-key" in text
    assert "omit it" in text


async def test_no_credits_and_billing_down_are_reported_without_a_charge(fake, admin) -> None:
    await admin.set_billing(False)
    async with connect(fake) as client:
        billing = _error_text(await client.call_tool("memory_recall", {"query": "x"}))
        await admin.set_billing(True)
        await admin.set_balance("acct_dev", 0)
        broke = _error_text(await client.call_tool("memory_propose", proposal_args()))
    assert billing.startswith("Error billing_unavailable (HTTP 503) from recall")
    assert "Calling again later may succeed" in billing
    assert broke.startswith("Error insufficient_credits (HTTP 402) from propose")
    assert "retrying will not help until the balance is topped up" in broke


@pytest.mark.parametrize(
    ("status", "code"),
    [(429, "rate_limited"), (500, "internal"), (502, "bad_gateway"), (504, "gateway_timeout")],
)
async def test_injected_service_failures_name_the_code(fake, admin, status, code) -> None:
    options = {"retry_after": 7} if status == 429 else {}
    await admin.add_fault("recall", status, **options)
    async with connect(fake) as client:
        text = _error_text(await client.call_tool("memory_recall", {"query": "x"}))
    assert text.startswith(f"Error {code} (HTTP {status}) from recall")
    assert "Repeating recall may charge a credit if it executes" in text
    if status == 429:
        assert "wait 7 s" in text


async def test_propose_retried_out_on_503_says_repeat_with_the_key_later_not_at_once(fake, admin) -> None:
    """Lucy's rules give a key three attempts in a row: after them the advice is to repeat later, and
    a repeat once the fake has forgotten the failures (10 minutes of its clock) is no finding."""
    await admin.add_fault("propose", 503, count=3)
    sleeps = RecordingSleep()
    async with connect(fake, sleep=sleeps) as client:
        result = await client.call_tool("memory_propose", proposal_args())
        text = _error_text(result)
        key = text.split("idempotency_key: ", 1)[1].split(" ", 1)[0]
        await admin.advance_clock(601)
        again = await client.call_tool("memory_propose", proposal_args())
    assert text.startswith("Error unavailable (HTTP 503) from propose")
    assert len(sleeps.delays) == 2
    assert (
        "Its automatic retries are used up: tell the user the memory service is failing, and call"
        f" memory_propose again with the same arguments and idempotency_key {key} later, not at once"
    ) in text
    assert "Safe next step" not in text
    assert again.structured_content is not None
    assert again.structured_content["idempotency_key"] == key
    assert await admin.findings() == []


async def test_propose_whose_retry_waits_past_the_limit_gives_the_key_to_repeat_with_after_it(
    fake, admin
) -> None:
    await admin.add_fault("propose", 429, retry_after=90)
    async with connect(fake) as client:
        text = _error_text(await client.call_tool("memory_propose", proposal_args()))
    key = text.split("idempotency_key: ", 1)[1].split(" ", 1)[0]
    assert text.startswith("Error rate_limited (HTTP 429) from propose")
    assert "The service asked to wait 90 s." in text
    same_key = f"call memory_propose again with the same arguments and idempotency_key {key}"
    assert f"Safe next step: {same_key}" in text


async def test_a_lost_propose_response_says_repeat_with_the_key_and_that_replays(fake, admin) -> None:
    await admin.add_fault("propose", 503, phase="after_commit", drop_connection=True)
    async with connect(fake) as client:
        lost = _error_text(await client.call_tool("memory_propose", proposal_args()))
        key = lost.split("idempotency_key: ", 1)[1].split(" ", 1)[0]
        again = await client.call_tool("memory_propose", {**proposal_args(), "idempotency_key": key})
    assert lost.startswith("Error response_lost (no response) from propose")
    assert "The outcome is unknown: the proposal may have been created and charged" in lost
    assert f"same arguments and idempotency_key {key}" in lost
    assert again.structured_content is not None
    assert "This is a replay" in text_of(again)
    assert len((await admin.proposals())["items"]) == 1


async def test_a_lost_recall_response_says_repeating_may_charge_again(fake, admin) -> None:
    await admin.add_fault("recall", 503, phase="after_commit", drop_connection=True)
    async with connect(fake) as client:
        text = _error_text(await client.call_tool("memory_recall", {"query": "x"}))
    assert text.startswith("Error response_lost (no response) from recall")
    assert "the recall may have executed and been charged; repeating it may charge again" in text
    assert "idempotency_key" not in text
    assert DEV_TOKEN not in text


@pytest.mark.parametrize("operation", list(CALLS))
async def test_a_refused_connection_says_nothing_was_sent_or_charged(fake, operation) -> None:
    tool, arguments = CALLS[operation]
    transport = RaisingTransport(refused())  # nothing reaches the service
    async with connect(fake, transport=transport) as client:
        text = _error_text(await client.call_tool(tool, arguments))
    assert text.startswith(f"Error connection_failed (no connection) from {operation}:")
    assert "Nothing was sent or charged" in text
    assert "may have" not in text
    assert "may charge" not in text
    assert len(transport.sent) == 1
    if operation == "propose":
        assert "same arguments and idempotency_key key-under-test" in text


@pytest.mark.parametrize("operation", ["recall", "propose"])
async def test_a_404_on_recall_or_propose_points_at_the_base_url_not_at_an_argument(fake, operation) -> None:
    """Neither call names an object: a 404 means the server at the base URL has no such path."""
    tool, arguments = CALLS[operation]
    async with connect(fake, transport=CannedProblem("not_found"), sleep=RecordingSleep()) as client:
        text = _error_text(await client.call_tool(tool, arguments))
    next_step = text.split(" Next: ", 1)[1]
    assert "LUCY_MEMORY_BASE_URL must point at the Agent Memory API" in next_step
    assert "proposal_id" not in next_step


@pytest.mark.parametrize("operation", ["recall", "propose"])
async def test_an_unexpected_failure_is_logged_without_the_token(
    fake, caplog: pytest.LogCaptureFixture, operation: str
) -> None:
    """A custom transport's exception may quote the request's headers; the log blanks the token.
    A propose's answer names the key it was made with: repeating with it is the safe next step."""
    keys: list[str | None] = []

    class Leaky:
        async def send(self, request: TransportRequest) -> TransportResponse:
            keys.append(request.idempotency_key)
            raise RuntimeError(f"proxy refused request with headers {request.headers!r}")

    async with connect(fake, transport=Leaky()) as client:
        text = _error_text(await client.call_tool(*CALLS[operation]))
    assert text.startswith(f"Error internal_error from {operation}:")
    if operation == "propose":
        assert keys[0] is not None
        assert f"idempotency_key: {keys[0]} Next: " in text
    else:
        assert "idempotency_key:" not in text
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "proxy refused request" in logged
    assert "[token]" in logged
    assert DEV_TOKEN not in logged


async def test_a_refused_propose_with_a_given_key_says_to_call_again_with_a_new_key_or_none(
    fake, admin
) -> None:
    """A 402 is final: repeating the request with its key, once topped up, is no retry Lucy allows (the
    fake reports it: propose_retry_not_retryable). A derived key moves on by itself; a given one must
    be changed by the host, and the advice says so."""
    await admin.set_balance("acct_dev", 0)
    arguments = {**proposal_args(), "idempotency_key": "host-key-1"}
    async with connect(fake) as client:
        refused_text = _error_text(await client.call_tool("memory_propose", arguments))
        await admin.set_balance("acct_dev", 10)
        followed = await client.call_tool("memory_propose", {**arguments, "idempotency_key": "host-key-2"})
    assert refused_text.startswith("Error insufficient_credits (HTTP 402) from propose")
    assert "call memory_propose with a new idempotency_key, or none" in refused_text
    assert "not with host-key-1" in refused_text
    assert followed.is_error is False
    assert await admin.findings() == []


async def test_a_retryable_failure_keeps_the_advice_to_repeat_with_the_same_key(fake, admin) -> None:
    await admin.add_fault("propose", 503, count=3)
    async with connect(fake, sleep=RecordingSleep()) as client:
        text = _error_text(await client.call_tool("memory_propose", CALLS["propose"][1]))
    assert "new idempotency_key" not in text
    assert "idempotency_key key-under-test" in text


async def test_a_null_idempotency_key_is_refused_as_the_tool_schema_says(fake, admin) -> None:
    """The tool's input schema takes a string or no key: null is refused as any other non-string, and
    nothing is sent."""
    async with connect(fake) as client:
        text = _error_text(
            await client.call_tool("memory_propose", {**proposal_args(), "idempotency_key": None})
        )
    assert text.startswith("Error idempotency_key_required (refused before sending) from propose")
    assert await admin.requests() == []
