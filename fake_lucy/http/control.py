"""The control API under ``/_fake`` (SPEC 3.2): for tests and humans, never part of v1."""

from __future__ import annotations

import hmac
import json
import re
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from fake_lucy.domain import billing, clock, faults, lifecycle
from fake_lucy.domain.errors import DomainError
from fake_lucy.domain.ids import random_request_id
from fake_lucy.domain.principals import (
    bump_auth_epoch,
    create_credential,
    ensure_tenant,
    revoke_credential,
)
from fake_lucy.domain.records import LAST_ACCESSED_AT, memory_dict, proposal_dict
from fake_lucy.http import cursors, inputs
from fake_lucy.http.abort import client_gone
from fake_lucy.http.problems import JSON, ProblemError, json_bytes, problem_response
from fake_lucy.runtime import FakeLucy
from lucy_memory._contract import (
    InvalidJSONError,
    SchemaValidator,
    load_contract,
    parse_json_object,
    schema_validator,
)
from lucy_memory._contract.validation import MAX_POINTER, long_name_error, parameters_validator

__all__ = ["control_router"]

PAGE_SIZE = 100
MAX_PAGE = 1000
_Handler = Callable[[sqlite3.Connection, dict[str, Any], "_Ctx"], tuple[int, Any]]
_PROPOSAL_STATUSES = ("pending", "approved", "rejected", "expired", "superseded")
_SCOPE_KINDS = ("user", "workspace", "project")


class _Ctx:
    def __init__(self, fake: FakeLucy, request: Request, request_id: str) -> None:
        self.fake = fake
        self.request = request
        self.request_id = request_id
        self.path = request.path_params
        self.query = request.query_params

    def now(self, conn: sqlite3.Connection) -> str:
        return clock.format_us(clock.now_us(conn))


def _parameter_pointer(name: str) -> str:
    # an RFC 6901 pointer into the object of query parameters (problem.schema.json)
    return "/" + name.replace("~", "~0").replace("/", "~1")


def _bad_parameter(name: str, rule: str) -> ProblemError:
    return ProblemError(
        "invalid_request",
        "a query parameter is invalid",
        details={"errors": [{"pointer": _parameter_pointer(name), "detail": rule}]},
    )


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


def _page(rows: list[sqlite3.Row], size: int, convert: Callable[[sqlite3.Row], Any]) -> dict[str, Any]:
    items = [convert(row) for row in rows[:size]]
    next_cursor = cursors.encode(rows[size - 1]["seq"]) if len(rows) > size else None
    return {"items": items, "next_cursor": next_cursor}


# -- handlers: (conn, body, ctx) -> (status, payload) ---------------------------------------------


def _reset(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    raise NotImplementedError  # handled outside the generic transaction, see ``reset`` below


def _create_credential(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    account = body.get("account")
    credits = None if body.get("credits") is None else int(body["credits"])  # 50.0 is 50
    if account is not None and credits is not None:
        row = conn.execute("SELECT tenant_id, balance FROM accounts WHERE id = ?", (account,)).fetchone()
        if row is not None and row["tenant_id"] == body["tenant"] and int(row["balance"]) != credits:
            # ``credits`` sets an existing account's balance: an admin_set ledger row, as PUT credits writes
            billing.set_balance(
                conn, account=account, new_balance=credits, request_id=ctx.request_id, at=ctx.now(conn)
            )
    created = create_credential(
        conn,
        ctx.fake.ids,
        tenant=body["tenant"],
        account=body.get("account"),
        user=body.get("user"),
        permissions=body["permissions"],
        scopes=body["scopes"],
        credits=credits,
    )
    return 201, created


def _revoke(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    revoke_credential(conn, ctx.path["credential_id"])
    return 204, None


def _set_balance(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    account = ctx.path["account"]
    balance = int(body["balance"])  # the schema's integer takes 20.0; the answer and the ledger say 20
    billing.set_balance(
        conn, account=account, new_balance=balance, request_id=ctx.request_id, at=ctx.now(conn)
    )
    return 200, {"account": account, "balance": balance}


def _list_proposals(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    _only_query(ctx, ("status", "tenant", "limit", "cursor"))
    lifecycle.expire_due(conn, ctx.now(conn))
    status = _query_choice(ctx, "status", _PROPOSAL_STATUSES)
    tenant = ctx.query.get("tenant")
    size = _query_int(ctx, "limit", PAGE_SIZE, 1, MAX_PAGE)
    sql = "SELECT * FROM proposals WHERE seq > ?"
    params: list[Any] = [_seq_cursor(ctx)]
    if status is not None:
        sql += " AND status = ?"
        params.append(status)
    if tenant is not None:
        sql += " AND tenant_id = ?"
        params.append(tenant)
    rows = conn.execute(sql + " ORDER BY seq LIMIT ?", [*params, size + 1]).fetchall()
    return 200, _page(rows, size, proposal_dict)


def _decide(action: str) -> _Handler:
    def handler(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
        now = ctx.now(conn)
        lifecycle.expire_due(conn, now)
        row = lifecycle.load_proposal(conn, ctx.path["proposal_id"])
        if action == "approve":
            row = lifecycle.approve(conn, ctx.fake.ids, row, now=now)
        elif action == "reject":
            row = lifecycle.reject(conn, row, now=now, reason_detail=body.get("reason_detail"))
        else:
            row = lifecycle.expire(conn, row, now=now)
        return 200, {"proposal": proposal_dict(row)}

    return handler


def _list_memories(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    _only_query(ctx, ("tenant", "scope_kind", "scope_id", "include_history", "limit", "cursor"))
    _query_choice(ctx, "scope_kind", _SCOPE_KINDS)
    history = _query_bool(ctx, "include_history", default=True)
    size = _query_int(ctx, "limit", PAGE_SIZE, 1, MAX_PAGE)
    after = cursors.decode_pair(ctx.query.get("cursor"))
    sql = (
        f"SELECT m.id, m.tenant_id, m.scope_kind, m.scope_id, m.created_at, {LAST_ACCESSED_AT},"  # noqa: S608 - constant
        " v.version, v.kind, v.topic, v.content, v.importance, v.status, v.source, v.updated_at,"
        " v.approved_at FROM memory_versions v JOIN memories m ON m.id = v.memory_id WHERE 1 = 1"
    )
    params: list[Any] = []
    if not history:
        sql += " AND v.version = m.version"
    for name, column in (
        ("tenant", "m.tenant_id"),
        ("scope_kind", "m.scope_kind"),
        ("scope_id", "m.scope_id"),
    ):
        if ctx.query.get(name) is not None:
            sql += f" AND {column} = ?"
            params.append(ctx.query[name])
    if after is not None:
        sql += " AND (v.memory_id, v.version) > (?, ?)"
        params.extend(after)
    rows = conn.execute(sql + " ORDER BY v.memory_id, v.version LIMIT ?", [*params, size + 1]).fetchall()
    items = [memory_dict(row) for row in rows[:size]]
    next_cursor = None
    if len(rows) > size:
        next_cursor = cursors.encode((rows[size - 1]["id"], rows[size - 1]["version"]))
    return 200, {"items": items, "next_cursor": next_cursor}


def _delete_memory(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    row = lifecycle.delete_memory(conn, ctx.path["memory_id"], now=ctx.now(conn))
    return 200, {"memory": memory_dict(row)}


def _restore_memory(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    return 200, {"memory": memory_dict(lifecycle.restore_memory(conn, ctx.path["memory_id"]))}


def _policy(conn: sqlite3.Connection, tenant: str) -> dict[str, Any]:
    row = conn.execute(
        "SELECT auto_approve, proposal_ttl_seconds, rate_limit_per_minute FROM tenants WHERE id = ?",
        (tenant,),
    ).fetchone()
    if row is None:
        raise DomainError("not_found", "no tenant has this id")
    return {
        "auto_approve": json.loads(row[0]),
        "proposal_ttl_seconds": row[1],
        "rate_limit_per_minute": row[2],
    }


def _get_policy(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    _only_query(ctx, ())
    return 200, _policy(conn, ctx.path["tenant"])


def _put_policy(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    tenant = ctx.path["tenant"]
    ensure_tenant(conn, tenant)
    if "auto_approve" in body:
        conn.execute(
            "UPDATE tenants SET auto_approve = ? WHERE id = ?",
            (json.dumps(body["auto_approve"]), tenant),
        )
    if "proposal_ttl_seconds" in body:
        conn.execute(
            "UPDATE tenants SET proposal_ttl_seconds = ? WHERE id = ?",
            (body["proposal_ttl_seconds"], tenant),
        )
    if "rate_limit_per_minute" in body:
        conn.execute(
            "UPDATE tenants SET rate_limit_per_minute = ? WHERE id = ?",
            (body["rate_limit_per_minute"], tenant),
        )
        conn.execute(
            "DELETE FROM rate_buckets WHERE credential_id IN"
            " (SELECT id FROM credentials WHERE tenant_id = ?)",
            (tenant,),
        )
    bump_auth_epoch(conn)  # principals carry their tenant's policy
    return 200, _policy(conn, tenant)


def _get_clock(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    _only_query(ctx, ())
    return 200, clock.state(conn)


def _advance_clock(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    return 200, clock.advance(conn, float(body["seconds"]))


def _set_clock(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    return 200, clock.set_clock(conn, now=body.get("now"), frozen=body.get("frozen"))


def _set_billing(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    billing.set_billing(conn, body["available"])
    return 200, {"available": body["available"]}


def _create_fault(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    if body.get("phase") == "in_flight" and body["operation"] != "propose":
        raise DomainError(
            "invalid_request",
            "the request does not match the schema",
            details={"errors": [{"pointer": "/phase", "detail": "in_flight applies to propose only"}]},
        )
    credential = body.get("credential_id")
    if (
        credential is not None
        and not conn.execute("SELECT 1 FROM credentials WHERE id = ?", (credential,)).fetchone()
    ):
        raise DomainError(
            "invalid_request",
            "the request does not match the schema",
            details={"errors": [{"pointer": "/credential_id", "detail": "no credential has this id"}]},
        )
    return 201, faults.create(conn, ctx.fake.ids, body)


def _list_faults(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    _only_query(ctx, ())
    return 200, {"items": faults.list_faults(conn)}


def _clear_faults(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    faults.clear(conn)
    return 204, None


def _journal_item(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "request_id": row["request_id"],
        "at": row["at"],
        "operation": row["operation"],
        "credential_id": row["credential_id"],
        "idempotency_key": row["idempotency_key"],
        "retry_attempt": row["retry_attempt"],
        "body_sha256": row["body_sha256"],
        "status": row["status"],
        "charged": bool(row["charged"]),
        "replayed": bool(row["replayed"]),
        "dropped": bool(row["dropped"]),
        "fault_id": row["fault_id"],
    }


def _only_query(ctx: _Ctx, allowed: tuple[str, ...]) -> None:
    for name in ctx.query:
        if name not in allowed:
            if len(_parameter_pointer(name)) > MAX_POINTER:
                error = long_name_error("", "parameter")
                raise ProblemError(
                    "invalid_request", "a query parameter is invalid", details={"errors": [error.as_dict()]}
                )
            raise _bad_parameter(name, "is not a parameter of this operation")


JOURNAL_LIMIT = 10_000


def _list_requests(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    _only_query(ctx, ("operation", "credential_id", "limit", "cursor"))
    operation = _query_choice(ctx, "operation", ("recall", "propose", "proposal_status"))
    limit = _query_int(ctx, "limit", 0, 1, JOURNAL_LIMIT) if "limit" in ctx.query else None
    where = "1 = 1"
    params: list[Any] = []
    if operation is not None:
        where += " AND operation = ?"
        params.append(operation)
    if ctx.query.get("credential_id") is not None:
        where += " AND credential_id = ?"
        params.append(ctx.query["credential_id"])
    if limit is not None:
        # keep the newest ``limit`` matching rows: start at the seq of the limit-th newest one
        oldest_kept = conn.execute(
            f"SELECT seq FROM journal WHERE {where} ORDER BY seq DESC LIMIT 1 OFFSET ?",  # noqa: S608 - constant clauses
            [*params, limit - 1],
        ).fetchone()
        if oldest_kept is not None:
            where += " AND seq >= ?"
            params.append(oldest_kept[0])
    rows = conn.execute(
        f"SELECT * FROM journal WHERE {where} AND seq > ? ORDER BY seq LIMIT ?",  # noqa: S608 - constant clauses
        [*params, _seq_cursor(ctx), PAGE_SIZE + 1],
    ).fetchall()
    return 200, _page(rows, PAGE_SIZE, _journal_item)


def _list_ledger(conn: sqlite3.Connection, body: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    _only_query(ctx, ("account", "cursor"))
    where = "seq > ?"
    params: list[Any] = [_seq_cursor(ctx)]
    if ctx.query.get("account") is not None:
        where += " AND account_id = ?"
        params.append(ctx.query["account"])
    rows = conn.execute(
        f"SELECT * FROM ledger WHERE {where} ORDER BY seq LIMIT ?",  # noqa: S608 - constant clauses
        [*params, PAGE_SIZE + 1],
    ).fetchall()

    def item(row: sqlite3.Row) -> dict[str, Any]:
        return {
            "request_id": row["request_id"],
            "account": row["account_id"],
            "operation": row["operation"],
            "amount": row["amount"],
            "balance_after": row["balance_after"],
            "at": row["at"],
        }

    return 200, _page(rows, PAGE_SIZE, item)


# -- the generic control pipeline ----------------------------------------------------------------


class ControlApi:
    def __init__(self, fake: FakeLucy) -> None:
        self.fake = fake
        self.max_body = int(fake.contract["max_body_bytes"])

    def _authorise(self, request: Request) -> None:
        token = inputs.bearer_token(inputs.header_map(request.scope))
        if token is None or not hmac.compare_digest(
            token.encode("utf-8"), self.fake.admin_token.encode("utf-8")
        ):
            raise ProblemError("unauthenticated", "the control API needs the admin bearer token")
        if self.fake.admin_token_is_builtin and not self.fake.loopback:
            raise ProblemError(
                "unauthenticated",
                "the built-in admin token is refused when the fake listens on a non-loopback"
                " address; set FAKE_LUCY_ADMIN_TOKEN or --admin-token-file",
            )

    async def _body(self, request: Request, schema: str | None) -> dict[str, Any]:
        raw = await inputs.read_body(request, self.max_body)
        if schema is None:
            return {}
        body: dict[str, Any] = {}
        if raw.strip():
            media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
            if media != JSON:
                raise ProblemError("unsupported_media_type", "the body must be application/json")
            try:
                body = parse_json_object(raw)
            except InvalidJSONError as exc:
                raise ProblemError("invalid_json", str(exc)) from None
        errors = schema_validator(schema).errors(body)
        if errors:
            raise ProblemError(
                "invalid_request",
                "the request does not match the schema",
                details={"errors": [error.as_dict() for error in errors]},
            )
        return body

    async def run(
        self,
        request: Request,
        schema: str | None,
        handler: _Handler,
        path_schema: SchemaValidator | None = None,
    ) -> Response:
        request_id = random_request_id()
        try:
            self._authorise(request)
            if path_schema is not None:
                errors = path_schema.errors(dict(request.path_params))
                if errors:
                    raise ProblemError(
                        "invalid_request",
                        "a path parameter is invalid",
                        details={"errors": [error.as_dict() for error in errors]},
                    )
            body = await self._body(request, schema)
            ctx = _Ctx(self.fake, request, request_id)
            if handler is _reset:
                took = self.fake.reset()
                status, payload = 200, {"reset": True, "took_ms": round(took, 3)}
            else:
                with self.fake.db.write() as conn:
                    status, payload = handler(conn, body, ctx)
        except DomainError as error:
            return problem_response(error, request_id)
        except inputs.ClientGone:  # the body never arrived whole: nothing was changed
            return client_gone(request)
        headers = {"Lucy-Request-Id": request_id}
        if payload is None:
            return Response(status_code=status, headers=headers)
        return Response(json_bytes(payload), status_code=status, headers=headers, media_type=JSON)


_ROUTES: list[tuple[str, str, str | None, _Handler]] = [
    ("POST", "/reset", None, _reset),
    ("POST", "/credentials", "control-credential-create-request.schema.json", _create_credential),
    ("DELETE", "/credentials/{credential_id}", None, _revoke),
    ("PUT", "/accounts/{account}/credits", "control-balance-request.schema.json", _set_balance),
    ("GET", "/proposals", None, _list_proposals),
    ("POST", "/proposals/{proposal_id}/approve", None, _decide("approve")),
    (
        "POST",
        "/proposals/{proposal_id}/reject",
        "control-reject-request.schema.json",
        _decide("reject"),
    ),
    ("POST", "/proposals/{proposal_id}/expire", None, _decide("expire")),
    ("GET", "/memories", None, _list_memories),
    ("DELETE", "/memories/{memory_id}", None, _delete_memory),
    ("POST", "/memories/{memory_id}/restore", None, _restore_memory),
    ("GET", "/tenants/{tenant}/policy", None, _get_policy),
    ("PUT", "/tenants/{tenant}/policy", "control-policy-update.schema.json", _put_policy),
    ("GET", "/clock", None, _get_clock),
    ("POST", "/clock/advance", "control-clock-advance-request.schema.json", _advance_clock),
    ("PUT", "/clock", "control-clock-set-request.schema.json", _set_clock),
    ("PUT", "/billing", "control-billing.schema.json", _set_billing),
    ("POST", "/faults", "control-fault-create-request.schema.json", _create_fault),
    ("GET", "/faults", None, _list_faults),
    ("DELETE", "/faults", None, _clear_faults),
    ("GET", "/requests", None, _list_requests),
    ("GET", "/ledger", None, _list_ledger),
]


def control_router(fake: FakeLucy) -> APIRouter:
    api = ControlApi(fake)
    router = APIRouter(prefix="/_fake")
    contract = load_contract("fake-control")["operations"].values()
    operations = {(op["method"], op["path"]): op for op in contract}
    for method, path, schema, handler in _ROUTES:
        declared = operations[(method, path)]["path_parameters"]
        path_schema = (
            parameters_validator(tuple((name, spec["schema"]) for name, spec in declared.items()))
            if declared
            else None
        )
        router.add_api_route(
            path, _endpoint(api, schema, handler, path_schema), methods=[method], include_in_schema=False
        )
    return router


def _endpoint(
    api: ControlApi, schema: str | None, handler: _Handler, path_schema: SchemaValidator | None
) -> Callable[[Request], Awaitable[Response]]:
    # a closure, not default arguments: FastAPI would read those as query parameters of the route
    async def endpoint(request: Request) -> Response:
        return await api.run(request, schema, handler, path_schema)

    return endpoint
