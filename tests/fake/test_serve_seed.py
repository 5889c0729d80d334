"""``fake-lucy serve --seed`` never claims a seed it could not apply: a database holding another
seed's state is refused (exit 2, one line) unless ``--reset-on-start`` re-seeds it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from fake_lucy.cli import main
from fake_lucy.runtime import FakeLucy
from fake_lucy.serve import _announce
from fake_lucy.settings import FakeLucySettings
from fake_lucy.testing import ServeProcess

SEED_TOKEN = "seeded-agent-token-0123456789abcdef"
RECALL = "/api/agent-memory/v1/recall"


def _write_seed(path: Path, *, credits: int = 50) -> Path:
    path.write_text(
        json.dumps(
            {
                "tenants": [{"id": "tenant_seeded"}],
                "credentials": [
                    {
                        "token": SEED_TOKEN,
                        "tenant": "tenant_seeded",
                        "account": "acct_seeded",
                        "user": "usr_seeded",
                        "permissions": ["memory:read"],
                        "scopes": [{"kind": "project", "id": "p1"}],
                        "credits": credits,
                    }
                ],
            }
        ),
        encoding="utf-8",
    )
    return path


def _existing_database(path: Path, seed: Path | None = None) -> Path:
    FakeLucy(FakeLucySettings(database=str(path), seed=seed)).close()
    return path


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-m", "fake_lucy", "serve", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _recall_status(base_url: str, token: str) -> int:
    response = httpx.post(
        base_url + RECALL, json={"query": "anything"}, headers={"Authorization": f"Bearer {token}"}
    )
    return response.status_code


@pytest.mark.slow
def test_a_seed_on_a_database_of_another_seed_exits_2_with_one_line_naming_reset_on_start(
    tmp_path: Path,
) -> None:
    database = _existing_database(tmp_path / "dev.sqlite3")  # seeded with the built-in dev seed
    seed = _write_seed(tmp_path / "seed.json")
    result = _serve("--database", str(database), "--seed", str(seed))
    assert result.returncode == 2
    assert result.stdout == ""  # no banner claiming the seed
    [line] = result.stderr.splitlines()
    assert line.startswith("fake-lucy: ")
    assert str(database) in line
    assert f"--seed {seed} cannot take effect" in line
    assert "--reset-on-start" in line
    conn = sqlite3.connect(database)
    try:  # nothing written: the dev credential is still the only one
        assert conn.execute("SELECT id FROM credentials").fetchall() == [("cred_dev_default",)]
    finally:
        conn.close()


@pytest.mark.slow
def test_reset_on_start_applies_the_seed_to_an_existing_database_and_the_banner_says_so(
    tmp_path: Path,
) -> None:
    database = _existing_database(tmp_path / "dev.sqlite3")
    seed = _write_seed(tmp_path / "seed.json")
    with ServeProcess.start(["--database", str(database), "--seed", str(seed), "--reset-on-start"]) as server:
        assert _recall_status(server.base_url, SEED_TOKEN) == 200
        assert _recall_status(server.base_url, "lucy-dev-token") == 401
        out, _ = server.stop()
    assert f"seed:         {seed} (applied again: --reset-on-start wiped the database;" in out


def _banner_seed_line(settings: FakeLucySettings, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    fake = FakeLucy(settings)
    try:
        _announce(settings, fake)
    finally:
        fake.close()
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.lstrip().startswith("seed:")]
    return fake.seed_outcome, line


def test_a_restart_with_the_same_seed_keeps_the_state_and_the_banner_says_so(tmp_path: Path, capsys) -> None:
    seed = _write_seed(tmp_path / "seed.json")
    database = str(tmp_path / "seeded.sqlite3")
    outcome, line = _banner_seed_line(FakeLucySettings(database=database, seed=seed), capsys)
    assert outcome == "applied"
    assert "(applied to this new database;" in line
    # The same seed in another layout is the same seed.
    relaid = tmp_path / "relaid.json"
    relaid.write_text(json.dumps(json.loads(seed.read_text()), indent=4, sort_keys=True), encoding="utf-8")
    outcome, line = _banner_seed_line(FakeLucySettings(database=database, seed=relaid), capsys)
    assert outcome == "kept"
    assert "(applied when this database was created; its state since then is kept;" in line


def test_a_changed_seed_is_refused(tmp_path: Path, capsys) -> None:
    seed = _write_seed(tmp_path / "seed.json")
    database = _existing_database(tmp_path / "seeded.sqlite3", seed)
    _write_seed(seed, credits=51)  # edited since the database was created
    assert main(["serve", "--port", "0", "--database", str(database), "--seed", str(seed)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "holds the state of another seed" in line
    assert "--reset-on-start (FAKE_LUCY_RESET_ON_START=1)" in line


def test_the_dev_seed_on_a_database_made_from_a_seed_file_is_refused(tmp_path: Path, capsys) -> None:
    database = _existing_database(tmp_path / "seeded.sqlite3", _write_seed(tmp_path / "seed.json"))
    assert main(["serve", "--port", "0", "--database", str(database)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "the built-in dev seed cannot take effect" in line
    assert "apply the dev seed" in line


def test_a_database_whose_seed_was_never_recorded_is_refused_rather_than_guessed(
    tmp_path: Path, capsys
) -> None:
    database = _existing_database(tmp_path / "old.sqlite3")
    conn = sqlite3.connect(database)
    conn.execute("UPDATE server_state SET seed_sha256 = NULL")  # as an older fake-lucy left it
    conn.commit()
    conn.close()
    assert main(["serve", "--port", "0", "--database", str(database)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "did not record its seed" in line
    fake = FakeLucy(FakeLucySettings(database=str(database), reset_on_start=True))
    assert fake.seed_outcome == "reset"
    fake.close()
    fake = FakeLucy(FakeLucySettings(database=str(database)))
    assert fake.seed_outcome == "kept"  # reset recorded the seed
    fake.close()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"tenants": [{"id": "t1"}], "tenants": [{"id": "t2"}]}', "an object has a duplicate key"),
        ('{"tenants": [], "memories": [{"content": "hello \\ud800"}]}', "a string contains a lone surrogate"),
        ('{"tenants": NaN}', "NaN and Infinity are not JSON"),
        ("[]", "the JSON value must be an object"),
        ("", "the file is empty"),
        ("\udcff", "the file is not valid UTF-8"),
    ],
)
def test_a_seed_file_is_read_as_strictly_as_a_snapshot(tmp_path: Path, text: str, said: str) -> None:
    """A repeated key was read as its last value (the first tenant dropped without a word), a lone
    surrogate was said to be over the content's size, and NaN got as far as the schema."""
    path = tmp_path / "seed.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))  # \udcff: the byte 0xff, no UTF-8
    with pytest.raises(ValueError, match=said) as refused:
        FakeLucy(FakeLucySettings(database=str(tmp_path / "seeded.sqlite3"), seed=path))
    assert str(refused.value).startswith(f"the seed file {path} is not a JSON object (")
    assert not (tmp_path / "seeded.sqlite3").exists() or sqlite3.connect(tmp_path / "seeded.sqlite3").execute(
        "SELECT count(*) FROM sqlite_master"
    ).fetchone() == (0,)
