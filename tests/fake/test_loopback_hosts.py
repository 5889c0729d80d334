"""On a loopback bind the fake answers only requests addressed to this machine: a page of another
site whose name was made to point at 127.0.0.1 (DNS rebinding) never reaches it, whose built-in
tokens are public."""

from __future__ import annotations

import pytest

from fake_lucy.addresses import loopback_host
from fake_lucy.testing import InProcessFake
from lucy_memory._contract import schema_validator
from tests.helpers import V1

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "host",
    [
        b"127.0.0.1",
        b"127.0.0.1:8787",
        b"localhost",
        b"LOCALHOST:8787",
        b"app.localhost:8787",
        b"[::1]:8787",
        b"127.5.6.7",
        b"devbox:8787",  # the machine's own name
        b"testserver",  # Starlette's test client
        b"localhost.:8787",  # fully qualified
        b"127.0.0.1.",
        b"[::ffff:127.0.0.1]:8787",
        b"localhost.localdomain",
    ],
)
def test_names_of_this_machine_are_loopback_hosts(host: bytes) -> None:
    assert loopback_host(host)


@pytest.mark.parametrize(
    "host",
    [
        b"rebind.attacker.example",
        b"rebind.attacker.example:8787",
        b"10.0.0.1",
        b"localhost.attacker.example",
        b"[fe80::1]:8787",
        b"",
    ],
)
def test_other_names_are_not(host: bytes) -> None:
    assert not loopback_host(host)


async def test_a_request_addressed_to_another_name_is_421_on_every_path(fake: InProcessFake) -> None:
    for token, method, path in (
        (fake.admin_token, "GET", "/_fake/snapshot"),
        (fake.dev_token, "POST", V1 + "/recall"),
        (None, "GET", "/_fake/console/login"),
    ):
        headers = {"Host": "rebind.attacker.example:8787"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        async with fake.client(token) as http:
            response = await http.request(
                method, path, headers=headers, json={"query": "x"} if method == "POST" else None
            )
        assert response.status_code == 421, path
        assert response.json()["code"] == "misdirected_request"
        assert not schema_validator("problem.schema.json").errors(response.json())
        assert response.headers["content-type"] == "application/problem+json"
    async with fake.client() as http:  # addressed to this machine: served
        assert (
            await http.post(V1 + "/recall", json={"query": "x"}, headers={"Host": "localhost:8787"})
        ).status_code == 200


async def test_a_fake_bound_to_another_address_takes_any_host(tmp_path) -> None:
    chosen = "an-admin-token-of-this-fake-0123456789"
    exposing = InProcessFake.start(tmp_path, host="0.0.0.0", admin_token=chosen)  # noqa: S104
    async with exposing as exposed, exposed.client(chosen) as http:
        response = await http.get("/_fake/clock", headers={"Host": "fake-lucy.ci.internal:8787"})
    assert response.status_code == 200
