"""SPEC 1.4: tenants, accounts, scopes, credentials and permissions."""

from __future__ import annotations

import copy
import hashlib
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fake_lucy.domain.defaults import DEFAULT_ADMIN_TOKEN
from fake_lucy.testing import InProcessFake
from tests.helpers import V1, proposal_body, propose, recall, status

pytestmark = pytest.mark.anyio

SHARED = {"kind": "project", "id": "shared-id"}


async def test_the_same_scope_id_in_two_tenants_is_two_scopes(fake, admin) -> None:
    a = await admin.create_credential("tenant_a", scopes=[SHARED])
    b = await admin.create_credential("tenant_b", scopes=[SHARED])
    async with fake.client(a["token"]) as client_a, fake.client(b["token"]) as client_b:
        created = await propose(client_a, proposal_body("Tenant A secret sauce recipe.", scope=SHARED))
        await admin.approve(created.json()["proposal"]["id"])
        assert len((await recall(client_a, "sauce recipe")).json()["memories"]) == 1
        assert (await recall(client_b, "sauce recipe")).json()["memories"] == []
        assert (await status(client_b, created.json()["proposal"]["id"])).status_code == 404


async def test_the_control_listings_name_each_items_tenant_and_proposer(fake, admin) -> None:
    """A server admin of a shared fake sees every tenant's proposals and memories: each says whose."""
    a = await admin.create_credential("tenant_a", scopes=[SHARED])
    b = await admin.create_credential("tenant_b", scopes=[SHARED])
    async with fake.client(a["token"]) as client_a, fake.client(b["token"]) as client_b:
        from_a = (await propose(client_a, proposal_body("The same words.", scope=SHARED))).json()["proposal"]
        from_b = (await propose(client_b, proposal_body("The same words.", scope=SHARED))).json()["proposal"]
    listed = {p["id"]: (p["tenant"], p["credential_id"]) for p in (await admin.proposals())["items"]}
    assert listed[from_a["id"]] == ("tenant_a", a["credential_id"])
    assert listed[from_b["id"]] == ("tenant_b", b["credential_id"])
    approved = await admin.approve(from_b["id"])
    assert (approved["tenant"], approved["credential_id"]) == ("tenant_b", b["credential_id"])
    memories = [m for m in (await admin.memories())["items"] if m["id"] == approved["memory"]["id"]]
    assert [m["tenant"] for m in memories] == ["tenant_b"]
    deleted = await admin.delete_memory(approved["memory"]["id"])
    assert deleted["tenant"] == "tenant_b"


async def test_another_account_of_the_same_tenant_cannot_read_a_proposal(fake, api, admin) -> None:
    other = await admin.create_credential(scopes=[{"kind": "project", "id": "project_example"}])
    created = await propose(api, proposal_body())
    async with fake.client(other["token"]) as client:
        response = await status(client, created.json()["proposal"]["id"])
    assert (response.status_code, response.json()["code"]) == (404, "not_found")


async def test_unknown_and_revoked_tokens_are_401_with_a_bearer_challenge(fake, admin) -> None:
    created = await admin.create_credential()
    async with fake.client("not-a-token") as client:
        response = await recall(client, "x")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    await admin.revoke(created["credential_id"])
    async with fake.client(created["token"]) as client:
        assert (await recall(client, "x")).status_code == 401
    async with fake.client(None) as client:
        missing = await recall(client, "x")
    assert (missing.status_code, missing.json()["code"]) == (401, "unauthenticated")


async def test_a_token_in_use_is_refused_by_the_next_request_after_its_revocation(fake, admin) -> None:
    created = await admin.create_credential()
    async with fake.client(created["token"]) as client:
        assert (await recall(client, "x")).status_code == 200
        await admin.revoke(created["credential_id"])
        assert (await recall(client, "x")).status_code == 401


async def test_a_policy_change_applies_to_the_next_request_of_a_token_in_use(api, admin) -> None:
    before = await propose(api, proposal_body("Decided before the policy change."))
    await admin.set_policy(auto_approve="all", proposal_ttl_seconds=60)
    after = await propose(api, proposal_body("Decided after the policy change."))
    assert before.json()["proposal"]["status"] == "pending"
    assert after.json()["proposal"]["status"] == "approved"


async def test_a_reset_refuses_a_token_in_use_that_the_seed_does_not_have(fake, admin) -> None:
    created = await admin.create_credential()
    async with fake.client(created["token"]) as client:
        assert (await recall(client, "x")).status_code == 200
        await admin.reset()
        assert (await recall(client, "x")).status_code == 401


async def test_issued_tokens_are_long_and_stored_hashed(fake, admin) -> None:
    created = await admin.create_credential()
    assert len(created["token"]) >= 32
    raw = b"".join(p.read_bytes() for p in fake.fake.db_files() if p.exists())
    assert created["token"].encode() not in raw
    assert b"lucy-dev-token" not in raw


async def test_a_missing_permission_is_permission_denied(fake, admin) -> None:
    reader = await admin.create_credential(permissions=("memory:read",), scopes=[SHARED])
    async with fake.client(reader["token"]) as client:
        response = await propose(client, proposal_body(scope=SHARED))
        assert (response.status_code, response.json()["code"]) == (403, "permission_denied")
        assert (await recall(client, "x")).status_code == 200


async def test_lucy_permissions_narrows_the_request(api) -> None:
    response = await propose(api, proposal_body(), headers={"Lucy-Permissions": "memory:read"})
    assert (response.status_code, response.json()["code"]) == (403, "permission_denied")
    ok = await api.post(
        V1 + "/recall", json={"query": "x"}, headers={"Lucy-Permissions": "memory:read, memory:propose"}
    )
    assert ok.status_code == 200


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("Lucy-Permissions", "memory:read,,memory:propose"),
        ("Lucy-Permissions", "memory:write"),
        ("Lucy-Permissions", ""),
        ("Lucy-Client-Name", "x" * 101),
        ("Lucy-Client-Name", "%ff%fe"),
        ("Lucy-Retry-Attempt", "11"),
        ("Lucy-Retry-Attempt", "one"),
        ("Lucy-Permissions", " , ".join(["memory:read"] * 80)),  # valid items, over 1,000 characters
        ("Lucy-Permissions", "memory:read\xa0"),  # only spaces and tabs around items
        ("Lucy-Retry-Attempt", "1\x0b"),
        ("Lucy-Client-Name", "50%"),  # a literal % travels as %25
        ("Lucy-Client-Name", "50%2"),
    ],
)
async def test_malformed_optional_headers_are_400_invalid_header(api, header, value) -> None:
    raw = value.encode("latin-1")  # bytes: httpx would refuse a non-ASCII str
    response = await api.post(V1 + "/recall", json={"query": "x"}, headers={header: raw})
    assert (response.status_code, response.json()["code"]) == (400, "invalid_header")
    assert value not in response.json()["detail"] or value == ""


async def test_a_header_sent_on_several_lines_is_its_lines_joined(fake, api) -> None:
    # RFC 9110 5.3: Lucy-Permissions on two lines is the list of both; a repeated single-value
    # header becomes one malformed value, never "the first one wins".
    lines = [(b"lucy-permissions", b"memory:read"), (b"lucy-permissions", b"memory:propose")]
    both = await api.post(
        V1 + "/proposals", json=proposal_body(), headers=[*lines, (b"idempotency-key", b"k1")]
    )
    assert both.status_code == 201, both.text
    twice = await api.post(V1 + "/recall", json={"query": "x"}, headers=[(b"lucy-retry-attempt", b"1")] * 2)
    assert (twice.status_code, twice.json()["code"]) == (400, "invalid_header")
    keys = [(b"idempotency-key", b"k2"), (b"idempotency-key", b"k3")]
    two_keys = await api.post(V1 + "/proposals", json=proposal_body(), headers=keys)
    assert (two_keys.status_code, two_keys.json()["code"]) == (400, "idempotency_key_required")


async def test_bearer_may_be_followed_by_more_than_one_space(fake) -> None:
    async with fake.client(None) as client:
        response = await client.post(
            V1 + "/recall", json={"query": "x"}, headers={"Authorization": f"Bearer   {fake.dev_token}"}
        )
    assert response.status_code == 200


async def test_a_proposal_in_an_invisible_scope_is_scope_forbidden(api) -> None:
    response = await propose(api, proposal_body(scope={"kind": "workspace", "id": "not-mine"}))
    assert (response.status_code, response.json()["code"]) == (403, "scope_forbidden")


async def test_a_credential_always_sees_its_own_user_scope(fake, admin) -> None:
    created = await admin.create_credential(user="usr_alice", scopes=[])
    async with fake.client(created["token"]) as client:
        response = await propose(client, proposal_body(scope={"kind": "user", "id": "usr_alice"}))
        assert response.status_code == 201
        other = await propose(client, proposal_body(scope={"kind": "user", "id": "usr_dev"}))
        assert other.status_code == 403


async def test_built_in_tokens_are_refused_off_loopback(tmp_path) -> None:
    async with InProcessFake.start(tmp_path, host="0.0.0.0") as exposed:  # noqa: S104 - the point of the test
        async with exposed.client() as client:
            response = await recall(client, "x")
        assert response.status_code == 401
        assert "non-loopback" in response.json()["detail"]
        async with exposed.client(exposed.admin_token) as client:
            control = await client.get("/_fake/clock")
        assert control.status_code == 401


# -- property: random operation sequences never cross a tenant or account boundary ----------------

ACTORS = ["a1", "a2", "b1"]  # a1 and a2: two accounts of tenant A; b1: tenant B
OPERATION = st.tuples(
    st.sampled_from(["propose", "approve", "recall", "status"]),
    st.sampled_from(ACTORS),
    st.sampled_from(["alpha", "beta", "gamma"]),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(OPERATION, min_size=1, max_size=12))
async def test_no_operation_sequence_leaks_across_tenants_or_accounts(fake, admin, steps) -> None:
    fake.reset()
    tokens = {
        "a1": (await admin.create_credential("tenant_a", account="acct_a1", scopes=[SHARED]))["token"],
        "a2": (await admin.create_credential("tenant_a", account="acct_a2", scopes=[SHARED]))["token"],
        "b1": (await admin.create_credential("tenant_b", account="acct_b1", scopes=[SHARED]))["token"],
    }
    tenant = {"a1": "A", "a2": "A", "b1": "B"}
    owner: dict[str, str] = {}  # proposal id → actor
    memory_tenant: dict[str, str] = {}
    for op, actor, word in steps:
        async with fake.client(tokens[actor]) as client:
            if op == "propose":
                response = await propose(
                    client, proposal_body(f"{word} note {uuid.uuid4().hex}", scope=SHARED)
                )
                owner[response.json()["proposal"]["id"]] = actor
            elif op == "approve" and owner:
                proposal_id = next(iter(owner))
                result = await admin.call("POST", f"/proposals/{proposal_id}/approve")
                memory_tenant[result["proposal"]["memory"]["id"]] = tenant[owner.pop(proposal_id)]
            elif op == "recall":
                for memory in (await recall(client, word)).json()["memories"]:
                    assert memory_tenant[memory["id"]] == tenant[actor]
            elif op == "status":
                for proposal_id, who in owner.items():
                    code = (await status(client, proposal_id)).status_code
                    assert code == (200 if who == actor else 404)


async def test_a_restored_snapshot_never_makes_a_built_in_token_work_off_loopback(tmp_path) -> None:
    """Whether a credential's token is a built-in (public) one is the fake's to know, from the
    hash: a snapshot saying otherwise, or bringing a built-in token in as a tenant's admin token or
    as a v1 token, changes nothing of that."""
    chosen = "an-admin-token-of-this-fake-0123456789"
    builtin_admin = hashlib.sha256(DEFAULT_ADMIN_TOKEN.encode()).hexdigest()
    async with InProcessFake.start(tmp_path, host="0.0.0.0", admin_token=chosen) as exposed:  # noqa: S104
        async with exposed.client(chosen) as http:
            document = (await http.get("/_fake/snapshot")).json()
            for tenant in document["tenants"]:
                for credential in tenant["credentials"]:
                    credential["builtin"] = False
            assert (await http.put("/_fake/snapshot", json=document)).status_code == 200
            async with exposed.client() as dev:
                assert (await recall(dev, "x")).status_code == 401  # still the public dev token
            as_v1 = copy.deepcopy(document)
            as_v1["tenants"][0]["credentials"][0]["token_sha256"] = builtin_admin
            refused = await http.put("/_fake/snapshot", json=as_v1)
            assert refused.status_code == 422
            assert (
                refused.json()["details"]["errors"][0]["pointer"] == "/tenants/0/credentials/0/token_sha256"
            )
            as_admin = copy.deepcopy(document)
            as_admin["tenants"][0]["admin_token_sha256"] = builtin_admin
            refused = await http.put("/_fake/snapshot", json=as_admin)
            assert refused.status_code == 422
            assert refused.json()["details"]["errors"][0]["pointer"] == "/tenants/0/admin_token_sha256"
        async with exposed.client(DEFAULT_ADMIN_TOKEN) as http:
            assert (await http.get("/_fake/clock")).status_code == 401


async def test_the_built_in_admin_token_configured_by_name_is_still_refused_off_loopback(tmp_path) -> None:
    exposing = InProcessFake.start(tmp_path, host="0.0.0.0", admin_token=DEFAULT_ADMIN_TOKEN)  # noqa: S104
    async with exposing as exposed, exposed.client(DEFAULT_ADMIN_TOKEN) as http:
        refused = await http.get("/_fake/clock")
    assert refused.status_code == 401
    assert "a token of your own" in refused.json()["detail"]
