"""Findings (SPEC 3.8): a deliberately naive client, written here with plain httpx, breaks each client
rule of the Lucy README once; the fake records exactly that finding, pointing at the requests that
show it. Clients that keep the rules (waiting on the fake's clock instead of sleeping) produce none.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from fake_lucy.http import control
from fake_lucy.http.pipeline import V1Pipeline
from fake_lucy.store.findings import polls_of, with_poll
from fake_lucy.testing import FakeAdmin, InProcessFake
from tests.helpers import PROJECT, V1

pytestmark = pytest.mark.anyio

PROPOSAL = {
    "kind": "decision",
    "content": "We deploy on Fridays only with a rollback plan.",
    "scope": PROJECT,
}


class NaiveClient:
    """A client that knows nothing of the rules: it sends what it is told, when it is told."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http
        self.request_ids: list[str] = []

    def _seen(self, response: httpx.Response) -> httpx.Response:
        self.request_ids.append(response.headers["lucy-request-id"])
        return response

    async def recall(self, query: str = "deploy", **headers: str) -> httpx.Response:
        return self._seen(await self.http.post(V1 + "/recall", json={"query": query}, headers=headers))

    async def propose(self, key: str, body: dict[str, Any] | None = None, **headers: str) -> httpx.Response:
        raw = json.dumps(PROPOSAL if body is None else body).encode()
        response = await self.http.post(
            V1 + "/proposals",
            content=raw,
            headers={"Idempotency-Key": key, "Content-Type": "application/json", **headers},
        )
        return self._seen(response)

    async def status(self, proposal_id: str, **headers: str) -> httpx.Response:
        return self._seen(await self.http.get(f"{V1}/proposals/{proposal_id}", headers=headers))


@pytest.fixture
async def naive(fake):
    async with fake.client() as http:
        yield NaiveClient(http)


async def _findings(admin) -> list[tuple[str, list[str]]]:
    return [(item["code"], item["request_ids"]) for item in await admin.findings()]


async def test_a_recall_repeated_after_an_injected_503_is_recall_retried(naive, admin) -> None:
    await admin.add_fault("recall", 503)
    assert (await naive.recall()).status_code == 503
    assert (await naive.recall()).status_code == 200
    assert await _findings(admin) == [("recall_retried", naive.request_ids)]


async def test_the_same_proposal_under_a_new_key_after_a_503_is_propose_retry_new_key(naive, admin) -> None:
    await admin.add_fault("propose", 503)
    assert (await naive.propose("naive-key-1")).status_code == 503
    assert (await naive.propose("naive-key-2")).status_code == 201
    assert await _findings(admin) == [("propose_retry_new_key", naive.request_ids)]


async def test_a_propose_repeated_after_a_4xx_is_propose_retry_not_retryable(naive, admin) -> None:
    invalid = {**PROPOSAL, "importance": 99}
    assert (await naive.propose("naive-key", invalid)).status_code == 422
    assert (await naive.propose("naive-key", invalid)).status_code == 422
    assert await _findings(admin) == [("propose_retry_not_retryable", naive.request_ids)]


async def test_a_propose_repeated_after_409_idempotency_key_in_use_is_no_finding(naive, admin) -> None:
    """The one 4xx a client repeats with the same key and body (SPEC 3.8): the key's first request
    is held in flight (an ``in_flight`` fault, 500 ms of real time by design), the same propose
    meets 409 twice meanwhile, and once the first is answered a repeat is its replay."""
    await admin.add_fault("propose", 503, phase="in_flight", hold_ms=500)
    held: list[httpx.Response] = []

    async def first() -> None:
        held.append(await naive.propose("held-key"))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(first)
        with anyio.fail_after(10):
            while await admin.faults():  # the marker is committed together with taking the fault
                await anyio.lowlevel.checkpoint()
        conflicts = [await naive.propose("held-key") for _ in range(2)]
        assert not held, "the first request was still held"
    assert [(r.status_code, r.json()["code"]) for r in conflicts] == [(409, "idempotency_key_in_use")] * 2
    assert held[0].status_code == 201
    replay = await naive.propose("held-key")
    assert (replay.status_code, replay.headers["Idempotent-Replayed"]) == (201, "true")
    assert await _findings(admin) == []


async def test_a_fourth_attempt_of_one_key_is_too_many_retries(naive, admin) -> None:
    await admin.add_fault("propose", 503, count=4)
    statuses = [(await naive.propose("naive-key")).status_code for _ in range(4)]
    assert statuses == [503, 503, 503, 503]
    assert await _findings(admin) == [("too_many_retries", naive.request_ids)]


async def test_a_retry_that_ignores_retry_after_2_is_retry_before_retry_after(naive, admin) -> None:
    await admin.add_fault("propose", 429, retry_after=2)
    first = await naive.propose("naive-key")
    assert (first.status_code, first.headers["retry-after"]) == (429, "2")
    assert (await naive.propose("naive-key")).status_code == 201
    assert await _findings(admin) == [("retry_before_retry_after", naive.request_ids)]


async def test_a_retry_after_retry_after_120_is_retry_after_over_limit(naive, admin) -> None:
    await admin.add_fault("propose", 429, retry_after=120)
    assert (await naive.propose("naive-key")).status_code == 429
    assert (await naive.propose("naive-key")).status_code == 201
    assert await _findings(admin) == [("retry_after_over_limit", naive.request_ids)]


async def test_forty_status_polls_in_a_tight_loop_are_status_polling_unbounded(naive, admin) -> None:
    proposal_id = (await naive.propose("naive-key")).json()["proposal"]["id"]
    for _ in range(40):
        assert (await naive.status(proposal_id)).status_code == 200
    polls = naive.request_ids[1:]
    [(code, request_ids)] = await _findings(admin)
    assert code == "status_polling_unbounded"
    # Ten polls whose intervals never grew; only if this machine stalled for over 100 ms between two
    # polls did the intervals "grow", and then the 31st poll within 60 s is the one that shows it.
    assert request_ids in (polls[:10], polls[:31])


async def test_polls_after_the_series_was_reported_are_still_judged_for_retries(naive, admin) -> None:
    """Once a proposal's polling was reported, a poll answered 200 without a retry header changes
    nothing; a retry header, or a poll after a failed one, is still a finding."""
    proposal_id = (await naive.propose("naive-key")).json()["proposal"]["id"]
    for _ in range(45):
        assert (await naive.status(proposal_id)).status_code == 200
    assert [code for code, _ in await _findings(admin)] == ["status_polling_unbounded"]
    assert (await naive.status(proposal_id, **{"Lucy-Retry-Attempt": "1"})).status_code == 200
    header = naive.request_ids[-1]
    await admin.add_fault("proposal_status", 503, retry_after=0)
    assert (await naive.status(proposal_id)).status_code == 503
    assert (await naive.status(proposal_id)).status_code == 200
    failed, retried = naive.request_ids[-2:]
    assert (await naive.status(proposal_id)).status_code == 200
    assert (await _findings(admin))[1:] == [
        ("status_retried", [header]),
        ("status_retried", [failed, retried]),
    ]


async def test_a_different_body_under_a_used_key_is_payload_changed_for_key(naive, admin) -> None:
    assert (await naive.propose("naive-key")).status_code == 201
    changed = {**PROPOSAL, "content": "We deploy every day."}
    assert (await naive.propose("naive-key", changed)).status_code == 422
    assert await _findings(admin) == [("payload_changed_for_key", naive.request_ids)]


async def test_a_status_repeated_after_a_dropped_connection_is_status_retried(fake, naive, admin) -> None:
    proposal_id = (await naive.propose("naive-key")).json()["proposal"]["id"]
    await admin.add_fault("proposal_status", 503, phase="after_commit", drop_connection=True)
    with pytest.raises(httpx.RemoteProtocolError):
        await naive.status(proposal_id)
    assert (await naive.status(proposal_id)).status_code == 200
    [dropped] = [row for row in await admin.requests(operation="proposal_status") if row["dropped"]]
    assert await _findings(admin) == [("status_retried", [dropped["request_id"], naive.request_ids[-1]])]


async def test_a_recall_sent_with_a_retry_attempt_header_is_recall_retried(naive, admin) -> None:
    assert (await naive.recall(**{"Lucy-Retry-Attempt": "1"})).status_code == 200
    assert await _findings(admin) == [("recall_retried", naive.request_ids)]


async def test_a_propose_with_retry_attempt_3_is_too_many_retries(naive, admin) -> None:
    assert (await naive.propose("naive-key", **{"Lucy-Retry-Attempt": "3"})).status_code == 201
    assert await _findings(admin) == [("too_many_retries", naive.request_ids)]


# -- a client that keeps the rules: nothing ------------------------------------------------------


async def test_a_retry_that_waits_out_retry_after_on_the_fake_clock_is_no_finding(naive, admin) -> None:
    await admin.add_fault("propose", 429, retry_after=2)
    assert (await naive.propose("polite-key", **{"Lucy-Retry-Attempt": "0"})).status_code == 429
    await admin.advance_clock(2)
    assert (await naive.propose("polite-key", **{"Lucy-Retry-Attempt": "1"})).status_code == 201
    assert await _findings(admin) == []


async def test_a_key_repeated_once_its_failures_are_forgotten_on_the_fake_clock_is_no_finding(
    naive, admin
) -> None:
    """Three attempts answered 503, then the key again 10 minutes later by the fake's clock (as by
    real time): a new start, not a fourth attempt. A minute sooner it is one."""
    await admin.add_fault("propose", 503, retry_after=0, count=6)
    for n in range(3):
        assert (await naive.propose("polite-key", **{"Lucy-Retry-Attempt": str(n)})).status_code == 503
    await admin.advance_clock(601)
    assert (await naive.propose("polite-key")).status_code == 503
    assert await _findings(admin) == []
    for n in (1, 2):
        assert (await naive.propose("polite-key", **{"Lucy-Retry-Attempt": str(n)})).status_code == 503
    await admin.advance_clock(540)
    assert (await naive.propose("polite-key")).status_code == 201
    assert [code for code, _ in await _findings(admin)] == ["too_many_retries"]


@pytest.mark.parametrize(
    ("later", "found"),
    [(599.9, ["propose_retry_new_key"]), (600.1, [])],
    ids=["just-under-10-minutes", "just-over-10-minutes"],
)
async def test_the_same_proposal_under_a_new_key_is_propose_retry_new_key_within_10_minutes_only(
    naive, admin, later, found
) -> None:
    """SPEC 3.8: a new key for the same body within 10 minutes after a 503 risks a duplicate; the
    fake's clock (frozen, then advanced) is the time that passed, not the real time."""
    await admin.set_clock(frozen=True)
    await admin.add_fault("propose", 503)
    assert (await naive.propose("first-key")).status_code == 503
    await admin.advance_clock(later)
    assert (await naive.propose("second-key")).status_code == 201
    assert [code for code, _ in await _findings(admin)] == found


async def test_a_retry_after_retry_after_0_is_no_finding(naive, admin) -> None:
    await admin.add_fault("propose", 503, retry_after=0, count=2)
    statuses = [
        (await naive.propose("polite-key", **{"Lucy-Retry-Attempt": str(n)})).status_code for n in range(3)
    ]
    assert statuses == [503, 503, 201]
    assert await _findings(admin) == []


async def test_a_retry_waiting_1_9_of_2_seconds_is_within_the_tolerance_but_1_8_is_not(naive, admin) -> None:
    await admin.set_clock(frozen=True)
    await admin.add_fault("propose", 429, retry_after=2, count=2)
    await naive.propose("key-a")
    await admin.advance_clock(1.95)
    await naive.propose("key-a")  # answered 429 again: this attempt was in time
    assert await _findings(admin) == []
    await admin.advance_clock(1.8)
    await naive.propose("key-a")
    assert await _findings(admin) == [("retry_before_retry_after", naive.request_ids[1:])]


# The windows run from the answer, not from the arrival: a slow error (a fault's delay_ms, a 504
# after a long wait) must not count its own latency as the client's wait. The clock runs here, so
# it moves by the delay too; the delay is 500 ms of real time, and each test leaves 300 ms for the
# steps between the answer and the repeat.


@pytest.mark.parametrize("operation", ["recall", "proposal_status"])
async def test_the_retry_window_starts_when_a_slow_error_was_answered(naive, admin, operation) -> None:
    await admin.add_fault(operation, 504, delay_ms=500)
    send = naive.recall if operation == "recall" else lambda: naive.status("prop_unknown")
    assert (await send()).status_code == 504
    await admin.advance_clock(9.7)  # 9.7 s (and a few ms) after the answer; 10.2 s after the arrival
    await send()
    code = "recall_retried" if operation == "recall" else "status_retried"
    assert await _findings(admin) == [(code, naive.request_ids)]


async def test_retry_after_is_counted_from_a_slow_answer(naive, admin) -> None:
    await admin.add_fault("propose", 429, retry_after=2, delay_ms=500)
    assert (await naive.propose("slow-key")).status_code == 429
    await admin.advance_clock(1.6)  # 1.6 s (and a few ms) after the answer, 2.1 s after the arrival
    await naive.propose("slow-key", **{"Lucy-Retry-Attempt": "1"})
    assert await _findings(admin) == [("retry_before_retry_after", naive.request_ids)]


@pytest.mark.parametrize("operation", ["recall", "proposal_status", "propose", "propose, one key"])
async def test_the_same_request_sent_beside_another_not_after_its_failure_is_no_finding(
    fake, naive, admin, operation, monkeypatch
) -> None:
    """A repeat is a request sent once an earlier one was answered. The first request sent here
    takes a delayed 503 (its answer, and its judging, come once the second is answered: the delay
    waits on an event, not on wall time); the second, sent while the first is still unanswered,
    takes a quick one and is judged first: neither is the other's retry (the first was called the
    retry of the second, "sent again -0.1 s after it was answered")."""
    released = anyio.Event()

    async def delayed_until_released(self: V1Pipeline, delay_ms: int) -> None:
        await released.wait()

    monkeypatch.setattr(V1Pipeline, "_delay", delayed_until_released)
    proposal_id = ""
    if operation == "proposal_status":
        proposal_id = (await naive.propose("the-proposal")).json()["proposal"]["id"]
    faulted = operation.partition(",")[0]
    await admin.add_fault(faulted, 503, delay_ms=200)
    await admin.add_fault(faulted, 503, retry_after=5)  # the first, judged second, did not wait 5 s

    async def send(n: int) -> httpx.Response:
        if operation == "recall":
            return await naive.recall()
        if operation == "proposal_status":
            return await naive.status(proposal_id)
        if operation == "propose":
            return await naive.propose(f"agent-{n}")  # two agents, one proposal, a key each
        return await naive.propose("one-key")  # one proposal sent twice at once, not retried

    async with fake.admin.watch() as stream, anyio.create_task_group() as tasks:
        first: list[httpx.Response] = []
        tasks.start_soon(lambda: _into(first, send(1)))
        await stream.wait_for("fault.fired", timeout=10)  # the first is in its delay, unanswered
        second = await send(2)
        released.set()
    assert [first[0].status_code, second.status_code] == [503, 503]
    assert await _findings(admin) == []


async def _into(answers: list[httpx.Response], answer: Any) -> None:
    answers.append(await answer)


async def test_a_recall_repeated_after_the_10_second_window_is_no_finding(naive, admin) -> None:
    await admin.add_fault("recall", 503)
    assert (await naive.recall()).status_code == 503
    await admin.advance_clock(10.5)
    assert (await naive.recall()).status_code == 200
    assert await _findings(admin) == []


async def test_the_same_recall_after_a_success_is_no_finding(naive, admin) -> None:
    for _ in range(3):
        assert (await naive.recall()).status_code == 200
    assert await _findings(admin) == []


async def test_status_polls_with_growing_intervals_are_no_finding(naive, admin) -> None:
    proposal_id = (await naive.propose("polite-key")).json()["proposal"]["id"]
    await admin.set_clock(frozen=True)
    for poll in range(15):
        assert (await naive.status(proposal_id)).status_code == 200
        await admin.advance_clock(min(30.0, 2.0**poll))
    assert await _findings(admin) == []


async def test_thirty_one_polls_within_a_minute_are_status_polling_unbounded_though_they_back_off(
    naive, admin
) -> None:
    proposal_id = (await naive.propose("polite-key")).json()["proposal"]["id"]
    await admin.set_clock(frozen=True)
    for poll in range(1, 32):  # the n-th interval is 0.12 n s: each grows, all 31 within 55.8 s
        assert (await naive.status(proposal_id)).status_code == 200
        await admin.advance_clock(0.12 * poll)
    polls = naive.request_ids[1:]
    for _ in range(5):  # reported once
        assert (await naive.status(proposal_id)).status_code == 200
    [(code, request_ids)] = await _findings(admin)
    assert (code, request_ids) == ("status_polling_unbounded", polls)
    [finding] = await admin.findings()
    assert finding["detail"] == "31 status requests for one proposal within 55.8 s"


async def test_the_polls_a_finding_names_do_not_depend_on_the_journals_bound(tmp_path) -> None:
    """Each series keeps its own newest polls: a small journal, or many proposals polled at once,
    takes none of them away."""
    async with InProcessFake.start(tmp_path, journal_size=5) as small, small.client() as http:
        naive = NaiveClient(http)
        proposals = [(await naive.propose(f"key-{n}")).json()["proposal"]["id"] for n in range(3)]
        await small.admin.set_clock(frozen=True)
        for poll in range(1, 32):  # growing intervals, 31 polls of each proposal within 55.8 s
            for proposal_id in proposals:
                assert (await naive.status(proposal_id)).status_code == 200
            await small.admin.advance_clock(0.12 * poll)
        found = [(item["code"], item["request_ids"]) for item in await small.admin.findings()]
    polls = naive.request_ids[3:]
    assert found == [("status_polling_unbounded", polls[n::3]) for n in range(3)]


async def test_a_pause_of_over_a_minute_starts_a_new_series_of_polls(naive, admin) -> None:
    proposal_id = (await naive.propose("naive-key")).json()["proposal"]["id"]
    await admin.set_clock(frozen=True)
    for _ in range(9):
        assert (await naive.status(proposal_id)).status_code == 200
    await admin.advance_clock(61)
    for _ in range(9):
        assert (await naive.status(proposal_id)).status_code == 200
    assert await _findings(admin) == []
    assert (await naive.status(proposal_id)).status_code == 200
    assert await _findings(admin) == [("status_polling_unbounded", naive.request_ids[-10:])]


@pytest.mark.parametrize("keep", [1, 2, 31])
def test_a_series_keeps_its_newest_polls_oldest_first(keep: int) -> None:
    recent = ""
    for n in range(40):
        recent = with_poll(recent, f"req_{n}", 1000 + n, 2000 + n, keep=keep)
        expected = [(f"req_{m}", 1000 + m, 2000 + m) for m in range(max(0, n + 1 - keep), n + 1)]
        assert polls_of(recent) == expected
    assert polls_of("") == []


async def test_a_new_proposal_after_a_success_is_no_finding(naive, admin) -> None:
    assert (await naive.propose("key-1")).status_code == 201
    assert (await naive.propose("key-2", {**PROPOSAL, "content": "Another decision."})).status_code == 201
    assert (await naive.propose("key-1")).status_code == 201  # a replay
    assert await _findings(admin) == []


async def test_findings_are_filtered_by_code_and_credential_and_cleared_by_reset(fake, naive, admin) -> None:
    await naive.recall(**{"Lucy-Retry-Attempt": "1"})
    await naive.propose("naive-key", **{"Lucy-Retry-Attempt": "3"})
    assert [item["code"] for item in await admin.findings(code="recall_retried")] == ["recall_retried"]
    assert len(await admin.findings(credential_id="cred_dev_default")) == 2
    assert await admin.findings(credential_id="cred_someone_else") == []
    [finding] = await admin.findings(code="too_many_retries")
    assert finding["credential_id"] == "cred_dev_default"
    assert finding["finding_id"].startswith("fnd_")
    assert "Lucy-Retry-Attempt: 3" in finding["detail"]
    await admin.reset()
    assert await admin.findings() == []


async def test_an_unknown_finding_code_filter_is_a_422_with_its_pointer(api) -> None:
    response = await api.get(
        "/_fake/findings", params={"code": "rude"}, headers={"Authorization": "Bearer fake-admin-token"}
    )
    assert response.status_code == 422
    assert response.json()["details"]["errors"][0]["pointer"] == "/code"


async def test_a_findings_cursor_sees_what_comes_after_another_tenants_reset(
    fake, admin, monkeypatch
) -> None:
    """A tenant's reset deletes its findings, the newest among them: the next finding must not
    take a number below a cursor the server admin already holds (it did, and the page skipped it)."""
    monkeypatch.setattr(control, "PAGE_SIZE", 2)  # pages of two findings
    other = await admin.create_tenant("resetting")
    retried = {"Lucy-Retry-Attempt": "1"}  # a recall_retried finding each
    async with fake.client() as dev_http, fake.client(other["credential"]["token"]) as other_http:
        dev, theirs = NaiveClient(dev_http), NaiveClient(other_http)
        await dev.recall("first", **retried)
        await theirs.recall("theirs", **retried)
        await theirs.recall("theirs again", **retried)
        page = await admin.call("GET", "/findings")
        assert [item["request_ids"] for item in page["items"]] == [dev.request_ids, theirs.request_ids[:1]]
        async with fake.client(other["admin_token"]) as http:
            await FakeAdmin(http, tenant="resetting").reset()
        await dev.recall("later", **retried)
        after = await admin.call("GET", "/findings", cursor=page["next_cursor"])
    assert [item["request_ids"] for item in after["items"]] == [dev.request_ids[-1:]]
