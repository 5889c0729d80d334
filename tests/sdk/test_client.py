"""The client's everyday behaviour: typed immutable results, the headers and canonical bodies it sends,
idempotency keys, ``wait_for_decision`` and the synchronous facade."""

from __future__ import annotations

import dataclasses
import json

import pytest

from lucy_memory import (
    AgentMemoryClient,
    ConfigurationError,
    Proposal,
    ProposeResult,
    RecalledMemory,
    SyncAgentMemoryClient,
)
from tests.sdk.helpers import (
    CLIENT_NAME,
    DEV_TOKEN,
    Recorder,
    canonical_sha256_of,
    http_transport,
    proposal_json,
)

pytestmark = pytest.mark.anyio


async def test_recall_returns_typed_immutable_memories(fake, admin, new_client) -> None:
    client = new_client(fake)
    proposed = await client.propose(proposal_json(topic="main-database", importance=8))
    await admin.approve(proposed.proposal.id)

    result = await client.recall('{"query": "Which database?", "limit": 3}')

    [memory] = result.memories
    assert isinstance(memory, RecalledMemory)
    assert (memory.kind, memory.topic, memory.importance, memory.version) == (
        "decision",
        "main-database",
        8,
        1,
    )
    assert memory.scope.id == "project_example"
    assert memory.source == CLIENT_NAME
    assert memory.score > 0
    assert memory.last_accessed_at is not None
    assert memory.approved_at.tzinfo is not None
    assert result.credits.charged == 1
    assert json.loads(result.body)["request_id"] == result.request_id
    with pytest.raises(dataclasses.FrozenInstanceError):
        memory.content = "changed"  # type: ignore[misc]


async def test_every_request_carries_permissions_and_client_name_and_only_retries_carry_an_attempt(
    live, live_admin, new_client
) -> None:
    await live_admin.add_fault("propose", 502)
    recorder = Recorder(http_transport(live))
    client = new_client(live, transport=recorder, permissions=("memory:read", "memory:propose"))

    proposed = await client.propose(proposal_json())
    await client.recall('{"query": "database"}')
    await client.proposal_status(json.dumps({"proposal_id": proposed.proposal.id}))

    sent = [dict(request.headers) for request in recorder.requests]
    assert [request.operation for request in recorder.requests] == [
        "propose",
        "propose",
        "recall",
        "proposal_status",
    ]
    assert {headers["Lucy-Permissions"] for headers in sent} == {"memory:read,memory:propose"}
    assert {headers["Lucy-Client-Name"] for headers in sent} == {CLIENT_NAME}
    assert [headers.get("Lucy-Retry-Attempt") for headers in sent] == [None, "1", None, None]
    assert [headers.get("Idempotency-Key") for headers in sent][:2] == [proposed.idempotency_key] * 2
    assert "Content-Type" not in sent[3]  # GET has no body


async def test_a_non_ascii_client_name_is_percent_encoded_and_stored_decoded(fake, new_client) -> None:
    client = new_client(fake, client_name="Agent Ünïcode 100%")
    proposed = await client.propose(proposal_json())
    assert proposed.proposal.source == "Agent Ünïcode 100%"


def _client_named(name: object) -> AgentMemoryClient:
    """A client whose name alone is under test (it is checked before anything is sent)."""
    return AgentMemoryClient(
        transport=object(),  # type: ignore[arg-type]
        token="a-token-for-the-name-check",
        permissions=["memory:read"],
        client_name=name,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("name", ["   ", "", "Host\u0085Agent", "Host\x9fAgent", "Host\ud800", "x" * 101, 7])
def test_a_client_name_the_server_would_refuse_is_refused_up_front(name) -> None:
    with pytest.raises(ConfigurationError) as caught:
        _client_named(name)
    assert "client_name" in str(caught.value)


@pytest.mark.parametrize("name", ["ci ghp_1234567890abcdefghijABCDEFGHIJ123456", "password=hunter2hunter2"])
def test_a_client_name_that_looks_like_a_secret_is_refused_up_front_without_echo(name) -> None:
    """Lucy answers every request with such a Lucy-Client-Name 400 invalid_header."""
    with pytest.raises(ConfigurationError) as caught:
        _client_named(name)
    assert str(caught.value).startswith("invalid_configuration: client_name looks like a secret (pattern ")
    assert "hunter2" not in str(caught.value)
    assert "1234567890" not in str(caught.value)


@pytest.mark.parametrize("where", ["in process", "over HTTP"])
async def test_a_client_name_is_counted_and_sent_without_its_surrounding_spaces(
    fake, live, new_client, where
) -> None:
    """Over HTTP too, where a header value that begins or ends with a space cannot be sent at all
    (it failed every call as a lost response, with nothing sent)."""
    client = new_client(fake if where == "in process" else live, client_name="  " + "n" * 100 + "  ")
    proposed = await client.propose(proposal_json())
    assert proposed.proposal.source == "n" * 100
    assert (await client.recall('{"query": "anything"}')).credits.charged == 1


async def test_the_body_sent_is_the_rfc_8785_form_of_the_input(fake, admin, new_client) -> None:
    client = new_client(fake)
    messy = (
        '{ "scope": {"id": "project_example", "kind": "project"},\n'
        ' "content": "Caf\\u00e9 at 9", "kind": "fact" }'
    )
    await client.propose(messy)
    [row] = await admin.requests(operation="propose")
    assert row["body_sha256"] == canonical_sha256_of(messy)


async def test_a_generated_idempotency_key_is_returned_and_a_given_one_replays(
    fake, admin, new_client
) -> None:
    client = new_client(fake)
    first = await client.propose(proposal_json())
    second = await client.propose(proposal_json(), idempotency_key=first.idempotency_key)
    third = await client.propose(proposal_json())

    assert isinstance(first, ProposeResult)
    assert first.idempotency_key.startswith("lm-")
    assert (first.replayed, second.replayed, third.replayed) == (False, True, False)
    assert second.proposal.id == first.proposal.id
    assert second.original_request_id == first.request_id
    assert (second.credits.charged, second.credits.remaining) == (0, first.credits.remaining)
    assert third.idempotency_key != first.idempotency_key
    assert len((await admin.proposals())["items"]) == 2


async def test_wait_for_decision_stops_at_a_final_state(fake, admin, new_client) -> None:
    client = new_client(fake)
    proposed = await client.propose(proposal_json())
    delays: list[float] = []

    async def approve_while_waiting(seconds: float) -> None:
        delays.append(seconds)
        if len(delays) == 2:
            await admin.approve(proposed.proposal.id)

    waiting = new_client(fake, sleep=approve_while_waiting)
    result = await waiting.wait_for_decision(proposed.proposal.id, max_polls=10)

    assert isinstance(result.proposal, Proposal)
    assert result.proposal.status == "approved"
    assert result.proposal.is_saved is True
    assert delays == [1.0, 2.0]
    assert len(await admin.requests(operation="proposal_status")) == 3


@pytest.mark.parametrize(
    ("max_interval", "delays"),
    [
        (None, [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]),
        (5.0, [1.0, 2.0, 4.0, 5.0, 5.0, 5.0, 5.0]),
        (3.0, [1.0, 2.0, 3.0, 3.0, 3.0, 3.0, 3.0]),  # the smallest cap
    ],
)
async def test_wait_for_decision_backs_off_up_to_max_interval(
    fake, new_client, sleeps, max_interval, delays
) -> None:
    client = new_client(fake)
    proposed = await client.propose(proposal_json())
    await client.wait_for_decision(proposed.proposal.id, max_polls=8, max_interval=max_interval)
    assert sleeps.delays == delays


async def test_wait_for_decision_makes_at_most_max_polls_polls(fake, admin, new_client, sleeps) -> None:
    client = new_client(fake)
    proposed = await client.propose(proposal_json())

    result = await client.wait_for_decision(proposed.proposal.id, max_polls=4, max_interval=3.0)

    assert result.proposal.status == "pending"
    assert result.proposal.is_final is False
    assert len(await admin.requests(operation="proposal_status")) == 4
    assert sleeps.delays == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("max_polls", [0, -1, True])
async def test_wait_for_decision_needs_a_positive_max_polls(fake, admin, new_client, max_polls) -> None:
    client = new_client(fake)
    with pytest.raises(ConfigurationError):
        await client.wait_for_decision("prop_aaaaaaaaaaaaaaaaaaaaaaaa", max_polls=max_polls)
    assert await admin.requests() == []


@pytest.mark.parametrize(
    "options",
    [
        {"permissions": []},
        {"permissions": ["memory:write"]},
        {"permissions": "memory:read"},
        {"token": ""},
        {"token": "has space"},
        {"client_name": ""},
        {"client_name": "x" * 101},
        {"max_retries": 11},
    ],
)
async def test_the_client_checks_its_configuration(fake, new_client, options) -> None:
    with pytest.raises(ConfigurationError):
        new_client(fake, **options)


def test_the_sync_facade_recalls_and_proposes_against_a_live_server(live) -> None:
    with SyncAgentMemoryClient(
        transport=http_transport(live),
        token=DEV_TOKEN,
        permissions=["memory:read", "memory:propose"],
        client_name="sync-script",
    ) as client:
        proposed = client.propose(proposal_json())
        status = client.proposal_status(json.dumps({"proposal_id": proposed.proposal.id}))
        recalled = client.recall('{"query": "database"}')
        waited = client.wait_for_decision(proposed.proposal.id, max_polls=1)
    assert proposed.proposal.source == "sync-script"
    assert status.proposal.id == proposed.proposal.id
    assert recalled.memories == ()
    assert waited.proposal.status == "pending"
    assert waited.credits.remaining == 996
