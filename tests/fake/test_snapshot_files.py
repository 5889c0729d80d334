"""``fake-lucy serve --export-on-exit FILE`` and ``--import FILE`` (SPEC 3.9), as a user runs them."""

from __future__ import annotations

import errno
import json
import os
import signal
import threading
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from fake_lucy.domain.snapshot import VERSION
from fake_lucy.runtime import FakeLucy
from fake_lucy.settings import FakeLucySettings
from fake_lucy.snapshot_file import export_file, import_file
from fake_lucy.testing import ServeProcess
from lucy_memory._contract import schema_validator
from tests.helpers import V1, proposal_body

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CONCURRENCY = 8


def _tenant(document: dict[str, Any]) -> dict[str, Any]:
    [tenant] = [item for item in document["tenants"] if item["id"] == "tenant_dev"]
    return tenant


class Watcher(threading.Thread):
    """Reads the export file over and over while the server shuts down: every read must be a
    whole snapshot (the previous one or the new one), never part of one."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.stop = threading.Event()
        self.reads: list[int] = []  # the number of proposals in each read
        self.broken: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            text = self.path.read_text(encoding="utf-8")
            try:
                self.reads.append(len(_tenant(json.loads(text))["proposals"]))
            except (json.JSONDecodeError, KeyError, ValueError) as exc:
                self.broken.append(f"{exc!r} in {len(text)} characters")


async def _load(server: ServeProcess, proposed: list[str], sent: threading.Event, watcher: Watcher) -> None:
    """Proposals from several connections until the server goes away; after 30 the watcher starts
    and the server gets SIGTERM (it writes the file only once signalled: reading it before would
    only spend the CPU the load needs)."""

    async def worker() -> None:
        async with server.client(timeout=30) as http:
            while True:
                try:
                    response = await http.post(
                        V1 + "/proposals",
                        json=proposal_body(f"Decision {uuid.uuid4().hex}."),
                        headers={"Idempotency-Key": uuid.uuid4().hex},
                    )
                except httpx.TransportError:
                    return
                if response.status_code != 201:
                    return
                proposed.append(response.json()["proposal"]["id"])
                if len(proposed) >= 30:
                    sent.set()

    async with anyio.create_task_group() as group:
        for _ in range(CONCURRENCY):
            group.start_soon(worker)
        await anyio.to_thread.run_sync(sent.wait)
        watcher.start()
        server.process.send_signal(signal.SIGTERM)


async def test_export_on_exit_under_load_is_never_partial_and_import_restores_it(tmp_path) -> None:
    database, export = tmp_path / "fake.sqlite3", tmp_path / "out" / "state.json"
    args = ["--database", str(database), "--export-on-exit", str(export)]
    with ServeProcess.start(args) as first:
        pass  # stopped at once: the previous version of the file, with no proposal
    assert first.process.returncode == 0
    assert _tenant(json.loads(export.read_text(encoding="utf-8")))["proposals"] == []

    watcher = Watcher(export)
    server = ServeProcess(args)
    server.wait_ready()
    proposed: list[str] = []
    await _load(server, proposed, threading.Event(), watcher)
    _, err = server.process.communicate(timeout=60)
    watcher.stop.set()
    watcher.join()
    assert server.process.returncode == 0, err
    assert "wrote the snapshot" in err
    assert watcher.broken == []
    assert set(watcher.reads) <= {
        0,
        len(_tenant(json.loads(export.read_text(encoding="utf-8")))["proposals"]),
    }
    document = json.loads(export.read_text(encoding="utf-8"))
    assert not schema_validator("snapshot.schema.json").errors(document)
    assert [path.name for path in export.parent.iterdir()] == ["state.json"]
    tenant = _tenant(document)
    ids = [proposal["id"] for proposal in tenant["proposals"]]
    # every answered proposal is in it; at most the requests in flight at the signal were answered too late
    assert set(proposed) <= set(ids)
    assert len(ids) <= len(proposed) + CONCURRENCY
    assert len([entry for entry in tenant["ledger"] if entry["operation"] == "propose"]) == len(ids)

    # two workers, whose environment still names the file as the user set it, twice over: only the
    # serving process imports, so neither worker reads those names (they used to refuse the pair)
    naming = {"FAKE_LUCY_IMPORT": str(export), "FAKE_LUCY_IMPORT_FILE": str(tmp_path / "other.json")}
    with ServeProcess.start(
        ["--database", str(tmp_path / "fresh.sqlite3"), "--workers", "2", "--import", str(export)], naming
    ) as fresh:
        async with fresh.admin_client() as http:
            restored = (await http.get("/_fake/snapshot")).json()
    assert _tenant(restored)["proposals"] == tenant["proposals"]
    assert _tenant(restored)["accounts"] == tenant["accounts"]


def test_import_of_a_snapshot_of_a_newer_version_is_one_line_and_a_non_zero_exit(tmp_path) -> None:
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"format": "fake-lucy-snapshot", "version": 99}), encoding="utf-8")
    server = ServeProcess(["--database", str(tmp_path / "fake.sqlite3"), "--import", str(newer)])
    out, err = server.process.communicate(timeout=60)
    assert server.process.returncode == 1
    assert err.strip().splitlines() == [
        f"fake-lucy: the snapshot {newer} cannot be imported: the snapshot was written by a newer"
        f" fake-lucy: /version is a newer snapshot format than this fake reads (up to {VERSION});"
        " upgrade fake-lucy"
    ]
    assert out == ""


def test_a_database_a_snapshot_was_imported_into_starts_again_with_its_seed(tmp_path) -> None:
    """``--import F --export-on-exit F`` on one database, run after run: the file keeps its seed's
    fingerprint, so the next start does not take it for a database of another seed."""
    settings = FakeLucySettings(database=str(tmp_path / "kept.sqlite3"))
    first = FakeLucy(settings)
    export_file(first, tmp_path / "state.json")
    import_file(first, tmp_path / "state.json")
    first.close()
    again = FakeLucy(settings)  # raised SeedMismatchError ("seeded by an older fake-lucy")
    assert again.seed_outcome == "kept"
    again.close()


def test_an_export_that_cannot_be_written_names_the_file_and_keeps_the_previous_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeLucy(FakeLucySettings(database=str(tmp_path / "full.sqlite3")))
    target = tmp_path / "state.json"
    try:
        export_file(fake, target)
        before = target.read_bytes()
        real_fsync = os.fsync

        def full(descriptor: int) -> None:  # the disk fills while the temporary file is written
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(os, "fsync", full)
        with pytest.raises(OSError, match="cannot write the snapshot") as refused:
            export_file(fake, target)
        monkeypatch.setattr(os, "fsync", real_fsync)
    finally:
        fake.close()
    assert str(refused.value) == (
        f"cannot write the snapshot {target} (No space left on device); what was there is as it was"
    )
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".state.json")] == []  # no partial
