"""The dev seed's defaults and the built-in tokens, as the control contract states them.

Apart from the seed (``seed``) so that what only needs a token, such as the operator CLI, which
talks to a running fake over HTTP, does not import the domain's rules.
"""

from __future__ import annotations

from typing import Any

from lucy_memory._contract import load_contract

__all__ = ["BUILTIN_TOKENS", "DEFAULTS", "DEFAULT_ADMIN_TOKEN", "DEV_TOKEN"]

DEFAULTS: dict[str, Any] = load_contract("fake-control")["defaults"]
"""The dev seed's tenant, account, user, permissions, scopes, credits and tokens, as the control
contract states them; a tenant made by ``POST /_fake/tenants`` is shaped like it (``tenants``)."""

DEV_TOKEN: str = DEFAULTS["token"]
DEFAULT_ADMIN_TOKEN: str = DEFAULTS["admin_token"]
BUILTIN_TOKENS = frozenset({DEV_TOKEN, DEFAULT_ADMIN_TOKEN})
