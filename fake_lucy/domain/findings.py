"""Findings (SPEC 3.8): the fake judges each credential's traffic against the client rules of the
Lucy README and records what a well-behaved client never does.

The rules, as the README states them: retry only propose, only on 429, 502, 503 or 504, at most
twice, with the same body and key; honour ``Retry-After`` up to 60 s; never retry recall or status;
poll status with a bound and a backoff.

``observe`` is called once per journaled v1 request, in the transaction that writes its journal
row, with what the request was and how it was answered. What it must remember to judge the next
request is small and written only when something failed: the last failed answer to a request body
and to an idempotency key (``client_watch``, a few minutes), plus the recent polls of a proposal.
A credential whose recalls and proposes succeed costs one primary-key lookup per request.

**Time.** A client honours a wait either in real time or, in a test, on the fake's clock (an
injected ``sleep`` that advances it), so the time between two requests is the greater of the real
time and the server-clock time that passed. A retry "before Retry-After" is measured from the real
moment the previous answer was sent, with 100 ms of tolerance.

**Hook.** ``observe`` returns the findings it recorded, inside the caller's transaction: a
publisher of events (SPEC 3.7, ``finding``) emits them there, in commit order.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import sqlite3
from dataclasses import dataclass
from typing import Any

from fake_lucy.store import findings as store
from fake_lucy.store.findings import FindingRecord, SeriesRecord, WatchRecord
from fake_lucy.store.queries import Page

__all__ = [
    "CODES",
    "FindingRecord",
    "Observation",
    "finding_dict",
    "findings",
    "observe",
    "poll_is_settled",
]

CODES = (
    "recall_retried",
    "status_retried",
    "propose_retry_new_key",
    "propose_retry_not_retryable",
    "too_many_retries",
    "retry_before_retry_after",
    "retry_after_over_limit",
    "payload_changed_for_key",
    "status_polling_unbounded",
)

SECOND = 1_000_000  # µs
RETRY_WINDOW_US = 10 * SECOND  # a recall or status repeated this soon after a failure is a retry
NEW_KEY_WINDOW_US = 600 * SECOND  # the same propose body under a new key this soon after a failure
WATCH_US = 600 * SECOND  # how long a failed answer is remembered (at least)
RETRY_AFTER_TOLERANCE_US = 100_000
MAX_RETRY_AFTER_US = 60 * SECOND  # the README: a Retry-After over 60 s is not waited for
MAX_ATTEMPTS = 3  # the first attempt and two automatic retries
MAX_RETRY_ATTEMPT = 2  # the highest Lucy-Retry-Attempt a client sends
POLL_WINDOW_US = 60 * SECOND
MAX_POLLS_IN_WINDOW = 30
FLAT_POLLS = 10  # this many polls of one proposal whose intervals never grew: no backoff
POLL_GROWTH = 1.1  # an interval grew when it is at least 10 % longer than the one before …
POLL_GROWTH_MIN_US = 100_000  # … and at least 100 ms longer
MAX_CHAIN = 20  # the attempts of one key remembered (too_many_retries is recorded at the 4th)

_RETRYABLE_CONFLICT = "idempotency_key_in_use"


@dataclass(slots=True)  # not frozen: one per v1 request, and a frozen one costs ~2 µs more to build
class Observation:
    """One journaled v1 request and its answer.

    ``subject``: the sha256 of the raw body (recall, propose) or the proposal id (status);
    ``body_sha256`` the sha256 of the raw body.
    ``status`` is None when the connection was dropped; ``code`` is the problem code of an error.
    ``arrived_us`` and ``answered_us`` are real time, ``clock_us`` and ``answered_clock_us`` the
    server clock (the tenant's) at arrival and at the answer. A wait before a repeat counts from the
    answer: a slow error (a fault's ``delay_ms``) is no time the client waited.
    """

    request_id: str
    tenant_id: str
    credential_id: str
    operation: str
    subject: str
    idempotency_key: str | None
    retry_attempt: int
    status: int | None
    code: str | None
    retry_after: float | None
    arrived_us: int
    answered_us: int
    clock_us: int
    answered_clock_us: int
    body_sha256: str


def _retryable_failure(status: int | None) -> bool:
    """A 429, a 5xx or a dropped connection (``None``)."""
    return status is None or status == 429 or status >= 500


def _chain_goes_on(status: int | None, code: str | None) -> bool:
    """An answer after which the same key may be sent again: it is not a final answer."""
    return _retryable_failure(status) or code == _RETRYABLE_CONFLICT


def _not_retryable(status: int | None, code: str | None) -> bool:
    """A 4xx other than 429 and 409 ``idempotency_key_in_use``."""
    return status is not None and 400 <= status < 500 and status != 429 and code != _RETRYABLE_CONFLICT


def _succeeded(status: int | None) -> bool:
    return status is not None and status < 300


def _answer(status: int | None, code: str | None) -> str:
    if status is None:
        return "a dropped connection"
    return f"{status} {code}" if code else str(status)


@dataclass(frozen=True, slots=True)
class _Answered:
    """An earlier request of the same kind and when it was answered."""

    request_id: str
    real_us: int
    clock_us: int
    status: int | None
    code: str | None


class _Judge:
    """Judges one observation; ``found`` collects the findings it recorded."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        observation: Observation,
        *,
        at: str,
        id_seed: int | None,
        watching: bool,
    ) -> None:
        self.conn = conn
        self.observation = observation
        self.at = at
        self.id_seed = id_seed
        self.watching = watching
        self.found: list[FindingRecord] = []

    def watched(self, wanted: list[tuple[str, str]]) -> dict[tuple[str, str], WatchRecord]:
        """The live watch rows of this credential among ``wanted``."""
        if not self.watching:
            return {}
        observation = self.observation
        return store.watch_rows(self.conn, observation.credential_id, wanted, now_us=observation.arrived_us)

    def since(self, real_us: int, clock_us: int) -> int:
        """µs from an earlier moment to this request's arrival: the greater of real and server time."""
        observation = self.observation
        return max(observation.arrived_us - real_us, observation.clock_us - clock_us)

    def sent_after(self, answered_real_us: int) -> bool:
        """Did this request arrive once an earlier one was answered (in real time: the fake clock
        does not order what a client sends)? Requests are judged in commit order, not in the order
        they came: one sent beside another (agents fanning out, two agents on one credential) is
        never its repeat, whichever was answered first."""
        return self.observation.arrived_us >= answered_real_us

    def add(self, code: str, subject: str, earlier: tuple[str, ...], detail: str) -> None:
        observation = self.observation
        seq = store.next_finding_seq(self.conn)
        if self.id_seed is None:
            finding_id = "fnd_" + secrets.token_urlsafe(16)
        else:  # deterministic, without taking from the id sequence the API's ids come from
            digest = hashlib.sha256(f"{self.id_seed}:fnd:{seq}".encode()).digest()
            finding_id = "fnd_" + base64.urlsafe_b64encode(digest).decode("ascii")[:22]
        record = FindingRecord(
            seq=seq,
            id=finding_id,
            tenant_id=observation.tenant_id,
            credential_id=observation.credential_id,
            code=code,
            subject=subject,
            request_ids=tuple(dict.fromkeys((*earlier, observation.request_id))),
            at=self.at,
            detail=detail,
        )
        store.add_finding(self.conn, record)
        self.found.append(record)

    def forgotten(self, row: WatchRecord) -> bool:
        """Is a remembered failure past the time it is remembered, by real time or by the server
        clock, whichever passed more (the store drops it by real time alone)."""
        return self.since(row.answered_us, row.clock_us) > row.expires_us - row.answered_us

    def watch_row(
        self, kind: str, subject: str, *, chain: tuple[str, ...], reported: frozenset[str]
    ) -> WatchRecord:
        """The row that remembers this request's failed answer."""
        observation = self.observation
        retry_after_us = int((observation.retry_after or 0) * SECOND)
        return WatchRecord(
            credential_id=observation.credential_id,
            kind=kind,
            subject=subject,
            tenant_id=observation.tenant_id,
            key=observation.idempotency_key,
            body_sha256=observation.body_sha256,
            request_ids=(*chain, observation.request_id)[-MAX_CHAIN:],
            status=observation.status,
            code=observation.code,
            retry_after=observation.retry_after,
            answered_us=observation.answered_us,
            clock_us=observation.answered_clock_us,
            reported=reported,
            expires_us=observation.answered_us + max(WATCH_US, retry_after_us + 60 * SECOND),
        )

    # -- recall and proposal status: never retried ---------------------------------------------

    def repeat(self, previous: _Answered | None, *, code: str, what: str) -> None:
        """``recall_retried`` / ``status_retried``: a retry header, or the same request again soon
        after a 429, 5xx or dropped connection."""
        observation = self.observation
        if previous is not None and _retryable_failure(previous.status) and self.sent_after(previous.real_us):
            elapsed = self.since(previous.real_us, previous.clock_us)
            if elapsed <= RETRY_WINDOW_US:
                self.add(
                    code,
                    observation.subject,
                    (previous.request_id,),
                    f"a {what} was sent again {elapsed / SECOND:.1f} s after it was answered"
                    f" {_answer(previous.status, previous.code)}; a {what} is never retried (the lost"
                    " answer may have been charged, and a repeat charges again)",
                )
                return
        if observation.retry_attempt >= 1:
            self.add(
                code,
                observation.subject,
                (),
                f"a {what} carried Lucy-Retry-Attempt: {observation.retry_attempt}; a {what} is never"
                " retried automatically",
            )

    def recall(self) -> None:
        observation = self.observation
        subject = observation.subject
        rows = self.watched([("recall", subject)])
        row = rows.get(("recall", subject))
        previous = None
        if row is not None:
            previous = _Answered(row.request_ids[-1], row.answered_us, row.clock_us, row.status, row.code)
        self.repeat(previous, code="recall_retried", what="recall")
        if _retryable_failure(observation.status):
            store.put_watch(self.conn, self.watch_row("recall", subject, chain=(), reported=frozenset()))
        elif row is not None:
            store.drop_watch(self.conn, observation.credential_id, "recall", subject)

    def status(self) -> None:
        observation = self.observation
        credential, proposal_id = observation.credential_id, observation.subject
        series = store.poll_series(self.conn, credential, proposal_id)
        last = None
        if series is not None and _retryable_failure(series.last_status):  # the only answer repeat() reads
            answered_us, answered_clock_us = series.last_answered_us, series.last_answered_clock_us
            if answered_us is None or answered_clock_us is None:  # a row from before they were kept
                answered_us, answered_clock_us = series.last_arrived_us, series.last_clock_us
            last = _Answered(series.last_request_id, answered_us, answered_clock_us, series.last_status, None)
        self.repeat(last, code="status_retried", what="proposal status")
        if (
            series is not None
            and series.reported
            and not _retryable_failure(observation.status)
            and not _retryable_failure(series.last_status)
        ):
            return  # reported, and no failure to remember: the row already says all that is needed
        store.put_poll_series(self.conn, self.polling(series), new=series is None)

    def polling(self, series: SeriesRecord | None) -> SeriesRecord:
        """``status_polling_unbounded``: this poll joins its proposal's series (a pause of over a
        minute starts a new one); returns the series with it. Once the proposal was reported, a
        poll only updates the series row."""
        observation = self.observation
        interval = None
        if series is not None:
            interval = self.since(series.last_arrived_us, series.last_clock_us)
        reported = series is not None and series.reported
        if series is None or interval is None or interval > POLL_WINDOW_US:
            polls, grew, interval, recent = 1, False, None, ""
        else:
            polls, recent = series.polls + 1, series.recent
            previous = series.last_interval_us
            grew = series.grew or (
                previous is not None
                and interval >= previous * POLL_GROWTH
                and interval - previous >= POLL_GROWTH_MIN_US
            )
        if not reported:
            recent = store.with_poll(
                recent,
                observation.request_id,
                observation.arrived_us,
                observation.clock_us,
                keep=MAX_POLLS_IN_WINDOW + 1,
            )
            reported = self.unbounded(observation.subject, polls, grew, recent)
            if reported:
                recent = ""  # a proposal is reported once: its polls are not needed again
        return SeriesRecord(
            credential_id=observation.credential_id,
            proposal_id=observation.subject,
            polls=polls,
            grew=grew,
            reported=reported,
            last_request_id=observation.request_id,
            last_status=observation.status,
            last_arrived_us=observation.arrived_us,
            last_clock_us=observation.clock_us,
            last_interval_us=interval,
            recent=recent,
            last_answered_us=observation.answered_us,
            last_answered_clock_us=observation.answered_clock_us,
        )

    def unbounded(self, proposal_id: str, polls: int, grew: bool, recent: str) -> bool:
        """Judge the series after its ``polls``-th poll (``recent``: its newest polls, this one
        last); True when it was reported (once a proposal)."""
        detail, shown = "", 0
        newest = store.polls_of(recent) if polls > MAX_POLLS_IN_WINDOW else []
        if len(newest) > MAX_POLLS_IN_WINDOW:  # (a file from before ``recent`` may hold fewer)
            _, real_us, clock_us = newest[-(MAX_POLLS_IN_WINDOW + 1)]
            if self.since(real_us, clock_us) <= POLL_WINDOW_US:
                shown = MAX_POLLS_IN_WINDOW + 1
                span = self.since(real_us, clock_us) / SECOND
                detail = f"{shown} status requests for one proposal within {span:.1f} s"
        if not detail and polls == FLAT_POLLS and not grew:
            shown = FLAT_POLLS
            detail = (
                f"{FLAT_POLLS} status requests for one proposal whose intervals never grew;"
                " poll with a bound and a backoff"
            )
        if not detail:
            return False
        ids = tuple(request_id for request_id, _, _ in store.polls_of(recent)[-shown:])
        self.add("status_polling_unbounded", proposal_id, ids, detail)
        return True

    # -- propose: retried only with the same key and body, only when allowed, not too soon -------

    def propose(self) -> None:
        observation = self.observation
        key, body = observation.idempotency_key, observation.subject
        wanted = [("propose", body)] if key is None else [("propose", body), ("key", key)]
        rows = self.watched(wanted)
        body_row = rows.get(("propose", body))
        key_row = None if key is None else rows.get(("key", key))
        if key_row is not None and self.forgotten(key_row):
            key_row = None  # a repeat after the key's failures were forgotten starts a new chain
        if key is not None:
            self.payload_changed(key)
            if body_row is not None:
                self.new_key(key, body_row)
        reported = self.key_retry(key, key_row) if key is not None else frozenset()
        failed = _retryable_failure(observation.status)
        if failed:
            store.put_watch(self.conn, self.watch_row("propose", body, chain=(), reported=frozenset()))
        elif body_row is not None and _succeeded(observation.status):
            store.drop_watch(self.conn, observation.credential_id, "propose", body)
        if key is None:
            return
        if _succeeded(observation.status):
            if key_row is not None:
                store.drop_watch(self.conn, observation.credential_id, "key", key)
        elif _chain_goes_on(observation.status, observation.code) or _not_retryable(
            observation.status, observation.code
        ):
            chain: tuple[str, ...] = ()
            if key_row is not None and _chain_goes_on(key_row.status, key_row.code):
                chain = key_row.request_ids
            store.put_watch(self.conn, self.watch_row("key", key, chain=chain, reported=reported))

    def payload_changed(self, key: str) -> None:
        if self.observation.code != "idempotency_key_reused":
            return
        original = store.original_request_id(self.conn, self.observation.credential_id, key)
        self.add(
            "payload_changed_for_key",
            key,
            () if original is None else (original,),
            "a different body was sent under an Idempotency-Key already used; a changed payload needs"
            " a new key",
        )

    def new_key(self, key: str, body_row: WatchRecord) -> None:
        if body_row.key is None or body_row.key == key or not self.sent_after(body_row.answered_us):
            return
        if self.since(body_row.answered_us, body_row.clock_us) > NEW_KEY_WINDOW_US:
            return
        self.add(
            "propose_retry_new_key",
            self.observation.subject,
            body_row.request_ids[-1:],
            f"the same proposal was sent again under a new Idempotency-Key after"
            f" {_answer(body_row.status, body_row.code)}; a retry keeps its key, or the proposal may be"
            " created twice",
        )

    def key_retry(self, key: str, key_row: WatchRecord | None) -> frozenset[str]:
        """Another attempt of a key after its previous answer: was it allowed, and was it on time.
        Returns the codes recorded for the key's chain of attempts so far."""
        observation = self.observation
        reported: set[str] = set()
        chain = key_row
        if key_row is not None and not self.sent_after(key_row.answered_us):
            reported.update(key_row.reported)  # sent beside that attempt, not after it: no retry of it
            key_row = None
        if key_row is not None and _not_retryable(key_row.status, key_row.code):
            if key_row.body_sha256 == observation.body_sha256:
                self.add(
                    "propose_retry_not_retryable",
                    key,
                    key_row.request_ids[-1:],
                    f"a propose was repeated with the same key and body after"
                    f" {_answer(key_row.status, key_row.code)}; only 429, 502, 503 and 504 are retried",
                )
            key_row = None
        if key_row is not None:
            reported.update(key_row.reported)
            attempt = len(key_row.request_ids) + 1
            if attempt > MAX_ATTEMPTS and "too_many_retries" not in reported:
                self.add(
                    "too_many_retries",
                    key,
                    key_row.request_ids,
                    f"attempt {attempt} of one Idempotency-Key before a final answer; a client sends a"
                    f" key at most {MAX_ATTEMPTS} times (two retries)",
                )
                reported.add("too_many_retries")
            self.retry_after(key, key_row)
        if observation.retry_attempt > MAX_RETRY_ATTEMPT and "too_many_retries" not in reported:
            self.add(
                "too_many_retries",
                key,
                chain.request_ids if chain is not None else (),
                f"a propose carried Lucy-Retry-Attempt: {observation.retry_attempt}; a client retries a"
                f" key at most {MAX_RETRY_ATTEMPT} times",
            )
            reported.add("too_many_retries")
        return frozenset(reported)

    def retry_after(self, key: str, key_row: WatchRecord) -> None:
        if key_row.retry_after is None:
            return
        wait_us = round(key_row.retry_after * SECOND)
        waited_us = self.since(key_row.answered_us, key_row.clock_us)
        early = waited_us + RETRY_AFTER_TOLERANCE_US < wait_us
        if wait_us > MAX_RETRY_AFTER_US:
            if early or self.observation.retry_attempt >= 1:
                self.add(
                    "retry_after_over_limit",
                    key,
                    key_row.request_ids[-1:],
                    f"a propose was retried after Retry-After: {key_row.retry_after:g}; a Retry-After"
                    " over 60 s ends the automatic retries (the caller decides what to do)",
                )
        elif early:
            self.add(
                "retry_before_retry_after",
                key,
                key_row.request_ids[-1:],
                f"a propose was retried {waited_us / SECOND:.2f} s after an answer with Retry-After:"
                f" {key_row.retry_after:g}",
            )


def observe(
    conn: sqlite3.Connection,
    observation: Observation,
    *,
    at: str,
    id_seed: int | None,
    watching: bool = True,
) -> list[FindingRecord]:
    """Judge one request, inside its journal row's transaction; returns the findings recorded.

    ``at`` is the server time the findings carry.
    ``watching`` False says that the watch on failed answers is empty in this transaction
    (``server_state.in_transaction`` reads it in its statement): a recall or propose then has no
    earlier failure to look up.
    """
    judge = _Judge(conn, observation, at=at, id_seed=id_seed, watching=watching)
    if observation.operation == "proposal_status":
        judge.status()
    elif observation.operation == "recall":
        judge.recall()
    else:
        judge.propose()
    return judge.found


def poll_is_settled(*, series_settled: bool, status: int | None, retry_attempt: int) -> bool:
    """Whether judging this status poll would find nothing and write nothing, so ``observe`` may be
    skipped: its proposal's series was reported and last answered without a failure
    (``store.SETTLED_SERIES``, read in the request's state statement), and this poll is answered
    without one and carries no retry header. (``_Judge.status``: ``repeat`` has no failed answer to
    judge and no header; the series row already says all that is needed.)"""
    return series_settled and retry_attempt == 0 and not _retryable_failure(status)


def findings(
    conn: sqlite3.Connection,
    *,
    credential_id: str | None = None,
    code: str | None = None,
    tenant: str | None = None,
    after: int = 0,
    limit: int = 100,
) -> Page[FindingRecord]:
    """Recorded findings, oldest first; ``tenant`` limits them to one tenant's credentials."""
    return store.findings_page(
        conn, credential_id=credential_id, code=code, tenant=tenant, after=after, limit=limit
    )


def finding_dict(record: FindingRecord) -> dict[str, Any]:
    return {
        "finding_id": record.id,
        "code": record.code,
        "credential_id": record.credential_id,
        "request_ids": list(record.request_ids),
        "at": record.at,
        "detail": record.detail,
    }
