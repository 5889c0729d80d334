"""The schema the fake creates (``store/schema.sql``) is the SQLModel declarations of
``store/tables.py`` (that the running fake imports neither: tests/test_import_cost.py). The two
tests that need the declarations import them (SQLAlchemy, SQLModel: ~0.5 s) themselves, so that
collecting this file in every pytest-xdist worker costs none of it."""

from __future__ import annotations

import hashlib
import json
import sqlite3

from fake_lucy.store.connection import Database
from fake_lucy.store.schema import (
    ADDED_COLUMNS,
    ADDED_INDEXES,
    SCHEMA_SQL,
    SCHEMA_VERSION,
    STATE_TABLES,
    fts_ddl,
    table_statements,
)


def _layout(conn: sqlite3.Connection) -> dict[tuple[str, str], object]:
    """Every table and index (those SQLite makes for keys included) with its columns, as SQLite
    describes them, and its SQL with the blanks folded (``schema.sql`` has each statement on one
    line, where SQLAlchemy writes a table's columns one a line)."""
    layout: dict[tuple[str, str], object] = {}
    for kind, name, table, sql in conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"):
        pragma = "table_xinfo" if kind == "table" else "index_xinfo"
        columns = [tuple(row) for row in conn.execute(f"PRAGMA {pragma}({name})")]
        folded = None if sql is None else " ".join(sql.split()).replace("( ", "(").replace(" )", ")")
        layout[(kind, name)] = (table, columns, folded)
    return layout


def test_schema_sql_is_the_declared_tables_rendered_for_sqlite() -> None:
    from fake_lucy.store.tables import render_schema

    assert SCHEMA_SQL.read_text(encoding="utf-8") == render_schema(), (
        "store/tables.py changed: run `python -m fake_lucy.store.tables` to write store/schema.sql again"
    )


def test_a_new_file_has_exactly_the_tables_and_indexes_sqlalchemy_creates_from_the_declarations(
    tmp_path,
) -> None:
    from sqlalchemy import create_engine

    from fake_lucy.store.tables import metadata

    declared = sqlite3.connect(tmp_path / "declared.sqlite3")
    engine = create_engine("sqlite://", creator=lambda: declared)
    metadata.create_all(engine)
    engine.dispose(close=False)
    database = Database(str(tmp_path / "created.sqlite3"))
    try:
        database.create_schema()
        created = _layout(database.conn)
    finally:
        database.close()
    expected = _layout(declared)
    declared.close()
    assert created == expected
    assert {name for kind, name in created if kind == "table"} == set(table_statements())
    assert set(STATE_TABLES) <= set(table_statements())


# What each schema version's tables are: the digest of what ``create_schema`` makes of a file.
SCHEMA_DIGESTS = {
    1: "8d10efde53a7c7ec999f705a893ad5c1b61f5a68984b2429ad59bf4f16f87f79",
    2: "a66f0cdd07692671408eb162d66ed472ec5e783882082af049b4d4433ae17c92",  # tenants.incarnation
    3: "cfef73692c845a4642cb935cbd18ba6965edc62c032a31720e1725cd07175728",  # console admin_sha256
}


def test_the_schema_version_goes_up_with_every_change_of_the_tables() -> None:
    made = hashlib.sha256(SCHEMA_SQL.read_bytes())
    made.update(json.dumps([ADDED_COLUMNS, ADDED_INDEXES, fts_ddl("tenant")]).encode())
    assert SCHEMA_DIGESTS.get(SCHEMA_VERSION) == made.hexdigest(), (
        "the tables changed: raise SCHEMA_VERSION in fake_lucy/store/schema.py (a file of this"
        " version is refused by an older fake-lucy) and record the new digest here"
    )


def test_a_new_file_and_an_upgraded_one_carry_the_schema_version(tmp_path) -> None:
    path = str(tmp_path / "versioned.sqlite3")
    database = Database(path)
    database.create_schema()
    database.conn.execute("PRAGMA user_version = 0")  # as a file from before versions
    database.close()
    again = Database(path)
    try:
        again.create_schema()
        assert again.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        again.close()


def test_creating_a_file_twice_keeps_it_as_it_is(tmp_path) -> None:
    path = str(tmp_path / "twice.sqlite3")
    first = Database(path)
    first.create_schema()
    layout = _layout(first.conn)
    first.close()
    second = Database(path)
    try:
        second.create_schema()
        assert _layout(second.conn) == layout
    finally:
        second.close()


def test_the_proposals_queries_seek_their_index_and_a_tenants_listing_never_sorts(tmp_path) -> None:
    db = Database(str(tmp_path / "plans.sqlite3"))
    db.create_schema()

    def plan(sql: str, params: tuple[object, ...]) -> list[str]:
        return [
            row[3]
            for row in db.conn.execute("EXPLAIN QUERY PLAN " + sql, params)
            if "proposals" in row[3] or "TEMP" in row[3]
        ]

    try:
        listing = plan(
            "SELECT * FROM proposals WHERE tenant_id = ? AND seq > ? ORDER BY seq LIMIT 101", ("t", 0)
        )
        assert listing == ["SEARCH proposals USING INDEX ix_proposals_tenant_id (tenant_id=? AND rowid>?)"]
        earliest = plan(
            "SELECT min(expires_at) FROM proposals WHERE tenant_id = ? AND status = 'pending'", ("t",)
        )
        assert earliest == [
            "SEARCH proposals USING COVERING INDEX proposals_status_tenant_expiry (status=? AND tenant_id=?)"
        ]
        pending = plan("SELECT count(*) FROM proposals WHERE status = 'pending'", ())
        assert pending == ["SEARCH proposals USING COVERING INDEX proposals_status_tenant_expiry (status=?)"]
    finally:
        db.close()
