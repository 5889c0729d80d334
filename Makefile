# Two commands do all setup on a fresh machine (Python >= 3.11 and make):
#   make serve   run the fake with the dev seed on 127.0.0.1:8787
#   make test    lint, type-check and run the whole suite
#   make fuzz    the schemathesis runs of tests/contract with the deep profile
SHELL := /bin/bash
PYTHON ?= python3
UV_VERSION := 0.13.8
UV := $(shell command -v uv 2>/dev/null || echo .tools/bin/uv)
RUN := $(UV) run --frozen

.PHONY: serve test lint typecheck pytest sync fuzz clean bench screenshots

.tools/bin/uv:
	$(PYTHON) -m venv .tools
	.tools/bin/python -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"

.venv/.synced: pyproject.toml uv.lock | $(UV)
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
	$(RUN) pytest -W error

test: lint typecheck pytest

# schemathesis over both OpenAPI documents with many more examples (make test runs the fast profile);
# LUCY_FUZZ_SEED=<n> replays a run, its seed is printed in the summary
fuzz: sync
	LUCY_FUZZ_PROFILE=deep $(RUN) pytest -W error tests/contract -p no:randomly

# The README's console pictures, taken by the browser tests (needs Chromium: apt-get install -y chromium)
screenshots: sync
	FAKE_LUCY_SCREENSHOTS=docs/screenshots $(RUN) pytest -W error -p no:randomly \
	  tests/console/test_browser.py -k replacement_as_a_difference

clean:
	rm -rf .venv .tools .fake-lucy .mypy_cache .pytest_cache .ruff_cache

# Not part of `make test`: HTTP (wrk), recall growth to 1M memories, in process, MCP; ~6 minutes.
# wrk comes from apt when missing (needs root or sudo); the results go to benchmarks/RESULTS.md.
bench: | $(UV)
	$(UV) sync --frozen --all-groups
	rm -f .venv/.synced
	@command -v wrk >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq wrk; \
	  elif command -v sudo >/dev/null; then sudo apt-get update -qq && sudo apt-get install -y -qq wrk; \
	  else echo "make bench needs wrk (apt-get install -y wrk)" >&2; exit 1; fi; }
	$(UV) run --frozen --all-groups python -m benchmarks.run_all
