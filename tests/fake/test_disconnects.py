"""Issue 18, point 2: a client that closes the connection before its body is complete is not a
server error — no 500, no traceback, one debug line, nothing charged, changed or journaled."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest

from fake_lucy.testing import LiveServer
from fake_lucy.testing.fakes import ServeProcess
from fake_lucy.testing.tls import shared_tls_context
from tests.helpers import V1

ADMIN = {"Authorization": "Bearer fake-admin-token"}
# (method, path, token): v1 recall, v1 propose and a control POST
TRUNCATED = [
    ("POST", V1 + "/recall", "lucy-dev-token"),
    ("POST", V1 + "/proposals", "lucy-dev-token"),
    ("POST", "/_fake/credentials", "fake-admin-token"),
]


def _send_truncated(port: int, method: str, path: str, token: str) -> None:
    """Declare a 100-byte body, send 8 bytes of it, then close."""
    head = (
        f"{method} {path} HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\n"
        "Idempotency-Key: truncated-body\r\n"
        "Content-Length: 100\r\n"
        "\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode("ascii") + b'{"query"')


def _state(base_url: str) -> dict[str, object]:
    with httpx.Client(base_url=base_url, headers=ADMIN, verify=shared_tls_context()) as admin:
        return {
            "journal": admin.get("/_fake/requests").json()["items"],
            "ledger": admin.get("/_fake/ledger").json()["items"],
            "proposals": admin.get("/_fake/proposals").json()["items"],
            "memories": admin.get("/_fake/memories").json()["items"],
        }


@pytest.mark.slow
def test_a_client_gone_mid_body_leaves_no_error_in_the_server_log_and_no_state(tmp_path) -> None:
    with ServeProcess.start(["--database", str(tmp_path / "fake.sqlite3")]) as server:
        before = _state(server.base_url)
        for method, path, token in TRUNCATED:
            _send_truncated(server.port, method, path, token)
        after = _state(server.base_url)
        healthy = httpx.post(
            server.base_url + V1 + "/recall",
            json={"query": "database"},
            headers={"Authorization": "Bearer lucy-dev-token"},
        )
    _, log = server.stop()
    assert after == before, "a request that never arrived whole changed something"
    assert healthy.status_code == 200, "the server still answers"
    for sign in ("Traceback", "unexpected", "Exception in ASGI", "ERROR", " 500"):
        assert sign not in log, log


class _Records(logging.Handler):
    """Collects the fake's log records; ``arrived`` is set at each one."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.arrived = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.arrived.set()


@pytest.fixture
def fake_log() -> Iterator[_Records]:
    logger = logging.getLogger("fake_lucy")
    handler = _Records()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.mark.parametrize(("method", "path", "token"), TRUNCATED)
def test_a_client_gone_mid_body_is_one_debug_line_and_not_journaled(
    live: LiveServer, fake_log: _Records, method: str, path: str, token: str
) -> None:
    before = _state(live.base_url)
    _send_truncated(live.port, method, path, token)
    assert fake_log.arrived.wait(timeout=10), "the fake logged nothing"
    assert [(r.levelno, r.getMessage()) for r in fake_log.records] == [
        (logging.DEBUG, f"client went away before its body was complete: {method} {path}")
    ]
    assert _state(live.base_url) == before
