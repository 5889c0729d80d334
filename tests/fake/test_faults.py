"""Issue 3, point 5 (and the lost-response story of point 6): fault injection (SPEC 3.4)."""

from __future__ import annotations

import json
import socket
from typing import Any

import anyio
import httpx
import pytest

from fake_lucy.testing import AdminError, FakeAdmin, InProcessFake, LiveServer
from lucy_memory._contract import load_contract
from tests.conftest import HOOKS
from tests.helpers import V1, proposal_body, propose, recall, status

pytestmark = pytest.mark.anyio

ERRORS = load_contract("agent-memory-api")["errors"]


async def charged_operations(admin: FakeAdmin) -> list[str]:
    return [row["operation"] for row in await admin.ledger(account="acct_dev")]


@pytest.mark.parametrize(
    ("status_code", "code"),
    [
        (429, "rate_limited"),
        (500, "internal"),
        (502, "bad_gateway"),
        (503, "unavailable"),
        (504, "gateway_timeout"),
    ],
)
async def test_a_before_fault_answers_with_the_default_code_of_its_status_uncharged(
    api, admin, status_code: int, code: str
) -> None:
    fault = await admin.add_fault("propose", status_code)
    assert fault["remaining"] == 1
    response = await propose(api)
    assert response.status_code == status_code
    problem = response.json()
    assert (problem["code"], problem["status"]) == (code, status_code)
    assert problem["retryable"] is ERRORS[code]["retryable"]
    assert problem["request_id"] == response.headers["Lucy-Request-Id"]
    assert response.headers["Fake-Lucy-Fault"] == fault["fault_id"]
    if status_code == 429:
        assert response.headers["Retry-After"] == "1"
    else:
        assert "Retry-After" not in response.headers
    assert (await admin.proposals())["items"] == []
    assert await charged_operations(admin) == []
    assert await admin.faults() == []
    journal = (await admin.requests())[-1]
    assert (journal["status"], journal["charged"], journal["fault_id"]) == (
        status_code,
        False,
        fault["fault_id"],
    )


async def test_a_fault_may_set_its_own_code_and_retry_after(api, admin) -> None:
    fault = await admin.add_fault("recall", 503, code="maintenance_window", retry_after=7)
    response = await recall(api, "database")
    assert response.status_code == 503
    problem = response.json()
    assert (problem["code"], problem["status"], problem["retryable"]) == ("maintenance_window", 503, True)
    assert problem["type"].endswith("/maintenance_window"), "type = problem_type_base + code"
    assert response.headers["Retry-After"] == "7"
    assert response.headers["Fake-Lucy-Fault"] == fault["fault_id"]


@pytest.mark.parametrize(
    ("status", "code"), [(429, "internal"), (503, "rate_limited"), (500, "not_found"), (504, "bad_gateway")]
)
async def test_a_fault_whose_code_is_a_contract_code_of_another_status_is_refused(
    admin, status, code
) -> None:
    """The answer would contradict itself (a 429 titled "Internal error", whose code says it is
    not retryable and whose status says it is): a contract code goes with its own status only."""
    with pytest.raises(AdminError) as refused:
        await admin.add_fault("recall", status, code=code)
    assert (refused.value.status, refused.value.code) == (422, "invalid_request")
    [error] = refused.value.problem["details"]["errors"]
    assert error["pointer"] == "/code"
    assert f"a {status} fault takes" in error["detail"]
    assert await admin.faults() == []


async def test_a_fault_may_use_the_other_contract_code_of_its_status(api, admin) -> None:
    await admin.add_fault("recall", 503, code="billing_unavailable")
    problem = (await recall(api, "database")).json()
    assert (problem["status"], problem["code"], problem["title"]) == (
        503,
        "billing_unavailable",
        "Billing unavailable",
    )


async def test_a_before_fault_also_answers_a_replay(api, admin) -> None:
    first = await propose(api, key="replayed-into-a-fault")
    fault = await admin.add_fault("propose", 502)
    hit = await propose(api, key="replayed-into-a-fault")
    assert hit.status_code == 502
    assert hit.headers["Fake-Lucy-Fault"] == fault["fault_id"]
    replay = await propose(api, key="replayed-into-a-fault")
    assert replay.content == first.content
    assert "Fake-Lucy-Fault" not in replay.headers


async def test_a_fault_fires_count_times_then_the_next_matching_fault_in_fifo_order(api, admin) -> None:
    first = await admin.add_fault("recall", 500, count=2)
    second = await admin.add_fault("any", 502)
    third = await admin.add_fault("recall", 504)
    assert [(f["fault_id"], f["remaining"]) for f in await admin.faults()] == [
        (first["fault_id"], 2),
        (second["fault_id"], 1),
        (third["fault_id"], 1),
    ]
    answers = []
    for _ in range(3):
        response = await recall(api, "database")
        answers.append((response.status_code, response.headers["Fake-Lucy-Fault"]))
        if len(answers) == 1:
            remaining = {f["fault_id"]: f["remaining"] for f in await admin.faults()}
            assert remaining[first["fault_id"]] == 1
    assert answers == [
        (500, first["fault_id"]),
        (500, first["fault_id"]),
        (502, second["fault_id"]),
    ]
    assert [f["fault_id"] for f in await admin.faults()] == [third["fault_id"]]
    assert (await recall(api, "database")).status_code == 504
    clean = await recall(api, "database")
    assert clean.status_code == 200
    assert "Fake-Lucy-Fault" not in clean.headers
    assert await charged_operations(admin) == ["recall"]


async def test_a_fault_matches_only_its_operation_or_any(api, admin) -> None:
    created = await propose(api)
    proposal_id = created.json()["proposal"]["id"]
    await admin.add_fault("proposal_status", 503)
    assert (await recall(api, "database")).status_code == 200
    assert (await propose(api)).status_code == 201
    assert (await status(api, proposal_id)).status_code == 503
    await admin.add_fault("any", 500, count=3)
    assert [
        (await recall(api, "database")).status_code,
        (await propose(api)).status_code,
        (await status(api, proposal_id)).status_code,
    ] == [500, 500, 500]


async def test_a_fault_scoped_to_a_credential_spares_every_other_credential(
    fake: InProcessFake, api, admin
) -> None:
    other = await admin.create_credential()
    fault = await admin.add_fault("any", 503, credential_id=other["credential_id"])
    assert (await recall(api, "database")).status_code == 200
    async with fake.client(other["token"], event_hooks=HOOKS) as client:
        hit = await recall(client, "database")
    assert hit.status_code == 503
    assert hit.headers["Fake-Lucy-Fault"] == fault["fault_id"]
    assert await admin.faults() == []


async def test_a_fault_for_an_unknown_credential_or_a_wrong_phase_is_refused(admin) -> None:
    bad = [
        {"credential_id": "cred_" + "n" * 22},
        {"operation": "recall", "phase": "in_flight"},
        {"drop_connection": True},
        {"drop_connection": True, "phase": "before"},
        {"hold_ms": 100},  # a hold goes with the in-flight phase alone: elsewhere it would do nothing
        {"hold_ms": 100, "phase": "after_commit"},
        {"status": 418},
    ]
    for options in bad:
        spec: dict[str, Any] = {"operation": "propose", "status": 503, **options}
        with pytest.raises(AdminError) as refused:
            await admin.call("POST", "/faults", spec)
        assert (refused.value.status, refused.value.code) == (422, "invalid_request"), options
    assert await admin.faults() == []


async def test_clearing_faults_removes_every_armed_fault(api, admin) -> None:
    await admin.add_fault("any", 500, count=10)
    await admin.clear_faults()
    assert await admin.faults() == []
    assert (await recall(api, "database")).status_code == 200


async def test_an_after_commit_fault_replaces_the_answer_of_an_executed_and_charged_call(api, admin) -> None:
    fault = await admin.add_fault("propose", 502, phase="after_commit")
    refused = await propose(api, proposal_body(replaces={"memory_id": "mem_" + "z" * 22, "version": 1}))
    assert refused.status_code == 404, "an unexecuted request does not consume an after_commit fault"
    assert [f["remaining"] for f in await admin.faults()] == [1]
    lost = await propose(api)
    assert lost.status_code == 502
    assert lost.json()["code"] == "bad_gateway"
    assert lost.headers["Fake-Lucy-Fault"] == fault["fault_id"]
    assert "Lucy-Credits-Charged" not in lost.headers
    assert len((await admin.proposals())["items"]) == 1, "it was executed"
    assert await charged_operations(admin) == ["propose"], "and charged"
    journal = (await admin.requests())[-1]
    assert (journal["status"], journal["charged"], journal["fault_id"]) == (502, True, fault["fault_id"])


async def until_taken(admin: FakeAdmin) -> None:
    """Wait (yielding to the other tasks, never sleeping) until no armed fault is left."""
    with anyio.fail_after(10):
        while await admin.faults():
            await anyio.lowlevel.checkpoint()


@pytest.mark.parametrize("phase", ["before", "after_commit"])
async def test_delay_ms_holds_the_answer_while_other_requests_are_served(api, admin, phase: str) -> None:
    fault = await admin.add_fault("recall", 503, phase=phase, delay_ms=400)
    results: dict[str, httpx.Response] = {}
    done = anyio.Event()

    async def delayed() -> None:
        results["delayed"] = await recall(api, "database")
        done.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(delayed)
        await until_taken(admin)
        served = await status(api, "prop_" + "q" * 22)
        assert served.status_code == 404
        assert not done.is_set(), "the delayed answer is still being held"
        # What a process ended during the delay leaves: the held request's journal row is committed
        # with its charge (after_commit) and its taken fault, before the delay.
        held = [(row["status"], row["charged"], row["fault_id"]) for row in await admin.requests()]
        charged = phase == "after_commit"
        assert held == [(503, charged, fault["fault_id"]), (404, False, None)], "journaled when decided"
        ledger = [row["request_id"] for row in await admin.ledger() if row["operation"] == "recall"]
        assert len(ledger) == int(charged)
    assert results["delayed"].status_code == 503
    assert results["delayed"].headers["Fake-Lucy-Fault"] == fault["fault_id"]
    assert [row["status"] for row in await admin.requests()] == [503, 404], "one row each, not two"


async def test_delay_ms_of_an_in_flight_fault_delays_the_successful_answer(api, admin) -> None:
    fault = await admin.add_fault("propose", 503, phase="in_flight", delay_ms=300)
    done = anyio.Event()
    results: dict[str, httpx.Response] = {}

    async def delayed() -> None:
        results["delayed"] = await propose(api, key="slow")
        done.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(delayed)
        await until_taken(admin)
        assert (await recall(api, "database")).status_code == 200
        assert not done.is_set()
    assert results["delayed"].status_code == 201
    assert results["delayed"].headers["Fake-Lucy-Fault"] == fault["fault_id"]


def _raw_request(port: int, body: bytes, key: str) -> bytes:
    head = (
        f"POST {V1}/proposals HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\n"
        "Authorization: Bearer lucy-dev-token\r\n"
        "Content-Type: application/json\r\n"
        f"Idempotency-Key: {key}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "\r\n"
    )
    return head.encode("ascii") + body


def _send_and_read_everything(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


async def test_drop_connection_closes_the_socket_without_sending_a_single_byte(
    live: LiveServer, live_admin: FakeAdmin
) -> None:
    body = json.dumps(proposal_body()).encode()
    normal = await anyio.to_thread.run_sync(_send_and_read_everything_once, live.port, body)
    assert normal.startswith(b"HTTP/1.1 201 "), "the same raw request is answered without the fault"
    fault = await live_admin.add_fault("propose", 503, phase="after_commit", drop_connection=True)
    received = await anyio.to_thread.run_sync(
        _send_and_read_everything, live.port, _raw_request(live.port, body, "dropped")
    )
    assert received == b""
    assert await live_admin.faults() == []
    journal = (await live_admin.requests())[-1]
    assert journal["idempotency_key"] == "dropped"
    assert (journal["status"], journal["dropped"], journal["charged"]) == (None, True, True)
    assert journal["fault_id"] == fault["fault_id"]
    assert len((await live_admin.proposals())["items"]) == 2, "the dropped propose was executed"


def _send_and_read_everything_once(port: int, body: bytes) -> bytes:
    request = _raw_request(port, body, "not-dropped").replace(
        b"HTTP/1.1\r\n", b"HTTP/1.1\r\nConnection: close\r\n", 1
    )
    return _send_and_read_everything(port, request)


async def test_drop_connection_raises_remote_protocol_error_through_httpx_on_a_real_server(
    live: LiveServer, live_admin: FakeAdmin
) -> None:
    await live_admin.add_fault("recall", 500, phase="after_commit", drop_connection=True)
    async with live.client() as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await recall(client, "database")
        assert (await recall(client, "database")).status_code == 200, "the next request is served"


async def test_the_in_process_transport_raises_remote_protocol_error_for_a_dropped_connection(
    api, admin
) -> None:
    fault = await admin.add_fault("recall", 503, phase="after_commit", drop_connection=True)
    with pytest.raises(httpx.RemoteProtocolError):
        await recall(api, "database")
    journal = (await admin.requests())[-1]
    assert (journal["status"], journal["dropped"], journal["charged"]) == (None, True, True)
    assert journal["fault_id"] == fault["fault_id"]
    assert await charged_operations(admin) == ["recall"]
    assert (await recall(api, "database")).status_code == 200


async def test_a_dropped_propose_is_recovered_by_repeating_it_with_the_same_key(api, admin) -> None:
    await admin.add_fault("propose", 503, phase="after_commit", drop_connection=True)
    with pytest.raises(httpx.RemoteProtocolError):
        await propose(api, key="recover-me")
    recovered = await propose(api, key="recover-me", headers={"Lucy-Retry-Attempt": "1"})
    assert recovered.status_code == 201
    assert recovered.headers["Idempotent-Replayed"] == "true"
    assert recovered.json()["credits"]["charged"] == 1, "the stored body of the lost, charged answer"
    assert recovered.headers["Lucy-Credits-Charged"] == "0"
    assert len((await admin.proposals())["items"]) == 1
    assert await charged_operations(admin) == ["propose"]
    journal = await admin.requests()
    assert [(r["retry_attempt"], r["dropped"], r["replayed"]) for r in journal] == [
        (0, True, False),
        (1, False, True),
    ]
