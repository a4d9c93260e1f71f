# lakehouse-ingest: every target sets itself up; `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
VERIFY_REPEAT ?= 10
VERIFY_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help setup test test-slow slow-processes slow-connect check demo demo-s3 bench soak verify clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m tables.engine.session --warm
	touch $(STAMP)

setup: $(STAMP) ## Create .venv, install pinned dependencies, fetch and cache the Delta JARs

# One pytest run of the tests marked $(1), with the options $(2); pytest's exit 5 (nothing
# collected) fails it.
tier = $(PY) -m pytest -m "$(1)" $(2) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests for -m '$(1)'" >&2; exit 1; fi; exit $$rc

# The fast tier and the slow tier's processes run in WORKERS pytest processes (pytest-xdist),
# each with its own Spark session and lakehouse home, handed a whole test file at a time (its
# module fixtures run once): one process left about a third of the two cores idle in the fast
# tier; the slow tier's one process took 2,022 s where two took 1,577 s on a day of the same
# speed, its tests waiting on child JVMs, brokers and servers (CONTRIBUTING.md#test-tiers). FAST_WORKERS / SLOW_WORKERS override it; 0 runs in this process.
WORKERS ?= 2
FAST_WORKERS ?= $(WORKERS)
SLOW_WORKERS ?= $(WORKERS)
workers = $(if $(filter 0,$(1)),,-n $(1) --dist loadfile)
test: setup ## Fast tier: every test that starts no extra process (real Spark and Delta)
	@$(call tier,not slow,$(call workers,$(FAST_WORKERS)))

# A Python process holds classic Spark sessions or Spark Connect ones, never both (PySpark picks
# the mode per process), so the Connect tests run in a pytest process of their own, after the
# classic ones (beside them it saved nothing measurable: CONTRIBUTING.md#test-tiers).
test-slow: setup ## Slow tier: child drivers, brokers, servers, clusters, Spark Connect, the quick crash matrix
	@$(MAKE) --no-print-directory -k slow-processes slow-connect

slow-processes: setup
	@$(call tier,slow and not connect and not long,$(call workers,$(SLOW_WORKERS)))

# The Connect tier: its pytest process holds no classic session. The 300-batch soak runs in
# slow-processes; the 3,000-batch one is `make soak`'s, not CI's.
slow-connect: setup
	@$(call tier,connect and not long,)

check: setup ## Lint (ruff) and type-check (mypy, strict on the packages)
	$(VENV)/bin/ruff check tables quality ingest crash_matrix tests examples bench
	$(VENV)/bin/ruff format --check tables quality ingest crash_matrix tests examples bench
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict bench/run.py bench/soak.py crash_matrix

demo: setup ## Generate sample events and ingest them exactly once, twice, with a crash between
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash examples/demo/run.sh

demo-s3: setup ## The demo with tables, checkpoint and landing zone on a local S3-API server
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) examples/demo/s3.py

verify: setup ## Prove exactly-once under faults: scenarios repeated, then the full crash matrix (hours)
	LAKEHOUSE_VERIFY_REPEAT=$(VERIFY_REPEAT) $(PY) -m pytest -q tests/ingest/test_exactly_once.py
	$(PY) -m pytest -q -m long
	$(PY) -m crash_matrix --json crash_matrix/last-run.json $(VERIFY_ARGS)

bench: setup ## Measure what exactly-once costs, as ratios side by side (BENCH_ARGS=--help)
	$(PY) bench/run.py $(BENCH_ARGS)

soak: setup ## One ingest for 3,000 batches: latency and memory stay flat? (SOAK_ARGS=--help)
	$(PY) bench/soak.py $(SOAK_ARGS)

clean: ## Remove the virtualenv, demo state and caches (not the Ivy JAR cache)
	rm -rf $(VENV) examples/demo/.lakehouse examples/demo/landing examples/demo/s3 .pytest_cache .mypy_cache .ruff_cache
