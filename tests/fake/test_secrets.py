"""SPEC 1.5: secret-looking proposals are stored rejected, with the secret nowhere."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fake_lucy.runtime import FakeLucy
from fake_lucy.settings import FakeLucySettings
from fake_lucy.testing import AdminError
from lucy_memory._contract import load_json
from tests.helpers import PROJECT, WORKSPACE, approved_memory, proposal_body, propose, recall, status

pytestmark = pytest.mark.anyio

PATTERNS = load_json("contracts/secret-patterns.json")["patterns"]
PLACEHOLDER = load_json("contracts/agent-memory-api.contract.json")["secret_policy"]["placeholder"]
CASES = [(p["name"], example) for p in PATTERNS for example in p["positive"]]


def _database_bytes(fake) -> bytes:
    base = Path(fake.fake.settings.database)
    return b"".join(
        path.read_bytes() for path in (base, Path(f"{base}-wal"), Path(f"{base}-shm")) if path.exists()
    )


@pytest.mark.parametrize(("name", "secret"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
@pytest.mark.parametrize("field", ["content", "justification"])
async def test_a_secret_gives_a_charged_rejected_proposal_and_is_never_stored(
    fake, api, admin, name, secret, field
) -> None:
    fields = {"content": "Note for later."}
    fields[field] = f"Remember this: {secret} ok"
    response = await propose(api, proposal_body(**fields))
    assert response.status_code == 201, response.text
    assert response.headers["Lucy-Credits-Charged"] == "1"
    proposal = response.json()["proposal"]
    assert (proposal["status"], proposal["reason"]) == ("rejected", "secret_detected")
    assert proposal[field] == PLACEHOLDER
    assert proposal["topic"] is None
    assert secret not in response.text
    listed = await admin.proposals()
    assert secret not in str(listed)
    raw = _database_bytes(fake)
    assert raw, "the database file exists"
    for fragment in {secret, secret.encode("unicode_escape").decode()}:
        assert fragment.encode() not in raw, f"{name} leaked into the SQLite file"


async def test_the_callers_own_token_counts_as_a_secret(fake, api, admin) -> None:
    created = await admin.create_credential(scopes=[{"kind": "project", "id": "project_example"}])
    token = created["token"]
    async with fake.client(token) as own:
        response = await propose(own, proposal_body(f"my token is {token}"))
    proposal = response.json()["proposal"]
    assert (proposal["status"], proposal["reason"]) == ("rejected", "secret_detected")
    assert token.encode() not in _database_bytes(fake)
    assert token not in response.text


async def test_a_secret_in_a_kebab_case_topic_clears_the_topic(api) -> None:
    response = await propose(
        api, proposal_body("harmless", topic="ghp-token-note", justification="AKIAIOSFODNN7EXAMPLE")
    )
    proposal = response.json()["proposal"]
    assert proposal["reason"] == "secret_detected"
    assert (proposal["topic"], proposal["justification"]) == (None, PLACEHOLDER)


@pytest.mark.parametrize("text", [n for p in PATTERNS for n in p["negative"]])
async def test_near_misses_are_ordinary_pending_proposals(api, text) -> None:
    response = await propose(api, proposal_body(f"Context: {text}"))
    assert response.json()["proposal"]["status"] == "pending"


SECRET = "password=hunter2hunter2"


async def test_a_secret_proposal_keeps_a_valid_replaces_and_changes_nothing_else(api, admin) -> None:
    memory = (await approved_memory(api, admin, "The deploy key lives in the vault.", topic="deploy-key"))[
        "memory"
    ]
    other = await propose(api, proposal_body("The deploy key lives in 1Password.", topic="deploy-key"))
    response = await propose(
        api,
        proposal_body(f"Deploy key: {SECRET}", replaces={"memory_id": memory["id"], "version": 1}),
    )
    assert response.status_code == 201, response.text
    proposal = response.json()["proposal"]
    assert (proposal["status"], proposal["reason"]) == ("rejected", "secret_detected")
    assert proposal["replaces"] == {"memory_id": memory["id"], "version": 1}
    assert (await status(api, other.json()["proposal"]["id"])).json()["proposal"]["status"] == "pending"
    listed = {m["id"]: m for m in (await admin.memories())["items"]}
    assert (listed[memory["id"]]["version"], listed[memory["id"]]["status"]) == (1, "active")


@pytest.mark.parametrize(
    ("replaces", "scope", "status_code", "code"),
    [
        ({"memory_id": "mem_" + "x" * 22, "version": 1}, PROJECT, 404, "memory_not_found"),
        (None, PROJECT, 409, "version_conflict"),
        (None, WORKSPACE, 422, "invalid_request"),
    ],
)
async def test_a_secret_proposal_still_obeys_the_replaces_rules(
    api, admin, replaces, scope, status_code, code
) -> None:
    memory = (await approved_memory(api, admin, "Rotate the signing key yearly."))["memory"]
    replaces = replaces or {"memory_id": memory["id"], "version": 2 if scope == PROJECT else 1}
    before = await admin.ledger()
    response = await propose(api, proposal_body(f"Key: {SECRET}", scope=scope, replaces=replaces))
    assert (response.status_code, response.json()["code"]) == (status_code, code)
    assert await admin.ledger() == before


# -- issue 18, point 6: secrets in disguise, and secrets in the headers the fake keeps ---------------

DISGUISED = load_json("contracts/secret-patterns.json")["disguised"]["examples"]
PATTERN_DISGUISES = [e["text"] for e in DISGUISED if e["pattern"] != "caller_token"] + [
    e["text"]
    for kind in ("compatibility_examples", "separator_examples")
    for e in load_json("contracts/secret-patterns.json")[kind]["examples"]
]


@pytest.mark.parametrize("text", PATTERN_DISGUISES)
async def test_a_disguised_secret_is_rejected_and_never_recallable_even_with_auto_approve(
    fake, api, admin, text
) -> None:
    await admin.set_policy(auto_approve="all")
    response = await propose(api, proposal_body(f"Config note {text} end"))
    proposal = response.json()["proposal"]
    assert (proposal["status"], proposal["reason"]) == ("rejected", "secret_detected")
    assert proposal["content"] == PLACEHOLDER
    recalled = (await recall(api, "config note end")).json()["memories"]
    assert recalled == []
    assert text.encode() not in _database_bytes(fake)


@pytest.mark.parametrize("disguise", ["\u00ad", "\u200d", "fullwidth"])
async def test_the_callers_token_with_a_soft_hyphen_joiner_or_fullwidth_digits_is_a_secret(
    fake, admin, disguise
) -> None:
    created = await admin.create_credential(scopes=[{"kind": "project", "id": "project_example"}])
    token = created["token"]
    if disguise == "fullwidth":
        disguised = "".join(chr(ord(c) + 0xFEE0) if c.isdigit() else c for c in token)
        assert disguised != token, "the issued token has a digit to disguise"
    else:
        disguised = token[:10] + disguise + token[10:]
    async with fake.client(token) as own:
        response = await propose(own, proposal_body(f"my token is {disguised}"))
    proposal = response.json()["proposal"]
    assert (proposal["status"], proposal["reason"]) == ("rejected", "secret_detected")
    assert disguised.encode() not in _database_bytes(fake)


SECRET_KEY = "AKIAIOSFODNN7EXAMPLE"


async def test_an_idempotency_key_that_looks_like_a_secret_is_400_and_never_journaled(api, admin) -> None:
    response = await propose(api, key=SECRET_KEY)
    assert (response.status_code, response.json()["code"]) == (400, "invalid_header")
    assert SECRET_KEY not in response.text
    assert (await admin.proposals())["items"] == []
    [row] = await admin.requests()
    assert (row["idempotency_key"], row["status"], row["charged"]) == (None, 400, False)


async def test_a_secret_idempotency_key_refused_earlier_is_not_journaled_either(api, admin) -> None:
    # refused at step 4, before the key is checked (step 8): the journal row still leaves it out
    response = await propose(api, key=SECRET_KEY, headers={"Lucy-Permissions": "memory:read"})
    assert response.json()["code"] == "permission_denied"
    [row] = await admin.requests()
    assert row["idempotency_key"] is None
    assert SECRET_KEY not in str(await admin.requests())


@pytest.mark.parametrize(
    "name",
    [
        "ghp_1234567890abcdefghijABCDEFGHIJ123456",
        "password=hunter2hunter2",
        "AKIA%E2%80%8BIOSFODNN7EXAMPLE",  # a zero-width space, percent-encoded
    ],
)
async def test_a_client_name_that_looks_like_a_secret_is_400_and_never_stored(api, admin, name) -> None:
    response = await propose(api, headers={"Lucy-Client-Name": name})
    assert (response.status_code, response.json()["code"]) == (400, "invalid_header")
    assert "IOSFODNN" not in response.text
    assert "hunter2" not in response.text
    assert (await admin.proposals())["items"] == []


async def test_tokens_the_fake_issued_to_others_are_secrets_in_content_keys_and_never_in_a_snapshot(
    fake, api, admin
) -> None:
    """Not the caller's own token: a tenant admin's, and another credential's. As a key they are 400
    and never journaled; in content the proposal is rejected, and no snapshot holds either."""
    tenant_admin = (await admin.create_tenant("tenant-secrets"))["admin_token"]
    other = (await admin.create_credential("tenant_dev", scopes=[PROJECT]))["token"]
    for token in (tenant_admin, other):
        refused = await propose(api, key=token)
        assert (refused.status_code, refused.json()["code"]) == (400, "invalid_header")
        assert token not in refused.text
        answer = await propose(api, proposal_body(f"The CI agent uses {token} from now on."))
        proposal = answer.json()["proposal"]
        assert (proposal["status"], proposal["reason"]) == ("rejected", "secret_detected")
    async with fake.client(fake.admin_token) as http:
        snapshot = (await http.get("/_fake/snapshot", params={"include_journal": "true"})).text
    for token in (tenant_admin, other):
        assert token not in snapshot
        assert token not in str(await admin.requests())
        assert token.encode() not in _database_bytes(fake)


@pytest.mark.parametrize("glued", ["key-{}", "key_{}", "{}-x", "{}_x", "Bearer{}", "x-{}-y"])
async def test_an_issued_token_joined_to_other_text_is_still_a_secret(fake, api, admin, glued) -> None:
    """``-`` and ``_`` are token characters and also the usual separators: a token joined to a
    prefix or suffix by one (or glued to a word) is found all the same, as a key, a client name
    and in content."""
    tenant_admin = (await admin.create_tenant("tenant-glued"))["admin_token"]
    other = (await admin.create_credential("tenant_dev", scopes=[PROJECT]))["token"]
    for token in (tenant_admin, other):
        text = glued.format(token)
        refused = await propose(api, key=text)
        assert (refused.status_code, refused.json()["code"]) == (400, "invalid_header")
        named = await propose(api, headers={"Lucy-Client-Name": text})
        assert (named.status_code, named.json()["code"]) == (400, "invalid_header")
        answer = await propose(api, proposal_body(f"The CI agent uses {text} from now on."))
        proposal = answer.json()["proposal"]
        assert (proposal["status"], proposal["reason"]) == ("rejected", "secret_detected")
        assert token not in str(await admin.requests())
        assert token.encode() not in _database_bytes(fake)


async def test_a_reviewers_reason_that_looks_like_a_secret_is_refused_and_the_proposal_stays_pending(
    fake, api, admin
) -> None:
    """A rejection's reason is stored and shown to the proposal's agent by proposal status: one
    holding a token the fake issued or a key pattern is 422 at /reason_detail, without echo."""
    tenant_admin = (await admin.create_tenant("tenant-reasons"))["admin_token"]
    proposal = (await propose(api, proposal_body("Cache with Redis."))).json()["proposal"]["id"]
    reasons = ((f"ask {tenant_admin}", "lucy_token"), (f"the key is {AWS}", "aws_access_key_id"))
    for reason, pattern in reasons:
        with pytest.raises(AdminError) as refused:
            await admin.call("POST", f"/proposals/{proposal}/reject", {"reason_detail": reason})
        assert refused.value.status == 422
        assert refused.value.problem["details"]["errors"] == [
            {
                "pointer": "/reason_detail",
                "detail": f"holds secret-looking text ({pattern}); a reason is stored and shown to the"
                " agent by proposal status, so it never holds a secret",
            }
        ]
        assert reason.split()[-1] not in json.dumps(refused.value.problem)
    pending = (await status(api, proposal)).json()["proposal"]
    assert (pending["status"], pending["reason_detail"]) == ("pending", None)
    rejected = await admin.call("POST", f"/proposals/{proposal}/reject", {"reason_detail": "a duplicate"})
    assert rejected["proposal"]["reason_detail"] == "a duplicate"
    assert tenant_admin.encode() not in _database_bytes(fake)


async def test_an_ordinary_client_name_and_key_are_still_accepted(api) -> None:
    response = await propose(api, key="retry-0001", headers={"Lucy-Client-Name": "ci%20bot%20%E2%9C%93"})
    assert response.status_code == 201, response.text
    assert response.json()["proposal"]["source"] == "ci bot ✓"


# -- secrets that would come in another way: a restored snapshot, a seed --------------------------

AWS = "AKIAIOSFODNN7EXAMPLE"


def _first_memory_and_proposal(document: dict) -> tuple[str, dict, dict]:
    [t] = [i for i, tenant in enumerate(document["tenants"]) if tenant["memories"] and tenant["proposals"]]
    tenant = document["tenants"][t]
    return f"/tenants/{t}", tenant["memories"][0], tenant["proposals"][-1]


@pytest.mark.parametrize(
    ("where", "field"),
    [
        ("memory", "content"),
        ("memory", "source"),
        ("proposal", "content"),
        ("proposal", "justification"),
        ("proposal", "source"),
        ("proposal", "reason_detail"),
        ("idempotency_records", "key"),
        ("journal", "idempotency_key"),
    ],
)
async def test_a_snapshot_holding_a_secret_is_refused_and_changes_nothing(
    fake, api, admin, where, field
) -> None:
    await approved_memory(api, admin, "We use PostgreSQL 16.")
    await propose(api, proposal_body("Cache with Redis.", justification="Agreed in review."))
    document = await admin.call("GET", "/snapshot", include_journal=True)
    base, memory, proposal = _first_memory_and_proposal(document)
    if where == "memory":
        memory["versions"][0][field] = f"the key is {AWS}"
        pointer = f"{base}/memories/0/versions/0/{field}"
    elif where != "proposal":  # a key that a request with it as its header would have been refused
        [tenant] = [t for t in document["tenants"] if proposal in t["proposals"]]
        [i] = [i for i, row in enumerate(tenant[where]) if row[field]][-1:]
        tenant[where][i][field] = AWS
        pointer = f"{base}/{where}/{i}/{field}"
    else:
        proposal[field] = f"the key is {AWS}"
        [tenant] = [t for t in document["tenants"] if proposal in t["proposals"]]
        pointer = f"{base}/proposals/{tenant['proposals'].index(proposal)}/{field}"
    with pytest.raises(AdminError) as refused:
        await admin.call("PUT", "/snapshot", document)
    assert refused.value.status == 422
    [error] = refused.value.problem["details"]["errors"]
    assert error == {
        "pointer": pointer,
        "detail": "holds secret-looking text (aws_access_key_id); a snapshot never brings one in",
    }
    assert AWS not in json.dumps(await admin.call("GET", "/snapshot", include_journal=True))


def test_a_seed_holding_a_secret_is_refused_before_anything_is_stored(tmp_path: Path) -> None:
    token = "seeded-agent-token-0123456789abcdef"
    seed = {
        "tenants": [{"id": "tenant_seeded"}],
        "credentials": [
            {
                "token": token,
                "tenant": "tenant_seeded",
                "account": "acct_seeded",
                "user": "usr_seeded",
                "permissions": ["memory:read"],
                "scopes": [{"kind": "project", "id": "p1"}],
                "credits": 5,
            }
        ],
        "memories": [
            {
                "tenant": "tenant_seeded",
                "scope": {"kind": "project", "id": "p1"},
                "kind": "fact",
                "content": "Plain.",
            },
            {
                "tenant": "tenant_seeded",
                "scope": {"kind": "project", "id": "p1"},
                "kind": "fact",
                "content": f"Our token is {token}.",
            },
        ],
    }
    path = tmp_path / "seed.json"
    for content, pattern in ((f"Our token is {token}.", "caller_token"), (f"AWS {AWS}", "aws_access_key_id")):
        seed["memories"][1]["content"] = content
        path.write_text(json.dumps(seed), encoding="utf-8")
        with pytest.raises(ValueError, match=rf"/memories/1/content holds secret-looking text \({pattern}\)"):
            FakeLucy(FakeLucySettings(database=str(tmp_path / "seeded.sqlite3"), seed=path))


async def test_a_snapshot_of_ordinary_proposals_restores_whatever_their_fields_hold_side_by_side(
    fake, api, admin
) -> None:
    """Each stored string is scanned alone: a topic ending in "bearer" beside content that starts
    with a path is no bearer token (scanned joined, the fake refused its own snapshot)."""
    body = proposal_body("docs/auth/tokens.md explains the token flow.", topic="auth-bearer")
    assert (await propose(api, body)).status_code == 201
    document = await admin.call("GET", "/snapshot")
    assert await admin.call("PUT", "/snapshot", document) == {"restored": True}


@pytest.mark.parametrize(
    ("collection", "field", "said"),
    [
        ("tenants", "id", "'tenant_seeded'"),
        ("credentials", "credential_id", "'cred_seeded_000000000001'"),
        ("credentials", "token", "the token"),
    ],
)
def test_a_seed_listing_a_tenant_credential_or_token_twice_names_both_places(
    tmp_path: Path, collection: str, field: str, said: str
) -> None:
    """A tenant listed twice with two policies was taken (which policy held was the file's order);
    a repeated credential id or token was refused without saying where."""
    credential = {
        "token": "seeded-agent-token-0123456789abcdef",
        "credential_id": "cred_seeded_000000000001",
        "tenant": "tenant_seeded",
        "account": "acct_seeded",
        "user": "usr_seeded",
        "permissions": ["memory:read"],
        "scopes": [{"kind": "project", "id": "p1"}],
    }
    second = {
        **credential,
        "token": "another-token-0123456789abcdef01",
        "credential_id": "cred_seeded_000000000002",
    }
    seed: dict = {
        "tenants": [{"id": "tenant_seeded", "policy": {"auto_approve": "all"}}],
        "credentials": [credential, second],
    }
    if collection == "tenants":
        seed["tenants"].append({"id": "tenant_seeded", "policy": {"auto_approve": "off"}})
    else:
        second[field] = credential[field]
    path = tmp_path / "seed.json"
    path.write_text(json.dumps(seed), encoding="utf-8")
    said_here = f"/{collection}/1/{field} repeats {said} of /{collection}/0/{field}: each is listed once"
    with pytest.raises(ValueError, match=re.escape(said_here)) as refused:
        FakeLucy(FakeLucySettings(database=str(tmp_path / "seeded.sqlite3"), seed=path))
    assert str(refused.value).endswith(said_here)
    assert credential["token"] not in str(refused.value)
