"""The server log of ``fake-lucy serve`` (SPEC 3.11): one line per v1 request on stderr.

``15:04:05.123  propose          201   2.4 ms  1 credit   key 8c1f0e2a…  retry 0  cred_dev_default``

Time (wall clock), operation, status, milliseconds, credits charged, a shortened Idempotency-Key,
the retry attempt, the credential and, when one fired, the fault. Never a token or a body.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import TextIO

from fake_lucy.store.records import JournalRow
from fake_lucy.text import visible

__all__ = ["RequestLogger", "request_line"]

KEY_SHOWN = 8


def _key(key: str | None) -> str:
    if key is None:
        return "–"
    short = visible(key[:KEY_SHOWN])
    return short + "…" if len(key) > KEY_SHOWN else short


def request_line(operation: str, row: JournalRow | None, status: int | None, ms: float) -> str:
    moment = datetime.now().strftime("%H:%M:%S.%f")[:-3]
    shown = "drop" if status is None else str(status)
    head = f"{moment}  {operation:<16} {shown:>4} {ms:7.1f} ms"
    if row is None:  # refused before authentication: nothing else is known
        return head
    credits = "1 credit " if row.charged else "0 credits"
    key = _key(row.idempotency_key)
    line = f"{head}  {credits}  key {key:<10} retry {row.retry_attempt}  {row.credential_id}"
    if row.replayed:
        line += "  replayed"
    if row.fault_id is not None:
        line += f"  fault {row.fault_id}"
    return line


class RequestLogger:
    """The pipeline's ``RequestLog`` hook writing ``request_line`` to a stream (stderr)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self.failed = False

    def __call__(self, operation: str, row: JournalRow | None, status: int | None, ms: float) -> None:
        """Write the line; a log that cannot be written (stderr closed, a full disk) is given up,
        never the request: the log is instrumentation, and the answer stands."""
        if self.failed:
            return
        stream = self.stream or sys.stderr
        try:
            stream.write(request_line(operation, row, status, ms) + "\n")
            stream.flush()
        except (OSError, ValueError):  # ValueError: the stream was closed
            self.failed = True
