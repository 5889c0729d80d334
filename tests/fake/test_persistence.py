"""SPEC 3.1–3.2: state survives a restart, the seed applies to new databases, reset is exact."""

from __future__ import annotations

import json
import sqlite3

import httpx
import pytest

from fake_lucy.store.connection import Database, ForeignDatabaseError
from fake_lucy.store.schema import SCHEMA_VERSION, STATE_TABLES, fts_table
from fake_lucy.testing import InProcessFake
from tests.helpers import proposal_body, propose, recall

pytestmark = pytest.mark.anyio

TABLES = STATE_TABLES  # every table of the fake's state


# A tenant's ``created_at`` is when the seed or a reset made it (the real time then): a dump reads
# it as whether it is set.
_TENANTS = (
    "SELECT id, auto_approve, proposal_ttl_seconds, rate_limit_per_minute, clock_offset_us,"
    " clock_frozen_us, admin_token_sha256, first_credential_id, initial_credits,"
    " created_at IS NOT NULL FROM tenants ORDER BY 1"
)


def _dump(path, exclude=("server_state",)) -> dict:
    conn = sqlite3.connect(path)
    try:
        return {
            t: conn.execute(
                _TENANTS if t == "tenants" else f"SELECT * FROM {t} ORDER BY 1"  # noqa: S608 - constant table names
            ).fetchall()
            for t in TABLES
            if t not in exclude
        }
    finally:
        conn.close()


async def test_state_survives_a_restart_on_the_same_file(tmp_path) -> None:
    database = tmp_path / "keep.sqlite3"
    first = InProcessFake(database)
    async with first.client() as client:
        created = await propose(client, proposal_body("Persisted decision about Postgres."))
        await first.admin.approve(created.json()["proposal"]["id"])
        await first.admin.advance_clock(3600)
    clock = (await first.admin.clock())["now"]
    await first.aclose()
    second = InProcessFake(database)
    async with second.client() as client:
        found = (await recall(client, "postgres")).json()["memories"]
    assert [m["content"] for m in found] == ["Persisted decision about Postgres."]
    assert (await second.admin.clock())["now"] >= clock
    assert found[0]["last_accessed_at"] >= clock
    await second.aclose()


async def _approve_one(fake: InProcessFake, client: httpx.AsyncClient, content: str) -> None:
    created = await propose(client, proposal_body(content))
    await fake.admin.approve(created.json()["proposal"]["id"])


async def test_access_times_survive_a_restart(tmp_path) -> None:
    database = tmp_path / "access.sqlite3"
    first = InProcessFake(database)
    async with first.client() as client:
        await _approve_one(first, client, "Access-time decision about Postgres.")
        stamped = (await recall(client, "postgres")).json()["memories"][0]["last_accessed_at"]
    await first.aclose()
    second = InProcessFake(database)
    assert [m["last_accessed_at"] for m in (await second.admin.memories())["items"]] == [stamped]
    await second.aclose()


async def test_access_times_of_a_file_from_before_memory_access_are_moved_over(tmp_path) -> None:
    database = tmp_path / "old.sqlite3"
    first = InProcessFake(database)
    async with first.client() as client:
        await _approve_one(first, client, "Old-format decision about Postgres.")
    await first.aclose()
    # The layout of earlier releases: the access time is a column of ``memories``.
    conn = sqlite3.connect(database)
    with conn:
        conn.execute("DROP TABLE memory_access")
        conn.execute("ALTER TABLE memories ADD COLUMN last_accessed_at VARCHAR")
        conn.execute("UPDATE memories SET last_accessed_at = '2026-01-02T03:04:05.000000Z'")
    conn.close()
    second = InProcessFake(database)
    items = (await second.admin.memories())["items"]
    assert [m["last_accessed_at"] for m in items] == ["2026-01-02T03:04:05.000000Z"]
    async with second.client() as client:
        found = (await recall(client, "postgres")).json()["memories"]
    assert found[0]["last_accessed_at"] > "2026-01-02T03:04:05.000000Z"
    await second.aclose()
    conn = sqlite3.connect(database)
    try:
        assert conn.execute("SELECT last_accessed_at FROM memories").fetchall() == [(None,)]
        assert conn.execute("SELECT count(*) FROM memory_access").fetchone() == (1,)
    finally:
        conn.close()


async def test_a_seed_is_applied_only_to_a_new_database(tmp_path) -> None:
    seed = tmp_path / "seed.json"
    seed.write_text(
        json.dumps(
            {
                "tenants": [{"id": "acme", "policy": {"auto_approve": "all"}}],
                "credentials": [
                    {
                        "token": "acme-token-0123456789abcdef",
                        "tenant": "acme",
                        "account": "acct_acme",
                        "user": "usr_acme",
                        "permissions": ["memory:read", "memory:propose"],
                        "scopes": [{"kind": "project", "id": "rocket"}],
                        "credits": 5,
                    }
                ],
                "memories": [
                    {
                        "tenant": "acme",
                        "scope": {"kind": "project", "id": "rocket"},
                        "kind": "rule",
                        "topic": "fuel",
                        "content": "Rocket fuel is kerosene.",
                    }
                ],
            }
        )
    )
    database = tmp_path / "seeded.sqlite3"
    first = InProcessFake(database, seed=seed)
    async with first.client("acme-token-0123456789abcdef") as client:
        assert [m["content"] for m in (await recall(client, "kerosene")).json()["memories"]] == [
            "Rocket fuel is kerosene."
        ]
        auto = await propose(
            client, proposal_body("Rocket paint is white.", scope={"kind": "project", "id": "rocket"})
        )
        assert auto.json()["proposal"]["status"] == "approved"
    async with first.client() as dev:
        assert (await recall(dev, "kerosene")).status_code == 401  # the seed replaces the dev default
    await first.aclose()
    second = InProcessFake(database, seed=seed)  # restart: seed not applied again
    memories = (await second.admin.memories())["items"]
    assert len(memories) == 2
    ledger = await second.admin.ledger(account="acct_acme")
    assert ledger[-1]["balance_after"] == 3
    await second.aclose()


async def test_reset_gives_exactly_the_fresh_seeded_state(tmp_path) -> None:
    fresh_db = tmp_path / "fresh.sqlite3"
    fresh = InProcessFake(fresh_db, id_seed=7)
    expected = _dump(fresh_db)
    used_db = tmp_path / "used.sqlite3"
    used = InProcessFake(used_db, id_seed=7)
    async with used.client() as client:
        created = await propose(client, proposal_body())
        await used.admin.approve(created.json()["proposal"]["id"])
        assert len((await recall(client, "postgresql")).json()["memories"]) == 1  # stamps an access time
        await used.admin.create_credential("other_tenant", credits=3)
        await used.admin.set_policy(auto_approve="all", rate_limit_per_minute=100)
        await used.admin.set_billing(False)
        await used.admin.set_clock(frozen=True)
        await used.admin.advance_clock(10_000)
        await used.admin.add_fault("recall", 503)
        await recall(client, "anything")
    result = await used.admin.reset()
    assert result["reset"] is True
    assert _dump(used_db) == expected
    state = (
        sqlite3.connect(used_db)
        .execute("SELECT clock_offset_us, clock_frozen_us, billing_available, id_sequence FROM server_state")
        .fetchone()
    )
    assert state == (0, None, 1, 0)
    assert (await used.admin.clock())["frozen"] is False
    assert await used.admin.policy() == {
        "auto_approve": "off",
        "proposal_ttl_seconds": 604800,
        "rate_limit_per_minute": None,
    }
    await fresh.aclose()
    await used.aclose()


@pytest.mark.parametrize("column", ["auth_epoch", "index_epoch"])
async def test_a_database_from_before_an_epoch_column_is_upgraded_at_start(tmp_path, column) -> None:
    database = tmp_path / "older.sqlite3"
    first = InProcessFake(database)
    await first.aclose()
    conn = sqlite3.connect(database)
    conn.execute(f"ALTER TABLE server_state DROP COLUMN {column}")
    conn.close()
    second = InProcessFake(database)
    async with second.client() as client:
        assert (await recall(client, "anything")).status_code == 200
        proposal = await propose(client, proposal_body("Upgrades keep recall working."))
        await second.admin.approve(proposal.json()["proposal"]["id"])
        assert len((await recall(client, "upgrades")).json()["memories"]) == 1
    await second.aclose()


def _to_the_layout_before_tenant_namespaces(database) -> None:
    """Rewrite a file as the fake wrote it before SPEC 3.6: one full-text index for every tenant, no
    tenant clocks, admin tokens or tenant columns in the journal, ledger and faults."""
    conn = sqlite3.connect(database)
    conn.execute(
        "CREATE VIRTUAL TABLE memory_fts USING fts5(scope_tag, content, topic,"
        " tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    for (tenant,) in conn.execute("SELECT id FROM tenants").fetchall():
        table = fts_table(tenant)
        copy = f"INSERT INTO memory_fts (rowid, scope_tag, content, topic) SELECT rowid, * FROM {table}"  # noqa: S608 - a digest name
        conn.execute(copy)
        conn.execute(f"DROP TABLE {table}")
    for index in ("ix_journal_tenant", "ix_ledger_tenant_id", "ix_tenants_admin_token_sha256"):
        conn.execute(f"DROP INDEX {index}")
    conn.execute("DROP TABLE journal_counts")
    for table, column in [
        ("journal", "tenant"),
        ("ledger", "tenant_id"),
        ("faults", "tenant_id"),
        *(("tenants", c) for c in ("clock_offset_us", "clock_frozen_us", "admin_token_sha256")),
        *(("tenants", c) for c in ("first_credential_id", "initial_credits", "created_at")),
    ]:
        conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    conn.commit()
    conn.close()


async def test_a_database_with_one_index_for_every_tenant_is_split_per_tenant_at_start(tmp_path) -> None:
    database = tmp_path / "older.sqlite3"
    first = InProcessFake(database)
    await first.admin.set_clock(frozen=True)
    await first.admin.advance_clock(3600)
    other = await first.admin.create_credential("tenant_other", scopes=[{"kind": "project", "id": "p"}])
    async with first.client() as dev, first.client(other["token"]) as theirs:
        for text in ("Upgrades keep the ranking.", "Ranking upgrades twice: upgrades."):
            await first.admin.approve((await propose(dev, proposal_body(text))).json()["proposal"]["id"])
        for n in range(5):
            body = proposal_body(f"Other tenant upgrades {n}.", scope={"kind": "project", "id": "p"})
            await first.admin.approve((await propose(theirs, body)).json()["proposal"]["id"])
        before = (await recall(dev, "upgrades ranking")).json()["memories"]
    clock_before = await first.admin.clock()
    await first.aclose()
    _to_the_layout_before_tenant_namespaces(database)

    second = InProcessFake(database)
    async with second.client() as dev:
        assert (await recall(dev, "upgrades ranking")).json()["memories"] == before
    assert await second.admin.clock() == clock_before
    assert {row["tenant"] for row in await second.admin.requests()} == {"tenant_dev", "tenant_other"}
    assert {row["tenant"] for row in await second.admin.ledger(account="acct_dev")} == {"tenant_dev"}
    conn = sqlite3.connect(database)
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'memory_fts'").fetchall() == []
    rows = conn.execute(f"SELECT count(*) FROM {fts_table('tenant_other')}").fetchone()  # noqa: S608 - a digest name
    assert rows == (5,)
    conn.close()
    await second.aclose()


async def test_a_file_from_before_per_tenant_journal_bounds_counts_each_tenants_rows(tmp_path) -> None:
    database = tmp_path / "older.sqlite3"
    first = InProcessFake(database)
    other = await first.admin.create_tenant("other")
    async with first.client() as dev, first.client(other["credential"]["token"]) as theirs:
        for _ in range(4):
            await recall(dev, "database")
        await recall(theirs, "database")
    await first.aclose()
    conn = sqlite3.connect(database)
    conn.execute("DROP TABLE journal_counts")
    conn.commit()
    conn.close()
    second = InProcessFake(database, journal_size=3)
    try:
        async with second.client() as dev:
            newest = (await recall(dev, "database")).headers["Lucy-Request-Id"]
        rows = await second.admin.requests()
        assert [row["tenant"] for row in rows] == ["tenant_dev", "tenant_dev", "other", "tenant_dev"]
        assert rows[-1]["request_id"] == newest
    finally:
        await second.aclose()


async def test_the_tenants_of_a_file_from_before_created_at_are_dated_when_it_is_opened(tmp_path) -> None:
    database = tmp_path / "older.sqlite3"
    first = InProcessFake(database)
    await first.admin.create_tenant("left-behind")
    await first.aclose()
    conn = sqlite3.connect(database)
    conn.execute("ALTER TABLE tenants DROP COLUMN created_at")
    conn.execute("UPDATE server_state SET clock_frozen_us = 1894698000000000")  # 2030-01-15T09:00:00Z
    conn.commit()
    conn.close()
    second = InProcessFake(database)
    try:
        listed = {item["tenant"]: item["created_at"] for item in await second.admin.tenants()}
        assert listed == dict.fromkeys(["tenant_dev", "left-behind"], "2030-01-15T09:00:00.000000Z")
        await second.admin.advance_clock(3600)
        await second.admin.create_tenant("made-after-the-upgrade")
        listed = {item["tenant"]: item["created_at"] for item in await second.admin.tenants()}
        assert listed["made-after-the-upgrade"] == "2030-01-15T10:00:00.000000Z"
    finally:
        await second.aclose()


async def test_an_older_file_gets_todays_indexes_and_keeps_one_id_per_event(
    tmp_path,
) -> None:
    database = tmp_path / "older.sqlite3"
    first = InProcessFake(database)
    await first.aclose()
    # as written before: an account index, AUTOINCREMENT event ids, the proposals' older indexes
    conn = sqlite3.connect(database)
    conn.execute("CREATE INDEX ix_ledger_account_id ON ledger (account_id)")
    conn.execute("DROP INDEX proposals_status_tenant_expiry")
    conn.execute("CREATE INDEX proposals_pending_expiry ON proposals (status, expires_at)")
    conn.execute("DROP TABLE events")
    conn.execute(
        "CREATE TABLE events (seq INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, type VARCHAR NOT NULL,"
        " tenant_id VARCHAR, at VARCHAR NOT NULL, data VARCHAR NOT NULL)"
    )
    conn.execute("INSERT INTO events (type, tenant_id, at, data) VALUES ('reset', NULL, 't', '{}')")
    conn.commit()
    conn.close()
    second = InProcessFake(database)
    try:
        indexes = {
            row[0]
            for row in second.fake.db.conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        }
        assert "ix_ledger_account_id" not in indexes
        assert {"proposals_status_tenant_expiry", "ix_proposals_tenant_id"} <= indexes
        assert "proposals_pending_expiry" not in indexes
        async with second.admin.watch(after=0) as stream:
            async with second.client() as client:
                assert (await recall(client, "anything")).status_code == 200
            request = await stream.wait_for("request", timeout=10)
        assert [e.id for e in stream.seen] == [1, 2, 3], "the older row's id and then the request's two"
        assert request.id == 3
        assert [row["operation"] for row in await second.admin.ledger(account="acct_dev")][-1:] == ["recall"]
    finally:
        await second.aclose()


async def test_a_file_with_a_table_of_status_polls_keeps_its_series_and_drops_the_table(tmp_path) -> None:
    """Before a series held its newest polls (``poll_series.recent``), they had a table of their own."""
    database = tmp_path / "older.sqlite3"
    first = InProcessFake(database)
    async with first.client() as client:
        proposal_id = (await propose(client, proposal_body("Polled before the upgrade."))).json()["proposal"][
            "id"
        ]
        for _ in range(3):
            assert (await client.get(f"/api/agent-memory/v1/proposals/{proposal_id}")).status_code == 200
    await first.aclose()
    conn = sqlite3.connect(database)  # the layout before: a rowid table without ``recent``, and the polls
    conn.execute("ALTER TABLE poll_series RENAME TO poll_series_new")
    conn.execute(
        "CREATE TABLE poll_series (credential_id VARCHAR NOT NULL, proposal_id VARCHAR NOT NULL,"
        " polls INTEGER NOT NULL, grew BOOLEAN NOT NULL, reported BOOLEAN NOT NULL,"
        " last_request_id VARCHAR NOT NULL, last_status INTEGER, last_arrived_us INTEGER NOT NULL,"
        " last_clock_us INTEGER NOT NULL, last_interval_us INTEGER, PRIMARY KEY (credential_id, proposal_id))"
    )
    conn.execute(
        "INSERT INTO poll_series SELECT credential_id, proposal_id, 35, grew, reported, last_request_id,"
        " last_status, last_arrived_us, last_clock_us, last_interval_us FROM poll_series_new"
    )
    conn.execute("DROP TABLE poll_series_new")
    conn.execute(
        "CREATE TABLE status_polls (seq INTEGER NOT NULL, credential_id VARCHAR NOT NULL,"
        " proposal_id VARCHAR NOT NULL, request_id VARCHAR NOT NULL, arrived_us INTEGER NOT NULL,"
        " clock_us INTEGER NOT NULL, PRIMARY KEY (seq))"
    )
    conn.commit()
    conn.close()

    second = InProcessFake(database)
    try:
        async with second.client() as client:  # the 36th poll of a series whose polls were forgotten
            assert (await client.get(f"/api/agent-memory/v1/proposals/{proposal_id}")).status_code == 200
        assert await second.admin.findings() == []
        conn = second.fake.db.conn
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'status_polls'").fetchall() == []
        (polls, recent) = conn.execute("SELECT polls, recent FROM poll_series").fetchone()
        assert polls == 36
        assert recent.startswith("req_")
    finally:
        await second.aclose()


def _columns(database, table: str) -> set[str]:
    conn = sqlite3.connect(database)
    try:
        return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    finally:
        conn.close()


async def test_an_upgrade_stopped_part_way_leaves_the_older_file_as_it_was(tmp_path, monkeypatch) -> None:
    """The upgrade is one transaction: a process killed before its end (here: its last step fails)
    leaves no column added without its values, and the next start upgrades the file whole."""
    database = tmp_path / "older.sqlite3"
    first = InProcessFake(database)
    other = await first.admin.create_tenant("other")
    async with first.client(other["credential"]["token"]) as theirs:
        await recall(theirs, "database")
    await first.aclose()
    _to_the_layout_before_tenant_namespaces(database)
    conn = sqlite3.connect(database)
    conn.execute("PRAGMA user_version = 0")  # as a file from before schema versions
    conn.close()

    def killed(self: Database) -> None:
        raise KeyboardInterrupt  # what a kill at that moment leaves: the rest never runs

    with monkeypatch.context() as patched:
        patched.setattr(Database, "_split_full_text_index", killed)
        with pytest.raises(KeyboardInterrupt):
            InProcessFake(database)
    assert "tenant" not in _columns(database, "journal")
    assert "tenant_id" not in _columns(database, "ledger")

    second = InProcessFake(database)
    try:
        assert {row["tenant"] for row in await second.admin.requests()} == {"other"}
        assert {row["tenant"] for row in await second.admin.ledger()} == {"other"}
    finally:
        await second.aclose()
    conn = sqlite3.connect(database)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    conn.close()


def test_a_file_written_by_a_newer_fake_lucy_is_refused_and_left_as_it_is(tmp_path) -> None:
    database = tmp_path / "newer.sqlite3"
    Database(str(database)).create_schema()
    conn = sqlite3.connect(database)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = database.read_bytes()
    with pytest.raises(ForeignDatabaseError) as refused:
        Database(str(database))
    assert str(refused.value) == (
        f"{database} was written by a newer fake-lucy (schema version {SCHEMA_VERSION + 1}; this one"
        f" knows up to {SCHEMA_VERSION}): run that fake-lucy, or give this one another --database"
    )
    assert database.read_bytes() == before
