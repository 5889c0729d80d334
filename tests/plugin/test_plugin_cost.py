"""The plugin costs nothing when unused: loading it imports neither the fake nor its web stack."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# What a pytest run pays for only when a test asks for one of the plugin's fixtures.
HEAVY = (
    "fake_lucy.app",
    "fake_lucy.runtime",
    "fake_lucy.testing.fakes",
    "fastapi",
    "starlette",
    "uvicorn",
    "sqlmodel",
    "sqlalchemy",
    "mcp",
    "lucy_memory",
)


def test_importing_the_plugin_module_imports_none_of_what_its_fixtures_import(tmp_path) -> None:
    script = (
        "import json, sys\n"
        f"heavy = {list(HEAVY)!r}\n"
        "import fake_lucy.testing.pytest_plugin\n"
        "print(json.dumps([m for m in heavy if m in sys.modules]))\n"
        "import fake_lucy.testing.fakes\n"  # what the fixtures import, for contrast
        "print(json.dumps([m for m in heavy if m in sys.modules]))\n"
    )
    result = subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    plugin_only, with_fixtures = (json.loads(line) for line in result.stdout.splitlines())
    assert plugin_only == []
    assert set(with_fixtures) >= {"fake_lucy.app", "fastapi", "uvicorn", "lucy_memory"}


def test_the_public_names_of_fake_lucy_testing_still_resolve() -> None:
    import fake_lucy.testing as testing

    for name in testing.__all__:
        assert getattr(testing, name).__name__ == name
    unknown = "Nothing"
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        getattr(testing, unknown)


def test_a_strict_run_of_tests_that_use_no_fake_imports_none_of_it(pytester: pytest.Pytester) -> None:
    """Not during the tests, and not after them: the last test's teardown and the session's end
    close the plugin's fakes, of which there are none."""
    pytester.makepyfile(
        test_plain="""
        def test_plain(tmp_path):
            assert 1 + 1 == 2
        """
    )
    report = pytester.path / "heavy.json"
    pytester.makeconftest(
        f"""
        import json, sys
        from pathlib import Path

        def _heavy():
            return [m for m in {list(HEAVY)!r} if m in sys.modules]

        def pytest_runtest_call(item):
            Path({str(report)!r}).write_text(json.dumps({{"during": _heavy()}}))

        def pytest_unconfigure(config):
            seen = json.loads(Path({str(report)!r}).read_text())
            Path({str(report)!r}).write_text(json.dumps({{**seen, "after": _heavy()}}))
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-s", "--lucy-strict", "--lucy-dump-on-failure=d"
    )
    result.assert_outcomes(passed=1)
    assert json.loads(report.read_text()) == {"during": [], "after": []}
