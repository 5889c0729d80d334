"""Recall's cache of ranked answers (``domain.recall.RecallCache``): a repeated recall against an
unchanged index is answered without the full-text query, is still charged, journaled and stamped,
and every change to the recallable memories is seen by the very next recall.
"""

from __future__ import annotations

import ast
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fake_lucy.domain import clock, server_state
from fake_lucy.domain.lifecycle import VersionContent, create_memory
from fake_lucy.domain.principals import Scope
from fake_lucy.domain.recall import RecallCache, answer_bytes, prepare, query_terms
from fake_lucy.domain.recall import recall as domain_recall
from fake_lucy.testing import InProcessFake
from tests.helpers import PROJECT, approved_memory, proposal_body, propose, recall

pytestmark = pytest.mark.anyio

QUERY = "cassowary"


def cache_of(fake: InProcessFake) -> RecallCache:
    cache: RecallCache = fake.app.v1_routes.pipeline.recall_cache  # type: ignore[attr-defined]
    return cache


async def found(api: Any, query: str = QUERY, **fields: Any) -> list[dict[str, Any]]:
    response = await recall(api, query, **fields)
    assert response.status_code == 200, response.text
    memories: list[dict[str, Any]] = response.json()["memories"]
    return memories


async def test_a_repeated_recall_reads_the_requests_state_once_and_a_stale_answer_is_ranked_again(
    fake, api, admin
) -> None:
    await approved_memory(api, admin, f"The {QUERY} audit runs weekly.")
    await found(api)
    reads: list[str] = []
    conn = fake.fake.db.conn
    conn.set_trace_callback(
        lambda sql: reads.append(sql) if sql.startswith("SELECT t.clock_offset_us") else None
    )
    try:
        hits = cache_of(fake).hits
        assert len(await found(api)) == 1
        assert (cache_of(fake).hits, len(reads)) == (hits + 1, 1), "a hit: one transaction, one state read"
        await approved_memory(api, admin, f"The {QUERY} audit moved to Fridays.")  # a new index epoch
        reads.clear()
        misses = cache_of(fake).misses
        assert len(await found(api)) == 2, "the kept answer was of the older index"
        assert cache_of(fake).misses == misses + 1, "one miss, counted once"
    finally:
        conn.set_trace_callback(None)


async def test_a_repeated_recall_is_a_hit_and_is_still_charged_journaled_and_stamped(
    fake, api, admin
) -> None:
    memory = (await approved_memory(api, admin, f"The {QUERY} audit runs weekly."))["memory"]
    cache = cache_of(fake)
    first = await found(api)
    await admin.advance_clock(90)
    hits = cache.hits
    second_response = await recall(api, QUERY)
    assert cache.hits == hits + 1
    second = second_response.json()["memories"]
    assert [m["id"] for m in second] == [m["id"] for m in first] == [memory["id"]]
    assert second[0]["score"] == first[0]["score"]
    assert second[0]["last_accessed_at"] > first[0]["last_accessed_at"]
    assert second_response.headers["Lucy-Credits-Charged"] == "1"
    assert second_response.json()["credits"]["charged"] == 1
    assert [row["operation"] for row in await admin.ledger()].count("recall") == 2
    assert [row["operation"] for row in await admin.requests()].count("recall") == 2
    listed = (await admin.memories())["items"]
    assert [m["last_accessed_at"] for m in listed if m["id"] == memory["id"]] == [
        second[0]["last_accessed_at"]
    ]


async def test_a_hit_hands_out_fresh_objects(fake, api, admin) -> None:
    await approved_memory(api, admin, f"The {QUERY} audit runs weekly.")
    await found(api)
    ((ranked, _),) = cache_of(fake)._entries.values()
    before = [dict(memory) for _, _, memory in ranked]
    await found(api)
    assert [memory for _, _, memory in ranked] == before  # the answers were copies


async def _delete(api: Any, admin: Any, memory: dict[str, Any]) -> None:
    await admin.delete_memory(memory["id"])


async def _approve_another(api: Any, admin: Any, memory: dict[str, Any]) -> None:
    await approved_memory(api, admin, f"A second {QUERY} note: audits are logged.")


async def _replace(api: Any, admin: Any, memory: dict[str, Any]) -> None:
    replaced = await propose(
        api,
        proposal_body(
            f"The {QUERY} audit runs daily.",
            replaces={"memory_id": memory["id"], "version": memory["version"]},
            importance=9,
        ),
    )
    await admin.approve(replaced.json()["proposal"]["id"])


async def _reset(api: Any, admin: Any, memory: dict[str, Any]) -> None:
    await admin.reset()


async def _delete_then_restore(api: Any, admin: Any, memory: dict[str, Any]) -> None:
    await admin.delete_memory(memory["id"])
    assert await found(api) == []  # cached empty
    await admin.restore_memory(memory["id"])


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (_delete, []),
        (_approve_another, ["weekly", "logged"]),
        (_replace, ["daily"]),
        (_reset, []),
        (_delete_then_restore, ["weekly"]),
    ],
)
async def test_every_change_to_the_recallable_memories_is_seen_by_the_next_recall(
    fake, api, admin, change, expected
) -> None:
    memory = (await approved_memory(api, admin, f"The {QUERY} audit runs weekly.", importance=3))["memory"]
    for _ in range(2):
        assert [m["id"] for m in await found(api)] == [memory["id"]]
    await change(api, admin, memory)
    answer = await found(api)
    assert sorted(word for m in answer for word in expected if word in m["content"]) == sorted(expected)
    assert len(answer) == len(expected)
    if change is _replace:
        assert (answer[0]["version"], answer[0]["importance"]) == (2, 9)


async def test_changes_that_leave_the_index_alone_keep_the_cache(fake, api, admin) -> None:
    await approved_memory(api, admin, f"The {QUERY} audit runs weekly.")
    await found(api)
    pending = await propose(api, proposal_body(f"Maybe the {QUERY} audit should be daily."))
    await admin.reject(pending.json()["proposal"]["id"])
    await admin.advance_clock(3600)
    hits = cache_of(fake).hits
    assert len(await found(api)) == 1
    assert cache_of(fake).hits == hits + 1


async def test_filters_limits_and_scopes_are_separate_answers(fake, api, admin) -> None:
    await approved_memory(api, admin, f"The {QUERY} audit runs weekly.", kind="rule")
    await approved_memory(api, admin, f"The {QUERY} budget is fixed.", kind="fact", topic="budget")
    assert len(await found(api)) == 2
    assert [m["kind"] for m in await found(api, kinds=["rule"])] == ["rule"]
    assert [m["topic"] for m in await found(api, topic="budget")] == ["budget"]
    assert len(await found(api, limit=1)) == 1
    assert await found(api, scope={"kind": "workspace", "id": "ws_dev"}) == []
    assert len(await found(api, scope=PROJECT)) == 2


async def test_two_fakes_in_one_process_do_not_share_answers(tmp_path: Path) -> None:
    async with (
        InProcessFake.start(tmp_path / "a") as first,
        InProcessFake.start(tmp_path / "b") as second,
        first.client() as api_a,
        second.client() as api_b,
    ):
        await approved_memory(api_a, first.admin, f"The {QUERY} audit runs weekly.")
        assert len(await found(api_a)) == 1
        assert await found(api_b) == []


async def test_two_apps_on_one_database_see_each_others_changes(tmp_path: Path) -> None:
    # Two workers in miniature: one SQLite file, two pipelines, two caches.
    database = tmp_path / "shared.sqlite3"
    first, second = InProcessFake(database), InProcessFake(database)
    try:
        async with first.client() as api_a, second.client() as api_b:
            assert await found(api_a) == [] == await found(api_b)
            await approved_memory(api_b, second.admin, f"The {QUERY} audit runs weekly.")
            assert len(await found(api_a)) == 1
            memory = (await found(api_b))[0]
            await first.admin.delete_memory(memory["id"])
            assert await found(api_b) == []
    finally:
        await first.aclose()
        await second.aclose()


def test_the_cache_keeps_the_most_recently_used_answers() -> None:
    cache = RecallCache(max_entries=2)
    keys = [(f"q{n}", None, None, 10) for n in range(3)]
    cache.get(7, keys[0])
    cache.put(7, keys[0], [])
    cache.put(7, keys[1], [])
    assert cache.get(7, keys[0]) == []  # now the most recently used
    cache.put(7, keys[2], [])
    assert len(cache) == 2
    assert cache.get(7, keys[1]) is None
    assert cache.get(7, keys[0]) == []
    assert cache.get(8, keys[0]) is None  # a new epoch empties it
    assert len(cache) == 0
    cache.put(7, keys[0], [])  # an answer of an old epoch is not kept
    assert len(cache) == 0


def _answer(content_chars: int) -> list[tuple[float, int, dict[str, Any]]]:
    return [(1.0, 1, {"content": "x" * content_chars, "topic": None})]


def test_the_cache_is_bounded_in_bytes_too() -> None:
    one = answer_bytes(_answer(10_000))
    cache = RecallCache(max_entries=100, max_bytes=2 * one + 10)
    keys = [(f"q{n}", None, None, 10) for n in range(3)]
    cache.get(7, keys[0])
    for key in keys:
        cache.put(7, key, _answer(10_000))
    assert len(cache) == 2
    assert cache.bytes == 2 * one
    assert cache.get(7, keys[0]) is None  # the least recently used went first
    cache.put(7, keys[1], _answer(10_000))  # replacing an answer does not count it twice
    assert cache.bytes == 2 * one
    cache.put(7, ("huge", None, None, 10), _answer(3 * 10_000))  # larger than the budget alone
    assert cache.get(7, ("huge", None, None, 10)) is None
    assert cache.bytes == 2 * one
    cache.get(8, keys[1])  # a new epoch
    assert (len(cache), cache.bytes) == (0, 0)


def _source_segments(source: str) -> Callable[[ast.FunctionDef], str]:
    """``ast.get_source_segment(source, node)``, with the source split into lines once for all the
    nodes of a file (``get_source_segment`` splits it again for every node)."""
    lines = [line.encode() for line in io.StringIO(source, newline="").readlines()]

    def segment(node: ast.FunctionDef) -> str:
        assert node.end_lineno is not None
        assert node.end_col_offset is not None
        first, last = node.lineno - 1, node.end_lineno - 1
        if first == last:
            return lines[first][node.col_offset : node.end_col_offset].decode()
        return b"".join(
            [lines[first][node.col_offset :], *lines[first + 1 : last], lines[last][: node.end_col_offset]]
        ).decode()

    return segment


def test_every_write_to_the_index_changes_the_epoch() -> None:
    """The cache is only as good as this: the tenants' full-text indexes (``fts_table``) are written
    in three lifecycle helpers, which change the epoch, and nowhere else in the fake but the
    start-up migration of an older file (which changes it too)."""
    root = Path(__file__).resolve().parents[2] / "fake_lucy"
    writes = re.compile(r"(INSERT INTO|DELETE FROM|UPDATE|REPLACE INTO|DROP TABLE)\b", re.IGNORECASE)
    found_in: set[tuple[str, str]] = set()
    for path in root.rglob("*.py"):
        source = path.read_text()
        segment = _source_segments(source)
        for function in ast.walk(ast.parse(source)):
            if not isinstance(function, ast.FunctionDef):
                continue
            body = segment(function)
            names_an_index = "fts_table(" in body or "LEGACY_FTS_TABLE" in body
            texts = [
                node.value
                for node in ast.walk(function)
                if isinstance(node, ast.Constant) and isinstance(node.value, str)
            ]
            if names_an_index and any(writes.search(text) for text in texts):
                found_in.add((path.name, function.name))
    assert found_in == {
        ("lifecycle.py", "_insert_fts"),
        ("lifecycle.py", "_delete_fts"),
        ("lifecycle.py", "clear_index"),
        ("connection.py", "_split_full_text_index"),
    }
    source = (root / "domain" / "lifecycle.py").read_text()
    for helper in ("_insert_fts", "_delete_fts", "clear_index"):
        body = source.split(f"def {helper}(", 1)[1].split("\ndef ", 1)[0]
        assert "bump_index_epoch(conn)" in body
    migration = (root / "store" / "connection.py").read_text().split("def _split_full_text_index(", 1)[1]
    assert "SET index_epoch" in migration.split("\n    def ", 1)[0]


async def test_a_hit_answers_what_a_cold_cache_answers(fake, api, admin, tmp_path: Path) -> None:
    for n, text in enumerate(["weekly audit", "audit log", "budget audit audit", "weekly budget"]):
        await approved_memory(api, admin, f"The {QUERY} {text}.", importance=n % 2 + 1)
    cold = InProcessFake(fake.fake.settings.database)  # a second app on the same file
    try:
        async with cold.client() as cold_api:
            for query in (QUERY, f"{QUERY} audit", "weekly budget", f"{QUERY} weekly audit"):
                await found(api, query)
                misses = cache_of(cold).misses
                hit, fresh = await found(api, query), await found(cold_api, query)
                assert cache_of(cold).misses == misses + 1
                assert len(hit) > 1
                assert [{**m, "last_accessed_at": None} for m in hit] == [
                    {**m, "last_accessed_at": None} for m in fresh
                ]
    finally:
        await cold.aclose()


def test_an_answer_shares_nothing_with_the_cache(fake) -> None:
    cache = RecallCache()
    db = fake.fake.db

    def answer() -> list[dict[str, Any]]:
        with db.write() as conn:
            (incarnation,) = conn.execute(
                "SELECT incarnation FROM tenants WHERE id = 'tenant_dev'"
            ).fetchone()
            tx = server_state.in_transaction(
                conn, "tenant_dev", "acct_dev", "cred_dev_default", incarnation=incarnation
            )
            query = prepare(
                tenant="tenant_dev",
                scopes=(Scope("project", "project_example"),),
                terms=query_terms(QUERY, fake.fake.stop_words),
                kinds=None,
                topic=None,
                limit=10,
            )
            return domain_recall(
                conn,
                query,
                now=clock.format_us(tx.now_us),
                cache=cache,
                index_epoch=tx.index_epoch,
            )

    with db.write() as conn:
        create_memory(
            conn,
            fake.fake.ids,
            tenant="tenant_dev",
            scope=Scope("project", "project_example"),
            content=VersionContent("fact", None, f"The {QUERY} audit runs weekly.", 5, None),
            now=clock.format_us(clock.now_us(conn)),
        )
    first = answer()
    first[0]["scope"]["id"] = "changed"
    first[0]["content"] = "changed"
    second = answer()
    assert cache.hits == 1
    assert (second[0]["scope"]["id"], second[0]["content"]) == (
        "project_example",
        f"The {QUERY} audit runs weekly.",
    )
