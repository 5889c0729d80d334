"""Shared set-up of the schemathesis runs: profiles, checks, throwaway fakes and the run tally.

``LUCY_FUZZ_PROFILE=fast`` (the default, part of ``make test``) or ``deep`` (``make fuzz``) sets how
many examples Hypothesis draws per operation and how long the stateful scenarios are.
``LUCY_FUZZ_SEED`` pins the deep profile's seed to replay a run; the fast profile always uses one seed.

Both profiles run every phase (examples, coverage, fuzzing) on every operation of each run; the fast
one draws a few examples per operation in the fuzzing phase (the coverage phase's boundary and
negative cases are the systematic part, the same in both), and leaves out one coverage phase:
``put_snapshot``'s, ~1,200 cases over the whole-state document's schema (half of all the fuzzing's
cost), which the deep profile runs; the fast one still fuzzes it, with 2 examples instead of the
profile's 5 (drawing a whole-state document is Hypothesis' slowest work here: 5 took ~6.5 s, 2 ~3 s).
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import json
import os
import re
import shutil
import tempfile
import time
import unittest
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
from schemathesis.checks import CheckContext, load_all_checks, not_a_server_error
from schemathesis.core.control import SkipTest
from schemathesis.core.errors import InvalidHeadersExample
from schemathesis.core.failures import FailureGroup, as_reported_failure
from schemathesis.core.result import Ok
from schemathesis.generation.feedback import FeedbackSources
from schemathesis.generation.hypothesis.builder import (
    InvalidHeadersExampleMark,
    MissingPathParameters,
    UnserializablePayloadMark,
)
from schemathesis.generation.hypothesis.reporting import ignore_hypothesis_output
from schemathesis.pytest._keys import track_schema
from schemathesis.pytest._test_builder import build_operation_test
from schemathesis.pytest.plugin import SchemaHandleMark
from schemathesis.pytest.warnings import (
    emit_constants_warnings,
    emit_openapi_auth_warnings,
    emit_unserializable_payload_warning,
)
from schemathesis.python._constants.orchestrator import make_constants_value_source

from fake_lucy.domain.seed import DEFAULT_SEED
from fake_lucy.testing import InProcessFake
from lucy_memory._contract import load_contract

__all__ = [
    "CHECKS",
    "DISRUPTIVE_CONTROL_OPERATIONS",
    "FUZZ_CREDITS",
    "FUZZ_TOKEN",
    "NEGATIVE_DATA_EXPECTED_STATUSES",
    "PROFILE",
    "STREAMING_CONTROL_OPERATIONS",
    "TALLY",
    "FuzzProfile",
    "OperationTests",
    "Tally",
    "fuzz_config",
    "not_a_server_error_unless_injected",
    "repair_positive_headers",
    "stateful_settings",
    "throwaway_fake",
]


@dataclasses.dataclass(frozen=True, slots=True)
class FuzzProfile:
    name: str
    max_examples: int  # per operation, fuzzing phase (the coverage and examples phases come on top)
    stateful_examples: int  # scenarios
    stateful_steps: int  # at most, per scenario
    seed: int | None  # None: a fresh seed per run (printed in the summary)
    snapshot_coverage: bool  # the coverage phase of put_snapshot (in the tenant admin's run)
    # test_validation_agreement: examples per request schema, per response schema
    agreement_examples: tuple[int, int]


PROFILES = {
    "fast": FuzzProfile(
        "fast",
        max_examples=5,
        stateful_examples=15,
        stateful_steps=6,
        seed=20_240_607,
        snapshot_coverage=False,
        agreement_examples=(25, 4),
    ),
    "deep": FuzzProfile(
        "deep",
        max_examples=600,
        stateful_examples=150,
        stateful_steps=20,
        seed=None,
        snapshot_coverage=True,
        agreement_examples=(400, 60),
    ),
}


def _profile() -> FuzzProfile:
    name = os.environ.get("LUCY_FUZZ_PROFILE", "fast")
    if name not in PROFILES:
        raise ValueError(f"LUCY_FUZZ_PROFILE must be one of {sorted(PROFILES)}, not {name!r}")
    profile = PROFILES[name]
    if profile.seed is None:
        seed = int(os.environ.get("LUCY_FUZZ_SEED") or int.from_bytes(os.urandom(4), "big"))
        profile = dataclasses.replace(profile, seed=seed)
    return profile


PROFILE = _profile()

# The checks of issue 7, by their schemathesis 4 names; every other check is off.
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "response_headers_conformance",
    "negative_data_rejection",
    "missing_required_header",
    "unsupported_method",
    "ignored_auth",
)

# What negative_data_rejection accepts as "refused": schemathesis' default list, plus 413 (a body over
# 64 KiB is refused at step 2, before its schema is read: a stateful run drew such a body and saw 413
# as a failure) and 431 (a header section over the parser's 16 KiB limit, refused before routing).
NEGATIVE_DATA_EXPECTED_STATUSES = (
    "400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "431", "5xx",
)  # fmt: skip

# Control operations that change the whole fake by design; covered by example tests instead.
DISRUPTIVE_CONTROL_OPERATIONS = (
    "reset",
    "create_fault",
    "clear_faults",
    "set_billing",
    "advance_clock",
    "set_clock",
    "revoke_credential",
    # replaces the whole state; and its schema is too large for quick random generation
    "put_snapshot",
)

# Control operations that answer a stream that never ends (an example never returns); tests/fake/
# test_events.py holds each of their answers to the contract.
STREAMING_CONTROL_OPERATIONS = ("stream_events",)

# Enough credits that 402 never answers a fuzzed request (reset restores them before each example).
FUZZ_CREDITS = 1_000_000
FUZZ_TOKEN = "lucy-fuzz-token-0123456789"
_PROJECT = {"kind": "project", "id": "project_example"}
FUZZ_SEED: dict[str, Any] = {
    "tenants": DEFAULT_SEED["tenants"],
    # the dev credential's rights under a seedable token (a seed token has at least 16 characters)
    "credentials": [{**DEFAULT_SEED["credentials"][0], "token": FUZZ_TOKEN, "credits": FUZZ_CREDITS}],
    "memories": [
        {
            "tenant": "tenant_dev",
            "scope": _PROJECT,
            "kind": "decision",
            "topic": "main-database",
            "content": "We approved PostgreSQL 16 as the main database.",
            "importance": 8,
        },
        {
            "tenant": "tenant_dev",
            "scope": {"kind": "workspace", "id": "ws_dev"},
            "kind": "preference",
            "content": "Answers are short and cite the memory they rely on.",
        },
    ],
}


_HEADER_RULES = {
    name: (re.compile(spec["schema"]["pattern"]), spec["schema"]["examples"][0])
    for name, spec in load_contract("agent-memory-api")["headers"]["request"].items()
    if "pattern" in spec.get("schema", {}) and spec["schema"].get("examples")
}


def repair_positive_headers(case: schemathesis.Case) -> None:
    """schemathesis' coverage phase cannot always satisfy a header's ``pattern`` and then sends a
    placeholder (``Lucy-Permissions: 0``) in a case it labels *positive*; the fake rightly answers
    400, and the example never reaches the body checks. Such a value is replaced by the header's
    contract example. Negative cases are left exactly as generated."""
    if case.meta is None or case.meta.generation.mode is not schemathesis.GenerationMode.POSITIVE:
        return
    for name, value in list((case.headers or {}).items()):
        rule = _HEADER_RULES.get(name)
        if rule is not None and isinstance(value, str) and not rule[0].search(value):
            case.headers[name] = rule[1]


NEGATIVE_REJECTIONS = [
    "400",
    "401",
    "403",
    "404",
    "405",
    "406",
    "409",
    "413",
    "415",
    "422",
    "428",
    "429",
    "5xx",
]


def fuzz_config(security_scheme: str, token: str) -> schemathesis.Config:
    """Authenticated, exactly ``CHECKS``, the profile's example count, no example database on disk."""
    generation: dict[str, Any] = {"max-examples": PROFILE.max_examples, "database": "none"}
    return schemathesis.Config.from_dict(
        {
            "seed": PROFILE.seed,
            "generation": generation,
            "checks": {
                "enabled": False,
                **{name: {"enabled": True} for name in CHECKS},
                "negative_data_rejection": {
                    "enabled": True,
                    "expected-statuses": list(NEGATIVE_DATA_EXPECTED_STATUSES),
                },
            },
            "auth": {"openapi": {security_scheme: {"bearer": token}}},
            "phases": {"stateful": {"max-steps": PROFILE.stateful_steps}},
            "operations": [] if PROFILE.snapshot_coverage else [_NO_SNAPSHOT_COVERAGE],
        }
    )


_NO_SNAPSHOT_COVERAGE = {
    "include-operation-id": "put_snapshot",
    "phases": {"coverage": {"enabled": False}},
    "generation": {"max-examples": 2},
}


def stateful_settings() -> hypothesis.settings:
    return hypothesis.settings(
        max_examples=PROFILE.stateful_examples,
        stateful_step_count=PROFILE.stateful_steps,
        deadline=None,
        database=None,
        derandomize=PROFILE.name == "fast",
        suppress_health_check=list(hypothesis.HealthCheck),
        phases=[hypothesis.Phase.generate, hypothesis.Phase.shrink],
    )


def throwaway_fake(name: str) -> tuple[InProcessFake, Path]:
    """An in-process fake on its own SQLite file in a fresh temporary folder, seeded for fuzzing.

    It is made when its module is imported, which every pytest-xdist worker does to collect, also
    one that runs none of the module's tests (and so none of its fixtures): the folder goes when the
    process ends, if a session fixture has not closed it before."""
    directory = Path(tempfile.mkdtemp(prefix=f"fake-lucy-{name}-"))
    seed = directory / "seed.json"
    seed.write_text(json.dumps(FUZZ_SEED), encoding="utf-8")
    fake = InProcessFake(directory / "fake-lucy.sqlite3", seed=seed)
    atexit.register(close_throwaway, fake, directory)
    return fake, directory


def close_throwaway(fake: InProcessFake, directory: Path) -> None:
    if directory.exists():
        fake.fake.close()
        shutil.rmtree(directory, ignore_errors=True)


def not_a_server_error_unless_injected(
    ctx: CheckContext, response: schemathesis.Response, case: schemathesis.Case
) -> bool | None:
    """``not_a_server_error``, except for a response an injected fault produced (``Fake-Lucy-Fault``)."""
    if "fake-lucy-fault" in {name.lower() for name in response.headers}:
        return None
    return not_a_server_error(ctx, response, case)


class Tally:
    """How many examples each run executed, which statuses they met, and how long it took."""

    def __init__(self) -> None:
        self.examples: collections.Counter[str] = collections.Counter()
        self.statuses: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)
        self.seconds: collections.Counter[str] = collections.Counter()
        self._started: dict[str, float] = {}

    def start(self, run: str) -> None:
        self._started.setdefault(run, time.perf_counter())

    def record(self, run: str, status: int) -> None:
        self.examples[run] += 1
        self.statuses[run][status] += 1
        self.seconds[run] = time.perf_counter() - self._started[run]

    def lines(self) -> list[str]:
        lines = [f"profile {PROFILE.name}, seed {PROFILE.seed}"]
        for run in sorted(self.examples):
            statuses = ", ".join(f"{status}×{n}" for status, n in sorted(self.statuses[run].items()))
            lines.append(f"{run}: {self.examples[run]} requests in {self.seconds[run]:.1f} s ({statuses})")
        return lines


TALLY = Tally()


class OperationTests:
    """A document's schemathesis tests, one per operation, each built when it runs.

    ``@schema.parametrize()`` builds every operation's Hypothesis test while pytest collects, and
    the coverage phase draws all of its cases there (~2.5 s of CPU for the three documents); under
    pytest-xdist every worker collects every test, so each worker paid it. Here pytest collects one
    parameter per operation (``labels``) and ``run`` builds that operation's test with the builder
    schemathesis' pytest plugin calls (``build_operation_test``, with the schema ``parametrize``
    marks): the same operations, phases, seed, coverage cases and checks (the config's), run as the
    plugin runs them. A failure is schemathesis' report (the failing checks and a curl line to
    reproduce it, the operation in the test's id), the plugin's post-run errors are raised, and an
    operation that schemathesis would skip fails instead. (A few fuzzing-phase values differ from an
    eager build, as they did before whenever another set of test files was collected: Hypothesis
    draws some of them from the constants of the modules loaded so far.)

    These are the plugin's own building blocks, not schemathesis' documented API (its lazy
    ``schemathesis.pytest.from_fixture`` fails under pytest 9.2: it reads ``Item._nodeid``); uv.lock
    pins the version, and a schemathesis that moves them fails this module's import.
    """

    def __init__(self, schema: schemathesis.BaseSchema, test: Callable[[schemathesis.Case], None]) -> None:
        self.test = schema.parametrize()(test)
        marked = SchemaHandleMark.get(self.test)
        assert marked is not None
        self.schema: schemathesis.BaseSchema = marked
        self.labels = [
            result.ok().label if isinstance(result, Ok) else result.err().label
            for result in self.schema.get_all_operations()
        ]
        # built here, as the plugin builds it when it collects: the constants of the app's modules
        self.feedback = FeedbackSources(constants_value_source=make_constants_value_source(self.schema))
        self._ready = False

    def run(self, label: str, config: pytest.Config) -> None:
        __tracebackhide__ = True
        if not self._ready:  # once per document and process, as the plugin does when it collects
            load_all_checks()
            track_schema(config, self.schema)  # for the checks that run once the session ends
            emit_openapi_auth_warnings(self.schema)
            emit_constants_warnings(self.schema)
            self._ready = True
        (result,) = [
            found
            for found in self.schema.get_all_operations()
            if (found.ok().label if isinstance(found, Ok) else found.err().label) == label
        ]
        if not isinstance(result, Ok):
            raise result.err()
        test = build_operation_test(
            config=self.schema.config,
            operation=result.ok(),
            test_func=self.test,
            given_kwargs={},
            feedback=self.feedback,
        )
        try:
            with ignore_hypothesis_output():
                test()
        except FailureGroup as exc:
            raise as_reported_failure(exc) from None
        except (SkipTest, unittest.SkipTest) as exc:
            pytest.fail(f"schemathesis skipped {label}: {exc}")
        unserializable = UnserializablePayloadMark.get(test)
        if unserializable is not None:
            emit_unserializable_payload_warning(unserializable)
        invalid_headers = InvalidHeadersExampleMark.get(test)
        if invalid_headers is not None:
            raise InvalidHeadersExample.from_headers(invalid_headers)
        missing_path_parameters = MissingPathParameters.get(test)
        if missing_path_parameters:
            raise missing_path_parameters
