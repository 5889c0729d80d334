"""``fake_lucy_server.sync_admin``: every ``FakeAdmin`` method, blocking, for synchronous tests."""

from __future__ import annotations

import inspect
import json
import socket
import time

import anyio
import httpx
import pytest

from fake_lucy.testing import (
    AdminError,
    FakeAdmin,
    LiveServer,
    RecordingSyncAgentMemoryClient,
    SyncFakeAdmin,
)

PROJECT = {"kind": "project", "id": "project_example"}


def _coroutine_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.iscoroutinefunction)
        if not name.startswith("_")
    }


def _public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


def test_every_async_admin_method_has_a_blocking_twin_with_the_same_parameters() -> None:
    asynchronous = _coroutine_methods(FakeAdmin)
    blocking = _public_methods(SyncFakeAdmin)
    assert set(asynchronous) == set(blocking)
    assert len(asynchronous) >= 20
    for name, signature in asynchronous.items():
        assert blocking[name].parameters == signature.parameters, name
        assert blocking[name].return_annotation == signature.return_annotation, name
        assert not inspect.iscoroutinefunction(getattr(SyncFakeAdmin, name)), name


def _propose(client: RecordingSyncAgentMemoryClient, content: str) -> str:
    proposed = client.propose(json.dumps({"kind": "fact", "content": content, "scope": PROJECT}))
    return proposed.proposal.id


def test_the_sync_admin_reviews_proposals_and_manages_memories(
    fake_lucy_server: LiveServer, lucy_sync_client: RecordingSyncAgentMemoryClient
) -> None:
    admin = fake_lucy_server.sync_admin
    first, second, third = (_propose(lucy_sync_client, f"Fact number {n}.") for n in (1, 2, 3))
    assert [p["id"] for p in admin.proposals(status="pending")["items"]] == [first, second, third]
    memory = admin.approve(first)["memory"]
    assert admin.reject(second, "not true")["status"] == "rejected"
    assert admin.expire(third)["status"] == "expired"
    assert [m["id"] for m in admin.memories()["items"]] == [memory["id"]]
    assert admin.delete_memory(memory["id"])["status"] == "deleted"
    assert admin.restore_memory(memory["id"])["status"] == "active"
    with pytest.raises(AdminError) as caught:
        admin.approve(first)
    assert (caught.value.status, caught.value.code) == (409, "invalid_transition")


def test_the_sync_admin_drives_credentials_policy_clock_billing_faults_and_the_journal(
    fake_lucy_server: LiveServer, lucy_sync_client: RecordingSyncAgentMemoryClient
) -> None:
    admin = fake_lucy_server.sync_admin
    created = admin.create_credential(credits=3, permissions=("memory:read",))
    assert admin.set_balance(created["account"], 7)["balance"] == 7
    assert admin.set_policy(auto_approve="all")["auto_approve"] == "all"
    assert admin.policy()["auto_approve"] == "all"
    frozen = admin.set_clock(now="2030-01-01T00:00:00Z", frozen=True)
    assert frozen == {"now": "2030-01-01T00:00:00.000000Z", "frozen": True}
    assert admin.advance_clock(1.5)["now"] == "2030-01-01T00:00:01.500000Z"
    assert admin.clock()["now"] == "2030-01-01T00:00:01.500000Z"
    assert admin.set_billing(False) == {"available": False}
    assert admin.set_billing(True) == {"available": True}
    fault = admin.add_fault("recall", 503, count=2)
    assert [f["fault_id"] for f in admin.faults()] == [fault["fault_id"]]
    admin.clear_faults()
    assert admin.faults() == []
    _propose(lucy_sync_client, "Auto-approved fact.")
    assert [row["operation"] for row in admin.requests()] == ["propose"]
    assert [row["operation"] for row in admin.ledger(account=created["account"])] == ["admin_set"]
    assert admin.call("GET", "/clock") == admin.clock()
    admin.revoke(created["credential_id"])
    with pytest.raises(AdminError) as caught:
        admin.revoke("cred_does_not_exist_000000")
    assert caught.value.status == 404
    assert admin.reset()["took_ms"] >= 0
    assert admin.requests() == []
    assert admin.policy()["auto_approve"] == "off"


@pytest.mark.anyio
async def test_the_sync_admin_also_works_inside_a_running_event_loop(fake_lucy_server: LiveServer) -> None:
    # Blocking, but correct: it never needs the caller's loop.
    frozen = fake_lucy_server.sync_admin.set_clock(frozen=True)
    assert await fake_lucy_server.admin.clock() == frozen


def test_the_sync_admin_names_its_origin_but_not_its_token(fake_lucy_server: LiveServer) -> None:
    text = repr(fake_lucy_server.sync_admin)
    assert fake_lucy_server.base_url in text
    assert fake_lucy_server.admin_token not in text
    assert json.dumps(fake_lucy_server.sync_admin.clock())  # plain JSON data


def test_the_sync_admin_waits_for_an_event_and_gives_up_after_its_timeout(
    fake_lucy_server: LiveServer, lucy_sync_client: RecordingSyncAgentMemoryClient
) -> None:
    admin = fake_lucy_server.sync_admin
    proposal_id = _propose(lucy_sync_client, "Waited for.")
    created = admin.wait_for("proposal.created", after=0, timeout=5, proposal_id=proposal_id)
    assert (created.type, created.tenant, created.data["proposal_id"]) == (
        "proposal.created",
        "tenant_dev",
        proposal_id,
    )
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"no proposal\.decided event within 0\.3 s"):
        admin.wait_for("proposal.decided", timeout=0.3)
    assert time.monotonic() - started < 5


@pytest.mark.anyio
async def test_wait_for_gives_up_on_a_server_that_never_answers() -> None:
    """The timeout covers opening the stream: a listener that takes the connection and says nothing."""
    with socket.create_server(("127.0.0.1", 0)) as silent:  # never accepts: no answer
        base_url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        async with httpx.AsyncClient(base_url=base_url) as http:
            with pytest.raises(TimeoutError):
                await FakeAdmin(http).wait_for("proposal.created", timeout=0.3)
        with pytest.raises(TimeoutError):
            await anyio.to_thread.run_sync(
                lambda: SyncFakeAdmin(base_url, "x" * 32).wait_for("proposal.created", timeout=0.3)
            )
        assert time.monotonic() - started < 5
