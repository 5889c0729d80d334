"""The plugin's judgement of a test's client (SPEC 3.8, 3.9), registered by ``pytest_plugin``.

- ``--lucy-strict`` (or ``@pytest.mark.lucy_strict`` on a test): a test whose requests produced a
  finding fails when its body is over, with one line per finding (code, request ids, detail).
  ``@pytest.mark.lucy_allow("code", ...)`` lets a test produce those codes on purpose.
- ``@pytest.mark.lucy_snapshot("file.json")``: the fake is put into that snapshot before the test
  (a relative path is read next to the test file).
- ``--lucy-dump-on-failure DIR``: for each test failed in its body or its teardown, one JSON file
  ``{test, fixture, snapshot, journal, findings}`` per fake it used, named after its node id.

The fakes of a test are found among its fixture values: the plugin's own (``fake_lucy``,
``fake_lucy_server``, ``ServeProcess``) and any object with ``base_url`` and ``admin_token``
(a fake that runs elsewhere). This module imports only the standard library and pytest at import
time; what talks to a fake is imported when a test needs it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from fake_lucy.dumps import snapshot_in

if TYPE_CHECKING:
    from fake_lucy.testing._control import Baseline, Control

__all__ = ["dump_file_name", "format_findings"]

_BASELINES = pytest.StashKey[list[tuple["Control", "Baseline"]]]()
_DUMPED = pytest.StashKey[bool]()
_NOTES = pytest.StashKey[list[str]]()  # what a teardown's dump could not write, for its report
# the fakes that the plugin's fixtures reset for this test: ``id`` of the fixture value → its
# fixture's name and the value
RESET_FOR_TEST = pytest.StashKey[dict[int, tuple[str, Any]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fake_lucy", "fake-lucy (Lucy Agent Memory fake)")
    group.addoption(
        "--lucy-strict",
        action="store_true",
        default=False,
        help="fail every test whose client produced a finding (GET /_fake/findings)",
    )
    group.addoption(
        "--lucy-dump-on-failure",
        metavar="DIR",
        default=None,
        help="write, for each failed test, its fake's snapshot, journal and findings to DIR",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "lucy_strict: fail this test if its client produced a finding (as --lucy-strict)"
    )
    config.addinivalue_line(
        "markers", "lucy_allow(*codes): findings of these codes do not fail this test under strict mode"
    )
    config.addinivalue_line(
        "markers", "lucy_snapshot(path): put the fake into this snapshot file before the test"
    )


def format_findings(findings: list[dict[str, Any]]) -> str:
    """One line per finding: its code, the request ids that show it and its sentence."""
    count = len(findings)
    lines = [f"the client broke a Lucy client rule: {count} finding{'s' if count != 1 else ''}"]
    lines.extend(
        f"  {item['code']}: {', '.join(item['request_ids'])} — {item['detail']}" for item in findings
    )
    return "\n".join(lines)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_WRITTEN: dict[Path, str] = {}  # the dumps of this run: file → the test's node id


def dump_file_name(nodeid: str, fake: int = 1, *, digest_always: bool = False) -> str:
    """The node id with every character outside ``A-Za-z0-9._-`` replaced by ``_``, plus ``.json``
    (the test's second fake and on: ``.fake2.json``, …). A longer one keeps its first characters,
    and one whose id has characters beyond a path's and ``::`` (a parametrized test's ``[a/b]`` and
    ``[a_b]`` would meet), ends with hex digits of the id's SHA-256: two ids, two files (the rule
    and its numbers: ``dump_on_failure`` in contracts/fake-control.contract.json)."""
    from lucy_memory._contract import load_contract  # only once a test failed

    rule = load_contract("fake-control")["dump_on_failure"]
    longest, digits = int(rule["max_name_chars"]), int(rule["digest_hex_digits"])
    name = _UNSAFE.sub("_", nodeid)
    digest = hashlib.sha256(nodeid.encode("utf-8", "surrogatepass")).hexdigest()[:digits]
    if len(name) > longest:
        name = f"{name[: longest - digits - 1]}-{digest}"
    elif digest_always or _UNSAFE.search(nodeid.replace("::", "").replace("/", "")):
        name = f"{name}-{digest}"
    return name + ("" if fake == 1 else f".fake{fake}") + ".json"


def _strict(item: pytest.Item) -> bool:
    return bool(item.config.getoption("--lucy-strict")) or item.get_closest_marker("lucy_strict") is not None


def _allowed(item: pytest.Item) -> set[str]:
    """The codes of the test's ``lucy_allow`` markers; a code no finding has (a typo would allow
    nothing, silently) fails the test, naming the codes there are."""
    from fake_lucy.domain.findings import CODES  # only for a test with the marker

    allowed: set[str] = set()
    for marker in item.iter_markers("lucy_allow"):
        allowed.update(str(code) for code in marker.args)
    unknown = sorted(allowed - set(CODES))
    if unknown:
        pytest.fail(
            f"lucy_allow names no finding code: {', '.join(unknown)} (the codes: {', '.join(CODES)})",
            pytrace=False,
        )
    return allowed


def _fixture_values(item: pytest.Item) -> Iterator[tuple[str, Any]]:
    """Each fixture of the test: its name and its value; then the plugin's fakes reset for it that
    are none of them (reached through ``request.getfixturevalue``, in a fixture or the test)."""
    funcargs: dict[str, Any] = getattr(item, "funcargs", {})
    yield from funcargs.items()
    given = {id(value) for value in funcargs.values()}
    for identity, (name, value) in item.stash.get(RESET_FOR_TEST, {}).items():
        if identity not in given:
            yield name, value


def _may_be_a_fake(value: Any) -> bool:
    """One of the plugin's fakes, or a value shaped like one (``base_url`` and ``admin_token``)."""
    if type(value).__module__.startswith("fake_lucy."):
        return True
    return isinstance(getattr(value, "base_url", None), str) and isinstance(
        getattr(value, "admin_token", None), str
    )


def _controls(item: pytest.Item) -> list[Control]:
    """One control handle per distinct fake among the test's fixture values."""
    candidates = [(name, value) for name, value in _fixture_values(item) if _may_be_a_fake(value)]
    candidates.sort(key=lambda candidate: candidate[0].startswith("_"))  # fake_lucy, not its session's
    if not candidates:  # a test that uses no fake imports none of it, strict or not
        return []
    from fake_lucy.testing import _control

    controls: list[Control] = []
    seen: set[object] = set()
    reset = item.stash.get(RESET_FOR_TEST, {})
    values = [value for _, value in candidates]
    for name, value in candidates:
        found = _control.for_fixture_value(value, values)
        if found is not None and found.identity not in seen:
            seen.add(found.identity)
            found.fixture = name  # a dump says which of the test's fakes it holds
            # a snapshot restored at the call may bring a journal: the test's requests come after it
            found.fresh = id(value) in reset and item.get_closest_marker("lucy_snapshot") is None
            controls.append(found)
    return controls


def _watching(item: pytest.Item) -> bool:
    config = item.config
    return (
        _strict(item)
        or config.getoption("--lucy-dump-on-failure") is not None
        or item.get_closest_marker("lucy_snapshot") is not None
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    # a lucy_allow code no finding has fails the test, strict or not (a typo allows nothing); a
    # watched test fails so once its baselines are taken, so that it is dumped as any failed test is
    allows = item.get_closest_marker("lucy_allow") is not None
    if not _watching(item):
        if allows:
            _allowed(item)
        return (yield)
    controls = _controls(item)
    marker = item.get_closest_marker("lucy_snapshot")
    if marker is not None:
        _restore_snapshot(item, marker, controls)
    item.stash[_BASELINES] = _judged(lambda: [(control, control.baseline()) for control in controls])
    allowed = _allowed(item) if allows else set()
    reset_before = len(item.stash.get(RESET_FOR_TEST, {}))
    try:
        result = yield
    finally:  # failed or not: a dump shows them too
        if len(item.stash.get(RESET_FOR_TEST, {})) != reset_before:
            _add_reset_during_the_test(item)
    if _strict(item):
        found = _judged(
            lambda: [
                finding
                for control, baseline in item.stash[_BASELINES]
                for finding in control.findings()
                if finding["finding_id"] not in baseline.finding_ids and finding["code"] not in allowed
            ]
        )
        if found:
            pytest.fail(format_findings(found), pytrace=False)
    return result


_R = TypeVar("_R")


def _judged(read: Callable[[], _R]) -> _R:
    """``read()`` of the test's fakes; a fake that cannot answer (it stopped, the session's tenant
    is gone) fails the test with that one line, not the plugin's frames."""
    try:
        return read()
    except ValueError as exc:
        problem = str(exc)
    pytest.fail(f"fake_lucy: the test's fake could not be read: {problem}", pytrace=False)


def _add_reset_during_the_test(item: pytest.Item) -> None:
    """The fakes the test body reached through ``request.getfixturevalue``: reset for it then, so
    all they hold is the test's (an empty baseline)."""
    baselines = item.stash[_BASELINES]
    known = {control.identity for control, _ in baselines}
    for control in _controls(item):
        if control.identity not in known and control.fresh:
            baselines.append((control, control.baseline()))


def _restore_snapshot(item: pytest.Item, marker: pytest.Mark, controls: list[Control]) -> None:
    # a mistake in the marker fails its test with one line, as every other lucy_snapshot problem does
    if len(marker.args) != 1 or not isinstance(marker.args[0], str | os.PathLike):
        pytest.fail("lucy_snapshot takes one path, e.g. lucy_snapshot('state.json')", pytrace=False)
    path = Path(marker.args[0])
    if not path.is_absolute():
        path = Path(str(item.path)).parent / path
    if not controls:
        pytest.fail("lucy_snapshot needs a fake fixture (fake_lucy, fake_lucy_server)", pytrace=False)
    unreadable: str | None = None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(document, dict):
            document = snapshot_in(document)  # a failure dump: the snapshot in it
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        unreadable = str(exc)
    if unreadable is not None:  # outside the except: one line, no chained error
        pytest.fail(f"lucy_snapshot: cannot read the snapshot {path}: {unreadable}", pytrace=False)
    for control in controls:
        try:
            control.restore(document)
        except ValueError as exc:
            refused = str(exc)
        else:
            continue
        # one line naming the file, never a traceback (and outside the except: no chained one)
        pytest.fail(f"lucy_snapshot: {path}: {refused}", pytrace=False)
    _check_dev_tenant(item, path, document, controls)  # a snapshot the fake took, of other tenants


# The fixtures that call the fake with the dev seed's token (``lucy-dev-token``, tenant_dev).
_DEV_TOKEN_FIXTURES = frozenset({"lucy_client", "lucy_server_client", "lucy_sync_client", "lucy_mcp"})


def _check_dev_tenant(item: pytest.Item, path: Path, document: Any, controls: list[Control]) -> None:
    """On the plugin's own fake, a snapshot without tenant_dev (a ``--lucy-url`` session's dump
    holds that session's tenant alone) leaves the dev-token fixtures a token that answers 401:
    a test that uses one fails at once with one line, instead of with its first call."""
    from fake_lucy.domain.defaults import DEFAULTS
    from fake_lucy.testing._control import tenant_ids

    callers = sorted(_DEV_TOKEN_FIXTURES.intersection(getattr(item, "fixturenames", ())))
    held = tenant_ids(document)
    if not callers or DEFAULTS["tenant"] in held or any(control.shared for control in controls):
        return
    pytest.fail(
        f"lucy_snapshot: {path} holds {', '.join(held) or 'no tenant'} and not {DEFAULTS['tenant']},"
        f" whose dev token {', '.join(callers)} call{'s' if len(callers) == 1 else ''} the fake with"
        " (a --lucy-url session's dump holds that session's tenant alone): drive this test through"
        f" the admin API (fake_lucy.admin, fake_lucy_server.admin), or look around in that state"
        f" with fake-lucy serve --import {path}",
        pytrace=False,
    )


def _dump(item: pytest.Item) -> list[str]:
    """``--lucy-dump-on-failure``: one file per fake the test used, written once per test; what
    could not be written, one line each (a dump must never stop the run: the fake went with the
    failure, the disk is full)."""
    directory = item.config.getoption("--lucy-dump-on-failure")
    if directory is None or item.stash.get(_DUMPED, False):
        return []
    item.stash[_DUMPED] = True
    path = Path(directory)
    if not path.is_absolute():  # where pytest was started, whatever folder the test moved to
        path = item.config.invocation_params.dir / path
    notes: list[str] = []
    baselines: list[tuple[Control, Baseline]] = item.stash.get(_BASELINES, [])
    for number, (control, baseline) in enumerate(baselines, start=1):
        target = path / dump_file_name(item.nodeid, number)
        if _WRITTEN.setdefault(target, item.nodeid) != item.nodeid:
            # another test of this run has the name (dir/test_b.py::x and dir_test_b.py::x): never
            # written over, this one's ends with its id's digest
            target = path / dump_file_name(item.nodeid, number, digest_always=True)
        try:
            path.mkdir(parents=True, exist_ok=True)
            document = control.dump(item.nodeid, baseline)
            target.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        except Exception as exc:  # any error: a dump reports, it never stops the run
            notes.append(f"no dump written to {target}: {type(exc).__name__}: {exc}")
    return notes


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    """A teardown that fails (a fixture's check after the test) is dumped here, while the session's
    fakes are still open: the plugin closes them after the last test's teardown, around this."""
    __tracebackhide__ = True  # a user's failing finalizer shows its own frames, not this wrapper's
    try:
        return (yield)
    except BaseException:
        item.stash[_NOTES] = _dump(item)
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """A test that failed in its body is dumped when its report is made; one that failed in its
    teardown was dumped then (above). A failed set-up has none: the test never ran."""
    report = yield
    if report.when == "call" and report.failed:
        notes = _dump(item)
    elif report.when == "teardown":
        notes = item.stash.get(_NOTES, [])
    else:
        notes = []
    for note in notes:
        report.sections.append(("lucy dump", note))
    return report
