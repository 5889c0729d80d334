"""Issue 15, must-hold 1: test sessions share one ``fake-lucy serve`` with ``pytest --lucy-url``.

Each session (each xdist worker) works in its own tenant: what one test resets, expires, faults or
approves is invisible to the others, and the dev tenant is left as it was.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fake_lucy.testing import AdminError, FakeAdmin, LiveServer, ServeProcess, shared
from fake_lucy.testing.shared import SharedFakeError, SharedTenant
from tests.helpers import V1, proposal_body, propose, recall
from tests.plugin.users_pytest import users_pytest

pytestmark = pytest.mark.anyio

# A user's suite written as against the plugin's own server: it relies on per-test reset, the clock,
# faults without a credential and listings of "all" proposals — each of which would meet another
# session's data, or wipe it, if the sessions shared one namespace.
USER_SUITE = textwrap.dedent(
    """
    import uuid

    import pytest

    pytestmark = pytest.mark.anyio
    V1 = "/api/agent-memory/v1"
    PROJECT = {"kind": "project", "id": "project_example"}


    @pytest.fixture
    def anyio_backend():
        return "asyncio"


    async def propose(http, text):
        response = await http.post(
            V1 + "/proposals",
            json={"kind": "decision", "content": text, "scope": PROJECT},
            headers={"Idempotency-Key": uuid.uuid4().hex},
        )
        assert response.status_code == 201, response.text
        return response.json()["proposal"]["id"]


    @pytest.mark.parametrize("n", range(4))
    async def test_an_approved_memory_is_the_only_one_recalled(fake_lucy_server, n):
        admin = fake_lucy_server.admin
        assert (await admin.proposals())["items"] == []  # reset: nothing of earlier tests, or of others
        async with fake_lucy_server.client() as http:
            proposal = await propose(http, f"Shared fakes keep tenants apart, note {n}.")
            assert [p["id"] for p in (await admin.proposals())["items"]] == [proposal]
            memory = (await admin.approve(proposal))["memory"]["id"]
            found = (await http.post(V1 + "/recall", json={"query": "shared tenants"})).json()
        assert [m["id"] for m in found["memories"]] == [memory]
        assert found["credits"]["remaining"] == 998


    @pytest.mark.parametrize("n", range(4))
    async def test_a_proposal_expires_when_the_clock_moves(fake_lucy_server, n):
        async with fake_lucy_server.client() as http:
            proposal = await propose(http, f"Expiring note {n}.")
            await fake_lucy_server.admin.advance_clock(8 * 24 * 3600)
            status = (await http.get(f"{V1}/proposals/{proposal}")).json()["proposal"]["status"]
        assert status == "expired"


    @pytest.mark.parametrize("n", range(4))
    async def test_a_fault_answers_once(fake_lucy_server, n):
        await fake_lucy_server.admin.add_fault("recall", 503)
        async with fake_lucy_server.client() as http:
            assert (await http.post(V1 + "/recall", json={"query": "x"})).status_code == 503
            assert (await http.post(V1 + "/recall", json={"query": "x"})).status_code == 200
        journal = await fake_lucy_server.admin.requests()
        assert [row["status"] for row in journal] == [503, 200]
    """
)


def run_session(directory: Path, url: str, admin_token: str) -> subprocess.Popen[str]:
    """``pytest -n 2 --lucy-url`` on a user's suite."""
    return subprocess.Popen(  # noqa: S603 - our own interpreter and fixed arguments
        users_pytest("-p", "no:randomly", "-n", "2", "--lucy-url", url, str(directory)),
        cwd=directory,
        env={**_environment(), "FAKE_LUCY_ADMIN_TOKEN": admin_token},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _environment() -> dict[str, str]:
    """This process's environment without pytest's own variables (an xdist worker's id among them)."""
    return {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}


@contextlib.contextmanager
def served(args: list[str], admin_token: str) -> Iterator[ServeProcess]:
    """``fake-lucy serve`` with its own admin token; its two workers may take a while to start on a
    busy machine."""
    server = ServeProcess(args, {"FAKE_LUCY_ADMIN_TOKEN": admin_token})
    try:
        server.wait_ready(timeout=120)
        yield server
    finally:
        server.stop()


async def dev_tenant(admin: FakeAdmin) -> dict[str, Any]:
    return {
        "memories": await admin.memories(tenant="tenant_dev"),
        "proposals": await admin.proposals(tenant="tenant_dev"),
        "ledger": await admin.ledger(account="acct_dev"),
        "journal": await admin.requests(),
        "policy": await admin.policy("tenant_dev"),
        "clock": await admin.clock(),
    }


@pytest.mark.slow
async def test_two_sessions_with_two_workers_each_share_one_fake_and_leave_the_dev_tenant_untouched(
    tmp_path: Path,
) -> None:
    admin_token = "ci-admin-" + secrets.token_urlsafe(24)
    database = tmp_path / "shared.sqlite3"
    with served(["--workers", "2", "--database", str(database)], admin_token) as server:
        async with server.client(admin_token) as http:
            admin = FakeAdmin(http)
            await admin.set_clock(frozen=True)
            async with server.client() as dev:
                created = await propose(dev, proposal_body("The dev tenant's own memory about tenants."))
                await admin.approve(created.json()["proposal"]["id"])
                assert len((await recall(dev, "tenants")).json()["memories"]) == 1
            before = await dev_tenant(admin)
            suites = []
            for name in ("first", "second"):
                directory = tmp_path / name
                directory.mkdir()
                (directory / "test_user_suite.py").write_text(USER_SUITE)
                suites.append(run_session(directory, server.base_url, admin_token))
            outputs = [suite.communicate(timeout=600)[0] for suite in suites]
            for suite, output in zip(suites, outputs, strict=True):
                assert suite.returncode == 0, output
                assert "12 passed" in output, output
            assert await dev_tenant(admin) == before
            # every session (each xdist worker) deleted its tenant at its end
            assert [item["tenant"] for item in await admin.tenants()] == ["tenant_dev"]
            async with server.client() as dev:
                assert len((await recall(dev, "tenants")).json()["memories"]) == 1


async def test_a_shared_tenant_acts_within_its_tenant_and_is_deleted_at_the_end(live: LiveServer) -> None:
    with SharedTenant.start(live.base_url, live.admin_token, label="unit") as shared:
        assert shared.tenant.startswith("unit-")
        async with shared.client() as http:
            response = await propose(http, proposal_body("Inside the shared tenant."))
            assert response.status_code == 201
        assert [p["tenant"] for p in await shared.admin.requests()] == [shared.tenant]
        assert (await live.admin.proposals(tenant="tenant_dev"))["items"] == []
        assert shared.reset() >= 0
        assert (await shared.admin.proposals())["items"] == []
        token = shared.dev_token
    async with httpx.AsyncClient(base_url=live.base_url) as http:
        gone = await http.post(
            V1 + "/recall", json={"query": "x"}, headers={"Authorization": f"Bearer {token}"}
        )
    assert gone.status_code == 401
    with pytest.raises(SharedFakeError, match="cannot be reached"):
        SharedTenant.create("http://127.0.0.1:9", live.admin_token)
    with pytest.raises(SharedFakeError, match="401 unauthenticated") as refused:
        SharedTenant.create(live.base_url, "not-the-admin-token")
    assert "FAKE_LUCY_ADMIN_TOKEN" in str(refused.value)  # what to fix


async def test_a_shared_fake_that_stopped_or_is_not_the_fake_is_one_error_line_for_every_call(
    live: LiveServer,
) -> None:
    """A shared fake gone mid-session (stopped, restarted elsewhere) or an address that answers
    with another server's page: the session's reset and its tenant's deletion, strict mode's and
    the dump's reads, and the admin helper each say so in one line, never httpx's traceback."""
    from fake_lucy.testing._control import HttpControl

    with SharedTenant.start(live.base_url, live.admin_token, label="unit") as shared:
        created = {
            "tenant": shared.tenant,
            "admin_token": shared.admin_token,
            "credential": {
                "token": shared.dev_token,
                "credential_id": shared.credential_id,
                "account": shared.account,
                "user": shared.user,
            },
        }
    stopped = SharedTenant("http://127.0.0.1:9", created)  # nothing listens on the discard port
    for call in (stopped.reset, stopped.delete):
        with pytest.raises(SharedFakeError) as refused:
            call()
        assert str(refused.value).startswith("the shared fake at http://127.0.0.1:9 cannot be reached (")
        assert "\n" not in str(refused.value)
    with pytest.raises(ValueError, match=r"^the fake at http://127.0.0.1:9 cannot be reached \(GET /_fake/"):
        HttpControl("http://127.0.0.1:9", shared.admin_token, shared.tenant).findings()
    gone = HttpControl(live.base_url, shared.admin_token, shared.tenant)  # its tenant was deleted
    with pytest.raises(ValueError, match=f"^this session's tenant {shared.tenant} is gone from the shared"):
        gone.findings()

    def proxy_page(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, html="<html>502 Bad Gateway</html>")

    async with httpx.AsyncClient(transport=httpx.MockTransport(proxy_page), base_url=live.base_url) as http:
        with pytest.raises(AdminError) as answered:
            await FakeAdmin(http).approve("prop_" + "A" * 22)
    assert answered.value.status == 502
    assert str(answered.value) == (
        "502: the answer is no problem document (text/html; charset=utf-8): not fake-lucy's (a"
        " proxy's, or another server's on that address)"
    )


def test_a_wrong_admin_token_is_one_line_naming_the_variable_for_each_test_that_needs_the_fake(
    live: LiveServer, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LUCY_ADMIN_TOKEN", "not-the-admin-token-0123456789abcdef")
    pytester.makepyfile(
        test_shared="""
def test_one(fake_lucy_server):
    pass

def test_two(fake_lucy_server):
    pass

def test_without_the_fake():
    pass
"""
    )
    result = pytester.runpytest("-p", "no:randomly", "--lucy-url", live.base_url, "-W", "error")
    result.assert_outcomes(passed=1, errors=2)
    output = result.stdout.str()
    whole = [line for line in result.outlines if line.startswith("--lucy-url: the shared fake at")]
    assert len(whole) == 2  # each test's error is this one line (and the summary's short form)
    assert whole[0].endswith(
        "(FAKE_LUCY_ADMIN_TOKEN is set: it must hold the shared fake's server admin token)"
    )
    assert "not-the-admin-token" not in output
    assert "fake_lucy/testing" not in output  # the plugin's frames stay out of it
    assert "During handling" not in output  # nor the error it was worded from
    assert not [line for line in result.outlines if line.startswith("the shared fake at")]


def test_a_session_whose_tenant_is_gone_fails_each_later_test_with_one_line(
    live: LiveServer, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another job's ``fake-lucy reset`` (or ``tenants prune``) took this session's tenant: each
    later test, and the session's end, say so in one line, not as a 401 with the plugin's frames."""
    monkeypatch.setenv("FAKE_LUCY_ADMIN_TOKEN", live.admin_token)
    pytester.makepyfile(
        test_gone=f"""
import httpx

def test_a_server_reset_by_another_job(fake_lucy_server):
    headers = {{"Authorization": "Bearer {live.admin_token}"}}
    assert httpx.post(fake_lucy_server.base_url + "/_fake/reset", headers=headers).status_code == 200

def test_after_it(fake_lucy_server):
    pass
"""
    )
    result = pytester.runpytest("-p", "no:randomly", "--lucy-url", live.base_url, "-W", "error")
    result.assert_outcomes(passed=1, errors=2)  # the second test's set-up, and the session's end
    gone = r"this session's tenant pytest-\w+-[0-9a-f]{12} is gone from the shared fake \(deleted, taken"
    result.stdout.re_match_lines(
        [
            rf"--lucy-url: {gone} by fake-lucy tenants prune, or a server reset\): POST /_fake/reset with its"
            " admin token answered 401",
            rf"fake_lucy: the session's fakes could not be closed: {gone} .*: DELETE /_fake/tenants/\S+ with",
        ]
    )
    output = result.stdout.str()
    assert "fake_lucy/testing" not in output  # the plugin's frames stay out of it
    assert "During handling" not in output


def test_the_sdk_fixtures_on_a_cleartext_shared_fake_elsewhere_fail_with_one_line() -> None:
    """``--lucy-url http://`` to another host: the SDK (and lucy-memory-mcp, which is the SDK) will
    not send a token there; lucy_server_client, lucy_sync_client and lucy_mcp say so in one line."""
    from types import SimpleNamespace

    from fake_lucy.testing.pytest_plugin import _sdk_transport
    from lucy_memory import create_lucy_http_transport

    url = "http://fake-lucy.ci.internal:8787"
    with pytest.raises(pytest.fail.Exception) as failed:
        _sdk_transport(
            SimpleNamespace(base_url=url),  # type: ignore[arg-type]
            lambda: create_lucy_http_transport(base_url=url, allow_insecure_loopback=True),
        )
    assert failed.value.pytrace is False
    assert str(failed.value) == (
        f"--lucy-url {url}: the SDK and lucy-memory-mcp refuse it (insecure_transport: cleartext http://"
        " is allowed only to a loopback host (localhost, 127.0.0.0/8, ::1). Nothing was sent and nothing"
        " was charged.): give --lucy-url a loopback URL, or serve the shared fake over HTTPS"
    )
    prefixed = "https://fake-lucy.ci.internal:8787/lucy"  # the control API reaches it; the SDK does not
    with pytest.raises(pytest.fail.Exception) as failed:
        _sdk_transport(
            SimpleNamespace(base_url=prefixed),  # type: ignore[arg-type]
            lambda: create_lucy_http_transport(base_url=prefixed, allow_insecure_loopback=True),
        )
    assert str(failed.value).startswith(f"--lucy-url {prefixed}: the SDK and lucy-memory-mcp refuse it (")
    assert str(failed.value).endswith("): give --lucy-url the fake's own address (scheme, host and port)")


def test_the_admin_token_file_is_read_as_the_operator_commands_read_it(
    live: LiveServer, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text(live.admin_token + "\n", encoding="utf-8")
    monkeypatch.setenv("FAKE_LUCY_ADMIN_TOKEN", "not-the-admin-token-0123456789abcdef")  # the file wins
    monkeypatch.setenv("FAKE_LUCY_ADMIN_TOKEN_FILE", str(token_file))
    pytester.makepyfile(test_shared="def test_one(fake_lucy_server):\n    assert fake_lucy_server.tenant\n")
    result = pytester.runpytest("-p", "no:randomly", "--lucy-url", live.base_url, "-W", "error")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("variables", "said"),
    [
        ({"FAKE_LUCY_ADMIN_TOKEN": " "}, "FAKE_LUCY_ADMIN_TOKEN is set but empty"),
        ({"FAKE_LUCY_ADMIN_TOKEN": "two words"}, "FAKE_LUCY_ADMIN_TOKEN must be "),
        ({"FAKE_LUCY_ADMIN_TOKEN_FILE": "{tmp}/none"}, "cannot read the admin token file {tmp}/none ("),
        ({"FAKE_LUCY_ADMIN_TOKEN_FILE": "{tmp}/empty"}, "the admin token file {tmp}/empty is empty"),
    ],
)
def test_an_admin_token_that_cannot_be_read_or_sent_is_the_runs_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variables, said
) -> None:
    """As the operator commands say it, once, before any test: never the built-in token instead."""
    (tmp_path / "empty").write_text("\n", encoding="utf-8")
    monkeypatch.delenv("FAKE_LUCY_ADMIN_TOKEN", raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value.format(tmp=tmp_path))
    pytester.makepyfile(test_shared="def test_one(fake_lucy_server):\n    pass\n")
    result = pytester.runpytest("--lucy-url", "http://127.0.0.1:9")  # never reached
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --lucy-url: {said.format(tmp=tmp_path)}*"])
    assert "two words" not in result.stderr.str()


def test_an_untrusted_certificate_names_the_remedy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The TLS failure at the edge (no fake with a certificate from a CA of its own is started here):
    the line says how to trust it, as the README's HTTPS setup does."""

    def untrusted(*args: object, **kwargs: object) -> None:
        raise httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")

    monkeypatch.setattr(shared, "control_request", untrusted)
    with pytest.raises(SharedFakeError) as caught:
        SharedTenant.create("https://user:pw@fake-lucy.ci.internal:8787", "admin-token-0123456789")
    said = str(caught.value)
    assert said.startswith("the shared fake at https://fake-lucy.ci.internal:8787 cannot be reached:")
    assert "point SSL_CERT_FILE or SSL_CERT_DIR at its CA" in said
