from __future__ import annotations

import pytest

from tests.contract.fuzzing import TALLY


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TALLY.examples:
        terminalreporter.section("schemathesis runs")
        for line in TALLY.lines():
            terminalreporter.write_line(line)
