"""Issue 17, point 7: an SDK error reads as its code followed by whole sentences: a server detail
without a full stop is ended before the next sentence starts, and no sentence contradicts another."""

from __future__ import annotations

import re

import httpx
import pytest

from lucy_memory import (
    AgentMemoryClient,
    ConnectionFailedError,
    LucyMemoryError,
    NotFoundError,
    PermissionDeniedError,
    UnauthenticatedError,
)
from tests.sdk.helpers import BOTH, DEV_TOKEN, RaisingTransport, http_transport, proposal_json, refused

pytestmark = pytest.mark.anyio

_SENTENCE_END = re.compile(r"(?<=[.!?]) +")


def assert_whole_sentences(error: LucyMemoryError) -> None:
    text = str(error)
    prefix = f"{error.code}: "
    assert text.startswith(prefix)
    sentences = _SENTENCE_END.split(text.removeprefix(prefix))
    assert all(sentence.endswith((".", "!", "?")) for sentence in sentences), sentences
    assert all(sentence[0].isupper() for sentence in sentences[1:]), sentences


async def test_a_server_detail_without_a_full_stop_is_ended_before_the_retry_sentence(fake) -> None:
    client = AgentMemoryClient(
        transport=http_transport(fake), token="an-unknown-token-0123456789", permissions=BOTH
    )
    with pytest.raises(UnauthenticatedError) as caught:
        await client.recall('{"query": "database"}')
    assert str(caught.value) == (
        "unauthenticated: the bearer token is unknown or revoked. "
        "Nothing was executed or charged. A recall is never retried automatically."
    )
    assert_whole_sentences(caught.value)


async def test_a_proposal_status_error_names_the_call_in_a_sentence_of_its_own(fake, new_client) -> None:
    client = new_client(fake)
    with pytest.raises(NotFoundError) as caught:
        await client.proposal_status('{"proposal_id": "prop_' + "q" * 22 + '"}')
    assert str(caught.value).endswith(
        ". Nothing was executed or charged. A proposal status request is never retried automatically."
    )
    assert_whole_sentences(caught.value)


async def test_a_refusal_before_sending_says_so_in_a_sentence_of_its_own() -> None:
    client = AgentMemoryClient(
        transport=RaisingTransport(refused()), token=DEV_TOKEN, permissions=["memory:read"]
    )
    with pytest.raises(PermissionDeniedError) as caught:
        await client.propose(proposal_json())
    assert str(caught.value) == (
        "permission_denied: this client is not configured with memory:propose, which propose needs. "
        "Nothing was sent and nothing was charged."
    )


@pytest.mark.parametrize("operation", ["recall", "propose"])
async def test_a_connection_failure_never_adds_that_repeating_may_charge_again(operation) -> None:
    client = AgentMemoryClient(transport=RaisingTransport(refused()), token=DEV_TOKEN, permissions=BOTH)
    call = (
        client.recall('{"query": "database"}')
        if operation == "recall"
        else client.propose(proposal_json(), idempotency_key="k-no-connection")
    )
    with pytest.raises(ConnectionFailedError) as caught:
        await call
    assert str(caught.value) == (
        "connection_failed: could not connect to the service (ConnectError); nothing was sent and nothing "
        "was charged, so calling again is safe."
    )


async def test_a_problem_without_a_detail_says_what_arrived(fake, new_client) -> None:
    client = new_client(
        fake, transport=http_transport(fake, http=httpx.MockTransport(lambda request: httpx.Response(502)))
    )
    with pytest.raises(LucyMemoryError) as caught:
        await client.recall('{"query": "database"}')
    assert caught.value.detail == "the service answered HTTP 502 without a problem detail"
    assert_whole_sentences(caught.value)


@pytest.mark.parametrize("operation", ["recall", "proposal_status"])
async def test_a_redirect_is_said_not_to_have_executed_and_names_base_url(
    fake, new_client, operation
) -> None:
    """A proxy's or redirector's 308 (an apex to www, say) never reached the API: the message must
    not say the call executed and was charged, which would keep a caller from repeating it."""

    def redirect(request: httpx.Request) -> httpx.Response:
        return httpx.Response(308, headers={"Location": "https://www.lucy.example/api/agent-memory/v1/x"})

    client = new_client(fake, transport=http_transport(fake, http=httpx.MockTransport(redirect)))
    call = (
        client.recall('{"query": "database"}')
        if operation == "recall"
        else client.proposal_status('{"proposal_id": "prop_' + "q" * 22 + '"}')
    )
    with pytest.raises(LucyMemoryError) as caught:
        await call
    assert caught.value.status == 308
    assert str(caught.value).endswith(
        "A redirect is no answer of the API: the call did not execute there and nothing was charged. The"
        " SDK follows no redirect: base_url must be the deployment's own origin."
    )
    assert "executed and was charged" not in str(caught.value)
    assert_whole_sentences(caught.value)
