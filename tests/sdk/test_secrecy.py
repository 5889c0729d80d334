"""Must hold 8: the token appears in no ``repr``, ``str``, exception message or log record (DEBUG)."""

from __future__ import annotations

import json
import logging
import traceback

import httpx
import pytest

from lucy_memory import (
    ConnectionFailedError,
    LucyMemoryError,
    ResponseLostError,
    SyncAgentMemoryClient,
    TransportResponse,
)
from lucy_memory.mcp.render import render_error
from tests.sdk.helpers import PROJECT, Recorder, http_transport, proposal_json

pytestmark = pytest.mark.anyio


def _texts_of_error(error: BaseException) -> list[str]:
    texts = [str(error), repr(error), *map(str, error.args)]
    texts.append("".join(traceback.format_exception(error)))
    return texts


async def test_the_token_is_in_no_repr_str_error_or_log_record(live, live_admin, new_client, caplog) -> None:
    caplog.set_level(logging.DEBUG)  # the root logger: the SDK's, httpx's and httpcore's records
    credential = await live_admin.create_credential(scopes=[PROJECT])
    token = credential["token"]
    recorder = Recorder(http_transport(live))
    client = new_client(live, token=token, transport=recorder)
    seen: list[str] = [repr(client), str(client), repr(recorder.inner)]
    errors: list[BaseException] = []

    await live_admin.add_fault("propose", 429, retry_after=1)
    proposed = await client.propose(proposal_json())
    recalled = await client.recall('{"query": "database"}')
    status = await client.proposal_status(json.dumps({"proposal_id": proposed.proposal.id}))
    seen += [repr(proposed), str(proposed), repr(recalled), repr(status)]

    await live_admin.add_fault("propose", 503, phase="after_commit", drop_connection=True)
    await live_admin.add_fault("recall", 503, count=1)
    attempts = [
        client.propose(proposal_json("Another decision.")),  # ResponseLostError
        client.recall('{"query": "database"}'),  # 503
        client.propose(proposal_json(f"my token is {token}")),  # SecretDetectedError
        client.recall(json.dumps({"query": token, "limit": 99})),  # InvalidRequestError
        client.recall('{"query": "a", "query": "' + token + '"}'),  # InvalidJSONError
        client.recall(json.dumps({"query": "a", token: 1})),  # InvalidRequestError at /<the name>
    ]
    for attempt in attempts:
        with pytest.raises(LucyMemoryError) as caught:
            await attempt
        errors.append(caught.value)
    seen += [repr(request) for request in recorder.requests]
    for error in errors:
        seen += _texts_of_error(error)
        seen += [repr(item) for item in getattr(error, "errors", ())]
    seen += [record.getMessage() for record in caplog.records]
    seen += [caplog.text]

    # The material checked is real: the token was sent, and the loggers did write records.
    assert recorder.requests[0].headers["Authorization"] == f"Bearer {token}"
    assert {record.name.split(".")[0] for record in caplog.records} >= {"lucy_memory", "httpx", "httpcore"}
    assert [type(error).__name__ for error in errors] == [
        "ResponseLostError",
        "ServiceUnavailableError",
        "SecretDetectedError",
        "InvalidRequestError",
        "InvalidJSONError",
        "InvalidRequestError",
    ]
    assert errors[-1].errors[0].pointer == "/[redacted]"  # type: ignore[attr-defined]
    leaks = [text for text in seen if token in text]
    assert leaks == []


@pytest.mark.parametrize("status", [500, 422])
async def test_a_server_detail_that_echoes_the_token_is_redacted(fake, new_client, status) -> None:
    """In the problem's detail, and in a schema error's pointer and detail (a property named by the
    token)."""
    token = "tok_" + "s" * 40
    problem = {
        "type": "https://agent-memory.invalid/problems/internal",
        "title": "Internal error",
        "status": status,
        "detail": f"backend said {token}",
        "code": "internal",
        "request_id": "req_" + "a" * 24,
        "retryable": False,
    }
    if status == 422:
        problem |= {
            "type": "https://agent-memory.invalid/problems/invalid-request",
            "title": "Invalid request",
            "code": "invalid_request",
            "details": {"errors": [{"pointer": f"/{token}", "detail": f"{token} is not allowed"}]},
        }
    response = TransportResponse(status=status, headers={}, body=json.dumps(problem).encode())

    class Echoing:
        async def send(self, request):
            return response

    client = new_client(fake, token=token, transport=Echoing())
    with pytest.raises(LucyMemoryError) as caught:
        await client.recall('{"query": "database"}')
    assert "backend said [redacted]" in str(caught.value)
    assert token not in str(caught.value)
    schema_errors = [repr(item) for item in getattr(caught.value, "errors", ())]
    assert len(schema_errors) == (status == 422)
    assert not [text for text in schema_errors if token in text]


def test_the_sync_facade_hides_the_token_too(fake) -> None:
    token = "tok_" + "s" * 40
    with SyncAgentMemoryClient(
        transport=http_transport(fake, http=httpx.MockTransport(lambda request: httpx.Response(500))),
        token=token,
        permissions=["memory:read"],
    ) as client:
        assert token not in repr(client)


@pytest.mark.parametrize("error_class", [ConnectionFailedError, ResponseLostError])
async def test_an_sdk_error_a_custom_transport_raises_with_the_token_in_it_is_redacted(
    fake, new_client, error_class
) -> None:
    """A custom transport may quote the request's headers in its own error (the ``Transport``
    protocol lets it raise these classes): the caller, and an MCP host, never see the token."""
    token = "tok_" + "t" * 40

    class Quoting:
        async def send(self, request):
            raise error_class(
                f"proxy CONNECT failed; sent {dict(request.headers)}",
                operation=request.operation,
                idempotency_key=request.idempotency_key,
                attempts=1,
            )

    client = new_client(fake, token=token, transport=Quoting())
    with pytest.raises(error_class) as caught:
        await client.propose(proposal_json(), idempotency_key="quoted-1")
    error = caught.value
    assert "Bearer [redacted]" in error.detail  # the transport's words are kept, but the token
    assert error.idempotency_key == "quoted-1"
    assert [text for text in _texts_of_error(error) if token in text] == []
    rendered = render_error(error, operation="propose")
    assert "Bearer [redacted]" in rendered
    assert token not in rendered


async def test_an_error_a_custom_transport_raised_is_redacted_in_the_chain_a_traceback_shows(
    fake, new_client
) -> None:
    """A transport's error that the client wraps (a lost answer without the propose's key, a network
    error of httpx's) stays the wrapper's cause: redacted there too, the traceback holds no token."""
    token = "tok_" + "c" * 40
    raised: list[BaseException] = [
        ResponseLostError("timed out; sent {'Authorization': 'Bearer " + token + "'}"),
        httpx.ConnectError(f"connect failed; sent Bearer {token}"),
    ]

    class Quoting:
        async def send(self, request):
            raise raised.pop(0)

    client = new_client(fake, token=token, transport=Quoting())
    for key, expected in (("chained-1", ResponseLostError), ("chained-2", ConnectionFailedError)):
        with pytest.raises(expected) as caught:
            await client.propose(proposal_json(), idempotency_key=key)
        assert caught.value.__cause__ is not None  # the transport's own error, kept as the cause
        assert "Bearer [redacted]" in str(caught.value.__cause__)
        assert [text for text in _texts_of_error(caught.value) if token in text] == []
