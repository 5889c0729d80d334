"""A test session's own tenant on a shared ``fake-lucy serve`` (``pytest --lucy-url URL``, SPEC 3.6).

```python
with SharedTenant.start("http://fake-lucy:8787", server_admin_token) as fake:
    async with fake.client() as http: ...          # the tenant's credential (dev-seed shaped)
    await fake.admin.approve(proposal_id)          # the tenant's admin: its tenant only
    fake.reset()                                   # this tenant back to its created state
```

The tenant is created with the server admin token and deleted (with its tenant admin token) when
the block ends. Everything else goes through the tenant admin token, which cannot reach another
tenant, so many sessions and xdist workers share one fake without seeing each other.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from typing import Any

import httpx

from fake_lucy.addresses import path_segment, shown_url
from fake_lucy.domain.defaults import DEFAULT_ADMIN_TOKEN
from fake_lucy.files import read_admin_token_file
from fake_lucy.testing.admin import FakeAdmin
from fake_lucy.testing.errors import SharedFakeError
from fake_lucy.testing.fakes import _Shape
from fake_lucy.testing.sync_admin import SyncFakeAdmin
from fake_lucy.testing.tls import control_request
from lucy_memory._contract import TOKEN_RULE, valid_token

__all__ = [
    "ADMIN_TOKEN_FILE_VARIABLE",
    "ADMIN_TOKEN_VARIABLE",
    "SharedFakeError",
    "SharedTenant",
    "server_admin_token",
]

ADMIN_TOKEN_VARIABLE = "FAKE_LUCY_ADMIN_TOKEN"  # noqa: S105 - the name of a variable, not a token
_TIMEOUT = httpx.Timeout(30.0)
# ``client()``'s default: the tenant's own credential (an object no caller passes by accident).
_OWN_CREDENTIAL: Any = object()


ADMIN_TOKEN_FILE_VARIABLE = "FAKE_LUCY_ADMIN_TOKEN_FILE"  # noqa: S105 - a variable's name


def server_admin_token() -> str:
    """The server admin token as the operator commands read it: the file ``FAKE_LUCY_ADMIN_TOKEN_FILE``
    names, else ``FAKE_LUCY_ADMIN_TOKEN``, else the built-in one (which a fake accepts on loopback
    only). A file that cannot be read or is empty, a variable set but empty, or a token no header
    can carry is ``ValueError`` with one line that never holds the token."""
    token_file = os.environ.get(ADMIN_TOKEN_FILE_VARIABLE, "").strip()
    if token_file:
        token = read_admin_token_file(token_file)
        where, empty = f"the admin token file {token_file}", "is empty"
    elif ADMIN_TOKEN_VARIABLE in os.environ:
        token = os.environ[ADMIN_TOKEN_VARIABLE].strip()
        where, empty = ADMIN_TOKEN_VARIABLE, "is set but empty"
    else:
        return DEFAULT_ADMIN_TOKEN
    if not token:
        raise ValueError(f"{where} {empty}")
    if not valid_token(token):
        raise ValueError(f"{where} must be {TOKEN_RULE}")
    return token


def _token_source() -> str:
    """Where the server admin token was read from, as a hint names it."""
    if os.environ.get(ADMIN_TOKEN_FILE_VARIABLE, "").strip():
        return f"{ADMIN_TOKEN_FILE_VARIABLE} is set: the file"
    if ADMIN_TOKEN_VARIABLE in os.environ:
        return f"{ADMIN_TOKEN_VARIABLE} is set: it"
    return f"neither {ADMIN_TOKEN_VARIABLE} nor {ADMIN_TOKEN_FILE_VARIABLE} is set: the token"


def _why(exc: httpx.TransportError) -> str:
    """What went wrong on the way, with the remedy where there is one."""
    if isinstance(exc, httpx.ConnectError) and "CERTIFICATE_VERIFY_FAILED" in str(exc):
        return (
            f"{exc} (the fake's certificate is not trusted here: point SSL_CERT_FILE or SSL_CERT_DIR at"
            " its CA, as for any HTTPS server)"
        )
    return str(exc)


def _problem(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return f"{response.status_code}"
    return f"{response.status_code} {body.get('code')}: {body.get('detail')}"


class SharedTenant(_Shape):
    """One tenant of a shared fake, with the same surface as ``LiveServer``: ``base_url``,
    ``client()`` (the tenant's credential by default), ``dev_token``, ``admin_token`` (the tenant
    admin), ``admin``, ``sync_admin`` and ``reset()``; plus ``tenant``, ``account`` and ``credential_id``."""

    def __init__(self, base_url: str, created: dict[str, Any]) -> None:
        self.base_url = base_url.rstrip("/")
        self.tenant: str = created["tenant"]
        self.admin_token = created["admin_token"]
        credential = created["credential"]
        self.dev_token = credential["token"]
        self.credential_id: str = credential["credential_id"]
        self.account: str = credential["account"]
        self.user: str = credential["user"]

    def __repr__(self) -> str:  # the tokens stay out of test reports
        return f"SharedTenant(base_url={self.base_url!r}, tenant={self.tenant!r})"

    def client(self, token: str | None = _OWN_CREDENTIAL, **kwargs: Any) -> httpx.AsyncClient:
        """An ``httpx.AsyncClient`` on the shared fake with ``token`` as bearer: by default this
        tenant's credential (the dev token belongs to the dev tenant, which this session never uses)."""
        return super().client(self.dev_token if token is _OWN_CREDENTIAL else token, **kwargs)

    @classmethod
    def create(cls, base_url: str, admin_token: str, *, name: str | None = None) -> SharedTenant:
        """Create a tenant with the server admin token (``name`` or a generated id)."""
        body = {} if name is None else {"tenant": name}
        try:
            response = control_request(base_url, admin_token, "POST", "/tenants", json=body, timeout=_TIMEOUT)
        except httpx.TransportError as exc:
            raise SharedFakeError(
                f"the shared fake at {shown_url(base_url)} cannot be reached: {_why(exc)}"
            ) from None
        if response.status_code != 201:
            hint = ""
            if response.status_code in (401, 403):  # the token, not the fake, is what to fix
                hint = f" ({_token_source()} must hold the shared fake's server admin token)"
            where = shown_url(base_url)
            problem = _problem(response)
            raise SharedFakeError(f"the shared fake at {where} did not create a tenant: {problem}{hint}")
        return cls(base_url, response.json())

    def _control(self, method: str, path: str) -> httpx.Response:
        """A control call as the tenant's admin; what goes wrong (the fake stopped or cannot be
        reached, the tenant gone, an answer that is not the fake's) is one ``SharedFakeError``."""
        try:
            response = control_request(self.base_url, self.admin_token, method, path, timeout=_TIMEOUT)
        except httpx.TransportError as exc:  # refused, reset, timed out: the fake stopped, or the way to it
            raise SharedFakeError(
                f"the shared fake at {shown_url(self.base_url)} cannot be reached ({method} /_fake{path}):"
                f" {type(exc).__name__}: {exc}"
            ) from None
        if response.status_code == 401:  # the tenant's admin token: refused only once the tenant is gone
            raise SharedFakeError(
                f"this session's tenant {self.tenant} is gone from the shared fake (deleted, taken by"
                f" fake-lucy tenants prune, or a server reset): {method} /_fake{path} with its admin"
                " token answered 401"
            )
        if response.status_code >= 400:
            raise SharedFakeError(f"{method} /_fake{path} on the shared fake: {_problem(response)}")
        return response

    def reset(self) -> float:
        """This tenant back to its created state (other tenants untouched); returns the server's ms."""
        response = self._control("POST", "/reset")
        try:
            return float(response.json()["took_ms"])
        except (ValueError, TypeError, KeyError):  # a proxy's page, say: not the fake's answer
            raise SharedFakeError(
                f"POST /_fake/reset at {shown_url(self.base_url)} answered {response.status_code} with what"
                " is not fake-lucy's answer (is --lucy-url the fake's own address?)"
            ) from None

    def delete(self) -> None:
        self._control("DELETE", f"/tenants/{path_segment(self.tenant)}")

    @property
    def admin(self) -> FakeAdmin:
        """The control API as this tenant's admin (a short-lived connection per call)."""
        return FakeAdmin(client_factory=self.admin_client, tenant=self.tenant)

    @property
    def sync_admin(self) -> SyncFakeAdmin:
        """The same helper for synchronous tests, as this tenant's admin: every ``admin`` method, blocking."""
        return SyncFakeAdmin(self.base_url, self.admin_token, tenant=self.tenant)

    @classmethod
    @contextlib.contextmanager
    def start(cls, base_url: str, admin_token: str, *, label: str = "pytest") -> Iterator[SharedTenant]:
        """A tenant named ``<label>-<random>`` for the block, deleted at its end."""
        tenant = cls.create(base_url, admin_token, name=f"{label}-{secrets.token_hex(6)}")
        try:
            yield tenant
        finally:
            tenant.delete()
