"""The pytest plugin (entry point ``pytest11: fake_lucy``): fixtures for testing against the fake.

Two fakes, each reset to its seeded state before every test that uses it:

- ``fake_lucy``: the fake in this process (ASGI, real SQLite file, no socket). It has
  ``.client(token)`` (an ``httpx.AsyncClient``), ``.admin`` (the control API: credentials,
  approve/reject/expire, clock, policies, faults, journal, ledger) and ``.transport``.
- ``fake_lucy_server``: a real uvicorn server on 127.0.0.1, port 0 (one per session and worker):
  ``.base_url``, ``.client()``, ``.admin`` (async) and ``.sync_admin`` (the same methods, blocking,
  for synchronous tests).

Clients, and the fake each one runs on (state is shared only between clients of the same fake):

- ``lucy_client``: an async ``AgentMemoryClient`` on ``fake_lucy``.
- ``lucy_server_client``: an async ``AgentMemoryClient`` on ``fake_lucy_server``.
- ``lucy_sync_client``: a ``SyncAgentMemoryClient`` on ``fake_lucy_server``.
- ``lucy_mcp``: an MCP client session (the official ``mcp`` SDK's ``Client``) to the real
  ``lucy-memory-mcp`` stdio server, configured as a host would (command and environment), on
  ``fake_lucy_server``.

All use the dev token with both permissions. The three SDK clients never really sleep: each wait
they ask for (a retry's ``Retry-After``, a ``wait_for_decision`` pause) returns at once, is
appended to ``.waits`` and moves the fake's clock by as much, so after one 429 with
``Retry-After: 3`` a test sees ``waits == [3.0]`` and the fake saw the client wait 3 s.
``lucy_mcp`` is a separate process and keeps real waits (give its faults ``retry_after=0``).

Each pytest-xdist worker gets its own databases (``tmp_path_factory`` is per worker). Async
fixtures need anyio's pytest plugin on its asyncio backend (pytest-asyncio's strict mode refuses
fixtures it did not declare, and its auto mode cannot close ``lucy_mcp``).

``pytest --lucy-url URL`` runs ``fake_lucy_server`` (and ``lucy_mcp``) against a shared
``fake-lucy serve`` instead (SPEC 3.6): each session or xdist worker creates its own tenant with the
server admin token from ``FAKE_LUCY_ADMIN_TOKEN``, each test resets only that tenant, and the tenant
is deleted at the end (``fake_lucy.testing.shared``). The in-process fixtures are unchanged.

Judging the client and keeping a failed test's state (``fake_lucy.testing.strict``):
``--lucy-strict`` or ``@pytest.mark.lucy_strict`` fails a test whose client produced a finding
(``@pytest.mark.lucy_allow("code", ...)`` to expect one); ``@pytest.mark.lucy_snapshot("file.json")``
loads a snapshot before a test; ``--lucy-dump-on-failure DIR`` writes each failed test's snapshot,
journal and findings.

Installing the package loads this module into every pytest run in that environment, so it imports
only pytest at module level: the fake, FastAPI, uvicorn, the SDK and the MCP SDK are imported inside
the fixtures that use them, and a run that uses none of them pays nothing
(tests/plugin/test_plugin_cost.py holds this).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pytest

from fake_lucy.testing import strict
from fake_lucy.testing.errors import SharedFakeError

if TYPE_CHECKING:
    import httpx
    from mcp import Client, StdioServerParameters

    from fake_lucy.testing.clients import RecordingAgentMemoryClient, RecordingSyncAgentMemoryClient
    from fake_lucy.testing.fakes import InProcessFake, LiveServer
    from fake_lucy.testing.shared import SharedTenant

# --lucy-strict, lucy_allow, lucy_snapshot and --lucy-dump-on-failure: their own plugin module.
pytest_plugins = ["fake_lucy.testing.strict"]

__all__ = [
    "fake_lucy",
    "fake_lucy_server",
    "lucy_client",
    "lucy_mcp",
    "lucy_mcp_parameters",
    "lucy_server_client",
    "lucy_sync_client",
]


_Client = TypeVar("_Client")


def _permissions() -> tuple[str, ...]:
    """Both permissions, read from the contract when a fixture first needs them."""
    from lucy_memory import PERMISSIONS

    return tuple(PERMISSIONS)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fake_lucy", "fake-lucy (Lucy Agent Memory fake)")  # as testing.strict names it
    group.addoption(
        "--lucy-url",
        default=None,
        metavar="URL",
        help="run fake_lucy_server against the shared fake-lucy serve at URL, each session (each"
        " xdist worker) in its own tenant; the server admin token comes from FAKE_LUCY_ADMIN_TOKEN",
    )
    group.addoption(
        "--lucy-tenant-label",
        default=None,
        metavar="LABEL",
        help="with --lucy-url: the start of each session's tenant id, <LABEL>-<xdist worker>-<random>"
        " (default pytest; e.g. the CI job's id, so that the fake's listings name the job)",
    )


# What a tenant id may hold (the contract's tenant_id), less the part the plugin adds after the label.
_LABEL = re.compile(r"[A-Za-z0-9._:-]{1,100}")


# The session's fakes are closed at the end of the last test's teardown, after every fixture's
# finalizer (a failed teardown's dump, --lucy-dump-on-failure, still reads them then), or, when
# the session ends before that test (an interrupt, -x), as it finishes.
_CLOSING = pytest.StashKey[contextlib.ExitStack]()


def pytest_configure(config: pytest.Config) -> None:
    label = config.getoption("lucy_tenant_label", None)
    if label is not None and not _LABEL.fullmatch(label):
        raise pytest.UsageError(
            f"--lucy-tenant-label {label!r}: 1 to 100 of the characters A-Z a-z 0-9 . _ : -"
        )
    url = config.getoption("lucy_url", None)
    if url is not None:  # a mistake in it is the run's usage error, not an error of each test
        from fake_lucy.addresses import fake_address
        from fake_lucy.testing.shared import server_admin_token

        try:
            config.option.lucy_url, _ = fake_address(url, "--lucy-url needs")
            server_admin_token()  # a token that cannot be read or sent is the run's mistake too
        except ValueError as exc:
            raise pytest.UsageError(f"--lucy-url: {exc}") from None
    config.stash[_CLOSING] = contextlib.ExitStack()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    """The last test's teardown closes the session's fakes once every finalizer and the dump (an
    inner wrapper, ``testing.strict``) ran; a failure there (a shared fake gone, say) is that
    teardown's error, as a failing finalizer's would be."""
    __tracebackhide__ = True  # a user's failing finalizer shows its own frames, not this wrapper's
    try:
        return (yield)
    finally:
        closing = item.config.stash.get(_CLOSING, None)
        if nextitem is None and closing is not None:
            _close(closing)


def _close(closing: contextlib.ExitStack) -> None:
    """Close the session's fakes; a shared tenant that cannot be deleted (gone already: a
    ``tenants prune`` or a server reset took it) is one line, not the plugin's frames."""
    try:
        closing.close()
    except SharedFakeError as exc:
        problem = str(exc)
    else:
        return
    pytest.fail(f"fake_lucy: the session's fakes could not be closed: {problem}", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None, None, None]:
    """A session that ended before its last test's teardown closes what is still open, even when
    another plugin's hook fails; a failure to close is one line and a failed exit status."""
    try:
        return (yield)
    finally:
        closing = session.config.stash.get(_CLOSING, None)
        if closing is not None:
            try:
                closing.close()
            # any error: what closes is the user's choice of fakes (a served one, a shared tenant
            # over the network, an in-process database), and none may end the session unreported
            except Exception as exc:
                reporter = session.config.pluginmanager.get_plugin("terminalreporter")
                line = f"fake_lucy: the session's fakes could not be closed: {type(exc).__name__}: {exc}"
                if reporter is not None:
                    reporter.write_line(line, red=True)
                if session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def _fake_lucy_session(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> InProcessFake:
    from fake_lucy.testing.fakes import InProcessFake

    fake = InProcessFake(tmp_path_factory.mktemp("fake-lucy") / "fake-lucy.sqlite3")
    request.config.stash[_CLOSING].callback(fake.fake.close)
    return fake


@pytest.fixture
def fake_lucy(request: pytest.FixtureRequest, _fake_lucy_session: InProcessFake) -> InProcessFake:
    """The in-process fake, reset to its seeded state for this test."""
    _fake_lucy_session.reset()
    _reset_for_test(request, "fake_lucy", _fake_lucy_session)
    return _fake_lucy_session


def _reset_for_test(request: pytest.FixtureRequest, name: str, fake: object) -> None:
    """What the fake holds from now on is the test's (its fixtures' requests included): strict mode
    judges it and a dump shows it (``testing.strict``), also when the test reaches it through
    another fixture's ``request.getfixturevalue`` (then it is none of the test's own arguments)."""
    request.node.stash.setdefault(strict.RESET_FOR_TEST, {})[id(fake)] = (name, fake)


@pytest.fixture(scope="session")
def _fake_lucy_server_session(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> LiveServer | SharedTenant:
    from fake_lucy.testing.fakes import LiveServer
    from fake_lucy.testing.shared import SharedTenant, server_admin_token

    closing = request.config.stash[_CLOSING]
    url = request.config.getoption("lucy_url")
    if url:
        prefix = request.config.getoption("lucy_tenant_label") or "pytest"
        label = f"{prefix}-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
        try:
            return closing.enter_context(SharedTenant.start(url, server_admin_token(), label=label))
        except SharedFakeError as exc:  # one line for each test that needs it, not the plugin's frames
            problem = str(exc)
        pytest.fail(f"--lucy-url: {problem}", pytrace=False)  # outside the except: no chained error
    return closing.enter_context(LiveServer.start(tmp_path_factory.mktemp("fake-lucy-server")))


@pytest.fixture
def fake_lucy_server(
    request: pytest.FixtureRequest, _fake_lucy_server_session: LiveServer | SharedTenant
) -> LiveServer | SharedTenant:
    """A real uvicorn server (one per session and worker), reset to its seeded state for this test;
    with ``--lucy-url``, this session's tenant of the shared fake, reset to its created state."""
    try:
        _fake_lucy_server_session.reset()
    except SharedFakeError as exc:  # the session's tenant is gone: one line, not the plugin's frames
        problem = str(exc)
    else:
        _reset_for_test(request, "fake_lucy_server", _fake_lucy_server_session)
        return _fake_lucy_server_session
    pytest.fail(f"--lucy-url: {problem}", pytrace=False)  # outside the except: no chained error


_T = TypeVar("_T")


def _sdk_transport(fake: InProcessFake | LiveServer | SharedTenant, make: Callable[[], _T]) -> _T:
    """``make()``, the SDK's transport to ``fake``; a URL the SDK refuses (``--lucy-url http://`` to
    another host: a token in cleartext) fails the test with one line instead of the SDK's traceback."""
    from lucy_memory import ConfigurationError, InsecureTransportError

    try:
        return make()
    except ConfigurationError as exc:  # InsecureTransportError among them
        problem = str(exc)
        way_out = (
            "give --lucy-url a loopback URL, or serve the shared fake over HTTPS"
            if isinstance(exc, InsecureTransportError)
            else "give --lucy-url the fake's own address (scheme, host and port)"
        )
    pytest.fail(  # outside the except: no chained error
        f"--lucy-url {fake.base_url}: the SDK and lucy-memory-mcp refuse it ({problem}): {way_out}",
        pytrace=False,
    )


def _dev_client(
    client_class: Callable[..., _Client],
    fake: InProcessFake | LiveServer | SharedTenant,
    http_transport: httpx.AsyncBaseTransport | None = None,
) -> _Client:
    """An SDK client of ``client_class`` on ``fake``: dev token, read and propose permissions, client
    name ``pytest``; ``http_transport`` is the in-process fake's (None: the network, with the
    process's one TLS context: building one per client cost each test ~30 ms). Each wait the client
    asks for moves the fake's clock by as much (``RecordedWaits``)."""
    import httpx

    from fake_lucy.testing.admin import FakeAdmin
    from fake_lucy.testing.tls import shared_tls_context
    from lucy_memory import create_lucy_http_transport

    if http_transport is None:
        http_transport = httpx.AsyncHTTPTransport(verify=shared_tls_context())

    async def advance(seconds: float) -> None:
        # a connection of its own per call: the sync client waits in an event loop of its own
        await FakeAdmin(client_factory=fake.admin_client).advance_clock(seconds)

    transport = _sdk_transport(
        fake,
        lambda: create_lucy_http_transport(
            base_url=fake.base_url, allow_insecure_loopback=True, http_transport=http_transport
        ),
    )
    return client_class(
        transport=transport,
        token=fake.dev_token,
        permissions=_permissions(),
        client_name="pytest",
        advance=advance,
    )


@pytest.fixture
async def lucy_client(fake_lucy: InProcessFake) -> AsyncIterator[RecordingAgentMemoryClient]:
    """An async SDK client on the in-process fake (``fake_lucy``): dev token, read and propose
    permissions; its waits are recorded in ``.waits`` and return at once."""
    # Imported here, not at the top: the plugin module stays cheap to import for every pytest run.
    from fake_lucy.testing.clients import RecordingAgentMemoryClient

    async with _dev_client(RecordingAgentMemoryClient, fake_lucy, fake_lucy.transport) as client:
        yield client


@pytest.fixture
async def lucy_server_client(
    fake_lucy_server: LiveServer | SharedTenant,
) -> AsyncIterator[RecordingAgentMemoryClient]:
    """An async SDK client on the real server (``fake_lucy_server``, the fake ``lucy_mcp`` uses): dev
    token, read and propose permissions; its waits are recorded in ``.waits`` and return at once."""
    from fake_lucy.testing.clients import RecordingAgentMemoryClient

    async with _dev_client(RecordingAgentMemoryClient, fake_lucy_server) as client:
        yield client


@pytest.fixture
def lucy_sync_client(fake_lucy_server: LiveServer | SharedTenant) -> Iterator[RecordingSyncAgentMemoryClient]:
    """A blocking SDK client (``SyncAgentMemoryClient``) on the real server (``fake_lucy_server``):
    dev token, read and propose permissions; its waits are recorded in ``.waits`` and return at once."""
    from fake_lucy.testing.clients import RecordingSyncAgentMemoryClient

    with _dev_client(RecordingSyncAgentMemoryClient, fake_lucy_server) as client:
        yield client


_TRUST_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR")


def lucy_mcp_parameters(
    server: LiveServer | SharedTenant, *, token: str, permissions: str, state_dir: Path | None = None
) -> StdioServerParameters:
    """How a host launches ``lucy-memory-mcp`` against ``server``: command and environment only.
    ``state_dir``: where it keeps the derived keys Lucy refused (a test's own folder, so that no
    test run meets another's; None: the user's state folder)."""
    from mcp import StdioServerParameters

    command = shutil.which("lucy-memory-mcp", path=str(Path(sys.executable).parent)) or shutil.which(
        "lucy-memory-mcp"
    )
    if command is None:
        raise RuntimeError("lucy-memory-mcp is not installed next to this Python")
    return StdioServerParameters(
        command=command,
        args=[],
        env={
            "LUCY_MEMORY_TOKEN": token,
            "LUCY_MEMORY_PERMISSIONS": permissions,
            "LUCY_MEMORY_BASE_URL": server.base_url,
            "LUCY_MEMORY_ALLOW_INSECURE_LOOPBACK": "1",
            **({} if state_dir is None else {"LUCY_MEMORY_STATE_DIR": str(state_dir)}),
            # the CA a shared fake's HTTPS certificate is trusted by (the MCP SDK passes on only a
            # few variables of its own choosing)
            **{name: os.environ[name] for name in _TRUST_VARIABLES if os.environ.get(name)},
        },
    )


@pytest.fixture
async def lucy_mcp(
    fake_lucy_server: LiveServer | SharedTenant, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Client]:
    """An MCP session to a real ``lucy-memory-mcp`` subprocess on ``fake_lucy_server``."""
    import httpx
    from mcp import Client
    from mcp.types import Implementation

    from fake_lucy.testing.tls import shared_tls_context
    from lucy_memory import create_lucy_http_transport

    # the server refuses what the SDK refuses (it is the SDK): said here in one line, not as the
    # session's "Connection closed" with the reason in the server's stderr (checked with the
    # process's one TLS context: a default one costs ~20 ms to build)
    checked = _sdk_transport(
        fake_lucy_server,
        lambda: create_lucy_http_transport(
            base_url=fake_lucy_server.base_url,
            allow_insecure_loopback=True,
            http_transport=httpx.AsyncHTTPTransport(verify=shared_tls_context()),
        ),
    )
    await checked.aclose()
    parameters = lucy_mcp_parameters(
        fake_lucy_server,
        token=fake_lucy_server.dev_token,
        permissions=",".join(_permissions()),
        state_dir=tmp_path_factory.mktemp("lucy-mcp-state"),  # refused keys: this test's alone
    )
    async with Client(parameters, client_info=Implementation(name="pytest", version="1")) as client:
        yield client
