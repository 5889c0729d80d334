"""The control API under ``/_fake`` (SPEC 3.2, 3.6): for tests and humans, never part of v1.

Each call is authenticated into an ``AdminScope`` — the server admin token, or a tenant's admin
token — which every domain call receives: a tenant admin acts only within its tenant.
"""

from __future__ import annotations

import hmac
import re
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi import APIRouter
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response

from fake_lucy import __version__
from fake_lucy.domain import admin, billing, clock, faults, findings, policy, snapshot, tenants
from fake_lucy.domain.errors import DomainError, invalid_field
from fake_lucy.domain.ids import random_request_id
from fake_lucy.domain.policy import policy_dict
from fake_lucy.domain.principals import NewCredential, hash_token
from fake_lucy.domain.records import (
    control_memory_dict,
    control_proposal_dict,
    journal_dict,
    ledger_dict,
    tenant_dict,
)
from fake_lucy.http import cursors, inputs
from fake_lucy.http.abort import client_gone
from fake_lucy.http.events import EventStream, last_event_id
from fake_lucy.http.problems import JSON, ProblemError, json_bytes, problem_response, schema_problem
from fake_lucy.runtime import FakeLucy
from fake_lucy.store.queries import JournalFilter, MemoryFilter, Page, ProposalFilter
from lucy_memory._contract import (
    MAX_POINTER,
    PROPOSAL_STATES,
    InvalidJSONError,
    SchemaError,
    SchemaValidator,
    load_contract,
    long_name_error,
    parameters_validator,
    parse_json_object,
    schema_validator,
)

__all__ = ["EVENTS_QUERY", "admin_scope", "control_router", "only_query"]

PAGE_SIZE = 100
# A route's "schema" for a body that is any JSON object, checked by its handler (a snapshot: its
# format version is read before its schema, so that a newer version is named as such).
ANY_OBJECT = "*"
MAX_PAGE = 1000
_Handler = Callable[[sqlite3.Connection, dict[str, Any], "_Ctx"], tuple[int, Any]]
T = TypeVar("T")
_SCOPE_KINDS = ("user", "workspace", "project")


class _Ctx:
    def __init__(self, fake: FakeLucy, request: Request, request_id: str, scope: tenants.AdminScope) -> None:
        self.fake = fake
        self.request = request
        self.request_id = request_id
        self.scope = scope  # who acts: the server admin or one tenant's admin
        self.path = request.path_params
        self.query = request.query_params


def _parameter_pointer(name: str) -> str:
    # an RFC 6901 pointer into the object of query parameters (problem.schema.json)
    return "/" + name.replace("~", "~0").replace("/", "~1")


_BAD_PARAMETER = "a query parameter is invalid"


def _no_body(body: dict[str, Any]) -> None:
    """422 for each property of a body sent to an operation that takes none (``{}`` is no body)."""
    errors = [
        long_name_error("", "property")
        if len(_parameter_pointer(name)) > MAX_POINTER
        else SchemaError(_parameter_pointer(name), "is not an allowed property: this operation takes no body")
        for name in body
    ]
    if errors:
        raise schema_problem(errors)


def _bad_parameter(name: str, rule: str) -> DomainError:
    return invalid_field(_parameter_pointer(name), rule, _BAD_PARAMETER)


def _query_choice(ctx: _Ctx, name: str, allowed: tuple[str, ...]) -> str | None:
    value = ctx.query.get(name)
    if value is not None and value not in allowed:
        raise _bad_parameter(name, "must be one of: " + ", ".join(allowed))
    return value


def _query_bool(ctx: _Ctx, name: str, default: bool) -> bool:
    value = _query_choice(ctx, name, ("true", "false"))
    return default if value is None else value == "true"


_ASCII_DIGITS = re.compile(r"[0-9]{1,9}")


def _query_int(ctx: _Ctx, name: str, default: int, low: int, high: int) -> int:
    value = ctx.query.get(name)
    if value is None:
        return default
    # ASCII digits only: str.isdigit() also takes "²" (which int() refuses) and "５" (which it reads as 5).
    if not _ASCII_DIGITS.fullmatch(value) or not low <= int(value) <= high:
        raise _bad_parameter(name, f"must be an integer from {low} to {high}")
    return int(value)


def _seq_cursor(ctx: _Ctx) -> int:
    return cursors.decode_seq(ctx.query.get("cursor"))


def _page(page: Page[T], convert: Callable[[T], dict[str, Any]]) -> dict[str, Any]:
    next_cursor = None if page.last is None else cursors.encode(page.last)
    return {"items": [convert(item) for item in page.items], "next_cursor": next_cursor}


# -- handlers: (conn, body, ctx) -> (status, payload): parse the arguments, one domain call, the answer


def _reset(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    """A tenant admin's reset: its tenant alone. The server admin's resets the whole database
    outside the generic transaction (``ControlApi.run``); ``run`` times both."""
    assert ctx.scope.tenant is not None
    tenants.reset(conn, ctx.scope.tenant)
    return 200, None


def _create_credential(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    new = NewCredential(
        tenant=body["tenant"],
        permissions=body["permissions"],
        scopes=body["scopes"],
        account=body.get("account"),
        user=body.get("user"),
        credits=None if body.get("credits") is None else int(body["credits"]),  # 50.0 is 50
    )
    return 201, admin.create_credential(conn, ctx.fake.ids, new, request_id=ctx.request_id, scope=ctx.scope)


def _revoke(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    admin.revoke_credential(conn, ctx.path["credential_id"], scope=ctx.scope)
    return 204, None


def _set_balance(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    account = ctx.path["account"]
    balance = int(body["balance"])  # the schema's integer takes 20.0; the answer and the ledger say 20
    admin.set_balance(conn, account=account, balance=balance, request_id=ctx.request_id, scope=ctx.scope)
    return 200, {"account": account, "balance": balance}


def _list_proposals(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    status = _query_choice(ctx, "status", PROPOSAL_STATES)
    limit = _query_int(ctx, "limit", PAGE_SIZE, 1, MAX_PAGE)
    after = _seq_cursor(ctx)
    wanted = ProposalFilter(status=status, tenant=ctx.query.get("tenant"))
    page = admin.proposals(conn, wanted, after=after, limit=limit, scope=ctx.scope)
    return 200, _page(page, control_proposal_dict)


def _decide(decision: admin.Decision) -> _Handler:
    def handler(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
        record = admin.decide(
            conn,
            ctx.fake.ids,
            ctx.path["proposal_id"],
            decision,
            reason_detail=body.get("reason_detail"),
            scope=ctx.scope,
        )
        return 200, {"proposal": control_proposal_dict(record)}

    return handler


def _list_memories(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    scope_kind = _query_choice(ctx, "scope_kind", _SCOPE_KINDS)
    history = _query_bool(ctx, "include_history", default=True)
    limit = _query_int(ctx, "limit", PAGE_SIZE, 1, MAX_PAGE)
    wanted = MemoryFilter(
        tenant=ctx.query.get("tenant"),
        scope_kind=scope_kind,
        scope_id=ctx.query.get("scope_id"),
        history=history,
    )
    after = cursors.decode_pair(ctx.query.get("cursor"))
    page = admin.memories(conn, wanted, after=after, limit=limit, scope=ctx.scope)
    return 200, _page(page, control_memory_dict)


def _delete_memory(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    return 200, {
        "memory": control_memory_dict(admin.delete_memory(conn, ctx.path["memory_id"], scope=ctx.scope))
    }


def _restore_memory(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    return 200, {
        "memory": control_memory_dict(admin.restore_memory(conn, ctx.path["memory_id"], scope=ctx.scope))
    }


def _get_policy(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    return 200, policy_dict(policy.get_policy(conn, ctx.path["tenant"], scope=ctx.scope))


def _put_policy(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    return 200, policy_dict(policy.update_policy(conn, ctx.path["tenant"], body, scope=ctx.scope))


def _get_clock(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    return 200, clock.state(conn, ctx.scope.tenant)


def _advance_clock(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    return 200, clock.advance(conn, float(body["seconds"]), ctx.scope.tenant)


def _set_clock(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    return 200, clock.set_clock(conn, now=body.get("now"), frozen=body.get("frozen"), tenant=ctx.scope.tenant)


def _set_billing(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    ctx.scope.require_server("the billing authority")
    billing.set_billing(conn, body["available"])
    return 200, {"available": body["available"]}


def _create_fault(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    return 201, faults.create(conn, ctx.fake.ids, body, tenant=ctx.scope.tenant)


def _list_faults(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    return 200, {"items": faults.list_faults(conn, tenant=ctx.scope.tenant)}


def _clear_faults(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    faults.clear(conn, tenant=ctx.scope.tenant)
    return 204, None


def only_query(query: QueryParams, allowed: tuple[str, ...]) -> None:
    """The query's parameters are the operation's, each given once: a repeated one is refused
    rather than half-read (``?status=bogus&status=pending`` would otherwise pass as pending)."""
    seen: set[str] = set()
    for name, _ in query.multi_items():
        if name not in allowed:
            if len(_parameter_pointer(name)) > MAX_POINTER:
                raise schema_problem([long_name_error("", "parameter")], _BAD_PARAMETER)
            raise _bad_parameter(name, "is not a parameter of this operation")
        if name in seen:
            raise _bad_parameter(name, "is given more than once; give it once")
        seen.add(name)


JOURNAL_LIMIT = 10_000


def _list_requests(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    operation = _query_choice(ctx, "operation", ("recall", "propose", "proposal_status"))
    newest = _query_int(ctx, "limit", 0, 1, JOURNAL_LIMIT) if "limit" in ctx.query else None
    wanted = JournalFilter(operation=operation, credential_id=ctx.query.get("credential_id"), newest=newest)
    page = admin.journal(conn, wanted, after=_seq_cursor(ctx), limit=PAGE_SIZE, scope=ctx.scope)
    return 200, _page(page, journal_dict)


def _list_ledger(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    page = admin.ledger(
        conn, account=ctx.query.get("account"), after=_seq_cursor(ctx), limit=PAGE_SIZE, scope=ctx.scope
    )
    return 200, _page(page, ledger_dict)


def _create_tenant(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    credits = body.get("credits")
    created = tenants.create(
        conn,
        ctx.fake.ids,
        scope=ctx.scope,
        tenant=body.get("tenant"),
        credits=None if credits is None else int(credits),  # 50.0 is 50
    )
    return 201, created.as_dict()


def _delete_tenant(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    tenants.delete(conn, ctx.path["tenant"], scope=ctx.scope)
    return 204, None


def _list_tenants(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    limit = _query_int(ctx, "limit", PAGE_SIZE, 1, MAX_PAGE)
    page = admin.tenants(conn, after=_seq_cursor(ctx), limit=limit, scope=ctx.scope)
    # the server clock, by which created_at is: ages a tenant admin computes too (its clock is its own)
    return 200, {**_page(page, tenant_dict), "now": clock.now(conn)}


def _list_findings(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    code = _query_choice(ctx, "code", findings.CODES)
    page = findings.findings(
        conn,
        credential_id=ctx.query.get("credential_id"),
        code=code,
        tenant=ctx.scope.tenant,
        after=_seq_cursor(ctx),
        limit=PAGE_SIZE,
    )
    return 200, _page(page, findings.finding_dict)


def _get_snapshot(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    include_journal = _query_bool(ctx, "include_journal", default=False)
    return 200, snapshot.export_state(
        conn, fake_version=__version__, tenant=ctx.scope.tenant, include_journal=include_journal
    )


def _put_snapshot(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    admin_hash = hash_token(ctx.fake.admin_token)
    snapshot.restore_state(conn, body, tenant=ctx.scope.tenant, server_admin_token_sha256=admin_hash)
    return 200, {"restored": True}


# -- the generic control pipeline ----------------------------------------------------------------


def admin_scope(fake: FakeLucy, token: str | None) -> tenants.AdminScope:
    """Who an admin token acts for: the server admin token (the built-in one only on a loopback
    bind), or a tenant's admin token (never a v1 credential's); else 401 ``unauthenticated``. The
    control API's rule, and the console's login."""
    if token is None:
        raise ProblemError("unauthenticated", "the control API needs an admin bearer token")
    if hmac.compare_digest(token.encode("utf-8"), fake.admin_token.encode("utf-8")):
        if fake.admin_token_is_builtin and not fake.loopback:
            raise ProblemError(
                "unauthenticated",
                "the built-in admin token is refused when the fake listens on a non-loopback"
                " address; set FAKE_LUCY_ADMIN_TOKEN or --admin-token-file to a token of your own",
            )
        return tenants.SERVER
    scope = tenants.authenticate_admin(fake.db.conn, token)
    if scope is None:
        raise ProblemError(
            "unauthenticated", "the control API needs the server admin token or a tenant admin token"
        )
    return scope


class ControlApi:
    def __init__(self, fake: FakeLucy) -> None:
        self.fake = fake
        self.max_body = int(fake.contract["max_body_bytes"])

    def _authorise(self, request: Request) -> tenants.AdminScope:
        return admin_scope(self.fake, inputs.bearer_token(inputs.header_map(request.scope)))

    async def _body(self, request: Request, schema: str | None, max_body: int) -> dict[str, Any]:
        """The request's JSON object: none is ``{}``; another media type is 415, not JSON 400, not
        the operation's schema 422 — and an operation without a request schema takes ``{}`` alone
        (the contract's ``body_rule``), so that what it does is never read into a body it ignores."""
        raw = await inputs.read_body(request, max_body)
        body: dict[str, Any] = {}
        if raw.strip():
            media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
            if media != JSON:
                raise ProblemError("unsupported_media_type", "the body must be application/json")
            try:
                body = parse_json_object(raw)
            except InvalidJSONError as exc:
                raise ProblemError("invalid_json", str(exc)) from None
        if schema is None:
            _no_body(body)
            return {}
        if schema == ANY_OBJECT:
            return body
        errors = schema_validator(schema).errors(body)
        if errors:
            raise schema_problem(errors)
        return body

    async def run(
        self,
        request: Request,
        schema: str | None,
        handler: _Handler,
        path_schema: SchemaValidator | None = None,
        max_body: int | None = None,
        query: tuple[str, ...] = (),
        query_schema: SchemaValidator | None = None,
    ) -> Response:
        """One control operation: the admin token, the path parameters, the query parameters (those
        of the contract's ``query`` alone), the body, then the handler in one write transaction."""
        request_id = random_request_id()
        try:
            scope = self._authorise(request)
            if path_schema is not None:
                errors = path_schema.errors(dict(request.path_params))
                if errors:
                    raise schema_problem(errors, "a path parameter is invalid")
            ctx = _Ctx(self.fake, request, request_id, scope)
            only_query(ctx.query, query)
            if query_schema is not None:
                errors = query_schema.errors(dict(ctx.query))  # the ids among them (the others: above)
                if errors:
                    raise schema_problem(errors, _BAD_PARAMETER)
            body = await self._body(request, schema, max_body or self.max_body)
            started = time.perf_counter()
            if handler is _reset and scope.tenant is None:
                self.fake.reset()
                status, payload = 200, None
            else:
                with self.fake.db.write() as conn:
                    tenants.still_valid(conn, scope)
                    status, payload = handler(conn, body, ctx)
            if handler is _reset:
                payload = {"reset": True, "took_ms": round((time.perf_counter() - started) * 1000, 3)}
        except DomainError as error:
            return problem_response(error, request_id)
        except inputs.ClientGone:  # the body never arrived whole: nothing was changed
            return client_gone(request)
        headers = {"Lucy-Request-Id": request_id}
        if payload is None:
            return Response(status_code=status, headers=headers)
        return Response(json_bytes(payload), status_code=status, headers=headers, media_type=JSON)

    async def events(self, request: Request, stream: EventStream) -> Response:
        """``GET /_fake/events``: the event stream (SPEC 3.7); a stream, so outside ``run``."""
        request_id = random_request_id()
        token = inputs.bearer_token(inputs.header_map(request.scope))
        try:
            scope = admin_scope(self.fake, token)
            only_query(request.query_params, EVENTS_QUERY)
            resume = last_event_id(request.headers, request.query_params)
            await self._body(request, None, self.max_body)  # a GET: no body but {} (the body_rule)
        except DomainError as error:
            return problem_response(error, request_id)
        except inputs.ClientGone:
            return client_gone(request)
        assert token is not None  # an admin's
        # A tenant admin sees its tenant's events and the server-wide ones, and only while its token
        # still acts for the tenant (the stream ends once the tenant is deleted).
        still_allowed = tenants.admin_check(self.fake.db.conn, token, scope)
        response = stream.response(request.scope, resume, tenant=scope.tenant, still_allowed=still_allowed)
        response.headers["Lucy-Request-Id"] = request_id
        return response


# The event stream's query parameters (the contract's service_endpoints/events).
EVENTS_QUERY = tuple(load_contract("fake-control")["service_endpoints"]["events"]["query"])

# The handler of each operation of contracts/fake-control.contract.json, under the contract's name
# for it: the contract gives each its method, path, request schema, path parameters and body limit.
_HANDLERS: dict[str, _Handler] = {
    "reset": _reset,
    "create_credential": _create_credential,
    "revoke_credential": _revoke,
    "set_balance": _set_balance,
    "list_proposals": _list_proposals,
    "approve_proposal": _decide("approve"),
    "reject_proposal": _decide("reject"),
    "expire_proposal": _decide("expire"),
    "list_memories": _list_memories,
    "delete_memory": _delete_memory,
    "restore_memory": _restore_memory,
    "get_policy": _get_policy,
    "put_policy": _put_policy,
    "get_clock": _get_clock,
    "advance_clock": _advance_clock,
    "set_clock": _set_clock,
    "set_billing": _set_billing,
    "create_fault": _create_fault,
    "list_faults": _list_faults,
    "clear_faults": _clear_faults,
    "list_requests": _list_requests,
    "list_ledger": _list_ledger,
    "list_findings": _list_findings,
    "get_snapshot": _get_snapshot,
    "put_snapshot": _put_snapshot,
    "create_tenant": _create_tenant,
    "delete_tenant": _delete_tenant,
    "list_tenants": _list_tenants,
}
# Operations whose handler checks the body against the request schema itself (ANY_OBJECT).
_CHECKS_ITS_BODY = frozenset({"put_snapshot"})


def control_router(fake: FakeLucy, stream: EventStream | None = None) -> APIRouter:
    api = ControlApi(fake)
    router = APIRouter(prefix="/_fake")
    event_stream = stream or EventStream(fake)

    async def events(request: Request) -> Response:
        return await api.events(request, event_stream)

    router.add_api_route("/events", events, methods=["GET"], include_in_schema=False)
    operations: dict[str, dict[str, Any]] = load_contract("fake-control")["operations"]
    if set(operations) != set(_HANDLERS):
        raise RuntimeError(
            f"control operations without a handler or a contract: {set(operations) ^ set(_HANDLERS)}"
        )
    for name, operation in operations.items():
        declared = operation["path_parameters"]
        path_schema = (
            parameters_validator(tuple((param, spec["schema"]) for param, spec in declared.items()))
            if declared
            else None
        )
        schema = ANY_OBJECT if name in _CHECKS_ITS_BODY else operation["request_schema"]
        max_body = int(operation.get("max_body_bytes", api.max_body))
        query = tuple(operation["query"])
        # the query parameters that are ids of a form (a tenant, a credential): checked against it
        ids = tuple((param, spec["schema"]) for param, spec in operation["query"].items() if "schema" in spec)
        query_schema = parameters_validator(ids) if ids else None
        router.add_api_route(
            operation["path"],
            _endpoint(api, schema, _HANDLERS[name], path_schema, max_body, query, query_schema),
            methods=[operation["method"]],
            include_in_schema=False,
        )
    return router


def _endpoint(
    api: ControlApi,
    schema: str | None,
    handler: _Handler,
    path_schema: SchemaValidator | None,
    max_body: int,
    query: tuple[str, ...],
    query_schema: SchemaValidator | None,
) -> Callable[[Request], Awaitable[Response]]:
    # a closure, not default arguments: FastAPI would read those as query parameters of the route
    async def endpoint(request: Request) -> Response:
        return await api.run(request, schema, handler, path_schema, max_body, query, query_schema)

    return endpoint
