"""Browser tests run a real headless Chromium through Playwright (never a downloaded browser).

Chromium is looked for at ``FAKE_LUCY_CHROMIUM``, then ``/usr/bin/chromium`` and ``chromium`` on
the PATH. Without one every browser test is skipped with one line saying how to enable them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

ENABLE = "no Chromium found: apt-get install -y chromium (or set FAKE_LUCY_CHROMIUM) to run the browser tests"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str | None:
    for candidate in (os.environ.get("FAKE_LUCY_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """A headless Chromium (Playwright's sync API); skips the test when none is installed.

    Module-scoped: while Playwright's sync API is open it holds an event loop on this thread, which
    the async tests of other modules need free."""
    executable = chromium_path()
    if executable is None:  # the browser test files skip themselves whole before this
        pytest.skip(ENABLE)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()
