"""The operator CLI (SPEC 3.11): ``fake-lucy proposals | approve | reject | expire | memories |
requests [--follow] | findings | clock | faults | reset | tenants list | tenants create |
tenants delete | tenants prune | snapshot export | snapshot import`` against a running fake, over
the control API.

Tables for people, ``--json`` for scripts. Exit 0 on success, 1 when the fake answers with a
problem or cannot be reached (one line: the problem's status, code and detail), 2 on a usage or
configuration error. The admin token comes from ``--admin-token-file`` or
``FAKE_LUCY_ADMIN_TOKEN`` (never argv), else the built-in one when the URL is a loopback address.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, NoReturn, TextIO, TypeVar

import httpx

from fake_lucy.addresses import fake_address, is_loopback, loopback_url, path_segment, shown_url
from fake_lucy.domain import clock, findings
from fake_lucy.domain.clock import parse_timestamp
from fake_lucy.domain.defaults import DEFAULT_ADMIN_TOKEN
from fake_lucy.dumps import snapshot_in
from fake_lucy.files import (
    check_writable,
    file_to_write,
    is_stream,
    quiet_stream,
    read_admin_token_file,
    write_atomically,
)
from fake_lucy.text import one_line, pieces, visible
from lucy_memory._contract import (
    PROPOSAL_STATES,
    TOKEN_RULE,
    InvalidJSONError,
    parameters_validator,
    parse_json_object,
    valid_token,
)

__all__ = ["COMMANDS", "Parser", "add_commands", "parse_duration", "refuse_admin_token", "run"]

DEFAULT_URL = "http://127.0.0.1:8787"
COMMANDS = (
    "proposals",
    "approve",
    "reject",
    "expire",
    "memories",
    "requests",
    "findings",
    "clock",
    "faults",
    "reset",
    "tenants",
    "snapshot",
)
CONTENT_WIDTH = 60


class UsageError(Exception):
    """A usage or configuration error (exit 2)."""


class ApiError(Exception):
    """The fake answered with a problem (``status``), or could not be reached (``status`` None): exit 1."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class StreamEnded(Exception):
    """``requests --follow``: the fake ended the event stream (exit 0, with one line saying so, as
    ``docker logs -f`` ends when its container stops)."""


def parse_duration(text: str) -> float:
    """``90s``, ``15m``, ``2h``, ``7d``, ``1h30m`` or plain seconds → seconds (the console reads the same)."""
    try:
        return clock.parse_duration(text)
    except ValueError:
        raise UsageError(f"{text!r} is not a duration (like 90s, 15m, 2h, 7d)") from None


T = TypeVar("T")


def _argument(parse: Callable[[str], T]) -> Callable[[str], T]:
    """``parse`` as an argparse type: its usage error becomes the parser's, naming the command and
    the argument as argparse's own do ("fake-lucy clock advance: argument duration: …")."""

    def typed(text: str) -> T:
        try:
            return parse(text)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return typed


def _timestamp(text: str) -> str:
    """An ISO 8601 time (``2027-01-01``, ``2027-01-01T09:00:00Z``) in the API's form."""
    try:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        moment = moment.astimezone(UTC)
    except ValueError:
        raise UsageError(f"{text!r} is not a time (like 2027-01-01T09:00:00Z)") from None
    except OverflowError:  # a time zone that moves it out of years 1–9999
        raise UsageError(f"{text!r} is outside the years 1 to 9999 in UTC") from None
    return f"{moment.year:04d}-" + moment.strftime("%m-%dT%H:%M:%S.%fZ")


# -- the command line ---------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """``fake-lucy``'s parsers: a usage error is one line (what is wrong, and where the help is)
    and exit 2; an option is never guessed from a prefix of its name (``--admin-token X`` would
    otherwise be read as ``--admin-token-file X``, and a wrong token file named in an error)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]  # typeshed's overloads; the behaviour is argparse's
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        negative = [arg for arg in getattr(self, "_given", []) if _NEGATIVE.match(arg)]
        if negative and "duration" in message:
            # argparse takes "-1h" for an option, then misses the duration
            message = "a duration is never negative: the clock never moves backwards"
        elif negative and "expected one argument" in message:
            message += (
                f" ({negative[0]} reads as an option: durations, counts and balances are never negative)"
            )
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


_NEGATIVE = re.compile(r"-\d")


class _RefuseToken(argparse.Action):
    """``--admin-token``: refused without repeating its value (a token on the command line shows
    in the process list and in CI logs)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        parser.error(
            "the admin token is never taken from the command line (it would show in the process"
            " list and in logs): use --admin-token-file FILE or FAKE_LUCY_ADMIN_TOKEN"
        )


def refuse_admin_token(parser: argparse.ArgumentParser) -> None:
    """Add ``--admin-token``, which refuses itself (see ``_RefuseToken``); hidden from the help."""
    parser.add_argument("--admin-token", nargs="?", action=_RefuseToken, help=argparse.SUPPRESS)


def _whole_number(text: str, least: int, rule: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(rule)
    return value


def _at_least_one(text: str) -> int:
    return _whole_number(text, 1, "must be at least 1")


def _not_negative(text: str) -> int:
    return _whole_number(text, 0, "must not be negative")


def _an_id(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("an id is not empty")
    return text


def _common(default: Any = None) -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    common.add_argument(
        "--url", default=default, help=f"the fake's URL (FAKE_LUCY_URL, default {DEFAULT_URL})"
    )
    common.add_argument("--admin-token-file", type=Path, default=default, help="file holding the admin token")
    refuse_admin_token(common)
    common.add_argument(
        "--json",
        action="store_true",
        default=False if default is None else default,
        help="JSON for scripts instead of a table",
    )
    return common


# The operator options given before the command (``fake-lucy --url URL proposals``), kept apart
# from the command's own so that its defaults do not reset them; ``take_global_options`` merges.
_GLOBAL = {"url": "global_url", "admin_token_file": "global_admin_token_file", "json": "global_json"}


def add_global_options(parser: argparse.ArgumentParser) -> None:
    """``--url``, ``--admin-token-file`` and ``--json`` before the command too, as ``git -C``."""
    parser.add_argument("--url", dest=_GLOBAL["url"], metavar="URL", help="as the command's --url")
    parser.add_argument(
        "--admin-token-file",
        dest=_GLOBAL["admin_token_file"],
        metavar="FILE",
        type=Path,
        help="as the command's --admin-token-file",
    )
    parser.add_argument("--json", dest=_GLOBAL["json"], action="store_true", help="as the command's --json")


def take_global_options(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """The options given before the command, where the command was not given its own (``serve``
    takes ``--admin-token-file`` alone: ``--url`` and ``--json`` are the operator commands')."""
    given = {name: getattr(args, dest) for name, dest in _GLOBAL.items()}
    for dest in _GLOBAL.values():
        delattr(args, dest)
    if args.command == "serve":
        wrong = [f"--{name.replace('_', '-')}" for name in ("url", "json") if given[name]]
        if wrong:
            parser.error(f"{' and '.join(wrong)}: an option of the operator commands, not of serve")
        if args.admin_token_file is None:
            args.admin_token_file = given["admin_token_file"]
        return
    for name in ("url", "admin_token_file"):
        if getattr(args, name) is None:
            setattr(args, name, given[name])
    args.json = args.json or given["json"]


def add_commands(commands: Any) -> None:
    """Add the operator commands to ``fake-lucy``'s subcommands."""
    common = _common()
    # the options again on ``clock advance`` and ``faults add`` (SUPPRESS: given before the action,
    # they are not reset by the action's own defaults)
    again = _common(argparse.SUPPRESS)

    proposals = commands.add_parser("proposals", parents=[common], help="list proposals")
    proposals.add_argument("--status", choices=PROPOSAL_STATES)
    proposals.add_argument("--tenant")
    proposals.add_argument("--limit", type=_at_least_one, help="show at most this many")
    for verb, text in (("approve", "approve"), ("reject", "reject"), ("expire", "expire")):
        decide = commands.add_parser(verb, parents=[common], help=f"{text} pending proposals")
        decide.add_argument("ids", nargs="+", metavar="ID", type=_an_id)
        if verb == "reject":
            decide.add_argument("--reason", help="the reason, stored as reason_detail")
    memories = commands.add_parser("memories", parents=[common], help="list memories")
    memories.add_argument("--tenant")
    memories.add_argument("--history", action="store_true", help="every version, not only the current")
    memories.add_argument("--limit", type=_at_least_one, help="show at most this many")
    requests = commands.add_parser("requests", parents=[common], help="the request journal")
    requests.add_argument("--limit", type=_at_least_one, default=50, help="the newest N (default 50)")
    requests.add_argument("--follow", "-f", action="store_true", help="then print new requests as they come")
    findings_ = commands.add_parser("findings", parents=[common], help="what the fake noticed of the clients")
    findings_.add_argument(
        "--credential-id", "--credential", dest="credential", metavar="ID", help="only this credential's"
    )
    findings_.add_argument("--code", choices=findings.CODES)
    clock = commands.add_parser("clock", parents=[common], help="show or move the fake's clock")
    clock_actions = clock.add_subparsers(dest="action")
    advance = clock_actions.add_parser(
        "advance", parents=[again], help="move forward by a duration (90s, 2h, 7d)"
    )
    advance.add_argument("duration", type=_argument(parse_duration))
    clock_actions.add_parser("freeze", parents=[again], help="stop the clock")
    clock_actions.add_parser("unfreeze", parents=[again], help="let the clock run")
    set_clock = clock_actions.add_parser("set", parents=[again], help="set the time (never backwards)")
    set_clock.add_argument("time", type=_argument(_timestamp))
    faults = commands.add_parser("faults", parents=[common], help="list, add or clear injected faults")
    fault_actions = faults.add_subparsers(dest="action")
    add = fault_actions.add_parser("add", parents=[again], help="add a fault")
    add.add_argument("operation", choices=("recall", "propose", "proposal_status", "any"))
    add.add_argument("status", type=int, choices=(429, 500, 502, 503, 504))
    add.add_argument("--count", type=_at_least_one)
    add.add_argument("--code")
    add.add_argument("--retry-after", type=_not_negative)
    add.add_argument("--phase", choices=("before", "after_commit", "in_flight"))
    add.add_argument("--drop-connection", action="store_true", default=None)
    add.add_argument("--delay-ms", type=_not_negative)
    add.add_argument("--hold-ms", type=_not_negative)
    add.add_argument("--credential-id")
    fault_actions.add_parser("clear", parents=[again], help="remove every fault")
    commands.add_parser("reset", parents=[common], help="reset the fake to its seed")
    tenants = commands.add_parser(
        "tenants", parents=[common], help="list, create or delete tenants; prune those left behind"
    )
    tenant_actions = tenants.add_subparsers(dest="action", required=True)
    listing = tenant_actions.add_parser(
        "list", parents=[again], help="the tenants, oldest first: when each was made and what it holds"
    )
    prune = tenant_actions.add_parser(
        "prune",
        parents=[again],
        help="delete the tenants made by POST /_fake/tenants (test sessions) longer ago than --older-than",
    )
    for command in (listing, prune):
        command.add_argument(
            "--older-than",
            metavar="DURATION",
            type=_argument(parse_duration),
            required=command is prune,
            help="only tenants made longer ago than this (90s, 15m, 2h, 7d) by the server clock",
        )
        command.add_argument("--prefix", help="only tenants whose id starts with this (a session label)")
    prune.add_argument("--dry-run", action="store_true", help="show what would be deleted, delete nothing")
    create = tenant_actions.add_parser(
        "create", parents=[again], help="a new tenant; prints its credential and admin tokens once"
    )
    create.add_argument("--tenant", help="its id (default: a generated one)")
    create.add_argument("--credits", type=_not_negative, help="the account's initial balance (default 1000)")
    delete = tenant_actions.add_parser("delete", parents=[again], help="delete a tenant and all it holds")
    delete.add_argument("tenant", type=_an_id)
    snapshots = commands.add_parser("snapshot", parents=[common], help="export or import the whole state")
    snapshot_actions = snapshots.add_subparsers(dest="action", required=True)
    export = snapshot_actions.add_parser(
        "export",
        parents=[again],
        help="write the state to FILE (atomically: FILE is whole or untouched; - is standard output)",
    )
    export.add_argument("file", metavar="FILE")  # a path, once it is known to name a file (_snapshot)
    export.add_argument("--include-journal", action="store_true", help="with the request journal")
    load = snapshot_actions.add_parser(
        "import", parents=[again], help="replace the state with FILE's (- is standard input)"
    )
    load.add_argument("file", type=Path, metavar="FILE")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run one operator command; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    shown = shown_url(args.url or os.environ.get("FAKE_LUCY_URL") or DEFAULT_URL)
    try:
        url, token = _target(args)
        # this machine: never through a proxy from the environment (HTTP_PROXY, ALL_PROXY), which
        # would see the admin token and cannot reach 127.0.0.1 anyway (a network layer of its own)
        local = httpx.HTTPTransport() if loopback_url(url) else None
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=headers, timeout=30, transport=local) as http:
            # a snapshot's refused fields are pointers into its file, not options
            api = _Api(http, shown_url(url), options_named=args.command != "snapshot")
            _HANDLERS[args.command](api, args, out)
    except UsageError as exc:
        return _fail(err, str(exc), 2)
    except ApiError as exc:
        return _fail(err, str(exc), 1)
    except (KeyError, TypeError, AttributeError):  # an answer of another shape: not the fake's
        return _fail(err, f"the answer from {shown} is not one of fake-lucy", 1)
    except StreamEnded as exc:  # the end of requests --follow, not of the user's choosing: said so
        return _fail(err, str(exc), 0)
    except KeyboardInterrupt:
        if getattr(args, "follow", False):  # the end of requests --follow
            return 0
        return _fail(err, "interrupted (what was already sent may have been done)", INTERRUPTED)
    except BrokenPipeError:  # the reader went (``| head``): stop quietly, as a shell tool does
        quiet_stream(out)
        return CLOSED_PIPE
    return 0


def _fail(err: TextIO, text: str, code: int) -> int:
    """The one line of an error, and the exit code (the same when stderr's reader is gone)."""
    try:
        print(f"fake-lucy: {one_line(text)}", file=err, flush=True)
    except BrokenPipeError:
        quiet_stream(err)
    return code


INTERRUPTED = 130  # 128 + SIGINT, as shells report a command stopped by Ctrl-C
CLOSED_PIPE = 141  # 128 + SIGPIPE, as shells report a command whose reader went away


def _target(args: argparse.Namespace) -> tuple[str, str]:
    given = os.environ.get("FAKE_LUCY_URL") if args.url is None else args.url
    if given is not None and not given.strip():  # set but empty is a mistake, as ``serve`` says too
        raise UsageError("--url is empty" if args.url is not None else "FAKE_LUCY_URL is set but empty")
    try:
        url, host = fake_address(given or DEFAULT_URL, "the operator commands need")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    token_file = args.admin_token_file or os.environ.get("FAKE_LUCY_ADMIN_TOKEN_FILE")
    if token_file:
        try:
            token = read_admin_token_file(token_file)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        return url, _checked_token(token, "the admin token file")
    if "FAKE_LUCY_ADMIN_TOKEN" in os.environ:  # set but empty is a mistake, as ``serve`` says too
        token = os.environ["FAKE_LUCY_ADMIN_TOKEN"].strip()
        return url, _checked_token(token, "FAKE_LUCY_ADMIN_TOKEN", empty="is set but empty")
    if is_loopback(host):
        return url, DEFAULT_ADMIN_TOKEN
    raise UsageError("no admin token: set FAKE_LUCY_ADMIN_TOKEN or --admin-token-file")


def _checked_token(token: str, where: str, *, empty: str = "is empty") -> str:
    """A token an Authorization header can carry (the rule ``fake-lucy serve`` applies to its own),
    else a usage error that does not repeat it."""
    if not token:
        raise UsageError(f"{where} {empty}")
    if not valid_token(token):
        raise UsageError(f"{where} must be {TOKEN_RULE}")
    return token


class _Api:
    def __init__(self, http: httpx.Client, url: str, *, options_named: bool = False) -> None:
        self.http = http
        self.url = url
        self.options_named = options_named  # a 422's fields named as the command line's options

    def call(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        return _answer(self.send(method, path, json=body, params=params), self.url)

    def send(
        self, method: str, path: str, params: dict[str, Any] | None = None, **options: Any
    ) -> httpx.Response:
        """The answer as it came (a problem raises); ``options`` as for ``httpx.Client.request``."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = self.http.request(method, "/_fake" + path, params=query, **options)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as exc:
            raise ApiError(f"cannot reach {self.url} ({_reason(exc)})") from None
        except httpx.TransportError as exc:  # sent, but no (whole) answer came
            done = "" if method == "GET" else "; what was sent may have been done"
            raise ApiError(f"no answer from {self.url} ({_reason(exc)}){done}") from None
        if response.status_code >= 400:
            _answer(response, self.url, options_named=self.options_named)
        return response

    def pages(self, path: str, at_most: int | None = None, **params: Any) -> list[dict[str, Any]]:
        """A listing's items, page after page, up to ``at_most``; ``params`` are its query (the
        journal's ``limit`` among them: the newest N)."""
        items: list[dict[str, Any]] = []
        cursor = None
        while at_most is None or len(items) < at_most:
            page = self.call("GET", path, cursor=cursor, **params)
            items.extend(page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        return items if at_most is None else items[:at_most]

    @contextlib.contextmanager
    def events(self) -> Iterator[Iterator[dict[str, Any]]]:
        """The event stream, open (from this moment on) for the block: an iterator of events."""
        try:
            with self.http.stream(
                "GET", "/_fake/events", headers={"Accept": "text/event-stream"}, timeout=None
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    _answer(response, self.url)
                yield (json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:"))
        except httpx.TransportError as exc:
            raise ApiError(f"cannot follow the events of {self.url} ({_reason(exc)})") from None


def _reason(exc: httpx.TransportError) -> str:
    text = str(exc).strip()
    if isinstance(exc, httpx.ConnectError):
        return "connection refused" if "refused" in text.lower() or not text else text.splitlines()[0]
    return text.splitlines()[0] if text else type(exc).__name__


def _answer(response: httpx.Response, url: str, *, options_named: bool = False) -> Any:
    if 200 <= response.status_code < 300:
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            pass
    if response.status_code < 400:  # not JSON, a redirect: something other than the fake answered
        raise ApiError(
            f"HTTP {response.status_code} from {url} (not an answer of fake-lucy)", response.status_code
        )
    try:
        problem = response.json()
        detail = f"{response.status_code} {problem['code']}: {problem['detail']}"
        errors = (problem.get("details") or {}).get("errors") or []
        more = "; …" if len(errors) > 3 else ""
        if errors and options_named and problem["code"] == "invalid_request":
            # what was given on the command line, in its words: --delay-ms: must be at most 60000
            names = _given(response.request)
            where = "; ".join(
                f"{_option(error['pointer'], names)}: {error['detail']}" for error in errors[:3]
            )
            detail = f"{where}{more} ({response.status_code} {problem['code']})"
        elif errors:  # a 422: the first pointers, and what is wrong there
            where = "; ".join(f"{error['pointer'] or '/'} {error['detail']}" for error in errors[:3])
            detail += f" ({where}{more})"
    except (ValueError, KeyError, TypeError, AttributeError):
        detail = f"HTTP {response.status_code} from {url} (not an answer of fake-lucy)"
    raise ApiError(visible(detail), response.status_code)


def _given(request: httpx.Request) -> dict[str, str]:
    """Where each field of a request came from: ``body`` or ``query`` (the rest is the path)."""
    names = dict.fromkeys(request.url.params.keys(), "query")
    try:
        body = json.loads(request.content) if request.content else None
    except ValueError:
        body = None
    if isinstance(body, dict):
        names.update(dict.fromkeys(body, "body"))
    return names


# The body fields the command line gives as arguments or under another name, and the path's
# parameters (the commands' arguments); any other field is the option of its name.
_BODY_NAMES = {
    "seconds": "DURATION (in seconds)",
    "now": "TIME",
    "reason_detail": "--reason",
    "operation": "OPERATION",
    "status": "STATUS",
}
_PATH_NAMES = {"proposal_id": "ID", "memory_id": "ID", "tenant": "TENANT", "tenant_id": "TENANT"}


def _segment(value: str, definition: str) -> str:
    """``value`` as one path segment of the control API. One holding a ``/`` would reach the fake
    as two segments (404, no route), so it is refused here as the fake refuses any other value that
    breaks the id's rule (``definitions.schema.json#/$defs/<definition>``), named as its argument."""
    if "/" in value:
        name = definition.removesuffix("_id")
        reference = f"definitions.schema.json#/$defs/{definition}"
        errors = parameters_validator(((name, reference),)).errors({name: value})
        detail = errors[0].detail if errors else "must not hold a /"
        # what the fake answers for any other value that breaks the rule (it cannot see this one)
        raise ApiError(f"{_PATH_NAMES.get(definition, name.upper())}: {detail} (422 invalid_request)", 422)
    return path_segment(value)


def _option(pointer: str, given: dict[str, str]) -> str:
    """The option (or argument) behind a request field the fake refused (``/delay_ms`` → ``--delay-ms``)."""
    field = pointer.lstrip("/").split("/", 1)[0]
    where = given.get(field)
    if where == "body" and field in _BODY_NAMES:
        return _BODY_NAMES[field]
    if where is None:
        return _PATH_NAMES.get(field, field.upper())
    return "--" + field.replace("_", "-")


# -- output -------------------------------------------------------------------------------------


def _cell(value: Any, width: int | None = None) -> str:
    """A table cell: invisible characters as their markers, cut to ``width`` (never in a marker)."""
    if value is None or value == "":
        return "–"
    text = str(value).replace("\n", "⏎").replace("\t", " ")
    units = [unit for piece, marker in pieces(text) for unit in ([piece] if marker else piece)]
    if width is None or sum(map(len, units)) <= width:
        return "".join(units)
    kept: list[str] = []
    used = 0
    for unit in units:
        if used + len(unit) > width - 1:
            break
        kept.append(unit)
        used += len(unit)
    return "".join(kept) + "…"


def _table(out: TextIO, rows: Sequence[dict[str, str]]) -> None:
    """Rows of cells under their headers (each row's keys, in order); nothing for no rows."""
    if not rows:
        return
    lines = [list(rows[0]), *(list(row.values()) for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    for line in lines:
        print(_line(line, widths), file=out)


def _line(cells: Iterable[str], widths: Sequence[int]) -> str:
    """One row of a table: each cell padded to its column's width, two spaces between columns."""
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()


def _json_text(out: TextIO, value: Any, indent: int | None = None) -> str:
    """JSON for ``out``: as UTF-8 text where its encoding is UTF-8, else ASCII with ``\\u`` escapes
    (an encoding that lacks a character would otherwise escape it as Python does, ``\\U0001f389``,
    which no JSON reader takes, and a legacy code page is no JSON encoding anyway)."""
    return json.dumps(value, ensure_ascii=not _utf8(out), indent=indent)


def _utf8(out: TextIO) -> bool:
    encoding = getattr(out, "encoding", None)
    if not isinstance(encoding, str):  # an in-memory stream: text, no bytes
        return True
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def _json(out: TextIO, value: Any) -> None:
    print(_json_text(out, value, indent=2), file=out)


def _listing(
    out: TextIO,
    args: argparse.Namespace,
    items: list[dict[str, Any]],
    row: Callable[[dict[str, Any]], dict[str, str]],
    nothing: str,
) -> None:
    """``items`` as JSON with ``--json``; else a table, one ``row`` an item, or the line ``nothing``."""
    if args.json:
        _json(out, items)
        return
    _table(out, [row(item) for item in items])
    if not items:
        print(nothing, file=out)


def _say(out: TextIO, args: argparse.Namespace, answer: Any, line: str) -> None:
    """The answer as JSON with ``--json``, else one line for people."""
    if args.json:
        _json(out, answer)
    else:
        print(line, file=out)


def _when(timestamp: str | None) -> str:
    return "–" if not timestamp else timestamp[:19].replace("T", " ")


def _scope(item: dict[str, Any]) -> str:
    return f"{item['scope']['kind']}/{item['scope']['id']}"


# -- the commands -------------------------------------------------------------------------------


def _about(item: dict[str, Any]) -> dict[str, str]:
    """The cells of what a proposal or a memory is about: its tenant (a server admin lists every
    tenant's), kind, scope and topic."""
    return {
        "TENANT": _cell(item.get("tenant"), 20),  # a fake older than the field: –
        "KIND": _cell(item["kind"]),
        "SCOPE": _cell(_scope(item), 30),
        "TOPIC": _cell(item["topic"], 20),
    }


def _proposal_row(p: dict[str, Any]) -> dict[str, str]:
    return {
        "ID": p["id"],
        "STATUS": p["status"],
        **_about(p),
        "CREATED": _when(p["created_at"]),
        "CONTENT": _cell(p["content"], CONTENT_WIDTH),
    }


def _proposals(api: _Api, args: argparse.Namespace, out: TextIO) -> None:
    items = api.pages("/proposals", args.limit, status=args.status, tenant=args.tenant)
    _listing(out, args, items, _proposal_row, "no proposals")


def _decide(api: _Api, args: argparse.Namespace, out: TextIO) -> None:
    # --json: one answer per id, in the order given: the proposal, or what the fake said of that id
    decided: list[dict[str, Any]] = []
    failures: list[str] = []
    body = {"reason_detail": args.reason} if getattr(args, "reason", None) else None
    for proposal_id in args.ids:
        try:
            segment = _segment(proposal_id, "proposal_id")
            answer = api.call("POST", f"/proposals/{segment}/{args.command}", body)
        except ApiError as exc:
            failures.append(f"{visible(proposal_id)}: {exc}")
            decided.append({"id": proposal_id, "error": {"status": exc.status, "detail": str(exc)}})
            continue
        proposal = answer["proposal"]
        decided.append(proposal)
        if not args.json:
            memory = proposal["memory"]
            into = f" → {memory['id']} v{memory['version']}" if memory else ""
            print(f"{proposal['id']} {proposal['status']}{into}", file=out)
    if args.json:
        _json(out, decided)
    if failures:
        raise ApiError("; ".join(failures))


def _memory_row(m: dict[str, Any]) -> dict[str, str]:
    return {
        "ID": m["id"],
        "V": str(m["version"]),
        "STATUS": m["status"],
        **_about(m),
        "CONTENT": _cell(m["content"], CONTENT_WIDTH),
    }


def _memories(api: _Api, args: argparse.Namespace, out: TextIO) -> None:
    history = "true" if args.history else "false"
    items = api.pages("/memories", args.limit, tenant=args.tenant, include_history=history)
    _listing(out, args, items, _memory_row, "no memories")


def _request_row(item: dict[str, Any]) -> dict[str, str]:
    marks = [name for name, on in (("replayed", item["replayed"]), ("dropped", item["dropped"])) if on]
    if item["fault_id"]:
        marks.append(f"fault {item['fault_id']}")
    return {
        "AT": _when(item["at"]),
        "OPERATION": item["operation"],
        "STATUS": "–" if item["status"] is None else str(item["status"]),
        "CHARGED": "1" if item["charged"] else "0",
        "KEY": _cell(item["idempotency_key"], 14),
        "RETRY": str(item["retry_attempt"]),
        "CREDENTIAL": _cell(item["credential_id"]),
        "MARKS": " ".join(marks) or "–",
    }


def _requests(api: _Api, args: argparse.Namespace, out: TextIO) -> None:
    with contextlib.ExitStack() as stack:
        # --follow: the stream opens first, so no request falls between the listing and the stream
        stream = stack.enter_context(api.events()) if args.follow else None
        _print_requests(api, args, out, stream)


# The columns of ``requests --follow``, each as wide as its widest cell to come is likely to be:
# the rows that arrive later are printed in these (or the listing's wider) widths.
_FOLLOW_WIDTHS = {
    "AT": 19,
    "OPERATION": 15,
    "STATUS": 6,
    "CHARGED": 7,
    "KEY": 14,
    "RETRY": 5,
    "CREDENTIAL": 27,  # cred_ and 22 characters: the ids the fake generates
    "MARKS": 0,
}


def _print_requests(
    api: _Api, args: argparse.Namespace, out: TextIO, stream: Iterator[dict[str, Any]] | None
) -> None:
    items = api.pages("/requests", limit=args.limit)  # the journal's newest ``limit``, every page
    seen = {item["request_id"] for item in items}
    rows = [_request_row(item) for item in items]
    widths = [max([minimum, *(len(row[name]) for row in rows)]) for name, minimum in _FOLLOW_WIDTHS.items()]

    def line(cells: Iterable[str]) -> None:
        print(_line(cells, widths), file=out, flush=True)

    if args.json and stream is None:  # a list, as every other --json
        _json(out, items)
    elif args.json:  # a stream has no end to close a list at: one object per line (JSON Lines)
        for item in items:
            print(_json_text(out, item), file=out, flush=True)
    elif stream is None:
        _table(out, rows)
        if not items:
            print("no requests", file=out)
    else:  # the header even over no rows, in widths that leave room for the rows to come
        for cells in ([*_FOLLOW_WIDTHS], *(row.values() for row in rows)):
            line(cells)
    if stream is None:
        return
    for event in stream:
        if event["type"] != "request" or event["data"]["request_id"] in seen:
            continue
        item = event["data"]
        if args.json:
            print(_json_text(out, item), file=out, flush=True)
        else:
            line(_request_row(item).values())
    raise StreamEnded(
        f"the fake at {api.url} ended the event stream (it stopped, or this admin token's tenant is gone)"
    )


def _finding_row(f: dict[str, Any]) -> dict[str, str]:
    return {
        "FINDING": f["finding_id"],
        "AT": _when(f["at"]),
        "CODE": f["code"],
        "CREDENTIAL": _cell(f["credential_id"]),
        "REQUESTS": _cell(" ".join(f["request_ids"]), 30),
        "DETAIL": _cell(f["detail"], CONTENT_WIDTH * 2),
    }


def _findings(api: _Api, args: argparse.Namespace, out: TextIO) -> None:
    items = api.pages("/findings", credential_id=args.credential, code=args.code)
    _listing(out, args, items, _finding_row, "no findings")


def _clock(api: _Api, args: argparse.Namespace, out: TextIO) -> None:
    if args.action == "advance":
        state = api.call("POST", "/clock/advance", {"seconds": args.duration})
    elif args.action in ("freeze", "unfreeze"):
        state = api.call("PUT", "/clock", {"frozen": args.action == "freeze"})
    elif args.action == "set":
        state = api.call("PUT", "/clock", {"now": args.time})
    else:
        state = api.call("GET", "/clock")
    _say(out, args, state, f"{state['now']}{'  (frozen)' if state['frozen'] else ''}")


def _fault_row(f: dict[str, Any]) -> dict[str, str]:
    return {
        "FAULT": f["fault_id"],
        "OPERATION": f["operation"],
        "STATUS": str(f["status"]),
        "CODE": f["code"],
        "PHASE": f["phase"] + (" (drop)" if f["drop_connection"] else ""),
        "LEFT": str(f["remaining"]),
        "CREDENTIAL": _cell(f["credential_id"] or "any"),
    }


def _fault_phase(args: argparse.Namespace) -> str | None:
    """``--phase``, or the one phase ``--drop-connection`` or ``--hold-ms`` goes with; a usage error
    for another phase given with them (a fault that would never do what was asked)."""
    if args.drop_connection and args.hold_ms is not None:
        raise UsageError(
            "--drop-connection (phase after_commit) and --hold-ms (phase in_flight) do not go together"
        )
    phase: str | None = args.phase
    for option, given, only in (
        ("--drop-connection", args.drop_connection, "after_commit"),
        ("--hold-ms", args.hold_ms is not None, "in_flight"),
    ):
        if given and phase not in (None, only):
            raise UsageError(f"{option} goes with --phase {only}, not --phase {phase}")
        if given:
            phase = only
    return phase


def _faults(api: _Api, args: argparse.Namespace, out: TextIO) -> None:
    if args.action == "add":
        options = {
            "count": args.count,
            "code": args.code,
            "retry_after": args.retry_after,
            "phase": _fault_phase(args),
            "drop_connection": args.drop_connection,
            "delay_ms": args.delay_ms,
            "hold_ms": args.hold_ms,
            "credential_id": args.credential_id,
        }
        body = {"operation": args.operation, "status": args.status}
        body.update({k: v for k, v in options.items() if v is not None})
        created = api.call("POST", "/faults", body)
        _say(out, args, created, f"{created['fault_id']} armed ({created['remaining']} left)")
    elif args.action == "clear":
        api.call("DELETE", "/faults")
        _say(out, args, {"cleared": True}, "faults cleared")
    else:
        items = api.call("GET", "/faults")["items"]
        _listing(out, args, items, _fault_row, "no faults")


def _reset(api: _Api, args: argparse.Namespace, out: TextIO) -> None:
    answer = api.call("POST", "/reset")
    _say(out, args, answer, f"reset ({answer['took_ms']} ms)")


def _tenant_row(t: dict[str, Any]) -> dict[str, str]:
    return {
        "TENANT": _cell(t["tenant"]),
        "CREATED": _when(t["created_at"]),
        "ADMIN": "yes" if t["tenant_admin"] else "–",
        "CREDENTIALS": str(t["credentials"]),
        "MEMORIES": str(t["memories"]),
        "PENDING": str(t["pending_proposals"]),
    }


def _chosen_tenants(api: _Api, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The listing, narrowed by ``--prefix`` and by ``--older-than`` (made before the server clock's
    now less the duration; a tenant whose time is unknown is never older)."""
    items = api.pages("/tenants")
    if args.prefix is not None:
        items = [t for t in items if t["tenant"].startswith(args.prefix)]
    if args.older_than is not None:
        age: float = args.older_than
        # the listing's own now: the server clock, even for a tenant admin (whose clock is its own)
        now_us = parse_timestamp(api.call("GET", "/tenants", limit=1)["now"])
        items = [
            t for t in items if t["created_at"] and now_us - parse_timestamp(t["created_at"]) > age * 1e6
        ]
    return items


def _prune(api: _Api, args: argparse.Namespace, out: TextIO) -> None:
    """Delete the chosen tenants that test sessions made (``tenant_admin``); never the seed's, nor
    one made by a credential or a policy on first use. One that is gone meanwhile is no failure."""
    doomed = [t for t in _chosen_tenants(api, args) if t["tenant_admin"]]
    deleted: list[dict[str, Any]] = []
    failures: list[str] = []
    for tenant in doomed:
        if not args.dry_run:
            try:
                api.call("DELETE", f"/tenants/{path_segment(tenant['tenant'])}")
            except ApiError as exc:
                if exc.status != 404:
                    failures.append(f"{visible(tenant['tenant'])}: {exc}")
                continue
        deleted.append(tenant)
    if args.json:
        _json(out, {"dry_run": args.dry_run, "deleted": [t["tenant"] for t in deleted]})
    else:
        _table(out, [_tenant_row(t) for t in deleted])
        verb = "would be deleted" if args.dry_run else "deleted"
        print(f"{len(deleted)} tenant{'' if len(deleted) == 1 else 's'} {verb}", file=out)
    if failures:
        raise ApiError("; ".join(failures))


def _tenants(api: _Api, args: argparse.Namespace, out: TextIO) -> None:
    if args.action == "list":
        _listing(out, args, _chosen_tenants(api, args), _tenant_row, "no tenants")
        return
    if args.action == "prune":
        _prune(api, args, out)
        return
    if args.action == "delete":
        api.call("DELETE", f"/tenants/{_segment(args.tenant, 'tenant_id')}")
        _say(out, args, {"tenant": args.tenant, "deleted": True}, f"tenant {visible(args.tenant)} deleted")
        return
    body = {"tenant": args.tenant, "credits": args.credits}
    created = api.call("POST", "/tenants", {k: v for k, v in body.items() if v is not None})
    # the tokens are shown only in this answer (the fake keeps their hashes): printed once, here
    if args.json:
        _json(out, created)
        return
    credential = created["credential"]
    rows = [
        ("tenant", created["tenant"]),
        ("credential", credential["credential_id"]),
        ("credential token", credential["token"]),
        ("account", credential["account"]),
        ("user", credential["user"]),
        ("permissions", " ".join(credential["permissions"])),
        ("admin token", created["admin_token"]),
    ]
    for name, value in rows:
        print(f"{name:<17} {_cell(value)}", file=out)
    print("the tokens are shown only now (the fake keeps their hashes)", file=out)


STANDARD_STREAM = "-"  # snapshot export's standard output, import's standard input


def _write_bytes(out: TextIO, data: bytes) -> None:
    """``data`` as it is to ``out`` (through its binary buffer when it has one)."""
    out.flush()
    buffer = getattr(out, "buffer", None)
    if buffer is None:  # an in-memory text stream
        out.write(data.decode("utf-8"))
    else:
        buffer.write(data)
        buffer.flush()


def _export_target(args: argparse.Namespace, out: TextIO) -> tuple[str, Callable[[bytes], None], TextIO]:
    """Where ``snapshot export`` writes, checked before the fake is asked: its name, the writer,
    and where the report goes (stderr when the snapshot goes to a stream: it is not put into it)."""
    if args.file == STANDARD_STREAM:
        if out is None:  # ``>&-``: the interpreter has no sys.stdout
            raise UsageError("standard output is closed: give snapshot export a file to write")
        return "standard output", partial(_write_bytes, out), sys.stderr
    try:  # a folder or a file in the way, no permission, /proc
        path = file_to_write(args.file)
        check_writable(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return str(path), partial(write_atomically, path), sys.stderr if is_stream(path) else out


def _snapshot(api: _Api, args: argparse.Namespace, out: TextIO) -> None:
    if args.action == "export":
        shown, write, report = _export_target(args, out)
        include = "true" if args.include_journal else "false"
        response = api.send("GET", "/snapshot", params={"include_journal": include})
        try:
            document = parse_json_object(response.content)
        except InvalidJSONError:
            raise ApiError(f"the answer from {api.url} is not a snapshot (not a JSON object)") from None
        data = response.content.rstrip(b"\n") + b"\n"  # the bytes as sent
        try:
            write(data)
        except BrokenPipeError:  # a pipe's reader went away (``| head``): quietly, as any command
            raise
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise UsageError(f"cannot write {shown} ({reason})") from None
        size, tenants = len(data), len(document.get("tenants") or [])
        file = args.file if args.file == STANDARD_STREAM else shown
        _say(
            report,
            args,
            {"file": file, "bytes": size},
            f"{shown} written ({size} bytes, {tenants} tenant(s))",
        )
        return
    path = Path(args.file)
    standard = args.file == Path(STANDARD_STREAM)
    shown = "standard input" if standard else str(path)
    try:
        data = sys.stdin.buffer.read() if standard else path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {shown} ({exc.strerror or exc})") from None
    try:
        document = parse_json_object(data, subject="the input" if standard else "the file")
    except InvalidJSONError as exc:
        raise UsageError(f"{shown} is not a JSON object ({exc})") from None
    inner = snapshot_in(document)
    if inner is not document:  # a failure dump: the snapshot in it
        data = json.dumps(inner, ensure_ascii=False).encode("utf-8")
    answer = _answer(
        api.send("PUT", "/snapshot", content=data, headers={"Content-Type": "application/json"}), api.url
    )
    _say(out, args, answer, f"{shown} imported")


_HANDLERS: dict[str, Callable[[_Api, argparse.Namespace, TextIO], None]] = {
    "proposals": _proposals,
    "approve": _decide,
    "reject": _decide,
    "expire": _decide,
    "memories": _memories,
    "requests": _requests,
    "findings": _findings,
    "clock": _clock,
    "faults": _faults,
    "reset": _reset,
    "tenants": _tenants,
    "snapshot": _snapshot,
}
