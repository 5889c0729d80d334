"""Docker cannot run here, so the Dockerfile and docker-compose.yml are checked against the code."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from fake_lucy.app import create_app
from fake_lucy.healthcheck import main as healthcheck_main
from fake_lucy.healthcheck import probe_url
from fake_lucy.runtime import FakeLucy
from fake_lucy.settings import FakeLucySettings
from fake_lucy.testing.fakes import free_port
from lucy_memory._contract import load_contract, schema_validator

ROOT = Path(__file__).resolve().parents[1]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
FAKE = COMPOSE["services"]["fake-lucy"]
E2E = COMPOSE["services"]["e2e"]
SETTINGS_FIELDS = {f"FAKE_LUCY_{name.upper()}" for name in FakeLucySettings.model_fields}


def _dockerfile() -> list[tuple[str, str, str]]:
    """(stage, instruction, argument) for each instruction, continuation lines joined."""
    lines: list[tuple[str, str, str]] = []
    stage = ""
    pending = ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        if raw.lstrip().startswith("#") and not pending:
            continue
        pending += raw.rstrip("\\").strip() + " "
        if raw.endswith("\\"):
            continue
        text, pending = pending.strip(), ""
        if not text:
            continue
        instruction, _, argument = text.partition(" ")
        if instruction.upper() == "FROM":
            stage = argument.split(" AS ")[-1].strip()
        lines.append((stage, instruction.upper(), argument.strip()))
    return lines


def _env(instructions: list[tuple[str, str, str]], stage: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for st, instruction, argument in instructions:
        if instruction == "ENV" and st == stage:
            for item in shlex.split(argument):
                key, _, value = item.partition("=")
                env[key] = value
    return env


def test_compose_environment_names_are_settings_the_fake_reads() -> None:
    names = set(FAKE["environment"])
    assert names <= SETTINGS_FIELDS, names - SETTINGS_FIELDS
    fake_env = {k: v for k, v in _env(_dockerfile(), "runtime").items() if k.startswith("FAKE_LUCY_")}
    assert set(fake_env) <= SETTINGS_FIELDS


def test_the_published_port_is_on_loopback_and_matches_the_fake_port() -> None:
    port = FAKE["environment"]["FAKE_LUCY_PORT"]
    assert FAKE["ports"] == [f"127.0.0.1:{port}:{port}"]
    dockerfile = _dockerfile()
    assert ("runtime", "EXPOSE", port) in dockerfile
    assert _env(dockerfile, "runtime")["FAKE_LUCY_PORT"] == port
    assert port == str(load_contract("fake-control")["defaults"]["port"])


def test_the_health_checks_probe_the_fakes_health_route(tmp_path) -> None:
    app = create_app(FakeLucy(FakeLucySettings(database=str(tmp_path / "h.sqlite3"))))
    assert "/healthz" in {getattr(route, "path", None) for route in app.routes}
    port = FAKE["environment"]["FAKE_LUCY_PORT"]
    assert FAKE["healthcheck"]["test"] == ["CMD", "python", "-m", "fake_lucy.healthcheck"]
    healthcheck = [a for st, i, a in _dockerfile() if i == "HEALTHCHECK" and st == "runtime"]
    assert len(healthcheck) == 1
    assert healthcheck[0].endswith('CMD ["python", "-m", "fake_lucy.healthcheck"]')
    assert ("test", "HEALTHCHECK", "NONE") in _dockerfile()  # the e2e container serves nothing to probe
    # what the probe asks, with the container's environment: plain, and with a certificate
    assert probe_url(FAKE["environment"]) == f"http://127.0.0.1:{port}/healthz"
    with_tls = {**FAKE["environment"], "FAKE_LUCY_TLS_CERTFILE": "/tls/fake-lucy.pem"}
    assert probe_url(with_tls) == f"https://127.0.0.1:{port}/healthz"


def test_the_health_probe_answers_0_for_a_running_fake_and_1_with_one_line_otherwise(
    live, capsys: pytest.CaptureFixture[str]
) -> None:
    port = live.base_url.rsplit(":", 1)[1]
    assert healthcheck_main({"FAKE_LUCY_PORT": port}) == 0
    assert healthcheck_main({"FAKE_LUCY_PORT": str(free_port())}) == 1
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_the_command_is_fake_lucy_serve_listening_on_all_interfaces_in_the_container() -> None:
    dockerfile = _dockerfile()
    assert ("runtime", "CMD", '["fake-lucy", "serve"]') in dockerfile
    assert FAKE["environment"]["FAKE_LUCY_HOST"] == "0.0.0.0"  # noqa: S104 - inside the container only
    scripts = (ROOT / "pyproject.toml").read_text()
    assert 'fake-lucy = "fake_lucy.cli:main"' in scripts


def test_the_database_lives_on_the_volume() -> None:
    database = Path(FAKE["environment"]["FAKE_LUCY_DATABASE"])
    volume, _, target = FAKE["volumes"][0].partition(":")
    assert volume in COMPOSE["volumes"]
    assert database.parent == Path(target)
    assert ("runtime", "VOLUME", f'["{target}"]') in _dockerfile()


def test_the_mounted_seed_has_its_own_tokens_and_is_valid() -> None:
    seed_target = FAKE["environment"]["FAKE_LUCY_SEED"]
    mounts = {m.split(":")[1]: m.split(":")[0] for m in FAKE["volumes"] if m.startswith("./")}
    source = ROOT / mounts[seed_target]
    seed = json.loads(source.read_text())
    assert schema_validator("seed.schema.json").errors(seed) == []
    defaults = load_contract("fake-control")["defaults"]
    tokens = {c["token"] for c in seed["credentials"]}
    assert defaults["token"] not in tokens  # built-in tokens are refused off loopback
    assert all(len(token) >= 32 for token in tokens)
    admin = FAKE["environment"]["FAKE_LUCY_ADMIN_TOKEN"]
    # required, with no default: compose refuses to start without one (a default would be public)
    assert re.fullmatch(r"\$\{FAKE_LUCY_ADMIN_TOKEN:\?[^}]+\}", admin), admin


def test_the_e2e_profile_runs_the_e2e_suite_against_the_healthy_fake() -> None:
    assert E2E["profiles"] == ["e2e"]
    assert E2E["depends_on"]["fake-lucy"]["condition"] == "service_healthy"
    assert E2E["network_mode"] == "service:fake-lucy"
    assert E2E["command"][:1] == ["pytest"]
    assert "e2e" in E2E["command"]
    assert E2E["environment"]["LUCY_E2E_ADMIN_TOKEN"] == FAKE["environment"]["FAKE_LUCY_ADMIN_TOKEN"]
    assert (
        E2E["environment"]["LUCY_E2E_BASE_URL"] == f"http://127.0.0.1:{FAKE['environment']['FAKE_LUCY_PORT']}"
    )
    stages = {st for st, i, _ in _dockerfile() if i == "FROM"}
    assert {E2E["build"]["target"], FAKE["build"]["target"]} <= stages
    assert (ROOT / "e2e").is_dir()


def test_the_image_copies_everything_the_packages_need() -> None:
    copied = {src for st, i, a in _dockerfile() if i == "COPY" and st == "runtime" for src in a.split()[:-1]}
    for needed in ("pyproject.toml", "uv.lock", "contracts", "schemas", "fake_lucy", "client"):
        assert needed in copied
    # uv sync needs every workspace member's own pyproject.toml (client/ is the lucy-memory SDK).
    members = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]["workspace"]["members"]
    assert members == ["client"]
    assert all(member in copied for member in members)


def _stage(stage: str) -> list[tuple[str, str]]:
    return [(instruction, argument) for st, instruction, argument in _dockerfile() if st == stage]


def test_the_locked_dependencies_are_installed_in_a_layer_before_the_source() -> None:
    runtime = _stage("runtime")
    syncs = [i for i, (instruction, argument) in enumerate(runtime) if "uv sync" in argument]
    assert len(syncs) == 2
    dependencies, project = syncs
    assert "--no-install-workspace" in runtime[dependencies][1]
    assert "--frozen" in runtime[dependencies][1]
    assert "--no-install" not in runtime[project][1]
    before = [
        argument.split()[:-1] for instruction, argument in runtime[:dependencies] if instruction == "COPY"
    ]
    # only what the dependency layer depends on: the lock and each workspace member's pyproject.toml
    assert before == [["pyproject.toml", "uv.lock"], ["client/pyproject.toml"]]
    source = {
        src
        for instruction, argument in runtime[dependencies:project]
        if instruction == "COPY"
        for src in argument.split()[:-1]
    }
    assert {"fake_lucy", "client", "contracts", "schemas"} <= source


def test_the_image_runs_as_a_non_root_user_that_owns_the_data_volume() -> None:
    for stage in ("runtime", "test"):
        users = [argument for instruction, argument in _stage(stage) if instruction == "USER"]
        assert users, stage
        assert users[-1] not in ("root", "0"), stage
    runtime = _stage("runtime")
    user = [argument for instruction, argument in runtime if instruction == "USER"][-1]
    [created] = [argument for instruction, argument in runtime if "useradd" in argument]
    assert f" {user} " in f"{created} "
    assert f"chown {user}:{user} /data" in created
    volume = next(i for i, (instruction, _) in enumerate(runtime) if instruction == "VOLUME")
    assert runtime.index(("RUN", created)) < volume  # a change after VOLUME would be discarded
    assert Path(FAKE["environment"]["FAKE_LUCY_DATABASE"]).parent == Path("/data")


def test_a_plain_docker_build_makes_the_servers_image() -> None:
    """``docker build .`` builds the last stage: the server's (the e2e suite's is ``--target test``)."""
    stages = [(st, a) for st, i, a in _dockerfile() if i == "FROM"]
    assert stages[-1] == ("server", "runtime AS server")
    assert [i for st, i, _ in _dockerfile() if st == "server"] == ["FROM"]  # the runtime image as it is


def test_the_image_alone_serves_the_seeds_tokens_and_its_e2e_stage_starts_fakes_on_loopback() -> None:
    runtime = _env(_dockerfile(), "runtime")
    seed = runtime["FAKE_LUCY_SEED"]
    copied = {a.split()[-1]: a.split()[0] for st, i, a in _dockerfile() if i == "COPY" and st == "runtime"}
    assert seed == "/app/" + copied["./docker/seed.json"].removeprefix("./") == "/app/docker/seed.json"
    assert (ROOT / "docker" / "seed.json").read_text() == (ROOT / copied["./docker/seed.json"]).read_text()
    test = _env(_dockerfile(), "test")
    assert test["FAKE_LUCY_HOST"] == "127.0.0.1"
    assert test["NO_PROXY"] == test["no_proxy"] == "127.0.0.1,localhost"
    # set after every RUN: a build's own NO_PROXY (a package mirror) still governs uv sync
    instructions = [i for st, i, _ in _dockerfile() if st == "test"]
    last_env = max(n for n, i in enumerate(instructions) if i == "ENV")
    assert "RUN" not in instructions[last_env:]
    assert "NO_PROXY" not in runtime


def test_the_seed_mount_is_readable_under_selinux() -> None:
    [mount] = [m for m in FAKE["volumes"] if m.startswith("./docker/seed.json:")]
    assert mount.split(":")[2].split(",") == ["ro", "z"]


def test_the_health_probe_never_goes_through_a_proxy(live, monkeypatch: pytest.MonkeyPatch) -> None:
    """Docker passes a host's proxy settings into containers; the probe asks 127.0.0.1 directly."""
    dead = f"http://127.0.0.1:{free_port()}"
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.setenv(name, dead)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    assert healthcheck_main({"FAKE_LUCY_PORT": live.base_url.rsplit(":", 1)[1]}) == 0
