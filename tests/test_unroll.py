"""`Options.unroll` (polyflow/schedule/__init__.py, `_unroll_innermost`): each innermost loop
runs N iterations per trip after scheduling, the rest in a loop after; the program still
prints gcc -O2's digits (odd trip counts, a sum carried in a register, a loop with bounds known
only at run time, fewer trips than the factor), and the report says what was unrolled."""

from __future__ import annotations

from pathlib import Path

import pytest
from difftest import check_program_against_gcc

import polyflow
from polyflow.options import Options

PROGRAM = """// polyflow: compiled=smooth
#include <stdio.h>
#include <stdlib.h>
#define N 37
#define M 53
static double A[N][M], B[N][M], s[N];
static void smooth(int n) {
  for (int t = 0; t < 3; t++)
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < n - 1; j++)
        B[i][j] = 0.25 * (A[i - 1][j] + A[i + 1][j] + A[i][j - 1] + A[i][j + 1]) + B[i][j] / 7;
  for (int i = 0; i < N; i++) {
    double acc = 0;
    for (int j = 0; j < n; j++) acc += B[i][j] * A[i][j];  /* a sum in a register */
    s[i] = acc;
  }
  for (int i = 0; i < 5; i++)  /* fewer trips than the factor, a constant count */
    s[i] += s[i + 1] * 0.5;
}
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : M;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < M; j++) A[i][j] = (i * 7 + j * 3) % 11 * 0.1;
  smooth(n);
  for (int i = 0; i < N; i++) printf("%.17g\\n", s[i]);
  return 0;
}
"""


@pytest.mark.parametrize("factor", [2, 3, 4, 8])
def test_unrolled_programs_print_gccs_digits(tmp_path: Path, factor: int) -> None:
    src = tmp_path / "smooth.c"
    src.write_text(PROGRAM)
    check_program_against_gcc(src, tmp_path / "run", Options(opt_level=3, unroll=factor))


def test_innermost_loops_step_by_the_factor_and_the_report_says_so(tmp_path: Path) -> None:
    src = tmp_path / "smooth.c"
    src.write_text(PROGRAM)
    options = Options(opt_level=3, unroll=4, parallel=False, micro_kernels=False)
    built = polyflow.build_program(src, tmp_path / "smooth.mlir", options=options, emit="affine-opt")
    text = (tmp_path / "smooth.mlir").read_text()
    assert "step 4" in text
    (said,) = [r for r in built.report.remarks if r.kind == "unrolled"]
    # the sum's loop twice: in the strips of 8 rows jammed (Options.interleave) and in the 5
    # rows left after them
    assert said.data == {"factor": 4, "loops": 4}
    assert said.function == "smooth"
    plain = polyflow.build_program(
        src, tmp_path / "plain.mlir", options=Options(opt_level=3), emit="affine-opt"
    )
    assert not [r for r in plain.report.remarks if r.kind == "unrolled"]
    assert "step 4" not in (tmp_path / "plain.mlir").read_text()


def test_the_factor_is_checked() -> None:
    with pytest.raises(ValueError, match="unroll"):
        Options(unroll=0)


MATMUL = """// polyflow: compiled=gemm
#include <stdio.h>
#include <stdlib.h>
#define N 200
static double A[N][N], B[N][N], C[N][N];
static void gemm(int ni, int nj, int nk, double beta) {
  for (int i = 0; i < ni; i++) {
    for (int j = 0; j < nj; j++) C[i][j] *= beta;
    for (int k = 0; k < nk; k++)
      for (int j = 0; j < nj; j++) C[i][j] += A[i][k] * B[k][j];
  }
}
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 190;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      A[i][j] = (i * 3 + j) % 7 * 0.25;
      B[i][j] = (i + 5 * j) % 11 * 0.125;
      C[i][j] = (i == j);
    }
  gemm(n, n - 3, n - 7, 0.5);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) printf("%.17g\\n", C[i][j]);
  return 0;
}
"""


def test_tile_loops_around_a_micro_kernel_are_not_unrolled(tmp_path: Path) -> None:
    """A micro-kernel's loops are `scf` loops, which MLIR's affine-loop-unroll does not see:
    the `affine.for` tile loop holding one counts as innermost there, and unrolling it copied
    the whole kernel (gemm LARGE's IR grew 4.5x). Only loops with no loop inside unroll."""
    src = tmp_path / "gemm.c"
    src.write_text(MATMUL)
    fmas = {}
    for factor in (None, 4):
        out = tmp_path / f"gemm{factor}.mlir"
        options = Options(opt_level=3, unroll=factor)
        built = polyflow.build_program(src, out, options=options, emit="affine-opt")
        assert built.report.select(kind="micro-kernel")
        fmas[factor] = out.read_text().count("arith.mulf")  # the kernel's products
    assert fmas[4] == fmas[None] > 0
    check_program_against_gcc(src, tmp_path / "run", Options(opt_level=3, unroll=4))
