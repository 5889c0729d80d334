"""``fake-lucy serve --tls-certfile FILE --tls-keyfile FILE``: a shared fake other hosts reach over
HTTPS, so that the SDK (which sends a token over cleartext only to a loopback address) and every
fixture built on it work with ``pytest --lucy-url https://…`` (README, "One fake for a CI fleet")."""

from __future__ import annotations

import io
import secrets
import textwrap
from contextlib import redirect_stderr
from pathlib import Path

import httpx
import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from fake_lucy import cli
from fake_lucy.healthcheck import main as healthcheck_main
from fake_lucy.testing import ServeProcess
from fake_lucy.testing.shared import SharedFakeError, SharedTenant

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
    files["encrypted"] = folder / "encrypted.pem"
    authority.cert_pem.write_to_path(str(files["ca"]))
    issued.private_key_pem.write_to_path(str(files["key"]))
    key = serialization.load_pem_private_key(issued.private_key_pem.bytes(), password=None)
    files["encrypted"].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"a passphrase"),
        )
    )
    for blob in issued.cert_chain_pems:
        blob.write_to_path(str(files["cert"]), append=True)
    return files


def test_a_session_with_lucy_url_uses_an_https_fake_for_every_fixture(
    certificates: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificates["ca"]))  # what each CI job would set
    admin_token = "tls-admin-" + secrets.token_urlsafe(24)
    monkeypatch.setenv("FAKE_LUCY_ADMIN_TOKEN", admin_token)
    args = [f"--tls-certfile={certificates['cert']}", "--tls-keyfile", str(certificates["key"])]
    args += ["--database", str(tmp_path / "tls.sqlite3")]
    with ServeProcess.start(args, env={"FAKE_LUCY_ADMIN_TOKEN": admin_token}) as server:
        assert server.base_url.startswith("https://")
        with pytest.raises(httpx.TransportError):  # cleartext is not served on the port
            httpx.get(server.base_url.replace("https://", "http://") + "/healthz", timeout=5)
        # the container's probe, as the compose file runs it beside such a fake
        port = server.base_url.rsplit(":", 1)[1]
        assert healthcheck_main({"FAKE_LUCY_PORT": port, "FAKE_LUCY_TLS_CERTFILE": "set"}) == 0
        assert healthcheck_main({"FAKE_LUCY_PORT": port}) == 1  # http:// to an https port
        pytester.makepyfile(test_user_suite=USER_SUITE)
        result = pytester.runpytest("-p", "no:randomly", "--lucy-url", server.base_url)
        result.assert_outcomes(passed=2)
        # without the CA a session cannot create its tenant, and says why
        monkeypatch.delenv("SSL_CERT_FILE")
        with pytest.raises(SharedFakeError, match="CERTIFICATE_VERIFY_FAILED"):
            SharedTenant.create(server.base_url, admin_token)
        with pytest.raises(RuntimeError, match="a certificate not trusted here"):  # at once, not at a limit
            server.healthy()


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (("cert", None), "invalid configuration: --tls-certfile and --tls-keyfile go together"),
        (("cert", "ca"), "cannot load the TLS certificate"),
        (("missing", "key"), "cannot load the TLS certificate"),
        (("cert", "encrypted"), "the key is encrypted: give its unencrypted form"),
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
