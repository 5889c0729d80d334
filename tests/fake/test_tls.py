"""``fake-lucy serve --tls-certfile FILE --tls-keyfile FILE``: a shared fake other hosts reach over
HTTPS, so that the SDK (which sends a token over cleartext only to a loopback address) and every
fixture built on it work with ``pytest --lucy-url https://…`` (README, "One fake for a CI fleet")."""

from __future__ import annotations

import io
import secrets
import subprocess
import textwrap
from contextlib import redirect_stderr
from pathlib import Path

import httpx
import pytest
import trustme

from fake_lucy import cli
from fake_lucy.testing import ServeProcess
from tests.plugin.test_shared_fake import _environment
from tests.plugin.users_pytest import users_pytest

pytestmark = pytest.mark.slow

USER_SUITE = textwrap.dedent(
    """
    import json

    import pytest

    pytestmark = pytest.mark.anyio
    LYON = {"kind": "fact", "content": "The office is in Lyon.", "scope": {"kind": "user", "id": "usr_dev"}}


    @pytest.fixture
    def anyio_backend():
        return "asyncio"


    async def test_the_sdk_proposes_and_the_mcp_server_recalls_over_https(
        lucy_server_client, lucy_mcp, fake_lucy_server
    ):
        assert fake_lucy_server.base_url.startswith("https://")
        proposed = await lucy_server_client.propose(json.dumps(LYON))
        await fake_lucy_server.admin.approve(proposed.proposal.id)
        found = await lucy_mcp.call_tool("memory_recall", {"query": "office"})
        assert not found.is_error, found
        assert "Lyon" in json.dumps(found.structured_content)


    def test_the_blocking_client_works_over_https(lucy_sync_client):
        assert lucy_sync_client.recall('{"query": "anything"}').credits.remaining == 999
    """
)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CA of its own, and a certificate it issued for 127.0.0.1 and localhost."""
    folder = tmp_path_factory.mktemp("tls")
    authority = trustme.CA()
    issued = authority.issue_cert("127.0.0.1", "localhost")
    files = {"ca": folder / "ca.pem", "cert": folder / "cert.pem", "key": folder / "key.pem"}
    authority.cert_pem.write_to_path(str(files["ca"]))
    issued.private_key_pem.write_to_path(str(files["key"]))
    for blob in issued.cert_chain_pems:
        blob.write_to_path(str(files["cert"]), append=True)
    return files


def test_a_session_with_lucy_url_uses_an_https_fake_for_every_fixture(
    certificates: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificates["ca"]))  # this process's readiness checks
    admin_token = "tls-admin-" + secrets.token_urlsafe(24)
    args = ["--tls-certfile", str(certificates["cert"]), "--tls-keyfile", str(certificates["key"])]
    args += ["--database", str(tmp_path / "tls.sqlite3")]
    with ServeProcess.start(args, {"FAKE_LUCY_ADMIN_TOKEN": admin_token}) as server:
        assert server.base_url.startswith("https://")
        with pytest.raises(httpx.TransportError):  # cleartext is not served on the port
            httpx.get(server.base_url.replace("https://", "http://") + "/healthz", timeout=5)
        (tmp_path / "suite").mkdir()
        (tmp_path / "suite" / "test_user_suite.py").write_text(USER_SUITE)
        session = subprocess.run(  # noqa: S603 - our own interpreter and fixed arguments
            users_pytest("-p", "no:randomly", "--lucy-url", server.base_url, "suite"),
            cwd=tmp_path,
            env={**_environment(), "FAKE_LUCY_ADMIN_TOKEN": admin_token},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert session.returncode == 0, session.stdout[-3000:] + session.stderr[-3000:]
        assert "2 passed" in session.stdout
        # without the CA the session cannot create its tenant, and says why in one place
        untrusted = {**_environment(), "FAKE_LUCY_ADMIN_TOKEN": admin_token}
        untrusted.pop("SSL_CERT_FILE")
        refused = subprocess.run(  # noqa: S603 - our own interpreter and fixed arguments
            users_pytest("-p", "no:randomly", "--lucy-url", server.base_url, "suite"),
            cwd=tmp_path,
            env=untrusted,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert refused.returncode != 0
        assert "CERTIFICATE_VERIFY_FAILED" in refused.stdout


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (("cert", None), "--tls-certfile and --tls-keyfile go together"),
        (("cert", "ca"), "cannot load the TLS certificate"),
        (("missing", "key"), "cannot load the TLS certificate"),
    ],
)
def test_a_certificate_that_cannot_be_served_is_one_line_and_exit_2(
    certificates: dict[str, Path], tmp_path: Path, files: tuple[str, str | None], expected: str
) -> None:
    def path(name: str) -> str:
        return str(certificates.get(name, tmp_path / "missing.pem"))

    args = ["serve", "--database", str(tmp_path / "never.sqlite3"), "--tls-certfile", path(files[0])]
    if files[1] is not None:
        args += ["--tls-keyfile", path(files[1])]
    err = io.StringIO()
    with redirect_stderr(err):
        code = cli.main(args)
    assert code == 2
    assert len(err.getvalue().splitlines()) == 1, err.getvalue()
    assert expected in err.getvalue()
    assert not (tmp_path / "never.sqlite3").exists()  # refused before the database is made
