"""lowering/gather_loops.py: innermost loops whose every moving access walks across rows get
LLVM's "do not vectorize" annotation (they would be gathers and scatters only); the others are
left to LLVM. IR tests on small MLIR, the annotation through to LLVM IR's `!llvm.loop`
metadata, and a seidel-2d whose interleaved rows are such loops against gcc -O2."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from mlir import ir
from mlir.passmanager import PassManager

import polyflow
from polyflow.ir.contexts import new_context
from polyflow.lowering.gather_loops import (
    annotate_after_lowering,
    move_loop_annotations,
    row_walking_loops,
)
from polyflow.lowering.llvm_ir import translate_to_llvm_ir
from polyflow.options import Options

LOOPS = """
func.func @f(%a: memref<64x64xf64>, %b: memref<64xf64>, %n: index) {
  affine.for %t = 0 to 8 {
    // each iteration a row down and two columns left: every access walks across rows
    affine.for %i = 1 to 30 {
      %0 = affine.load %a[%i - 1, %t * 2 - %i * 2 + 40] : memref<64x64xf64>
      %1 = affine.load %a[%i + 1, %t * 2 - %i * 2 + 40] : memref<64x64xf64>
      %2 = arith.addf %0, %1 : f64
      %3 = affine.load %b[%t] : memref<64xf64>
      %4 = arith.addf %2, %3 : f64
      affine.store %4, %a[%i, %t * 2 - %i * 2 + 40] : memref<64x64xf64>
    }
    // a row: contiguous
    affine.for %j = 0 to 64 {
      %0 = affine.load %a[%t, %j] : memref<64x64xf64>
      affine.store %0, %b[%j] : memref<64xf64>
    }
    // a column read, stored along a row: one contiguous access is enough to vectorize
    affine.for %j = 0 to 64 {
      %0 = affine.load %a[%j, %t] : memref<64x64xf64>
      affine.store %0, %a[%t + 1, %j] : memref<64x64xf64>
    }
    // nothing moves with the loop
    affine.for %j = 0 to 64 {
      %0 = affine.load %b[%t] : memref<64xf64>
      affine.store %0, %b[%t + 1] : memref<64xf64>
    }
    // not innermost
    affine.for %j = 0 to 4 {
      affine.for %k = 0 to 4 {
        %0 = affine.load %a[%k, %j] : memref<64x64xf64>
        affine.store %0, %a[%k + 8, %j] : memref<64x64xf64>
      }
    }
    // a sum down a column (a carried value): left to LLVM
    %s0 = arith.constant 0.0 : f64
    %sum = affine.for %i = 0 to 64 iter_args(%acc = %s0) -> (f64) {
      %0 = affine.load %a[%i, %t] : memref<64x64xf64>
      %1 = arith.addf %acc, %0 : f64
      affine.yield %1 : f64
    }
    affine.store %sum, %b[%t] : memref<64xf64>
    scf.for %k = %n to %n step %n {
      %0 = affine.load %b[%t] : memref<64xf64>
      affine.store %0, %b[%t + 2] : memref<64xf64>
    }
  }
  return
}
"""


def test_only_loops_whose_accesses_all_walk_across_rows_are_marked() -> None:
    with new_context():
        module = ir.Module.parse(LOOPS)
        marks = row_walking_loops(module)
        # pre-order: t, the row walk, the row, the mixed, the invariant, j, its k, the column
        # sum, the scf.for
        assert marks == [False, True, False, False, False, False, True, False, False]


def test_the_marks_reach_llvm_ir_as_vectorize_disable_metadata() -> None:
    with new_context():
        module = ir.Module.parse(LOOPS)
        marks = row_walking_loops(module)
        PassManager.parse("builtin.module(lower-affine)").run(module.operation)
        assert annotate_after_lowering(module, marks) == 2
        PassManager.parse(
            "builtin.module(convert-scf-to-cf,expand-strided-metadata,finalize-memref-to-llvm,"
            "convert-arith-to-llvm,convert-index-to-llvm,convert-cf-to-llvm,"
            "convert-func-to-llvm,reconcile-unrealized-casts)"
        ).run(module.operation)
        move_loop_annotations(module)
        text = translate_to_llvm_ir(module)
        assert text.count("!llvm.loop !") == 2
        assert '!{!"llvm.loop.vectorize.enable", i1 false}' in text


def test_marks_that_no_longer_match_the_loops_annotate_nothing() -> None:
    with new_context():
        module = ir.Module.parse(LOOPS)
        marks = row_walking_loops(module)
        PassManager.parse("builtin.module(lower-affine)").run(module.operation)
        assert annotate_after_lowering(module, [*marks, False]) == 0


SEIDEL = """#include <stdio.h>
#include <stdlib.h>
static void seidel(int tsteps, int n, double A[n][n]) {
  for (int t = 0; t <= tsteps - 1; t++)
    for (int i = 1; i <= n - 2; i++)
      for (int j = 1; j <= n - 2; j++)
        A[i][j] = (A[i - 1][j - 1] + A[i - 1][j] + A[i - 1][j + 1] + A[i][j - 1] + A[i][j] +
                   A[i][j + 1] + A[i + 1][j - 1] + A[i + 1][j] + A[i + 1][j + 1]) / 9.0;
}
int main(int argc, char **argv) {
  int n = atoi(argv[1]), tsteps = atoi(argv[2]);
  double (*A)[n] = malloc(sizeof(double) * n * n);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) A[i][j] = ((double)i * (j + 2) + 2) / n;
  seidel(tsteps, n, A);
  for (int i = 0; i < n; i += 7)
    for (int j = 0; j < n; j += 5) printf("%.17g\\n", A[i][j]);
  free(A);
  return 0;
}
"""


@pytest.mark.parametrize("fast_math", [False, True])
def test_seidel_2d_rows_stay_scalar_and_print_gccs_digits(tmp_path: Path, fast_math: bool) -> None:
    src = tmp_path / "seidel.c"
    src.write_text(SEIDEL)
    options = Options(opt_level=3, march="native", fast_math=fast_math)
    llvm_text = tmp_path / "seidel.ll"
    built = polyflow.build_program(src, llvm_text, options=options, emit="llvm", cache=None)
    assert '!{!"llvm.loop.vectorize.enable", i1 false}' in llvm_text.read_text()
    said = [r for r in built.report.remarks if r.kind == "kept-scalar"]
    assert [r.function for r in said] == ["seidel"] and said[0].position is not None
    exe = tmp_path / "seidel"
    polyflow.build_program(src, exe, options=options, cache=None)
    ref = tmp_path / "ref"
    flags = ["-ffast-math"] if fast_math else []
    subprocess.run(["gcc", "-O2", *flags, str(src), "-o", str(ref)], check=True)
    for sizes in (["97", "9"], ["40", "3"], ["5", "2"]):
        expected = subprocess.run([str(ref), *sizes], capture_output=True, text=True, check=True)
        for threads in ("1", "2"):
            env = {"OMP_NUM_THREADS": threads, "PATH": "/usr/bin:/bin"}
            got = subprocess.run(
                [str(exe), *sizes], capture_output=True, text=True, check=True, env=env
            )
            if fast_math:  # reassociated sums: within rounding of gcc's -ffast-math digits
                pairs = zip(got.stdout.split(), expected.stdout.split(), strict=True)
                assert all(abs(float(a) - float(b)) <= 1e-12 * abs(float(b)) for a, b in pairs)
            else:
                assert got.stdout == expected.stdout, (sizes, threads)
