"""The plugin judges a test's client (SPEC 3.8) and keeps a failed test's state (SPEC 3.9): run as a
user runs it, on test files of their own (pytester)."""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import threading

import httpx
import pytest

from fake_lucy.testing import LiveServer
from fake_lucy.testing.strict import dump_file_name
from fake_lucy.testing.tls import shared_tls_context
from lucy_memory._contract import load_contract

HEADER = """
import json
import pytest

pytestmark = pytest.mark.anyio

@pytest.fixture
def anyio_backend():
    return "asyncio"

async def recall_twice_after_a_503(fake_lucy):
    await fake_lucy.admin.add_fault("recall", 503)
    async with fake_lucy.client() as http:
        first = await http.post("/api/agent-memory/v1/recall", json={"query": "x"})
        second = await http.post("/api/agent-memory/v1/recall", json={"query": "x"})
    return first.headers["lucy-request-id"], second.headers["lucy-request-id"]
"""


@pytest.fixture
def user_suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(
        test_user=HEADER
        + """
@pytest.mark.lucy_strict
async def test_retries_a_recall(fake_lucy):
    first, second = await recall_twice_after_a_503(fake_lucy)
    print("IDS", first, second)

@pytest.mark.lucy_strict
@pytest.mark.lucy_allow("recall_retried")
async def test_retries_a_recall_on_purpose(fake_lucy):
    await recall_twice_after_a_503(fake_lucy)

async def test_retries_a_recall_unmarked(fake_lucy):
    await recall_twice_after_a_503(fake_lucy)

async def test_behaves(fake_lucy):
    async with fake_lucy.client() as http:
        assert (await http.post("/api/agent-memory/v1/recall", json={"query": "x"})).status_code == 200

async def test_fails_on_its_own(fake_lucy):
    async with fake_lucy.client() as http:
        await http.post("/api/agent-memory/v1/recall", json={"query": "x"})
    assert False, "the test's own assertion"
"""
    )
    return pytester


def test_a_strict_test_that_retries_a_recall_fails_naming_recall_retried(user_suite) -> None:
    result = user_suite.runpytest("-p", "no:randomly", "-s", "-W", "error")
    result.assert_outcomes(passed=3, failed=2)
    failed = {report.nodeid.split("::")[1] for report in result.reprec.getfailures() if report.when == "call"}
    assert failed == {"test_retries_a_recall", "test_fails_on_its_own"}
    [ids] = [re.search(r"IDS (\S+) (\S+)", line) for line in result.outlines if "IDS " in line]
    assert ids is not None
    first, second = ids.groups()
    result.stdout.fnmatch_lines([f"*recall_retried: {first}, {second} — a recall was sent again*"])


def test_a_finding_a_tests_fixture_produced_after_the_reset_fails_it_in_strict_mode(
    pytester: pytest.Pytester, tmp_path
) -> None:
    """The fake is reset for the test when its fixture is set up: what a fixture after it does (a
    client "warmed up" with a naive retry) is the test's, judged and dumped as its body's requests."""
    pytester.makepyfile(
        test_setup=HEADER
        + """
@pytest.fixture
async def warmed(fake_lucy):
    await recall_twice_after_a_503(fake_lucy)
    return fake_lucy

@pytest.mark.lucy_strict
async def test_with_a_warmed_client(warmed):
    pass

async def test_without_strict(warmed):
    pass
"""
    )
    dumps = tmp_path / "dumps"
    result = pytester.runpytest("-p", "no:randomly", "test_setup.py", f"--lucy-dump-on-failure={dumps}")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*_ test_with_a_warmed_client _*", "*recall_retried: req_*"])
    (dump,) = dumps.iterdir()
    document = json.loads(dump.read_text())
    assert [row["operation"] for row in document["journal"]] == ["recall", "recall"]
    assert [finding["code"] for finding in document["findings"]] == ["recall_retried"]


def test_lucy_strict_on_the_command_line_makes_every_test_strict(user_suite) -> None:
    result = user_suite.runpytest("-p", "no:randomly", "--lucy-strict", "-W", "error")
    result.assert_outcomes(passed=2, failed=3)
    result.stdout.fnmatch_lines(["*test_retries_a_recall_unmarked*", "*1 finding*"])


def test_the_plugins_own_clients_pass_strict_mode_their_waits_move_the_fake_clock(
    pytester: pytest.Pytester,
) -> None:
    """The fixture clients never really sleep; each wait moves the fake's clock instead, so the fake
    sees a retry come after its Retry-After (and a wait_for_decision poll after its pause)."""
    pytester.makepyfile(
        test_waits=HEADER
        + """
PROPOSAL = {
    "kind": "fact",
    "content": "We deploy on Tuesdays.",
    "scope": {"kind": "project", "id": "project_example"},
}

async def test_a_rate_limited_propose(fake_lucy, lucy_client):
    before = (await fake_lucy.admin.clock())["now"]
    await fake_lucy.admin.add_fault("propose", 429, retry_after=3)
    await lucy_client.propose(json.dumps(PROPOSAL))
    assert lucy_client.waits == [3.0]
    assert (await fake_lucy.admin.clock())["now"] > before

def test_the_sync_client_after_a_503(fake_lucy_server, lucy_sync_client):
    fake_lucy_server.sync_admin.add_fault("propose", 503, retry_after=2)
    lucy_sync_client.propose(json.dumps(PROPOSAL))
    assert lucy_sync_client.waits == [2.0]
"""
    )
    result = pytester.runpytest("-p", "no:randomly", "--lucy-strict", "-W", "error")
    result.assert_outcomes(passed=2)


def test_dumps_go_where_pytest_started_and_two_parameters_never_share_a_file(
    pytester: pytest.Pytester,
) -> None:
    """A relative DIR is the run's, not the folder a test moved to; ``[a/b]`` and ``[a_b]`` would
    be the same name once their unsafe characters are replaced: each keeps a file of its own."""
    pytester.makepyfile(
        test_dumped=HEADER
        + """
@pytest.mark.parametrize("name", ["a/b", "a_b"])
async def test_fails(fake_lucy, name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    await fake_lucy.admin.set_clock(frozen=True)
    assert False, name
"""
    )
    result = pytester.runpytest("-p", "no:randomly", "--lucy-dump-on-failure=dumps", "-W", "error")
    result.assert_outcomes(failed=2)
    files = sorted((pytester.path / "dumps").iterdir())
    assert [file.name for file in files] == sorted(
        dump_file_name(f"test_dumped.py::test_fails[{name}]") for name in ("a/b", "a_b")
    )
    assert len({file.name for file in files}) == 2
    assert {json.loads(file.read_text())["test"] for file in files} == {
        "test_dumped.py::test_fails[a/b]",
        "test_dumped.py::test_fails[a_b]",
    }


def test_a_mistaken_lucy_snapshot_marker_fails_its_test_with_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_marks=HEADER
        + """
@pytest.mark.lucy_snapshot()
async def test_no_path(fake_lucy):
    pass

@pytest.mark.lucy_snapshot("state.json")
def test_no_fake():
    pass
"""
    )
    result = pytester.runpytest("-p", "no:randomly", "-W", "error")
    result.assert_outcomes(failed=2)
    lines = result.outlines
    assert "lucy_snapshot takes one path, e.g. lucy_snapshot('state.json')" in lines
    assert "lucy_snapshot needs a fake fixture (fake_lucy, fake_lucy_server)" in lines
    assert "strict.py" not in result.stdout.str()  # none of the plugin's frames


def test_dump_on_failure_writes_one_readable_file_per_failed_test_only(user_suite, tmp_path) -> None:
    dumps = tmp_path / "dumps" / "not-yet"
    result = user_suite.runpytest("-p", "no:randomly", f"--lucy-dump-on-failure={dumps}", "-W", "error")
    result.assert_outcomes(passed=3, failed=2)
    names = sorted(path.name for path in dumps.iterdir())
    assert names == sorted(
        dump_file_name(f"test_user.py::{name}") for name in ("test_retries_a_recall", "test_fails_on_its_own")
    )
    assert names[0] == "test_user.py__test_fails_on_its_own.json"
    document = json.loads((dumps / names[1]).read_text(encoding="utf-8"))
    assert set(document) == {"test", "fixture", "snapshot", "journal", "findings"}
    assert (document["test"], document["fixture"]) == ("test_user.py::test_retries_a_recall", "fake_lucy")
    assert [row["status"] for row in document["journal"]] == [503, 200]
    assert [item["code"] for item in document["findings"]] == ["recall_retried"]
    assert document["findings"][0]["request_ids"] == [row["request_id"] for row in document["journal"]]
    assert document["snapshot"]["format"] == "fake-lucy-snapshot"
    assert "lucy-dev-token" not in json.dumps(document)


def test_a_fake_reached_through_getfixturevalue_is_judged_and_dumped_as_a_fixture_of_the_test(
    pytester: pytest.Pytester, tmp_path
) -> None:
    """Parametrizing over clients goes through ``request.getfixturevalue``, in a fixture or in the
    test: the fake it resets is none of the test's own arguments, and is still the test's."""
    pytester.makepyfile(
        test_dynamic=HEADER
        + """
@pytest.fixture(params=["fake_lucy", "fake_lucy_server"])
def any_fake(request):
    return {"fake": request.getfixturevalue(request.param)}  # not a fake itself: a holder of one

@pytest.mark.lucy_strict
async def test_through_a_parametrized_fixture(any_fake):
    await recall_twice_after_a_503(any_fake["fake"])

@pytest.mark.lucy_strict
async def test_through_the_request_in_the_body(request):
    await recall_twice_after_a_503(request.getfixturevalue("fake_lucy"))

async def test_fails_through_the_request_in_the_body(request):
    fake = request.getfixturevalue("fake_lucy")
    async with fake.client() as http:
        await http.post("/api/agent-memory/v1/recall", json={"query": "x"})
    assert False, "the test's own assertion"

@pytest.mark.lucy_strict
async def test_behaves_through_the_request(request):
    fake = request.getfixturevalue("fake_lucy_server")
    async with fake.client() as http:
        assert (await http.post("/api/agent-memory/v1/recall", json={"query": "x"})).status_code == 200
"""
    )
    dumps = tmp_path / "dumps"
    result = pytester.runpytest("-p", "no:randomly", f"--lucy-dump-on-failure={dumps}", "-W", "error")
    result.assert_outcomes(passed=1, failed=4)
    result.stdout.fnmatch_lines(["*recall_retried: *"])
    # Each failure's own section opens with the message; the short summary may repeat it, or cut it,
    # depending on the terminal's width, so only lines that are the message alone are counted.
    said = [line for line in result.stdout.lines if line == "the client broke a Lucy client rule: 1 finding"]
    assert len(said) == 3
    dumped = json.loads(
        (dumps / dump_file_name("test_dynamic.py::test_fails_through_the_request_in_the_body")).read_text()
    )
    assert dumped["fixture"] == "fake_lucy"
    assert [row["operation"] for row in dumped["journal"]] == ["recall"]
    param = dumps / dump_file_name("test_dynamic.py::test_through_a_parametrized_fixture[fake_lucy_server]")
    assert json.loads(param.read_text())["fixture"] == "fake_lucy_server"


def test_a_failed_teardown_is_dumped_once_and_each_fake_of_a_test_has_its_file(
    pytester: pytest.Pytester, tmp_path
) -> None:
    pytester.makepyfile(
        test_more=HEADER
        + """
@pytest.fixture
async def nothing_left_pending(fake_lucy):
    yield
    pending = (await fake_lucy.admin.proposals(status="pending"))["items"]
    assert pending == [], "a proposal was left pending"

PROPOSAL = {"kind": "fact", "content": "Left for review.", "scope": {"kind": "user", "id": "usr_dev"}}

async def test_leaves_a_proposal(nothing_left_pending, fake_lucy):
    async with fake_lucy.client() as http:
        await http.post("/api/agent-memory/v1/proposals", json=PROPOSAL, headers={"Idempotency-Key": "k1"})

async def test_fails_and_leaves_a_proposal(nothing_left_pending, fake_lucy):
    async with fake_lucy.client() as http:
        await http.post("/api/agent-memory/v1/proposals", json=PROPOSAL, headers={"Idempotency-Key": "k2"})
    assert False, "the body fails too"

async def test_fails_on_two_fakes(fake_lucy, fake_lucy_server):
    async with fake_lucy.client() as http:
        await http.post("/api/agent-memory/v1/recall", json={"query": "in process"})
    async with fake_lucy_server.client() as http:
        await http.post("/api/agent-memory/v1/recall", json={"query": "served"})
        await http.post("/api/agent-memory/v1/recall", json={"query": "served again"})
    assert False
"""
    )
    dumps = tmp_path / "dumps"
    result = pytester.runpytest("-p", "no:randomly", f"--lucy-dump-on-failure={dumps}", "-W", "error")
    result.assert_outcomes(passed=1, failed=2, errors=2)  # a failed teardown is an error
    names = sorted(path.name for path in dumps.iterdir())
    assert names == [
        "test_more.py__test_fails_and_leaves_a_proposal.json",  # once, though body and teardown failed
        "test_more.py__test_fails_on_two_fakes.fake2.json",
        "test_more.py__test_fails_on_two_fakes.json",
        "test_more.py__test_leaves_a_proposal.json",
    ]
    teardown = json.loads((dumps / names[3]).read_text(encoding="utf-8"))
    assert [row["operation"] for row in teardown["journal"]] == ["propose"]
    first, second = (json.loads((dumps / names[i]).read_text()) for i in (2, 1))
    assert [row["operation"] for row in first["journal"]] == ["recall"]
    assert [row["operation"] for row in second["journal"]] == ["recall", "recall"]
    assert (first["fixture"], second["fixture"]) == ("fake_lucy", "fake_lucy_server")  # which is which


def test_a_teardown_that_fails_in_the_sessions_last_test_is_dumped_too(
    pytester: pytest.Pytester, tmp_path
) -> None:
    """The session's fakes stay open until the session ends: the last test's teardown runs the
    session fixtures' finalizers before its report is made."""
    pytester.makepyfile(
        test_last=HEADER
        + """
@pytest.fixture
async def no_requests_left(fake_lucy, fake_lucy_server):
    yield
    assert await fake_lucy.admin.requests() == [], "the in-process fake saw a request"

async def test_the_only_one(no_requests_left, fake_lucy, fake_lucy_server):
    async with fake_lucy.client() as http:
        await http.post("/api/agent-memory/v1/recall", json={"query": "last"})
"""
    )
    dumps = tmp_path / "dumps"
    result = pytester.runpytest("-p", "no:randomly", f"--lucy-dump-on-failure={dumps}", "-W", "error")
    result.assert_outcomes(passed=1, errors=1)
    assert "no dump written" not in result.stdout.str()
    names = sorted(path.name for path in dumps.iterdir())
    assert names == ["test_last.py__test_the_only_one.fake2.json", "test_last.py__test_the_only_one.json"]
    document = json.loads((dumps / names[1]).read_text(encoding="utf-8"))
    assert [row["operation"] for row in document["journal"]] == ["recall"]


def test_lucy_snapshot_loads_a_snapshot_before_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_make=HEADER
        + """
async def test_make_a_snapshot(fake_lucy, tmp_path_factory):
    await fake_lucy.admin.set_clock(now="2030-01-01T00:00:00.000000Z", frozen=True)
    created = await fake_lucy.admin.create_credential(scopes=[], credits=7, account="acct_snapped")
    async with fake_lucy.client(fake_lucy.admin_token) as http:
        snapshot = (await http.get("/_fake/snapshot")).json()
    with open("state.json", "w") as handle:
        json.dump(snapshot, handle)
    with open("token.txt", "w") as handle:
        handle.write(created["token"])
"""
    )
    assert pytester.runpytest("-p", "no:randomly", "-W", "error").ret == 0
    pytester.makepyfile(
        test_use=HEADER
        + """
@pytest.mark.lucy_snapshot("state.json")
async def test_the_snapshot_is_there(fake_lucy):
    with open("token.txt") as handle:
        token = handle.read()
    async with fake_lucy.client(token) as http:
        answer = await http.post("/api/agent-memory/v1/recall", json={"query": "x"})
    assert answer.status_code == 200
    assert answer.json()["credits"]["remaining"] == 6
    assert (await fake_lucy.admin.clock())["now"].startswith("2030-01-01")

async def test_without_the_marker_the_fake_is_fresh(fake_lucy):
    assert (await fake_lucy.admin.clock())["now"] < "2030"
"""
    )
    result = pytester.runpytest("-p", "no:randomly", "test_use.py", "-W", "error")
    result.assert_outcomes(passed=2)


def test_a_snapshot_without_the_dev_tenant_fails_a_test_of_the_dev_token_fixtures_in_one_line(
    pytester: pytest.Pytester,
) -> None:
    """A --lucy-url session's dump holds its own tenant alone: on the plugin's own fake the
    dev-token fixtures would meet 401 at their first call; a test that only uses the admin API
    restores it as any other."""
    pytester.makepyfile(
        test_make=HEADER
        + """
async def test_make_a_snapshot_of_another_tenant(fake_lucy):
    await fake_lucy.admin.create_tenant("ci-run-7")
    async with fake_lucy.client(fake_lucy.admin_token) as http:
        snapshot = (await http.get("/_fake/snapshot")).json()
    snapshot["tenants"] = [t for t in snapshot["tenants"] if t["id"] == "ci-run-7"]
    with open("other.json", "w") as handle:
        json.dump(snapshot, handle)
"""
    )
    assert pytester.runpytest("-p", "no:randomly", "-W", "error").ret == 0
    pytester.makepyfile(
        test_use=HEADER
        + """
@pytest.mark.lucy_snapshot("other.json")
async def test_with_the_dev_token(lucy_client):
    await lucy_client.recall("anything")

@pytest.mark.lucy_snapshot("other.json")
async def test_with_the_admin_api(fake_lucy):
    assert [t["tenant"] for t in await fake_lucy.admin.tenants()] == ["ci-run-7"]

@pytest.mark.lucy_snapshot("not-a-snapshot.json")
async def test_with_a_file_that_is_no_snapshot(lucy_client):
    pass
"""
    )
    pytester.path.joinpath("not-a-snapshot.json").write_text('{"format": "nope"}')
    result = pytester.runpytest("-p", "no:randomly", "test_use.py", "-W", "error")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*lucy_snapshot: */not-a-snapshot.json: the snapshot cannot be restored: *"])
    result.stdout.fnmatch_lines(
        [
            "lucy_snapshot: */other.json holds ci-run-7 and not tenant_dev, whose dev token"
            " lucy_client calls the fake with (a --lucy-url session's dump holds that session's tenant"
            " alone): drive this test through the admin API (fake_lucy.admin, fake_lucy_server.admin),"
            " or look around in that state with fake-lucy serve --import */other.json"
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_a_dump_is_named_as_the_contract_says() -> None:
    """SPEC 3.9's name (the node id, characters outside ``A-Za-z0-9._-`` as ``_``, plus ``.json``), and
    the choice ``dump_on_failure`` in contracts/fake-control.contract.json adds where two tests could
    meet in one file: a digest of the id after an id with other characters, or a shortened long name."""
    rule = load_contract("fake-control")["dump_on_failure"]
    longest, digits = rule["max_name_chars"], rule["digest_hex_digits"]

    def digest(nodeid: str) -> str:
        return hashlib.sha256(nodeid.encode()).hexdigest()[:digits]

    plain = "tests/test_x.py::TestA::test_b-c.d"
    assert dump_file_name(plain) == "tests_test_x.py__TestA__test_b-c.d.json"
    assert dump_file_name(plain, fake=2) == "tests_test_x.py__TestA__test_b-c.d.fake2.json"
    bracketed = "test_x.py::test_b[a/b]"
    assert dump_file_name(bracketed) == f"test_x.py__test_b_a_b_-{digest(bracketed)}.json"
    long = "test_x.py::test_b" + "y" * 300
    assert dump_file_name(long) == f"{'test_x.py__test_b' + 'y' * 300}"[: longest - digits - 1] + (
        f"-{digest(long)}.json"
    )
    assert len(dump_file_name(long).removesuffix(".json")) == longest


def test_a_long_test_id_gets_a_short_dump_name_and_an_unwritable_dump_never_stops_the_run(
    pytester: pytest.Pytester, tmp_path
) -> None:
    pytester.makepyfile(
        test_long="""
        import pytest

        pytestmark = pytest.mark.anyio

        @pytest.fixture
        def anyio_backend():
            return "asyncio"

        @pytest.mark.parametrize("n", [pytest.param(1, id="y" * 300), pytest.param(2, id="y" * 299 + "z")])
        async def test_fails(fake_lucy, n):
            assert n == 0
        """
    )
    dumps = tmp_path / "dumps"
    result = pytester.runpytest("-p", "no:randomly", f"--lucy-dump-on-failure={dumps}")
    result.assert_outcomes(failed=2)
    names = sorted(path.name for path in dumps.iterdir())
    assert len(names) == 2  # two ids alike in their first 200 characters: two files
    assert all(len(name) <= 205 for name in names)
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    result = pytester.runpytest("-p", "no:randomly", f"--lucy-dump-on-failure={blocked / 'dumps'}")
    result.assert_outcomes(failed=2)  # no INTERNALERROR: each failure says why it has no dump
    result.stdout.fnmatch_lines(["*no dump written to*"])


def test_lucy_allow_with_a_code_no_finding_has_fails_naming_the_codes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_typo=HEADER
        + """
@pytest.mark.lucy_strict
@pytest.mark.lucy_allow("recal_retried")
async def test_allows_a_typo(fake_lucy):
    async with fake_lucy.client() as http:
        assert (await http.post("/api/agent-memory/v1/recall", json={"query": "x"})).status_code == 200

@pytest.mark.lucy_allow("recal_retried")  # not strict: the typo fails the test all the same
async def test_allows_a_typo_without_strict(fake_lucy):
    pass
"""
    )
    dumps = pytester.path / "dumps"
    result = pytester.runpytest("-p", "no:randomly", f"--lucy-dump-on-failure={dumps}")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*lucy_allow names no finding code: recal_retried (the codes: recall_retried*"] * 2
    )
    # failed tests, so dumped as every failed test is (the state they started from)
    assert sorted(path.name for path in dumps.iterdir()) == [
        "test_typo.py__test_allows_a_typo.json",
        "test_typo.py__test_allows_a_typo_without_strict.json",
    ]


def test_a_users_failing_teardown_shows_its_own_frames_not_the_plugins(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
import pytest

@pytest.fixture
def breaks_at_teardown():
    yield
    raise RuntimeError("the user's own teardown failed")
"""
    )
    pytester.makepyfile(
        test_teardown="""
def test_uses_it(breaks_at_teardown):
    pass

def test_after_it():
    pass
"""
    )
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=2, errors=1)
    output = result.stdout.str()
    assert "the user's own teardown failed" in output
    assert "pytest_plugin.py" not in output
    assert "strict.py" not in output
    assert "def pytest_runtest_teardown" not in output


def test_a_lucy_snapshot_file_that_is_not_json_fails_the_test_naming_the_file(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".json", broken="{not json")
    pytester.makepyfile(
        test_snap=HEADER
        + """
@pytest.mark.lucy_snapshot("broken.json")
async def test_starts_from_a_snapshot(fake_lucy):
    pass
"""
    )
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*lucy_snapshot: cannot read the snapshot *broken.json: Expecting property name*"]
    )
    assert "During handling" not in result.stdout.str()  # one line, not the JSON error before it


def test_on_a_shared_fake_lucy_snapshot_restores_the_sessions_own_tenant_and_refuses_another_fakes(
    pytester: pytest.Pytester, live: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LUCY_ADMIN_TOKEN", live.admin_token)
    pytester.makepyfile(
        test_shared=HEADER
        + """
async def test_keep_the_tenants_state(fake_lucy_server):
    await fake_lucy_server.admin.set_balance(fake_lucy_server.account, 7)
    async with fake_lucy_server.client(fake_lucy_server.admin_token) as http:
        snapshot = (await http.get("/_fake/snapshot")).json()
    with open("own.json", "w") as handle:
        json.dump(snapshot, handle)

@pytest.mark.lucy_snapshot("own.json")
async def test_the_own_tenants_snapshot_is_restored(fake_lucy_server):
    async with fake_lucy_server.client() as http:
        answer = await http.post("/api/agent-memory/v1/recall", json={"query": "x"})
    assert answer.json()["credits"]["remaining"] == 6

@pytest.mark.lucy_snapshot("other.json")
async def test_another_fakes_snapshot(fake_lucy_server):
    pass
"""
    )
    # the whole server's state (its dev tenant among others): what a snapshot file usually holds
    whole = httpx.get(
        live.base_url + "/_fake/snapshot",
        headers={"Authorization": f"Bearer {live.admin_token}"},
        verify=shared_tls_context(),
    )
    (pytester.path / "other.json").write_text(whole.text)
    result = pytester.runpytest("-p", "no:randomly", "-W", "error", "--lucy-url", live.base_url)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*lucy_snapshot: *other.json: on a shared fake (--lucy-url) a session restores only a"
            " snapshot of its own tenant (pytest-*), and this one holds tenant_dev:*"
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert "During handling" not in result.stdout.str()


def test_lucy_tenant_label_starts_each_sessions_tenant_id_and_a_bad_one_is_a_usage_error(
    pytester: pytest.Pytester, live: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LUCY_ADMIN_TOKEN", live.admin_token)
    pytester.makepyfile(
        test_label="""
def test_the_tenant_names_the_job(fake_lucy_server):
    print("TENANT", fake_lucy_server.tenant)
"""
    )
    result = pytester.runpytest("-s", "--lucy-url", live.base_url, "--lucy-tenant-label", "ci-job-1234")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*TENANT ci-job-1234-*"])
    refused = pytester.runpytest("--lucy-url", live.base_url, "--lucy-tenant-label", "job 1234")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*--lucy-tenant-label 'job 1234': 1 to 100 of the characters*"])


def test_a_lucy_url_that_is_no_fakes_address_is_a_usage_error_naming_the_fix(
    pytester: pytest.Pytester, live: LiveServer
) -> None:
    """As the operator CLI says it: not an http(s) URL, or the address of the fake's v1 or control
    API (an MCP host's LUCY_MEMORY_BASE_URL), with the fake's own address to give instead."""
    pytester.makepyfile(test_any="def test_any(fake_lucy_server):\n    pass\n")
    for url, said in (
        ("not a url", "--lucy-url: 'not a url' is not an http(s) URL of a running fake"),
        ("127.0.0.1:8787", "--lucy-url: '127.0.0.1:8787' is not an http(s) URL of a running fake"),
        (
            live.base_url + "/api/agent-memory/v1",
            f"--lucy-url: {live.base_url}/api/agent-memory/v1 is the address of the fake's v1 API;"
            f" --lucy-url needs the fake's own: {live.base_url}",
        ),
        (
            "http://user:secret@127.0.0.1:8787/?token=secret",
            "--lucy-url: http://127.0.0.1:8787/?… holds a user name or a password; a fake takes none:"
            " its admin token is what opens its control API",
        ),
    ):
        refused = pytester.runpytest("--lucy-url", url)
        assert refused.ret == pytest.ExitCode.USAGE_ERROR, url
        refused.stderr.fnmatch_lines([f"ERROR: {said}"])
        assert "secret" not in refused.stderr.str()


def test_a_shared_tenant_that_cannot_be_deleted_at_the_end_fails_the_run_visibly(
    pytester: pytest.Pytester, live: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session's tenant is deleted in the last test's teardown: a failure there is that
    teardown's error (and the run's failure), not a crash of pytest nor a silent pass."""
    monkeypatch.setenv("FAKE_LUCY_ADMIN_TOKEN", live.admin_token)
    pytester.makepyfile(
        test_gone="""
def test_deletes_its_own_tenant(fake_lucy_server):
    fake_lucy_server.sync_admin.delete_tenant()
"""
    )
    result = pytester.runpytest("--lucy-url", live.base_url)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["fake_lucy: the session's fakes could not be closed: *401*"])
    assert "During handling" not in result.stdout.str()
    assert "Traceback" not in result.stdout.str()  # one line, none of the plugin's frames
    assert "fake_lucy/testing" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_strict_test_whose_shared_tenant_is_gone_fails_with_one_line_saying_so(
    pytester: pytest.Pytester, live: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LUCY_ADMIN_TOKEN", live.admin_token)
    pytester.makepyfile(
        test_gone="""
def test_deletes_its_own_tenant(fake_lucy_server):
    fake_lucy_server.sync_admin.delete_tenant()
"""
    )
    result = pytester.runpytest("--lucy-url", live.base_url, "--lucy-strict")
    result.assert_outcomes(failed=1, errors=1)
    result.stdout.re_match_lines(
        [
            r"fake_lucy: the test's fake could not be read: this session's tenant pytest-\w+-[0-9a-f]{12}"
            r" is gone from the shared fake \(.*\): GET /_fake/findings answered 401"
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert "fake_lucy/testing" not in result.stdout.str()


def test_an_interrupted_session_still_deletes_its_shared_tenant(
    pytester: pytest.Pytester, live: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even when the session stops before its last test's teardown and a user's own session
    fixture fails in its teardown."""
    monkeypatch.setenv("FAKE_LUCY_ADMIN_TOKEN", live.admin_token)
    pytester.makeconftest(
        """
import pytest

@pytest.fixture(scope="session", autouse=True)
def broken_at_the_end():
    yield
    raise RuntimeError("a user's session fixture fails in its teardown")
"""
    )
    pytester.makepyfile(
        test_stop="""
def test_stops_the_run(fake_lucy_server):
    print("TENANT", fake_lucy_server.tenant)
    raise KeyboardInterrupt

def test_never_runs(fake_lucy_server):
    pass
"""
    )
    result = pytester.runpytest("-s", "--lucy-url", live.base_url)
    # pytest itself reports the fixture that failed while the interrupted session finished
    assert result.ret in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
    result.stdout.fnmatch_lines(["*TENANT pytest-*"])
    left = httpx.get(
        live.base_url + "/_fake/tenants",
        headers={"Authorization": f"Bearer {live.admin_token}"},
        verify=shared_tls_context(),
    ).json()["items"]
    assert [item["tenant"] for item in left] == ["tenant_dev"]


def test_a_failure_dump_goes_into_a_fake_as_it_was_written(
    pytester: pytest.Pytester, live: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve --import``, ``fake-lucy snapshot import`` and ``lucy_snapshot`` take the dump file
    itself (the snapshot in it), not only a snapshot extracted from it."""
    from fake_lucy import cli
    from fake_lucy.dumps import DUMP_KEYS
    from fake_lucy.snapshot_file import read_snapshot

    pytester.makepyfile(
        test_dumped=HEADER
        + """
async def test_fails(fake_lucy):
    async with fake_lucy.client() as http:
        proposed = await http.post(
            "/api/agent-memory/v1/proposals",
            json={
                "kind": "fact",
                "content": "Kept by the dump.",
                "scope": {"kind": "project", "id": "project_example"},
            },
            headers={"Idempotency-Key": "dumped-0001"},
        )
    assert proposed.status_code == 201
    assert False, "kept"
"""
    )
    result = pytester.runpytest("-p", "no:randomly", "--lucy-dump-on-failure=dumps", "-W", "error")
    result.assert_outcomes(failed=1)
    [path] = (pytester.path / "dumps").iterdir()
    dump = json.loads(path.read_text())
    assert dump.keys() == DUMP_KEYS
    assert read_snapshot(path) == dump["snapshot"]  # what serve --import restores
    spec_shape = pytester.path / "spec-shape.json"  # SPEC 3.9's, as a dump was before it named its fixture
    spec_shape.write_text(json.dumps({key: value for key, value in dump.items() if key != "fixture"}))
    assert read_snapshot(spec_shape) == dump["snapshot"]
    unknown = pytester.path / "not-a-dump.json"  # one key more: not a dump, refused as a snapshot
    unknown.write_text(json.dumps({**dump, "note": "x"}))
    assert read_snapshot(unknown)["note"] == "x"

    monkeypatch.delenv("FAKE_LUCY_ADMIN_TOKEN", raising=False)
    monkeypatch.delenv("FAKE_LUCY_ADMIN_TOKEN_FILE", raising=False)
    assert cli.main(["snapshot", "import", str(path), "--url", live.base_url]) == 0
    [kept] = [p for p in live.sync_admin.proposals()["items"] if p["content"] == "Kept by the dump."]
    assert kept["status"] == "pending"

    pytester.makepyfile(
        test_restored=HEADER
        + f"""
@pytest.mark.lucy_snapshot({str(path)!r})
async def test_starts_from_the_dump(fake_lucy):
    items = (await fake_lucy.admin.proposals())["items"]
    assert [p["content"] for p in items if p["status"] == "pending"] == ["Kept by the dump."]
"""
    )
    result = pytester.runpytest("-p", "no:randomly", "test_restored.py", "-W", "error")
    result.assert_outcomes(passed=1)


def test_a_value_shaped_like_a_fake_is_judged_only_where_a_fake_lucy_answers(
    pytester: pytest.Pytester, tmp_path
) -> None:
    """A user's own object with ``base_url`` and ``admin_token`` — one wrapping the in-process fake,
    or an application's settings — is no fake running elsewhere: strict mode and dumps pass over it
    (a passing test stays passed), and its token is never sent anywhere."""
    seen: list[str] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(f"{self.path} {self.headers.get('Authorization')}")
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    elsewhere = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=elsewhere.serve_forever, daemon=True)
    thread.start()
    try:
        pytester.makepyfile(
            test_user=HEADER
            + f"""
from dataclasses import dataclass

@dataclass
class Harness:
    base_url: str
    admin_token: str
    fake: object

@dataclass
class AppSettings:
    base_url: str
    admin_token: str

@pytest.fixture
def harness(fake_lucy):
    return Harness(fake_lucy.base_url, fake_lucy.admin_token, fake_lucy)

@pytest.fixture
def app_settings():
    return AppSettings("http://127.0.0.1:{elsewhere.server_address[1]}", "my-real-app-admin-token")

async def test_through_a_harness(harness):
    async with harness.fake.client() as http:
        assert (await http.post("/api/agent-memory/v1/recall", json={{"query": "x"}})).status_code == 200

def test_with_an_applications_settings(app_settings):
    assert app_settings.admin_token
"""
        )
        dumps = f"--lucy-dump-on-failure={tmp_path}"
        result = pytester.runpytest("-p", "no:randomly", "--lucy-strict", dumps)
    finally:
        elsewhere.shutdown()
        elsewhere.server_close()
        thread.join()
    result.assert_outcomes(passed=2)
    assert seen == ["/healthz None"]  # asked whether a fake-lucy answers there, without the token
    assert list(tmp_path.iterdir()) == []


def test_two_tests_whose_names_meet_in_a_file_name_get_a_dump_each(
    pytester: pytest.Pytester, tmp_path
) -> None:
    """``test_d/test_b.py::test_x`` and ``test_d_test_b.py::test_x`` are both
    ``test_d_test_b.py__test_x``: the second dumped ends with its id's digest, and never writes over
    the first."""
    failing = HEADER + "\nasync def test_x(fake_lucy):\n    assert False\n"
    pytester.mkpydir("test_d")
    pytester.path.joinpath("test_d", "test_b.py").write_text(failing, encoding="utf-8")
    pytester.path.joinpath("test_d_test_b.py").write_text(failing, encoding="utf-8")
    result = pytester.runpytest("-p", "no:randomly", f"--lucy-dump-on-failure={tmp_path}")
    result.assert_outcomes(failed=2)
    tests = sorted(json.loads(path.read_text(encoding="utf-8"))["test"] for path in tmp_path.iterdir())
    assert tests == ["test_d/test_b.py::test_x", "test_d_test_b.py::test_x"]


def test_the_options_are_one_group_named_in_the_help(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["fake-lucy (Lucy Agent Memory fake):"])
    assert "fake_lucy:" not in result.stdout.str()
