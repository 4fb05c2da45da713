"""The floating-point contract (DESIGN.md, "Semantics we keep"): without -fassociative-math or
-ffast-math polyflow keeps C's order of every float operation, as gcc and clang do; with them
float reductions run in parallel and vectorized, deterministically, with a warning per loop,
and no less accurately than the sequential loop."""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import polyflow
from polyflow import Options

KERNELS = """
float sum(int n, float *x) {
  float s = 0.0f;
  for (int i = 0; i < n; i++)
    s += x[i];
  return s;
}
float dot(int n, float *x, float *y) {
  float s = 0.0f;
  for (int i = 0; i < n; i++)
    s += x[i] * y[i];
  return s;
}
float norm2(int n, float *x) {
  float s = 0.0f;
  for (int i = 0; i < n; i++)
    s += x[i] * x[i];
  return s;
}
"""
N = 1 << 20


def _datasets() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    ramp = np.arange(N, dtype=np.float32)
    return {
        "uniform": rng.random(N, dtype=np.float32),
        "normal": rng.standard_normal(N, dtype=np.float32),
        "lognormal": rng.lognormal(0, 4, N).astype(np.float32),
        "ascending": np.sort(rng.random(N, dtype=np.float32)),
        "descending": np.sort(rng.random(N, dtype=np.float32))[::-1].copy(),
        # one huge value first: the sequential sum then drops every small one
        "huge_first": np.concatenate([[np.float32(1e9)], np.ones(N - 1, np.float32)]),
        # huge values that cancel, between small ones
        "cancelling": np.where(ramp % 4 == 0, 1e7, np.where(ramp % 4 == 2, -1e7, 0.25)).astype(
            np.float32
        ),
        "alternating": ((-1.0) ** ramp * (1 + ramp % 1000)).astype(np.float32),
        "integers": (ramp % 1000).astype(np.float32),
    }


def _exact(kind: str, x: np.ndarray) -> float:
    x64 = x.astype(np.float64)
    terms = {"sum": x64, "dot": x64 * x64[::-1], "norm2": x64 * x64}[kind]
    return math.fsum(terms)


def _c_order(kind: str, x: np.ndarray) -> float:
    """The float sum in C's order (cumsum adds one term after the other, in float32)."""
    terms = {"sum": x, "dot": x * x[::-1], "norm2": x * x}[kind].astype(np.float32)
    return float(np.cumsum(terms, dtype=np.float32)[-1])


def _call(fn: polyflow.drivers.jit.CompiledFunction, kind: str, x: np.ndarray) -> float:
    if kind == "dot":
        return float(fn(N, x, x[::-1].copy()))
    return float(fn(N, x))


@pytest.fixture(scope="module")
def compiled() -> dict[tuple[str, str], object]:
    out = {}
    for contract, options in (
        ("strict", Options(opt_level=3)),
        ("associative", Options(opt_level=3, associative_math=True)),
    ):
        for kind in ("sum", "dot", "norm2"):
            out[(contract, kind)] = polyflow.compile_c(KERNELS, kind, options=options)
    return out


@pytest.mark.parametrize("kind", ["sum", "dot", "norm2"])
def test_by_default_float_reductions_keep_cs_order_bit_for_bit(
    compiled: dict[tuple[str, str], object], kind: str
) -> None:
    fn = compiled[("strict", kind)]
    assert "affine.parallel" not in fn.mlir("affine-opt")  # type: ignore[attr-defined]
    assert "reassoc" not in fn.mlir("llvm-dialect")  # type: ignore[attr-defined]
    for name, x in _datasets().items():
        assert _call(fn, kind, x) == _c_order(kind, x), name  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["sum", "dot", "norm2"])
def test_reassociated_sums_are_no_less_accurate_than_cs_order(
    compiled: dict[tuple[str, str], object], kind: str
) -> None:
    fn = compiled[("associative", kind)]
    assert 'reduce ("addf")' in fn.mlir("affine-opt")  # type: ignore[attr-defined]
    assert fn.warnings  # type: ignore[attr-defined]
    worse = []
    for name, x in _datasets().items():
        exact = _exact(kind, x)
        ours = abs(_call(fn, kind, x) - exact)  # type: ignore[arg-type]
        sequential = abs(_c_order(kind, x) - exact)
        if ours > sequential:
            worse.append(f"{name}: error {ours:.3g} against C's order's {sequential:.3g}")
    assert not worse, worse


FLOAT_SUM_C = """#include <stdio.h>
#define N 10000000
static float a[N];
float sum(int n, float *x) {
  float s = 0.0f;
  for (int i = 0; i < n; i++)
    s += x[i];
  return s;
}
int main(void) {
  unsigned int r = 12345;
  for (int i = 0; i < N; i++) {
    r = r * 1103515245u + 12345u;
    a[i] = (float)((r >> 8) % 20000);
  }
  double exact = 0;
  for (int i = 0; i < N; i++) exact += a[i];
  printf("%.8e %.8e\\n", sum(N, a), exact);
  return 0;
}
"""


def _run(exe: Path, threads: int) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    return subprocess.run([str(exe)], capture_output=True, text=True, env=env, check=True).stdout


def test_the_float_sum_of_ten_million_prints_gccs_value_unless_asked(tmp_path: Path) -> None:
    """The report that opened issue 24: a 10M-element float sum at -O3."""
    src = tmp_path / "fsum.c"
    src.write_text(FLOAT_SUM_C)
    subprocess.run(["gcc", "-O2", str(src), "-o", str(tmp_path / "gcc")], check=True)
    expected = _run(tmp_path / "gcc", 1)
    strict = polyflow.build_program(src, tmp_path / "strict", options=Options(opt_level=3))
    assert not strict.warnings
    assert {_run(tmp_path / "strict", t) for t in (1, 2)} == {expected}
    fast = polyflow.build_program(
        src, tmp_path / "fast", options=Options(opt_level=3, fast_math=True)
    )
    (warning,) = fast.warnings
    assert warning.startswith(f"{src}:6:3: warning:") and "reorders a floating-point" in warning
    outputs = {_run(tmp_path / "fast", t) for t in (1, 2, 3)}
    assert len(outputs) == 1  # the same bits for every thread count
    ours, exact = map(float, outputs.pop().split())
    gcc_sum = float(expected.split()[0])
    assert abs(ours - exact) < abs(gcc_sum - exact) / 100


def test_the_flags_are_gccs(tmp_path: Path) -> None:
    from polyflow.cli import options_from_args, parse_args

    src = str(tmp_path / "k.c")
    for flags, fast, associative in (
        ([], False, False),
        (["-ffast-math"], True, False),
        (["-fassociative-math"], False, True),
        (["-ffast-math", "-fno-fast-math"], False, False),
    ):
        options = options_from_args(parse_args(["build", src, *flags]))
        assert (options.fast_math, options.associative_math) == (fast, associative)
        assert options.reassociation == (fast or associative)
