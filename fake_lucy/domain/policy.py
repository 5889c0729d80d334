"""A tenant's policy (SPEC 1.3, 2.3): auto-approval, proposal TTL and the rate limit.

Set only by a human through the control layer. A change reaches every worker at once: the
principals carry their tenant's policy, so the credential epoch moves, and a new rate limit
starts every bucket of the tenant afresh.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from fake_lucy.domain.epochs import bump_auth_epoch
from fake_lucy.domain.errors import DomainError
from fake_lucy.domain.principals import ensure_tenant
from fake_lucy.domain.tenants import SERVER, AdminScope
from fake_lucy.store import queries
from fake_lucy.store.records import TenantPolicy

__all__ = ["get_policy", "policy_dict", "update_policy"]


def get_policy(conn: sqlite3.Connection, tenant: str, *, scope: AdminScope = SERVER) -> TenantPolicy:
    policy = queries.tenant_policy(conn, tenant) if scope.sees(tenant) else None
    if policy is None:
        raise DomainError("not_found", "no tenant has this id")
    return policy


def update_policy(
    conn: sqlite3.Connection, tenant: str, changes: dict[str, Any], *, scope: AdminScope = SERVER
) -> TenantPolicy:
    """Apply any subset of the policy (the server admin's creates a tenant on first use); returns
    the whole policy."""
    if not scope.sees(tenant):
        raise DomainError("not_found", "no tenant has this id")
    ensure_tenant(conn, tenant)
    queries.update_tenant_policy(conn, tenant, changes)
    if "rate_limit_per_minute" in changes:
        queries.clear_rate_buckets(conn, tenant)
    bump_auth_epoch(conn)
    return get_policy(conn, tenant, scope=scope)


def policy_dict(policy: TenantPolicy) -> dict[str, Any]:
    return {
        "auto_approve": policy.auto_approve,
        "proposal_ttl_seconds": policy.proposal_ttl_seconds,
        "rate_limit_per_minute": policy.rate_limit_per_minute,
    }
