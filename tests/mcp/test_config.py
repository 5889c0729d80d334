"""``LUCY_MEMORY_*`` exactly as SPEC 5: one settings class, the transport-module path rules, and refusals
that are one line and never contain the token."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from lucy_memory import Transport
from lucy_memory.mcp.__main__ import main
from lucy_memory.mcp.config import McpConfigError, ServerConfig, load_settings, resolve_config
from tests.mcp.helpers import write_transport_module

TOKEN = "tok-MCP-config-4f1c9a7e2b8d4c6aa0e1"
NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")

Env = Callable[..., ServerConfig]


@pytest.fixture
def configure(monkeypatch: pytest.MonkeyPatch) -> Env:
    """``configure(TOKEN=…, BASE_URL=…)`` sets exactly these LUCY_MEMORY_* variables and resolves them."""
    for name in list(os.environ):
        if name.startswith("LUCY_MEMORY_"):
            monkeypatch.delenv(name)

    def resolve(**variables: str) -> ServerConfig:
        for name, value in variables.items():
            monkeypatch.setenv("LUCY_MEMORY_" + name, value)
        return resolve_config(load_settings())

    return resolve


def refused(configure: Env, **variables: str) -> str:
    with pytest.raises(McpConfigError) as caught:
        configure(**variables)
    message = str(caught.value)
    assert "\n" not in message
    assert TOKEN not in message
    return message


def test_a_token_and_an_https_base_url_serve_read_only_by_default(configure) -> None:
    config = configure(TOKEN=TOKEN, BASE_URL="https://lucy.example/")
    assert config.permissions == ("memory:read",)
    assert config.origin == "https://lucy.example"
    assert config.token.get_secret_value() == TOKEN
    assert TOKEN not in repr(config)


def test_permissions_are_a_comma_list_and_an_empty_value_counts_as_unset(configure) -> None:
    both = configure(
        TOKEN=TOKEN, BASE_URL="https://lucy.example", PERMISSIONS=" memory:read , memory:propose"
    )
    assert both.permissions == ("memory:read", "memory:propose")
    assert configure(PERMISSIONS="").permissions == ("memory:read",)
    assert "LUCY_MEMORY_PERMISSIONS" in refused(configure, PERMISSIONS="memory:read,memory:write")
    assert "LUCY_MEMORY_PERMISSIONS" in refused(configure, PERMISSIONS="memory:read,")


def test_the_token_is_required(configure) -> None:
    assert "LUCY_MEMORY_TOKEN is required" in refused(configure, BASE_URL="https://lucy.example")
    assert "LUCY_MEMORY_TOKEN is required" in refused(configure, TOKEN="")
    assert "printable ASCII" in refused(configure, TOKEN="two words")


@pytest.mark.parametrize(
    "placeholder",
    [
        "${LUCY_MEMORY_TOKEN}",
        "${env:LUCY_MEMORY_TOKEN}",
        "${input:lucy-token}",
        "<your-token>",
        "<your token>",  # not a token's characters either: the placeholder is what to say
        " ${input:lucy token} ",
    ],
)
def test_a_placeholder_the_host_did_not_fill_in_is_refused(configure, placeholder: str) -> None:
    """A host that does not know a placeholder syntax passes it on as it is: every call would be 401."""
    message = refused(configure, TOKEN=placeholder, BASE_URL="https://lucy.example")
    assert "LUCY_MEMORY_TOKEN is a placeholder the host did not fill in" in message


def test_exactly_one_of_base_url_and_transport_module(configure, tmp_path) -> None:
    module = write_transport_module(tmp_path, "http://127.0.0.1:1")
    assert "(neither is set)" in refused(configure, TOKEN=TOKEN)
    assert "(both are set)" in refused(
        configure, BASE_URL="https://lucy.example", TRANSPORT_MODULE=str(module)
    )
    assert configure(BASE_URL="").origin == str(module)  # empty counts as unset


def test_cleartext_needs_the_loopback_switch_and_a_loopback_host(configure) -> None:
    message = refused(configure, TOKEN=TOKEN, BASE_URL="http://127.0.0.1:8787")
    assert "set LUCY_MEMORY_ALLOW_INSECURE_LOOPBACK=1" in message
    assert configure(ALLOW_INSECURE_LOOPBACK="1").origin == "http://127.0.0.1:8787"
    assert "only to a loopback host" in refused(configure, BASE_URL="http://lucy.example")
    assert "must be 1" in refused(configure, ALLOW_INSECURE_LOOPBACK="yes")


@pytest.mark.parametrize(
    "base_url",
    [
        "https://lucy.example:443x",
        f"https://lucy.example:{TOKEN}",
        "https://[::1",
        "https://lucy.example:99999",
        "https://lucy.example:-1",
        "https://lucy.example:0",
        "https://lu cy.example",
    ],
)
def test_a_base_url_whose_host_or_port_cannot_be_read_is_refused_without_echoing_it(
    configure, base_url
) -> None:
    message = refused(configure, TOKEN=TOKEN, BASE_URL=base_url)
    assert "host or port cannot be read" in message
    assert TOKEN not in message
    assert base_url.split("//")[1] not in message


def test_a_base_url_with_a_path_or_credentials_is_refused(configure) -> None:
    assert "origin" in refused(configure, TOKEN=TOKEN, BASE_URL="https://lucy.example/api/agent-memory/v1")
    message = refused(configure, BASE_URL=f"https://user:{TOKEN}@lucy.example")
    assert "credentials" in message


def test_a_safe_transport_module_is_loaded_and_its_prints_go_to_stderr(configure, tmp_path, capsys) -> None:
    module = write_transport_module(tmp_path, "http://127.0.0.1:1")
    config = configure(TOKEN=TOKEN, TRANSPORT_MODULE=str(module))
    assert isinstance(config.transport, Transport)
    assert type(config.transport).__name__ == "PlainHttpx"
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "transport module: loading" in captured.err


def test_a_relative_or_missing_module_path_is_refused(configure, tmp_path, monkeypatch) -> None:
    write_transport_module(tmp_path, "http://127.0.0.1:1")
    monkeypatch.chdir(tmp_path)
    assert "must be an absolute path" in refused(configure, TOKEN=TOKEN, TRANSPORT_MODULE="lucy_transport.py")
    assert "does not exist" in refused(configure, TRANSPORT_MODULE=str(tmp_path / "missing.py"))


def test_a_module_that_is_not_a_py_file_is_refused(configure, tmp_path) -> None:
    other = tmp_path / "transport.txt"
    other.write_text("create_transport = None\n")
    assert "regular .py file" in refused(configure, TOKEN=TOKEN, TRANSPORT_MODULE=str(other))
    assert "regular .py file" in refused(configure, TRANSPORT_MODULE=str(tmp_path))


@pytest.mark.parametrize("mode", [0o664, 0o646, 0o666])
def test_a_module_writable_by_group_or_others_is_refused(configure, tmp_path, mode) -> None:
    module = write_transport_module(tmp_path, "http://127.0.0.1:1")
    module.chmod(mode)
    assert "must not be writable by group or others" in refused(
        configure, TOKEN=TOKEN, TRANSPORT_MODULE=str(module)
    )


@as_root
def test_a_module_owned_by_another_user_is_refused(configure, tmp_path) -> None:
    module = write_transport_module(tmp_path, "http://127.0.0.1:1")
    os.chown(module, NOBODY, NOBODY)
    assert "owned by the current user or root" in refused(
        configure, TOKEN=TOKEN, TRANSPORT_MODULE=str(module)
    )


@as_root
def test_a_module_in_a_directory_owned_by_another_user_is_refused(configure, tmp_path) -> None:
    directory = tmp_path / "theirs"
    directory.mkdir()
    module = write_transport_module(directory, "http://127.0.0.1:1")
    os.chown(directory, NOBODY, NOBODY)
    message = refused(configure, TOKEN=TOKEN, TRANSPORT_MODULE=str(module))
    assert "directory not owned by the current user or root" in message


def test_a_module_in_a_world_writable_directory_needs_root_and_the_sticky_bit(configure, tmp_path) -> None:
    directory = tmp_path / "shared"
    directory.mkdir()
    module = write_transport_module(directory, "http://127.0.0.1:1")
    directory.chmod(0o777)
    message = refused(configure, TOKEN=TOKEN, TRANSPORT_MODULE=str(module))
    assert f"writable by group or others (without the sticky bit): {directory}" in message
    if os.geteuid() == 0:  # the directory is root-owned: with the sticky bit it is like /tmp
        directory.chmod(0o1777)
        assert configure().origin == str(module)


def test_a_symlink_is_judged_by_what_it_points_to(configure, tmp_path) -> None:
    safe_dir, unsafe_dir = tmp_path / "safe", tmp_path / "unsafe"
    safe_dir.mkdir()
    unsafe_dir.mkdir()
    target = write_transport_module(unsafe_dir, "http://127.0.0.1:1")
    target.chmod(0o666)
    link = safe_dir / "transport.py"
    link.symlink_to(target)
    message = refused(configure, TOKEN=TOKEN, TRANSPORT_MODULE=str(link))
    assert f"must not be writable by group or others: {target}" in message
    target.chmod(0o644)
    assert configure().origin == str(target)


def test_a_module_without_a_working_create_transport_is_refused_by_type_only(configure, tmp_path) -> None:
    module = tmp_path / "broken.py"
    module.write_text("x = 1\n")
    module.chmod(0o644)
    assert "has no create_transport" in refused(configure, TOKEN=TOKEN, TRANSPORT_MODULE=str(module))
    module.write_text("def create_transport(*, token):\n    raise RuntimeError('bad token ' + token)\n")
    assert "failed (RuntimeError)" in refused(configure)
    module.write_text("def create_transport(*, token):\n    return object()\n")
    assert "not a Transport" in refused(configure)
    module.write_text("raise ImportError('nope')\n")
    assert "failed to load (ImportError)" in refused(configure)
    module.write_text("import sys\nsys.exit(5)\n")  # a configuration error too, not a silent exit 5
    assert "failed to load (SystemExit)" in refused(configure)
    module.write_text("import sys\ndef create_transport(*, token):\n    sys.exit(token)\n")
    assert "failed (SystemExit)" in refused(configure)


def test_the_settings_class_reads_only_the_lucy_memory_prefix(configure, monkeypatch) -> None:
    monkeypatch.setenv("TOKEN", "not-ours")
    monkeypatch.setenv("BASE_URL", "https://elsewhere.example")
    assert "LUCY_MEMORY_TOKEN is required" in refused(configure)
    assert load_settings().base_url is None


def test_the_state_folder_is_absolute_and_defaults_to_the_users_state_folder(
    configure, monkeypatch, tmp_path
) -> None:
    """LUCY_MEMORY_STATE_DIR: where the refused derived keys outlive the server (mcp/refusals.py)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    default = configure(TOKEN=TOKEN, BASE_URL="https://lucy.example")
    assert default.state_dir == tmp_path / "state" / "lucy-memory-mcp"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert configure().state_dir == tmp_path / "home" / ".local" / "state" / "lucy-memory-mcp"
    assert configure(STATE_DIR=str(tmp_path / "mine")).state_dir == tmp_path / "mine"
    assert refused(configure, STATE_DIR="relative/state") == "LUCY_MEMORY_STATE_DIR must be an absolute path"


def test_the_variables_are_read_by_their_exact_names(configure, monkeypatch) -> None:
    """``lucy_memory_token`` is not ``LUCY_MEMORY_TOKEN``, and another program's ``TOKEN`` or
    ``token`` is never read: a name spelt otherwise is not read."""
    monkeypatch.setenv("lucy_memory_token", TOKEN)
    monkeypatch.setenv("Lucy_Memory_Base_Url", "https://elsewhere.example")
    for name in ("token", "TOKEN", "base_url", "BASE_URL", "permissions", "state_dir"):
        monkeypatch.setenv(name, "https://elsewhere.example" if "url" in name.lower() else TOKEN)
    assert "LUCY_MEMORY_TOKEN is required" in refused(configure)
    assert load_settings().base_url is None
    assert configure(TOKEN=TOKEN, BASE_URL="https://lucy.example").origin == "https://lucy.example"


def test_a_configuration_error_naming_a_path_with_a_line_break_is_one_line(monkeypatch, capsys) -> None:
    """The path is the environment's text: its control characters are written escaped."""
    for name in list(os.environ):
        if name.startswith("LUCY_MEMORY_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LUCY_MEMORY_TOKEN", TOKEN)
    monkeypatch.setenv("LUCY_MEMORY_TRANSPORT_MODULE", "/nonexistent/no\nsuch\x1b[2J.py")
    assert main([]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("lucy-memory-mcp: invalid configuration: ")
    assert "no\\nsuch\\x1b[2J.py" in err
