"""Opt-in: Stoplight Prism mocks ``/openapi.json`` with ``--errors`` and answers the three v1 operations
with 2xx and bodies valid against ``schemas/``. Needs Node and Prism, so ``make test`` skips it; run it
with ``npm install --prefix /tmp/prism @stoplight/prism-cli`` and
``LUCY_PRISM=/tmp/prism/node_modules/.bin/prism pytest tests/contract/test_prism_mock.py``."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from benchmarks.common import wait_http
from fake_lucy.http.openapi import v1_openapi
from fake_lucy.testing.fakes import free_port
from lucy_memory._contract import schema_validator

PRISM = os.environ.get("LUCY_PRISM", "")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not PRISM, reason="set LUCY_PRISM to a Stoplight Prism binary to run"),
]
HEADERS = {"Authorization": "Bearer lucy-dev-token", "Lucy-Permissions": "memory:read, memory:propose"}


@pytest.fixture
def prism(tmp_path: Path) -> Iterator[str]:
    document = tmp_path / "openapi.json"
    document.write_text(json.dumps(v1_openapi()), encoding="utf-8")
    port = free_port()
    process = subprocess.Popen(  # noqa: S603 - the binary the developer named
        [PRISM, "mock", str(document), "--errors", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_http(base_url + "/", timeout=60, process=process)  # exited: fails at once
        yield base_url + "/api/agent-memory/v1"
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_prism_answers_the_three_v1_operations_with_valid_2xx_bodies(prism: str) -> None:
    recall = httpx.post(prism + "/recall", json={"query": "Which database?", "limit": 3}, headers=HEADERS)
    assert recall.status_code == 200, recall.text
    assert schema_validator("recall-response.schema.json").errors(recall.json()) == []
    propose = httpx.post(
        prism + "/proposals",
        json={
            "kind": "decision",
            "content": "We use PostgreSQL 16.",
            "scope": {"kind": "project", "id": "p1"},
        },
        headers={**HEADERS, "Idempotency-Key": "k-1"},
    )
    assert propose.status_code == 201, propose.text
    assert schema_validator("propose-response.schema.json").errors(propose.json()) == []
    status = httpx.get(prism + "/proposals/" + propose.json()["proposal"]["id"], headers=HEADERS)
    assert status.status_code == 200, status.text
    assert schema_validator("proposal-status-response.schema.json").errors(status.json()) == []


def test_prism_answers_a_bad_request_with_a_problem_of_its_own_status(prism: str) -> None:
    for headers, status in ((HEADERS, 422), ({}, 401)):
        response = httpx.post(prism + "/recall", json={"limit": 3}, headers=headers)
        assert response.status_code == status
        assert response.json()["status"] == status
        assert schema_validator("problem.schema.json").errors(response.json()) == []
