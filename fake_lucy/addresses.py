"""Which hosts are this machine: the built-in tokens are accepted only there, and the operator CLI
sends the built-in admin token only to such a URL."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
