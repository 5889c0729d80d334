"""Real processes only: the fake under uvicorn (``fake-lucy serve``, or an external one from
``LUCY_E2E_BASE_URL``), ``lucy-memory-mcp`` as a stdio subprocess configured exactly as a host
configures it (command and environment), and the official MCP client driving it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import Implementation

from fake_lucy.testing import FakeAdmin, ServeProcess
from fake_lucy.testing.tls import shared_tls_context

PROJECT = {"kind": "project", "id": "project_example"}
HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The whole e2e suite runs strict (``--lucy-strict``): the project's own MCP server and SDK
    must never produce a finding (SPEC 3.8)."""
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.lucy_strict)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class RunningFake:
    base_url: str
    admin_token: str

    def admin_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {self.admin_token}"},
            verify=shared_tls_context(),
        )

    @property
    def admin(self) -> FakeAdmin:
        return FakeAdmin(client_factory=self.admin_client)


@pytest.fixture(scope="session")
def running_fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningFake]:
    external = os.environ.get("LUCY_E2E_BASE_URL")
    if external:
        yield RunningFake(external, os.environ["LUCY_E2E_ADMIN_TOKEN"])
        return
    database = tmp_path_factory.mktemp("e2e") / "fake-lucy.sqlite3"
    with ServeProcess.start(["--database", str(database)]) as server:
        yield RunningFake(server.base_url, server.admin_token)


@pytest.fixture
async def fake(running_fake: RunningFake) -> RunningFake:
    """The fake, reset to its seeded state for this test."""
    await running_fake.admin.reset()
    return running_fake


def mcp_command() -> str:
    found = shutil.which("lucy-memory-mcp", path=str(Path(sys.executable).parent))
    assert found, "lucy-memory-mcp is installed next to this interpreter"
    return found


@dataclass
class Agent:
    """A host's configuration of lucy-memory-mcp: a credential, its permissions, a client name."""

    token: str
    permissions: str
    base_url: str
    account: str
    credential_id: str
    name: str = "e2e-host"
    extra_env: dict[str, str] = field(default_factory=dict)
    state_dir: str = ""  # the folder of the refused derived keys: the test's own (new_agent)

    def parameters(self) -> StdioServerParameters:
        env = {
            "LUCY_MEMORY_TOKEN": self.token,
            "LUCY_MEMORY_PERMISSIONS": self.permissions,
            "LUCY_MEMORY_BASE_URL": self.base_url,
            "LUCY_MEMORY_ALLOW_INSECURE_LOOPBACK": "1",
            **({"LUCY_MEMORY_STATE_DIR": self.state_dir} if self.state_dir else {}),
            **self.extra_env,
        }
        return StdioServerParameters(command=mcp_command(), args=[], env=env)

    @contextlib.asynccontextmanager
    async def session(self, mode: str = "legacy") -> AsyncIterator[Client]:
        async with Client(
            self.parameters(), mode=mode, client_info=Implementation(name=self.name, version="1.0")
        ) as client:
            yield client


@pytest.fixture
def new_agent(fake: RunningFake, tmp_path: Path) -> Callable[..., Any]:
    """``await new_agent(permissions=..., tenant=..., scopes=..., credits=...)`` → an Agent."""

    async def make(
        *,
        permissions: str = "memory:read,memory:propose",
        tenant: str = "tenant_dev",
        scopes: list[dict[str, str]] | None = None,
        credits: int = 1000,
        account: str | None = None,
    ) -> Agent:
        created = await fake.admin.create_credential(
            tenant,
            account=account,
            permissions=tuple(p.strip() for p in permissions.split(",")),
            scopes=scopes if scopes is not None else [PROJECT],
            credits=credits,
        )
        return Agent(
            token=created["token"],
            permissions=permissions,
            base_url=fake.base_url,
            account=created["account"],
            credential_id=created["credential_id"],
            state_dir=str(tmp_path / "lucy-mcp-state"),
        )

    return make
