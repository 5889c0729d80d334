"""``fake-lucy``: ``serve`` runs the fake; the operator commands (``operator_cli``) review and steer a
running one over its control API.

The command line is parsed with nothing of the server imported: ``serve`` imports it
(``fake_lucy.serve``) when it runs, so an operator command, and each ``--workers`` process (which
imports this module again before it loads the app), does not pay for what it does not use.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Sequence
from pathlib import Path

from fake_lucy import __version__, operator_cli

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = operator_cli.Parser(
        prog="fake-lucy",
        description="A fake of Lucy Agent Memory HTTP v1: run it (serve) and review and steer a running one.",
    )
    parser.add_argument("--version", action="version", version=f"fake-lucy {__version__}")
    operator_cli.refuse_admin_token(parser)  # before the command too
    operator_cli.add_global_options(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the fake (every option also FAKE_LUCY_<NAME>)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--workers", type=int)
    serve.add_argument("--database", help="SQLite file, or :memory: (one worker only)")
    serve.add_argument("--seed", type=Path, help="JSON seed file (schemas/seed.schema.json)")
    serve.add_argument("--id-seed", type=int, help="make generated ids deterministic")
    serve.add_argument("--journal-size", type=int, help="requests kept per tenant (default 10000)")
    serve.add_argument("--idempotency-ttl-seconds", type=int)
    serve.add_argument("--reset-on-start", action="store_true", default=None)
    serve.add_argument("--admin-token-file", type=Path, help="file holding the admin token")
    operator_cli.refuse_admin_token(serve)
    serve.add_argument(
        "--import", dest="import_file", type=Path, metavar="FILE", help="load this snapshot at start"
    )
    serve.add_argument(
        "--export-on-exit",
        metavar="FILE",  # a path once the settings know it names a file (not "dir/")
        help="on SIGTERM or SIGINT, write a snapshot to FILE (atomically) before exiting",
    )
    serve.add_argument(
        "--quiet", action="store_true", default=None, help="no server log (one line per v1 request on stderr)"
    )
    serve.add_argument(
        "--tls-certfile", type=Path, metavar="FILE", help="serve HTTPS with this certificate chain (PEM)"
    )
    serve.add_argument("--tls-keyfile", type=Path, metavar="FILE", help="the certificate's private key (PEM)")
    operator_cli.add_commands(commands)
    return parser


def _command_parser(
    parser: argparse.ArgumentParser, args: argparse.Namespace, given: Sequence[str], unknown: Sequence[str]
) -> argparse.ArgumentParser:
    """The parser of the (sub)command the ``unknown`` arguments were given to: its errors name that
    command and its help (``fake-lucy --bogus proposals`` is the top level's)."""
    first = min((given.index(arg) for arg in unknown if arg in given), default=len(given))
    position = 0
    while True:
        commands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, commands[0].dest, None) if commands else None
        if chosen is None or chosen not in commands[0].choices or chosen not in given[position:]:
            return parser
        position = given.index(chosen, position)
        if position > first:  # given before this command: its parent's
            return parser
        parser = commands[0].choices[chosen]
        position += 1


def _without_secrets(unknown: Sequence[str]) -> list[str]:
    """Unknown arguments as an error repeats them, but for the value of a mistyped admin-token
    option (``--admin-tok SECRET``, ``--admin=SECRET``): shown as ``…``, never echoed."""
    shown: list[str] = []
    hide_next = False
    for arg in unknown:
        secret_option = arg.startswith(("--admin", "--tok"))
        if hide_next and not arg.startswith("-"):
            shown.append("…")
        elif secret_option:
            name, equals, _ = arg.partition("=")
            shown.append(name + ("=…" if equals else ""))
        else:
            shown.append(arg)
        hide_next = secret_option and "=" not in arg
    return shown


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # the program itself: what its output's encoding lacks is escaped, never a traceback
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, io.TextIOWrapper):
                stream.reconfigure(errors="backslashreplace")
    parser = _parser()
    given = list(sys.argv[1:] if argv is None else argv)
    args, unknown = parser.parse_known_args(given)
    if unknown:  # named by the command they were given to (argparse names the top-level one)
        shown = " ".join(_without_secrets(unknown))
        _command_parser(parser, args, given, unknown).error(f"unrecognized arguments: {shown}")
    operator_cli.take_global_options(args, parser)
    if args.command != "serve":
        return operator_cli.run(args)
    from fake_lucy import serve  # the server, for this command alone (see the module text)

    code = serve.run(args)
    if argv is None:  # the program itself (the console script, python -m fake_lucy), not a caller
        serve.end_process(code)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
