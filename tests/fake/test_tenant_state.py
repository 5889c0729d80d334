"""SPEC 3.6 with 3.8 and 3.9: findings and snapshots of a tenant admin stay within its tenant, and a
snapshot carries what tenants add (their clocks, admin token hashes, reset state, full-text index)."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from fake_lucy.domain.clock import parse_timestamp
from fake_lucy.testing import AdminError, FakeAdmin, InProcessFake
from tests.conftest import HOOKS
from tests.helpers import PROJECT, V1, proposal_body, propose, recall

pytestmark = pytest.mark.anyio

DAY = 24 * 3600


@contextlib.asynccontextmanager
async def as_tenant_admin(fake: InProcessFake, created: dict[str, Any]) -> AsyncIterator[FakeAdmin]:
    async with fake.client(created["admin_token"], event_hooks=HOOKS) as http:
        yield FakeAdmin(http, tenant=created["tenant"])


async def _retried_recall(fake: InProcessFake, token: str) -> None:
    """A recall sent as an automatic retry: a ``recall_retried`` finding of its credential."""
    async with fake.client(token) as client:
        response = await client.post(
            V1 + "/recall", json={"query": "deploy"}, headers={"Lucy-Retry-Attempt": "1"}
        )
    assert response.status_code == 200


async def _approved(fake: InProcessFake, own: FakeAdmin, token: str, content: str) -> None:
    async with fake.client(token) as client:
        proposed = await propose(client, proposal_body(content))
    await own.approve(proposed.json()["proposal"]["id"])


def _ranked(response: httpx.Response) -> list[tuple[str, float]]:
    assert response.status_code == 200, response.text
    return [(memory["content"], memory["score"]) for memory in response.json()["memories"]]


async def test_a_tenant_admin_sees_its_tenants_findings_only_and_its_reset_clears_them(fake, admin) -> None:
    alice, bob = await admin.create_tenant("alice"), await admin.create_tenant("bob")
    for created in (alice, bob):
        await _retried_recall(fake, created["credential"]["token"])
    everyone = {item["credential_id"] for item in await admin.findings()}
    assert everyone == {alice["credential"]["credential_id"], bob["credential"]["credential_id"]}
    async with as_tenant_admin(fake, alice) as own:
        assert [item["credential_id"] for item in await own.findings()] == [
            alice["credential"]["credential_id"]
        ]
        # another tenant's credential named in the filter shows nothing
        assert await own.findings(credential_id=bob["credential"]["credential_id"]) == []
        await own.reset()
        assert await own.findings() == []
    assert [item["credential_id"] for item in await admin.findings()] == [bob["credential"]["credential_id"]]


async def test_a_tenant_admins_snapshot_holds_its_tenant_and_a_put_replaces_it_alone(fake, admin) -> None:
    alice, bob = await admin.create_tenant("alice", credits=40), await admin.create_tenant("bob")
    alice_token, bob_token = alice["credential"]["token"], bob["credential"]["token"]
    async with as_tenant_admin(fake, alice) as own, fake.client(alice_token) as client:
        await propose(client, proposal_body("Before the snapshot."))
        await own.advance_clock(DAY)
        document = await own.call("GET", "/snapshot", include_journal="true")
        [tenant] = document["tenants"]
        assert tenant["id"] == "alice"
        assert tenant["admin_token_sha256"] == hashlib.sha256(alice["admin_token"].encode()).hexdigest()
        assert (tenant["first_credential_id"], tenant["initial_credits"]) == (
            alice["credential"]["credential_id"],
            40,
        )
        ahead = parse_timestamp(tenant["clock"]["now"]) - parse_timestamp(document["clocks"]["server"]["now"])
        assert abs(ahead - DAY * 10**6) < 5 * 10**6  # its own clock, a day ahead of the server's
        assert {entry["tenant"] for entry in tenant["ledger"] + tenant["journal"]} == {"alice"}
        await propose(client, proposal_body("After the snapshot."))
        async with fake.client(bob_token) as bob_client:
            await propose(bob_client, proposal_body("Bob's own proposal."))
        assert await own.call("PUT", "/snapshot", document) == {"restored": True}
        assert [p["content"] for p in (await own.proposals())["items"]] == ["Before the snapshot."]
        assert (await recall(client, "snapshot")).status_code == 200  # the credential still works
        # the admin token still works, and the document of another tenant is refused
        document["tenants"][0]["id"] = "bob"  # as bob's own snapshot says it, in every row
        for entry in document["tenants"][0]["ledger"] + document["tenants"][0]["journal"]:
            entry["tenant"] = "bob"
        with pytest.raises(AdminError, match="names another tenant than the one restored"):
            await own.call("PUT", "/snapshot", document)
    assert [p["content"] for p in (await admin.proposals(tenant="bob"))["items"]] == ["Bob's own proposal."]


async def test_a_full_snapshot_carries_tenant_clocks_admin_tokens_reset_state_and_rankings(
    fake, admin, tmp_path
) -> None:
    alice, bob = await admin.create_tenant("alice", credits=40), await admin.create_tenant("bob")
    alice_token = alice["credential"]["token"]
    async with as_tenant_admin(fake, alice) as own:
        for text in ("Deploy with the blue pipeline.", "Deploy on Fridays never.", "Lunch is at noon."):
            await _approved(fake, own, alice_token, text)
        await own.set_clock(frozen=True)
        await own.advance_clock(DAY)
        alice_clock = await own.clock()
    async with as_tenant_admin(fake, bob) as other:
        for n in range(5):
            await _approved(fake, other, bob["credential"]["token"], f"Deploy note {n} deploy deploy.")
    async with fake.client(alice_token) as client:
        expected = _ranked(await recall(client, "deploy pipeline", scope=PROJECT))
    async with fake.client(fake.admin_token) as http:
        document = (await http.get("/_fake/snapshot")).json()
    async with InProcessFake.start(tmp_path) as fresh:
        async with fresh.client(fresh.admin_token) as http:
            assert (await http.put("/_fake/snapshot", json=document)).status_code == 200
        async with as_tenant_admin(fresh, alice) as own:
            assert await own.clock() == alice_clock  # its own clock, frozen a day ahead
            async with fresh.client(alice_token) as client:
                assert _ranked(await recall(client, "deploy pipeline", scope=PROJECT)) == expected
                await own.reset()  # back to what POST /_fake/tenants made: 40 credits
                found = await recall(client, "deploy")
                assert found.json()["memories"] == []
                assert found.headers["Lucy-Credits-Remaining"] == "39"
