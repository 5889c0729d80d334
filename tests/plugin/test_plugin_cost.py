"""The plugin costs nothing when unused: loading it imports neither the fake nor its web stack."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

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


def _imported_by(code: str, cwd: Path) -> list[str]:
    script = f"import json, sys\n{code}\nprint(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    result = subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    imported: list[str] = json.loads(result.stdout.splitlines()[-1])
    return imported


def test_importing_the_plugin_module_imports_neither_the_fake_nor_fastapi_nor_mcp(tmp_path) -> None:
    assert _imported_by("import fake_lucy.testing.pytest_plugin", tmp_path) == []


def test_the_heavy_modules_are_what_a_fixture_imports(tmp_path) -> None:
    # The check above can fail: the fixtures' own module pulls in every one of them.
    imported = _imported_by("import fake_lucy.testing.pytest_plugin, fake_lucy.testing.fakes", tmp_path)
    assert set(imported) >= {"fake_lucy.app", "fastapi", "uvicorn", "sqlmodel", "lucy_memory"}


def test_the_public_names_of_fake_lucy_testing_still_resolve() -> None:
    import fake_lucy.testing as testing

    for name in testing.__all__:
        assert getattr(testing, name).__name__ == name
    unknown = "Nothing"
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        getattr(testing, unknown)


@pytest.mark.slow
def test_a_pytest_run_that_uses_no_fixture_loads_the_plugin_but_not_the_fake(tmp_path) -> None:
    (tmp_path / "test_plain.py").write_text(
        textwrap.dedent(
            f"""
            import sys

            def test_plain(request):
                assert request.config.pluginmanager.has_plugin("fake_lucy")
                assert [m for m in {list(HEAVY)!r} if m in sys.modules] == []
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error", "test_plain.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
