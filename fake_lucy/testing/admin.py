"""A typed helper over the control API, for tests and scripts."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from fake_lucy.addresses import path_segment
from lucy_memory._contract import PERMISSIONS

__all__ = ["AdminError", "AdminEvent", "EventWatch", "FakeAdmin"]


@dataclass(frozen=True, slots=True)
class AdminEvent:
    """One event of ``GET /_fake/events`` (SPEC 3.7)."""

    id: int
    type: str
    at: str
    tenant: str | None
    data: dict[str, Any]


class EventWatch:
    """An open event stream: ``await watch.wait_for(type, **data)`` returns the next matching event."""

    def __init__(self, lines: AsyncIterator[str]) -> None:
        self._lines = lines
        self.seen: list[AdminEvent] = []

    async def next(self) -> AdminEvent:
        """The next event of the stream (comments skipped)."""
        data: list[str] = []
        async for line in self._lines:
            if line == "":
                if data:
                    body = json.loads("\n".join(data))
                    event = AdminEvent(body["id"], body["type"], body["at"], body["tenant"], body["data"])
                    self.seen.append(event)
                    return event
                continue
            field, _, value = line.partition(":")
            if field == "data":
                data.append(value.removeprefix(" "))
        raise EOFError("the event stream ended")

    async def wait_for(
        self,
        type_: str,
        *,
        timeout: float = 5.0,  # noqa: ASYNC109 - SPEC 3.7 names the call: wait_for(type, timeout=…)
        **data: Any,
    ) -> AdminEvent:
        """The next event of ``type_`` whose data has the given values; ``TimeoutError`` after
        ``timeout`` seconds."""
        with _deadline(type_, data, timeout):
            return await self._matching(type_, data)

    async def _matching(self, type_: str, data: dict[str, Any]) -> AdminEvent:
        while True:
            event = await self.next()
            if event.type == type_ and all(event.data.get(k) == v for k, v in data.items()):
                return event


@contextlib.contextmanager
def _deadline(type_: str, data: dict[str, Any], timeout: float) -> Iterator[None]:
    """``anyio.fail_after(timeout)``, its ``TimeoutError`` saying which event did not come."""
    try:
        with anyio.fail_after(timeout):
            yield
    except TimeoutError:
        raise TimeoutError(f"no {type_} event{_described(data)} within {timeout} s") from None


def _described(data: dict[str, Any]) -> str:
    return "" if not data else " with " + ", ".join(f"{k}={v!r}" for k, v in data.items())


class AdminError(Exception):
    """A control API call failed; ``problem`` is the RFC 9457 body. The message shows everything the
    problem says: status, code, detail, and each of ``details.errors`` (pointer and rule) or the
    other ``details`` fields, e.g.
    ``422 invalid_request: the request does not match the schema: /status must be one of: 429, …``."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        super().__init__(describe_problem(status, problem))
        self.status = status
        self.problem = problem
        self.code = problem.get("code")


def _admin_error(response: httpx.Response) -> AdminError:
    """The ``AdminError`` of a failed call; an answer that is no problem document (a proxy's HTML
    502, a server that is not the fake) keeps its status and says so."""
    try:
        problem = response.json()
    except ValueError:
        problem = None
    if not isinstance(problem, dict):
        kind = response.headers.get("content-type") or "no content type"
        problem = {
            "detail": f"the answer is no problem document ({kind}): not fake-lucy's (a proxy's, or"
            " another server's on that address)"
        }
    return AdminError(response.status_code, problem)


def describe_problem(status: int, problem: dict[str, Any]) -> str:
    """One line: status, code, detail, and each of ``details.errors`` (or the other ``details``)."""
    code = problem.get("code")
    text = f"{status}{'' if code is None else f' {code}'}: {problem.get('detail')}"
    details = problem.get("details")
    if not isinstance(details, dict) or not details:
        return text
    errors = details.get("errors")
    if isinstance(errors, list):
        listed = [
            f"{item.get('pointer') or '/'} {item.get('detail')}" for item in errors if isinstance(item, dict)
        ]
        return f"{text}: {'; '.join(listed)}" if listed else text
    return f"{text} ({', '.join(f'{key}={value}' for key, value in details.items())})"


class FakeAdmin:
    """``await admin.approve(proposal_id)`` and friends; each returns the parsed answer.

    Give it an ``httpx.AsyncClient`` on the fake's origin with an admin token (the server's or a
    tenant's), or a factory of such clients (one short-lived client per call, safe across event
    loops). ``tenant`` is the default of the calls that name one (a tenant admin's own tenant).
    """

    def __init__(
        self,
        http: httpx.AsyncClient | None = None,
        *,
        client_factory: Callable[[], httpx.AsyncClient] | None = None,
        tenant: str = "tenant_dev",
    ) -> None:
        if (http is None) == (client_factory is None):
            raise ValueError("give FakeAdmin exactly one of http and client_factory")
        self.http = http
        self._factory = client_factory
        self.tenant = tenant

    async def call(self, method: str, path: str, json: Any = None, **params: Any) -> Any:
        query = {
            k: ("true" if v is True else "false" if v is False else v)
            for k, v in params.items()
            if v is not None
        }
        if self.http is not None:
            response = await self.http.request(method, "/_fake" + path, json=json, params=query)
        else:
            assert self._factory is not None
            async with self._factory() as http:
                response = await http.request(method, "/_fake" + path, json=json, params=query)
        if response.status_code >= 400:
            raise _admin_error(response)
        return None if response.status_code == 204 else response.json()

    @contextlib.asynccontextmanager
    async def watch(self, after: int | None = None) -> AsyncIterator[EventWatch]:
        """The event stream from now on (or after the event id ``after``), open for the block:

        ```python
        async with admin.watch() as events:
            ...  # make the change
            created = await events.wait_for("proposal.created", timeout=1)
        ```
        """
        headers = {"Accept": "text/event-stream"}
        if after is not None:
            headers["Last-Event-ID"] = str(after)
        async with contextlib.AsyncExitStack() as stack:
            http = self.http
            if http is None:
                assert self._factory is not None
                http = await stack.enter_async_context(self._factory())
            response = await stack.enter_async_context(
                http.stream("GET", "/_fake/events", headers=headers, timeout=None)
            )
            if response.status_code >= 400:
                await response.aread()
                raise _admin_error(response)
            yield EventWatch(response.aiter_lines())

    async def wait_for(
        self,
        type_: str,
        *,
        timeout: float = 5.0,  # noqa: ASYNC109 - SPEC 3.7 names the call: wait_for(type, timeout=…)
        after: int | None = None,
        **data: Any,
    ) -> AdminEvent:
        """The first event of ``type_`` (with the given data values) from now on, or after the event
        id ``after``. A change made before this call is seen only with ``after`` (or ``watch``).
        ``TimeoutError`` after ``timeout`` seconds, opening the stream included."""
        with _deadline(type_, data, timeout):
            async with self.watch(after) as events:
                return await events._matching(type_, data)

    async def _object(self, method: str, path: str, json: Any = None, **params: Any) -> dict[str, Any]:
        """A call whose answer is a JSON object."""
        answer: dict[str, Any] = await self.call(method, path, json, **params)
        return answer

    async def _part(self, key: str, method: str, path: str, json: Any = None) -> dict[str, Any]:
        """A call whose answer wraps the object it is about: ``{"proposal": {...}}``."""
        part: dict[str, Any] = (await self._object(method, path, json))[key]
        return part

    async def reset(self) -> dict[str, Any]:
        return await self._object("POST", "/reset")

    async def create_credential(
        self,
        tenant: str | None = None,
        *,
        account: str | None = None,
        user: str | None = None,
        permissions: tuple[str, ...] = PERMISSIONS,
        scopes: list[dict[str, str]] | None = None,
        credits: int | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "tenant": tenant or self.tenant,
            "permissions": list(permissions),
            "scopes": scopes or [],
        }
        for name, value in (("account", account), ("user", user), ("credits", credits)):
            if value is not None:
                body[name] = value
        return await self._object("POST", "/credentials", body)

    async def revoke(self, credential_id: str) -> None:
        await self.call("DELETE", f"/credentials/{path_segment(credential_id)}")

    async def set_balance(self, account: str, balance: int) -> dict[str, Any]:
        return await self._object("PUT", f"/accounts/{path_segment(account)}/credits", {"balance": balance})

    async def proposals(self, **filters: Any) -> dict[str, Any]:
        return await self._object("GET", "/proposals", **filters)

    async def approve(self, proposal_id: str) -> dict[str, Any]:
        return await self._part("proposal", "POST", f"/proposals/{path_segment(proposal_id)}/approve")

    async def reject(self, proposal_id: str, reason_detail: str | None = None) -> dict[str, Any]:
        body = {} if reason_detail is None else {"reason_detail": reason_detail}
        return await self._part("proposal", "POST", f"/proposals/{path_segment(proposal_id)}/reject", body)

    async def expire(self, proposal_id: str) -> dict[str, Any]:
        return await self._part("proposal", "POST", f"/proposals/{path_segment(proposal_id)}/expire")

    async def memories(self, **filters: Any) -> dict[str, Any]:
        return await self._object("GET", "/memories", **filters)

    async def delete_memory(self, memory_id: str) -> dict[str, Any]:
        return await self._part("memory", "DELETE", f"/memories/{path_segment(memory_id)}")

    async def restore_memory(self, memory_id: str) -> dict[str, Any]:
        return await self._part("memory", "POST", f"/memories/{path_segment(memory_id)}/restore")

    async def policy(self, tenant: str | None = None) -> dict[str, Any]:
        return await self._object("GET", f"/tenants/{path_segment(tenant or self.tenant)}/policy")

    async def set_policy(self, tenant: str | None = None, **policy: Any) -> dict[str, Any]:
        return await self._object("PUT", f"/tenants/{path_segment(tenant or self.tenant)}/policy", policy)

    async def create_tenant(self, tenant: str | None = None, *, credits: int | None = None) -> dict[str, Any]:
        """A new tenant (server admin only): ``{tenant, admin_token, credential}``."""
        body = {k: v for k, v in (("tenant", tenant), ("credits", credits)) if v is not None}
        return await self._object("POST", "/tenants", body)

    async def delete_tenant(self, tenant: str | None = None) -> None:
        await self.call("DELETE", f"/tenants/{path_segment(tenant or self.tenant)}")

    async def tenants(self) -> list[dict[str, Any]]:
        """Every tenant (all pages) in the order they were made; a tenant admin's: its own."""
        return await self._all_pages("/tenants")

    async def clock(self) -> dict[str, Any]:
        return await self._object("GET", "/clock")

    async def advance_clock(self, seconds: float) -> dict[str, Any]:
        return await self._object("POST", "/clock/advance", {"seconds": seconds})

    async def set_clock(self, *, now: str | None = None, frozen: bool | None = None) -> dict[str, Any]:
        body = {k: v for k, v in (("now", now), ("frozen", frozen)) if v is not None}
        return await self._object("PUT", "/clock", body)

    async def set_billing(self, available: bool) -> dict[str, Any]:
        return await self._object("PUT", "/billing", {"available": available})

    async def add_fault(self, operation: str, status: int, **options: Any) -> dict[str, Any]:
        return await self._object("POST", "/faults", {"operation": operation, "status": status, **options})

    async def faults(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = (await self._object("GET", "/faults"))["items"]
        return items

    async def clear_faults(self) -> None:
        await self.call("DELETE", "/faults")

    async def requests(self, **filters: Any) -> list[dict[str, Any]]:
        """Every journal row matching the filters (all pages), oldest first."""
        return await self._all_pages("/requests", **filters)

    async def ledger(self, **filters: Any) -> list[dict[str, Any]]:
        return await self._all_pages("/ledger", **filters)

    async def findings(self, **filters: Any) -> list[dict[str, Any]]:
        """Every finding (SPEC 3.8) matching the filters (``credential_id``, ``code``), oldest first."""
        return await self._all_pages("/findings", **filters)

    async def _all_pages(self, path: str, **filters: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = await self.call("GET", path, cursor=cursor, **filters)
            items.extend(page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                return items
