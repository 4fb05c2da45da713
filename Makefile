# Developer entry points. Every target first runs scripts/setup.sh (idempotent, quick when
# everything is already installed), so each works on a fresh machine.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c

VENV := .venv
PY := $(VENV)/bin/python
# Lint only the directories that exist (some arrive with later work).
LINT_DIRS := $(wildcard polyflow tests server bench_polybench bench_ad examples scripts)
# Extra arguments for the baseline, e.g. `make baseline BASELINE_ARGS="--json baseline.json"`.
BASELINE_ARGS ?=
# Extra arguments for the benchmark suite, e.g. `make bench BENCH_ARGS="--kernels gemm,lu"`.
BENCH_ARGS ?=

# Extra arguments for the real code bases' builds, e.g. `make real-world REAL_WORLD_ARGS="--projects zlib"`.
REAL_WORLD_ARGS ?=

# Extra arguments for the compile-time fuzz run, e.g. `make fuzz FUZZ_ARGS="--count 200 --seed 5000"`.
FUZZ_ARGS ?=

.PHONY: setup run test lint baseline bench bench-mini bench-setup bench-ad bench-tune fuzz real-world

setup:
	@bash scripts/setup.sh

run: setup
	$(PY) examples/run_example.py

lint: setup
	$(VENV)/bin/ruff check $(LINT_DIRS)
	$(VENV)/bin/mypy polyflow server
	$(VENV)/bin/lint-imports --no-cache  # the layers of ARCHITECTURE.md (pyproject.toml)

# pytest's exit code 5 (no tests collected) is an error here, as every non-zero code is.
test: lint
	@rc=0; $(VENV)/bin/pytest -n 2 -q || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests (exit 5)" >&2; fi; \
	exit $$rc

baseline: setup
	$(PY) scripts/baseline_perf.py $(BASELINE_ARGS)

# The PolyBench-style suite against gcc, Polly and gcc's auto-parallelizer; reports go to
# bench_polybench/results/<date>-<size>.{json,md,png}. bench_polybench/setup.sh installs the peers.
bench-setup: setup
	@bash bench_polybench/setup.sh

bench: bench-setup
	$(PY) -m bench_polybench --size LARGE --threads 2 --repeat 3 $(BENCH_ARGS)

bench-mini: bench-setup
	$(PY) -m bench_polybench --size MINI --threads 2 --repeat 3 $(BENCH_ARGS)

# Reverse-mode gradients against their primal, JAX and PyTorch (CPU, float64); reports go to
# bench_ad/results/<date>-<size>.{json,md,png}. `BENCH_ARGS="--size small"` for a quick run.
bench-ad: setup
	$(PY) -m bench_ad --size full $(BENCH_ARGS)
	$(PY) -m bench_ad.checkpointing  # checkpointing's memory/time trade-off on a time loop

# Autotuning: tuned against default -O3 on 12 PolyBench LARGE kernels and the TC CPU set (against
# PyTorch), and the tuner's scaling over Dask workers; reports go to
# bench_polybench/results/<date>-tune.{json,md,png}. `BENCH_ARGS="--budget 1m --kernels gemm"`.
bench-tune: setup
	$(PY) scripts/bench_tune.py $(BENCH_ARGS)

# The long fuzz runs (nightly-style; make test runs a small sample of each):
# 1. the harder random programs' generator stays free of undefined behaviour (UBSan + ASan);
# 2. 1,000 of them at -O3, plus the 30 PolyBench kernels: compile time (p50/p95/max), isl budget
#    fallbacks, every output against gcc -O2 (OMP_NUM_THREADS=2); a table at the end;
# 3. 300 of the hard programs built for the GPU, their kernels run on the CPU emulation;
# 4. 1,000 of the ordinary random programs at -O3 against gcc, and built for the GPU (emulated).
fuzz: setup
	$(PY) tests/fuzz/check_ub.py 0 1000 --hard --jobs 2
	$(PY) tests/fuzz/compile_time.py --count 1000 --kernels $(FUZZ_ARGS)
	$(PY) tests/fuzz/compile_time.py --count 300 --gpu-emulate --jobs 2 $(FUZZ_ARGS)
	$(PY) tests/fuzz/ad_fuzz.py --count 300  # gradients of random programs against central differences
	$(PY) tests/fuzz/contraction_fuzz.py --count 200  # micro-kernels, transposed or not, against gcc
	$(PY) tests/fuzz/row_fuzz.py --count 200  # row sweeps through the register loops and their masked ends
	$(PY) tests/fuzz/ad_fuzz.py --count 150 --seed 300 --checkpoint-steps 2  # every taping loop checkpointed
	$(PY) tests/fuzz/stencil_ad_fuzz.py --count 200  # stencils in time loops: gathers, borders
	POLYFLOW_FUZZ_COUNT=1000 POLYFLOW_FUZZ_GPU_COUNT=1000 POLYFLOW_FUZZ_OPT_LEVEL=3 $(VENV)/bin/pytest -n 2 -q tests/test_random_programs.py

# Real C code bases (Debian's zlib, cJSON, GSL) built by their own build systems with gcc and with
# polyflow-cc, their own test suites run; timings and what polyflow compiled go to
# real_world/results/<date>.{md,json} (scripts/real_world.py).
real-world: setup
	$(PY) scripts/real_world.py $(REAL_WORLD_ARGS)
