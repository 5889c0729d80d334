"""The v1 request pipeline, one method per step of SPEC 2.1 (the order is part of the contract).

1 route (the router) · 2 body size · 3 bearer auth · 4 permissions · 5 ``before`` fault ·
6 rate limit · 7 media type, JSON and optional headers · 8 Idempotency-Key · 9 schema ·
10 idempotency lookup · 11 scope and targets · 12 billing · 13 execute, charge, store, commit ·
14 ``after_commit`` fault and ``delay_ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from fake_lucy.domain import (
    billing,
    clock,
    events,
    faults,
    findings,
    idempotency,
    lifecycle,
    ratelimit,
    recall,
    server_state,
)
from fake_lucy.domain import journal as journaling
from fake_lucy.domain.errors import DomainError
from fake_lucy.domain.ids import random_request_id
from fake_lucy.domain.principals import Principal, PrincipalCache, Scope
from fake_lucy.domain.records import journal_dict, proposal_dict
from fake_lucy.http import inputs
from fake_lucy.http.abort import DropConnection, client_gone
from fake_lucy.http.canonical import body_sha256
from fake_lucy.http.problems import (
    ERRORS,
    JSON,
    PROBLEM,
    TYPE_BASE,
    BytesResponse,
    ProblemError,
    json_bytes,
    problem_body,
    problem_response,
    schema_problem,
)
from fake_lucy.runtime import FakeLucy
from lucy_memory._contract import (
    IDEMPOTENCY_KEY_RULE,
    OPERATION_PERMISSIONS,
    RETRYABLE_STATUSES,
    InvalidJSONError,
    SchemaError,
    parse_json_object,
    schema_validator,
)

__all__ = ["V1Pipeline"]

_SCHEMA = {"recall": "recall-request.schema.json", "propose": "propose-request.schema.json"}
_MAX_SUBJECT = 255  # a proposal id longer than this is kept by its hash

# The server log's hook (``fake-lucy serve`` without ``--quiet``): called once per v1 request with
# its operation, its journal row (None before authentication), its status (None: dropped) and the
# milliseconds it took.
RequestLog = Callable[[str, "journaling.JournalRow | None", "int | None", float], None]


@dataclass(slots=True)
class _Call:
    """What the pipeline has learned about one request so far."""

    request: Request
    incoming: Mapping[str, str]  # the request's headers by lower-case name
    operation: str
    request_id: str
    raw_body: bytes
    principal: Principal
    journal: journaling.JournalRow
    now_us: int  # the server clock when the request arrived
    arrived_us: int  # real time when the request arrived (findings judge real waits)
    faults_armed: bool  # may a fault fire? (at arrival; after step 13, as of its transaction)
    proposal_id: str | None = None
    headers: dict[str, str] = field(default_factory=dict)  # added to every response
    delay_ms: int = 0
    client_name: str | None = None
    journaled: bool = False  # the journal row was written in the request's own transaction
    after_commit: faults.Fault | None = None  # the step-14 fault taken in that transaction
    judged: bool = True  # were its findings judged there (not when a fault delays the answer)
    secret_key: bool = False  # the Idempotency-Key matches a secret pattern (SPEC 1.5)


def _state(
    conn: sqlite3.Connection, principal: Principal, poll: tuple[str, str] | None = None
) -> server_state.TransactionState:
    """The request's view of the server and its tenant in this transaction (``in_transaction``)."""
    return server_state.in_transaction(
        conn,
        principal.tenant_id,
        principal.account_id,
        principal.credential_id,
        incarnation=principal.incarnation,
        poll=poll,
    )


def _subject(call: _Call) -> str:
    """What the findings judge a request by: the sha256 of its body, or the proposal id it polls."""
    if call.proposal_id is None:
        return call.journal.body_sha256
    if len(call.proposal_id) <= _MAX_SUBJECT:
        return call.proposal_id
    # a path no proposal id matches: its hash is as good a name and stays small
    return hashlib.sha256(call.proposal_id.encode("utf-8", "surrogatepass")).hexdigest()


class V1Pipeline:
    def __init__(self, fake: FakeLucy, log: RequestLog | None = None) -> None:
        self.fake = fake
        self.log = log
        self.max_body = int(fake.contract["max_body_bytes"])
        self.principals = PrincipalCache()
        self.recall_cache = recall.RecallCache()

    @property
    def conn(self) -> sqlite3.Connection:
        return self.fake.db.conn

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction of the request; its events are stored together (``events.batch``)."""
        with self.fake.db.write_in_group() as conn, events.batch(conn):
            yield conn

    # -- the whole pipeline ------------------------------------------------------------------

    async def handle(self, request: Request, operation: str, proposal_id: str | None = None) -> Response:
        if self.log is None:
            return await self._committed(self._handle(request, operation, proposal_id, None))
        started = time.perf_counter()
        logged: list[journaling.JournalRow] = []
        response = await self._committed(self._handle(request, operation, proposal_id, logged))
        status = None if isinstance(response, DropConnection) else response.status_code
        self.log(operation, logged[0] if logged else None, status, (time.perf_counter() - started) * 1000)
        return response

    async def _committed(self, handling: Awaitable[Response]) -> Response:
        """The response, once what the request wrote is committed (``Database.group_committed``).
        A request that fails unexpectedly has what it wrote so far committed before its 500, as
        each of its transactions would have been alone."""
        try:
            response = await handling
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self.fake.db.commit_joined()
            raise
        await self.fake.db.group_committed()
        return response

    async def _handle(
        self,
        request: Request,
        operation: str,
        proposal_id: str | None,
        logged: list[journaling.JournalRow] | None,
    ) -> Response:
        arrived_us = clock.real_us()
        request_id = random_request_id()
        incoming = inputs.header_map(request.scope)
        try:
            raw_body = await inputs.read_body(request, self.max_body, incoming)  # 2
            start = server_state.at_start(self.conn)
            principal = self._authenticate(incoming, start.auth_epoch)  # 3
        except DomainError as error:
            return problem_response(error, request_id)
        except inputs.ClientGone:  # before step 3: nothing charged, changed or journaled
            return client_gone(request)
        now_us = principal.now_us()  # the tenant's clock
        key = inputs.idempotency_key(incoming) if operation == "propose" else None
        secret_key = key is not None and self._looks_secret(incoming, key)
        if secret_key:
            key = None  # refused at step 8; the journal row must not keep it (it is written for 4 to 7 too)
        attempt = inputs.retry_attempt(incoming)
        call = _Call(
            request=request,
            incoming=incoming,
            operation=operation,
            request_id=request_id,
            raw_body=raw_body,
            principal=principal,
            journal=journaling.JournalRow(
                request_id=request_id,
                at=clock.format_us(now_us),
                operation=operation,
                credential_id=principal.credential_id,
                tenant=principal.tenant_id,
                idempotency_key=key,
                retry_attempt=attempt if attempt is not None and attempt >= 0 else 0,
                body_sha256=hashlib.sha256(raw_body).hexdigest(),
            ),
            now_us=now_us,
            arrived_us=arrived_us,
            faults_armed=start.faults_armed,
            proposal_id=proposal_id,
            secret_key=secret_key,
        )
        if logged is not None:
            logged.append(call.journal)
        code: str | None = None
        try:
            response = await self._steps(call, proposal_id)
        except DomainError as error:
            code = error.code
            response = problem_response(error, request_id, call.headers)
        except _Injected as injected:
            code = injected.fault.code
            response = injected_response(injected.fault, request_id, injected.headers)
        except _Dropped:
            response = DropConnection()
        if call.journaled and call.judged and not call.delay_ms:
            return response  # the common case: written and judged in the request's own transaction
        retry_after = response.headers.get("retry-after")
        if not call.journaled:
            if isinstance(response, DropConnection):
                call.journal.dropped = True
            else:
                call.journal.status = response.status_code
            call.judged = not call.delay_ms
            with self._transaction() as conn:
                # not into a state made since the request began (its tenant reset, restored or made
                # again): that state never saw the request, and its charge (if any) went with the old
                if server_state.tenant_is(conn, call.principal.tenant_id, call.principal.incarnation):
                    self._journal(conn, call)
                    if call.judged:
                        self._observe(conn, call, code, retry_after)
        if call.delay_ms:
            # An injected fault's latency is wall time by design (SPEC 3.4): it exercises client
            # timeouts. The journal row is committed before it, beside the charge and the fault
            # taken: a process ended during the delay leaves no charge without its row. The
            # request is judged once answered (a wait before a repeat counts from the answer).
            self.fake.db.commit_joined()
            await self._delay(call.delay_ms)
        if not call.judged:
            with self._transaction() as conn:
                if server_state.tenant_is(conn, call.principal.tenant_id, call.principal.incarnation):
                    self._observe(conn, call, code, retry_after)
        return response

    async def _delay(self, delay_ms: int) -> None:
        """An injected fault's latency, in wall time (the one place the pipeline waits)."""
        await asyncio.sleep(delay_ms / 1000)

    def _journal(self, conn: sqlite3.Connection, call: _Call) -> None:
        """The request's journal row and its ``request`` event, in the caller's transaction."""
        journaling.append(conn, call.journal, max_rows=self.fake.settings.journal_size)
        events.emit(
            conn, "request", journal_dict(call.journal), at=call.journal.at, tenant=call.principal.tenant_id
        )

    def _observe(
        self,
        conn: sqlite3.Connection,
        call: _Call,
        code: str | None,
        retry_after: str | None,
        *,
        watching: bool = True,
    ) -> list[findings.FindingRecord]:
        """Findings (SPEC 3.8) on this request, in its journal row's transaction. Returns the
        findings recorded: the place where each becomes a ``finding`` event (SPEC 3.7), in the
        same transaction and so in commit order."""
        journal = call.journal
        observation = findings.Observation(
            request_id=call.request_id,
            tenant_id=call.principal.tenant_id,
            credential_id=call.principal.credential_id,
            operation=call.operation,
            subject=_subject(call),
            idempotency_key=journal.idempotency_key,
            retry_attempt=journal.retry_attempt,
            status=journal.status,
            code=code,
            retry_after=float(retry_after) if retry_after is not None and retry_after.isdigit() else None,
            arrived_us=call.arrived_us,
            answered_us=clock.real_us(),
            clock_us=call.now_us,
            answered_clock_us=call.principal.now_us(),
            body_sha256=journal.body_sha256,
        )
        recorded = findings.observe(
            conn,
            observation,
            at=journal.at,
            id_seed=self.fake.ids.seed,
            watching=watching,
        )
        for finding in recorded:
            events.emit(
                conn, "finding", findings.finding_dict(finding), at=finding.at, tenant=finding.tenant_id
            )
        return recorded

    async def _steps(self, call: _Call, proposal_id: str | None) -> Response:
        self._rate_limit(call, take=False)  # the headers for a refusal at steps 4 and 5
        self._check_permissions(call)  # 4
        self._fault(call, "before")  # 5
        self._rate_limit(call)  # 6
        body = self._parse(call)  # 7
        if call.operation == "recall":
            response = await self._recall(call, body)
        elif call.operation == "proposal_status":
            assert proposal_id is not None
            response = self._status(call, proposal_id)
        else:
            response = await self._propose(call, body)
        if call.journal.charged:
            self._fault(call, "after_commit")  # 14
        return response

    # -- steps 3 to 9 --------------------------------------------------------------------------

    def _authenticate(self, incoming: Mapping[str, str], auth_epoch: int) -> Principal:
        token = inputs.bearer_token(incoming)
        if token is None:
            raise ProblemError("unauthenticated", "a bearer token is required")
        principal = self.principals.authenticate(self.conn, token, epoch=auth_epoch)
        if principal is None:
            raise ProblemError("unauthenticated", "the bearer token is unknown or revoked")
        if principal.builtin and not self.fake.loopback:
            raise ProblemError(
                "unauthenticated",
                "the built-in development tokens are refused when the fake listens on a"
                " non-loopback address; seed your own tokens with --seed",
            )
        return principal

    def _check_permissions(self, call: _Call) -> None:
        narrowed = inputs.permissions_header(call.incoming)
        effective = call.principal.permissions
        if narrowed is not None:
            effective = effective & narrowed
        needed = OPERATION_PERMISSIONS[call.operation]
        if needed not in effective:
            raise ProblemError(
                "permission_denied",
                f"this call needs the {needed} permission, which the request does not carry",
            )

    def _take(self, conn: sqlite3.Connection, call: _Call, phase: str) -> faults.Fault | None:
        """The oldest fault of ``phase`` matching the request, taken (and its event) in ``conn``."""
        fault = faults.take(
            conn,
            operation=call.operation,
            tenant=call.principal.tenant_id,
            credential_id=call.principal.credential_id,
            phase=phase,
        )
        if fault is not None:
            self._fired(conn, call, fault, phase)
        return fault

    def _fault(self, call: _Call, phase: str) -> None:
        if not call.faults_armed:
            return
        if call.journaled:  # step 14 of a request journaled in its own transaction: taken there
            fault = call.after_commit
        else:
            with self._transaction() as conn:  # the take and its event together
                server_state.check_tenant(conn, call.principal.tenant_id, call.principal.incarnation)
                fault = self._take(conn, call, phase)
        if fault is None:
            return
        call.journal.fault_id = fault.id
        call.delay_ms = fault.delay_ms or 0
        call.headers["Fake-Lucy-Fault"] = fault.id
        if fault.drop_connection:
            raise _Dropped
        headers = dict(call.headers)
        if fault.retry_after is not None:
            headers["Retry-After"] = str(fault.retry_after)
        raise _Injected(fault, headers)

    def _fired(self, conn: sqlite3.Connection, call: _Call, fault: faults.Fault, phase: str) -> None:
        data = {
            "fault_id": fault.id,
            "operation": call.operation,
            "status": fault.status,
            "phase": phase,
            "request_id": call.request_id,
        }
        tenant = call.principal.tenant_id
        events.emit(conn, "fault.fired", data, at=clock.now(conn, tenant), tenant=tenant)

    def _rate_limit(self, call: _Call, *, take: bool = True) -> None:
        """Step 6; while a limit is set every response after step 3 carries the headers."""
        per_minute = call.principal.rate_limit_per_minute
        if per_minute is None:
            return
        if take:
            with self._transaction() as conn:
                server_state.check_tenant(conn, call.principal.tenant_id, call.principal.incarnation)
                state = ratelimit.take_token(
                    conn,
                    credential_id=call.principal.credential_id,
                    per_minute=per_minute,
                    now_us=clock.now_us(conn, call.principal.tenant_id),
                )
        else:
            state = ratelimit.take_token(
                self.conn,
                credential_id=call.principal.credential_id,
                per_minute=per_minute,
                now_us=call.now_us,
                take=False,
            )
        call.headers["RateLimit-Policy"] = f'"credential";q={state.limit};w=60'
        call.headers["RateLimit"] = f'"credential";r={state.remaining};t={state.reset}'
        if not state.allowed:
            raise ProblemError(
                "rate_limited",
                f"the credential's rate limit of {per_minute} requests per minute is exhausted",
                headers={"Retry-After": str(state.retry_after)},
            )

    def _parse(self, call: _Call) -> dict[str, Any]:
        headers = call.incoming
        body: dict[str, Any] = {}
        if call.request.method == "POST":
            content_type = headers.get("content-type", "")
            media, _, params = content_type.partition(";")
            name, _, value = params.strip().lower().replace(" ", "").partition("=")
            # a parameter's value may be quoted (RFC 9110 5.6.6): charset="utf-8" is charset=utf-8
            charset = name + "=" + value.strip('"') if value else name
            if media.strip().lower() != JSON or charset not in ("", "charset=utf-8"):
                raise ProblemError("unsupported_media_type", "the body must be application/json (UTF-8)")
            try:
                body = parse_json_object(call.raw_body)
            except InvalidJSONError as exc:
                raise ProblemError("invalid_json", str(exc)) from None
        elif call.raw_body:
            raise ProblemError("unsupported_media_type", "proposal status takes no body")
        call.client_name = inputs.client_name(headers)
        if call.client_name is not None and self._looks_secret(headers, call.client_name):
            raise ProblemError(
                "invalid_header",
                "the Lucy-Client-Name header looks like a secret (it matches a secret pattern);"
                " it is neither stored nor echoed",
            )
        if inputs.retry_attempt(headers) == -1:
            raise ProblemError(
                "invalid_header",
                "the Lucy-Retry-Attempt header is malformed: it must be an integer from 0 to 10",
            )
        if call.secret_key:  # 8
            raise ProblemError(
                "invalid_header",
                "the Idempotency-Key header looks like a secret (it matches a secret pattern);"
                " it is neither stored nor echoed",
            )
        if call.operation == "propose" and call.journal.idempotency_key is None:  # 8
            raise ProblemError(
                "idempotency_key_required",
                f"propose needs an Idempotency-Key header of {IDEMPOTENCY_KEY_RULE}",
            )
        schema = _SCHEMA.get(call.operation)
        if schema is not None:  # 9
            errors = schema_validator(schema).errors(body)
            if errors:
                raise schema_problem(errors)
        return body

    # -- steps 10 to 13, per operation ------------------------------------------------------------

    def _success(self, call: _Call, status: int, body: bytes, remaining: int) -> Response:
        headers = {
            **call.headers,
            "Lucy-Request-Id": call.request_id,
            "Lucy-Credits-Charged": "1",
            "Lucy-Credits-Remaining": str(remaining),
        }
        return BytesResponse(body, status_code=status, headers=headers, media_type=JSON)

    def _charge(self, conn: sqlite3.Connection, call: _Call, now: str) -> int:
        return billing.charge(
            conn,
            tenant=call.principal.tenant_id,
            account=call.principal.account_id,
            request_id=call.request_id,
            operation=call.operation,
            at=now,
        )

    def _before_commit(
        self, conn: sqlite3.Connection, call: _Call, tx: server_state.TransactionState, status: int
    ) -> None:
        """The last statement of an executed request's transaction (step 13).

        The journal row joins this transaction, with the answer step 14 gives: the ``after_commit``
        fault, when one fires, is taken here too (it fires once the change is committed, and so
        does this). Charge, change, fault and row are one commit, so a process killed between
        them leaves none without the others. Only after a fault that fired earlier (``in_flight``)
        does ``handle`` write the row.
        """
        call.faults_armed = tx.faults_armed
        if call.journal.fault_id is not None:
            return
        call.journal.charged = True
        fault = self._take(conn, call, "after_commit") if tx.faults_armed else None
        code = retry_after = None
        if fault is None:
            call.journal.status = status
        else:
            call.after_commit = fault
            call.journal.fault_id = fault.id
            if fault.drop_connection:
                call.journal.dropped = True
            else:
                call.journal.status, code = fault.status, fault.code
                retry_after = None if fault.retry_after is None else str(fault.retry_after)
        self._journal(conn, call)
        call.journaled = True
        if fault is not None and fault.delay_ms:
            call.judged = False  # once answered, after the delay (a wait is counted from the answer)
        elif fault is not None or not findings.poll_is_settled(
            series_settled=tx.series_settled, status=status, retry_attempt=call.journal.retry_attempt
        ):
            self._observe(conn, call, code, retry_after, watching=tx.watching)

    async def _recall(self, call: _Call, body: dict[str, Any]) -> Response:
        """Steps 11 to 13 of a recall: rank in a read snapshot without the write lock (at once when
        it is short, else off the event loop: ``Database.in_snapshot``), then a short write
        transaction for the access times, charge, ledger and journal rows."""
        principal = call.principal
        scopes: tuple[Scope, ...] = principal.scopes
        if "scope" in body:  # 11
            scope = Scope(body["scope"]["kind"], body["scope"]["id"])
            if not principal.sees(scope):
                raise ProblemError("scope_forbidden", "the credential cannot see this scope")
            scopes = (scope,)
        query = recall.prepare(
            tenant=principal.tenant_id,
            scopes=scopes,
            terms=recall.query_terms(body["query"], self.fake.stop_words),
            kinds=body.get("kinds"),
            topic=body.get("topic"),
            limit=int(body.get("limit", 10)),
        )
        looked_up = query is not None and self.recall_cache.holds(query.key)
        if query is None or looked_up:
            # nothing to rank, or an answer ranked on an index that may be today's: one transaction
            with self._transaction() as conn:
                tx = _state(conn, principal)
                cached = [] if query is None else self.recall_cache.get(tx.index_epoch, query.key)
                if cached is not None:
                    return self._recalled(conn, call, tx, cached, tx.index_epoch)
        assert query is not None
        # one statement, so one snapshot: a recall that cannot be charged is refused before it ranks
        before = _state(self.conn, principal)
        billing.check_can_charge(billing_available=before.billing_available, balance=before.balance)  # 12
        # (an answer found above was of an older index: the cache has let it go)
        cached = None if looked_up else self.recall_cache.get(before.index_epoch, query.key)
        ranked_at = before.index_epoch
        if cached is not None:
            ranked = cached
        else:
            ranked_at, ranked = await self.fake.db.in_snapshot(functools.partial(_rank, query))
            self.recall_cache.put(ranked_at, query.key, ranked)
        with self._transaction() as conn:
            tx = _state(conn, principal)
            return self._recalled(conn, call, tx, ranked, ranked_at)

    def _recalled(
        self,
        conn: sqlite3.Connection,
        call: _Call,
        tx: server_state.TransactionState,
        ranked: recall.Ranked,
        ranked_at: int,
    ) -> Response:
        """Steps 12 and 13 of a recall ranked on the index of epoch ``ranked_at``, in the request's
        write transaction: the access times, the charge, the ledger and journal rows."""
        now = clock.format_us(tx.now_us)
        billing.check_can_charge(billing_available=tx.billing_available, balance=tx.balance)  # 12
        recall.stamp(conn, ranked, now, index_changed=tx.index_epoch != ranked_at)  # 13
        remaining = self._charge(conn, call, now)
        self._before_commit(conn, call, tx, 200)
        call.journal.charged = True
        payload = {
            "memories": recall.answer(ranked, now),
            "request_id": call.request_id,
            "credits": {"charged": 1, "remaining": remaining},
        }
        return self._success(call, 200, json_bytes(payload), remaining)

    def _status(self, call: _Call, proposal_id: str) -> Response:
        principal = call.principal
        errors = _proposal_id_errors(proposal_id)
        if errors:  # 9: the path parameter is the request of this operation
            raise schema_problem(errors)
        with self._transaction() as conn:
            poll = (principal.credential_id, _subject(call))
            tx = _state(conn, principal, poll)
            now = clock.format_us(tx.now_us)
            if tx.expiry_due(now):
                lifecycle.expire_due(conn, principal.tenant_id, now)
            record = lifecycle.visible_proposal(conn, principal, proposal_id)
            billing.check_can_charge(billing_available=tx.billing_available, balance=tx.balance)
            remaining = self._charge(conn, call, now)
            self._before_commit(conn, call, tx, 200)
        call.journal.charged = True
        payload = {
            "proposal": proposal_dict(record),
            "request_id": call.request_id,
            "credits": {"charged": 1, "remaining": remaining},
        }
        return self._success(call, 200, json_bytes(payload), remaining)

    def _looks_secret(self, incoming: Mapping[str, str], value: str) -> bool:
        """A header value the fake would keep (journal, ``source``) that matches a secret pattern
        or holds the caller's own token (SPEC 1.5)."""
        token = inputs.bearer_token(incoming)
        return self.fake.scanner.find(value, caller_token=token) is not None

    def _secret(self, call: _Call, body: dict[str, Any]) -> lifecycle.Placeholder | None:
        token = inputs.bearer_token(call.incoming)
        for name in ("content", "justification", "topic"):
            value = body.get(name)
            if isinstance(value, str) and self.fake.scanner.find(value, caller_token=token):
                return lifecycle.Placeholder(self.fake.placeholder)
        return None

    async def _propose(self, call: _Call, body: dict[str, Any]) -> Response:
        principal = call.principal
        key = call.journal.idempotency_key
        assert key is not None
        body_hash = body_sha256(body)
        secret = self._secret(call, body)
        held: faults.Fault | None = None
        with self._transaction() as conn:
            tx = _state(conn, principal)
            now_us = tx.now_us
            now = clock.format_us(now_us)
            replay = idempotency.lookup(conn, principal, key, body_hash, now=now)  # 10
            if replay is not None:
                return self._replay(call, replay, tx.balance)
            if tx.faults_armed:
                held = faults.take(
                    conn,
                    operation="propose",
                    tenant=principal.tenant_id,
                    credential_id=principal.credential_id,
                    phase="in_flight",
                )
            if held is None:
                return self._execute_propose(conn, call, body, body_hash, secret, tx)
            self._fired(conn, call, held, "in_flight")
            call.journal.fault_id = held.id
            call.headers["Fake-Lucy-Fault"] = held.id
            call.delay_ms = held.delay_ms or 0
            idempotency.record(
                conn,
                principal,
                key,
                body_hash,
                Scope(body["scope"]["kind"], body["scope"]["id"]),
                request_id=call.request_id,
                now=now,
                expires_at=clock.format_us(now_us + self.fake.settings.idempotency_ttl_seconds * 10**6),
                in_flight_until=clock.format_us(
                    now_us + ((held.hold_ms or 0) + idempotency.IN_FLIGHT_GRACE_SECONDS * 1000) * 1000
                ),
            )
        # The in_flight hold is wall time by design (SPEC 3.4): other requests meet the marker meanwhile.
        self.fake.db.commit_joined()
        await asyncio.sleep((held.hold_ms or 0) / 1000)
        try:
            with self._transaction() as conn:
                tx = _state(conn, principal)
                now = clock.format_us(tx.now_us)
                replay = idempotency.after_hold(
                    conn, principal, key, body_hash, request_id=call.request_id, now=now
                )
                if replay is not None:  # another request with the key took it over and answered
                    return self._replay(call, replay, tx.balance)
                return self._execute_propose(conn, call, body, body_hash, secret, tx)
        except DomainError:
            with self._transaction() as conn:
                idempotency.discard_held(conn, principal.account_id, key, call.request_id)
            raise

    def _execute_propose(
        self,
        conn: sqlite3.Connection,
        call: _Call,
        body: dict[str, Any],
        body_hash: str,
        secret: lifecycle.Placeholder | None,
        tx: server_state.TransactionState,
    ) -> Response:
        principal = call.principal
        now_us = tx.now_us
        now = clock.format_us(now_us)
        if tx.expiry_due(now):
            lifecycle.expire_due(conn, principal.tenant_id, now)
        if secret is None:  # 11
            plan = lifecycle.plan_proposal(conn, principal, body)
        else:
            plan = lifecycle.secret_plan(conn, principal, body)
        billing.check_can_charge(billing_available=tx.billing_available, balance=tx.balance)  # 12
        expires_at = clock.format_us(now_us + principal.proposal_ttl_seconds * 1_000_000)
        record = lifecycle.create_proposal(  # 13
            conn,
            self.fake.ids,
            principal,
            body,
            plan,
            now=now,
            expires_at=expires_at,
            source=call.client_name,
            secret=secret,
        )
        remaining = self._charge(conn, call, now)
        key = call.journal.idempotency_key
        assert key is not None
        payload = json_bytes(
            {
                "proposal": proposal_dict(record),
                "request_id": call.request_id,
                "credits": {"charged": 1, "remaining": remaining},
                "idempotency_key": key,
            }
        )
        idempotency.record(
            conn,
            principal,
            key,
            body_hash,
            plan.scope,
            request_id=call.request_id,
            answer=(201, payload),
            now=now,
            expires_at=clock.format_us(now_us + self.fake.settings.idempotency_ttl_seconds * 10**6),
        )
        self._before_commit(conn, call, tx, 201)
        call.journal.charged = True
        return self._success(call, 201, payload, remaining)

    def _replay(self, call: _Call, replay: idempotency.Replay, balance: int) -> Response:
        call.journal.replayed = True
        headers = {
            **call.headers,
            "Lucy-Request-Id": call.request_id,
            "Lucy-Original-Request-Id": replay.original_request_id,
            "Idempotent-Replayed": "true",
            "Lucy-Credits-Charged": "0",
            "Lucy-Credits-Remaining": str(balance),
        }
        return BytesResponse(replay.body, status_code=replay.status, headers=headers, media_type=JSON)


def _rank(query: recall.RecallQuery, conn: sqlite3.Connection) -> tuple[int, recall.Ranked]:
    """A recall's read: the index epoch and the ranking, in the caller's one snapshot."""
    return server_state.index_epoch(conn), recall.rank(conn, query)


@functools.lru_cache(maxsize=1024)
def _proposal_id_errors(proposal_id: str) -> tuple[SchemaError, ...]:
    """Step 9 of a status call, cached: clients poll one id, and the answer depends on it alone."""
    return tuple(schema_validator("proposal-status-request.schema.json").errors({"proposal_id": proposal_id}))


class _Dropped(Exception):
    """Close the connection without sending a byte."""


class _Injected(Exception):
    def __init__(self, fault: faults.Fault, headers: dict[str, str]) -> None:
        super().__init__(fault.code)
        self.fault = fault
        self.headers = headers


def injected_response(fault: faults.Fault, request_id: str, headers: dict[str, str]) -> Response:
    entry = ERRORS.get(fault.code)
    if entry is not None and entry["status"] == fault.status:
        body = problem_body(fault.code, f"injected fault {fault.id}", request_id)
    else:
        body = problem_body("internal", f"injected fault {fault.id}", request_id)
        body.update(
            type=TYPE_BASE + fault.code,
            status=fault.status,
            code=fault.code,
            retryable=fault.status in RETRYABLE_STATUSES,
        )
    return Response(
        json_bytes(body),
        status_code=fault.status,
        headers={**headers, "Lucy-Request-Id": request_id},
        media_type=PROBLEM,
    )
