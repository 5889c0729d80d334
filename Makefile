# Two commands do all setup on a fresh machine (Python >= 3.11 and make):
#   make serve   run the fake with the dev seed on 127.0.0.1:8787
#   make test    lint, type-check and run the whole suite (in parallel, pytest-xdist)
# While developing:
#   make test-fast   the suite without the tests marked slow (those that start processes of
#                    their own: fake-lucy serve, lucy-memory-mcp, pytest, a fresh virtual environment)
#   make fuzz        the schemathesis runs and the validators' agreement of tests/contract, deep profile
#   make example     the README's SDK example (docs/sdk_example.py) against a running `make serve`
SHELL := /bin/bash
PYTHON ?= python3
UV_VERSION := 0.13.8
UV := $(shell command -v uv 2>/dev/null || echo .tools/bin/uv)
RUN := $(UV) run --frozen
# pytest-xdist: one worker per core and one more (PYTEST_WORKERS=0 runs in this process): the tests
# wait on processes they start (servers, lucy-memory-mcp, Chromium) a tenth of the time, which the
# extra worker fills (on 2 cores: ~65 s against ~75 s with 2 workers). worksteal hands each
# worker one contiguous share of the suite (a module's tests, and its module fixture, mostly stay on
# one worker) and lets an idle worker take over half of the other's remaining tests;
# tests/conftest.py orders the files so that each share starts with its part of the long files (as
# the previous run measured them) and ends on short ones.
# Bytecode caches are what make a warm run fast (each test process, and each server or pytest a
# test starts, would otherwise compile every module again, and pytest re-rewrite its plugins'
# modules): the test targets write them even where the environment says PYTHONDONTWRITEBYTECODE.
# They go to the ignored __pycache__ folders and .venv.
PYTEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print(len(os.sched_getaffinity(0)) + 1 if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1) + 1)')
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(RUN) pytest -W error -n $(PYTEST_WORKERS) --dist worksteal

.PHONY: serve test test-fast lint typecheck pytest sync fuzz clean bench example screenshots

.tools/bin/uv:
	$(PYTHON) -m venv .tools
	.tools/bin/python -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"

.venv/.synced: pyproject.toml client/pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --group dev
	@touch $@

sync: .venv/.synced

serve: sync
	$(RUN) fake-lucy serve

lint: sync
	$(RUN) ruff check .
	$(RUN) ruff format --check .

typecheck: sync
	$(RUN) mypy

pytest: sync
	$(PYTEST)

test: lint typecheck pytest

test-fast: lint typecheck
	$(PYTEST) -m "not slow"

# schemathesis over both OpenAPI documents, and the compiled check against jsonschema, with many more
# examples and put_snapshot's coverage phase and examples (make test runs the fast profile);
# LUCY_FUZZ_SEED=<n> replays a run, its seed is printed in the summary
fuzz: sync
	LUCY_FUZZ_PROFILE=deep $(RUN) pytest -W error tests/contract -p no:randomly

# Against `make serve` in another terminal; LUCY_MEMORY_BASE_URL and LUCY_MEMORY_TOKEN choose another fake.
example: sync
	LUCY_MEMORY_BASE_URL="$${LUCY_MEMORY_BASE_URL:-http://127.0.0.1:8787}" \
	LUCY_MEMORY_TOKEN="$${LUCY_MEMORY_TOKEN:-lucy-dev-token}" \
	$(RUN) python docs/sdk_example.py

# The README's console pictures, taken by the browser tests (needs Chromium: apt-get install -y chromium)
# the pictures need the browser: without one the tests would skip, and nothing would be taken
screenshots: sync
	@$(RUN) python -c 'import sys; from tests.console.conftest import ENABLE, chromium_path; \
	  sys.exit(None if chromium_path() else "make screenshots: " + ENABLE)'
	FAKE_LUCY_SCREENSHOTS=docs/screenshots $(RUN) pytest -W error -p no:randomly \
	  tests/console/test_browser.py -k replacement_as_a_difference

clean:
	rm -rf .venv .tools .fake-lucy .mypy_cache .pytest_cache .ruff_cache

# Not part of `make test`: HTTP (wrk), recall growth to 1M memories, in process, MCP, a slow recall,
# tenants, the findings judge's cost; ~11 minutes.
# wrk and valgrind come from apt when missing (needs root or sudo); the results go to benchmarks/RESULTS.md.
bench: | $(UV)
	$(UV) sync --frozen --all-groups
	rm -f .venv/.synced
	@command -v wrk >/dev/null && command -v valgrind >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq wrk valgrind; \
	  elif command -v sudo >/dev/null; then sudo apt-get update -qq && sudo apt-get install -y -qq wrk valgrind; \
	  else echo "make bench needs wrk and valgrind (apt-get install -y wrk valgrind)" >&2; exit 1; fi; }
	$(UV) run --frozen --all-groups python -m benchmarks.run_all
