"""``lucy-memory-mcp`` / ``python -m lucy_memory.mcp``: check the configuration, then serve on stdio.

A bad configuration exits with status 2 before serving, after one line on stderr. Logs go to stderr;
stdout carries only the protocol.
"""

from __future__ import annotations

import logging
import sys

import anyio

from lucy_memory._contract import redact
from lucy_memory.mcp.config import McpConfigError, load_settings, resolve_config
from lucy_memory.mcp.server import SERVER_NAME, serve_stdio

__all__ = ["main"]

log = logging.getLogger("lucy_memory.mcp")


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    settings = None
    try:
        settings = load_settings()
        config = resolve_config(settings)
    except McpConfigError as exc:
        line = str(exc)
        if settings is not None and settings.token:  # defence in depth: no message is built from the token
            line = redact(line, settings.token.get_secret_value())
        sys.stderr.write(f"{SERVER_NAME}: invalid configuration: {line}\n")
        sys.stderr.flush()
        return 2
    log.info("serving on stdio: Lucy at %s, permissions %s", config.origin, ",".join(config.permissions))
    try:
        anyio.run(serve_stdio, config)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
