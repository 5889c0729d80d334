"""SPEC 3.6, ranking statistics per tenant (issue 15, must-hold 3): a tenant's recall answers —
scores, order, which memories fit the limit — do not change whatever other tenants store."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fake_lucy.domain.recall import RecallCache
from fake_lucy.testing import InProcessFake
from lucy_memory._contract import PERMISSIONS
from tests.helpers import PROJECT, WORKSPACE, proposal_body, propose, recall

pytestmark = pytest.mark.anyio

VOCABULARY = ["kumquat", "harvest", "river", "lantern", "orbit", "granite", "velvet", "harbor"]
SCOPES = [PROJECT, WORKSPACE]


def cache_of(fake: InProcessFake) -> RecallCache:
    cache: RecallCache = fake.app.v1_routes.pipeline.recall_cache  # type: ignore[attr-defined]
    return cache


async def store(client: httpx.AsyncClient, text: str, scope: dict[str, str] = PROJECT) -> None:
    """Propose under a tenant whose policy approves everything: one request, one memory."""
    response = await propose(client, proposal_body(text, scope=scope), key=uuid.uuid4().hex)
    assert response.json()["proposal"]["status"] == "approved", response.text


async def answer(
    fake: InProcessFake, client: httpx.AsyncClient, query: str, limit: int
) -> list[dict[str, Any]]:
    """A ranked recall, never a cached one: the answer of the full-text index as it is now."""
    misses = cache_of(fake).misses
    response = await recall(client, query, limit=limit)
    assert response.status_code == 200, response.text
    assert cache_of(fake).misses == misses + 1
    memories: list[dict[str, Any]] = response.json()["memories"]
    return memories


async def test_a_memorys_score_and_place_do_not_move_when_another_tenant_stores_the_same_word(
    fake, admin
) -> None:
    """The leak measured before per-tenant indexes: A's kumquat memory scored 1.85 and ranked
    first; after B stored 30 memories with "kumquat", bm25's document frequency of the term (then
    counted over every tenant) made it 0.0000015 and last."""
    await admin.set_clock(frozen=True)  # identical access times, so whole answers compare
    a = await admin.create_credential("tenant_a", scopes=[PROJECT])
    b = await admin.create_credential("tenant_b", scopes=[PROJECT])
    for tenant in ("tenant_a", "tenant_b"):
        await admin.set_policy(tenant, auto_approve="all")
    async with fake.client(a["token"]) as client_a, fake.client(b["token"]) as client_b:
        await store(client_a, "The kumquat harvest starts in March.")
        for n in range(4):
            await store(client_a, f"Harvest report {n}: the river was high, the lantern lit.")
        await store(client_a, "Granite and velvet samples arrived.")
        before = await answer(fake, client_a, "kumquat harvest", limit=10)
        assert before[0]["content"] == "The kumquat harvest starts in March."
        assert before[0]["score"] > 1.0
        for n in range(30):
            await store(client_b, f"Tenant B's kumquat note number {n}.")
        after = await answer(fake, client_a, "kumquat harvest", limit=10)
    assert after == before  # every score, the order, the access times (the clock did not move)


# The property's three tenants, each with a policy that approves every proposal and one credential,
# are in the seed of a fake of this module's own: the reset before each example restores them, with
# no control request (six of them per example, a third of its time, when each example made them).
TENANTS = ("tenant_a", "tenant_b", "tenant_c")
RANKING_SEED = {
    "tenants": [{"id": name, "policy": {"auto_approve": "all"}} for name in TENANTS],
    "credentials": [
        {
            "token": f"ranking-token-{name}",
            "tenant": name,
            "account": f"acct_{name}",
            "user": f"usr_{name}",
            "permissions": list(PERMISSIONS),
            "scopes": SCOPES,
        }
        for name in TENANTS
    ],
}


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessFake]:
    directory = tmp_path_factory.mktemp("ranking")
    seed = directory / "seed.json"
    seed.write_text(json.dumps(RANKING_SEED), encoding="utf-8")
    fake = InProcessFake(directory / "fake-lucy.sqlite3", seed=seed)
    yield fake
    fake.fake.close()


settings_for_ranking = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
WORDS = st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=6)
TEXTS = st.lists(WORDS.map(" ".join), min_size=1, max_size=6)
OTHERS = st.lists(
    st.tuples(st.integers(0, 1), st.sampled_from(SCOPES), WORDS.map(" ".join)), min_size=1, max_size=12
)


@settings_for_ranking
@given(
    own=TEXTS,
    query=st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=3).map(" ".join),
    limit=st.integers(1, 5),
    others=OTHERS,
)
async def test_what_other_tenants_store_between_two_recalls_never_changes_the_answer(
    seeded, own, query, limit, others
) -> None:
    seeded.reset()
    await seeded.admin.set_clock(frozen=True)  # identical access times, so whole answers compare
    mine, *theirs = (seeded.client(f"ranking-token-{name}") for name in TENANTS)
    async with mine as client, theirs[0] as first, theirs[1] as second:
        for n, text in enumerate(own):
            await store(client, f"{text} ({n})", SCOPES[n % 2])
        before = await answer(seeded, client, query, limit)
        for which, scope, text in others:
            await store((first, second)[which], text, scope)
        after = await answer(seeded, client, query, limit)
    assert after == before
