"""Which hosts are this machine (the built-in tokens are accepted only there, and the operator CLI
sends the built-in admin token only to such a URL), and an id as one segment of a URL path."""

from __future__ import annotations

import ipaddress
from urllib.parse import quote

__all__ = ["is_loopback", "path_segment"]


def is_loopback(host: str) -> bool:
    """``localhost``, or an address of 127.0.0.0/8 or ``::1`` (an IPv4-mapped one too)."""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def path_segment(value: str) -> str:
    """``value`` as one path segment, percent-encoded: a ``/`` stays inside it, and an id made of
    dots only (``.``, ``..``, valid tenant ids) is spelled ``%2E…``, which clients would otherwise
    resolve as a dot segment (``/tenants/..`` is ``/``) and send to another path."""
    encoded = quote(value, safe="")
    return "%2E" * len(value) if value and value.strip(".") == "" else encoded
