"""One TLS context for every HTTP client the testing helpers open.

httpx builds a new ``ssl.SSLContext`` for each client it creates, loading the whole CA bundle
(``SSL_CERT_FILE`` or certifi's): ~25 ms of CPU, though these clients mostly speak plain HTTP to
127.0.0.1 and never use it. The helpers open a client per control call (one per event loop) and per
readiness poll, so a test suite paid that hundreds of times. This is httpx's own default context,
verifying as before, built once per process and shared (an ``SSLContext`` is safe to share).
"""

from __future__ import annotations

import functools
import ssl

import httpx

__all__ = ["shared_tls_context"]


@functools.cache
def shared_tls_context() -> ssl.SSLContext:
    """``httpx.create_ssl_context()``, once: pass it as ``verify=`` to an httpx client or transport."""
    return httpx.create_ssl_context()
