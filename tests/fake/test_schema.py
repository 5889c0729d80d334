"""The schema the fake creates (``store/schema.sql``) is the SQLModel declarations of
``store/tables.py`` (that the running fake imports neither: tests/test_import_cost.py)."""

from __future__ import annotations

import sqlite3

from sqlalchemy import create_engine

from fake_lucy.store.connection import Database
from fake_lucy.store.schema import SCHEMA_SQL, STATE_TABLES, table_statements
from fake_lucy.store.tables import metadata, render_schema


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
    assert SCHEMA_SQL.read_text(encoding="utf-8") == render_schema(), (
        "store/tables.py changed: run `python -m fake_lucy.store.tables` to write store/schema.sql again"
    )


def test_a_new_file_has_exactly_the_tables_and_indexes_sqlalchemy_creates_from_the_declarations(
    tmp_path,
) -> None:
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
