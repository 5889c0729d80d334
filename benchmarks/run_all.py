"""``make bench``: every benchmark in one run on this machine; writes ``benchmarks/RESULTS.md``.

Parts: 1 HTTP with wrk (fake vs bare FastAPI vs moto SQS), 2 recall as the store grows to 1M,
3 in process (ASGI fixture vs respx stub; per-test reset), 4 MCP cold start and tool call,
5 the e2e lifecycle over MCP, 6 a slow recall stalls nobody (a long query; status under load),
7 one fake with 100 tenants (bench_tenants). Progress goes to stderr; the file is written at the end.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from benchmarks import (
    bench_findings,
    bench_http,
    bench_inprocess,
    bench_mcp,
    bench_recall_growth,
    bench_recall_stall,
    bench_reset,
    bench_tenants,
)
from benchmarks.common import machine, summarise

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def _verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def _http_section(results: dict[str, list[bench_http.WrkResult]]) -> list[str]:
    best = {name: bench_http.best(runs) for name, runs in results.items()}
    lines = [
        "## 1. HTTP: the fake, a bare FastAPI endpoint and moto's SQS under wrk",
        "",
        f"wrk -t{bench_http.THREADS} -c{bench_http.CONNECTIONS} -d{bench_http.DURATION_S}s per run,"
        f" {len(next(iter(results.values())))} interleaved rounds after a {bench_http.WARMUP_S} s warm-up;"
        " the table shows each scenario's best round (the least disturbed by other processes) and the"
        " range over rounds. Every server is a separate process with one worker on 127.0.0.1.",
        f"The fake's store: {bench_http.MEMORIES:,} bulk-seeded memories in the dev token's two scopes;"
        ' recall asks one scope for one common and one rare term — "fake recall" repeats that query,'
        " which recall's cache of ranked answers serves after the first request (the index does not"
        ' change meanwhile), and "fake recall, new query each request" adds a unique term that matches'
        " nothing, so that every request ranks all matches as a first recall does; propose sends a"
        " unique Idempotency-Key per request (wrk Lua); status reads one proposal. The account has"
        " 10^8 credits, so no 402s.",
        "",
        "| scenario | req/s (best) | req/s range | p50 ms | p99 ms | requests | non-2xx | socket errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, runs in results.items():
        top = best[name]
        low = min(run.rps for run in runs)
        lines.append(
            f"| {name} | {top.rps:,.0f} | {low:,.0f}–{top.rps:,.0f} | {top.p50_ms:.2f} | {top.p99_ms:.2f}"
            f" | {top.requests:,} | {sum(r.non_2xx for r in runs)} | {sum(r.socket_errors for r in runs)} |"
        )
    get, post = best["bare FastAPI GET"].rps, best["bare FastAPI POST"].rps
    send, attrs = best["moto SQS SendMessage"].rps, best["moto SQS GetQueueAttributes"].rps
    ratios = [
        ("proposal status", best["fake proposal status"].rps, get, "GET", 0.60, attrs, "GetQueueAttributes"),
        ("recall", best["fake recall"].rps, post, "POST", 0.50, attrs, "GetQueueAttributes"),
        ("propose", best["fake propose"].rps, post, "POST", 0.35, send, "SendMessage"),
    ]
    lines += [
        "",
        "| fake operation | × bare endpoint | target | verdict | × moto SQS |",
        "|---|---:|---:|---|---:|",
    ]
    for name, rps, ceiling, method, target, moto, moto_name in ratios:
        ratio = rps / ceiling
        lines.append(
            f"| {name} | {ratio:.2f}× (bare {method}) | ≥ {target:.2f}× | {_verdict(ratio >= target)}"
            f" | {rps / moto:.1f}× ({moto_name}) |"
        )
    uncached = best[bench_http.UNCACHED_RECALL].rps
    lines.append(
        f"| recall, new query each request | {uncached / post:.2f}× (bare POST) | – | not a target:"
        f" every request ranks | {uncached / attrs:.1f}× (GetQueueAttributes) |"
    )
    non_2xx = sum(r.non_2xx for runs in results.values() for r in runs)
    lines += ["", f"Non-2xx responses over all runs: {non_2xx}.", ""]
    return lines


def _growth_section(rows: list[bench_recall_growth.GrowthRow]) -> list[str]:
    lines = [
        "## 2. Recall latency as the store grows",
        "",
        f"{bench_recall_growth.SCOPES} scopes, memories spread evenly, bulk-seeded into one SQLite file"
        " that grows in steps (benchmarks/seeding.py: the tables and FTS rows of"
        " `lifecycle.create_memory`, one transaction per 50,000). Query: one scope,"
        f" `{bench_recall_growth.QUERY}` (a term in ~1 memory in 10, one in ~1 in 1,000), limit 10."
        f" Server side: the domain `recall` in its write transaction ({bench_recall_growth.DIRECT_ROUNDS}"
        f" calls, no cache); HTTP: `fake-lucy serve`, one request at a time"
        f" ({bench_recall_growth.HTTP_ROUNDS}), each with a unique extra term that matches nothing, so"
        " that none is answered from recall's cache of ranked answers.",
        "",
        bench_recall_growth.HEADER,
    ]
    lines += [bench_recall_growth.format_row(row) for row in rows]
    first, last = rows[0], rows[-1]
    at_100k = next((row for row in rows if row.size == 100_000), None)
    growth = last.direct.p50_ms / first.direct.p50_ms
    lines += [
        "",
        f"Store ×{last.size // first.size:,}: server p50 ×{growth:.0f}, HTTP p50"
        f" ×{last.http.p50_ms / first.http.p50_ms:.1f}.",
    ]
    if at_100k is not None:
        ok = at_100k.direct.p99_ms <= 10
        lines.append(
            f"Target recall p99 ≤ 10 ms at 100k (server side): {at_100k.direct.p99_ms:.2f} ms,"
            f" {_verdict(ok)}."
        )
    lines.append("")
    return lines


def _inprocess_section(
    calls: list[bench_inprocess.CallRow],
    resets: list[bench_inprocess.ResetRow],
    reset_direct: list[float],
    reset_http: list[float],
) -> list[str]:
    lines = [
        "## 3. In process: the fixture's ASGI path against a respx stub; per-test reset",
        "",
        f"{bench_inprocess.CALLS:,} calls per operation (the quietest of {bench_inprocess.ROUNDS} rounds),"
        " the same request through `InProcessFake.client()` and through a plain `httpx.AsyncClient`"
        ' under `respx.mock` answering the fake\'s own response body. "recall" repeats one query'
        " (served from recall's cache of ranked answers after the first call); \"recall, new query"
        ' each call" adds a unique term that matches nothing, so that every call ranks.',
        "",
        "| operation | fixture p50 ms | fixture p99 ms | respx p50 ms | respx p99 ms | ratio (p50)"
        " | target | verdict |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in calls:
        lines.append(
            f"| {row.operation} | {row.fixture.p50_ms:.3f} | {row.fixture.p99_ms:.3f} | {row.stub.p50_ms:.3f}"
            f" | {row.stub.p99_ms:.3f} | {row.ratio:.2f}× | ≤ 3× | {_verdict(row.ratio <= 3)} |"
        )
    direct, over_http = summarise(reset_direct), summarise(reset_http)
    lines += [
        "",
        "| per-test reset | p50 ms | p99 ms | target | verdict |",
        "|---|---:|---:|---:|---|",
    ]
    for reset in resets:
        summary = reset.summary
        lines.append(
            f"| {reset.name} | {summary.p50_ms:.3f} | {summary.p99_ms:.3f} | ≤ 5 ms"
            f" | {_verdict(summary.p99_ms <= 5)} |"
        )
    lines += [
        f"| reset, in process (direct, benchmarks/bench_reset.py) | {direct.p50_ms:.3f} | {direct.p99_ms:.3f}"
        f" | ≤ 5 ms | {_verdict(direct.p99_ms <= 5)} |",
        f"| reset over HTTP to uvicorn (round trip) | {over_http.p50_ms:.3f} | {over_http.p99_ms:.3f}"
        " | – | – |",
        "",
    ]
    return lines


def _mcp_section(results: bench_mcp.McpResults | None) -> list[str]:
    if results is None:
        return ["## 4–5. MCP", "", "Not measured: `lucy-memory-mcp` is not installed.", ""]
    ratio = results.cold_lucy.p50_ms / results.cold_floor.p50_ms
    return [
        "## 4. MCP over stdio: cold start and one tool call",
        "",
        "The SDK's own `Client` over `stdio_client` launches the server (the `lucy-memory-mcp` console"
        " script, as a host does; the floor is `benchmarks/mcp_floor.py`, the same SDK's low-level"
        " `Server` with one no-op tool) and times spawn → `tools/list` answer"
        f" ({bench_mcp.COLD_STARTS} of each, interleaved). Tool calls: {bench_mcp.CALLS} in one session;"
        " `memory_recall` goes through the SDK over HTTP to `fake-lucy serve`.",
        "",
        "| measurement | p50 ms | p99 ms |",
        "|---|---:|---:|",
        f"| cold start, lucy-memory-mcp | {results.cold_lucy.p50_ms:.1f} | {results.cold_lucy.p99_ms:.1f} |",
        f"| cold start, minimal server (floor) | {results.cold_floor.p50_ms:.1f}"
        f" | {results.cold_floor.p99_ms:.1f} |",
        f"| tool call, memory_recall | {results.call_recall.p50_ms:.2f} | {results.call_recall.p99_ms:.2f} |",
        f"| tool call, no-op on the floor | {results.call_noop.p50_ms:.2f}"
        f" | {results.call_noop.p99_ms:.2f} |",
        "",
        f"Cold start: {ratio:.2f}× the floor (target ≤ 1.5×: {_verdict(ratio <= 1.5)}).",
        "",
        "## 5. The e2e lifecycle over MCP",
        "",
        "`memory_propose` → approve (control API, `POST /_fake/proposals/{id}/approve`) →"
        " `memory_proposal_status` → `memory_recall` finding the new memory.",
        "",
        "| measurement | p50 ms | p99 ms |",
        "|---|---:|---:|",
        f"| lifecycle in a running session ({bench_mcp.LIFECYCLES} runs)"
        f" | {results.lifecycle_warm.p50_ms:.1f} | {results.lifecycle_warm.p99_ms:.1f} |",
        f"| lifecycle including the server's cold start (1 run) | {results.lifecycle_cold_ms:.1f} | – |",
        "",
    ]


def main() -> None:
    started = time.perf_counter()
    description = machine()
    print("1/8 HTTP (wrk)…", file=sys.stderr, flush=True)
    http = bench_http.run()
    print("2/8 recall growth…", file=sys.stderr, flush=True)
    growth = bench_recall_growth.run()
    print("3/8 in process…", file=sys.stderr, flush=True)
    calls, resets = bench_inprocess.run()
    reset_direct, reset_http = bench_reset.run()
    print("4-5/8 MCP…", file=sys.stderr, flush=True)
    mcp = bench_mcp.run() if bench_mcp.available() else None
    print("6/8 slow recall…", file=sys.stderr, flush=True)
    stall = bench_recall_stall.run()
    print("7/8 tenants…", file=sys.stderr, flush=True)
    tenants = bench_tenants.run()
    print("8/8 findings…", file=sys.stderr, flush=True)
    findings_http, findings_cpu = bench_findings.run_http(), bench_findings.run_in_process()
    took = time.perf_counter() - started
    lines = [
        "# Benchmark results",
        "",
        f"Machine: {description}. Written by `make bench` (benchmarks/run_all.py) in {took / 60:.1f} min.",
        "Other processes may share the machine; figures are from one run.",
        "",
        *_http_section(http),
        *_growth_section(growth),
        *_inprocess_section(calls, resets, reset_direct, reset_http),
        *_mcp_section(mcp),
        *stall,
        *bench_tenants.section(tenants),
        *bench_findings.section(findings_http, findings_cpu),
        NOTES,
    ]
    RESULTS.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {RESULTS}", file=sys.stderr)


NOTES = """## What was changed for speed, and what the misses are

Eight rounds of changes, each profiled first: round 1 with pyinstrument (a direct ASGI driver) and
py-spy (the `fake-lucy serve` process under wrk), round 2 with cProfile and pyinstrument (the same
kind of driver, and the uvicorn server in process under wrk), rounds 3 and 4 with py-spy under wrk,
a direct ASGI driver with per-statement SQLite timings and per-function timers, and cProfile. Each
row is before → after; app time is measured in process through a direct ASGI driver (not part of
`make bench`; best of 3 × 2,000–10,000 calls; a bare FastAPI GET costs ~26 µs the same way), HTTP
with wrk on this machine. Round 1: commit d06c8c1 vs f86330d (best of 2 × 5 s). Round 2: e1bb8e4
(its `make bench` run: status 3,372, recall 1,725, propose 2,177 req/s) vs 4ffe67f. Round 3:
e1c948d (its `make bench` run: status 0.59×, recall 0.27×, propose 0.36×) vs 3bf02c9 (status
0.65×, recall 0.31×, propose 0.39×). Round 4: 3bf02c9 vs the tables at the top of this file.

| | r1: app µs | r1: × bare | r2: app µs | r2: × bare | r3: app µs | r3: × bare |
|---|---:|---:|---:|---:|---:|---:|
| recall | 751–765 → 377–387 | 0.15× → 0.25× | 379 → 335 | 0.25× → 0.27× | 313–337 → 260–267 | 0.27× → 0.31× |
| status | 228–237 → 131–134 | 0.32× → 0.44× | 130 → 67 | 0.44× → 0.59× | 67–68 → 58 | 0.59× → 0.65× |
| propose | 441–443 → 255–258 | 0.23× → 0.33× | 253 → 207 | 0.32× → 0.36× | – | 0.36× → 0.39× |

| round 4 | app µs | × bare |
|---|---:|---:|
| recall, repeated query | 257–266 → 75 | 0.31× → 0.58× |
| recall, new query each request | 257–266 → 236 | 0.31× → 0.31× |
| status | 57–63 (unchanged) | 0.65× → 0.64× |
| propose | – | 0.39× → 0.44× |

Round 5 (after the round that added tenants, events, findings, snapshots and the read-snapshot
recall; no behaviour of the contract changed, one documented choice below; the suite passes, plus
tests for each change). That round had cost the hot path: app time in process, CPU µs per call
(the least of 8–15 rounds × 400–500 calls, pinned to one core at a raised priority, on a machine
that other work shared), 1e500eb (the end of round 4) → 1681764 (that round's end) → this round:

| | app µs 1e500eb | app µs 1681764 | app µs now |
|---|---:|---:|---:|
| status | 89 | 156 | 152 |
| recall, repeated query | 137 | 212 | 214 |
| recall, new query each request | 409 | 621 | 515 |
| propose | 244 | 340 | 309 |

Where a status call's ~65 µs went (py-spy, status): its transaction's commit writes 6 database pages
where it wrote 4 (tenant indexes on the journal and the ledger; ~4.5 µs a page), ~13 µs its events
(`credits.changed` and `request`), ~13 µs the findings judge (SPEC 3.8: the poll series of the
proposal, read each time), ~10 µs the typed records read at the store boundary (frozen
dataclasses, issue 13) and the rest the tenant's clock and scope checks. What this round changed:

- **A short ranking runs on the event loop** (`Database.in_snapshot`): the read snapshot on the
  second connection is taken at once on the loop's thread while it takes at most 2 ms of CPU (an
  SQLite progress handler looks at the thread's CPU clock every 2,000 steps); a longer one is
  interrupted and runs again on the reading thread, as do the next 8. The thread hop cost every
  ranking recall its wake-ups; with the next change, 621 → 515 µs.
- **The ranked rows are read without their stored access time** (the answer carries the recall's
  own): one correlated lookup per candidate less.
- **Fewer pages per commit**: the events table without AUTOINCREMENT (its `sqlite_sequence` row was
  one more page each request), the ledger with one index (its tenant's) instead of two, and the
  journal's oldest rows dropped in batches of 1 % of `--journal-size` (at most 64) instead of one
  per request once full (each single delete wrote the oldest journal page and its index page again);
  the bound stays a maximum, so a full journal holds 99–100 % of it (contract and README say so).
  Pages per commit (the WAL's growth over 500 calls): status 8.7 → 6.7 while the journal is not
  full and ~10.7 → ~6.7 once it is; propose 16.9 → 14.8 (not full).
- **One events row per request** (`events.batch`): a request's `credits.changed`, `request`,
  `proposal.created` … are stored together, each keeping an id of its own.
- The new proposal comes back from its `INSERT … RETURNING *`; a tenant's auto-approve policy is
  parsed once per policy text; request ids from a generator of the process's own; records from rows
  built positionally.
- Measured and left: the proposals' tenant and expiry indexes as one (a tenant's listing would sort
  in a temporary B-tree), idempotency records `WITHOUT ROWID` (the snapshot orders them by rowid),
  dropping the journal's tenant index (a tenant's reset would scan the whole journal).

Round 8 (no behaviour of the contract changed; the suite passes, plus tests for each change).
Profiled with per-statement SQLite timings through a proxy of the connection and cProfile, in
process with four calls at a time (`asyncio.gather`, as a loaded server's event loop sees them),
and by counting commits under wrk. App CPU µs per call in process, four at a time, the least of
4–5 rounds × 1,000–1,200 calls on one core, the round's start (6c746c9) against its end, three
alternations on a machine that other work shared: status 162–166 → 138–147, recall (repeated
query) 224–258 → 193–207, propose 322–376 → 309–345.

- **Group commit** (`Database.write_in_group`, one worker): the v1 requests whose transactions run
  in the same turn of the event loop share one `BEGIN IMMEDIATE … COMMIT`, each in a savepoint of
  its own (one that fails rolls back alone), and each is answered only after that commit
  (`group_committed`). A request whose event loop has nothing else ready commits at once (a request
  that arrives meanwhile starts in the next turn, so nobody could join); one with others ready
  yields one turn and the first member back commits. Under wrk -c8, 7,877 status calls made 2,000
  commits (3.9 a commit); propose and status stay at ~2.5–4; a new-query recall ~1.2, because a
  ranking commits the open group first (no other process waits for the write lock meanwhile).
  Four status calls at a time: the SQLite share of a call fell from 73 µs (1e500eb, one commit
  each) to 67 µs, the commit's share from 23 to 13 µs. Several workers commit each request alone.
- **The expiry sweep runs only when due**: the request's state statement reads the tenant's
  earliest pending expiry (a seek in the index `proposals (status, tenant_id, expires_at)`, which
  replaces `(status, expires_at)`; the tenant index stays, so a tenant's listing never sorts, which
  a test holds through the query plans); a status call or propose with nothing due skips the
  sweep's `UPDATE` (~8.8 µs of a status call).
- **A repeated recall is one transaction with one state read** (it read the state before ranking
  and again in the write transaction).
- **A short ranking runs on the worker's own connection**, in a read snapshot: its page cache stays
  warm across its own commits, where the reading connection's cache is dropped whenever the file
  changed (in process, a new-query recall ~8% less CPU); a ranking past its budget still moves to
  the reading thread, and a short one no longer waits while a long one holds that thread.
- **Where the hot path stands against 1e500eb** (the end of round 4; four calls at a time, same
  minutes, same machine): a status call's SQLite is now below it (67 against 73 µs); what remains
  above it is Python — the request's events row (`emit`, `batch`, `append`: ~10 µs), the typed
  records at the store boundary (~7 µs), the group's savepoints (~3 µs), the judge's checks and the
  tenant's clock. A new-query recall's ranking costs what it cost there (FTS5 ~115–130 µs, the
  winners' rows ~13 µs); the request around it writes more (the events row, the tenant indexes).

Round 7 (no behaviour of the contract changed; the suite passes, plus tests for each change):

- **A status poll is judged in one row, or not at all.** A proposal's poll series keeps its newest
  polls in its own row (`poll_series.recent`, at most 31) instead of a table of polls, and the table
  is clustered on its key (`WITHOUT ROWID`): a poll judged in full reads and writes one row in one
  b-tree (a series past ~16 polls spills its polls to an overflow page), where it made three or four
  statements in three b-trees and trimmed the table of polls (in process, a polite client's poll
  — each of another proposal, section 8's last row — cost 46 µs over the judge-off app, now ~23 µs).
  Once a series was reported and answered without a failure, a poll answered 200 without a retry
  header changes nothing in it: the request's state statement reads that as one `EXISTS`
  (`findings.poll_is_settled`, 0.3–1.8 µs) and the judge is not called (a status call in section
  1's scenario, which polls one proposal in a tight loop: the judge's 13 µs of ~165 µs is gone).
- Section 8 times the judge directly (each `V1Pipeline._observe` call clocked), beside the on/off
  difference, which is only known to a few µs.
- **Where a status call's time goes now** (SQLite statements timed one by one through a proxy of
  the connection, 3,000 calls, in process on one core; ~94 µs of SQLite in a call of ~150–190 µs):
  COMMIT 35 µs, the journal insert 11, the expiry sweep 9, the request-start statement 7, the
  events insert 6.5, the transaction's state statement 6, the charge 6, the proposal read 5, the
  ledger insert 4.5, BEGIN 4.4. The commit is the WAL: a status call dirties 6.7 pages on average
  (a recall 7.7, a propose 15.2, measured by the WAL's growth), and SQLite writes each as a frame
  with two `pwrite` calls (~3.1 µs a frame on this VM, measured alone), besides ~8 `fcntl` lock
  calls per request (~1.1 µs each). The pages: the account's row, the journal's table and its
  tenant index, the events table, the ledger's table and its tenant index. What would make a
  status call markedly cheaper is writing fewer b-trees per request — the `request` event is a
  copy of the journal row in a second table, and each tenant index is a page of its own — which
  changes how the journal, the event stream and the ledger are stored: not done here.

Round 6 (no behaviour of the contract changed; the suite passes, plus tests for each change):

- **The findings judge looks up less** (section 8 measures it against the same fake without it):
  the write transaction's state statement also says whether the watch on failed answers holds any
  row (`EXISTS (SELECT 1 FROM client_watch)`), and while it holds none a recall or propose has no
  earlier failure to look up, so its judge reads nothing; a status poll still reads its proposal's
  poll series (one primary-key lookup, ~3 µs of SQLite), now positionally, and builds the previous
  answer only when that answer failed. In process the judge costs a status call 8–20 µs (6–12 %
  of the app's CPU over repeated runs), a propose 0–30 µs (0–7 %), a recall 0–6 µs; over HTTP
  (section 8) every difference with and without the judge was within the spread of the rounds.
- Start-up, which the hot path does not see but every test that starts a server does:
  `fake-lucy serve` no longer imports SQLAlchemy or SQLModel (the tables are created from
  `store/schema.sql`, the SQLModel declarations rendered and checked by a drift test), the operator
  commands import none of the server, the SDK loads httpx on first use, and `lucy-memory-mcp` ends
  without the interpreter's teardown once stdin closes (0.24 → 0.006 s from EOF to exit).
  `import fake_lucy.cli`: ~0.83 → ~0.21 s.

A slow recall (section 6; contract change: only the first 32 distinct terms count): the ranking
moved out of the write transaction and off the event loop, into a read snapshot on a second,
read-only connection on a thread of its own at nice 10 (`Database.in_snapshot` in
`fake_lucy/store/connection.py`); the write transaction keeps the access times, charge, ledger and
journal. The same two scenarios on the code before (every term counted, ranking in the write
transaction on the event loop): 9.8× a one-term recall (47.8 vs 4.9 ms p50) and a status p99 of
1,133 ms under the long recalls against 6.7 ms idle (169×). Without the lower priority the thread
alone gave 5.1× (the rankings took the CPU from the event loops on two cores). Since round 5 a
ranking that takes at most 2 ms of CPU runs on the event loop instead (no thread hop); a longer one
still goes to the thread.

Round 4 (no behaviour of the contract changed but one fix, below; the suite passes, plus tests for
each change):

- **jsonschema-rs decides validity, jsonschema words the errors**
  (`lucy_memory/_contract/validation.py`): jsonschema took ~23 µs for a recall body and ~36 µs for
  a propose body; the compiled validator answers in 0.4 and 1.1 µs (its custom keyword carries
  `x-maxUtf8Bytes`). Only a body it rejects goes to jsonschema, for the `details.errors`. A property
  test holds both to the same verdict on drawn and bent instances of every schema; it found that
  jsonschema's `pattern` used Python's `$`, which also matches before a final newline (so
  `"main-database
"` passed as a topic) where JSON Schema's ECMA-262 `$` does not: fixed, with
  tests. The SDK and the MCP server validate through the same class and gain the same.
- **Recall keeps its ranked answers per index epoch** (`RecallCache` in `fake_lucy/domain/recall.py`):
  `server_state.index_epoch` takes a new random value in every transaction that writes the
  full-text index (two helpers in `lifecycle.py`, reset, the bench seeder; a test holds the index
  writes to those helpers), and the memories rows a recall returns change only together with the
  index. Each worker keeps up to 256 ranked answers or ~16 MiB (least recently used go first)
  for the epoch it last read inside a recall's own write transaction, so workers on one file see
  a change at once. A hit skips the full-text query, the rows and the memory objects (~185 µs); the
  access
  times, the charge, the ledger row and the journal row are written as for a miss.

Round 3 (no behaviour of the contract changed; the suite passes, plus tests for each change):

- **Responses encoded with orjson** (`json_bytes` in `fake_lucy/http/problems.py`): the same bytes
  as the standard library's compact UTF-8 output but for the spelling of some floats (same values;
  the standard library stays as the fallback for what orjson refuses). A recall answer: 25 → 1.6 µs.
- **Access times in a narrow `memory_access` table** (`fake_lucy/store/tables.py`): a recall stamps
  `last_accessed_at` on every memory it returns; in the wide `memories` rows that dirtied one page,
  so one WAL frame (~4 µs) at commit, per returned memory. Rows of ~40 bytes share pages: the
  recall's commit went from ~40 to ~18 µs. Older files have their access times moved at start.
- **v1 routes in front of FastAPI's middleware stack** (`V1Routes` in `fake_lucy/app.py`), adding the
  version header and answering an unexpected error with the 500 problem themselves (~3 µs).
- Measured and left: `wal_autocheckpoint` 20,000 pages (no change over wrk rounds), and a
  rowid-partitioned index (each scope's memories in their own rowid range, matched by
  `rowid BETWEEN` instead of the scope-tag phrase: identical scores; 96 vs 78 µs on the bench
  store of 1,000 memories in 2 scopes, 349 vs 485 µs at 100,000 in 100 scopes — slower where the
  throughput is measured, so not taken).

Round 2 (per request: ~15 SQL statements and two commits → ~9 statements and one commit for
status; no behaviour of the contract changed: the suite passes unchanged, plus tests for the cache):

- **`server_state` read once per request and once per transaction** (`fake_lucy/domain/server_state.py`):
  on arrival one statement gives the clock, whether any fault can still fire and the credential
  epoch; inside the write transaction one statement gives the clock, the billing authority, the
  account's balance and (again) whether a fault can fire. Before, the clock was read three to four
  times per request, the fault table twice, billing and balance separately.
- **The journal row joins the request's own transaction** when no fault touched the request and
  none is armed at its commit (then no `after_commit` fault or `delay_ms` can apply); otherwise it
  is written after step 14 as before (faults, drops, every error path). Same row, same bound.
- **Principals cached per token hash** (`PrincipalCache` in `fake_lucy/domain/principals.py`),
  valid for one `server_state.auth_epoch`, which credential create/revoke, tenant policy changes
  and reset/seed set to a new random value. Every worker reads the epoch on arrival, so a revoke on
  one worker is refused by the next request on the other (test in tests/fake/test_workers.py).
  An older database file gets the column at start.
- **The proposal-id schema check of status cached per id** (a pure function of the id; clients
  poll one id, as the benchmark does; a first call for an id pays the jsonschema check, ~8–20 µs).
- `clock.format_us` caches the whole-seconds text (one `strftime` per second instead of per call).
- FastAPI's native telemetry off (a per-request provider check, ~4 µs; the bare app has the same
  setting so the ratio stays fair), no body read when no header declares one, pre-encoded response
  headers, request headers read once.
- Measured and left: the global expiry sweep on status costs ~2 µs (a row-only expiry would
  change what an administrative delete supersedes, which does not sweep), SQLite `mmap_size`,
  `cache_size` and `wal_autocheckpoint` (no measurable change), `gc.freeze()` after start (none).

Round 1:

- **SQLite `synchronous = OFF`** (was NORMAL) in `fake_lucy/store/connection.py`: in WAL mode NORMAL
  fsyncs at every checkpoint, which a write-per-request server hits every ~100 requests; it cost
  ~40% of a recall in process. A commit still reaches the OS before the response, so state
  survives the process crashing or being killed; only an OS crash or power loss can lose or
  corrupt it (README, *Running the fake*).
- **JSON Schema `$ref`s inlined once** when a validator is built (`lucy_memory/_contract/validation.py`):
  jsonschema resolved every `$ref` through the `referencing` registry on every call (urljoin,
  pointer walks), 60–80% of validation time. Only a `$ref` with nothing but annotations beside it
  is replaced, recursion or anything else leaves the schema as it is; a differential fuzz of
  58,500 instances over every schema gave identical errors. Propose validation 149 → ~30 µs.
- **The three v1 routes dispatched before FastAPI's router** (`V1Routes` in `fake_lucy/app.py`): an
  exact method + path match calls the same pipeline handler; everything else (405, 404, control
  API) still goes through FastAPI. Saves the router's matching and dependency solving (~20% of a
  status call).
- **Recall ranking** (`fake_lucy/domain/recall.py`): the ranking query reads only the sort keys
  (full rows are loaded for the winners only), rows are read in rank order until the rounded score
  drops below the limit-th one (instead of re-running the query for *all* matches whenever the
  rounded score tied at the edge, which synthetic and real data do often), and the tie-break is
  two stable sorts on the stored fixed-width timestamps instead of parsing every timestamp. Same
  results (differential test against the old function on tie-heavy data); at 1M memories the
  server-side p50 went from ~24 ms to ~7–10 ms.

Misses, and why (the verdicts are the tables' above; this machine's speed varies by up to half
from hour to hour, and the bare endpoints feel it most, so one ratio moves by several hundredths
between runs: over round 8's three runs of section 1 on its final code, status 0.54–0.59×, recall
0.43–0.55×, propose 0.32–0.41×, a new-query recall 0.23–0.27×). Against round 4's code (1e500eb)
in the same minutes (`python -m benchmarks.compare_commits 1e500eb`: both fakes and the bare app up
at once, wrk rounds interleaved, best round each), two runs: 4 rounds of 4 s gave round 8's code
status 0.52× against 0.59×, recall 0.47× against 0.56×, propose 0.36× against 0.43×, a new-query
recall 0.25× against 0.31×; 2 rounds of 2 s gave 0.64× against 0.67×, 0.56× against 0.51×, 0.41×
against 0.46×, 0.28× against 0.28×. So status answers 4–12 % fewer requests a second than there,
propose 11–16 % fewer, a new-query recall 0–19 % fewer, and the repeated recall between 16 % fewer
and 10 % more: the cost of what the contract gained since (tenants, events, findings, snapshots),
less what rounds 5–8 won back:

- **Proposal status (target 0.60×).** Round 4's code reached 0.64× with a status call that wrote
  four pages. Since then the contract gained tenants, events, findings and snapshots: a status call
  now also writes the journal and ledger rows with their tenant (an index each) and an events row
  (`credits.changed` and `request`), and the request reads its tenant's clock and its poll series'
  state. Group commit brought its SQLite back below round 4's; what is left above is Python (the
  events row, the typed records, the judge's checks; round 8's last point). A bare GET answers in
  ~150–250 µs here, so 0.60× allows ~250–420 µs a call, and uvicorn, h11 and the socket take the
  same share of both. What would make a status call markedly cheaper is writing fewer rows per
  request — the `request` event is a copy of the journal row in a second table — which changes how
  the journal and the event stream are stored: not done.
- **Recall (target 0.50×)**, the repeated query, served by the cache of ranked answers: the call is
  one transaction (round 8), and what remains is the stamping of ten access times, the charge, the
  journal and events rows and a 4.5 KB answer with six headers.
- **Recall with a new query each request (100 tenants: target 0.40×).** Each tenant ranks in its
  own FTS5 table, so with 100 tenants of 1,000 memories a tenant's ranking costs what one tenant of
  1,000 memories alone costs. What is left is FTS5's work: bm25 scores every match (~50 on the
  bench store) after counting each phrase's rows (~115–130 µs in process), then the winners' rows
  (~13 µs). 0.40× would need a ranking recall at about a status call's cost; nothing here makes
  FTS5's scoring cheaper. Tried and left: a rowid-partitioned index (round 3), FTS5's `rank` column
  with `ORDER BY rank` (slower: 113–155 µs against 79–86 µs for the `bm25()` expression), and a
  faster HTTP stack, which lifts the bare endpoint more (with httptools and uvloop on both, bare
  GET/POST went to 16,868/14,644 req/s, the fake's status to 0.47×, a ranking recall to 0.16×).
- **Propose (target 0.35×; 100 tenants 0.40×)**: RFC 8785 hashing, the secret scan and the
  writes (proposal, charge, ledger, idempotency record, journal, events) remain.
- **moto** serves SQS through werkzeug's threaded development server, which closes the connection
  after every response, and dispatches through moto's all-services router; it is the slowest
  server here by far, and slows further as SendMessage fills the queue over the rounds.
- **Recall growth** is sub-linear in the store size but not flat: the query's common term matches
  ~1 in 10 memories of the scope, so the number of matches bm25 must score grows with the store;
  the per-query fixed cost (parsing, the transaction, HTTP) is what makes small stores cheap.

### The hot path after the tenants' journal bound and the loopback Host check

Two changes of this round run on every v1 request:
- **The per-tenant journal bound:** one upsert into `journal_counts` per request, ~3–5 µs of a ~30 µs
  commit in isolation.
- **The `Host` check of a loopback bind:** ~3 µs a request at first. The check now remembers its answers
  (a client sends the same `Host` each time), which brought it to ~0.1 µs.

Measured against the code before them (99158c8):
- **In process**, CPU time per call, the 10th percentile of 12 slices, three alternations:
  - proposal status: 347–385 µs before, 357–371 µs after;
  - a new-query recall: 450–467 µs before, 449–463 µs after.
- **Over HTTP** (`python -m benchmarks.compare_commits 99158c8 --seconds 4 --rounds 4`, best round each):

  | operation | before | after |
  |---|---:|---:|
  | status | 0.48× | 0.48× |
  | recall | 0.47× | 0.49× |
  | new-query recall | 0.26× | 0.25× |
  | propose | 0.33× | 0.34× |

Both are within the noise of these machines.

An earlier run, before the check remembered its answers, read 0.47× against 0.57× for status from
best-of-3 rounds. Its rounds spread over 2,370–3,229 req/s for the same code, so best-of-3 alone is not
enough to tell a change of a few per cent.

### The hot path after row numbers that are never given twice

Proposals, the journal and the ledger now number each new row above a floor kept when a tenant's
reset, deletion or restore removes rows (`fake_lucy/store/numbering.py`): every insert into them
reads the table's newest number and its floor (two one-page reads, no write). Measured against the
code before this round (158f8c4):
- **In process**, CPU time per call, the 10th percentile of 1,500 calls, three alternations: propose
  570–591 µs before, 561–647 µs after; proposal status 344–484 µs before, 350–355 µs after.
- **Over HTTP** (`python -m benchmarks.compare_commits 158f8c4 --seconds 4 --rounds 4`, best round each):

  | operation | before | after |
  |---|---:|---:|
  | status | 0.50× | 0.49× |
  | recall | 0.43× | 0.43× |
  | new-query recall | 0.24× | 0.25× |
  | propose | 0.29× | 0.31× |

Within the noise of these machines, as the rounds' spread shows (propose 1,189–1,561 req/s for the same
code).

### The hot path after streams woken by their own worker and typed storage failures

Each write of events now tells the streams this process serves (`events.watch`: a dictionary look-up
per write, and a `call_soon_threadsafe` per open stream), and an unexpected exception is classified
(a storage failure or a bug) only once it happens. Against the code before (9df8aa6),
`python -m benchmarks.compare_commits 9df8aa6 --seconds 4 --rounds 4`, best round each:

| operation | before | after |
|---|---:|---:|
| status | 0.54× | 0.53× |
| recall | 0.50× | 0.51× |
| new-query recall | 0.25× | 0.25× |
| propose | 0.33× | 0.35× |

The same within the rounds' spread (propose 1,761–1,813 req/s before, 1,798–1,925 after).

### The hot path after the schema libraries load when first needed

`referencing` now loads with the first validator and `jsonschema` with the first refused instance
(a process's start, not its requests: a valid body never reached jsonschema before either).
Against the code before (150f83c), `python -m benchmarks.compare_commits 150f83c --seconds 4
--rounds 4`, best round each:

| operation | before | after |
|---|---:|---:|
| status | 0.54× | 0.51× |
| recall | 0.50× | 0.50× |
| new-query recall | 0.26× | 0.25× |
| propose | 0.36× | 0.35× |

The same within the rounds' spread: status's best round before was one outlier (3,408 req/s; its
other rounds 3,077–3,084, the medians 3,084 before and 3,077 after).

### The secret scanner after the patterns' rework

The secret patterns grew from 9 to 26 (a corpus of about 830 notes now holds them: far fewer
ordinary notes refused, far more credential forms found), and the scanner learned four quick ways
that answer exactly what the plain patterns do (property tests check them): a pattern's leading
word boundary is checked after its literal is found, invisible characters are looked for in
non-ASCII runs only, `requires_any` passes over a text that lacks a pattern's separator, and text
with a single form skips the per-pattern generator. CPU per `SecretScanner.find`, best of 5 × 5,000
calls, the code before this round (bb42cb5) and after the first rework, in alternation on a machine
that other work shared:

| text | before | after the first rework |
|---|---:|---:|
| the bench's propose content (54 characters) | 17–25 µs | 26–42 µs |
| a bench Idempotency-Key (21 characters) | 11–14 µs | 22–37 µs |
| 120 characters of prose, ASCII | 35–49 µs | 42–60 µs |
| the same with one accented letter | 168–177 µs | 53–56 µs |

A review of that rework found one pattern (`password_phrase`) whose blanks two parts could share:
8 KB of blanks after "password for" took 107 s. Its blanks are now bounded runs, and
`python -m benchmarks.bench_secrets` measures ordinary texts and texts built to make each kind of
pattern backtrack, all 8 KB (the content's limit). Its run after the fixes:

Ordinary texts:

| text | characters | µs per find |
|---|---:|---:|
| a propose's content (54 characters) | 54 | 16 |
| an SDK idempotency key | 35 | 20 |
| prose, 120 characters | 116 | 56 |
| the same with an accent | 118 | 57 |
| 8 KB of prose | 8,192 | 1,753 |
| 8 KB of accented prose | 8,192 | 4,271 |

Texts built to make a pattern backtrack:

| text | characters | µs per find |
|---|---:|---:|
| password for + blanks | 8,192 | 1,299 |
| password of + tabs | 8,192 | 1,241 |
| password is + blanks + a zero-width space | 8,192 | 2,854 |
| curl + repeated -u | 8,192 | 2,641 |
| curl -u + one long user | 8,192 | 2,514 |
| repeated host:port: | 8,192 | 4,948 |
| a Docker auth of one long run | 8,192 | 5,861 |
| repeated A_TOKEN= | 8,192 | 29,293 |
| repeated password: | 8,192 | 6,640 |
| repeated api_key= | 8,192 | 20,852 |
| api_key: + dotted words | 8,192 | 5,510 |
| repeated 'password for x is ' | 8,192 | 8,113 |
| digits and :AA | 8,192 | 5,664 |
| 32 hexadecimal digits and -us, repeated | 8,192 | 3,001 |

A propose scans its content and its key: after two more rounds of patterns (a second and a third
review's notes) and `requires_any` checked by one character class, its short texts cost about what
they did before this round (16 and 20 µs above), text with any non-ASCII character costs less than
before, and no text of the content's size costs more than about 30 ms (repeated `A_TOKEN=`: each
repeat is a key and a value for three patterns to look at). `python -m benchmarks.compare_commits
bb42cb5 --seconds 4 --rounds 4`, run after the first rework while other work shared the machine,
spread too far to tell (propose 649–1,062 req/s before, 639–813 after; the bare POST 1,859–2,519):
0.42× before and 0.32× after for propose, best round each, within that spread.

### The hot path after plain rows, temporary data in memory and the body's hash by orjson

Measured by instruction counts, which other work on the machine does not move (callgrind; in
process through a direct ASGI driver on the 100-tenant store, 200 calls after 100 of warm-up), and
by `strace -c` of `fake-lucy serve` under wrk:

| change | operation | before | after |
|---|---|---:|---:|
| recall reads tuples by position (1) | uncached recall, k instructions | 3,448 | 3,112 |
| fields found once per query shape (2) | status, k instructions | 823 | 791 |
| the body's hash by orjson (3) | propose, k instructions | 1,611 | 1,537 |
| `temp_store = MEMORY` (4) | propose under wrk, `pwrite` calls | 33 | 10 |
| the same | propose under wrk, system µs | 95–103 | 38–50 |

(1) Not `sqlite3.Row` looked up by name for each field. (2) `record_from_row`. (3) Where orjson
writes RFC 8785's bytes; a hypothesis test holds it to `rfc8785`. (4) A group's savepoints kept
their undo pages in a temporary file past 64 KiB, opened once per ~8 proposes; now none.

In this run the last one shows in sections 1 and 3: propose at 0.42× the bare POST (0.31× in the
run before) and 2.28× the respx stub in process (3.75×). Section 7's ratios are not met. Its
instruction counts put status at 0.58× and propose at 0.43× of their bare endpoints, near their
targets of 0.60× and 0.40×. The req/s and CPU ratios of the same run are lower (0.41× and 0.29×):
the interpreter retires fewer instructions per µs than SQLite, and in this run the fake's CPU per
request grew more than the bare app's while the machine was shared (status 578 µs here, 369–373 µs
with the machine quiet). Recall's own floor is in section 7: its ranking statement alone,
bm25 over the 51 matches of the scope, takes 180 µs. The status call's work beyond the bare GET
adds 343 µs. Even with nothing else, a recall then reaches 0.34×. The 0.40× target needs a recall
whose work besides the statement costs less than what a status call does.
"""


if __name__ == "__main__":
    main()
