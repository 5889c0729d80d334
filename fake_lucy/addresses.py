"""Which hosts are this machine (the built-in tokens are accepted only there, the operator CLI
sends the built-in admin token only to such a URL, and a loopback-bound fake answers only a ``Host``
that names it), the address of a running fake as the operator CLI and the pytest plugin take it,
and an id as one segment of a URL path."""

from __future__ import annotations

import functools
import re
from urllib.parse import quote, urlsplit, urlunsplit

from lucy_memory._contract import (
    API_BASE_PATH,
    is_loopback,  # the one rule, which the SDK applies too
)

__all__ = ["fake_address", "is_loopback", "loopback_host", "loopback_url", "path_segment", "shown_url"]


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


def shown_url(url: str) -> str:
    """The URL as errors name it: without a user name or password it may carry (malformed or not),
    and with its query and fragment (which may carry a secret too) shown as ``…``."""
    return _QUERY_OR_FRAGMENT.sub(r"\1…", _USERINFO.sub(r"\1", url, count=1), count=1)


_USERINFO = re.compile(r"^([^/]*//)[^/?#]*@")
_QUERY_OR_FRAGMENT = re.compile(r"([?#]).+", re.DOTALL)


def fake_address(url: str, needs: str) -> tuple[str, str]:
    """``url`` as the address of a running fake: the URL without a trailing ``/``, and its host.
    Else ``ValueError`` with one line naming the URL as ``shown_url`` does and, for the address of
    the fake's v1 or control API, the fake's own; ``needs`` says who needs it ("the operator
    commands need")."""
    import httpx  # only where an address is checked: the plugin module stays cheap to import

    url = url.rstrip("/")
    if url != url.strip():
        raise ValueError(f"{shown_url(url)!r} has white space around it; give the URL alone")
    host: str | None
    try:
        parts = urlsplit(url)
        host = parts.hostname  # reading it checks a bracketed IPv6 address
        _ = parts.port  # and reading this, that the port is a number from 0 to 65535
        httpx.URL(url)
        if host is not None:
            host.encode("idna")  # an empty or over-long label (http://a..b) fails only when sent
    except (ValueError, httpx.InvalidURL):  # UnicodeError (idna) is a ValueError
        host = None
    if host is None or parts.scheme not in ("http", "https"):
        raise ValueError(f"{shown_url(url)!r} is not an http(s) URL of a running fake")
    for suffix, what in ((API_BASE_PATH, "v1 API"), ("/_fake", "control API")):
        if parts.path.endswith(suffix):  # the v1 API's address (an MCP host's), the control API's
            own = urlunsplit(parts._replace(path=parts.path.removesuffix(suffix), query="", fragment=""))
            raise ValueError(
                f"{shown_url(url)} is the address of the fake's {what}; {needs} the fake's own:"
                f" {shown_url(own)}"
            )
    if "@" in parts.netloc:  # httpx would send it as Basic auth, in place of the admin token
        raise ValueError(
            f"{shown_url(url)} holds a user name or a password; a fake takes none: its admin token"
            " is what opens its control API"
        )
    if parts.query or parts.fragment:
        own = urlunsplit(parts._replace(query="", fragment=""))
        raise ValueError(
            f"{shown_url(url)} holds a query or a fragment; the fake's address is {shown_url(own)}"
        )
    return url, host
