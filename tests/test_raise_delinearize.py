"""raise-delinearize end to end: C over flat pointers, `a[i*m + k]` with symbolic row lengths,
through the whole raising pipeline. For each kernel, `polyflow.raise_report` says it is fully
affine (or names why not), the JIT-compiled function computes what NumPy and the unraised build
do (arrays overlapping at run time included), and a program calling it prints what its
`gcc -O2` build prints. IR-level cases are in tests/lit/raising/raise-delinearize.mlir."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from difftest import check_program_against_gcc
from mlir import ir

import polyflow
from polyflow import passes, raising
from polyflow.frontend.c import emit_c_module
from polyflow.frontend.c_parse import parse_c
from polyflow.ir.functions import raisable_functions
from polyflow.raising import delinearize


@dataclass(frozen=True)
class FlatKernel:
    """A C function over flat pointers, what raising should make of it, how to call it from a
    C `main` (for gcc) and how to check it from Python (JIT)."""

    name: str
    source: str
    main: str  # the body of main(); `fill(ptr, count, seed)` and `report(label, ptr, count)`
    reason: str | None  # None: fully affine; else a regex the report's reasons must match


MM = FlatKernel(
    "mm",
    """
void mm(int n, int m, int p, double *C, const double *A, const double *B) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < p; j++) {
      C[i*p+j] = 0;
      for (int k = 0; k < m; k++)
        C[i*p+j] += A[i*m+k]*B[k*p+j];
    }
}
""",
    """
  int n = 9, m = 7, p = 5;
  double *A = malloc(sizeof(double) * 200), *B = malloc(sizeof(double) * 200);
  double *C = malloc(sizeof(double) * 200), *X = malloc(sizeof(double) * 200);
  fill(A, 200, 1); fill(B, 200, 2); fill(C, 200, 3); fill(X, 200, 4);
  mm(n, m, p, C, A, B);
  report("mm", C, n * p);
  mm(m, m, m, X, X + m, X); /* C overlaps A one row later, and is B */
  report("mm overlapping", X, m * m + m);
  free(A); free(B); free(C); free(X);
""",
    None,
)

STENCIL = FlatKernel(
    "jacobi_flat",
    """
void jacobi_flat(int n, int m, const double *in, double *out) {
  for (int i = 1; i < n - 1; i++)
    for (int j = 1; j < m - 1; j++)
      out[i*m + j] = 0.2 * (in[i*m + j] + in[(i-1)*m + j] + in[(i+1)*m + j]
                            + in[i*m + j - 1] + in[i*m + j + 1]);
}
""",
    """
  int n = 12, m = 10;
  double *in = malloc(sizeof(double) * 200), *out = malloc(sizeof(double) * 200);
  fill(in, 200, 5); fill(out, 200, 6);
  jacobi_flat(n, m, in, out);
  report("jacobi", out, n * m);
  jacobi_flat(n, m, in, in + m + 1); /* writes one row and one column on: reads its results */
  report("jacobi overlapping", in, n * m + m + 1);
  free(in); free(out);
""",
    None,
)

BOX = FlatKernel(
    "box_sums",
    """
void box_sums(int n, int m, int p, const float *a, float *out) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) {
      float s = 0.0f;
      for (int k = 0; k < p; k++)
        s += a[(i*m + j)*p + k];
      out[i*m + j] = s;
    }
}
""",
    """
  int n = 5, m = 4, p = 6;
  float *a = malloc(sizeof(float) * 200), *out = malloc(sizeof(float) * 200);
  for (int k = 0; k < 200; k++) a[k] = (float)(k % 17) * 0.25f - 1.0f;
  box_sums(n, m, p, a, out);
  for (int k = 0; k < n * m; k++) printf("%.9g\\n", out[k]);
  free(a); free(out);
""",
    None,
)

# Must NOT be delinearized: rows of length ld, of which the loop touches m; nothing says m <= ld.
PADDED = FlatKernel(
    "padded_add",
    """
void padded_add(int n, int m, int ld, double *A, const double *x) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      A[i*ld + j] += x[j];
}
""",
    """
  int n = 6, ld = 9;
  double *A = malloc(sizeof(double) * 200), *x = malloc(sizeof(double) * 200);
  fill(A, 200, 7); fill(x, 200, 8);
  padded_add(n, ld - 2, ld, A, x);
  report("padded", A, n * ld);
  padded_add(n, ld + 3, ld, A, A + 1); /* m > ld: rows overlap, and x is A */
  report("padded overlapping", A, n * ld + 3);
  free(A); free(x);
""",
    r"subscript 0 is not affine: %arg\d+ \* %arg2 \+ %arg\d+, "
    r"and %arg\d+ < %arg2 is not implied by the loop bounds",
)

# Must NOT be delinearized either: k runs to m inclusive, into the next row.
PAST_ROW = FlatKernel(
    "sums_past_row",
    """
void sums_past_row(int n, int m, const double *a, double *s) {
  for (int i = 0; i < n; i++) {
    s[i] = 0.0;
    for (int k = 0; k <= m; k++)
      s[i] += a[i*m + k];
  }
}
""",
    """
  int n = 7, m = 6;
  double *a = malloc(sizeof(double) * 200), *s = malloc(sizeof(double) * 200);
  fill(a, 200, 9);
  sums_past_row(n, m, a, s);
  report("past row", s, n);
  free(a); free(s);
""",
    r"subscript 0 is not affine: %arg\d+ \* %arg1 \+ %arg\d+, "
    r"and %arg\d+ < %arg1 is not implied by the loop bounds",
)

KERNELS = [MM, STENCIL, BOX, PADDED, PAST_ROW]

PROGRAM = """// polyflow: compiled={name}
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
{source}
static void fill(double *a, long count, int seed) {{
  for (long k = 0; k < count; k++)
    a[k] = (double)((k * 7 + seed * 13) % 23) / 8.0 - 1.25;
}}

static void report(const char *label, const double *a, long count) {{
  unsigned long hash = 14695981039346656037UL;
  double sum = 0.0;
  for (long k = 0; k < count; k++) {{
    unsigned long bits;
    memcpy(&bits, &a[k], sizeof bits);
    sum += a[k];
    hash = (hash ^ bits) * 1099511628211UL;
  }}
  printf("%s: sum=%.17g hash=%lu\\n", label, sum, hash);
}}

int main(void) {{
  (void)fill; (void)report;
{main}
  return 0;
}}
"""


def _compile(kernel: FlatKernel, *, raise_affine: bool = True) -> Any:
    options = polyflow.Options(fp_contract="off", raise_affine=raise_affine)
    return polyflow.compile_c(kernel.source, kernel.name, options=options)


# --- the pass in the pipeline ----------------------------------------------------------------


def test_registered_and_right_after_scf_to_affine() -> None:
    assert passes.PASSES["raise-delinearize"].endswith("delinearize:RaiseDelinearize")
    elements = passes.pipeline_elements(raising.RAISE_PIPELINE)
    at = elements.index("raise-delinearize")
    assert elements[at - 1] == "raise-scf-to-affine"
    assert elements[at + 1] == "raise-reductions"


# --- the report ------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_report(kernel: FlatKernel) -> None:
    report = polyflow.raise_report(kernel.source, functions=[kernel.name])
    fn = report.function(kernel.name)
    assert fn.loops_raised == len(fn.loops)
    if kernel.reason is None:
        assert fn.fully_affine, report.format()
        assert fn.reasons == []
    else:
        assert not fn.fully_affine
        assert fn.reasons and all(re.fullmatch(kernel.reason, r) for r in fn.reasons), fn.reasons


def test_raised_ir_uses_views() -> None:
    text = _compile(MM).mlir("affine")
    body = text.split("func.func @__polyflow_mm")[0]
    assert body.count("memref.reinterpret_cast") == 3  # one per array, shared by its accesses
    assert "memref.load" not in body and "memref.store" not in body
    assert "polyflow.not_affine" not in body
    three_d = _compile(BOX).mlir("affine")
    assert "memref<?x?x?xf32, strided<[?, ?, 1]>>" in three_d


# --- JIT: against NumPy and the unraised build -----------------------------------------------


def test_mm_jit() -> None:
    raised, plain = _compile(MM), _compile(MM, raise_affine=False)
    rng = np.random.default_rng(0)
    for n, m, p in [(7, 5, 6), (1, 1, 1), (0, 3, 2), (4, 0, 3), (3, 8, 1)]:
        A, B = rng.standard_normal(n * m), rng.standard_normal(m * p)
        C, C2 = np.full(n * p + 1, 7.0), np.full(n * p + 1, 7.0)
        raised(n, m, p, C, A, B)
        plain(n, m, p, C2, A, B)
        np.testing.assert_array_equal(C, C2)
        np.testing.assert_allclose(C[: n * p], (A.reshape(n, m) @ B.reshape(m, p)).ravel())
        assert C[n * p] == 7.0  # nothing written past the result
    # overlapping: C is B, and A starts one row into it
    m = 6
    bufs = [np.linspace(-1.0, 1.0, m * m + m) for _ in range(2)]
    for compiled, buf in zip((raised, plain), bufs, strict=True):
        compiled(m, m, m, buf[: m * m], buf[m:], buf[: m * m])
    np.testing.assert_array_equal(bufs[0], bufs[1])


def test_stencil_jit() -> None:
    raised, plain = _compile(STENCIL), _compile(STENCIL, raise_affine=False)
    rng = np.random.default_rng(1)
    n, m = 9, 8
    src = rng.standard_normal(n * m)
    out, out2 = np.zeros(n * m), np.zeros(n * m)
    raised(n, m, src, out)
    plain(n, m, src, out2)
    np.testing.assert_array_equal(out, out2)
    g = src.reshape(n, m)
    want = np.zeros((n, m))
    want[1:-1, 1:-1] = 0.2 * (
        g[1:-1, 1:-1] + g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:]
    )
    np.testing.assert_allclose(out.reshape(n, m), want)
    bufs = [rng.standard_normal(n * m + m + 1)]
    bufs.append(bufs[0].copy())
    for compiled, buf in zip((raised, plain), bufs, strict=True):
        compiled(n, m, buf, buf[m + 1 :])  # out overlaps in: later rows read new values
    np.testing.assert_array_equal(bufs[0], bufs[1])


def test_box_sums_jit() -> None:
    raised = _compile(BOX)
    rng = np.random.default_rng(2)
    n, m, p = 4, 3, 5
    a = rng.standard_normal(n * m * p).astype(np.float32)
    out = np.zeros(n * m, np.float32)
    raised(n, m, p, a, out)
    np.testing.assert_allclose(out, a.reshape(n, m, p).sum(-1).ravel(), rtol=1e-5)


@pytest.mark.parametrize("kernel", [PADDED, PAST_ROW], ids=lambda k: k.name)
def test_declined_kernels_jit(kernel: FlatKernel) -> None:
    raised, plain = _compile(kernel), _compile(kernel, raise_affine=False)
    rng = np.random.default_rng(3)
    first = rng.standard_normal(200)
    second = rng.standard_normal(200)
    args = (6, 5, 7) if kernel is PADDED else (6, 5)
    outs = []
    for compiled in (raised, plain):
        a, b = first.copy(), second.copy()
        compiled(*args, a, b)
        outs.append((a, b))
    for x, y in zip(*outs, strict=True):
        np.testing.assert_array_equal(x, y)


# --- whole programs against gcc -O2 ----------------------------------------------------------


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_program_matches_gcc(kernel: FlatKernel, tmp_path: Path) -> None:
    path = tmp_path / f"{kernel.name}.c"
    path.write_text(PROGRAM.format(name=kernel.name, source=kernel.source, main=kernel.main))
    check_program_against_gcc(path, tmp_path / "build", polyflow.Options())


# --- the pass alone --------------------------------------------------------------------------


def _scf_to_affine_module(source: str) -> tuple[object, ir.Operation]:
    cmod = emit_c_module(parse_c(source, "k.c", polyflow.Options()))
    elements = passes.pipeline_elements(raising.RAISE_PIPELINE)
    before = elements[: elements.index("raise-delinearize")]
    with cmod.context:
        fn = next(raisable_functions(cmod.module))
        for element in before:
            passes.function_pass_manager(element).run(fn)
    return cmod, fn


def test_counts_and_is_quick() -> None:
    cmod, fn = _scf_to_affine_module(STENCIL.source + MM.source.replace("mm(", "mm2("))
    with cmod.context:  # type: ignore[attr-defined]
        start = time.perf_counter()
        assert delinearize.delinearize_accesses(fn) == 6  # 5 loads, 1 store
        took = time.perf_counter() - start
        assert delinearize.delinearize_accesses(fn) == 0  # nothing left to do
        fn.verify()
    assert took < 0.25, f"raise-delinearize took {took * 1000:.0f} ms"
