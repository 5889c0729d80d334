"""``fake-lucy serve`` as a user runs it: a real process on a real port."""

from __future__ import annotations

import httpx
import pytest

from fake_lucy.settings import FakeLucySettings
from fake_lucy.testing import ServeProcess


@pytest.mark.slow
def test_serve_answers_healthz_and_prints_the_tokens_it_accepts(tmp_path) -> None:
    server = ServeProcess(["--database", str(tmp_path / "serve.sqlite3")])
    try:
        server.wait_ready()
        health = httpx.get(server.base_url + "/healthz")
        assert health.json()["status"] == "ok"
        assert health.headers["Fake-Lucy-Version"]
        recall = httpx.post(
            server.base_url + "/api/agent-memory/v1/recall",
            json={"query": "anything"},
            headers={"Authorization": "Bearer lucy-dev-token"},
        )
        assert recall.status_code == 200
    finally:
        out, _ = server.stop()
    assert "lucy-dev-token" in out
    assert "fake-admin-token" in out
    assert f"127.0.0.1:{server.port}" in out


def test_the_defaults_are_loopback_port_8787() -> None:
    settings = FakeLucySettings()
    assert (settings.host, settings.port, settings.workers) == ("127.0.0.1", 8787, 1)


@pytest.mark.slow
def test_a_bad_configuration_exits_with_one_clear_line(tmp_path) -> None:
    server = ServeProcess(["--database", ":memory:", "--workers", "2"])
    code = server.process.wait(timeout=30)
    _, err = server.process.communicate()
    assert code != 0
    assert ":memory:" in err
