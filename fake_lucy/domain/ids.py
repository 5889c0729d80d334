"""Opaque ids: random by default, or a deterministic sequence with ``--id-seed``."""

from __future__ import annotations

import base64
import hashlib
import os
import random
import secrets
import sqlite3

__all__ = ["IdFactory", "random_request_id"]

_BODY_CHARS = 22


def _urlsafe(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")[:_BODY_CHARS]


# Request ids name requests; nobody needs to guess them, only never to see one twice: this
# process's own generator, seeded from the OS, is unique enough and costs no system call.
_request_ids = random.Random(secrets.randbits(128))  # noqa: S311 - unique names, not secrets
os.register_at_fork(after_in_child=lambda: _request_ids.seed(secrets.randbits(128)))  # never the parent's


def random_request_id() -> str:
    return "req_" + _urlsafe(_request_ids.randbytes(18))


# The table each kind of generated id names a row of: with a seed, an id a row already holds (a
# snapshot restored from another run of the same seed brought it) is passed over for the next.
_TABLES = {
    "acct": "accounts",
    "cred": "credentials",
    "flt": "faults",
    "mem": "memories",
    "prop": "proposals",
    "tenant": "tenants",
}


class IdFactory:
    """``new(conn, "mem")`` → ``mem_<22 url-safe chars>``; with a seed, the n-th id is fixed (but for
    one some row already holds, which is never given twice)."""

    def __init__(self, seed: int | None) -> None:
        self.seed = seed

    def new(self, conn: sqlite3.Connection, prefix: str) -> str:
        if self.seed is None:
            return f"{prefix}_{_urlsafe(secrets.token_bytes(18))}"
        table = _TABLES[prefix]
        while True:
            (n,) = conn.execute(
                "UPDATE server_state SET id_sequence = id_sequence + 1 WHERE id = 1 RETURNING id_sequence"
            ).fetchone()
            digest = hashlib.sha256(f"{self.seed}:{prefix}:{n}".encode()).digest()
            made = f"{prefix}_{_urlsafe(digest)}"
            held = conn.execute(f"SELECT 1 FROM {table} WHERE id = ?", (made,)).fetchone()  # noqa: S608 - ours
            if held is None:
                return made
