"""Synchronous access to one fake's control state, for the plugin's hooks (``testing.strict``).

pytest hooks are not async, so an in-process fake is read through the domain directly (its
database, in this thread), and any other fake through its control API with a blocking httpx client.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from fake_lucy import __version__
from fake_lucy.addresses import loopback_url
from fake_lucy.domain import admin, findings, snapshot
from fake_lucy.domain.errors import DomainError
from fake_lucy.domain.records import journal_dict
from fake_lucy.runtime import FakeLucy
from fake_lucy.store.queries import JournalFilter
from fake_lucy.testing.admin import describe_problem
from fake_lucy.testing.fakes import InProcessFake
from fake_lucy.testing.tls import control_request, shared_tls_context

__all__ = ["Baseline", "Control", "for_fixture_value"]

_PAGE = 1000


@dataclass(frozen=True, slots=True)
class Baseline:
    """What a fake held when a test began: its findings and its newest journal row."""

    finding_ids: frozenset[str]
    last_request_id: str | None


class Control(ABC):
    """One fake, as the hooks see it; ``identity`` tells two handles of one fake apart from two fakes."""

    identity: object
    fixture: str = ""  # the name of the test's fixture it came from
    shared: bool = False  # a session's own tenant of a shared fake (``pytest --lucy-url``)
    fresh: bool = False  # reset for this test by the plugin's fixture: all it holds is the test's

    @abstractmethod
    def findings(self) -> list[dict[str, Any]]: ...

    @abstractmethod
    def journal(self) -> list[dict[str, Any]]: ...

    @abstractmethod
    def last_request_id(self) -> str | None:
        """The newest journal row's request id."""

    @abstractmethod
    def snapshot(self) -> dict[str, Any]: ...

    @abstractmethod
    def restore(self, document: Any) -> None: ...

    def baseline(self) -> Baseline:
        if self.fresh:  # everything since the fixture's reset is the test's, its setup's included
            return Baseline(finding_ids=frozenset(), last_request_id=None)
        return Baseline(
            finding_ids=frozenset(item["finding_id"] for item in self.findings()),
            last_request_id=self.last_request_id(),
        )

    def dump(self, test: str, baseline: Baseline) -> dict[str, Any]:
        """``{test, fixture, snapshot, journal, findings}``: the state now, and the test's own
        requests and findings (those after the baseline); ``fixture`` names the test's fixture that
        is this fake."""
        journal = self.journal()
        ids = [row["request_id"] for row in journal]
        if baseline.last_request_id in ids:
            journal = journal[ids.index(baseline.last_request_id) + 1 :]
        return {
            "test": test,
            "fixture": self.fixture,
            "snapshot": self.snapshot(),
            "journal": journal,
            "findings": [item for item in self.findings() if item["finding_id"] not in baseline.finding_ids],
        }


class InProcessControl(Control):
    def __init__(self, fake: FakeLucy) -> None:
        self.fake = fake
        self.identity = fake

    def findings(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        after = 0
        with self.fake.db.write() as conn:
            while True:
                page = findings.findings(conn, after=after, limit=_PAGE)
                items.extend(findings.finding_dict(record) for record in page.items)
                if page.last is None:
                    return items
                after = page.last

    def journal(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        after = 0
        with self.fake.db.write() as conn:
            while True:
                page = admin.journal(conn, JournalFilter(), after=after, limit=_PAGE)
                rows.extend(journal_dict(row) for row in page.items)
                if page.last is None:
                    return rows
                after = page.last

    def last_request_id(self) -> str | None:
        with self.fake.db.write() as conn:
            page = admin.journal(conn, JournalFilter(newest=1), after=0, limit=1)
        return page.items[-1].request_id if page.items else None

    def snapshot(self) -> dict[str, Any]:
        with self.fake.db.write() as conn:
            return snapshot.export_state(conn, fake_version=__version__)

    def restore(self, document: Any) -> None:
        try:
            with self.fake.db.write() as conn:
                snapshot.restore_state(conn, document)
        except DomainError as exc:
            raise ValueError(f"the snapshot cannot be restored: {exc.detail} {exc.details or ''}") from None


class HttpControl(Control):
    """A fake over its control API; ``tenant``: the session's own tenant of a shared fake
    (``pytest --lucy-url``), whose admin token reaches that tenant alone."""

    def __init__(self, base_url: str, admin_token: str, tenant: str | None = None) -> None:
        self.base_url = base_url
        self.admin_token = admin_token
        self.tenant = tenant
        self.identity = (base_url, tenant)
        self.shared = tenant is not None

    def _call(self, method: str, path: str, **options: Any) -> Any:
        """The answer of a control call; what goes wrong is ``ValueError`` with one line."""
        try:
            response = control_request(self.base_url, self.admin_token, method, path, timeout=30, **options)
        except httpx.TransportError as exc:  # the fake stopped, or the way to it
            raise ValueError(
                f"the fake at {self.base_url} cannot be reached ({method} /_fake{path}):"
                f" {type(exc).__name__}: {exc}"
            ) from None
        if response.status_code == 401 and self.tenant is not None:
            raise ValueError(
                f"this session's tenant {self.tenant} is gone from the shared fake (deleted, taken by"
                f" fake-lucy tenants prune, or a server reset): {method} /_fake{path} answered 401"
            )
        if response.status_code >= 400:
            raise ValueError(f"the fake answered {method} /_fake{path} with {_problem(response)}")
        try:
            return response.json()
        except ValueError:
            raise ValueError(
                f"the answer to {method} /_fake{path} at {self.base_url} is not JSON: not fake-lucy's"
            ) from None

    def _pages(self, path: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = self._call("GET", path, params={} if cursor is None else {"cursor": cursor})
            items.extend(page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                return items

    def findings(self) -> list[dict[str, Any]]:
        return self._pages("/findings")

    def journal(self) -> list[dict[str, Any]]:
        return self._pages("/requests")

    def last_request_id(self) -> str | None:
        items = self._call("GET", "/requests", params={"limit": 1})["items"]
        return str(items[-1]["request_id"]) if items else None

    def snapshot(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/snapshot")
        return result

    def restore(self, document: Any) -> None:
        if self.tenant is not None:
            held = tenant_ids(document)
            if held != [self.tenant]:
                raise ValueError(
                    f"on a shared fake (--lucy-url) a session restores only a snapshot of its own"
                    f" tenant ({self.tenant}), and this one holds {', '.join(held) or 'no tenant'}:"
                    " there the ids of memories, proposals, accounts and credentials are shared by"
                    " every session, so another fake's state cannot be loaded into one of them; run"
                    " this test on the plugin's own fake (without --lucy-url)"
                )
        self._call("PUT", "/snapshot", json=document)


def tenant_ids(document: Any) -> list[str]:
    tenants = document.get("tenants") if isinstance(document, dict) else None
    if not isinstance(tenants, list):
        return []
    return [str(item.get("id")) for item in tenants if isinstance(item, dict)]


def _problem(response: httpx.Response) -> str:
    """The problem's one line (as ``AdminError`` words it), or the status alone for another body."""
    try:
        problem = response.json()
    except ValueError:
        return str(response.status_code)
    return (
        describe_problem(response.status_code, problem)
        if isinstance(problem, dict)
        else str(response.status_code)
    )


def for_fixture_value(value: Any, beside: Sequence[object] = ()) -> Control | None:
    """The control handle of a fixture value that is a fake, else None. ``beside``: the test's
    other fixture values.

    A value of another package shaped like a fake (``base_url`` and ``admin_token``: a fake running
    elsewhere) is one only when a fake-lucy answers there (``/healthz``, which takes no token), and
    not when its address and token are those of the test's in-process fake (a value wrapping it):
    its token is never sent to anything else."""
    if isinstance(value, InProcessFake):
        return InProcessControl(value.fake)
    base_url, admin_token = getattr(value, "base_url", None), getattr(value, "admin_token", None)
    if not isinstance(base_url, str) or not isinstance(admin_token, str):
        return None
    if not type(value).__module__.startswith("fake_lucy."):
        in_process = (fake for fake in beside if isinstance(fake, InProcessFake))
        if any((fake.base_url, fake.admin_token) == (base_url, admin_token) for fake in in_process):
            return None
        if not _fake_lucy_at(base_url):
            return None
    from fake_lucy.testing.shared import SharedTenant

    tenant = value.tenant if isinstance(value, SharedTenant) else None
    return HttpControl(base_url, admin_token, tenant)


_FAKES_SEEN: set[str] = set()  # addresses where a fake-lucy answered (one question per address)


def _fake_lucy_at(base_url: str) -> bool:
    """Whether a fake-lucy answers at ``base_url``: its ``/healthz`` names its version in a header."""
    if base_url in _FAKES_SEEN:
        return True
    try:
        response = httpx.get(
            base_url.rstrip("/") + "/healthz",
            timeout=5,
            verify=shared_tls_context(),
            trust_env=not loopback_url(base_url),
            follow_redirects=False,
        )
    except (httpx.HTTPError, ValueError):  # nothing there, or no URL httpx takes
        return False
    if response.status_code != 200 or "fake-lucy-version" not in response.headers:
        return False
    _FAKES_SEEN.add(base_url)
    return True
