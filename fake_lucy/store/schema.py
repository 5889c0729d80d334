"""The schema as the running fake uses it: the DDL of every table, the full-text tables' names, and
what a file written by an older fake-lucy lacks.

``store/tables.py`` declares the tables (SQLModel, the source of truth); ``schema.sql`` beside this
module is those declarations rendered for SQLite, so that starting the fake (every ``fake-lucy``
process, every worker) needs neither SQLAlchemy nor SQLModel. ``python -m fake_lucy.store.tables``
writes it again after a change to the declarations, and a test fails while the two differ.
"""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

__all__ = [
    "ADDED_COLUMNS",
    "ADDED_INDEXES",
    "LEGACY_FTS_TABLE",
    "SCHEMA_SQL",
    "SCHEMA_VERSION",
    "STATE_TABLES",
    "fts_ddl",
    "fts_table",
    "table_statements",
]

SCHEMA_SQL = Path(__file__).with_name("schema.sql")
# The version of the tables (SQLite's ``user_version`` of a file): ``create_schema`` writes it, and
# a file of a higher one, from a newer fake-lucy, is refused. It goes up with every change of
# ``schema.sql``, ``ADDED_COLUMNS`` or ``ADDED_INDEXES`` (a test holds it to their digest); a file
# without one (0) was written before versions, and is brought up to date as any older file is.
SCHEMA_VERSION = 3
_OWNER = re.compile(r"CREATE (?:TABLE|(?:UNIQUE )?INDEX \S+ ON) (\S+) ")


@functools.cache
def table_statements() -> dict[str, tuple[str, ...]]:
    """Each table's ``CREATE TABLE`` and then its ``CREATE INDEX`` statements, from ``schema.sql``:
    a table that does not exist yet is created with its indexes (as SQLAlchemy's ``create_all`` does)."""
    lines = SCHEMA_SQL.read_text(encoding="utf-8").splitlines()
    text = "\n".join(line for line in lines if not line.startswith("--"))
    statements: dict[str, list[str]] = {}
    for statement in filter(None, (part.strip() for part in text.split(";\n"))):
        owner = _OWNER.match(statement)
        if owner is None:
            raise ValueError(f"{SCHEMA_SQL} holds a statement that is not a table or an index")
        statements.setdefault(owner[1], []).append(statement)
    return {table: tuple(ddl) for table, ddl in statements.items()}


# The full-text index of a tenant's active memories, one FTS5 table per tenant, so that bm25's
# statistics (row count, average length, each term's document count) are the tenant's alone: what
# another tenant stores never moves a score (SPEC 3.6). rowid = memories.seq. ``scope_tag`` holds
# one opaque token per (tenant, scope) so that the index itself narrows a recall to the visible
# scopes. The table is created with its tenant's row and dropped with it.
@functools.lru_cache(maxsize=4096)
def fts_table(tenant: str) -> str:
    """The name of ``tenant``'s full-text table: a digest, since a tenant id may hold ``.:-``."""
    return "memory_fts_" + hashlib.sha256(tenant.encode("utf-8")).hexdigest()[:24]


def fts_ddl(tenant: str) -> str:
    return (
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {fts_table(tenant)} USING fts5("
        "scope_tag, content, topic, tokenize = 'porter unicode61 remove_diacritics 2')"
    )


# The one index of every tenant that files written before per-tenant indexes hold;
# ``create_schema`` moves its rows into the tenants' tables and drops it.
LEGACY_FTS_TABLE = "memory_fts"

# Columns added after the first release: ``create_schema`` adds them to an existing file.
ADDED_COLUMNS = (
    ("server_state", "auth_epoch", "INTEGER NOT NULL DEFAULT 0"),
    ("server_state", "index_epoch", "INTEGER NOT NULL DEFAULT 0"),
    ("server_state", "seed_sha256", "TEXT"),
    ("server_state", "findings_seq", "INTEGER NOT NULL DEFAULT 0"),
    ("tenants", "clock_offset_us", "INTEGER NOT NULL DEFAULT 0"),
    ("tenants", "clock_frozen_us", "INTEGER"),
    ("tenants", "admin_token_sha256", "VARCHAR"),
    ("tenants", "first_credential_id", "VARCHAR"),
    ("tenants", "initial_credits", "INTEGER"),
    ("tenants", "created_at", "VARCHAR"),
    ("tenants", "incarnation", "INTEGER NOT NULL DEFAULT 0"),
    ("faults", "tenant_id", "VARCHAR"),
    ("journal", "tenant", "VARCHAR NOT NULL DEFAULT ''"),
    ("ledger", "tenant_id", "VARCHAR NOT NULL DEFAULT ''"),
    ("poll_series", "recent", "VARCHAR NOT NULL DEFAULT ''"),
    ("poll_series", "last_answered_us", "INTEGER"),
    ("poll_series", "last_answered_clock_us", "INTEGER"),
    ("console_sessions", "admin_sha256", "VARCHAR"),
    ("console_links", "admin_sha256", "VARCHAR"),
)

# Indexes of tables that an existing file already has (a table is created with its indexes only
# when it is new); the names are the ones the declarations give them. Then what an older file has
# that the declarations no longer make (the ledger's index by account, the table of status polls).
ADDED_INDEXES = (
    "CREATE UNIQUE INDEX IF NOT EXISTS ix_tenants_admin_token_sha256 ON tenants (admin_token_sha256)",
    "CREATE INDEX IF NOT EXISTS ix_credentials_tenant_id ON credentials (tenant_id)",
    "CREATE INDEX IF NOT EXISTS ix_memories_tenant_id ON memories (tenant_id)",
    "CREATE INDEX IF NOT EXISTS ix_journal_tenant ON journal (tenant)",
    "CREATE INDEX IF NOT EXISTS ix_ledger_tenant_id ON ledger (tenant_id)",
    "DROP INDEX IF EXISTS ix_ledger_account_id",
    # the expiry sweep and the state statement's earliest pending expiry look within one tenant
    "CREATE INDEX IF NOT EXISTS proposals_status_tenant_expiry ON proposals (status, tenant_id, expires_at)",
    "DROP INDEX IF EXISTS proposals_pending_expiry",
    # the polls of a series had a table of their own (now ``poll_series.recent``); what it held
    # were the last minute's polls, which an upgrade may forget
    "DROP TABLE IF EXISTS status_polls",
)

# The tables of the fake's state, in an order with no dangling references: reset clears them (the
# seed's state follows) and a full snapshot restore replaces them.
STATE_TABLES = (
    "memory_versions",
    "memories",
    "memory_access",
    "proposals",
    "idempotency_records",
    "ledger",
    "journal",
    "journal_counts",
    "faults",
    "rate_buckets",
    "findings",
    "client_watch",
    "poll_series",
    "credentials",
    "accounts",
    "tenants",
    "seq_floors",
    "server_state",
)
