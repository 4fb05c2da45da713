"""The vector width LLVM may use, per function (polyflow/lowering/vector_width.py): a stencil gets
the target's whole register, a float sum kept in C's order (in a register or, unraised, in
memory) keeps LLVM's choice, and so does a function that calls one; and the attribute reaches
the LLVM IR of a compiled program."""

from __future__ import annotations

from pathlib import Path

from mlir import ir

import polyflow
from polyflow.lowering.vector_width import prefer_vector_width

FUNCTIONS = """
func.func @stencil(%A: memref<100xf64>, %B: memref<100xf64>) {
  affine.for %i = 1 to 99 {
    %l = affine.load %A[%i - 1] : memref<100xf64>
    %r = affine.load %A[%i + 1] : memref<100xf64>
    %s = arith.addf %l, %r : f64
    affine.store %s, %B[%i] : memref<100xf64>
  }
  return
}
func.func @dot(%A: memref<100xf64>, %z: f64) -> f64 {
  %s = affine.for %i = 0 to 100 iter_args(%acc = %z) -> (f64) {
    %a = affine.load %A[%i] : memref<100xf64>
    %n = arith.addf %acc, %a : f64
    affine.yield %n : f64
  }
  return %s : f64
}
func.func @dot_reordered(%A: memref<100xf64>, %z: f64) -> f64 {
  %s = affine.for %i = 0 to 100 iter_args(%acc = %z) -> (f64) {
    %a = affine.load %A[%i] : memref<100xf64>
    %n = arith.addf %acc, %a : f64
    affine.yield %n : f64
  } {polyflow.reassociated = ["addf"]}
  return %s : f64
}
func.func @sum_in_memory(%A: memref<100xf64>, %S: memref<1xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c100 = arith.constant 100 : index
  scf.for %i = %c0 to %c100 step %c1 {
    %a = memref.load %A[%i] : memref<100xf64>
    %s = memref.load %S[%c0] : memref<1xf64>
    %n = arith.addf %s, %a : f64
    memref.store %n, %S[%c0] : memref<1xf64>
  }
  return
}
func.func @copy_unraised(%A: memref<100xf64>, %B: memref<100xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c100 = arith.constant 100 : index
  scf.for %i = %c0 to %c100 step %c1 {
    %a = memref.load %A[%i] : memref<100xf64>
    memref.store %a, %B[%i] : memref<100xf64>
  }
  return
}
func.func @calls_dot(%A: memref<100xf64>, %z: f64) -> f64 {
  %s = func.call @dot(%A, %z) : (memref<100xf64>, f64) -> f64
  return %s : f64
}
func.func @calls_stencil(%A: memref<100xf64>, %B: memref<100xf64>) {
  func.call @stencil(%A, %B) : (memref<100xf64>, memref<100xf64>) -> ()
  return
}
func.func private @external(%A: memref<100xf64>)
"""


def _marked() -> tuple[list[str], str]:
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(FUNCTIONS)
        marked = prefer_vector_width(module, 512)
        assert module.operation.verify()
        return marked, str(module)


def test_sums_in_c_order_and_their_callers_keep_llvms_width() -> None:
    marked, text = _marked()
    assert sorted(marked) == ["calls_stencil", "copy_unraised", "dot_reordered", "stencil"]
    assert text.count('passthrough = [["prefer-vector-width", "512"]]') == 4


STENCIL_C = r"""
#include <stdio.h>
#define N 4000
static double a[N], b[N];
static void relax(int n, double x[N], double y[N]) {
  for (int t = 0; t < 20; t++) {
    for (int i = 1; i < n - 1; i++) y[i] = 0.25 * (x[i - 1] + x[i + 1]) + 0.5 * x[i];
    for (int i = 1; i < n - 1; i++) x[i] = 0.25 * (y[i - 1] + y[i + 1]) + 0.5 * y[i];
  }
}
int main(void) {
  for (int i = 0; i < N; i++) a[i] = (double)(i % 13) / 7.0;
  relax(N, a, b);
  double s = 0.0;
  for (int i = 0; i < N; i++) s += a[i] * (double)(1 + i % 5);
  printf("%.17g\n", s);
  return 0;
}
"""


def test_an_avx512_target_gets_the_attribute_in_llvm_ir(tmp_path: Path) -> None:
    source = tmp_path / "relax.c"
    source.write_text(STENCIL_C)
    texts = {}
    for march in ("sapphirerapids", "haswell"):
        out = tmp_path / f"{march}.ll"
        options = polyflow.Options(opt_level=3, march=march, parallel=False)
        polyflow.build_program(source, out, options=options, emit="llvm", cache=None)
        texts[march] = out.read_text()
    assert '"prefer-vector-width"="512"' in texts["sapphirerapids"]
    assert "prefer-vector-width" not in texts["haswell"]  # 256-bit registers: LLVM's choice
