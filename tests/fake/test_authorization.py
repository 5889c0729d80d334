"""Issue 18, point 1: every surface reads Authorization the same way; a repeated or malformed
credential header is 401 ``unauthenticated``, on v1 and on the control API alike."""

from __future__ import annotations

import httpx
import pytest

from fake_lucy.settings import FakeLucySettings
from fake_lucy.testing import LiveServer
from fake_lucy.testing.tls import shared_tls_context
from tests.helpers import V1

# (method, path, the token that surface accepts)
SURFACES = [
    ("POST", V1 + "/recall", "dev"),
    ("POST", V1 + "/proposals", "dev"),
    ("GET", V1 + "/proposals/prop_unknown", "dev"),
    ("GET", "/_fake/clock", "admin"),
    ("GET", "/_fake/requests", "admin"),
    ("POST", "/_fake/clock/advance", "admin"),
]


def _send(server: LiveServer, method: str, path: str, authorization: list[str]) -> httpx.Response:
    headers = [("Authorization", value) for value in authorization]
    headers.append(("Idempotency-Key", "auth-test"))
    body = {"query": "database"} if path.endswith("/recall") else {"seconds": 1}
    return httpx.request(
        method,
        server.base_url + path,
        headers=headers,
        json=body if method == "POST" else None,
        verify=shared_tls_context(),
    )


def _token(server: LiveServer, which: str) -> str:
    return server.dev_token if which == "dev" else server.admin_token


def _assert_unauthenticated(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.json()["code"] == "unauthenticated"
    assert response.headers["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize(("method", "path", "which"), SURFACES)
@pytest.mark.parametrize("order", ["valid first", "valid second", "twice the same"])
def test_two_authorization_lines_are_401_on_every_surface(live, method, path, which, order) -> None:
    valid = f"Bearer {_token(live, which)}"
    lines = {
        "valid first": [valid, "Bearer anything-else"],
        "valid second": ["Bearer anything-else", valid],
        "twice the same": [valid, valid],
    }[order]
    _assert_unauthenticated(_send(live, method, path, lines))
    # the same request with the valid line alone is let through authentication
    assert _send(live, method, path, [valid]).status_code != 401


@pytest.mark.parametrize(("method", "path", "which"), SURFACES)
@pytest.mark.parametrize(
    "shape",
    ["Bearer {token} extra", "Bearer {token},", "Basic {token}", "Bearer", "Bearer{token}", "{token}"],
)
def test_a_malformed_authorization_header_is_401_on_every_surface(live, method, path, which, shape) -> None:
    _assert_unauthenticated(_send(live, method, path, [shape.format(token=_token(live, which))]))


def test_a_non_ascii_byte_inside_the_token_is_401_on_the_control_api(live) -> None:
    authorization = f"Bearer {live.admin_token}é".encode("latin-1")
    response = httpx.get(
        live.base_url + "/_fake/clock",
        headers=[(b"Authorization", authorization)],
        verify=shared_tls_context(),
    )
    _assert_unauthenticated(response)


@pytest.mark.parametrize("token", ["two words", "tab\there", "ключ-admin-token"])
def test_an_admin_token_no_header_can_carry_is_refused_at_start(token, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_LUCY_ADMIN_TOKEN", token)
    with pytest.raises(ValueError, match="printable ASCII characters without spaces"):
        FakeLucySettings().resolved_admin_token()
