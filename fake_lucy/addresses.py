"""Which hosts are this machine (the built-in tokens are accepted only there, and the operator CLI
sends the built-in admin token only to such a URL), and an id as one segment of a URL path."""

from __future__ import annotations

import ipaddress
from urllib.parse import quote

__all__ = ["is_loopback", "path_segment"]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def path_segment(value: str) -> str:
    """``value`` as one path segment, percent-encoded: a ``/`` stays inside it, and an id made of
    dots only (``.``, ``..``, valid tenant ids) is spelled ``%2E…``, which clients would otherwise
    resolve as a dot segment (``/tenants/..`` is ``/``) and send to another path."""
    encoded = quote(value, safe="")
    return "%2E" * len(value) if value and value.strip(".") == "" else encoded
