"""``lucy-memory-mcp`` / ``python -m lucy_memory.mcp``: check the configuration, then serve on stdio.

``-h`` / ``--help`` prints the usage on stdout and exits 0 without serving. The server takes no other
argument (its configuration is the environment): anything else exits 2 after one line on stderr. A bad
configuration exits with status 2 before serving, after one line on stderr. Logs go to stderr; while
serving, stdout carries only the protocol.
"""

from __future__ import annotations

import logging
import os
import sys
import textwrap
from collections.abc import Sequence
from typing import NoReturn

import anyio

from lucy_memory._contract import redact
from lucy_memory.mcp import config as config_module
from lucy_memory.mcp.config import SERVER_NAME, McpConfigError, load_settings, resolve_config

__all__ = ["USAGE", "main"]

log = logging.getLogger("lucy_memory.mcp")


def _environment() -> str:
    """The variables' table of ``lucy_memory.mcp.config``'s docstring (written once, there)."""
    parts = (config_module.__doc__ or "").split("```")
    return textwrap.indent(parts[1].strip("\n"), "  ") + "\n" if len(parts) > 2 else ""


USAGE = f"""\
usage: {SERVER_NAME} [-h]

The Lucy Agent Memory MCP server on stdio, with three tools: memory_recall, memory_propose and
memory_proposal_status. An MCP host starts it; it takes no arguments and reads its configuration
from the environment:

{_environment()}
options:
  -h, --help  show this message and exit

Exit status: 2 for a bad argument or configuration (one line on stderr); otherwise 0 once the host
closes stdin.
"""


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and all(argument in ("-h", "--help") for argument in arguments):
        sys.stdout.write(USAGE)
        sys.stdout.flush()
        return 0
    if arguments:
        # The arguments are not echoed: a token passed by mistake must not reach a log.
        sys.stderr.write(
            f"{SERVER_NAME}: unrecognized arguments: it takes none but -h/--help (its configuration is "
            f"LUCY_MEMORY_* in the environment; see {SERVER_NAME} --help)\n"
        )
        sys.stderr.flush()
        return 2
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    settings = None
    try:
        settings = load_settings()
        config = resolve_config(settings)
    except McpConfigError as exc:
        line = str(exc)
        if settings is not None and settings.token:  # defence in depth: no message is built from the token
            line = redact(line, settings.token.get_secret_value())
        # one line whatever the environment held (a path may hold a line break): escaped as Python would
        line = "".join(char if char.isprintable() else repr(char)[1:-1] for char in line)
        sys.stderr.write(f"{SERVER_NAME}: invalid configuration: {line}\n")
        sys.stderr.flush()
        return 2
    log.info("serving on stdio: Lucy at %s, permissions %s", config.origin, ",".join(config.permissions))
    # The server and the MCP SDK (~0.6 s of imports) only once there is something to serve: --help, a
    # bad argument and a bad configuration answer without them.
    from lucy_memory.mcp.server import serve_stdio

    try:
        anyio.run(serve_stdio, config)
    except KeyboardInterrupt:
        return _end_process(130)
    return _end_process(0)


def _end_process(status: int) -> NoReturn:
    """End the process once serving is over, without the interpreter's teardown: with the MCP SDK's
    hundreds of models loaded, tearing the modules down takes ~0.2 s of CPU that the host waits for
    after closing stdin. Everything of the server is closed by then (its HTTP client, the stdio
    streams); the log and the standard streams are flushed first."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    raise SystemExit(main())
