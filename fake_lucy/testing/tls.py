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
from typing import Any

import httpx

from fake_lucy.addresses import loopback_url

__all__ = ["control_request", "shared_tls_context"]


def shared_tls_context() -> ssl.SSLContext:
    """``httpx.create_ssl_context()``, once per trust setting: pass it as ``verify=`` to an httpx
    client or transport. It trusts what httpx trusts: ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` as they
    are at the call (a test that serves HTTPS with a CA of its own sets one), else certifi's bundle."""
    return _context(os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None)


@functools.cache
def _context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    # the arguments are the cache's key: httpx reads the same two variables itself
    return httpx.create_ssl_context()


def control_request(
    base_url: str, admin_token: str, method: str, path: str, *, timeout: float | httpx.Timeout, **options: Any
) -> httpx.Response:
    """``method /_fake{path}`` with ``admin_token``, as every testing helper sends a control call:
    the shared TLS context, and no proxy from the environment to a loopback fake (``HTTP_PROXY``
    cannot reach 127.0.0.1). A failure to reach the fake is httpx's ``TransportError``."""
    return httpx.request(
        method,
        base_url.rstrip("/") + "/_fake" + path,
        headers={"Authorization": f"Bearer {admin_token}"},
        timeout=timeout,
        verify=shared_tls_context(),
        trust_env=not loopback_url(base_url),
        **options,
    )
