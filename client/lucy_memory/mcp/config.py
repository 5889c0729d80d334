"""The MCP server's configuration: ``LUCY_MEMORY_*`` from the environment, checked before serving.

```
LUCY_MEMORY_TOKEN                    required; the bearer token (never printed or logged)
LUCY_MEMORY_PERMISSIONS              comma list of memory:read, memory:propose; unset = memory:read
LUCY_MEMORY_BASE_URL                 the deployment's origin (https://…)              } exactly one
LUCY_MEMORY_TRANSPORT_MODULE         absolute path of a .py file with create_transport } of these two
LUCY_MEMORY_ALLOW_INSECURE_LOOPBACK  1 allows http:// to a loopback host
LUCY_MEMORY_STATE_DIR                absolute folder for the refused derived keys (refused-keys.json);
                                     unset = $XDG_STATE_HOME/lucy-memory-mcp or ~/.local/state/…
```

An empty value counts as unset. Every refusal is a ``McpConfigError`` whose message is one line and never
contains the token.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from lucy_memory._contract import OPERATION_PERMISSIONS, PERMISSIONS, TOKEN_RULE, valid_token
from lucy_memory.errors import ConfigurationError, InsecureTransportError
from lucy_memory.mcp.refusals import default_state_dir
from lucy_memory.transport import Transport, create_lucy_http_transport

__all__ = [
    "DEFAULT_PERMISSIONS",
    "ENV_PREFIX",
    "SERVER_NAME",
    "McpConfigError",
    "McpSettings",
    "ServerConfig",
    "check_transport_module_path",
    "load_settings",
    "resolve_config",
]

SERVER_NAME = "lucy-memory-mcp"
ENV_PREFIX = "LUCY_MEMORY_"
DEFAULT_PERMISSIONS = (OPERATION_PERMISSIONS["recall"],)  # read only, until the host grants more
_TRANSPORT_MODULE_NAME = "lucy_memory_mcp_transport"
_UNSAFE_WRITE = stat.S_IWGRP | stat.S_IWOTH


class McpConfigError(Exception):
    """The configuration is refused; ``str(err)`` is the one line printed on stderr."""


class McpSettings(BaseSettings):
    """The raw environment, one field per variable. ``resolve_config`` applies the rules."""

    # exactly the documented names (each field's alias): ``lucy_memory_token`` is not LUCY_MEMORY_TOKEN
    # (no populate_by_name: the environment would then be read by the fields' own names too, as
    # ``token`` or ``BASE_URL`` where the platform's names are case-insensitive)
    model_config = SettingsConfigDict(env_ignore_empty=True, extra="ignore", case_sensitive=True)

    token: SecretStr | None = Field(default=None, validation_alias=ENV_PREFIX + "TOKEN")
    permissions: str | None = Field(default=None, validation_alias=ENV_PREFIX + "PERMISSIONS")
    base_url: str | None = Field(default=None, validation_alias=ENV_PREFIX + "BASE_URL")
    transport_module: str | None = Field(default=None, validation_alias=ENV_PREFIX + "TRANSPORT_MODULE")
    allow_insecure_loopback: str | None = Field(
        default=None, validation_alias=ENV_PREFIX + "ALLOW_INSECURE_LOOPBACK"
    )
    state_dir: str | None = Field(default=None, validation_alias=ENV_PREFIX + "STATE_DIR")


def load_settings() -> McpSettings:
    """Read ``LUCY_MEMORY_*`` from the environment now (never at import time)."""
    try:
        return McpSettings()
    except ValidationError as exc:  # only strings are read; kept so a future field fails clearly
        names = ", ".join(str(error["loc"][0]) for error in exc.errors())  # the variables' names
        raise McpConfigError(f"cannot read {names}") from None


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """What the server runs with: a ready transport, the token and the permissions it may use."""

    transport: Transport
    token: SecretStr
    permissions: tuple[str, ...]
    origin: str  # the base URL, or the transport module's path (for the startup log line)
    state_dir: Path | None = None  # where the refused derived keys are kept (None: in memory only)


def _permissions(raw: str | None) -> tuple[str, ...]:
    if raw is None:
        return DEFAULT_PERMISSIONS
    items = [item.strip() for item in raw.split(",")]
    if not items or any(item not in PERMISSIONS for item in items):
        raise McpConfigError(
            f"{ENV_PREFIX}PERMISSIONS must be a comma list of {', '.join(PERMISSIONS)}"
            f" (unset = {','.join(DEFAULT_PERMISSIONS)})"
        )
    return tuple(dict.fromkeys(items))


def _state_dir(raw: str | None) -> Path | None:
    if raw is None:
        return default_state_dir()
    if not Path(raw).is_absolute():  # a host starts the server in a folder of its choosing
        raise McpConfigError(f"{ENV_PREFIX}STATE_DIR must be an absolute path")
    return Path(raw)


def _insecure_loopback(raw: str | None) -> bool:
    if raw is None or raw == "0":
        return False
    if raw == "1":
        return True
    raise McpConfigError(f"{ENV_PREFIX}ALLOW_INSECURE_LOOPBACK must be 1 (or unset)")


def _owner_ok(info: os.stat_result) -> bool:
    return info.st_uid in (os.geteuid(), 0)


def check_transport_module_path(raw: str) -> Path:
    """The rules for ``LUCY_MEMORY_TRANSPORT_MODULE``; returns the resolved path of a safe module file.

    Absolute; symlinks resolved; a regular ``.py`` file owned by the effective user or root and not
    writable by group or others; every directory above it likewise, except a root-owned directory with
    the sticky bit (such as ``/tmp``), where nobody can replace another user's entry.
    """
    name = f"{ENV_PREFIX}TRANSPORT_MODULE"
    if not Path(raw).is_absolute():
        raise McpConfigError(f"{name} must be an absolute path")
    try:
        path = Path(raw).resolve(strict=True)
    except (OSError, RuntimeError):
        raise McpConfigError(
            f"{name} does not exist (or a symlink in it is broken or loops): {raw}"
        ) from None
    info = path.stat()
    if not stat.S_ISREG(info.st_mode) or path.suffix != ".py":
        raise McpConfigError(f"{name} must be a regular .py file: {path}")
    if not _owner_ok(info):
        raise McpConfigError(f"{name} must be owned by the current user or root: {path}")
    if info.st_mode & _UNSAFE_WRITE:
        raise McpConfigError(f"{name} must not be writable by group or others: {path}")
    for directory in path.parents:
        dinfo = directory.stat()
        if dinfo.st_uid == 0 and dinfo.st_mode & stat.S_ISVTX:
            continue
        if not _owner_ok(dinfo):
            raise McpConfigError(
                f"{name} is in a directory not owned by the current user or root: {directory}"
            )
        if dinfo.st_mode & _UNSAFE_WRITE:
            raise McpConfigError(
                f"{name} is in a directory writable by group or others (without the sticky bit): {directory}"
            )
    return path


def _load_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(_TRANSPORT_MODULE_NAME, path)
    if spec is None or spec.loader is None:
        raise McpConfigError(f"{ENV_PREFIX}TRANSPORT_MODULE cannot be loaded as a Python module: {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        # stdout is the protocol: anything the module prints while loading goes to stderr instead.
        with contextlib.redirect_stdout(sys.stderr):
            spec.loader.exec_module(module)
    # any failure of foreign code, a sys.exit() in it too, is a configuration error, reported by type only
    except (Exception, SystemExit) as exc:  # foreign code: any error it raises, see the line above
        raise McpConfigError(
            f"{ENV_PREFIX}TRANSPORT_MODULE failed to load ({type(exc).__name__}): {path}"
        ) from None
    return module


# ``${LUCY_MEMORY_TOKEN}``, ``${env:LUCY_MEMORY_TOKEN}``, ``${input:lucy-token}``, ``<token>``: what
# the README's host configurations and their like write where the host puts the token.
_PLACEHOLDER = re.compile(r"\$\{[^}]*\}|<[^<>]*>")


def _module_transport(raw: str, token: SecretStr) -> tuple[Transport, str]:
    path = check_transport_module_path(raw)
    module = _load_module(path)
    factory = getattr(module, "create_transport", None)
    if not callable(factory):
        raise McpConfigError(
            f"{ENV_PREFIX}TRANSPORT_MODULE has no create_transport(*, token) function: {path}"
        )
    try:
        with contextlib.redirect_stdout(sys.stderr):
            transport = factory(token=token.get_secret_value())
    # foreign code again (a sys.exit() in it too): report the type, never a message that may hold the token
    except (Exception, SystemExit) as exc:  # foreign code: any error it raises, see the line above
        raise McpConfigError(
            f"{ENV_PREFIX}TRANSPORT_MODULE create_transport(token=…) failed ({type(exc).__name__}): {path}"
        ) from None
    if not isinstance(transport, Transport):
        raise McpConfigError(
            f"{ENV_PREFIX}TRANSPORT_MODULE create_transport returned {type(transport).__name__}, "
            f"not a Transport (an object with async send(request)): {path}"
        )
    return transport, str(path)


def _http_transport(base_url: str, allow_insecure_loopback: bool) -> tuple[Transport, str]:
    name = f"{ENV_PREFIX}BASE_URL"
    try:
        transport = create_lucy_http_transport(
            base_url=base_url, allow_insecure_loopback=allow_insecure_loopback
        )
    except InsecureTransportError:
        if not allow_insecure_loopback:
            raise McpConfigError(
                f"{name} uses cleartext http://; use https://, or set {ENV_PREFIX}ALLOW_INSECURE_LOOPBACK=1 "
                "for a development server on a loopback host"
            ) from None
        raise McpConfigError(
            f"{name}: cleartext http:// is allowed only to a loopback host (localhost, 127.0.0.0/8, ::1)"
        ) from None
    except ConfigurationError as exc:
        raise McpConfigError(f"{name}: {exc.detail}") from None
    return transport, transport.origin


def resolve_config(settings: McpSettings) -> ServerConfig:
    """Apply every rule of SPEC 5; build the transport (loading a transport module runs its code)."""
    token = settings.token
    if token is None:
        raise McpConfigError(f"{ENV_PREFIX}TOKEN is required (inject it from the host's secret store)")
    # the placeholder first: "<your token>" has a space, but what is wrong is that it was not filled in
    if _PLACEHOLDER.fullmatch(token.get_secret_value().strip()):
        # a host that does not expand this syntax passes it on as it is: every call would be a 401
        raise McpConfigError(
            f"{ENV_PREFIX}TOKEN is a placeholder the host did not fill in (like ${{env:...}} or <token>):"
            " use the syntax of your host (see the README) or inject the token from its secret store"
        )
    if not valid_token(token.get_secret_value()):
        raise McpConfigError(f"{ENV_PREFIX}TOKEN must be {TOKEN_RULE}")
    permissions = _permissions(settings.permissions)
    insecure = _insecure_loopback(settings.allow_insecure_loopback)
    state_dir = _state_dir(settings.state_dir)
    if (settings.base_url is None) == (settings.transport_module is None):
        which = "both are" if settings.base_url is not None else "neither is"
        raise McpConfigError(
            f"set exactly one of {ENV_PREFIX}BASE_URL and {ENV_PREFIX}TRANSPORT_MODULE ({which} set)"
        )
    if settings.base_url is not None:
        transport, origin = _http_transport(settings.base_url, insecure)
    else:
        assert settings.transport_module is not None
        transport, origin = _module_transport(settings.transport_module, token)
    return ServerConfig(
        transport=transport, token=token, permissions=permissions, origin=origin, state_dir=state_dir
    )
