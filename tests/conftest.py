from __future__ import annotations

import collections
import gc
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from fake_lucy.testing import FakeAdmin, InProcessFake, LiveServer
from tests.contract_check import response_hook

HOOKS: dict[str, Any] = {"response": [response_hook]}

# Long test files first, spread over the workers. `make test` runs pytest-xdist's worksteal: it
# splits the collection into one contiguous slice per worker (by test count), and a worker that runs
# dry takes half of the tests another has left, from the end. So each slice is made to start with
# its share of the long files (servers, a browser, inner pytest sessions, the fuzzing), dealt by
# their seconds, and is filled up to its size with short files, longest first. Each worker starts on
# its long files, no long file straddles two slices, and the run ends on short tests that split
# finely. The seconds are each file's, as the previous run measured them (pytest's cache); with
# none measured yet, the order is left as collected.
FILE_SECONDS = "fake-lucy/file-seconds"
LONG_FILE = 2.0  # seconds


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cache: pytest.Cache | None = getattr(config, "cache", None)
    seconds: dict[str, float] = {} if cache is None else cache.get(FILE_SECONDS, {})
    if seconds:
        workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
        items[:] = _longest_first(items, seconds, workers)


def _longest_first(items: list[pytest.Item], seconds: dict[str, float], workers: int) -> list[pytest.Item]:
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(_file(item.nodeid), []).append(item)
    files = sorted(by_file, key=lambda name: -seconds.get(name, LONG_FILE))  # not measured: long
    long_files = [name for name in files if seconds.get(name, LONG_FILE) >= LONG_FILE]
    piles: list[list[pytest.Item]] = [[] for _ in range(workers)]
    weights = [0.0] * workers
    for name in long_files:
        pile = weights.index(min(weights))
        piles[pile] += by_file[name]
        weights[pile] += seconds.get(name, LONG_FILE)
    short = [item for name in files if name not in long_files for item in by_file[name]]
    ordered: list[pytest.Item] = []
    left = len(items)
    for index, pile in enumerate(piles):
        size = left // (workers - index)  # the slice worksteal hands this worker
        left -= size
        filler = max(0, size - len(pile))
        ordered += pile + short[:filler]
        del short[:filler]
    return ordered + short


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (the fake, FastAPI, the MCP SDK, hypothesis, schemathesis: ~200,000
    objects that live as long as the process) is moved out of the garbage collector's way
    (``gc.freeze``): each full collection during the tests, and the few pytest makes at the end of
    the session, then walk only what the tests made (in one process, ~0.1 s a collection less)."""
    gc.freeze()


class _FileSeconds:
    """Adds up the seconds each file's tests took, from start to finish (set-up and teardown
    included; pytest-xdist passes both events on to the controller), and merges them into the cache.
    """

    def __init__(self, cache: pytest.Cache) -> None:
        self.cache = cache
        self.seconds: collections.Counter[str] = collections.Counter()

    # A file's seconds are the sum of its tests' finish times less the sum of their start times:
    # no pairing needed, so a node id that occurs more than once does no harm.
    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.seconds[_file(nodeid)] -= time.monotonic()

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        self.seconds[_file(nodeid)] += time.monotonic()

    def pytest_sessionfinish(self) -> None:
        # a test that started and never finished (an interrupted run) leaves its file negative
        measured = {name: round(seconds, 2) for name, seconds in self.seconds.items() if seconds >= 0}
        self.cache.set(FILE_SECONDS, {**self.cache.get(FILE_SECONDS, {}), **measured})


def pytest_configure(config: pytest.Config) -> None:
    cache: pytest.Cache | None = getattr(config, "cache", None)
    if cache is not None and not hasattr(config, "workerinput"):  # xdist's workers only read it
        config.pluginmanager.register(_FileSeconds(cache), "fake-lucy-file-seconds")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fake(fake_lucy: InProcessFake) -> InProcessFake:
    """The plugin's in-process fake (``fake_lucy``), reset for this test."""
    return fake_lucy


@pytest.fixture
async def api(fake: InProcessFake) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client with the dev token; every response is checked against the contract."""
    async with fake.client(event_hooks=HOOKS) as client:
        yield client


@pytest.fixture
async def admin(fake: InProcessFake) -> AsyncIterator[FakeAdmin]:
    async with fake.client(fake.admin_token, event_hooks=HOOKS) as client:
        yield FakeAdmin(client)


@pytest.fixture
def live(fake_lucy_server: LiveServer) -> LiveServer:
    """The plugin's real uvicorn server (``fake_lucy_server``), reset for this test."""
    return fake_lucy_server


@pytest.fixture
async def live_admin(live: LiveServer) -> AsyncIterator[FakeAdmin]:
    async with live.client(live.admin_token, event_hooks=HOOKS) as client:
        yield FakeAdmin(client)
