"""Must hold 6: client-side refusals send nothing — the journal stays empty and nothing is charged."""

from __future__ import annotations

import json

import pytest

from lucy_memory import (
    ConfigurationError,
    IdempotencyKeyRequiredError,
    InsecureTransportError,
    InvalidJSONError,
    InvalidRequestError,
    LucyMemoryError,
    PermissionDeniedError,
    SecretDetectedError,
    create_lucy_http_transport,
)
from lucy_memory._contract import load_json
from tests.sdk.helpers import PROJECT, Recorder, http_transport, proposal_json

pytestmark = pytest.mark.anyio

OWN_TOKEN = "team-memory-token-0123456789"  # ≥ 16 characters, and kebab-case so it is also a valid topic


async def _nothing_happened(admin, recorder) -> None:
    assert recorder.requests == []
    assert await admin.requests() == []
    assert [row for row in await admin.ledger() if row["operation"] != "admin_set"] == []


async def test_the_fake_journals_what_the_client_does_send(fake, admin, new_client) -> None:
    """The control for the tests below: an accepted request does show up in the journal and ledger."""
    recorder = Recorder(http_transport(fake))
    client = new_client(fake, transport=recorder)
    await client.recall('{"query": "database"}')
    assert len(recorder.requests) == 1
    assert [row["operation"] for row in await admin.requests()] == ["recall"]
    assert [row["operation"] for row in await admin.ledger()].count("recall") == 1


@pytest.mark.parametrize(
    ("permissions", "call"),
    [
        (("memory:propose",), "recall"),
        (("memory:read",), "propose"),
        (("memory:read",), "proposal_status"),
    ],
)
async def test_a_permission_the_client_was_not_configured_with_is_refused(
    fake, admin, new_client, permissions, call
) -> None:
    recorder = Recorder(http_transport(fake))
    client = new_client(fake, transport=recorder, permissions=permissions)
    request = {
        "recall": '{"query": "database"}',
        "propose": proposal_json(),
        "proposal_status": '{"proposal_id": "prop_aaaaaaaaaaaaaaaaaaaaaaaa"}',
    }[call]

    with pytest.raises(PermissionDeniedError) as caught:
        await getattr(client, call)(request)

    assert caught.value.status is None
    assert caught.value.attempts == 0
    assert caught.value.code == "permission_denied"
    assert "Nothing was sent" in str(caught.value)
    await _nothing_happened(admin, recorder)


SECRETS = {
    "aws_access_key_id": "AKIAIOSFODNN7EXAMPLE",
    "github_token": "ghp_1234567890abcdefghijABCDEFGHIJ123456",
    "credential_assignment": "password=hunter22",
    "pem_private_key": "-----BEGIN RSA PRIVATE KEY-----",
}


@pytest.mark.parametrize("pattern", sorted(SECRETS))
@pytest.mark.parametrize("field", ["content", "justification"])
async def test_a_secret_pattern_in_content_or_justification_is_refused(
    fake, admin, new_client, pattern, field
) -> None:
    recorder = Recorder(http_transport(fake))
    client = new_client(fake, transport=recorder)
    fields = {"content": "Deploy notes.", "justification": "Needed for deploys."}
    fields[field] = f"The value is {SECRETS[pattern]} for now."
    body = json.dumps({"kind": "fact", "scope": PROJECT, **fields})

    with pytest.raises(SecretDetectedError) as caught:
        await client.propose(body)

    assert (caught.value.field, caught.value.pattern) == (field, pattern)
    assert caught.value.status is None
    assert SECRETS[pattern] not in str(caught.value)
    await _nothing_happened(admin, recorder)


async def test_a_secret_looking_idempotency_key_is_refused_before_sending_and_never_repeated(
    fake, admin, new_client
) -> None:
    """Lucy refuses such a key (``invalid_header``); the SDK refuses it first, so it is neither sent
    nor kept on the error (its ``str`` and ``repr``)."""
    recorder = Recorder(http_transport(fake))
    client = new_client(fake, transport=recorder)
    with pytest.raises(SecretDetectedError) as caught:
        await client.propose(proposal_json(), idempotency_key=SECRETS["aws_access_key_id"])
    assert (caught.value.field, caught.value.pattern) == ("idempotency_key", "aws_access_key_id")
    assert caught.value.idempotency_key is None
    assert SECRETS["aws_access_key_id"] not in str(caught.value) + repr(caught.value)
    await _nothing_happened(admin, recorder)


@pytest.mark.parametrize("field", ["content", "justification", "topic"])
async def test_the_clients_own_token_in_a_field_is_refused(fake, admin, new_client, field) -> None:
    recorder = Recorder(http_transport(fake))
    client = new_client(fake, transport=recorder, token=OWN_TOKEN)
    fields = {"content": "Deploy notes.", "justification": "Needed.", "topic": "deploys"}
    fields[field] = OWN_TOKEN if field == "topic" else f"use {OWN_TOKEN} here"
    body = json.dumps({"kind": "fact", "scope": PROJECT, **fields})

    with pytest.raises(SecretDetectedError) as caught:
        await client.propose(body)

    assert (caught.value.field, caught.value.pattern) == (field, "caller_token")
    assert OWN_TOKEN not in str(caught.value)
    await _nothing_happened(admin, recorder)


DISGUISED = load_json("contracts/secret-patterns.json")["disguised"]["examples"]
_OWN_DISGUISES = {
    "soft hyphen": OWN_TOKEN[:8] + "\u00ad" + OWN_TOKEN[8:],
    "zero-width joiner": OWN_TOKEN[:8] + "\u200d" + OWN_TOKEN[8:],
    "fullwidth digits": OWN_TOKEN.replace("0123", "\uff10\uff11\uff12\uff13"),
}


@pytest.mark.parametrize(
    ("pattern", "text"),
    [(e["pattern"], e["text"]) for e in DISGUISED if e["pattern"] != "caller_token"]
    + [("caller_token", f"use {text} here") for text in _OWN_DISGUISES.values()],
)
async def test_a_disguised_secret_is_refused_before_sending(fake, admin, new_client, pattern, text) -> None:
    recorder = Recorder(http_transport(fake))
    client = new_client(fake, transport=recorder, token=OWN_TOKEN)
    body = json.dumps({"kind": "fact", "scope": PROJECT, "content": f"Notes: {text}"})

    with pytest.raises(SecretDetectedError) as caught:
        await client.propose(body)

    assert (caught.value.field, caught.value.pattern) == ("content", pattern)
    assert text not in str(caught.value)
    await _nothing_happened(admin, recorder)


@pytest.mark.parametrize(
    ("call", "request_json", "pointers"),
    [
        ("recall", '{"query": "database", "limit": 51}', ["/limit"]),
        ("recall", '{"query": "database", "colour": "red"}', ["/colour"]),
        ("recall", "{}", ["/query"]),
        ("propose", json.dumps({"kind": "fact", "content": "é" * 4097, "scope": PROJECT}), ["/content"]),
        ("propose", json.dumps({"kind": "secret", "content": "x", "scope": PROJECT}), ["/kind"]),
        ("proposal_status", '{"proposal_id": "not-a-proposal"}', ["/proposal_id"]),
    ],
)
async def test_a_request_failing_the_schema_is_refused_with_pointers(
    fake, admin, new_client, call, request_json, pointers
) -> None:
    recorder = Recorder(http_transport(fake))
    client = new_client(fake, transport=recorder)

    with pytest.raises(InvalidRequestError) as caught:
        await getattr(client, call)(request_json)

    assert [error.pointer for error in caught.value.errors] == pointers
    assert caught.value.status is None
    assert caught.value.code == "invalid_request"
    await _nothing_happened(admin, recorder)


@pytest.mark.parametrize(
    "request_json",
    [
        '{"query": "a", "query": "b"}',
        '{"query": "a", "limit": NaN}',
        '{"query": "a", "limit": Infinity}',
        '["query"]',
        '{"query": "\\ud800"}',
        "",
    ],
)
async def test_json_that_is_not_strict_is_refused(fake, admin, new_client, request_json) -> None:
    recorder = Recorder(http_transport(fake))
    client = new_client(fake, transport=recorder)
    with pytest.raises(InvalidJSONError) as caught:
        await client.recall(request_json)
    assert caught.value.status is None
    await _nothing_happened(admin, recorder)


async def test_a_malformed_idempotency_key_is_refused(fake, admin, new_client) -> None:
    recorder = Recorder(http_transport(fake))
    client = new_client(fake, transport=recorder)
    with pytest.raises(IdempotencyKeyRequiredError):
        await client.propose(proposal_json(), idempotency_key="has space")
    await _nothing_happened(admin, recorder)


@pytest.mark.parametrize(
    ("base_url", "allow"),
    [
        ("http://127.0.0.1:8787", False),
        ("http://localhost:8787", False),
        ("http://lucy.example", True),
        ("http://192.168.1.10:8787", True),
        ("http://127.0.0.1.nip.io", True),
    ],
)
def test_cleartext_http_is_refused_unless_loopback_and_explicitly_allowed(base_url, allow) -> None:
    with pytest.raises(InsecureTransportError) as caught:
        create_lucy_http_transport(base_url=base_url, allow_insecure_loopback=allow)
    assert caught.value.status is None


@pytest.mark.parametrize(
    "base_url",
    [
        "http://127.0.0.1:8787",
        "http://localhost:8787/",
        "http://[::1]:8787",
        "https://lucy.example",
        "https://lucy_memory.internal:8443",
        "https://xn--bcher-kva.example",
    ],
)
def test_https_and_allowed_loopback_http_are_accepted(base_url) -> None:
    transport = create_lucy_http_transport(base_url=base_url, allow_insecure_loopback=True)
    assert transport.origin == base_url.rstrip("/")


@pytest.mark.parametrize(
    "options",
    [
        {"base_url": "https://lucy.example/api/agent-memory/v1"},
        {"base_url": "https://user:pw@lucy.example"},
        {"base_url": "ftp://lucy.example"},
        {"base_url": "https://lucy.example", "timeout": 0},
        {"base_url": "https://lucy.example", "connect_timeout": float("nan")},
        {"base_url": "https://lucy.example", "max_retries": 11},
        {"base_url": "https://lucy.example", "max_retries": -1},
    ],
)
def test_the_transport_factory_checks_its_arguments_when_called(options) -> None:
    with pytest.raises(ConfigurationError):
        create_lucy_http_transport(**options)


async def test_an_insecure_url_is_refused_before_any_request_reaches_the_fake(fake, admin) -> None:
    with pytest.raises(LucyMemoryError):
        create_lucy_http_transport(base_url=fake.base_url, http_transport=fake.transport)
    assert await admin.requests() == []


@pytest.mark.parametrize("allow", ["no", 1, 0.0001, None])
def test_the_cleartext_switch_is_true_or_false_not_any_value_that_reads_as_true(allow) -> None:
    """``allow_insecure_loopback="no"`` used to allow cleartext: the switch is checked as every other
    argument is."""
    with pytest.raises(ConfigurationError) as caught:
        create_lucy_http_transport(base_url="http://127.0.0.1:8787", allow_insecure_loopback=allow)
    assert "allow_insecure_loopback must be True or False" in str(caught.value)
