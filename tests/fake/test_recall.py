"""SPEC 2, recall: FTS5 matching, visibility, filters, score and order, and the query as data."""

from __future__ import annotations

import dataclasses
import sqlite3
import threading

import pytest

from fake_lucy.domain import clock
from fake_lucy.domain import recall as domain_recall
from fake_lucy.domain import seed as seeding
from fake_lucy.domain.lifecycle import VersionContent, create_memory
from fake_lucy.domain.principals import Scope
from fake_lucy.domain.recall import MAX_TERMS, query_terms
from fake_lucy.domain.records import memory_dict, ranked_memory_dict
from fake_lucy.http.openapi import v1_openapi
from fake_lucy.store import queries
from fake_lucy.store.connection import Database
from fake_lucy.store.records import RANKED_MEMORY_COLUMNS
from fake_lucy.store.schema import fts_table
from lucy_memory._contract import load_contract
from tests.helpers import PROJECT, WORKSPACE, approved_memory, recall

pytestmark = pytest.mark.anyio


async def test_stemming_matches_other_forms_of_a_word(api, admin) -> None:
    memory = await approved_memory(api, admin, "The team is running nightly migrations.")
    found = (await recall(api, "runs migration")).json()["memories"]
    assert [m["id"] for m in found] == [memory["memory"]["id"]]


async def test_accents_are_ignored_both_ways(api, admin) -> None:
    memory = await approved_memory(api, admin, "Meet at the café on Fridays.")
    assert [m["id"] for m in (await recall(api, "cafe")).json()["memories"]] == [memory["memory"]["id"]]
    other = await approved_memory(api, admin, "Naive resume parsing is fine.")
    assert [m["id"] for m in (await recall(api, "naïve résumé")).json()["memories"]] == [
        other["memory"]["id"]
    ]


async def test_stop_words_alone_match_nothing_and_are_charged(api, admin) -> None:
    await approved_memory(api, admin, "The and of a the.")
    response = await recall(api, "the and of")
    assert response.status_code == 200
    assert response.json()["memories"] == []
    assert response.json()["credits"]["charged"] == 1


@pytest.mark.parametrize(
    "query",
    [
        '"',
        'say "hello',
        "AND",
        "OR NOT",
        "*",
        "post*",
        "NEAR(a b)",
        "content:secret",
        "col:term",
        "'; DROP TABLE memories; --",
        "^start",
        "{content}: x",
        "()",
        "   ...   ",
        "-",
    ],
)
async def test_the_query_is_data_never_fts_syntax(fake, api, admin, query) -> None:
    await approved_memory(api, admin, "Drop table statements need review; content is data.")
    response = await recall(api, query)
    assert response.status_code == 200, response.text
    count = sqlite3.connect(fake.fake.settings.database).execute("SELECT count(*) FROM memories").fetchone()
    assert count == (1,)


async def test_recall_covers_every_visible_scope_or_just_the_one_asked(api, admin) -> None:
    p = await approved_memory(api, admin, "Shared glossary term alpha.", scope=PROJECT)
    w = await approved_memory(api, admin, "Shared glossary term beta.", scope=WORKSPACE)
    u = await approved_memory(
        api, admin, "Shared glossary term gamma.", scope={"kind": "user", "id": "usr_dev"}
    )
    everywhere = {m["id"] for m in (await recall(api, "glossary")).json()["memories"]}
    assert everywhere == {p["memory"]["id"], w["memory"]["id"], u["memory"]["id"]}
    only = (await recall(api, "glossary", scope=WORKSPACE)).json()["memories"]
    assert [m["id"] for m in only] == [w["memory"]["id"]]


async def test_an_invisible_scope_is_scope_forbidden(api) -> None:
    response = await recall(api, "anything", scope={"kind": "project", "id": "someone-elses"})
    assert (response.status_code, response.json()["code"]) == (403, "scope_forbidden")
    assert "someone-elses" not in response.text


async def test_kinds_topic_and_limit_filter_the_results(api, admin) -> None:
    rule = await approved_memory(api, admin, "Filter target rule.", kind="rule", topic="filter-rule")
    fact = await approved_memory(api, admin, "Filter target fact.", kind="fact")
    by_kind = (await recall(api, "filter target", kinds=["rule"])).json()["memories"]
    assert [m["id"] for m in by_kind] == [rule["memory"]["id"]]
    by_topic = (await recall(api, "filter target", topic="filter-rule")).json()["memories"]
    assert [m["id"] for m in by_topic] == [rule["memory"]["id"]]
    limited = (await recall(api, "filter target", limit=1)).json()["memories"]
    assert len(limited) == 1
    assert {m["id"] for m in (await recall(api, "filter target")).json()["memories"]} == {
        rule["memory"]["id"],
        fact["memory"]["id"],
    }


async def test_order_is_score_then_importance_then_recency_then_id(api, admin) -> None:
    strong = await approved_memory(api, admin, "Kafka kafka kafka topics.", importance=1)
    low = await approved_memory(api, admin, "Kafka topics once.", importance=2)
    high = await approved_memory(api, admin, "Kafka topics twice.", importance=9)
    memories = (await recall(api, "kafka")).json()["memories"]
    assert memories[0]["id"] == strong["memory"]["id"]
    assert memories[0]["score"] > memories[1]["score"] >= 0
    assert memories[1]["score"] == memories[2]["score"]
    assert [m["id"] for m in memories[1:]] == [high["memory"]["id"], low["memory"]["id"]]
    for memory in memories:
        assert memory["score"] == float(f"{memory['score']:.3g}")


async def test_equal_scores_and_importance_prefer_the_most_recently_updated(api, admin) -> None:
    older = await approved_memory(api, admin, "Redis cache one.")
    await admin.advance_clock(5)
    newer = await approved_memory(api, admin, "Redis cache two.")
    memories = (await recall(api, "redis")).json()["memories"]
    assert [m["id"] for m in memories] == [newer["memory"]["id"], older["memory"]["id"]]


async def test_recall_sets_last_accessed_at_without_reindexing(fake, api, admin) -> None:
    memory = await approved_memory(api, admin, "Observability uses OpenTelemetry.")
    before = (await admin.memories())["items"][0]
    assert before["last_accessed_at"] is None
    await admin.advance_clock(60)
    clock = (await admin.clock())["now"]
    conn = sqlite3.connect(fake.fake.settings.database)
    index = fts_table("tenant_dev")
    rows_sql = f"SELECT rowid, content FROM {index}"  # noqa: S608 - the tenant's index name, a digest
    sizes_sql = f"SELECT count(*) FROM {index}_docsize"  # noqa: S608 - likewise
    fts_before = conn.execute(rows_sql).fetchall()
    changes_before = conn.execute(sizes_sql).fetchone()
    found = (await recall(api, "opentelemetry")).json()["memories"]
    assert found[0]["last_accessed_at"] >= clock
    after = (await admin.memories())["items"][0]
    assert after["last_accessed_at"] == found[0]["last_accessed_at"]
    assert after["updated_at"] == before["updated_at"]
    assert conn.execute(rows_sql).fetchall() == fts_before
    assert conn.execute(sizes_sql).fetchone() == changes_before
    assert memory["memory"]["version"] == after["version"]


async def test_superseded_and_deleted_versions_are_not_recalled(api, admin) -> None:
    first = await approved_memory(api, admin, "Zebra crossing rule.", topic="zebra")
    await approved_memory(api, admin, "Zebra crossing rule updated.", topic="zebra")
    found = (await recall(api, "zebra")).json()["memories"]
    assert [(m["id"], m["version"]) for m in found] == [(first["memory"]["id"], 2)]
    await admin.delete_memory(first["memory"]["id"])
    assert (await recall(api, "zebra")).json()["memories"] == []


# -- issue 18, point 5: a slow recall stalls nobody ---------------------------------------------------

FILLER = [f"filler{chr(97 + n // 26)}{chr(97 + n % 26)}" for n in range(40)]  # distinct, match nothing


async def test_only_the_first_32_distinct_terms_of_a_query_count(api, admin) -> None:
    assert load_contract("agent-memory-api")["recall"]["max_terms"] == MAX_TERMS == 32
    memory = (await approved_memory(api, admin, "The zeppelin hangar is in Friedrichshafen."))["memory"]
    # stop words and repeats are not terms: 31 fillers, repeated, with stop words, then the 32nd term
    counted = " the ".join(FILLER[:31] + FILLER[:31]) + " and zeppelin"
    assert [m["id"] for m in (await recall(api, counted)).json()["memories"]] == [memory["id"]]
    beyond = " ".join(FILLER[:32]) + " zeppelin"  # the 33rd distinct term
    response = await recall(api, beyond)
    assert (response.status_code, response.json()["memories"]) == (200, [])
    assert response.json()["credits"]["charged"] == 1


def test_the_query_terms_stop_at_32_in_order_of_first_occurrence() -> None:
    terms = query_terms(" ".join(FILLER + FILLER), frozenset())
    assert terms == FILLER[:32]


async def test_a_recall_ranks_while_another_worker_holds_the_write_lock(
    fake, api, admin, monkeypatch
) -> None:
    memory = (await approved_memory(api, admin, "The zeppelin hangar is in Friedrichshafen."))["memory"]
    ranked, locked = threading.Event(), threading.Event()
    ranked_while_locked: list[bool] = []
    rank = domain_recall.rank

    def rank_and_tell(conn: sqlite3.Connection, query: domain_recall.RecallQuery) -> domain_recall.Ranked:
        answer = rank(conn, query)
        ranked.set()
        return answer

    def other_worker() -> None:  # another process's write transaction, as --workers 2 has
        conn = sqlite3.connect(fake.fake.settings.database, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        locked.set()
        ranked_while_locked.append(ranked.wait(timeout=5))
        conn.execute("COMMIT")
        conn.close()

    monkeypatch.setattr(domain_recall, "rank", rank_and_tell)
    holder = threading.Thread(target=other_worker)
    holder.start()
    assert locked.wait(timeout=5)
    response = await recall(api, "zeppelin")  # its write transaction waits for the lock to go
    holder.join()
    assert ranked_while_locked == [True], "the ranking waited for the write lock"
    assert [m["id"] for m in response.json()["memories"]] == [memory["id"]]
    assert response.json()["credits"]["charged"] == 1


async def test_a_memory_reset_away_between_ranking_and_writing_is_not_stamped_again(
    fake, api, admin, monkeypatch
) -> None:
    await approved_memory(api, admin, "The zeppelin hangar is in Friedrichshafen.")
    rank = domain_recall.rank
    other = Database(fake.fake.settings.database)  # another worker's connection

    def rank_then_reset(conn: sqlite3.Connection, query: domain_recall.RecallQuery) -> domain_recall.Ranked:
        answer = rank(conn, query)
        with other.write() as tx:  # reset, then a new memory that takes the freed row number
            seeding.reset(tx, fake.fake.ids, fake.fake.seed)
            create_memory(
                tx,
                fake.fake.ids,
                tenant="tenant_dev",
                scope=Scope("project", "project_example"),
                content=VersionContent("fact", None, "A memory created after the reset.", 5, None),
                now=clock.format_us(clock.now_us(tx)),
            )
        return answer

    monkeypatch.setattr(domain_recall, "rank", rank_then_reset)
    try:
        response = await recall(api, "zeppelin")
    finally:
        other.close()
    # ranked in the state before the reset: nothing of it is written into the state after
    assert (response.status_code, response.json()["code"]) == (503, "unavailable")
    assert response.json()["retryable"] is True
    [fresh] = (await admin.memories())["items"]
    assert fresh["content"] == "A memory created after the reset."
    assert fresh["last_accessed_at"] is None, "the new memory on the reused row was stamped"
    request_id = response.json()["request_id"]
    assert [row for row in await admin.ledger() if row["request_id"] == request_id] == []
    assert [row for row in await admin.requests() if row["request_id"] == request_id] == []


def test_the_served_openapi_states_the_32_term_rule() -> None:
    operation = v1_openapi()["paths"]["/api/agent-memory/v1/recall"]["post"]
    assert "only the first 32 distinct terms of the query count" in operation["description"]


async def test_a_ranked_row_gives_the_memory_object_its_record_gives(fake, api, admin) -> None:
    """Recall builds its memories from plain rows by position (``ranked_memory_dict``): the same
    object, key for key and in the same order, as ``memory_dict`` of the memory's record."""
    proposal = await approved_memory(
        api, admin, "Postgres 16 for billing.", kind="decision", topic="db", importance=7
    )
    memory_id = proposal["memory"]["id"]
    conn = fake.fake.db.conn
    cursor = conn.cursor()
    cursor.row_factory = None
    query = f"SELECT {RANKED_MEMORY_COLUMNS} FROM memories m WHERE m.id = ?"  # noqa: S608 - constant columns
    row = cursor.execute(query, (memory_id,)).fetchone()
    record = queries.memory_head(conn, memory_id)
    assert record is not None
    expected = memory_dict(dataclasses.replace(record, last_accessed_at=None))
    assert list(ranked_memory_dict(row).items()) == list(expected.items())
    assert (expected["kind"], expected["topic"], expected["importance"]) == ("decision", "db", 7)
