"""The schema the fake creates (``store/schema.sql``) is the SQLModel declarations of
``store/tables.py``, and the running fake needs neither SQLAlchemy nor SQLModel to create it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

from sqlalchemy import create_engine

from fake_lucy.store.connection import Database
from fake_lucy.store.schema import SCHEMA_SQL, STATE_TABLES, table_statements
from fake_lucy.store.tables import metadata, render_schema


def _layout(conn: sqlite3.Connection) -> dict[tuple[str, str], object]:
    """Every table and index (those SQLite makes for keys included) with its columns, as SQLite
    describes them, and its SQL with the blanks folded (SQLAlchemy ends lines with a blank that
    ``schema.sql`` does not keep)."""
    layout: dict[tuple[str, str], object] = {}
    for kind, name, table, sql in conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"):
        pragma = "table_xinfo" if kind == "table" else "index_xinfo"
        columns = [tuple(row) for row in conn.execute(f"PRAGMA {pragma}({name})")]
        folded = None if sql is None else " ".join(sql.replace(" \n", "\n").split())
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


def test_starting_the_fake_on_a_new_file_imports_neither_sqlalchemy_nor_sqlmodel(tmp_path) -> None:
    script = (
        "import json, sys\n"
        "from fake_lucy.app import create_app\n"
        "from fake_lucy.runtime import FakeLucy\n"
        "from fake_lucy.settings import load_settings\n"
        f"fake = FakeLucy(load_settings(database={str(tmp_path / 'new.sqlite3')!r}))\n"
        "create_app(fake)\n"
        "assert fake.seed_outcome == 'applied', fake.seed_outcome\n"
        "fake.close()\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'sqlalchemy', 'sqlmodel'})))\n"
    )
    result = subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []
