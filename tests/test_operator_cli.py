"""Issue 14, must-hold 5: the operator CLI against a running fake (SPEC 3.11), and the server log."""

from __future__ import annotations

import concurrent.futures
import contextlib
import http.server
import io
import json
import os
import re
import socket
import stat
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fake_lucy import cli, operator_cli
from fake_lucy.app import create_app
from fake_lucy.domain.defaults import DEV_TOKEN
from fake_lucy.operator_cli import UsageError, parse_duration
from fake_lucy.runtime import FakeLucy
from fake_lucy.server_log import RequestLogger
from fake_lucy.settings import FakeLucySettings
from fake_lucy.testing import LiveServer, ServeProcess
from fake_lucy.testing.tls import shared_tls_context
from tests.helpers import V1, proposal_body, proxy_trap

pytestmark = pytest.mark.slow


def fake_lucy(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def propose(server: LiveServer, content: str = "We deploy on Tuesdays.") -> dict[str, Any]:
    response = httpx.post(
        server.base_url + V1 + "/proposals",
        json=proposal_body(content),
        headers={"Authorization": f"Bearer {server.dev_token}", "Idempotency-Key": uuid.uuid4().hex},
        verify=shared_tls_context(),
    )
    assert response.status_code == 201, response.text
    proposal: dict[str, Any] = response.json()["proposal"]
    return proposal


def control(server: LiveServer, method: str, path: str, **kwargs: Any) -> Any:
    response = httpx.request(
        method,
        server.base_url + "/_fake" + path,
        headers={"Authorization": f"Bearer {server.admin_token}"},
        verify=shared_tls_context(),
        **kwargs,
    )
    response.raise_for_status()
    return response.json() if response.content else None


@pytest.fixture
def url(live: LiveServer, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("FAKE_LUCY_URL", live.base_url)
    monkeypatch.delenv("FAKE_LUCY_ADMIN_TOKEN", raising=False)
    monkeypatch.delenv("FAKE_LUCY_ADMIN_TOKEN_FILE", raising=False)
    return live.base_url


def test_the_operator_options_may_come_before_the_command_and_the_commands_own_win(
    live: LiveServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``fake-lucy --url URL --json proposals``, as ``git -C DIR log``: the same as after it; given
    in both places, the command's own is taken. Before ``serve``, only ``--admin-token-file``."""
    monkeypatch.delenv("FAKE_LUCY_URL", raising=False)
    monkeypatch.delenv("FAKE_LUCY_ADMIN_TOKEN", raising=False)
    monkeypatch.delenv("FAKE_LUCY_ADMIN_TOKEN_FILE", raising=False)
    kept = propose(live, "Listed through options before the command.")
    token_file = tmp_path / "admin-token"
    token_file.write_text(live.admin_token)
    before = ("--url", live.base_url, "--admin-token-file", str(token_file), "--json")
    code, out, err = fake_lucy(capsys, *before, "proposals")
    assert (code, err) == (0, "")
    assert [item["id"] for item in json.loads(out)] == [kept["id"]]
    code, out, err = fake_lucy(capsys, "--url", "http://127.0.0.1:9", "proposals", "--url", live.base_url)
    assert (code, err) == (0, "")
    assert kept["id"] in out
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not-the-admin-token")
    code, _, err = fake_lucy(capsys, "--url", live.base_url, "--admin-token-file", str(wrong), "proposals")
    assert code == 1
    assert "401 unauthenticated" in err
    parser = cli._parser()
    for argv, taken in (
        (["--admin-token-file", str(token_file), "serve"], token_file),
        (["--admin-token-file", str(token_file), "serve", "--admin-token-file", str(wrong)], wrong),
    ):
        args = parser.parse_args(argv)
        operator_cli.take_global_options(args, parser)
        assert args.admin_token_file == taken
        assert not hasattr(args, "global_url")  # serve's settings get its options alone
    for option in (("--url", live.base_url), ("--json",)):
        with pytest.raises(SystemExit) as refused:
            cli.main([*option, "serve"])
        assert refused.value.code == 2
        assert capsys.readouterr().err == (
            f"fake-lucy: {option[0]}: an option of the operator commands, not of serve"
            " (see fake-lucy --help)\n"
        )


def test_proposals_lists_a_table_for_people_and_json_for_scripts(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    created = propose(live, "Zero\u200bwidth and \x1b[31mred")
    code, table, _ = fake_lucy(capsys, "proposals")
    assert code == 0
    header, row = table.splitlines()
    assert header.split() == ["ID", "STATUS", "TENANT", "KIND", "SCOPE", "TOPIC", "CREATED", "CONTENT"]
    assert row.startswith(created["id"])
    assert row.split()[1:3] == ["pending", "tenant_dev"]  # a server admin lists every tenant's
    assert "Zero⟨U+200B⟩width and ⟨U+001B⟩[31mred" in row
    code, out, _ = fake_lucy(capsys, "proposals", "--status", "pending", "--json")
    assert code == 0
    assert [p["id"] for p in json.loads(out)] == [created["id"]]
    code, out, _ = fake_lucy(capsys, "proposals", "--status", "approved", "--json")
    assert json.loads(out) == []


def test_a_listing_from_a_fake_older_than_the_tenant_field_shows_a_dash() -> None:
    from fake_lucy.operator_cli import _proposal_row

    item = {
        "id": "prop_x",
        "status": "pending",
        "kind": "fact",
        "scope": {"kind": "project", "id": "p"},
        "topic": None,
        "created_at": "2026-12-01T00:00:00Z",
        "content": "x",
    }
    assert _proposal_row(item)["TENANT"] == "–"


def test_approve_reject_and_expire_decide_and_the_control_api_confirms(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second, third = (propose(live, f"Fact {n}.") for n in range(3))
    code, out, _ = fake_lucy(capsys, "approve", first["id"])
    assert code == 0
    assert out.startswith(f"{first['id']} approved → mem_")
    code, out, _ = fake_lucy(capsys, "reject", second["id"], "--reason", "not a fact")
    assert (code, out.strip()) == (0, f"{second['id']} rejected")
    code, out, _ = fake_lucy(capsys, "expire", third["id"], "--json")
    assert json.loads(out)[0]["status"] == "expired"
    by_id = {p["id"]: p for p in control(live, "GET", "/proposals")["items"]}
    assert by_id[first["id"]]["status"] == "approved"
    assert by_id[second["id"]]["reason_detail"] == "not a fact"
    code, out, _ = fake_lucy(capsys, "memories")
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split()[:4] == ["ID", "V", "STATUS", "TENANT"]
    [row] = [row for row in rows if "Fact 0." in row]
    assert row.split()[2:4] == ["active", "tenant_dev"]


def _v1_propose(server: LiveServer, token: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(
        server.base_url + V1 + "/proposals",
        json=body,
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": uuid.uuid4().hex},
        verify=shared_tls_context(),
    )
    assert response.status_code == 201, response.text
    proposal: dict[str, Any] = response.json()["proposal"]
    return proposal


def test_memories_and_proposals_filter_by_tenant_and_memories_history_lists_every_version(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``memories --tenant T`` and ``proposals --tenant T`` list T's alone; ``memories --history``
    lists the replaced version beside the current one, which a plain ``memories`` does not."""
    other = control(live, "POST", "/tenants", json={"tenant": "tenant-cli"})
    theirs = _v1_propose(live, other["credential"]["token"], proposal_body("The other tenant's fact."))
    their_memory = control(live, "POST", f"/proposals/{theirs['id']}/approve")["proposal"]["memory"]
    their_pending = _v1_propose(live, other["credential"]["token"], proposal_body("Theirs, pending."))
    mine = propose(live, "We use PostgreSQL 15.")
    memory = control(live, "POST", f"/proposals/{mine['id']}/approve")["proposal"]["memory"]
    replacement = _v1_propose(
        live,
        live.dev_token,
        proposal_body("We use PostgreSQL 16.", replaces={"memory_id": memory["id"], "version": 1}),
    )
    control(live, "POST", f"/proposals/{replacement['id']}/approve")

    def listed(*argv: str) -> list[dict[str, Any]]:
        code, out, err = fake_lucy(capsys, *argv, "--json")
        assert (code, err) == (0, ""), argv
        items: list[dict[str, Any]] = json.loads(out)
        return items

    def versions(items: list[dict[str, Any]]) -> list[tuple[str, int, str, str]]:
        return sorted((m["id"], m["version"], m["status"], m["tenant"]) for m in items)

    assert versions(listed("memories")) == sorted(
        [(memory["id"], 2, "active", "tenant_dev"), (their_memory["id"], 1, "active", "tenant-cli")]
    )
    assert versions(listed("memories", "--history")) == sorted(
        [
            (memory["id"], 1, "superseded", "tenant_dev"),
            (memory["id"], 2, "active", "tenant_dev"),
            (their_memory["id"], 1, "active", "tenant-cli"),
        ]
    )
    assert versions(listed("memories", "--tenant", "tenant-cli")) == [
        (their_memory["id"], 1, "active", "tenant-cli")
    ]
    assert versions(listed("memories", "--tenant", "tenant_dev", "--history")) == [
        (memory["id"], 1, "superseded", "tenant_dev"),
        (memory["id"], 2, "active", "tenant_dev"),
    ]
    assert sorted(p["id"] for p in listed("proposals", "--tenant", "tenant-cli")) == sorted(
        [theirs["id"], their_pending["id"]]
    )
    assert {p["tenant"] for p in listed("proposals", "--tenant", "tenant_dev")} == {"tenant_dev"}
    code, table, _ = fake_lucy(capsys, "memories", "--history", "--tenant", "tenant_dev")
    assert code == 0
    header, *rows = table.splitlines()
    assert header.split()[:3] == ["ID", "V", "STATUS"]
    assert [row.split()[:3] for row in rows] == [
        [memory["id"], "1", "superseded"],
        [memory["id"], "2", "active"],
    ]


def test_the_admin_token_is_read_from_fake_lucy_admin_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake configured with its own admin token refuses the built-in one; the token in
    ``FAKE_LUCY_ADMIN_TOKEN`` is the one the commands send."""
    token = "operator-env-admin-token-" + uuid.uuid4().hex
    monkeypatch.delenv("FAKE_LUCY_ADMIN_TOKEN_FILE", raising=False)
    monkeypatch.delenv("FAKE_LUCY_ADMIN_TOKEN", raising=False)
    with LiveServer.start(tmp_path, admin_token=token) as server:
        monkeypatch.setenv("FAKE_LUCY_URL", server.base_url)
        created = propose(server, "Listed with the token from the environment.")
        code, _, err = fake_lucy(capsys, "proposals")  # no token given: the built-in one, refused
        assert code == 1
        assert "401 unauthenticated" in err
        monkeypatch.setenv("FAKE_LUCY_ADMIN_TOKEN", token)
        code, out, err = fake_lucy(capsys, "proposals", "--json")
        assert (code, err) == (0, "")
        assert [p["id"] for p in json.loads(out)] == [created["id"]]
        code, out, err = fake_lucy(capsys, "approve", created["id"])
        assert (code, err) == (0, "")
        assert out.startswith(f"{created['id']} approved → mem_")
    assert token not in out + err


def test_decisions_as_json_answer_for_every_id_given_in_its_order(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pending = propose(live, "Decided by a script.")
    unknown = "prop_AAAAAAAAAAAAAAAAAAAAAA"
    code, out, err = fake_lucy(capsys, "approve", unknown, pending["id"], "--json")
    assert code == 1  # one id refused: exit 1, and its line on stderr
    assert err.startswith(f"fake-lucy: {unknown}: ")
    refused, approved = json.loads(out)
    assert refused == {
        "id": unknown,
        "error": {"status": 404, "detail": err.removeprefix(f"fake-lucy: {unknown}: ").strip()},
    }
    assert (approved["id"], approved["status"]) == (pending["id"], "approved")


def test_an_unknown_id_a_wrong_token_or_no_server_is_one_line_and_exit_1(
    live: LiveServer,
    url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    code, out, err = fake_lucy(capsys, "approve", "prop_AAAAAAAAAAAAAAAAAAAAAA")
    assert (code, out) == (1, "")
    assert err == "fake-lucy: prop_AAAAAAAAAAAAAAAAAAAAAA: 404 not_found: no proposal has this id\n"
    token_file = tmp_path / "token"
    token_file.write_text("not-the-admin-token\n")
    code, _, err = fake_lucy(capsys, "proposals", "--admin-token-file", str(token_file))
    assert code == 1
    needs = "the control API needs the server admin token or a tenant admin token"
    assert err == f"fake-lucy: 401 unauthenticated: {needs}\n"
    assert "not-the-admin-token" not in err
    code, _, err = fake_lucy(capsys, "reset", "--url", "http://127.0.0.1:9")
    assert code == 1
    assert err == "fake-lucy: cannot reach http://127.0.0.1:9 (connection refused)\n"


def test_a_usage_or_configuration_error_is_exit_2(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["approve"])
    assert stopped.value.code == 2
    assert "the following arguments are required: ID" in capsys.readouterr().err
    assert usage(capsys, "clock", "advance", "soon") == (
        "fake-lucy clock advance: argument duration: 'soon' is not a duration (like 90s, 15m, 2h, 7d)"
        " (see fake-lucy clock advance --help)\n"
    )
    code, _, err = fake_lucy(capsys, "proposals", "--url", "http://lucy.example.com:8787")
    assert (code, err) == (2, "fake-lucy: no admin token: set FAKE_LUCY_ADMIN_TOKEN or --admin-token-file\n")
    code, _, err = fake_lucy(capsys, "proposals", "--url", "ftp://127.0.0.1")
    assert code == 2


def usage(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """What a usage error prints (argparse exits 2 from inside the parser)."""
    with pytest.raises(SystemExit) as stopped:
        cli.main(list(argv))
    assert stopped.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    return err


@pytest.mark.parametrize("command", ["serve", "proposals", "tenants list", "before proposals"])
def test_an_admin_token_on_the_command_line_is_refused_without_echoing_it(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """``--admin-token`` is no prefix of ``--admin-token-file`` (options are never abbreviated), and
    its value is never repeated, before the command or after it: it would stand in CI logs."""
    secret = "my-Secret-Admin-Token-123"
    for given in (["--admin-token", secret], [f"--admin-token={secret}"]):
        argv = [*given, "proposals"] if command.startswith("before") else [*command.split(), *given]
        err = usage(capsys, *argv)
        assert "my-Secret" not in err
        assert "never taken from the command line" in err
        assert "--admin-token-file FILE or FAKE_LUCY_ADMIN_TOKEN" in err
        assert err.count("\n") == 1


@pytest.mark.parametrize("command", ["serve", "proposals"])
def test_a_mistyped_admin_token_option_is_unrecognized_without_echoing_its_value(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    secret = "my-Secret-Admin-Token-123"
    for given, shown in (
        (["--admin-tok", secret], "--admin-tok …"),
        ([f"--admin={secret}"], "--admin=…"),
        (["--token", secret, "--bogus"], "--token … --bogus"),
    ):
        err = usage(capsys, command, *given)
        assert "my-Secret" not in err
        assert f"unrecognized arguments: {shown}" in err


def test_an_empty_admin_token_variable_is_a_usage_error_as_serve_says(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LUCY_ADMIN_TOKEN", " ")
    code, out, err = fake_lucy(capsys, "proposals")
    assert (code, out, err) == (2, "", "fake-lucy: FAKE_LUCY_ADMIN_TOKEN is set but empty\n")


def test_an_empty_url_is_a_usage_error_not_the_default(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty FAKE_LUCY_URL (a CI variable that was never filled in) or --url "" went to the
    default address, and was reported as that address not answering."""
    monkeypatch.setenv("FAKE_LUCY_URL", "")
    assert fake_lucy(capsys, "clock") == (2, "", "fake-lucy: FAKE_LUCY_URL is set but empty\n")
    assert fake_lucy(capsys, "clock", "--url", " ") == (2, "", "fake-lucy: --url is empty\n")
    code, _, err = fake_lucy(capsys, "clock", "--url", live.base_url)  # the option wins over it
    assert (code, err) == (0, "")


def test_a_value_the_fake_refuses_is_named_by_its_option_or_argument(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lower bounds are the CLI's own (exit 2); the upper ones, the patterns and what the fake's
    state decides are the fake's 422 (an API error: exit 1), worded in the command line's terms,
    and nothing changed."""
    before = control(live, "PUT", "/clock", json={"frozen": True})
    cases = {
        ("clock", "advance", "99999999d"): "DURATION (in seconds): must be at most 315360000",
        ("requests", "--limit", "100000"): "--limit: must be an integer from 1 to 10000",
        ("faults", "add", "propose", "503", "--delay-ms", "999999999"): "--delay-ms: must be at most 60000",
        ("faults", "add", "propose", "503", "--credential-id", "cred_" + "A" * 22): "--credential-id: ",
        ("tenants", "create", "--tenant", "bad id!"): "--tenant: must match the pattern ",
        ("tenants", "delete", "bad id!"): "TENANT: must match the pattern ",
        (
            "reject",
            "prop_" + "A" * 22,
            "--reason",
            "x" * 5000,
        ): "prop_AAAAAAAAAAAAAAAAAAAAAA: --reason: must be at most",
        (
            "reject",
            "prop_" + "A" * 22,
            "--reason",
            "the key is AKIAIOSFODNN7EXAMPLE",
        ): "prop_AAAAAAAAAAAAAAAAAAAAAA: --reason: holds secret-looking text (aws_access_key_id)",
        ("approve", "prop_x"): "prop_x: ID: must match the pattern ",
        ("proposals", "--tenant", "bad!"): "--tenant: must match the pattern ",
        ("memories", "--tenant", "a tenant"): "--tenant: must match the pattern ",
    }
    for argv, said in cases.items():
        code, out, err = fake_lucy(capsys, *argv)
        assert (code, out) == (1, ""), argv
        assert err.startswith(f"fake-lucy: {said}"), err
        assert err.endswith(" (422 invalid_request)\n"), err
        assert err.count("\n") == 1
    # an id with a / would reach the fake as two path segments (404, no route): refused before, alike
    for argv, said in {
        ("tenants", "delete", "a/b"): "TENANT: must match the pattern ",
        ("approve", "prop_a/b"): "prop_a/b: ID: must match the pattern ",
    }.items():
        code, out, err = fake_lucy(capsys, *argv)
        assert (code, out) == (1, ""), argv
        assert err.startswith(f"fake-lucy: {said}"), err
        assert err.endswith(" (422 invalid_request)\n"), err
        assert err.count("\n") == 1
    code, out, _ = fake_lucy(capsys, "approve", "--json", "prop_a/b")
    [refused] = json.loads(out)
    assert refused["error"]["status"] == 422  # as the fake's answer to any other bad id
    assert control(live, "GET", "/clock") == before
    assert control(live, "GET", "/faults")["items"] == []
    assert [t["tenant"] for t in control(live, "GET", "/tenants")["items"]] == ["tenant_dev"]


def test_every_usage_error_is_one_line_naming_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    cases = {
        ("faults", "add", "propose", "200"): "fake-lucy faults add: argument status: invalid choice: 200",
        ("findings", "--code", "bogus_code"): "fake-lucy findings: argument --code: invalid choice",
        ("clock", "advance", "-1h"): "fake-lucy clock advance: a duration is never negative",
        ("proposals", "--limit", "-3"): "fake-lucy proposals: argument --limit: must be at least 1",
        ("memories", "--limit", "0"): "fake-lucy memories: argument --limit: must be at least 1",
        ("requests", "--limit", "x"): "fake-lucy requests: argument --limit: 'x' is not a whole number",
        ("proposals", "--stat", "pending"): "fake-lucy proposals: unrecognized arguments: --stat pending"
        " (see fake-lucy proposals --help)",
        (
            "serve",
            "--prot",
            "1",
        ): "fake-lucy serve: unrecognized arguments: --prot 1 (see fake-lucy serve --help)",
        ("clock", "advance", "2h", "--nope"): "fake-lucy clock advance: unrecognized arguments: --nope",
        ("--bogus", "proposals"): "fake-lucy: unrecognized arguments: --bogus (see fake-lucy --help)",
        (
            "tenants",
            "--x",
            "list",
        ): "fake-lucy tenants: unrecognized arguments: --x (see fake-lucy tenants --help)",
        ("approve", ""): "fake-lucy approve: argument ID: an id is not empty",
        ("tenants", "delete", ""): "fake-lucy tenants delete: argument tenant: an id is not empty",
        (
            "faults",
            "add",
            "recall",
            "503",
            "--count",
            "0",
        ): "fake-lucy faults add: argument --count: must be at least 1",
        (
            "tenants",
            "create",
            "--credits=-5",
        ): "fake-lucy tenants create: argument --credits: must not be negative",
        ("tenants", "prune", "--older-than", "-1h"): "fake-lucy tenants prune: argument --older-than:"
        " expected one argument (-1h reads as an option: durations, counts and balances are never negative)",
    }
    for argv, start in cases.items():
        err = usage(capsys, *argv)
        assert err.startswith(start), err
        assert err.count("\n") == 1, err
        assert err.rstrip().endswith("--help)"), err


def test_a_token_no_header_can_carry_or_a_broken_url_is_one_line_and_exit_2(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    two_lines = tmp_path / "token"
    two_lines.write_text("Secret-Admin-Token-0123456789\n second-line\n")
    code, _, err = fake_lucy(capsys, "proposals", "--admin-token-file", str(two_lines))
    rule = "must be 1 to 4096 printable ASCII characters without spaces"
    assert (code, err) == (2, f"fake-lucy: the admin token file {rule}\n")
    monkeypatch.setenv("FAKE_LUCY_ADMIN_TOKEN", "p\u00e4ssword-secret-0123456789")
    code, _, err = fake_lucy(capsys, "proposals")
    assert (code, err) == (2, f"fake-lucy: FAKE_LUCY_ADMIN_TOKEN {rule}\n")
    monkeypatch.delenv("FAKE_LUCY_ADMIN_TOKEN")
    absent = tmp_path / "no-such-token"
    code, _, err = fake_lucy(capsys, "proposals", "--admin-token-file", str(absent))
    assert (code, err) == (
        2,
        f"fake-lucy: cannot read the admin token file {absent} (No such file or directory)\n",
    )
    for broken in ("http://[::1", "http://a..b", "http://127.0.0.1:99999"):
        code, _, err = fake_lucy(capsys, "proposals", "--url", broken)
        assert (code, err) == (2, f"fake-lucy: {broken!r} is not an http(s) URL of a running fake\n")
    # the v1 API's address (what an MCP host is given) is not the fake's own: said, not a 404
    for given in ("http://127.0.0.1:8787", "https://ci.example/lucy"):
        for tail in ("/", "", "#part", "?"):
            code, _, err = fake_lucy(capsys, "proposals", "--url", f"{given}/api/agent-memory/v1{tail}")
            assert code == 2
            assert err.endswith(
                f" is the address of the fake's v1 API; the operator commands need the fake's own: {given}\n"
            )
    # the control API's address, a query or a fragment, white space around it: said, not a 404
    for given, said in (
        ("http://127.0.0.1:8787/_fake", "is the address of the fake's control API; the operator commands"),
        ("http://127.0.0.1:8787?x=1", "holds a query or a fragment; the fake's address is"),
        ("http://127.0.0.1:8787/#top", "holds a query or a fragment; the fake's address is"),
        (" http://127.0.0.1:8787", "has white space around it"),
        ("http://127.0.0.1:8787 ", "has white space around it"),
        ("http://127.0.0.1:8787/?token=s3cr3t-in-query", "holds a query or a fragment"),
        ("http://127.0.0.1:8787/#s3cr3t-in-fragment", "holds a query or a fragment"),
        ("ftp://127.0.0.1/?token=s3cr3t-in-query", "is not an http(s) URL"),
        ("http://127.0.0.1:8787/_fake?token=s3cr3t-in-query", "is the address of the fake's control API"),
    ):
        code, _, err = fake_lucy(capsys, "proposals", "--url", given)
        assert code == 2, given
        assert said in err, given
        assert len(err.splitlines()) == 1
        assert "s3cr3t" not in err  # a query or fragment may carry a secret: never repeated


def test_a_request_sent_but_never_answered_is_no_answer_not_cannot_reach(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change that was sent may have been done: the error says so, and does not claim the fake
    could not be reached."""
    with proxy_trap() as (silent, arrived):  # reads the request, closes the connection unanswered
        monkeypatch.setenv("FAKE_LUCY_URL", silent)
        listed = fake_lucy(capsys, "proposals")
        approved = fake_lucy(capsys, "approve", "prop_x")
    assert len(arrived) == 2
    for code, out, err in (listed, approved):
        assert (code, out) == (1, "")
        assert err.startswith("fake-lucy: ")
        assert f"no answer from {silent} (Server disconnected" in err
        assert len(err.splitlines()) == 1
        assert "cannot reach" not in err
    assert not listed[2].rstrip().endswith("may have been done")
    assert approved[2].rstrip().endswith("; what was sent may have been done")


def test_faults_add_gives_drop_connection_and_hold_ms_the_one_phase_they_go_with(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = fake_lucy(capsys, "faults", "add", "propose", "503", "--drop-connection", "--json")
    assert (code, err) == (0, "")
    code, _, err = fake_lucy(capsys, "faults", "add", "propose", "503", "--hold-ms", "100", "--json")
    assert (code, err) == (0, "")
    dropped, held = control(live, "GET", "/faults")["items"]
    assert (dropped["phase"], dropped["drop_connection"]) == ("after_commit", True)
    assert (held["phase"], held["hold_ms"]) == ("in_flight", 100)
    for argv, said in (
        (("--drop-connection", "--phase", "before"), "--drop-connection goes with --phase after_commit"),
        (("--hold-ms", "5", "--phase", "after_commit"), "--hold-ms goes with --phase in_flight"),
        (("--drop-connection", "--hold-ms", "5"), "--drop-connection (phase after_commit) and --hold-ms"),
    ):
        code, out, err = fake_lucy(capsys, "faults", "add", "propose", "503", *argv)
        assert (code, out) == (2, "")
        assert err.startswith(f"fake-lucy: {said}"), err
    assert len(control(live, "GET", "/faults")["items"]) == 2  # none of those was armed


def test_clock_faults_and_reset_steer_the_running_fake(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = control(live, "GET", "/clock")
    code, out, _ = fake_lucy(capsys, "clock", "freeze", "--json")
    assert json.loads(out)["frozen"] is True
    code, out, _ = fake_lucy(capsys, "clock", "advance", "2h", "--json")
    advanced = json.loads(out)
    assert code == 0
    assert control(live, "GET", "/clock") == advanced
    assert advanced["now"] > before["now"]
    code, out, _ = fake_lucy(capsys, "clock", "unfreeze")
    assert code == 0
    assert "frozen" not in out
    assert control(live, "GET", "/clock")["frozen"] is False
    code, _, err = fake_lucy(capsys, "clock", "set", "2020-01-01")
    assert code == 1
    assert "409 clock_regression" in err
    code, out, _ = fake_lucy(capsys, "faults", "add", "propose", "503", "--count", "2")
    assert code == 0
    assert out.endswith("armed (2 left)\n")
    (fault,) = control(live, "GET", "/faults")["items"]
    assert (fault["operation"], fault["status"], fault["remaining"]) == ("propose", 503, 2)
    code, out, _ = fake_lucy(capsys, "faults")
    assert fault["fault_id"] in out
    propose_refused = httpx.post(
        live.base_url + V1 + "/proposals",
        json=proposal_body(),
        headers={"Authorization": f"Bearer {live.dev_token}", "Idempotency-Key": "k1"},
    )
    assert propose_refused.status_code == 503
    assert fake_lucy(capsys, "faults", "clear")[0] == 0
    assert control(live, "GET", "/faults")["items"] == []
    propose(live)
    code, out, _ = fake_lucy(capsys, "reset")
    assert code == 0
    assert out.startswith("reset (")
    assert control(live, "GET", "/proposals")["items"] == []


def test_durations_read_like_people_write_them() -> None:
    assert parse_duration("90s") == 90
    assert parse_duration("2h") == 7200
    assert parse_duration("7d") == 604_800
    assert parse_duration("1h30m") == 5400
    assert parse_duration("45") == 45
    assert parse_duration("0") == 0
    assert parse_duration(" 1.5H ") == 5400
    unreadable = ("1_000", "1e3", "\u0663", "\u0663s", "5 d", "1h-30m", ".5s")  # \u0663: Arabic-Indic 3
    for bad in ("2x", "h", "1h 30m", "", "nan", "inf", "-1", "-1h", "1e400", "9" * 400 + "d", *unreadable):
        with pytest.raises(UsageError):
            parse_duration(bad)


# What only ``fake-lucy serve`` needs: an operator command, which talks HTTP to a running fake, starts
# without it (each of these costs a process tens to hundreds of milliseconds of CPU to import).
SERVER_SIDE = (
    "fastapi",
    "starlette",
    "uvicorn",
    "sqlalchemy",
    "sqlmodel",
    "pydantic_settings",
    "jinja2",
    "fake_lucy.serve",
    "fake_lucy.app",
    "fake_lucy.runtime",
    "fake_lucy.settings",
    "fake_lucy.http",
    "fake_lucy.store.connection",
    "fake_lucy.domain.lifecycle",
)


def test_an_operator_command_runs_without_importing_the_server(
    live: LiveServer, url: str, tmp_path: Path
) -> None:
    proposal = propose(live)  # listed by the command: a table of one row
    script = (
        "import json, sys\n"
        f"server_side = {list(SERVER_SIDE)!r}\n"
        "from fake_lucy.cli import main\n"
        "code = main(['proposals'])\n"
        "print(json.dumps([code, [m for m in server_side if m in sys.modules]]))\n"
        "import fake_lucy.serve\n"  # what serve imports, for contrast
        "print(json.dumps([m for m in server_side if m in sys.modules]))\n"
    )
    result = subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    *table, command, serving = result.stdout.splitlines()
    assert proposal["id"] in "\n".join(table)
    assert json.loads(command) == [0, []]
    assert set(json.loads(serving)) >= {"fastapi", "uvicorn", "fake_lucy.app", "fake_lucy.runtime"}


class _Lines(io.StringIO):
    """An output a test can wait on: ``wait_for(text)`` returns once ``text`` has been written."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = threading.Condition()

    def write(self, text: str) -> int:
        with self.changed:
            written = super().write(text)
            self.changed.notify_all()
        return written

    def wait_for(self, text: str, timeout: float = 5) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: text in self.getvalue(), timeout)


def test_requests_json_is_a_list_as_every_other_json_listing(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    propose(live)
    code, out, _ = fake_lucy(capsys, "requests", "--json")
    assert code == 0
    [row] = json.loads(out)
    assert (row["operation"], row["status"]) == ("propose", 201)


def test_requests_follow_prints_new_requests_as_they_arrive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FAKE_LUCY_ADMIN_TOKEN", raising=False)
    with LiveServer.start(tmp_path) as server:
        propose(server)  # before: in the listing
        parser = cli._parser()
        args = parser.parse_args(["requests", "--follow", "--json", "--url", server.base_url])
        out = _Lines()
        err = io.StringIO()
        codes: list[int] = []
        follower = threading.Thread(target=lambda: codes.append(cli.operator_cli.run(args, out, err)))
        follower.start()
        try:
            assert out.wait_for('"operation": "propose"'), "the listing (the stream is open by then)"
            response = httpx.post(
                server.base_url + V1 + "/recall",
                json={"query": "tuesday"},
                headers={"Authorization": f"Bearer {server.dev_token}"},
            )
            assert response.status_code == 200
            assert out.wait_for('"operation": "recall"'), out.getvalue()
        finally:
            server.stop()  # ends the stream, and so the command
            follower.join(10)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["operation"] for line in lines] == ["propose", "recall"]
    assert lines[1]["request_id"] == response.headers["Lucy-Request-Id"]
    assert codes == [0]  # as ``docker logs -f`` ends when its container stops, but not in silence:
    assert err.getvalue() == (
        f"fake-lucy: the fake at {server.base_url} ended the event stream"
        " (it stopped, or this admin token's tenant is gone)\n"
    )


def test_serve_logs_one_line_per_v1_request_without_tokens_or_bodies_and_prints_a_console_link(
    tmp_path: Path,
) -> None:
    database = tmp_path / "logged.sqlite3"
    with ServeProcess.start(["--database", str(database)], env={"FAKE_LUCY_QUIET": "false"}) as server:
        headers = {"Authorization": f"Bearer {server.dev_token}", "Idempotency-Key": "key-0123456789abcdef"}
        body = proposal_body("A body that never reaches the log.")
        assert httpx.post(server.base_url + V1 + "/proposals", json=body, headers=headers).status_code == 201
        assert httpx.post(server.base_url + V1 + "/recall", json={"query": "x"}).status_code == 401
        out, err = server.stop()
    link = next(line for line in out.splitlines() if line.strip().startswith("console:"))
    assert f"{server.base_url}/_fake/console/login/" in link
    lines = [line for line in err.splitlines() if " propose " in line or " recall " in line]
    assert len(lines) == 2, err
    assert " propose " in lines[0]
    assert " 201 " in lines[0]
    assert "1 credit" in lines[0]
    assert "key key-0123…" in lines[0]
    assert "cred_dev_default" in lines[0]
    assert " 401 " in lines[1]
    for secret in (server.dev_token, server.admin_token, "never reaches the log", "key-0123456789abcdef"):
        assert secret not in err


def test_the_printed_console_link_logs_in_once(tmp_path: Path) -> None:
    with ServeProcess.start(["--database", str(tmp_path / "link.sqlite3")]) as server:
        banner = b""
        assert server.process.stdout is not None
        while b"console:" not in banner:
            banner += server.process.stdout.readline().encode()
        link = banner.decode().split("console:", 1)[1].split()[0]
        with httpx.Client() as browser:
            first = browser.get(link)
            assert first.status_code == 200
            assert browser.get(server.base_url + "/_fake/console/").status_code == 200
        assert httpx.get(link).status_code == 403


def test_quiet_serve_logs_no_requests(tmp_path: Path) -> None:
    with ServeProcess.start(["--database", str(tmp_path / "quiet.sqlite3"), "--quiet"]) as server:
        response = httpx.post(
            server.base_url + V1 + "/recall",
            json={"query": "x"},
            headers={"Authorization": f"Bearer {server.dev_token}"},
        )
        assert response.status_code == 200
        _, err = server.stop()
    assert " recall " not in err


def recall(server: LiveServer, token: str, **headers: str) -> httpx.Response:
    return httpx.post(
        server.base_url + V1 + "/recall",
        json={"query": "tuesday"},
        headers={"Authorization": f"Bearer {token}", **headers},
        verify=shared_tls_context(),
    )


def test_findings_lists_a_retried_recall_as_a_table_and_as_json(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = fake_lucy(capsys, "findings")
    assert (code, out) == (0, "no findings\n")
    assert recall(live, live.dev_token, **{"Lucy-Retry-Attempt": "1"}).status_code == 200
    code, table, _ = fake_lucy(capsys, "findings")
    assert code == 0
    header, row = table.splitlines()
    assert header.split() == ["FINDING", "AT", "CODE", "CREDENTIAL", "REQUESTS", "DETAIL"]
    (finding,) = control(live, "GET", "/findings")["items"]
    assert row.startswith(finding["finding_id"])
    assert " recall_retried " in row
    assert " cred_dev_default " in row
    assert "Lucy-Retry-Attempt: 1" in row
    code, out, _ = fake_lucy(capsys, "findings", "--code", "recall_retried", "--json")
    assert (code, json.loads(out)) == (0, [finding])
    code, out, _ = fake_lucy(capsys, "findings", "--credential", "cred_AAAAAAAAAAAAAAAAAAAAAA", "--json")
    assert (code, json.loads(out)) == (0, [])
    for option in ("--credential-id", "--credential"):  # the name faults add uses too, and the short one
        code, out, _ = fake_lucy(capsys, "findings", option, "cred_dev_default", "--json")
        assert (code, json.loads(out)) == (0, [finding])
    code, out, _ = fake_lucy(capsys, "findings", "--code", "status_retried", "--json")
    assert (code, json.loads(out)) == (0, [])


def test_tenants_create_prints_a_credential_token_that_recalls_and_delete_makes_it_401(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = f"cli-{uuid.uuid4().hex[:8]}"
    code, out, err = fake_lucy(capsys, "tenants", "create", "--tenant", tenant, "--credits", "5")
    assert (code, err) == (0, "")
    lines = dict(line.split(None, 1) for line in out.replace(" token", "_token").splitlines()[:7])
    assert lines["tenant"] == tenant
    token = lines["credential_token"]
    assert lines["admin_token"] != token
    answer = recall(live, token)
    assert answer.status_code == 200, answer.text
    assert answer.headers["Lucy-Credits-Remaining"] == "4"  # the --credits it was created with
    code, out, _ = fake_lucy(capsys, "tenants", "create", "--json")
    created = json.loads(out)
    assert code == 0
    assert recall(live, created["credential"]["token"]).status_code == 200
    code, out, _ = fake_lucy(capsys, "tenants", "delete", tenant)
    assert (code, out) == (0, f"tenant {tenant} deleted\n")
    assert recall(live, token).status_code == 401
    assert recall(live, created["credential"]["token"]).status_code == 200
    code, out, err = fake_lucy(capsys, "tenants", "delete", tenant)
    assert (code, out, len(err.splitlines())) == (1, "", 1)
    assert "404" in err


def test_tenants_list_shows_each_tenant_and_prune_deletes_only_old_session_tenants(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    control(live, "PUT", "/clock", json={"now": "2030-01-15T09:00:00Z", "frozen": True})
    control(live, "POST", "/tenants", json={"tenant": "ci-old-1"})
    control(live, "POST", "/tenants", json={"tenant": "other-old"})
    control(live, "POST", "/clock/advance", json={"seconds": 3 * 3600})
    control(live, "POST", "/tenants", json={"tenant": "ci-new"})
    control(
        live,
        "POST",
        "/credentials",
        json={"tenant": "first-use", "permissions": ["memory:read"], "scopes": []},
    )
    code, out, err = fake_lucy(capsys, "tenants", "list")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["TENANT", "CREATED", "ADMIN", "CREDENTIALS", "MEMORIES", "PENDING"]
    assert [line.split()[0] for line in lines[1:]] == [
        "tenant_dev",
        "ci-old-1",
        "other-old",
        "ci-new",
        "first-use",
    ]
    assert lines[2].split() == ["ci-old-1", "2030-01-15", "09:00:00", "yes", "1", "0", "0"]
    code, out, _ = fake_lucy(capsys, "tenants", "list", "--older-than", "2h", "--json")
    # the seed's tenant was made at the test's reset, 3 h ago too; first-use was made just now
    assert [t["tenant"] for t in json.loads(out)] == ["tenant_dev", "ci-old-1", "other-old"]
    code, out, _ = fake_lucy(capsys, "tenants", "prune", "--older-than", "2h", "--prefix", "ci-", "--dry-run")
    assert (code, out.splitlines()[-1]) == (0, "1 tenant would be deleted")
    assert len(control(live, "GET", "/tenants")["items"]) == 5
    code, out, err = fake_lucy(capsys, "tenants", "prune", "--older-than", "2h", "--json")
    assert (code, err) == (0, "")
    # made by POST /_fake/tenants and older than 2 h: never the seed's tenant
    assert json.loads(out) == {"dry_run": False, "deleted": ["ci-old-1", "other-old"]}
    left = [t["tenant"] for t in control(live, "GET", "/tenants")["items"]]
    assert left == ["tenant_dev", "ci-new", "first-use"]
    code, out, _ = fake_lucy(capsys, "tenants", "prune", "--older-than", "2h")
    assert (code, out) == (0, "0 tenants deleted\n")
    with pytest.raises(SystemExit) as stopped:
        cli.main(["tenants", "prune"])
    assert stopped.value.code == 2
    assert "the following arguments are required: --older-than" in capsys.readouterr().err
    assert usage(capsys, "tenants", "list", "--older-than", "a while") == (
        "fake-lucy tenants list: argument --older-than: 'a while' is not a duration (like 90s, 15m, 2h, 7d)"
        " (see fake-lucy tenants list --help)\n"
    )


def test_tenants_named_with_dots_only_are_deleted_and_pruned_as_named(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``.`` and ``..`` are valid tenant ids; sent as a path unencoded, they would be dot segments."""
    control(live, "PUT", "/clock", json={"now": "2030-01-15T09:00:00Z", "frozen": True})
    for name in ("..", ".", "..."):
        control(live, "POST", "/tenants", json={"tenant": name})
    code, out, err = fake_lucy(capsys, "tenants", "delete", "..")
    assert (code, out, err) == (0, "tenant .. deleted\n", "")
    control(live, "POST", "/clock/advance", json={"seconds": 3600})
    code, out, err = fake_lucy(capsys, "tenants", "prune", "--older-than", "10m", "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == {"dry_run": False, "deleted": [".", "..."]}
    assert [t["tenant"] for t in control(live, "GET", "/tenants")["items"]] == ["tenant_dev"]


def test_snapshot_export_then_import_restores_the_state(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kept = propose(live, "Kept in the snapshot.")
    state = tmp_path / "state" / "fake.json"
    code, out, err = fake_lucy(capsys, "snapshot", "export", str(state), "--include-journal")
    assert (code, err) == (0, "")
    assert out.startswith(f"{state} written (")
    assert [p.name for p in state.parent.iterdir()] == ["fake.json"]  # no temporary file left
    document = json.loads(state.read_bytes())
    (dev,) = document["tenants"]
    assert [p["id"] for p in dev["proposals"]] == [kept["id"]]
    assert [row["operation"] for row in dev["journal"]] == ["propose"]  # --include-journal
    assert fake_lucy(capsys, "approve", kept["id"])[0] == 0
    later = propose(live, "Not in the snapshot.")
    code, out, err = fake_lucy(capsys, "snapshot", "import", str(state))
    assert (code, out, err) == (0, f"{state} imported\n", "")
    proposals = control(live, "GET", "/proposals")["items"]
    assert [(p["id"], p["status"]) for p in proposals] == [(kept["id"], "pending")]
    assert later["id"] not in {p["id"] for p in proposals}
    assert control(live, "GET", "/memories")["items"] == []


def test_snapshot_export_and_import_take_a_dash_for_the_standard_streams(
    live: LiveServer,
    url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """``-`` is standard output for export (the report on stderr) and standard input for import,
    as most tools read it, never a file named ``-``."""
    monkeypatch.chdir(tmp_path)
    kept = propose(live, "Kept in the snapshot.")
    code, out, err = fake_lucy(capsys, "snapshot", "export", "-")
    assert code == 0
    assert err.startswith("standard output written (")
    assert [p["id"] for t in json.loads(out)["tenants"] for p in t["proposals"]] == [kept["id"]]
    assert list(tmp_path.iterdir()) == []
    later = propose(live, "Not in the snapshot.")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(out.encode("utf-8"))))
    code, imported, err = fake_lucy(capsys, "snapshot", "import", "-")
    assert (code, imported, err) == (0, "standard input imported\n", "")
    assert [p["id"] for p in control(live, "GET", "/proposals")["items"]] == [kept["id"]]
    assert later["id"] != kept["id"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"not json")))
    code, _, err = fake_lucy(capsys, "snapshot", "import", "-")
    assert code == 2
    assert err.startswith("fake-lucy: standard input is not a JSON object (")
    monkeypatch.setattr(sys, "stdout", None)  # started with >&-: the interpreter has no stdout
    code = cli.main(["snapshot", "export", "-"])
    assert (code, capsys.readouterr().err) == (
        2,
        "fake-lucy: standard output is closed: give snapshot export a file to write\n",
    )


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy"])
def test_a_proxy_in_the_environment_never_sees_a_loopback_fakes_admin_token(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, variable
) -> None:
    with proxy_trap() as (proxy, arrived):
        monkeypatch.setenv(variable, proxy)
        code, out, err = fake_lucy(capsys, "proposals", "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == []
    assert arrived == []


def test_snapshot_export_into_a_pipe_writes_the_snapshot_there_and_reports_on_stderr(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A pipe (``/dev/stdout`` read by ``jq``, a FIFO) gets the snapshot alone, and stays a pipe;
    a link is followed: the file it names is replaced, the link stays."""
    fifo = tmp_path / "state.fifo"
    os.mkfifo(fifo)
    with concurrent.futures.ThreadPoolExecutor(1) as reader:
        read = reader.submit(fifo.read_bytes)
        code, out, err = fake_lucy(capsys, "snapshot", "export", str(fifo))
        document = json.loads(read.result(timeout=30))
    assert (code, out) == (0, "")
    assert err.startswith(f"{fifo} written (")
    assert document["format"] == "fake-lucy-snapshot"
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert fake_lucy(capsys, "snapshot", "export", str(link))[0] == 0
    assert link.is_symlink()
    assert json.loads(real.read_bytes())["format"] == "fake-lucy-snapshot"


def test_snapshot_export_where_no_file_can_be_written_is_one_line_and_exit_2(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    in_the_way = tmp_path / "state.json"
    in_the_way.write_text("{}")
    for target, said in (
        (in_the_way / "fake.json", f"{in_the_way} is a file, so {in_the_way}/fake.json cannot be written"),
        (tmp_path, f"{tmp_path} is a folder, not a file"),
        # a folder still to be made, named with its slash: not a file of the folder's name
        (f"{tmp_path}/later/", f"{tmp_path}/later/ ends with /, so it names a folder, not a file"),
    ):
        code, out, err = fake_lucy(capsys, "snapshot", "export", str(target))
        assert (code, out) == (2, "")
        assert err.startswith(f"fake-lucy: {said}")
        assert len(err.splitlines()) == 1
    assert in_the_way.read_text() == "{}"
    assert not (tmp_path / "later").exists()


def test_snapshot_import_of_a_file_that_is_not_json_is_one_line_and_exit_2(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kept = propose(live)
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "lucy-fake-snapshot",\n')
    code, out, err = fake_lucy(capsys, "snapshot", "import", str(broken))
    assert (code, out) == (2, "")
    assert err.startswith(f"fake-lucy: {broken} is not a JSON object (")
    assert len(err.splitlines()) == 1
    broken.write_bytes(b"")  # said as a file, not as a request's body
    code, _, err = fake_lucy(capsys, "snapshot", "import", str(broken))
    assert (code, err) == (2, f"fake-lucy: {broken} is not a JSON object (the file is empty)\n")
    code, _, err = fake_lucy(capsys, "snapshot", "import", str(tmp_path / "absent.json"))
    assert code == 2
    assert len(err.splitlines()) == 1
    assert [p["id"] for p in control(live, "GET", "/proposals")["items"]] == [kept["id"]]


def test_snapshot_import_of_a_newer_format_is_one_line_naming_the_pointer_and_exit_1(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kept = propose(live)
    document = control(live, "GET", "/snapshot")
    document["version"] += 1
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps(document))
    code, out, err = fake_lucy(capsys, "snapshot", "import", str(newer))
    assert (code, out) == (1, "")
    assert err.startswith(
        "fake-lucy: 422 invalid_request: the snapshot was written by a newer fake-lucy (/version "
    )
    assert len(err.splitlines()) == 1
    assert [p["id"] for p in control(live, "GET", "/proposals")["items"]] == [kept["id"]]


def test_an_error_naming_a_line_break_or_an_escape_is_still_one_line(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A refused snapshot's pointer holds the document's own key, whatever it contains."""
    document = control(live, "GET", "/snapshot")
    document["tenants"][0]["evil\nkey\x1b[2J"] = 1
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(document))
    code, out, err = fake_lucy(capsys, "snapshot", "import", str(hostile))
    assert (code, out) == (1, "")
    assert len(err.splitlines()) == 1
    assert "\x1b" not in err
    assert "evil⟨U+000A⟩key⟨U+001B⟩[2J" in err
    shown = tmp_path / "two\nlines.json"  # a file name, too
    shown.write_text("not json")
    code, _, err = fake_lucy(capsys, "snapshot", "import", str(shown))
    assert (code, len(err.splitlines())) == (2, 1)


def _recalls(server: LiveServer, count: int) -> list[str]:
    with httpx.Client(
        base_url=server.base_url, headers={"Authorization": f"Bearer {server.dev_token}"}
    ) as http:
        return [
            http.post(V1 + "/recall", json={"query": "tuesday"}).headers["Lucy-Request-Id"]
            for _ in range(count)
        ]


def test_requests_limit_over_a_page_shows_the_newest_rows(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    sent = _recalls(live, 130)
    code, out, _ = fake_lucy(capsys, "requests", "--limit", "120", "--json")
    assert code == 0
    assert [row["request_id"] for row in json.loads(out)] == sent[-120:]


def test_requests_follow_prints_its_header_at_once_and_each_new_row_under_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FAKE_LUCY_ADMIN_TOKEN", raising=False)
    with LiveServer.start(tmp_path) as server:
        args = cli._parser().parse_args(["requests", "--follow", "--url", server.base_url])
        out = _Lines()
        follower = threading.Thread(target=lambda: cli.operator_cli.run(args, out, io.StringIO()))
        follower.start()
        try:
            assert out.wait_for("OPERATION"), "the header, over no rows yet"
            _recalls(server, 1)
            assert out.wait_for("recall"), out.getvalue()
        finally:
            server.stop()
            follower.join(10)
    header, row = out.getvalue().splitlines()
    assert row.index("recall") == header.index("OPERATION")
    assert row.index("200") == header.index("STATUS")
    assert row.index("cred_dev_default") == header.index("CREDENTIAL")


@pytest.mark.parametrize("moment", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"])
def test_clock_set_to_a_time_outside_the_years_is_a_usage_error(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str], moment: str
) -> None:
    assert usage(capsys, "clock", "set", moment) == (
        f"fake-lucy clock set: argument time: {moment!r} is outside the years 1 to 9999 in UTC"
        " (see fake-lucy clock set --help)\n"
    )


def test_an_address_where_something_else_answers_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    class NotTheFake(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/_fake/clock"):  # JSON, but of another shape
                self.answer(200, b'{"time": "now"}', {"Content-Type": "application/json"})
            elif self.path.startswith("/_fake/memories"):
                self.answer(301, b"", {"Location": "/elsewhere/"})
            else:
                self.answer(200, b"<html>a web site</html>", {"Content-Type": "text/html"})

        def answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    monkeypatch.delenv("FAKE_LUCY_ADMIN_TOKEN", raising=False)
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotTheFake) as site:
        threading.Thread(target=site.serve_forever, daemon=True).start()
        address = f"http://127.0.0.1:{site.server_address[1]}"
        try:
            for command in ("proposals", "memories", "clock"):
                code, out, err = fake_lucy(capsys, command, "--url", address)
                assert (code, out, len(err.splitlines())) == (1, "", 1), err
                assert "not an answer of fake-lucy" in err or "is not one of fake-lucy" in err
        finally:
            site.shutdown()


def test_ctrl_c_during_a_command_is_no_success(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*_: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.operator_cli._HANDLERS, "approve", interrupted)
    code, out, err = fake_lucy(capsys, "approve", "prop_" + "a" * 22)
    assert (code, out) == (130, "")
    assert err == "fake-lucy: interrupted (what was already sent may have been done)\n"


@pytest.mark.parametrize(
    "command", [["proposals"], ["snapshot", "export", "/dev/stdout"], ["snapshot", "export", "-"]]
)
def test_a_reader_that_goes_away_ends_the_command_quietly(
    live: LiveServer, url: str, command: list[str]
) -> None:
    for n in range(3):
        propose(live, f"Plan number {n}.")
    with subprocess.Popen(  # noqa: S603 - our own console script
        [str(Path(sys.executable).with_name("fake-lucy")), *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as running:
        assert running.stdout is not None
        running.stdout.close()  # as `| head -0` does
        _, err = running.communicate(timeout=60)
    assert running.returncode == 141
    assert err == b""


def test_a_tenant_admins_prune_ages_tenants_by_the_server_clock(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    created = control(live, "POST", "/tenants", json={"tenant": "pytest-young"})
    token_file = tmp_path / "tenant-admin"
    token_file.write_text(created["admin_token"])
    moved = httpx.post(
        live.base_url + "/_fake/clock/advance",
        json={"seconds": 7200},
        headers={"Authorization": f"Bearer {created['admin_token']}"},
        verify=shared_tls_context(),
    )
    assert moved.status_code == 200  # its own clock is two hours on; the server clock is not
    code, out, _ = fake_lucy(
        capsys, "tenants", "prune", "--older-than", "1h", "--dry-run", "--admin-token-file", str(token_file)
    )
    assert (code, out) == (0, "0 tenants would be deleted\n")


def test_a_long_cell_is_never_cut_inside_a_marker(
    live: LiveServer, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    propose(live, "a" * 55 + "\u200b" * 5 + "bbbbb")
    code, out, _ = fake_lucy(capsys, "proposals")
    assert code == 0
    [row] = [line for line in out.splitlines() if "aaaa" in line]
    assert "aaaa…" in row or "⟨U+200B⟩…" in row
    assert re.search(r"⟨U\+[0-9A-F]*…", row) is None, row


class _ClosedStream(io.StringIO):
    """A stderr whose reader went away (``fake-lucy serve 2>&1 | head``): every write fails."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.anyio
async def test_a_server_log_that_cannot_be_written_never_changes_an_answer(tmp_path: Path) -> None:
    fake = FakeLucy(FakeLucySettings(database=str(tmp_path / "log.sqlite3")))
    log = RequestLogger(_ClosedStream())
    app = create_app(fake, request_log=log)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8787") as client:
        statuses = [
            (
                await client.post(
                    V1 + "/recall",
                    json={"query": "tuesday"},
                    headers={"Authorization": f"Bearer {DEV_TOKEN}"},
                )
            ).status_code
            for _ in range(3)
        ]
    fake.close()
    assert statuses == [200, 200, 200]  # charged and answered: the log is instrumentation
    assert log.failed


def test_an_error_never_repeats_a_password_in_the_url(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FAKE_LUCY_ADMIN_TOKEN", raising=False)
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    code, _, err = fake_lucy(capsys, "proposals", "--url", f"http://operator:s3cret-pass@127.0.0.1:{port}")
    # httpx would send them as Basic auth in place of the admin token: refused before anything is sent
    assert code == 2
    assert "s3cret-pass" not in err
    assert f"http://127.0.0.1:{port} holds a user name or a password; a fake takes none" in err


def test_a_usage_error_never_repeats_a_password_in_the_url(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = fake_lucy(capsys, "clock", "--url", "ftp://operator:s3cret-pass@127.0.0.1:21")
    assert code == 2
    assert "s3cret-pass" not in err
    assert "'ftp://127.0.0.1:21' is not an http(s) URL" in err


def test_an_error_whose_reader_went_away_keeps_its_exit_code() -> None:
    with subprocess.Popen(  # noqa: S603 - our own console script
        [str(Path(sys.executable).with_name("fake-lucy")), "proposals", "--limit", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as command:
        assert command.stderr is not None
        command.stderr.close()
        out, _ = command.communicate(timeout=60)
    assert (command.returncode, out) == (2, b"")


@contextlib.asynccontextmanager
async def _logging_fake(tmp_path: Path) -> AsyncIterator[tuple[FakeLucy, httpx.AsyncClient, io.StringIO]]:
    """An in-process fake whose server log is written into the StringIO it yields."""
    fake = FakeLucy(FakeLucySettings(database=str(tmp_path / "log.sqlite3")))
    written = io.StringIO()
    transport = httpx.ASGITransport(app=create_app(fake, request_log=RequestLogger(written)))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8787") as client:
            yield fake, client, written
    finally:
        fake.close()


@pytest.mark.anyio
async def test_the_server_log_has_a_line_for_a_v1_path_no_operation_has(tmp_path: Path) -> None:
    async with _logging_fake(tmp_path) as (fake, client, written):
        auth = {"Authorization": f"Bearer {DEV_TOKEN}"}
        unknown = await client.post(V1 + "/recal", json={"query": "x"}, headers=auth)
        wrong = await client.get(V1 + "/recall", headers=auth)
        served = await client.post(V1 + "/recall", json={"query": "x"}, headers=auth)
        control = await client.get("/_fake/clock", headers={"Authorization": f"Bearer {fake.admin_token}"})
        forged = await client.get(V1 + "/x%0a12:00:00.000  propose 201%1b[31m", headers=auth)
    assert [r.status_code for r in (unknown, wrong, served, control, forged)] == [404, 405, 200, 200, 404]
    lines = written.getvalue().splitlines()
    assert len(lines) == 4  # the v1 requests; the control API's never
    assert "GET /x⟨U+000A⟩12:00:00.000  propose 201⟨U+001B⟩[31m" in lines[3]  # one line, nothing forged
    assert [line.split()[1:4] for line in lines[:2]] == [["POST", "/recal", "404"], ["GET", "/recall", "405"]]
    assert lines[2].split()[1:3] == ["recall", "200"]
    assert DEV_TOKEN not in written.getvalue()


@pytest.mark.anyio
async def test_the_server_log_line_shows_the_milliseconds_the_retry_attempt_and_the_fault(
    tmp_path: Path,
) -> None:
    """SPEC 3.11: a propose answered by an injected 503 is logged with its time in ms, ``retry 0``
    and ``fault <id>``; its retry (``Lucy-Retry-Attempt: 1``), executed, with ``retry 1`` and no fault."""
    async with _logging_fake(tmp_path) as (fake, client, written):
        admin = {"Authorization": f"Bearer {fake.admin_token}"}
        auth = {"Authorization": f"Bearer {DEV_TOKEN}", "Idempotency-Key": "logged-key-0123456789"}
        made = await client.post("/_fake/faults", json={"operation": "propose", "status": 503}, headers=admin)
        body = proposal_body("Logged twice.")
        failed = await client.post(V1 + "/proposals", json=body, headers={**auth, "Lucy-Retry-Attempt": "0"})
        retried = await client.post(V1 + "/proposals", json=body, headers={**auth, "Lucy-Retry-Attempt": "1"})
    assert (made.status_code, failed.status_code, retried.status_code) == (201, 503, 201)
    fault_id = made.json()["fault_id"]
    assert failed.headers["Fake-Lucy-Fault"] == fault_id

    def logged(status: int, credits: str, attempt: int) -> str:
        """The line's pattern: wall time, operation, status, milliseconds, credits, key, attempt."""
        return (
            rf"\d\d:\d\d:\d\d\.\d\d\d  propose +{status} +\d+\.\d ms  {credits}  key logged-k… +"
            rf"retry {attempt}  cred_dev_default"
        )

    lines = written.getvalue().splitlines()
    assert len(lines) == 2
    assert re.fullmatch(logged(503, "0 credits", 0) + f"  fault {fault_id}", lines[0]), lines[0]
    assert re.fullmatch(logged(201, "1 credit ", 1), lines[1]), lines[1]


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_output_an_encoding_cannot_hold_is_escaped_not_a_traceback_and_json_stays_json(
    live: LiveServer, url: str, encoding: str
) -> None:
    """A terminal or pipe whose encoding lacks a character the table holds (PYTHONIOENCODING=ascii,
    a Windows code page): the character is escaped. ``--json`` is then ASCII JSON (``\\u`` escapes,
    a surrogate pair beyond the BMP), which any reader decodes, never Python's ``\\U0001f389``."""
    content = "Café ⟨menu⟩ on Fridays 🎉."
    propose(live, content)
    fake_lucy_command = str(Path(sys.executable).with_name("fake-lucy"))
    table, listed = (
        subprocess.run(  # noqa: S603 - our own console script
            [fake_lucy_command, "proposals", *json_option],
            env={**os.environ, "PYTHONIOENCODING": encoding},
            capture_output=True,
            timeout=60,
            check=False,
        )
        for json_option in ([], ["--json"])
    )
    for finished in (table, listed):
        assert (finished.returncode, finished.stderr) == (0, b"")
    assert "Café ⟨menu⟩".encode(encoding, "backslashreplace") in table.stdout
    assert listed.stdout.isascii()
    assert [item["content"] for item in json.loads(listed.stdout)] == [content]


def test_the_options_before_the_command_are_described_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert exited.value.code == 0
    assert "[--url URL] [--admin-token-file FILE]" in out
    assert "as the command's --admin-token-file" in out
    assert "GLOBAL" not in out
