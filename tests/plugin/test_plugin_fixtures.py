"""The SDK fixtures as a user meets them: which fake each runs on, and waits that cost no time."""

from __future__ import annotations

import json

import pytest
from mcp import Client

from fake_lucy.testing import (
    InProcessFake,
    LiveServer,
    RecordingAgentMemoryClient,
    RecordingSyncAgentMemoryClient,
)
from fake_lucy.testing.shared import SharedTenant
from lucy_memory import AgentMemoryClient, RateLimitedError, SyncAgentMemoryClient
from tests.helpers import V1, proxy_trap

PROPOSAL = json.dumps(
    {
        "kind": "rule",
        "content": "Never deploy on Fridays.",
        "scope": {"kind": "project", "id": "project_example"},
    }
)


@pytest.mark.anyio
async def test_what_lucy_server_client_proposes_lucy_mcp_recalls_from_the_same_fake(
    lucy_server_client: RecordingAgentMemoryClient, lucy_mcp: Client, fake_lucy_server: LiveServer
) -> None:
    proposed = await lucy_server_client.propose(PROPOSAL)
    await fake_lucy_server.admin.approve(proposed.proposal.id)
    result = await lucy_mcp.call_tool("memory_recall", {"query": "deploy fridays"})
    assert not result.is_error
    assert [m["content"] for m in result.structured_content["memories"]] == ["Never deploy on Fridays."]
    journal = await fake_lucy_server.admin.requests()
    assert [(row["operation"], row["credential_id"]) for row in journal] == [
        ("propose", "cred_dev_default"),
        ("recall", "cred_dev_default"),
    ]


@pytest.mark.anyio
async def test_lucy_client_runs_on_the_in_process_fake_and_not_on_the_server(
    lucy_client: RecordingAgentMemoryClient, fake_lucy: InProcessFake, fake_lucy_server: LiveServer
) -> None:
    assert isinstance(lucy_client, AgentMemoryClient)
    await lucy_client.propose(PROPOSAL)
    assert [row["operation"] for row in await fake_lucy.admin.requests()] == ["propose"]
    assert await fake_lucy_server.admin.requests() == []


@pytest.mark.anyio
async def test_a_retry_after_3_on_lucy_client_is_recorded_as_a_wait_and_not_slept(
    lucy_client: RecordingAgentMemoryClient, fake_lucy: InProcessFake
) -> None:
    await fake_lucy.admin.add_fault("propose", 429, retry_after=3)
    proposed = await lucy_client.propose(PROPOSAL)
    assert proposed.attempts == 2
    assert lucy_client.waits == [3.0]


@pytest.mark.anyio
async def test_lucy_server_client_records_its_waits_too(
    lucy_server_client: RecordingAgentMemoryClient, fake_lucy_server: LiveServer
) -> None:
    await fake_lucy_server.admin.add_fault("propose", 429, retry_after=3, count=3)
    with pytest.raises(RateLimitedError):
        await lucy_server_client.propose(PROPOSAL)  # two retries by default, then the third 429
    assert lucy_server_client.waits == [3.0, 3.0]


def test_lucy_sync_client_is_a_sync_client_on_the_server_that_records_waits(
    lucy_sync_client: RecordingSyncAgentMemoryClient, fake_lucy_server: LiveServer
) -> None:
    assert isinstance(lucy_sync_client, SyncAgentMemoryClient)
    fake_lucy_server.sync_admin.add_fault("propose", 503, retry_after=2)
    proposed = lucy_sync_client.propose(PROPOSAL)
    waited = lucy_sync_client.wait_for_decision(proposed.proposal.id, max_polls=3)
    assert waited.proposal.status == "pending"
    assert lucy_sync_client.waits == [2.0, 1.0, 2.0]  # the retry, then two pauses between polls
    assert [row["status"] for row in fake_lucy_server.sync_admin.requests(operation="propose")] == [503, 201]


def test_a_recording_client_refuses_a_sleep_of_its_own(fake_lucy_server: LiveServer) -> None:
    async def sleep(seconds: float) -> None:
        raise AssertionError("never called")

    with pytest.raises(TypeError):
        RecordingAgentMemoryClient(transport=None, token="t", permissions=["memory:read"], sleep=sleep)


@pytest.mark.anyio
async def test_the_fixtures_fakes_ignore_the_fake_lucy_environment_meant_for_a_served_fake(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CI job that sets FAKE_LUCY_ADMIN_TOKEN (for ``--lucy-url``), FAKE_LUCY_HOST=0.0.0.0 (as the
    compose service does) or FAKE_LUCY_SEED still gets working in-process and live fakes."""
    monkeypatch.setenv("FAKE_LUCY_ADMIN_TOKEN", "a-served-fakes-admin-token-0123456789")
    monkeypatch.setenv("FAKE_LUCY_HOST", "0.0.0.0")  # noqa: S104 - the variable's value, not a bind
    monkeypatch.setenv("FAKE_LUCY_SEED", str(tmp_path / "no-such-seed.json"))
    fake = InProcessFake(tmp_path / "in-process.sqlite3")
    assert (await fake.admin.reset())["reset"] is True
    async with fake.client() as client:
        assert (await client.post(V1 + "/recall", json={"query": "x"})).status_code == 200
    live_directory = tmp_path / "live"
    live_directory.mkdir()
    with LiveServer.start(live_directory) as live:
        assert live.reset() >= 0
        async with live.client() as client:
            assert (await client.post(V1 + "/recall", json={"query": "x"})).status_code == 200


def test_every_fake_names_the_dev_credential_as_a_shared_tenant_names_its_own(
    fake_lucy, fake_lucy_server
) -> None:
    """A suite written for ``--lucy-url`` (``fake_lucy_server.account`` and the like) runs on the
    plugin's own fakes too: there they name the dev seed's credential."""
    for fake in (fake_lucy, fake_lucy_server):
        assert (fake.tenant, fake.account, fake.credential_id, fake.user) == (
            "tenant_dev",
            "acct_dev",
            "cred_dev_default",
            "usr_dev",
        )


@pytest.mark.anyio
async def test_a_proxy_in_the_environment_never_sees_the_fixtures_admin_calls(
    fake_lucy_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plugin's own server and a shared fake on this machine are reached directly: a CI's
    HTTP_PROXY (without NO_PROXY) would see the admin tokens and cannot reach 127.0.0.1."""
    with proxy_trap() as (proxy, arrived):
        for variable in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            monkeypatch.setenv(variable, proxy)
        fake_lucy_server.reset()
        assert (await fake_lucy_server.admin.proposals())["items"] == []
        assert fake_lucy_server.sync_admin.proposals()["items"] == []
        async with fake_lucy_server.client() as http:
            assert (await http.post(V1 + "/recall", json={"query": "x"})).status_code == 200
        tenant = SharedTenant.create(fake_lucy_server.base_url, fake_lucy_server.admin_token)
        try:
            tenant.reset()
            assert (await tenant.admin.proposals())["items"] == []
        finally:
            tenant.delete()
    assert arrived == []
