"""Row numbers never given twice: proposals, the journal, the ledger and the tenants.

Their control listings page by row number (``seq``, the tenants' ``rowid``: the cursor). SQLite
numbers a new row one above the table's newest, so when a tenant's reset, deletion or restore
removed the newest rows, the next rows would take their numbers again, and a server admin paging
past them would miss them. Before those rows go, ``keep_numbers`` writes each table's newest
number to ``seq_floors``; every insert into these tables numbers its row one above both the newest
row and that floor (``next_seq``: two reads of one page each, no write). A server reset (or restore
of the whole state) clears the floors with everything else: numbering starts again, as every
listing does.
"""

from __future__ import annotations

import sqlite3

__all__ = ["NUMBERED", "keep_numbers", "next_seq"]

# Each numbered table and the column that holds its row number.
NUMBERED = {"proposals": "seq", "journal": "seq", "ledger": "seq", "tenants": "rowid"}


def next_seq(table: str) -> str:
    """The SQL expression of ``table``'s next row number (for an INSERT's ``seq`` value)."""
    if table not in NUMBERED:
        raise ValueError(f"{table} is not numbered here")
    return (
        f"max(coalesce((SELECT max({NUMBERED[table]}) FROM {table}), 0),"  # noqa: S608 - one of NUMBERED
        f" coalesce((SELECT floor FROM seq_floors WHERE name = '{table}'), 0)) + 1"
    )


def keep_numbers(conn: sqlite3.Connection) -> None:
    """Before rows of these tables are deleted (not at their oldest end): no later row takes the
    numbers they hold."""
    for table, column in NUMBERED.items():
        conn.execute(
            "INSERT INTO seq_floors (name, floor)"  # noqa: S608 - constant names
            f" SELECT ?, coalesce(max({column}), 0) FROM {table} WHERE true"
            " ON CONFLICT (name) DO UPDATE SET floor = max(floor, excluded.floor)",
            (table,),
        )
