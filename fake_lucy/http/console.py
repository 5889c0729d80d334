"""The review console (SPEC 3.10) at ``/_fake/console/``: server-rendered pages for the reviewer.

Each page is one call of ``domain.review`` (the same listings as the control API) rendered by one
Jinja2 template of ``fake_lucy/templates/`` (autoescaped: stored text is always text); each action
is the control API's domain call (``domain.admin``, ``clock``, ``faults``, ``policy``). The only
console state is the session (``domain.sessions``, in the database, so every worker knows it).

Safety: no session → the login page, never data. Every state change needs the session cookie,
the session's CSRF token in the form and an ``Origin`` equal to the console's own; anything else is
403 and changes nothing. Pages carry a strict Content-Security-Policy (scripts and styles only from
the package's own files) and are never cached. The admin token is read from the login form only;
it is never rendered, put in a URL or logged.
"""

from __future__ import annotations

import hmac
import sqlite3
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from importlib import resources
from typing import Any, Final, Literal, TypedDict
from urllib.parse import parse_qsl, urlencode

from fastapi import APIRouter
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from fake_lucy import __version__
from fake_lucy.addresses import path_segment
from fake_lucy.domain import admin, clock, faults, policy, review, sessions, tenants
from fake_lucy.domain.errors import DomainError
from fake_lucy.domain.ids import random_request_id
from fake_lucy.domain.sessions import Session
from fake_lucy.http.control import EVENTS_QUERY, admin_scope, only_query
from fake_lucy.http.events import EventStream, last_event_id
from fake_lucy.http.problems import ERRORS, allowed_methods, problem_response, schema_problem
from fake_lucy.runtime import FakeLucy
from fake_lucy.text import pieces, word_diff
from lucy_memory._contract import (
    PROPOSAL_STATES,
    load_contract,
    load_schema,
    parameters_validator,
    schema_validator,
)

__all__ = ["COOKIE", "COOKIE_ATTRIBUTES", "PREFIX", "CookieAttributes", "console_router", "visible_markup"]

PREFIX = "/_fake/console"
COOKIE = "fake_lucy_console"


class CookieAttributes(TypedDict):
    path: str
    httponly: bool
    samesite: Literal["strict"]


# The session cookie's attributes, the same when it is set and when it is deleted (``secure`` is
# set as well when the console is served over https).
COOKIE_ATTRIBUTES: Final[CookieAttributes] = {"path": PREFIX, "httponly": True, "samesite": "strict"}
MAX_FORM = 16_384
# the reject request's reason_detail, in UTF-8 bytes (its schema's x-maxUtf8Bytes)
MAX_REASON_BYTES = int(
    load_schema("control-reject-request.schema.json")["properties"]["reason_detail"]["x-maxUtf8Bytes"]
)
PAGE = 50
STATUSES = PROPOSAL_STATES
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self';"
        " form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # same-origin, not no-referrer: with no-referrer Chromium sends a form POST's Origin as "null"
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
# What each page redraws itself on (``data-live`` of its body; console.js listens for these).
LIVE = {
    "queue": "proposal.created proposal.decided memory.changed clock.changed reset",
    "proposals": "proposal.created proposal.decided clock.changed reset",
    "memories": "memory.changed reset",
    "requests": "request fault.fired finding reset",
    "credits": "credits.changed reset",
    "settings": "clock.changed fault.fired reset",
    "reset": "",
}
# the Proposals page's tenant filter: what the control API's proposals listing takes
_TENANT_FILTER = parameters_validator(
    (("tenant", load_contract("fake-control")["operations"]["list_proposals"]["query"]["tenant"]["schema"]),)
)
_STATIC = {
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",  # named by the pages: a browser would ask the fake's /favicon.ico
}


def visible_markup(text: str | None) -> Markup:
    """Text for a page: escaped, each invisible or control character as a marked ``⟨U+XXXX⟩``. The
    mark is left to right of its own (``dir``), so that a ``dir="auto"`` around it takes the
    text's direction from the text, not from the mark's letters: a right-to-left mark first is
    the very sign of a right-to-left text."""
    if text is None:
        return Markup("")
    out = []
    for piece, hidden in pieces(text):
        if hidden:
            out.append(Markup('<span class="invisible" dir="ltr">{}</span>').format(piece))
        else:
            out.append(escape(piece))
    return Markup("").join(out)


def _when(timestamp: str | None) -> str:
    """``2026-12-01T15:46:46.517580Z`` → ``2026-12-01 15:46:46``."""
    return "" if timestamp is None else timestamp[:19].replace("T", " ")


def _parse(timestamp: str) -> datetime:
    return datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def _until(timestamp: str, now: str) -> str:
    """How long from ``now`` to ``timestamp``, roughly (``6d 23h``, ``12m``, ``past``)."""
    seconds = int((_parse(timestamp) - _parse(now)).total_seconds())
    if seconds <= 0:
        return "past"
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m" if minutes else f"{seconds}s"


def _chart(values: list[int], width: int = 240, height: int = 48) -> Markup:
    """A balance over time as a small inline SVG polyline (numbers only: nothing to escape); one
    balance (an account with one ledger row, or none: its balance now) is a flat line."""
    if not values:
        return Markup("")
    if len(values) == 1:  # a polyline of one point draws nothing
        values = values * 2
    low, high = min(values), max(values)
    span = (high - low) or 1
    step = width / max(len(values) - 1, 1)
    points = " ".join(
        f"{i * step:.1f},{height - 4 - (value - low) * (height - 8) / span:.1f}"
        for i, value in enumerate(values)
    )
    # S704: built from integers and floats only, nothing of a stored string
    return Markup(  # noqa: S704
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}"'
        f' role="img" aria-label="balance from {values[0]} to {values[-1]}">'
        f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{points}"/></svg>'
    )


Conn = sqlite3.Connection
Form = Mapping[str, str]


class _Refused(Exception):
    """A state change without a session, a CSRF token or a same-origin Origin (→ 403)."""


class _NoSession(_Refused):
    """A state change without a session (it ended, or never was): the refusal leads to the login page."""


class _BadInput(Exception):
    """A page or form value that cannot be read (→ 400)."""


def delete_question(memory_id: str) -> str:
    """What Delete asks (the page's script, or without it a page of its own)."""
    return (
        f"Delete memory {memory_id}? It is no longer recalled, and pending proposals that replace it"
        " are superseded for good (a restore brings back the memory, not them)."
    )


class _Unconfirmed(Exception):
    """A destructive action sent without ``confirmed=yes``: the page's script asks first and says
    so in the form; without it, the answer is a page that asks (``confirm.html``)."""

    def __init__(self, question: str, button: str) -> None:
        super().__init__(question)
        self.question = question
        self.button = button


class Console:
    def __init__(self, fake: FakeLucy, stream: EventStream) -> None:
        self.fake = fake
        self.stream = stream
        self.env = Environment(
            loader=PackageLoader("fake_lucy", "templates"), autoescape=True, undefined=StrictUndefined
        )
        self.env.filters.update(
            visible=visible_markup, when=_when, until=_until, chart=_chart, segment=path_segment
        )
        self.env.globals.update(
            word_diff=word_diff,
            prefix=PREFIX,
            version=__version__,
            statuses=STATUSES,
            delete_question=delete_question,
        )
        package = resources.files("fake_lucy") / "static"
        self.static = {name: (package / name).read_bytes() for name in _STATIC}

    # -- responses ---------------------------------------------------------------------------

    def render(self, template: str, *, http_status: int = 200, **context: Any) -> HTMLResponse:
        html = self.env.get_template(template).render(**context)
        return HTMLResponse(html, status_code=http_status, headers=SECURITY_HEADERS)

    def message(
        self, title: str, text: str, *, status: int, session: Session | None = None, login: bool = False
    ) -> HTMLResponse:
        """A page saying ``title`` and ``text``; ``login``: with a link to the login page instead of
        the console's (the console's script goes there at once)."""
        return self.render(
            "message.html", http_status=status, title=title, text=text, session=session, login=login
        )

    def to_login(self) -> Response:
        return RedirectResponse(PREFIX + "/login", status_code=303, headers=SECURITY_HEADERS)

    # -- sessions, origin and CSRF -------------------------------------------------------------

    def _session(self, conn: sqlite3.Connection, request: Request) -> Session | None:
        return sessions.resume(conn, request.cookies.get(COOKIE), self.fake.console_admin)

    @staticmethod
    def _same_origin(request: Request) -> bool:
        origin = request.headers.get("origin")
        host = request.headers.get("host")
        if not origin or not host:
            return False
        return origin.lower() == f"{request.url.scheme}://{host}".lower()

    async def _checked_form(self, request: Request) -> dict[str, str]:
        """A state change's form, read once the session and the origin are known to be right (a
        request refused for them is 403 whatever its body); its CSRF token is checked with the
        action (``_check``)."""
        with self.fake.db.write() as conn:
            if self._session(conn, request) is None:
                raise _NoSession("no session: log in first")
        if not self._same_origin(request):
            raise _Refused("the request does not come from this console's origin")
        return await self._form(request)

    @staticmethod
    async def _form(request: Request) -> dict[str, str]:
        media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media != "application/x-www-form-urlencoded":
            raise _Refused("a console form is application/x-www-form-urlencoded")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM:
                raise _BadInput(
                    f"the form is too large (over {MAX_FORM // 1024} KiB): a reason holds at most"
                    f" {MAX_REASON_BYTES:,} UTF-8 bytes"
                )
        try:
            return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=50))
        except (UnicodeDecodeError, ValueError):
            raise _BadInput("the form cannot be read") from None

    def _check(self, session: Session | None, request: Request, form: Mapping[str, str]) -> Session:
        if session is None:
            raise _NoSession("no session: log in first")
        if not self._same_origin(request):
            raise _Refused("the request does not come from this console's origin")
        token = form.get("csrf_token", "")
        if not hmac.compare_digest(token.encode("utf-8"), session.csrf.encode("utf-8")):
            raise _Refused("the form's CSRF token is missing or wrong")
        return session

    def _admin_scope(self, token: str) -> tenants.AdminScope | None:
        """The control API's rule (``control.admin_scope``): a tenant admin's session sees only
        its tenant; None for anything that is no admin token."""
        try:
            return admin_scope(self.fake, token or None)
        except DomainError:
            return None

    @staticmethod
    def _next(form: Mapping[str, str]) -> str:
        target = form.get("next", "")
        if target.startswith(PREFIX + "/") and "//" not in target and "\\" not in target:
            return target
        return PREFIX + "/"

    # -- pages ---------------------------------------------------------------------------------

    async def page(
        self,
        request: Request,
        name: str,
        build: Callable[[sqlite3.Connection, Session, Mapping[str, str]], dict[str, Any]],
    ) -> Response:
        session: Session | None = None
        try:
            with self.fake.db.write() as conn:
                session = self._session(conn, request)
                if session is None:
                    return self.to_login()
                context = build(conn, session, request.query_params)
        except _BadInput as exc:  # the navigation stays: the reviewer is logged in
            return self.message("Bad request", str(exc), status=400, session=session)
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return self.render(f"{name}.html", page=name, session=session, live=LIVE[name], here=path, **context)

    async def act(
        self,
        request: Request,
        action: Callable[[sqlite3.Connection, Session, Mapping[str, str]], str | None],
    ) -> Response:
        """A state change: session, origin and CSRF checked, then the action in one transaction;
        answered with a redirect to the page it came from (or to what the action returns)."""
        session: Session | None = None
        try:
            form = await self._checked_form(request)
            with self.fake.db.write() as conn:
                session = self._check(self._session(conn, request), request, form)
                target = action(conn, session, form)
        except _Unconfirmed as ask:
            return self.render(
                "confirm.html",
                session=session,
                title=ask.question,
                button=ask.button,
                action=request.url.path,
                here=self._next(form),
            )
        except _Refused as exc:
            return self.message("Refused", str(exc), status=403, login=isinstance(exc, _NoSession))
        except _BadInput as exc:
            return self.message("Bad request", str(exc), status=400, session=session)
        except DomainError as error:
            status = int(ERRORS[error.code]["status"])
            text = error.detail
            wrong = (error.details or {}).get("errors") or []
            if wrong:  # which field, and what is wrong with it
                text += ": " + "; ".join(f"{_field(item['pointer'])} {item['detail']}" for item in wrong[:5])
            title = error.code.replace("_", " ").capitalize()
            return self.message(title, text, status=status, session=session)
        return RedirectResponse(target or self._next(form), status_code=303, headers=SECURITY_HEADERS)


# A refused field as the console's forms name it (else its pointer without the slash).
_FIELDS = {"/reason_detail": "the reason"}


def _field(pointer: str) -> str:
    return _FIELDS.get(pointer, pointer.lstrip("/") or "the form")


# -- the page builders: one domain call each ----------------------------------------------------


def _int(query: Mapping[str, str], name: str, default: int = 0) -> int:
    value = query.get(name)
    if value is None or value == "":
        return default
    if not value.isascii() or not value.isdigit() or len(value) > 18:
        raise _BadInput(f"{name} must be a number")
    return int(value)


def _queue(conn: sqlite3.Connection, session: Session, query: Mapping[str, str]) -> dict[str, Any]:
    view = review.queue(conn, tenant=session.tenant, after=_int(query, "after"), limit=PAGE)
    return {"view": view, "last_event_id": view.last_event_id}


def _proposals(conn: sqlite3.Connection, session: Session, query: Mapping[str, str]) -> dict[str, Any]:
    status = query.get("status") or None
    if status is not None and status not in STATUSES:
        raise _BadInput("status must be one of " + ", ".join(STATUSES))
    tenant = _tenant_filter(query)
    listing = review.proposals(
        conn, scope=_scope(session), tenant=tenant, status=status, after=_int(query, "after"), limit=PAGE
    )
    filters = {name: value for name, value in (("status", status), ("tenant", tenant)) if value}
    return {
        "listing": listing,
        "status": status,
        "tenant": tenant,
        "filters": urlencode(filters),
        "last_event_id": listing.last_event_id,
    }


def _memories(conn: sqlite3.Connection, session: Session, query: Mapping[str, str]) -> dict[str, Any]:
    flag = query.get("history", "false")
    if flag not in ("true", "false"):
        raise _BadInput("history is true or false")
    history = flag == "true"
    after: tuple[str, int] | None = None
    if query.get("after"):
        memory_id, _, version = query["after"].rpartition(":")
        if not memory_id or not version.isascii() or not version.isdigit() or len(version) > 9:
            raise _BadInput("after must be a memory id and a version")
        after = (memory_id, int(version))
    listing = review.memories(conn, tenant=session.tenant, history=history, after=after, limit=PAGE)
    return {"listing": listing, "history": history, "last_event_id": listing.last_event_id}


def _requests(conn: sqlite3.Connection, session: Session, query: Mapping[str, str]) -> dict[str, Any]:
    chains, last = review.request_chains(conn, tenant=session.tenant)
    return {"chains": chains, "last_event_id": last}


def _tenant_filter(query: Mapping[str, str]) -> str | None:
    """A page's tenant filter (the server admin's), checked as the control API checks it."""
    tenant = query.get("tenant") or None
    if tenant is not None and _TENANT_FILTER.errors({"tenant": tenant}):
        raise _BadInput("tenant must be a tenant id (letters, digits and . _ : -)")
    return tenant


def _credits(conn: sqlite3.Connection, session: Session, query: Mapping[str, str]) -> dict[str, Any]:
    tenant = _tenant_filter(query)
    view = review.credits(conn, tenant=session.tenant or tenant)
    return {"view": view, "tenant": tenant, "last_event_id": view.last_event_id}


def _settings(conn: sqlite3.Connection, session: Session, query: Mapping[str, str]) -> dict[str, Any]:
    tenant = _tenant_filter(query)
    view = review.settings(conn, tenant=session.tenant, policies_of=tenant)
    return {"view": view, "tenant": tenant, "last_event_id": view.last_event_id}


def _reset_page(conn: sqlite3.Connection, session: Session, query: Mapping[str, str]) -> dict[str, Any]:
    return {"last_event_id": 0}


# -- the actions: the control API's domain calls ------------------------------------------------


def _scope(session: Session) -> tenants.AdminScope:
    """Who acts: a tenant admin's session reaches only its tenant (another's object is not found)."""
    return tenants.SERVER if session.tenant is None else tenants.AdminScope(session.tenant)


def _valid(schema: str, body: dict[str, Any]) -> dict[str, Any]:
    """A form's values checked by the control API's own request schema (the same 422)."""
    errors = schema_validator(schema).errors(body)
    if errors:
        raise schema_problem(errors)
    return body


def _seconds(text: str) -> float:
    """``90s``, ``15m``, ``2h``, ``7d``, ``1h30m`` or plain seconds (the operator CLI reads the same)."""
    try:
        value = clock.parse_duration(text)
    except ValueError:
        raise _BadInput("a duration is a number with s, m, h or d (90s, 2h, 7d)") from None
    if value >= 10**9:
        raise _BadInput("a duration is under 1,000,000,000 seconds")
    return value


# the kinds a policy may name (the schema's), for the policy box's own words
MEMORY_KINDS: Final = tuple(load_schema("definitions.schema.json")["$defs"]["kind"]["enum"])


def _auto_approve(text: str) -> str | list[str]:
    """The policy box: ``off`` (or empty: no auto-approval), ``all``, or kinds separated by commas,
    in any case; anything else is said as the box's, not as the API's pointer."""
    choice = text.strip().lower() or "off"
    if choice in ("off", "all"):
        return choice
    kinds = list(dict.fromkeys(kind.strip() for kind in choice.split(",") if kind.strip()))
    if {"off", "all"} & set(kinds):
        raise _BadInput("auto-approve: off and all stand alone, without kinds beside them")
    unknown = [kind for kind in kinds if kind not in MEMORY_KINDS]
    if unknown or not kinds:
        named = ", ".join(unknown) if unknown else text.strip()
        raise _BadInput(f"auto-approve: {named} is not off, all or a kind ({', '.join(MEMORY_KINDS)})")
    return kinds


def _flag(form: Mapping[str, str], name: str) -> bool:
    """A form's true/false field: anything else is a mistake, never taken as false."""
    value = form.get(name, "")
    if value not in ("true", "false"):
        raise _BadInput(f"{name} is true or false")
    return value == "true"


def console_router(fake: FakeLucy, stream: EventStream) -> APIRouter:
    console = Console(fake, stream)
    router = APIRouter(prefix=PREFIX)

    def get(path: str, endpoint: Callable[[Request], Awaitable[Response]], *, head: bool = True) -> None:
        """A GET address, which answers HEAD too (RFC 9110) unless a GET of it changes something or
        streams (a one-time login link, the live updates)."""
        methods = ["GET", "HEAD"] if head else ["GET"]
        router.add_api_route(path, endpoint, methods=methods, include_in_schema=False)

    def post(path: str, endpoint: Callable[[Request], Awaitable[Response]]) -> None:
        router.add_api_route(path, endpoint, methods=["POST"], include_in_schema=False)

    def page(name: str, build: Callable[..., dict[str, Any]]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await console.page(request, name, build)

        return endpoint

    def action(
        do: Callable[[sqlite3.Connection, Session, Mapping[str, str], Mapping[str, str]], str | None],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            path = request.path_params
            return await console.act(request, lambda conn, session, form: do(conn, session, form, path))

        return endpoint

    get("/", page("queue", _queue))
    get("/proposals", page("proposals", _proposals))
    get("/memories", page("memories", _memories))
    get("/requests", page("requests", _requests))
    get("/credits", page("credits", _credits))
    get("/settings", page("settings", _settings))
    get("/reset", page("reset", _reset_page))

    def decide(decision: admin.Decision) -> Callable[[Request], Awaitable[Response]]:
        def do(
            conn: sqlite3.Connection, session: Session, form: Mapping[str, str], path: Mapping[str, str]
        ) -> None:
            reason = form.get("reason", "").strip() or None
            if reason is not None:
                size = len(reason.encode("utf-8", "surrogatepass"))
                if size > MAX_REASON_BYTES:  # named as the reviewer knows it, not as the API's field
                    raise _BadInput(
                        f"the reason is too long: at most {MAX_REASON_BYTES:,} UTF-8 bytes, this one"
                        f" has {size:,} (a character beyond ASCII takes two to four)"
                    )
                _valid("control-reject-request.schema.json", {"reason_detail": reason})
            admin.decide(
                conn, fake.ids, path["proposal_id"], decision, reason_detail=reason, scope=_scope(session)
            )

        return action(do)

    post("/proposals/{proposal_id}/approve", decide("approve"))
    post("/proposals/{proposal_id}/reject", decide("reject"))
    post("/proposals/{proposal_id}/expire", decide("expire"))

    def delete_memory(
        conn: sqlite3.Connection, session: Session, form: Mapping[str, str], path: Mapping[str, str]
    ) -> None:
        memory_id = path["memory_id"]
        if form.get("confirmed") != "yes":  # asked by the page's script, or now by a page of its own
            admin.memory_to_delete(conn, memory_id, scope=_scope(session))  # an unknown one: its 404
            raise _Unconfirmed(delete_question(memory_id), f"Delete {memory_id}")
        admin.delete_memory(conn, memory_id, scope=_scope(session))

    def restore_memory(
        conn: sqlite3.Connection, session: Session, form: Mapping[str, str], path: Mapping[str, str]
    ) -> None:
        admin.restore_memory(conn, path["memory_id"], scope=_scope(session))

    post("/memories/{memory_id}/delete", action(delete_memory))
    post("/memories/{memory_id}/restore", action(restore_memory))

    def advance(
        conn: sqlite3.Connection, session: Session, form: Mapping[str, str], path: Mapping[str, str]
    ) -> None:
        seconds = _seconds(form.get("by", ""))
        valid = _valid("control-clock-advance-request.schema.json", {"seconds": seconds})
        clock.advance(conn, valid["seconds"], session.tenant)

    def freeze(
        conn: sqlite3.Connection, session: Session, form: Mapping[str, str], path: Mapping[str, str]
    ) -> None:
        clock.set_clock(conn, now=None, frozen=_flag(form, "frozen"), tenant=session.tenant)

    post("/clock/advance", action(advance))
    post("/clock/freeze", action(freeze))

    def add_fault(
        conn: sqlite3.Connection, session: Session, form: Mapping[str, str], path: Mapping[str, str]
    ) -> None:
        spec = {
            "operation": form.get("operation", ""),
            "status": _int(form, "status"),
            "count": _int(form, "count", 1),
        }
        valid = _valid("control-fault-create-request.schema.json", spec)
        faults.create(conn, fake.ids, valid, tenant=session.tenant)

    def clear_faults(
        conn: sqlite3.Connection, session: Session, form: Mapping[str, str], path: Mapping[str, str]
    ) -> None:
        faults.clear(conn, tenant=session.tenant)

    post("/faults", action(add_fault))
    post("/faults/clear", action(clear_faults))

    def set_policy(
        conn: sqlite3.Connection, session: Session, form: Mapping[str, str], path: Mapping[str, str]
    ) -> None:
        tenant = path["tenant"]
        if session.tenant is not None and tenant != session.tenant:
            raise DomainError("not_found", "no tenant has this id")
        policy.get_policy(conn, tenant)  # an unknown tenant is 404, not created from the console
        value = _auto_approve(form.get("auto_approve", ""))
        policy.update_policy(
            conn, tenant, _valid("control-policy-update.schema.json", {"auto_approve": value})
        )

    post("/tenants/{tenant}/policy", action(set_policy))

    async def reset(request: Request) -> Response:
        try:
            form = await console._checked_form(request)
            with fake.db.write() as conn:
                session = console._check(console._session(conn, request), request, form)
        except _Refused as exc:
            return console.message("Refused", str(exc), status=403, login=isinstance(exc, _NoSession))
        except _BadInput as exc:
            return console.message("Bad request", str(exc), status=400)
        if form.get("confirm", "").strip().lower() != "reset":
            return console.message("Not reset", "Type reset in the box to confirm.", status=400)
        if session.tenant is None:
            fake.reset()
        else:  # a tenant admin's reset: its tenant alone, as over the control API
            with fake.db.write() as conn:
                tenants.reset(conn, session.tenant)
        return RedirectResponse(PREFIX + "/", status_code=303, headers=SECURITY_HEADERS)

    post("/reset", reset)

    # -- login, one-time links, logout -----------------------------------------------------------

    async def login_page(request: Request) -> Response:
        with fake.db.write() as conn:
            session = console._session(conn, request)
        if session is not None:
            return RedirectResponse(PREFIX + "/", status_code=303, headers=SECURITY_HEADERS)
        return console.render("login.html", session=None, error=None)

    async def login(request: Request) -> Response:
        try:
            form = await console._form(request)
        except (_Refused, _BadInput) as exc:
            return console.message("Refused", str(exc), status=403)
        if not console._same_origin(request):
            return console.message(
                "Refused", "the request does not come from this console's origin", status=403
            )
        with fake.db.write() as conn:
            token = form.get("token", "").strip()
            scope = console._admin_scope(token)
            session_id = None if scope is None else sessions.start(conn, scope.tenant, token)
        if session_id is None:
            return console.render(
                "login.html", http_status=401, session=None, error="That is not an admin token."
            )
        response = RedirectResponse(PREFIX + "/", status_code=303, headers=SECURITY_HEADERS)
        _set_cookie(response, request, session_id)
        return response

    async def login_link(request: Request) -> Response:
        with fake.db.write() as conn:
            session_id = sessions.use_link(conn, request.path_params["token"], fake.console_admin)
        if session_id is None:
            return console.message(
                "Link used or expired",
                "A login link works once, within 10 minutes. Log in with the admin token instead.",
                status=403,
            )
        # A page that moves on by itself: the next request starts from this origin, so the
        # SameSite=Strict cookie goes with it even when the link was opened from another site.
        response = console.render("link.html", session=None)
        response.headers["Referrer-Policy"] = "no-referrer"  # the spent link stays out of Referer
        _set_cookie(response, request, session_id)
        return response

    async def logout(request: Request) -> Response:
        try:
            form = await console._checked_form(request)
            with fake.db.write() as conn:
                console._check(console._session(conn, request), request, form)
                sessions.end(conn, request.cookies.get(COOKIE, ""))
        except _NoSession as exc:
            if not console._same_origin(request):  # another site's form: refused, as every state change
                return console.message("Refused", str(exc), status=403, login=True)
            # this console's Log out, its session ended already (another tab, 12 h unused): out is
            # where the reviewer is, and the stale cookie goes
            response = console.to_login()
            response.delete_cookie(COOKIE, **COOKIE_ATTRIBUTES)
            return response
        except _Refused as exc:
            return console.message("Refused", str(exc), status=403)
        except _BadInput as exc:
            return console.message("Bad request", str(exc), status=400)
        response = console.to_login()
        response.delete_cookie(COOKIE, **COOKIE_ATTRIBUTES)
        return response

    get("/login", login_page)
    post("/login", login)
    get("/login/{token}", login_link, head=False)  # a HEAD (a link checker) must not spend it
    post("/logout", logout)

    # -- the live updates and the package's static files ----------------------------------------

    async def events(request: Request) -> Response:
        with fake.db.write() as conn:
            session = console._session(conn, request)
        if session is None:
            return Response("no session", status_code=401, media_type="text/plain")
        try:  # the query the control API's stream takes, and no other (an unknown one is a 422 there too)
            only_query(request.query_params, EVENTS_QUERY)
            resume = last_event_id(request.headers, request.query_params)
        except DomainError as error:
            return problem_response(error, random_request_id())
        digest = session.digest
        return stream.response(
            request.scope,
            resume,
            tenant=session.tenant,
            still_allowed=lambda: sessions.still_valid(fake.db.conn, digest, fake.console_admin),
        )

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in console.static:
            return Response("not found", status_code=404, media_type="text/plain")
        headers = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
        return Response(console.static[name], media_type=_STATIC[name], headers=headers)

    get("/events", events, head=False)
    get("/static/{name}", static)

    pages = list(router.routes)  # every console address but the one below

    async def no_such_page(request: Request) -> Response:
        """Any other address or method under the console: a page saying so (not the API's problem
        JSON); an address of the console asked with another method is 405 with ``Allow``."""
        allowed = allowed_methods(request.scope, pages)
        with fake.db.write() as conn:  # a logged-in reader keeps the console's navigation
            session = console._session(conn, request)
        if not allowed:
            text = "There is no console page at this address."
            return console.message("Not found", text, status=404, session=session)
        what = "a button of the console" if allowed == ["POST"] else "a console page"
        response = console.message(
            "Method not allowed",
            f"This address is {what}; it takes {', '.join(allowed)}, not {request.method}.",
            status=405,
            session=session,
        )
        response.headers["Allow"] = ", ".join(allowed)
        return response

    router.add_api_route(
        "/{rest:path}",
        no_such_page,
        methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"],
        include_in_schema=False,
    )
    return router


def _set_cookie(response: Response, request: Request, session_id: str) -> None:
    response.set_cookie(COOKIE, session_id, secure=request.url.scheme == "https", **COOKIE_ATTRIBUTES)


def console_root() -> Response:
    """``/_fake/console`` (no slash) → the console."""
    return RedirectResponse(PREFIX + "/", status_code=308)
