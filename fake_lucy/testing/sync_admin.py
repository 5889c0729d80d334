"""``SyncFakeAdmin``: the control API helper for synchronous tests and scripts.

```python
def test_a_reviewer_approves(fake_lucy_server, lucy_sync_client):
    proposed = lucy_sync_client.propose(...)
    fake_lucy_server.sync_admin.approve(proposed.proposal.id)
```

Every method is the one of ``FakeAdmin`` of the same name, run to completion over a blocking HTTP
connection: ``FakeAdmin`` is the one table of requests (paths, bodies, what each answer unwraps), and
its coroutines are driven here without an event loop. A ``FakeAdmin`` method that awaited anything
but its HTTP call would raise ``RuntimeError`` here rather than block. A test checks that each
coroutine method of ``FakeAdmin`` has its twin below, with the same parameters.
"""

from __future__ import annotations

import concurrent.futures
import functools
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import anyio
import httpx

from fake_lucy.addresses import loopback_url
from fake_lucy.testing.admin import AdminEvent, FakeAdmin
from fake_lucy.testing.tls import shared_tls_context
from lucy_memory._contract import PERMISSIONS

__all__ = ["SyncFakeAdmin"]

_T = TypeVar("_T")


class _BlockingTransport(httpx.AsyncBaseTransport):
    """An async transport whose requests complete on a blocking connection without suspending."""

    def __init__(self) -> None:
        self._transport = httpx.HTTPTransport(verify=shared_tls_context())

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        blocking = httpx.Request(request.method, request.url, headers=request.headers, content=request.read())
        response = self._transport.handle_request(blocking)
        try:
            content = b"".join(response.iter_raw())
        finally:
            response.close()
        return httpx.Response(response.status_code, headers=response.headers, content=content)

    async def aclose(self) -> None:
        self._transport.close()


def _run(coroutine: Coroutine[Any, Any, _T]) -> _T:
    try:
        coroutine.send(None)
    except StopIteration as finished:
        result: _T = finished.value
        return result
    coroutine.close()
    raise RuntimeError("a FakeAdmin method awaited something other than its HTTP call")


class SyncFakeAdmin:
    """``admin.approve(proposal_id)`` and friends, blocking; each returns the parsed answer and a
    problem answer raises ``AdminError``, exactly as ``FakeAdmin``.

    ``base_url`` is the fake's origin and ``admin_token`` its admin token (a tenant admin token with
    its ``tenant``, whose name the tenant-scoped methods default to); each call opens and closes
    its own connection, so one helper is safe to share between threads.
    """

    def __init__(
        self, base_url: str, admin_token: str, *, timeout: float = 30.0, tenant: str = "tenant_dev"
    ) -> None:
        self.base_url = base_url
        headers = {"Authorization": f"Bearer {admin_token}"}

        def blocking_client() -> httpx.AsyncClient:
            return httpx.AsyncClient(
                base_url=base_url, headers=headers, timeout=timeout, transport=_BlockingTransport()
            )

        def streaming_client() -> httpx.AsyncClient:
            return httpx.AsyncClient(
                base_url=base_url,
                headers=headers,
                timeout=timeout,
                verify=shared_tls_context(),
                trust_env=not loopback_url(base_url),  # no HTTP_PROXY to 127.0.0.1
            )

        self._admin = FakeAdmin(client_factory=blocking_client, tenant=tenant)
        # the event stream never ends, so it is read by an event loop of its own (``wait_for``)
        self._events = FakeAdmin(client_factory=streaming_client, tenant=tenant)

    def __repr__(self) -> str:
        return f"SyncFakeAdmin(base_url={self.base_url!r})"

    def _do(self, method: Callable[..., Coroutine[Any, Any, _T]], *args: Any, **kwargs: Any) -> _T:
        return _run(method(*args, **kwargs))

    def call(self, method: str, path: str, json: Any = None, **params: Any) -> Any:
        return self._do(self._admin.call, method, path, json, **params)

    def reset(self) -> dict[str, Any]:
        return self._do(self._admin.reset)

    # A deliberate blocking mirror of ``FakeAdmin.create_credential``: the same parameters, spelled
    # out so that they show in editors and type checkers (tests/plugin/test_sync_admin.py holds them equal).
    def create_credential(
        self,
        tenant: str | None = None,
        *,
        account: str | None = None,
        user: str | None = None,
        permissions: tuple[str, ...] = PERMISSIONS,
        scopes: list[dict[str, str]] | None = None,
        credits: int | None = None,
    ) -> dict[str, Any]:
        return self._do(
            self._admin.create_credential,
            tenant,
            account=account,
            user=user,
            permissions=permissions,
            scopes=scopes,
            credits=credits,
        )

    def revoke(self, credential_id: str) -> None:
        self._do(self._admin.revoke, credential_id)

    def set_balance(self, account: str, balance: int) -> dict[str, Any]:
        return self._do(self._admin.set_balance, account, balance)

    def proposals(self, **filters: Any) -> dict[str, Any]:
        return self._do(self._admin.proposals, **filters)

    def approve(self, proposal_id: str) -> dict[str, Any]:
        return self._do(self._admin.approve, proposal_id)

    def reject(self, proposal_id: str, reason_detail: str | None = None) -> dict[str, Any]:
        return self._do(self._admin.reject, proposal_id, reason_detail)

    def expire(self, proposal_id: str) -> dict[str, Any]:
        return self._do(self._admin.expire, proposal_id)

    def memories(self, **filters: Any) -> dict[str, Any]:
        return self._do(self._admin.memories, **filters)

    def delete_memory(self, memory_id: str) -> dict[str, Any]:
        return self._do(self._admin.delete_memory, memory_id)

    def restore_memory(self, memory_id: str) -> dict[str, Any]:
        return self._do(self._admin.restore_memory, memory_id)

    def policy(self, tenant: str | None = None) -> dict[str, Any]:
        return self._do(self._admin.policy, tenant)

    def set_policy(self, tenant: str | None = None, **policy: Any) -> dict[str, Any]:
        return self._do(self._admin.set_policy, tenant, **policy)

    def create_tenant(self, tenant: str | None = None, *, credits: int | None = None) -> dict[str, Any]:
        """A new tenant (server admin only): ``{tenant, admin_token, credential}``."""
        return self._do(self._admin.create_tenant, tenant, credits=credits)

    def delete_tenant(self, tenant: str | None = None) -> None:
        self._do(self._admin.delete_tenant, tenant)

    def tenants(self) -> list[dict[str, Any]]:
        """Every tenant (all pages) in the order they were made; a tenant admin's: its own."""
        return self._do(self._admin.tenants)

    def clock(self) -> dict[str, Any]:
        return self._do(self._admin.clock)

    def advance_clock(self, seconds: float) -> dict[str, Any]:
        return self._do(self._admin.advance_clock, seconds)

    def set_clock(self, *, now: str | None = None, frozen: bool | None = None) -> dict[str, Any]:
        return self._do(self._admin.set_clock, now=now, frozen=frozen)

    def set_billing(self, available: bool) -> dict[str, Any]:
        return self._do(self._admin.set_billing, available)

    def add_fault(self, operation: str, status: int, **options: Any) -> dict[str, Any]:
        return self._do(self._admin.add_fault, operation, status, **options)

    def faults(self) -> list[dict[str, Any]]:
        return self._do(self._admin.faults)

    def clear_faults(self) -> None:
        self._do(self._admin.clear_faults)

    def requests(self, **filters: Any) -> list[dict[str, Any]]:
        """Every journal row matching the filters (all pages), oldest first."""
        return self._do(self._admin.requests, **filters)

    def ledger(self, **filters: Any) -> list[dict[str, Any]]:
        return self._do(self._admin.ledger, **filters)

    def findings(self, **filters: Any) -> list[dict[str, Any]]:
        """Every finding (SPEC 3.8) matching the filters, oldest first."""
        return self._do(self._admin.findings, **filters)

    def wait_for(
        self,
        type_: str,
        *,
        timeout: float = 5.0,
        after: int | None = None,
        **data: Any,
    ) -> AdminEvent:
        """The first event of ``type_`` (with the given data values) from now on, or after ``after``;
        ``TimeoutError`` after ``timeout`` seconds. The stream is read by an event loop of its own,
        in a thread of its own, so this works whether or not the caller's thread runs a loop."""
        waiting = functools.partial(self._events.wait_for, type_, timeout=timeout, after=after, **data)
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="fake-lucy-events") as thread:
            return thread.submit(anyio.run, waiting).result()
