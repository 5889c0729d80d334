"""Issue 3, point 4: the per-credential token bucket on the fake clock (SPEC 2.3)."""

from __future__ import annotations

import math
import re
import sqlite3
from fractions import Fraction

import httpx
import pytest

from fake_lucy.domain import ratelimit
from fake_lucy.testing import InProcessFake
from tests.conftest import HOOKS
from tests.helpers import V1, propose, recall, status

pytestmark = pytest.mark.anyio

RATE_LIMIT = re.compile(r'^"credential";r=(\d+);t=(\d+)$')


def bucket(response: httpx.Response) -> tuple[int, int]:
    """``(r, t)`` of the ``RateLimit`` header: whole tokens left, seconds until full."""
    match = RATE_LIMIT.fullmatch(response.headers["RateLimit"])
    assert match, response.headers["RateLimit"]
    return int(match[1]), int(match[2])


async def test_there_is_no_rate_limit_by_default(api, admin) -> None:
    assert (await admin.policy())["rate_limit_per_minute"] is None
    responses = [await recall(api, "database") for _ in range(25)]
    assert {r.status_code for r in responses} == {200}
    assert not any("RateLimit" in r.headers or "RateLimit-Policy" in r.headers for r in responses)


async def test_an_empty_bucket_answers_429_with_retry_after_and_charges_nothing(api, admin) -> None:
    await admin.set_clock(frozen=True)
    await admin.set_policy(rate_limit_per_minute=3)
    allowed = [await recall(api, "database") for _ in range(3)]
    assert [r.status_code for r in allowed] == [200, 200, 200]
    assert {r.headers["RateLimit-Policy"] for r in allowed} == {'"credential";q=3;w=60'}
    assert [bucket(r) for r in allowed] == [(2, 20), (1, 40), (0, 60)]
    limited = await recall(api, "database")
    assert limited.status_code == 429
    assert limited.json()["code"] == "rate_limited"
    assert limited.json()["retryable"] is True
    assert limited.headers["Retry-After"] == "20", "3 per minute: one token every 20 seconds"
    assert limited.headers["RateLimit-Policy"] == '"credential";q=3;w=60'
    assert bucket(limited) == (0, 60)
    assert "Lucy-Credits-Charged" not in limited.headers
    ledger = await admin.ledger(account="acct_dev")
    assert [row["operation"] for row in ledger] == ["recall"] * 3
    journal = await admin.requests()
    assert (journal[-1]["status"], journal[-1]["charged"]) == (429, False)


async def test_advancing_the_fake_clock_refills_the_bucket(api, admin) -> None:
    await admin.set_clock(frozen=True)
    await admin.set_policy(rate_limit_per_minute=6)
    for _ in range(6):
        assert (await recall(api, "database")).status_code == 200
    assert (await recall(api, "database")).headers["Retry-After"] == "10"
    await admin.advance_clock(5)
    still = await recall(api, "database")
    assert still.status_code == 429
    assert still.headers["Retry-After"] == "5"
    await admin.advance_clock(5)
    refilled = await recall(api, "database")
    assert refilled.status_code == 200
    assert bucket(refilled)[0] == 0
    await admin.advance_clock(3600)
    full = [await recall(api, "database") for _ in range(7)]
    assert [r.status_code for r in full] == [200] * 6 + [429], "the bucket never holds more than its capacity"


async def test_every_request_reaching_the_limiter_takes_a_token_even_one_that_fails_later(api, admin) -> None:
    await admin.set_clock(frozen=True)
    await admin.set_policy(rate_limit_per_minute=2)
    bad_json = await api.post(V1 + "/recall", content=b"[", headers={"Content-Type": "application/json"})
    no_key = await api.post(V1 + "/proposals", json={})
    assert [bad_json.status_code, no_key.status_code] == [400, 400]
    assert [bucket(bad_json)[0], bucket(no_key)[0]] == [1, 0]
    assert (await recall(api, "database")).status_code == 429


async def test_while_a_limit_is_set_every_authenticated_v1_response_carries_the_headers(api, admin) -> None:
    await admin.set_clock(frozen=True)
    await admin.set_policy(rate_limit_per_minute=30)
    created = await propose(api)
    responses = [
        created,
        await propose(api, key=created.json()["idempotency_key"]),
        await status(api, created.json()["proposal"]["id"]),
        await status(api, "prop_" + "x" * 22),
        await recall(api, "database", limit=99),
        await api.post(V1 + "/recall", json={"query": "x"}, headers={"Lucy-Permissions": "memory:propose"}),
        await api.post(V1 + "/recall", json={"query": "x"}, headers={"Lucy-Permissions": "bogus"}),
    ]
    assert [r.status_code for r in responses] == [201, 201, 200, 404, 422, 403, 400]
    for response in responses:
        assert response.headers["RateLimit-Policy"] == '"credential";q=30;w=60', response.text
        assert RATE_LIMIT.fullmatch(response.headers["RateLimit"])
    assert bucket(responses[4]) == (25, 10)
    assert bucket(responses[-1]) == (25, 10), "a request refused before step 6 takes no token"


async def test_each_credential_has_its_own_bucket(fake: InProcessFake, api, admin) -> None:
    await admin.set_clock(frozen=True)
    await admin.set_policy(rate_limit_per_minute=1)
    other = await admin.create_credential()
    assert (await recall(api, "database")).status_code == 200
    assert (await recall(api, "database")).status_code == 429
    async with fake.client(other["token"], event_hooks=HOOKS) as client:
        assert (await recall(client, "database")).status_code == 200
        assert (await recall(client, "database")).status_code == 429


async def test_a_429_from_the_limiter_is_not_a_reason_to_charge_even_for_propose(api, admin) -> None:
    await admin.set_clock(frozen=True)
    await admin.set_policy(rate_limit_per_minute=1)
    assert (await propose(api, key="first")).status_code == 201
    limited = await propose(api, key="second")
    assert limited.status_code == 429
    assert len((await admin.proposals())["items"]) == 1
    await admin.set_policy(rate_limit_per_minute=None)
    after = await propose(api, key="second")
    assert after.status_code == 201
    assert "RateLimit" not in after.headers
    assert "Idempotent-Replayed" not in after.headers, "the 429 was not stored"


async def test_retry_after_is_exact_after_the_clock_moves(api, admin) -> None:
    # 2 per minute, 20 s later: 2/3 of a token, the next one 10 s away (float arithmetic said 11).
    await admin.set_clock(frozen=True)
    await admin.set_policy(rate_limit_per_minute=2)
    assert [(await recall(api, "database")).status_code for _ in range(2)] == [200, 200]
    await admin.advance_clock(20)
    refused = await recall(api, "database")
    assert (refused.status_code, refused.headers["Retry-After"]) == (429, "10")
    assert bucket(refused) == (0, 40)
    await admin.advance_clock(9)
    assert (await recall(api, "database")).status_code == 429
    await admin.advance_clock(1)
    assert (await recall(api, "database")).status_code == 200


def test_every_rate_and_wait_gives_the_exact_retry_after() -> None:
    """Rates 1–120 per minute, 1–59 s after emptying the bucket: Retry-After is the ceiling of the
    exact time to the next token; one second earlier is still refused, at Retry-After it is not."""
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE TABLE rate_buckets (credential_id TEXT PRIMARY KEY, tokens REAL, updated_us INTEGER)"
    )
    second = 1_000_000
    for rate in range(1, 121):
        for _ in range(rate):  # a full bucket, emptied once per rate; each wait starts from a copy
            assert ratelimit.take_token(conn, credential_id=f"c{rate}", per_minute=rate, now_us=0).allowed
        emptied = conn.execute(
            "SELECT tokens, updated_us FROM rate_buckets WHERE credential_id = ?", (f"c{rate}",)
        ).fetchone()
        for wait in range(1, 60):
            credential = f"c{rate}-{wait}"
            conn.execute("INSERT INTO rate_buckets VALUES (?, ?, ?)", (credential, *emptied))
            tokens = Fraction(rate * wait, 60)
            state = ratelimit.take_token(
                conn, credential_id=credential, per_minute=rate, now_us=wait * second
            )
            assert state.allowed == (tokens >= 1), (rate, wait)
            if state.allowed:
                continue
            expected = math.ceil((1 - tokens) / Fraction(rate, 60))
            assert state.retry_after == max(1, expected), (rate, wait)
            assert state.reset == math.ceil((rate - tokens) / Fraction(rate, 60)), (rate, wait)
            later = (wait + state.retry_after) * second
            if state.retry_after > 1:
                early = ratelimit.take_token(
                    conn, credential_id=credential, per_minute=rate, now_us=later - second
                )
                assert not early.allowed, (rate, wait)
            assert ratelimit.take_token(conn, credential_id=credential, per_minute=rate, now_us=later).allowed
