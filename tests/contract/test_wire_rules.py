"""Issue 13, point 2: each wire rule is written once, in ``lucy_memory._contract`` (read from
``contracts/`` where the contract states it), and the fake, the SDK and the MCP server all apply it.

Each rule is checked three ways: the shared value against the contract (and ``schemas/``), each
program's behaviour against the contract on boundary examples, and the packages' source for a copy of
the old literals (any copy fails, even an equal one: the next change would miss it).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest
from pydantic import SecretStr

import lucy_memory
from fake_lucy.domain import faults, lifecycle, principals
from fake_lucy.http import inputs, pipeline
from fake_lucy.http.problems import ProblemError
from fake_lucy.testing import InProcessFake
from lucy_memory import (
    AgentMemoryClient,
    ConfigurationError,
    IdempotencyKeyRequiredError,
    TransportRequest,
    TransportResponse,
    create_lucy_http_transport,
    models,
    retry,
)
from lucy_memory import client as sdk_client
from lucy_memory._contract import (
    API_BASE_PATH,
    CLIENT_NAME_MAX_CHARS,
    FINAL_PROPOSAL_STATES,
    OPERATION_PERMISSIONS,
    PERMISSIONS,
    PROPOSAL_STATES,
    RETRYABLE_OPERATIONS,
    RETRYABLE_STATUSES,
    clean_client_name,
    decode_client_name,
    encode_client_name,
    load_contract,
    load_schema,
)
from lucy_memory.mcp import server as mcp_server
from lucy_memory.mcp.config import McpConfigError, McpSettings, resolve_config
from lucy_memory.mcp.tools import PROPOSE, tool_schemas

REPOSITORY = Path(__file__).resolve().parents[2]
V1 = load_contract("agent-memory-api")
CONTROL = load_contract("fake-control")
DEFINITIONS = load_schema("definitions.schema.json")["$defs"]
REQUEST_HEADERS = V1["headers"]["request"]
OPERATIONS = V1["operations"]


def _contract_regex(pattern: str) -> re.Pattern[str]:
    """A contract (ECMA-262) pattern for Python: its final ``$`` is the end of the text."""
    return re.compile(pattern.removesuffix("$") + r"\Z")


class _Reached(Exception):
    """Raised by ``_Stop``: the request got past every pre-flight check."""


class _Stop:
    """A transport that records the request it is given and goes no further."""

    def __init__(self) -> None:
        self.requests: list[TransportRequest] = []

    async def send(self, request: TransportRequest) -> TransportResponse:
        self.requests.append(request)
        raise _Reached


def _sdk_client(transport: _Stop | None = None, **options: Any) -> AgentMemoryClient:
    options.setdefault("token", "a-token-for-the-wire-rules")
    options.setdefault("permissions", PERMISSIONS)
    return AgentMemoryClient(transport=transport or _Stop(), **options)


def _mcp_config(token: str, permissions: str | None = None) -> Any:
    settings = McpSettings(  # by the variables' names, as the environment gives them
        LUCY_MEMORY_TOKEN=SecretStr(token),
        LUCY_MEMORY_PERMISSIONS=permissions,
        LUCY_MEMORY_BASE_URL="https://lucy.example",
    )
    return resolve_config(settings)


# -- the base path -----------------------------------------------------------------------------------


def test_the_base_path_is_the_contracts() -> None:
    assert API_BASE_PATH == V1["base_path"] == "/api/agent-memory/v1"


@pytest.mark.anyio
async def test_the_fake_serves_and_the_sdk_and_mcp_server_call_under_the_contracts_base_path(
    fake: InProcessFake,
) -> None:
    async with fake.client() as http:
        served = await http.post(V1["base_path"] + "/recall", json={"query": "database"})
        assert served.status_code == 200
    seen: list[str] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(503)

    transport = create_lucy_http_transport(
        base_url="https://lucy.example", http_transport=httpx.MockTransport(record), max_retries=0
    )
    async with AgentMemoryClient(
        transport=transport, token="a-token-for-the-base-path", permissions=PERMISSIONS
    ) as client:
        with pytest.raises(lucy_memory.ServiceUnavailableError):
            await client.recall('{"query": "database"}')
    # The MCP server has no transport of its own: it builds exactly this one from LUCY_MEMORY_BASE_URL.
    config = _mcp_config("a-token-for-the-base-path")
    assert isinstance(config.transport, lucy_memory.LucyHttpTransport)
    assert config.transport._http.base_url.path.rstrip("/") == V1["base_path"]
    await config.transport.aclose()
    assert seen == [V1["base_path"] + OPERATIONS["recall"]["path"]]


# -- permissions -------------------------------------------------------------------------------------


def test_the_permissions_are_the_contracts_and_the_schemas() -> None:
    assert list(PERMISSIONS) == V1["permissions"] == DEFINITIONS["permission"]["enum"]
    assert set(OPERATION_PERMISSIONS.values()) == set(PERMISSIONS)
    assert dict(OPERATION_PERMISSIONS) == {name: op["permission"] for name, op in OPERATIONS.items()}
    header = _contract_regex(REQUEST_HEADERS["Lucy-Permissions"]["schema"]["pattern"])
    assert all(header.match(name) for name in PERMISSIONS)
    assert header.match(", ".join(PERMISSIONS))
    assert set(CONTROL["defaults"]["permissions"]) <= set(PERMISSIONS)


@pytest.mark.parametrize(
    "value", [*PERMISSIONS, ", ".join(PERMISSIONS), "memory:write", "memory:read,memory:write"]
)
def test_the_fake_the_sdk_and_the_mcp_server_take_exactly_the_contracts_permissions(value: str) -> None:
    names = [item.strip() for item in value.split(",")]
    expected = all(name in V1["permissions"] for name in names)

    try:
        fake_takes = inputs.permissions_header({"lucy-permissions": value}) == frozenset(names)
    except ProblemError:
        fake_takes = False
    try:
        sdk_takes = _sdk_client(permissions=names).permissions == tuple(names)
    except ConfigurationError:
        sdk_takes = False
    try:
        mcp_takes = _mcp_config("a-token-for-permissions", value).permissions == tuple(names)
    except McpConfigError:
        mcp_takes = False

    assert (fake_takes, sdk_takes, mcp_takes) == (expected, expected, expected)


def test_each_operation_needs_the_contracts_permission_in_the_sdk() -> None:
    sdk = {op.name: op.permission for op in (sdk_client._RECALL, sdk_client._PROPOSE, sdk_client._STATUS)}
    assert sdk == {name: op["permission"] for name, op in OPERATIONS.items()}


@pytest.mark.anyio
@pytest.mark.parametrize("operation", list(OPERATIONS))
async def test_the_fake_asks_each_operation_for_the_contracts_permission(
    fake: InProcessFake, operation: str
) -> None:
    needed = OPERATIONS[operation]["permission"]
    other = next(name for name in V1["permissions"] if name != needed)
    path = V1["base_path"] + OPERATIONS[operation]["path"].replace("{proposal_id}", "prop_" + "a" * 22)
    method = OPERATIONS[operation]["method"]
    body = {"query": "database"} if operation == "recall" else None
    if operation == "propose":
        body = {
            "kind": "fact",
            "content": "The wire rules are written once.",
            "scope": {"kind": "user", "id": "usr_dev"},
        }
    statuses = {}
    async with fake.client() as http:
        for permission in (needed, other):
            headers = {"Lucy-Permissions": permission, "Idempotency-Key": f"k-{operation}-{permission}"}
            response = await http.request(method, path, json=body, headers=headers)
            statuses[permission] = (response.status_code, response.json().get("code"))
    assert statuses[other] == (403, "permission_denied")
    assert statuses[needed][0] != 403


# -- retries -----------------------------------------------------------------------------------------


def test_the_retryable_statuses_and_operations_are_the_contracts() -> None:
    automatic = {name for name, op in OPERATIONS.items() if op["client_retry"]["automatic"]}
    statuses = {
        status
        for op in OPERATIONS.values()
        if op["client_retry"]["automatic"]
        for status in op["client_retry"]["statuses"]
    }
    assert RETRYABLE_OPERATIONS == automatic == {"propose"}
    assert RETRYABLE_STATUSES == statuses == {429, 502, 503, 504}
    assert retry.RETRYABLE_STATUSES is RETRYABLE_STATUSES
    assert retry.RETRYABLE_OPERATIONS is RETRYABLE_OPERATIONS
    propose = OPERATIONS["propose"]["client_retry"]
    sdk = (retry.DEFAULT_MAX_RETRIES, retry.MAX_RETRY_AFTER_SECONDS, retry.MAX_RETRIES_LIMIT)
    assert sdk == (
        propose["max_retries_default"],
        propose["retry_after_max_seconds"],
        V1["limits"]["retry_attempt"]["max"],
    )


def test_a_retryable_status_is_one_whose_default_fault_code_the_contract_calls_retryable() -> None:
    for status in CONTROL["faults"]["statuses"]:
        code = CONTROL["faults"]["code_defaults"][str(status)]
        assert V1["errors"][code]["retryable"] is (status in RETRYABLE_STATUSES), status


@pytest.mark.parametrize("status", range(400, 600))
def test_the_sdk_retries_a_propose_exactly_on_the_contracts_statuses(status: int) -> None:
    for operation in OPERATIONS:
        decision = retry.decide_retry(
            operation=operation,
            status=status,
            retry_after_header=None,
            retries_done=0,
            max_retries=2,
            now=0.0,
            random=lambda: 0.0,
        )
        expected = OPERATIONS[operation]["client_retry"]["automatic"] and status in OPERATIONS[operation][
            "client_retry"
        ].get("statuses", [])
        assert decision.retry is expected, (operation, status)


@pytest.mark.parametrize("status", CONTROL["faults"]["statuses"])
def test_the_fakes_fault_with_a_code_of_its_own_is_retryable_exactly_on_the_contracts_statuses(
    status: int,
) -> None:
    fault = faults.Fault(
        id="flt_wire", status=status, code="custom_outage", retry_after=None, phase="before",
        drop_connection=False, delay_ms=None, hold_ms=None,
    )  # fmt: skip
    body = json.loads(pipeline.injected_response(fault, "req_" + "w" * 24, {}).body)
    assert (body["code"], body["retryable"]) == (
        "custom_outage",
        status in OPERATIONS["propose"]["client_retry"]["statuses"],
    )


# -- Idempotency-Key ---------------------------------------------------------------------------------

KEYS = ["k", "k" * 255, "k" * 256, "", "has space", "tab\tinside", "caf\u00e9", "~!\"#$%&'()*+,-./", "line\n"]


def test_the_idempotency_key_rule_is_the_contracts_and_the_schemas() -> None:
    header = REQUEST_HEADERS["Idempotency-Key"]
    definition = DEFINITIONS["idempotency_key"]
    assert header["pattern"] == header["schema"]["pattern"]
    assert (
        header["schema"]["maxLength"] == definition["maxLength"] == V1["limits"]["idempotency_key_max_chars"]
    )
    tool = tool_schemas()[PROPOSE]["input"]["properties"]["idempotency_key"]
    assert (tool["maxLength"], tool["pattern"]) == (definition["maxLength"], definition["pattern"])


@pytest.mark.anyio
@pytest.mark.parametrize("key", KEYS, ids=range(len(KEYS)))
async def test_the_fake_and_the_sdk_take_exactly_the_contracts_idempotency_keys(key: str) -> None:
    expected = _contract_regex(REQUEST_HEADERS["Idempotency-Key"]["pattern"]).match(key) is not None

    fake_takes = inputs.idempotency_key({"idempotency-key": key}) == key
    client = _sdk_client()
    try:
        await client.propose('{"kind": "fact", "content": "x", "scope": {"kind": "user", "id": "u"}}', key)
    except IdempotencyKeyRequiredError:
        sdk_takes = False
    except _Reached:
        sdk_takes = True

    assert (fake_takes, sdk_takes) == (expected, expected)


# -- bearer tokens (the clients' own rule) -----------------------------------------------------------

TOKENS = [
    "t",
    "t" * 4096,
    "t" * 4097,
    "two words",
    "caf\u00e9-token",
    "tab\ttoken",
    "line\n",
    "~!#$%&'()*+,-./",
]


@pytest.mark.parametrize("token", TOKENS, ids=range(len(TOKENS)))
def test_the_sdk_and_the_mcp_server_take_the_same_tokens(token: str) -> None:
    try:
        _sdk_client(token=token)
        sdk_takes = True
    except ConfigurationError:
        sdk_takes = False
    try:
        _mcp_config(token)
        mcp_takes = True
    except McpConfigError:
        mcp_takes = False
    assert sdk_takes == mcp_takes
    assert sdk_takes is (1 <= len(token) <= 4096 and all("!" <= char <= "~" for char in token))


# -- Lucy-Client-Name --------------------------------------------------------------------------------

NAMES = [
    "my-agent 1.2",
    "  padded  ",
    "x" * 100,
    "x" * 101,
    " " + "x" * 100 + " ",
    "caf\u00e9-bot",
    "50% off",
    "\u65e5\u672c\u8a9e",
    "",
    "   ",
    "tab\tinside",
    "\tleading tab",
    "trailing newline\n",
    "del\x7f",
    "next line\x85",
    "lone \ud800 surrogate",
    "emoji \U0001f600",
]


def _contract_takes_name(name: str) -> bool:
    """The contract's rule, from the contract: no control character, UTF-8 text, and 1 to the limit
    of characters once trimmed."""
    control = re.compile(REQUEST_HEADERS["Lucy-Client-Name"]["control_characters"])
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return not control.search(name) and 1 <= len(name.strip()) <= V1["limits"]["client_name_max_chars"]


def test_the_client_name_limit_is_the_contracts() -> None:
    assert (
        CLIENT_NAME_MAX_CHARS == V1["limits"]["client_name_max_chars"] == DEFINITIONS["source"]["maxLength"]
    )


@pytest.mark.anyio
@pytest.mark.parametrize("name", NAMES, ids=range(len(NAMES)))
async def test_the_fake_and_the_sdk_take_exactly_the_contracts_client_names(name: str) -> None:
    expected = _contract_takes_name(name)
    stop = _Stop()
    try:
        client = _sdk_client(stop, client_name=name)
    except ConfigurationError:
        sdk_sends = None
    else:
        with pytest.raises(_Reached):
            await client.recall('{"query": "database"}')
        sdk_sends = stop.requests[0].headers["Lucy-Client-Name"]
    assert (sdk_sends is not None) is expected
    if sdk_sends is not None:
        assert _contract_regex(REQUEST_HEADERS["Lucy-Client-Name"]["schema"]["pattern"]).match(sdk_sends)

    if re.search(r"[\ud800-\udfff]", name):
        return  # text with no UTF-8 form cannot reach the fake
    try:
        fake_reads: str | None = inputs.client_name({"lucy-client-name": encode_client_name(name)})
    except ProblemError:
        fake_reads = None
    assert fake_reads == (name.strip() if expected else None)


@pytest.mark.parametrize("name", NAMES, ids=range(len(NAMES)))
def test_the_mcp_server_sends_only_client_names_the_fake_takes(name: str) -> None:
    assert mcp_server.clean_client_name is clean_client_name
    cleaned = clean_client_name(name)
    if _contract_takes_name(name):
        assert cleaned == name.strip()
    if cleaned is not None:
        assert _contract_takes_name(cleaned)
        assert decode_client_name(encode_client_name(cleaned)) == cleaned


# -- proposal states ---------------------------------------------------------------------------------


def test_the_proposal_states_are_the_contracts_in_the_fake_and_the_sdk() -> None:
    machine = V1["state_machine"]
    assert list(PROPOSAL_STATES) == machine["states"] == DEFINITIONS["proposal_status"]["enum"]
    assert FINAL_PROPOSAL_STATES == set(machine["final"]) == {"approved", "rejected", "expired", "superseded"}
    assert lifecycle.FINAL_STATES is FINAL_PROPOSAL_STATES
    assert models.FINAL_PROPOSAL_STATUSES is FINAL_PROPOSAL_STATES
    assert list(get_args(models.ProposalStatus)) == machine["states"]
    assert principals.PERMISSIONS is PERMISSIONS
    assert lucy_memory.PERMISSIONS is PERMISSIONS


# -- one copy in the source --------------------------------------------------------------------------

PACKAGES = [REPOSITORY / "fake_lucy", REPOSITORY / "client" / "lucy_memory"]
HOME = REPOSITORY / "client" / "lucy_memory" / "_contract" / "wire.py"
# Fragments of the old copies: permissions, the base path, the character classes of tokens, keys and
# client names (raw and as Python reads them), and the rule texts with their numbers written out.
STRING_COPIES = [
    *PERMISSIONS,
    API_BASE_PATH,
    "\\x21-\\x7e",
    "!-~",
    "\\x7f-\\x9f",
    "\x7f-\x9f",
    "255 printable",
    "4096 printable",
    "to 100 characters",
    "[redacted]",
]
SET_COPIES = [RETRYABLE_STATUSES, FINAL_PROPOSAL_STATES, frozenset(PROPOSAL_STATES)]


def _exempt(tree: ast.AST) -> set[int]:
    """Nodes that may name a rule's values: docstrings and other bare string statements (prose), and
    the arguments of ``Literal[...]`` (a type must spell its values; test_drift.py holds them to the
    schemas)."""
    exempt: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            exempt.add(id(node.value))
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == "Literal"
        ):
            exempt.add(id(node.slice))
    return exempt


def _copies(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    exempt = _exempt(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        if id(node) in exempt:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.lower()
            found += [f"{path.name}:{node.lineno} {copy!r}" for copy in STRING_COPIES if copy.lower() in text]
        elif isinstance(node, ast.Set | ast.Tuple | ast.List):
            values = {item.value for item in node.elts if isinstance(item, ast.Constant)}
            if len(values) == len(node.elts) and values in SET_COPIES:
                found.append(f"{path.name}:{node.lineno} {sorted(values, key=str)}")
    return sorted(found, key=lambda line: int(line.split()[0].split(":")[1]))


def test_no_package_module_restates_a_wire_rule() -> None:
    modules = [path for package in PACKAGES for path in sorted(package.rglob("*.py")) if path != HOME]
    assert len(modules) > 40
    copies = [copy for path in modules for copy in _copies(path)]
    assert copies == []


def test_the_source_scan_finds_each_old_copy(tmp_path: Path) -> None:
    """The scan above can fail: the old copies, written back into a module, are each found."""
    old = tmp_path / "old.py"
    old.write_text(
        '"""Docs may name memory:read and /api/agent-memory/v1."""\n'
        "import re\n"
        '_PERMISSION = {"recall": "memory:read", "propose": "memory:propose"}\n'
        'API_PREFIX = "/api/agent-memory/v1"\n'
        "_RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})\n"
        'FINAL = frozenset({"approved", "rejected", "expired", "superseded"})\n'
        'STATES = ("pending", "approved", "rejected", "expired", "superseded")\n'
        '_IDEMPOTENCY_KEY = re.compile(r"[\\x21-\\x7e]{1,255}")\n'
        '_TOKEN = "[\\x21-\\x7E]{1,4096}"\n'
        '_CONTROL = re.compile(r"[\\x00-\\x1F\\x7F-\\x9F]")\n'
        'MESSAGE = "token must be 1 to 4096 printable ASCII characters"\n'
        'REDACTED = "[redacted]"\n',
        encoding="utf-8",
    )
    found = _copies(old)
    # Each copy's line (line 3 holds two), and nothing from the docstring on line 1.
    assert [int(line.split()[0].removeprefix("old.py:")) for line in found] == [
        3,
        3,
        4,
        5,
        6,
        7,
        8,
        9,
        10,
        11,
        12,
    ]


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("LOCALHOST", True),
        ("localhost.", True),
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("[::1]", True),
        ("0.0.0.0", False),  # noqa: S104 - a host to classify, not one bound
        ("::", False),
        ("10.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("localhost.example", False),
        ("example.com", False),
    ],
)
def test_the_fake_and_the_sdk_agree_on_which_hosts_are_this_machine(host: str, loopback: bool) -> None:
    """The fake prints an MCP configuration for the host it binds, which lucy-memory-mcp must take
    (cleartext http:// only to a loopback host): both read a host alike."""
    from fake_lucy.addresses import is_loopback
    from lucy_memory._contract import is_loopback as sdk_is_loopback

    assert is_loopback(host) is loopback
    assert sdk_is_loopback(host) is loopback
