# Developer entry points. Every target first runs scripts/setup.sh (idempotent, quick when
# everything is already installed), so each works on a fresh machine.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c

VENV := .venv
PY := $(VENV)/bin/python
# Lint only the directories that exist (some arrive with later work).
LINT_DIRS := $(wildcard polyflow tests server bench_polybench examples scripts)
# Extra arguments for the baseline, e.g. `make baseline BASELINE_ARGS="--json baseline.json"`.
BASELINE_ARGS ?=

.PHONY: setup run test lint baseline

setup:
	@bash scripts/setup.sh

run: setup
	$(PY) examples/run_example.py

lint: setup
	$(VENV)/bin/ruff check $(LINT_DIRS)
	$(VENV)/bin/mypy polyflow

# pytest's exit code 5 (no tests collected) is an error here, as every non-zero code is.
test: lint
	@rc=0; $(VENV)/bin/pytest -n 2 -q || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests (exit 5)" >&2; fi; \
	exit $$rc

baseline: setup
	$(PY) scripts/baseline_perf.py $(BASELINE_ARGS)
