"""The two epochs of ``server_state`` that keep each worker's caches honest across workers.

``auth_epoch`` changes with every change to credentials, tenants, tenant policies or tenant clocks
(the principals of ``principals.PrincipalCache`` carry their tenant's policy and clock);
``index_epoch`` with every write to a full-text index (``recall.RecallCache``). Each is set to a
new random value rather than counted: reset recreates the row, and a counter starting again from
its seed value could meet an epoch a cache still holds.
"""

from __future__ import annotations

import secrets
import sqlite3

__all__ = ["bump_auth_epoch", "bump_index_epoch", "new_incarnation"]


def bump_auth_epoch(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE server_state SET auth_epoch = ? WHERE id = 1", (secrets.randbits(62),))


def bump_index_epoch(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE server_state SET index_epoch = ? WHERE id = 1", (secrets.randbits(62),))


def new_incarnation() -> int:
    """A tenant's ``incarnation``, random for the same reason as the epochs: a tenant made again
    under its id (a reset of the server recreates every row) must not meet a value it held."""
    return secrets.randbits(62)
