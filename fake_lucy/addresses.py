"""Which hosts are this machine (the built-in tokens are accepted only there, the operator CLI
sends the built-in admin token only to such a URL, and a loopback-bound fake answers only a ``Host``
that names it), and an id as one segment of a URL path."""

from __future__ import annotations

import functools
from urllib.parse import quote, urlsplit

from lucy_memory._contract import is_loopback  # the one rule, which the SDK applies too

__all__ = ["is_loopback", "loopback_host", "loopback_url", "path_segment"]


def loopback_url(url: str) -> bool:
    """Does ``url`` name this machine (``is_loopback``)? Such a URL is reached directly, never
    through a proxy of the environment (``HTTP_PROXY``), which would see the token it carries."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    return host is not None and is_loopback(host)


@functools.lru_cache(maxsize=256)  # a client sends the same Host each time: ~3 µs once, not per request
def loopback_host(raw: bytes) -> bool:
    """Can a ``Host`` header name this machine, with or without a port: an address of 127.0.0.0/8
    or ``::1``, a name under ``.localhost``, or a name without a dot (``localhost``, the machine's
    own name, a test client's ``testserver``). DNS rebinding needs a name in a domain the attacker
    controls, which has a dot and is none of these."""
    host = raw.decode("latin-1").strip().lower()
    if host.startswith("["):
        host = host[: host.find("]") + 1]
    else:  # without the port, and read as a fully qualified name: localhost. is localhost
        host = (host.partition(":")[0] if host.count(":") == 1 else host).removesuffix(".")
    if not host:
        return False
    return (
        is_loopback(host)
        or host.endswith(".localhost")
        or host == "localhost.localdomain"  # what many systems' /etc/hosts give 127.0.0.1
        or ("." not in host and ":" not in host)
    )


def path_segment(value: str) -> str:
    """``value`` as one path segment, percent-encoded: a ``/`` stays inside it, and an id made of
    dots only (``.``, ``..``, valid tenant ids) is spelled ``%2E…``, which clients would otherwise
    resolve as a dot segment (``/tenants/..`` is ``/``) and send to another path."""
    encoded = quote(value, safe="")
    return "%2E" * len(value) if value and value.strip(".") == "" else encoded
