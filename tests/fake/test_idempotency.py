"""Issue 3, point 3: idempotent proposals (SPEC 2.3)."""

from __future__ import annotations

import asyncio
import contextlib
import json

import anyio
import httpx
import pytest

from fake_lucy.testing import FakeAdmin, InProcessFake, LiveServer
from tests.conftest import HOOKS
from tests.helpers import V1, WORKSPACE, proposal_body, propose

pytestmark = pytest.mark.anyio

DAY = 24 * 60 * 60


async def proposal_ids(admin: FakeAdmin) -> list[str]:
    return [p["id"] for p in (await admin.proposals())["items"]]


async def propose_charges(admin: FakeAdmin) -> int:
    return sum(1 for row in await admin.ledger(account="acct_dev") if row["operation"] == "propose")


async def test_the_same_key_and_body_replays_the_stored_201_byte_for_byte_without_a_charge(
    api, admin
) -> None:
    first = await propose(api, key="same-key-1")
    await admin.set_balance("acct_dev", 500)
    again = await propose(api, key="same-key-1")
    assert first.status_code == again.status_code == 201
    assert again.content == first.content
    assert "Idempotent-Replayed" not in first.headers
    assert "Lucy-Original-Request-Id" not in first.headers
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.headers["Lucy-Original-Request-Id"] == first.headers["Lucy-Request-Id"]
    assert again.headers["Lucy-Request-Id"] not in (first.headers["Lucy-Request-Id"], "")
    assert again.headers["Lucy-Credits-Charged"] == "0"
    assert again.headers["Lucy-Credits-Remaining"] == "500", "the current balance, not the stored one"
    assert await proposal_ids(admin) == [first.json()["proposal"]["id"]]
    assert await propose_charges(admin) == 1


async def test_key_order_and_whitespace_do_not_change_the_canonical_body(api, admin) -> None:
    body = proposal_body(topic="main-database", importance=7)
    first = await propose(api, body, key="canonical")
    reordered = dict(reversed(list(body.items())))
    reordered["importance"] = 7.0  # the same integer
    spaced = json.dumps(reordered, indent=4, ensure_ascii=True).encode()
    again = await api.post(
        V1 + "/proposals",
        content=b"\n  " + spaced + b"\n",
        headers={"Idempotency-Key": "canonical", "Content-Type": "application/json"},
    )
    assert again.status_code == 201
    assert again.content == first.content
    assert again.headers["Idempotent-Replayed"] == "true"
    assert len(await proposal_ids(admin)) == 1


async def test_the_same_key_with_a_different_body_is_422_idempotency_key_reused(api, admin) -> None:
    await propose(api, key="reused")
    other = await propose(api, proposal_body("A different decision."), key="reused")
    assert other.status_code == 422
    assert other.json()["code"] == "idempotency_key_reused"
    assert other.json()["retryable"] is False
    assert "A different decision" not in other.text
    assert len(await proposal_ids(admin)) == 1
    assert await propose_charges(admin) == 1


async def test_a_key_belongs_to_one_account(fake: InProcessFake, api, admin) -> None:
    other = await admin.create_credential(scopes=[WORKSPACE])
    mine = await propose(api, proposal_body(scope=WORKSPACE), key="shared-key")
    async with fake.client(other["token"], event_hooks=HOOKS) as client:
        theirs = await propose(client, proposal_body(scope=WORKSPACE), key="shared-key")
    assert mine.status_code == theirs.status_code == 201
    assert "Idempotent-Replayed" not in theirs.headers
    assert mine.json()["proposal"]["id"] != theirs.json()["proposal"]["id"]
    assert len(await proposal_ids(admin)) == 2


async def test_a_replay_needs_the_stored_scope_to_be_visible(fake: InProcessFake, api, admin) -> None:
    await propose(api, key="scoped")
    blind = await admin.create_credential(account="acct_dev", scopes=[])
    async with fake.client(blind["token"], event_hooks=HOOKS) as client:
        refused = await propose(client, key="scoped")
    assert refused.status_code == 403
    assert refused.json()["code"] == "scope_forbidden"
    assert len(await proposal_ids(admin)) == 1


async def test_an_error_is_not_stored_so_the_key_can_be_used_again(api, admin) -> None:
    await admin.set_balance("acct_dev", 0)
    broke = await propose(api, key="after-an-error")
    assert broke.status_code == 402
    await admin.set_balance("acct_dev", 5)
    other_body = await propose(api, proposal_body("Something else entirely."), key="after-an-error")
    assert other_body.status_code == 201
    assert "Idempotent-Replayed" not in other_body.headers
    assert other_body.json()["credits"] == {"charged": 1, "remaining": 4}


async def test_retention_ends_after_24_hours_of_fake_clock_time(api, admin) -> None:
    await admin.set_clock(frozen=True)
    first = await propose(api, key="retained")
    await admin.advance_clock(DAY - 1)
    kept = await propose(api, key="retained")
    assert kept.headers.get("Idempotent-Replayed") == "true"
    assert kept.content == first.content
    await admin.advance_clock(1)
    fresh = await propose(api, key="retained")
    assert fresh.status_code == 201
    assert "Idempotent-Replayed" not in fresh.headers
    assert fresh.json()["proposal"]["id"] != first.json()["proposal"]["id"]
    assert fresh.json()["credits"]["charged"] == 1
    assert await propose_charges(admin) == 2


async def test_retention_is_configurable(tmp_path) -> None:
    async with (
        InProcessFake.start(tmp_path, idempotency_ttl_seconds=60) as fake,
        fake.client(event_hooks=HOOKS) as client,
    ):
        await fake.admin.set_clock(frozen=True)
        first = await propose(client, key="short")
        await fake.admin.advance_clock(59)
        assert (await propose(client, key="short")).content == first.content
        await fake.admin.advance_clock(1)
        later = await propose(client, key="short")
        assert later.json()["proposal"]["id"] != first.json()["proposal"]["id"]


@pytest.mark.parametrize(
    "headers",
    [{}, {"Idempotency-Key": ""}, {"Idempotency-Key": "has space"}, {"Idempotency-Key": "k" * 256}],
    ids=["missing", "empty", "space", "too-long"],
)
async def test_a_missing_or_malformed_key_is_400_idempotency_key_required(
    api, admin, headers: dict[str, str]
) -> None:
    response = await api.post(V1 + "/proposals", json=proposal_body(), headers=headers)
    assert response.status_code == 400
    assert response.json()["code"] == "idempotency_key_required"
    assert await proposal_ids(admin) == []
    assert await propose_charges(admin) == 0


async def test_a_key_of_255_printable_characters_is_accepted(api) -> None:
    response = await propose(api, key="~" + "K" * 253 + "!")
    assert response.status_code == 201
    assert response.json()["idempotency_key"] == "~" + "K" * 253 + "!"


async def test_sixteen_concurrent_requests_with_one_key_make_one_proposal_and_one_charge(
    live: LiveServer, live_admin: FakeAdmin
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(live.client(event_hooks=HOOKS)) for _ in range(16)]
        await assert_one_key_under_concurrency(clients, live_admin)


async def assert_one_key_under_concurrency(clients: list[httpx.AsyncClient], admin: FakeAdmin) -> None:
    """The same propose with one key on every client (one connection each), all at once."""
    body = proposal_body("Concurrent retries must not duplicate a proposal.")
    responses = await asyncio.gather(*(propose(client, body, key="one-key") for client in clients))
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {201, 409}, statuses
    created = [r for r in responses if r.status_code == 201]
    originals = [r for r in created if "Idempotent-Replayed" not in r.headers]
    assert len(originals) == 1
    assert all(r.content == originals[0].content for r in created)
    assert all(r.json()["code"] == "idempotency_key_in_use" for r in responses if r.status_code == 409)
    assert len(await proposal_ids(admin)) == 1
    assert await propose_charges(admin) == 1
    assert sum(r.headers.get("Lucy-Credits-Charged") == "1" for r in responses) == 1


async def test_an_in_flight_fault_makes_409_idempotency_key_in_use_reproducible(
    live: LiveServer, live_admin: FakeAdmin
) -> None:
    async with live.client(event_hooks=HOOKS) as first, live.client(event_hooks=HOOKS) as second:
        await assert_in_flight_conflict(first, second, live_admin)


async def assert_in_flight_conflict(
    first_client: httpx.AsyncClient, second_client: httpx.AsyncClient, admin: FakeAdmin
) -> None:
    """The first propose holds its in-flight marker; the second, same key, meets 409; then a replay."""
    fault = await admin.add_fault("propose", 503, phase="in_flight", hold_ms=400)
    first_done = anyio.Event()
    results: dict[str, httpx.Response] = {}

    async def first() -> None:
        results["first"] = await propose(first_client, key="held")
        first_done.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(first)
        with anyio.fail_after(10):
            while await admin.faults():  # the marker is committed together with taking the fault
                await anyio.lowlevel.checkpoint()
        conflict = await propose(second_client, key="held")
        assert not first_done.is_set()
    held = results["first"]
    assert conflict.status_code == 409
    assert conflict.json()["code"] == "idempotency_key_in_use"
    assert conflict.json()["retryable"] is True
    assert "Lucy-Credits-Charged" not in conflict.headers
    assert held.status_code == 201, "in_flight holds, then executes normally"
    assert held.headers["Fake-Lucy-Fault"] == fault["fault_id"]
    assert held.json()["credits"]["charged"] == 1
    replay = await propose(second_client, key="held")
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert replay.content == held.content
    assert len(await proposal_ids(admin)) == 1
    assert await propose_charges(admin) == 1


async def test_a_key_taken_over_while_its_request_was_held_is_one_proposal_charged_once(
    fake: InProcessFake, admin: FakeAdmin
) -> None:
    """The held request's marker goes stale when the fake's clock passes its hold and grace; another
    request with the key then executes. The held one, going on, replays that answer instead of
    making a second proposal and charge (and leaves the other's record as it is)."""
    await admin.set_clock(frozen=True)
    await admin.add_fault("propose", 503, phase="in_flight", hold_ms=300)
    results: dict[str, httpx.Response] = {}

    async def held() -> None:
        async with fake.client(event_hooks=HOOKS) as client:
            results["held"] = await propose(client, key="taken-over")

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(held)
        with anyio.fail_after(10):
            while await admin.faults():  # the marker is committed together with taking the fault
                await anyio.lowlevel.checkpoint()
        await admin.advance_clock(200)  # past the hold and the 120 s grace: the marker is stale
        async with fake.client(event_hooks=HOOKS) as client:
            results["later"] = await propose(client, key="taken-over")
        assert "held" not in results
    later, first = results["later"], results["held"]
    assert (later.status_code, later.headers["Lucy-Credits-Charged"]) == (201, "1")
    assert (first.status_code, first.headers["Idempotent-Replayed"]) == (201, "true")
    assert first.content == later.content  # the answer the later request stored, byte for byte
    assert len(await proposal_ids(admin)) == 1
    assert await propose_charges(admin) == 1
    async with fake.client(event_hooks=HOOKS) as client:
        replay = await propose(client, key="taken-over")
    assert replay.headers["Lucy-Original-Request-Id"] == later.headers["Lucy-Request-Id"]
