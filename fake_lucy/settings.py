"""Configuration of ``fake-lucy serve``: one pydantic-settings class, ``FAKE_LUCY_*`` in the env."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from fake_lucy.files import file_to_write, read_admin_token_file
from lucy_memory._contract import TOKEN_RULE, valid_token

__all__ = ["ENV_PREFIX", "FakeLucySettings", "load_settings"]

DEFAULT_DATABASE = ".fake-lucy/fake-lucy.sqlite3"


ENV_PREFIX = "FAKE_LUCY_"


class FakeLucySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, le=65535)
    workers: int = Field(default=1, ge=1, le=64)
    database: str = Field(default=DEFAULT_DATABASE, min_length=1)
    seed: Path | None = None
    id_seed: int | None = None
    journal_size: int = Field(default=10_000, ge=1, le=10_000_000)
    idempotency_ttl_seconds: int = Field(default=86_400, ge=1, le=31_536_000)
    reset_on_start: bool = False
    quiet: bool = False  # no server log (one line per v1 request on stderr)
    admin_token: SecretStr | None = None
    admin_token_file: Path | None = None
    import_file: Path | None = None  # a snapshot loaded at start (SPEC 3.9)
    export_on_exit: Path | None = None  # a snapshot written atomically on SIGTERM / SIGINT
    # HTTPS: the certificate chain and its private key (PEM), both or neither
    tls_certfile: Path | None = None
    tls_keyfile: Path | None = None

    @field_validator(
        "host",
        "port",
        "workers",
        "database",
        "seed",
        "id_seed",
        "journal_size",
        "idempotency_ttl_seconds",
        "reset_on_start",
        "quiet",
        "admin_token_file",
        "import_file",
        "export_on_exit",
        "tls_certfile",
        "tls_keyfile",
        mode="before",
    )
    @classmethod
    def _not_empty(cls, value: Any) -> Any:
        """An empty value (``FAKE_LUCY_HOST=``, a compose file's ``${X:-}``) is a mistake, said so:
        an empty host would listen on every address, an empty path would be the current folder."""
        if isinstance(value, str) and not value.strip():
            raise ValueError("is set but empty: give a value, or leave it unset")
        return value

    @field_validator("export_on_exit", mode="before")
    @classmethod
    def _a_file(cls, value: Any) -> Any:
        """A path ending with ``/`` names a folder (``Path`` would drop the slash, and a file of the
        folder's name would be written): said, like an empty one."""
        return file_to_write(value) if isinstance(value, str) and value.strip() else value

    @field_validator("database")
    @classmethod
    def _a_database_file(cls, value: str) -> str:
        """As ``--export-on-exit``: a path ending with ``/``, or naming a folder, is no database file
        (SQLite would make a file of the folder's name, or fail to open the folder)."""
        if value == ":memory:":
            return value
        file_to_write(value, example="fake-lucy.sqlite3")
        try:
            folder = Path(value).is_dir()
        except OSError:  # a name too long, a folder that cannot be read: opening it will say
            folder = False
        if folder:
            raise ValueError(f"{value} is a folder, not a file: add the file's name")
        return value

    @model_validator(mode="after")
    def _together(self) -> FakeLucySettings:
        if (self.tls_certfile is None) != (self.tls_keyfile is None):
            raise ValueError("--tls-certfile and --tls-keyfile go together: give both, or neither")
        if self.database == ":memory:" and self.workers > 1:
            raise ValueError("--database :memory: is one process's: it cannot serve --workers above 1")
        return self

    @property
    def scheme(self) -> str:
        """``https`` with a certificate, else ``http``."""
        return "http" if self.tls_certfile is None else "https"

    def resolved_admin_token(self) -> str | None:
        """The admin token: the token file when one is given (a flag or ``FAKE_LUCY_ADMIN_TOKEN_FILE``),
        else ``FAKE_LUCY_ADMIN_TOKEN``; ``None`` means the built-in default. An empty one, or one
        that no Authorization header can carry (anything but visible ASCII without spaces), is refused."""
        if self.admin_token_file is not None:
            token = read_admin_token_file(self.admin_token_file)
            return _checked_token(token, "the admin token file", "the admin token file is empty")
        if self.admin_token is not None:
            token = self.admin_token.get_secret_value().strip()
            return _checked_token(token, "FAKE_LUCY_ADMIN_TOKEN", "FAKE_LUCY_ADMIN_TOKEN is set but empty")
        return None


def _checked_token(token: str, where: str, empty: str) -> str:
    if not token:
        raise ValueError(empty)
    if not valid_token(token):
        # no request could carry it: what a bearer token can be on the wire (``http/inputs.bearer_token``)
        raise ValueError(f"{where} must be {TOKEN_RULE}")
    return token


def load_settings(**overrides: Any) -> FakeLucySettings:
    """Settings from the environment, with explicit overrides (e.g. from the command line).

    ``--import`` is ``FAKE_LUCY_IMPORT``, as every option is ``FAKE_LUCY_<NAME>``; its field is
    ``import_file`` (``import`` is a keyword), so ``FAKE_LUCY_IMPORT_FILE`` is read too."""
    given = {k: v for k, v in overrides.items() if v is not None}
    by_name = os.environ.get("FAKE_LUCY_IMPORT")
    if by_name is not None and not by_name.strip() and "import_file" not in given:
        raise ValueError("FAKE_LUCY_IMPORT is set but empty: give a snapshot file, or leave it unset")
    if by_name and "import_file" not in given:
        by_field = os.environ.get("FAKE_LUCY_IMPORT_FILE")
        if by_field and by_field != by_name:
            raise ValueError("FAKE_LUCY_IMPORT and FAKE_LUCY_IMPORT_FILE name two files: set one of them")
        given["import_file"] = by_name
    return FakeLucySettings(**given)
