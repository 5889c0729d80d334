"""Issue 3, point 1 and 2: one credit per executed call, none otherwise; never negative under load."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import httpx
import pytest

from fake_lucy.testing import FakeAdmin, InProcessFake, LiveServer
from tests.conftest import HOOKS
from tests.helpers import V1, proposal_body, propose, recall, status

pytestmark = pytest.mark.anyio

ACCOUNT = "acct_dev"


async def charges(admin: FakeAdmin, account: str = ACCOUNT) -> list[dict[str, Any]]:
    return [row for row in await admin.ledger(account=account) if row["operation"] != "admin_set"]


def assert_charged_once(response: httpx.Response, ledger_row: dict[str, Any], operation: str) -> None:
    body = response.json()
    assert body["credits"]["charged"] == 1
    assert response.headers["Lucy-Credits-Charged"] == "1"
    assert response.headers["Lucy-Credits-Remaining"] == str(body["credits"]["remaining"])
    assert body["request_id"] == response.headers["Lucy-Request-Id"]
    assert ledger_row == {
        "request_id": body["request_id"],
        "account": ACCOUNT,
        "tenant": "tenant_dev",
        "operation": operation,
        "amount": -1,
        "balance_after": body["credits"]["remaining"],
        "at": ledger_row["at"],
    }


async def test_each_executed_recall_propose_and_status_costs_exactly_one_credit(api, admin) -> None:
    proposed = await propose(api)
    recalled = await recall(api, "database")
    polled = await status(api, proposed.json()["proposal"]["id"])
    assert [r.status_code for r in (proposed, recalled, polled)] == [201, 200, 200]
    rows = await charges(admin)
    assert len(rows) == 3
    assert_charged_once(proposed, rows[0], "propose")
    assert_charged_once(recalled, rows[1], "recall")
    assert_charged_once(polled, rows[2], "proposal_status")
    assert [r.json()["credits"]["remaining"] for r in (proposed, recalled, polled)] == [999, 998, 997]


async def test_a_recall_with_no_terms_left_is_an_empty_answer_that_is_still_charged(api, admin) -> None:
    response = await recall(api, "the and of")
    assert response.status_code == 200
    assert response.json()["memories"] == []
    assert response.json()["credits"] == {"charged": 1, "remaining": 999}
    assert len(await charges(admin)) == 1


async def test_no_error_response_is_charged(fake: InProcessFake, api, admin) -> None:
    forbidden_scope = {"kind": "project", "id": "someone-elses"}
    async with fake.client("not-a-token", event_hooks=HOOKS) as stranger:
        unauthenticated = await recall(stranger, "database")
    errors = [
        unauthenticated,
        await api.post(V1 + "/recall", content=b"{not json", headers={"Content-Type": "application/json"}),
        await api.post(V1 + "/recall", content=b"{}", headers={"Content-Type": "text/plain"}),
        await recall(api, "database", limit=0),
        await recall(api, "database", scope=forbidden_scope),
        await recall(api, "database", headers_are="not allowed"),
        await api.post(V1 + "/recall", json={"query": "x"}, headers={"Lucy-Permissions": "memory:propose"}),
        await api.post(V1 + "/proposals", json=proposal_body()),
        await propose(api, proposal_body(scope=forbidden_scope)),
        await propose(api, proposal_body(replaces={"memory_id": "mem_" + "a" * 22, "version": 1})),
        await status(api, "prop_" + "b" * 22),
        await api.get(V1 + "/nowhere"),
    ]
    codes = [r.json()["code"] for r in errors]
    assert codes == [
        "unauthenticated",
        "invalid_json",
        "unsupported_media_type",
        "invalid_request",
        "scope_forbidden",
        "invalid_request",
        "permission_denied",
        "idempotency_key_required",
        "scope_forbidden",
        "memory_not_found",
        "not_found",
        "not_found",
    ]
    assert all("Lucy-Credits-Charged" not in r.headers for r in errors)
    assert await charges(admin) == []
    journal = await admin.requests()
    assert journal, "the authenticated errors are journaled"
    assert not any(row["charged"] for row in journal)
    assert (await recall(api, "database")).json()["credits"] == {"charged": 1, "remaining": 999}


async def test_at_zero_balance_nothing_executes_and_the_answer_is_402(api, admin) -> None:
    kept = await propose(api)
    memory_id = (await admin.approve(kept.json()["proposal"]["id"]))["memory"]["id"]
    await admin.set_balance(ACCOUNT, 0)
    refused = [
        await recall(api, "PostgreSQL"),
        await propose(api, proposal_body("Deploys go out on Tuesdays.")),
        await status(api, kept.json()["proposal"]["id"]),
    ]
    assert [r.status_code for r in refused] == [402, 402, 402]
    assert {r.json()["code"] for r in refused} == {"insufficient_credits"}
    assert (await admin.proposals())["items"] == [await admin_proposal(admin, kept)]
    memories = (await admin.memories())["items"]
    assert [(m["id"], m["last_accessed_at"]) for m in memories] == [(memory_id, None)]
    assert len(await charges(admin)) == 1
    assert not any(row["charged"] for row in (await admin.requests())[-3:])


async def admin_proposal(admin: FakeAdmin, response: httpx.Response) -> dict[str, Any]:
    items = (await admin.proposals())["items"]
    return next(p for p in items if p["id"] == response.json()["proposal"]["id"])


async def test_with_billing_down_nothing_executes_and_the_answer_is_503_billing_unavailable(
    api, admin
) -> None:
    kept = await propose(api)
    memory_id = (await admin.approve(kept.json()["proposal"]["id"]))["memory"]["id"]
    await admin.set_billing(False)
    refused = [
        await recall(api, "PostgreSQL"),
        await propose(api, proposal_body("Deploys go out on Tuesdays.")),
        await status(api, kept.json()["proposal"]["id"]),
    ]
    assert [r.status_code for r in refused] == [503, 503, 503]
    assert {r.json()["code"] for r in refused} == {"billing_unavailable"}
    assert all(r.json()["retryable"] for r in refused)
    assert len((await admin.proposals())["items"]) == 1
    assert [m["last_accessed_at"] for m in (await admin.memories())["items"]] == [None]
    assert len(await charges(admin)) == 1
    await admin.set_billing(True)
    back = await recall(api, "PostgreSQL")
    assert [m["id"] for m in back.json()["memories"]] == [memory_id]
    assert back.json()["credits"] == {"charged": 1, "remaining": 998}


async def test_a_replay_works_at_zero_balance_and_with_billing_down_and_charges_nothing(api, admin) -> None:
    first = await propose(api, key="replay-when-broke")
    await admin.set_balance(ACCOUNT, 0)
    await admin.set_billing(False)
    again = await propose(api, key="replay-when-broke")
    assert again.status_code == 201
    assert again.content == first.content
    assert again.headers["Lucy-Credits-Charged"] == "0"
    assert again.headers["Lucy-Credits-Remaining"] == "0"
    assert again.headers["Idempotent-Replayed"] == "true"
    assert len(await charges(admin)) == 1


async def test_setting_a_balance_writes_an_admin_set_ledger_row_with_the_delta(api, admin) -> None:
    await recall(api, "anything")
    answer = await admin.set_balance(ACCOUNT, 40)
    assert answer == {"account": ACCOUNT, "balance": 40}
    last = (await admin.ledger(account=ACCOUNT))[-1]
    assert (last["operation"], last["amount"], last["balance_after"]) == ("admin_set", 40 - 999, 40)
    assert (await recall(api, "anything")).json()["credits"]["remaining"] == 39


async def test_parallel_calls_on_a_real_server_charge_exactly_the_balance_and_never_below_zero(
    live: LiveServer, live_admin: FakeAdmin
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(live.client(event_hooks=HOOKS)) for _ in range(40)]
        await assert_parallel_spending_stops_at_zero(clients, live_admin)


async def assert_parallel_spending_stops_at_zero(clients: list[httpx.AsyncClient], admin: FakeAdmin) -> None:
    """N concurrent recalls and proposes (one connection each) with a balance K < N: exactly K succeed."""
    calls, balance = len(clients), len(clients) // 3
    assert calls >= 32
    await admin.set_balance(ACCOUNT, balance)

    async def one(client: httpx.AsyncClient, i: int) -> httpx.Response:
        if i % 2:
            return await recall(client, f"database number {i}")
        return await propose(client, proposal_body(f"Decision number {i}."), key=uuid.uuid4().hex)

    responses = await asyncio.gather(*(one(client, i) for i, client in enumerate(clients)))
    ok = [r for r in responses if r.status_code in (200, 201)]
    refused = [r for r in responses if r.status_code == 402]
    assert len(ok) == balance
    assert len(refused) == calls - balance
    remaining = sorted(r.json()["credits"]["remaining"] for r in ok)
    assert remaining == list(range(balance)), "each success saw its own balance, none charged twice"
    rows = await charges(admin)
    assert len(rows) == balance
    assert sorted(row["balance_after"] for row in rows) == list(range(balance))
    assert {row["request_id"] for row in rows} == {r.json()["request_id"] for r in ok}
    proposals = (await admin.proposals())["items"]
    assert len(proposals) == sum(1 for r in ok if r.status_code == 201)
    assert (await recall(clients[0], "database")).status_code == 402
    assert len(await charges(admin)) == balance
