"""One TLS context for every HTTP client the testing helpers open.

httpx builds a new ``ssl.SSLContext`` for each client it creates, loading the whole CA bundle
(``SSL_CERT_FILE`` or certifi's): ~25 ms of CPU, though these clients mostly speak plain HTTP to
127.0.0.1 and never use it. The helpers open a client per control call (one per event loop) and per
readiness poll, so a test suite paid that hundreds of times. This is httpx's own default context,
verifying as before, built once per process and shared (an ``SSLContext`` is safe to share).
"""

from __future__ import annotations

import functools
import os
import ssl

import httpx

__all__ = ["shared_tls_context"]


def shared_tls_context() -> ssl.SSLContext:
    """``httpx.create_ssl_context()``, once per trust setting: pass it as ``verify=`` to an httpx
    client or transport. It trusts what httpx trusts: ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` as they
    are at the call (a test that serves HTTPS with a CA of its own sets one), else certifi's bundle."""
    return _context(os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None)


@functools.cache
def _context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    # the arguments are the cache's key: httpx reads the same two variables itself
    return httpx.create_ssl_context()
