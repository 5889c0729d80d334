"""A bug in the fake still answers in the contract's envelope (500 ``internal``), on a real server."""

from __future__ import annotations

import httpx

from tests.helpers import V1


def test_an_unexpected_error_is_a_500_problem_with_the_version_header(live, monkeypatch) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr("fake_lucy.http.pipeline.recall", broken)
    response = httpx.post(
        live.base_url + V1 + "/recall",
        json={"query": "anything"},
        headers={"Authorization": f"Bearer {live.dev_token}"},
    )
    assert response.status_code == 500
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert (body["code"], body["retryable"]) == ("internal", False)
    assert "simulated bug" not in response.text
    assert response.headers["Fake-Lucy-Version"]
