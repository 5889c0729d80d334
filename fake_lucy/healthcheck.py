"""``python -m fake_lucy.healthcheck``: the container's liveness probe (Dockerfile, docker-compose.yml).

It asks ``/healthz`` of the fake in its own container, at ``127.0.0.1`` on ``FAKE_LUCY_PORT``, over
HTTPS when ``FAKE_LUCY_TLS_CERTFILE`` is set (the certificate names the host clients use, not
127.0.0.1, and this probe only asks whether the process answers: it does not check it). Exit 0 when
the fake answers 200, else 1 with one line on stderr. Standard library only: it starts in
milliseconds every few seconds.
"""

from __future__ import annotations

import os
import ssl
import sys
import urllib.request
from collections.abc import Mapping

__all__ = ["main", "probe_url"]

DEFAULT_PORT = "8787"
TIMEOUT_S = 2


def probe_url(environ: Mapping[str, str]) -> str:
    scheme = "https" if environ.get("FAKE_LUCY_TLS_CERTFILE") else "http"
    return f"{scheme}://127.0.0.1:{environ.get('FAKE_LUCY_PORT') or DEFAULT_PORT}/healthz"


def main(environ: Mapping[str, str] | None = None) -> int:
    url = probe_url(os.environ if environ is None else environ)
    # the fake in this container, reached by address: liveness, not the certificate's identity
    context = ssl._create_unverified_context() if url.startswith("https:") else None  # noqa: S323
    # never through a proxy (Docker passes a host's http_proxy into containers): 127.0.0.1 is here
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
    )
    try:
        with opener.open(url, timeout=TIMEOUT_S) as answer:
            status = answer.status
    except OSError as exc:  # refused, timed out, an HTTP error status (HTTPError is an OSError)
        print(f"fake-lucy healthcheck: {url}: {exc}", file=sys.stderr)
        return 1
    return 0 if status == 200 else 1


if __name__ == "__main__":
    sys.exit(main())
