"""A ``SyncAgentMemoryClient`` that a script never closes: its helper thread must not outlive it."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import threading

import pytest

from lucy_memory import SyncAgentMemoryClient, create_lucy_http_transport
from tests.sdk.helpers import DEV_TOKEN

SCRIPT = textwrap.dedent(
    """
    import sys
    from lucy_memory import SyncAgentMemoryClient, create_lucy_http_transport

    client = SyncAgentMemoryClient(
        transport=create_lucy_http_transport(base_url=sys.argv[1], allow_insecure_loopback=True),
        token="lucy-dev-token",
        permissions=["memory:read"],
    )
    result = client.recall('{"query": "database"}')
    print(f"recalled {len(result.memories)}; charged {result.credits.charged}", flush=True)
    """
)


@pytest.mark.slow
def test_a_script_that_never_closes_its_sync_client_exits_within_a_second_of_its_last_line(
    live, tmp_path
) -> None:
    script = tmp_path / "never_closes.py"
    script.write_text(SCRIPT)
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and script
        [sys.executable, str(script), live.base_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        last_line = process.stdout.readline()  # blocks until the script printed its last line
        assert last_line == "recalled 0; charged 1\n"
        try:
            code = process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pytest.fail("the interpreter did not exit within 1 s of the script's last line")
    finally:
        if process.poll() is None:
            process.kill()
        _, err = process.communicate()
    assert code == 0, err
    assert err == ""


def test_a_sync_client_dropped_without_close_stops_its_event_loop_thread(live) -> None:
    before = set(threading.enumerate())
    client = SyncAgentMemoryClient(
        transport=create_lucy_http_transport(base_url=live.base_url, allow_insecure_loopback=True),
        token=DEV_TOKEN,
        permissions=["memory:read"],
    )
    assert client.recall('{"query": "database"}').credits.charged == 1
    [helper] = set(threading.enumerate()) - before
    del client
    gc.collect()
    assert not helper.is_alive()
