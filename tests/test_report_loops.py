"""What `--report` says about loops after scheduling: the loops LLVM vectorized (width, unroll,
position with -g), and why a loop that carries no dependence was kept sequential. Each program
also prints gcc -O2's output."""

from __future__ import annotations

from pathlib import Path

from difftest import check_program_against_gcc

import polyflow
from polyflow.lowering.llvm_ir import VectorizedLoop, vectorized_loops
from polyflow.options import Options
from polyflow.pipeline import vector_loop_remarks

# A triangular solve: its only parallel loop copies a vector of 2000 doubles (too little work to
# fork for), and the inner product runs inside the sequential row loop.
TRISOLV = """// polyflow: compiled=solve
#include <stdio.h>
#define N 2000
static double L[N][N], x[N], b[N];
static void solve(int n) {
  for (int i = 0; i < n; i++) {
    x[i] = b[i];
    for (int j = 0; j < i; j++) x[i] -= L[i][j] * x[j];
    x[i] = x[i] / L[i][i];
  }
}
int main(void) {
  for (int i = 0; i < N; i++) {
    b[i] = i % 7;
    for (int j = 0; j < N; j++) L[i][j] = (i == j) ? 2.0 + i % 3 : (double)((i + j) % 5) / N;
  }
  solve(N);
  for (int i = 0; i < N; i += 7) printf("%.17g\\n", x[i]);
  return 0;
}
"""

SCALE = """// polyflow: compiled=scale
#include <stdio.h>
#define N 4099
static double a[N], b[N];
static void scale(int n) {
  for (int i = 0; i < n; i++) a[i] = 2.5 * b[i] + a[i];
}
int main(void) {
  for (int i = 0; i < N; i++) { a[i] = i % 11; b[i] = i % 13; }
  for (int r = 0; r < 3; r++) scale(N);
  for (int i = 0; i < N; i += 9) printf("%.17g\\n", a[i]);
  return 0;
}
"""


def test_a_loop_with_too_little_work_stays_sequential_and_the_report_says_why(
    tmp_path: Path,
) -> None:
    src = tmp_path / "solve.c"
    src.write_text(TRISOLV)
    built = polyflow.build_program(
        src, tmp_path / "solve.mlir", options=Options(opt_level=3), emit="affine-opt"
    )
    assert "affine.parallel" not in (tmp_path / "solve.mlir").read_text().split("@solve.affine")[-1]
    kept = built.report.select(kind="sequential-loop", function="solve")
    reasons = [r.data["reason"] for r in kept]
    assert any("at most 2000 innermost iterations" in reason for reason in reasons), reasons
    assert any("fork and join the threads on each" in reason for reason in reasons), reasons
    assert all(r.position is not None and r.position.line > 0 for r in kept)
    for threads in (1, 2):
        check_program_against_gcc(src, tmp_path / f"run{threads}", Options(opt_level=3, threads=threads))


def test_the_report_gives_the_vector_width_of_vectorized_loops(tmp_path: Path) -> None:
    src = tmp_path / "scale.c"
    src.write_text(SCALE)
    for debug in (False, True):
        built = polyflow.build_program(
            src,
            tmp_path / f"scale-{debug}",
            options=Options(opt_level=3, march="x86-64-v3", debug_info=debug),
        )
        (remark,) = built.report.select(kind="vectorized", function="scale")
        loops = remark.data["loops"]
        assert loops and all(loop["width"] in (2, 4) for loop in loops)  # AVX2: 4 doubles
        assert "width 4" in remark.message
        assert any(loop["line"] == 6 for loop in loops) is debug  # the loop's C line with -g
    check_program_against_gcc(src, tmp_path / "run", Options(opt_level=3))


def test_vectorization_remarks_are_read_from_llvms_yaml() -> None:
    text = """--- !Passed
Pass:            loop-vectorize
Name:            Vectorized
DebugLoc:        { File: 'k.c', Line: 12, Column: 5 }
Function:        kern.affine..omp_par
Args:
  - String:          'vectorized loop (vectorization width: '
  - VectorizationFactor: '8'
  - String:          ', interleaved count: '
  - InterleaveCount: '2'
  - String:          ')'
...
--- !Missed
Pass:            loop-vectorize
Name:            MissedDetails
Function:        kern.affine
Args:
  - String:          loop not vectorized
...
--- !Passed
Pass:            loop-vectorize
Name:            Vectorized
Function:        __polyflow_kern
Args:
  - String:          'vectorized loop (vectorization width: '
  - VectorizationFactor: '4'
  - String:          ', interleaved count: '
  - InterleaveCount: '1'
...
"""
    loops = vectorized_loops(text)
    assert loops == [
        VectorizedLoop("kern.affine..omp_par", 8, 2, 12, 5, "k.c"),
        VectorizedLoop("__polyflow_kern", 4, 1),
    ]
    (remark,) = vector_loop_remarks(loops)
    assert remark.function == "kern"
    assert remark.message == "loops vectorized by LLVM, width 8 unrolled x2: 1 loop (at 12:5); width 4: 1 loop"
