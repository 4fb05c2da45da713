"""Inlining calls to scalar helpers before raising (polyflow/raising/inline_calls.py): the loop
nest loses its calls, the helpers stay, accessors of arrays are inlined too, helpers that
allocate or branch are left alone; and
end to end, a kernel calling helpers is rescheduled and computes what gcc -O2's build does."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from mlir import ir

import polyflow
from polyflow.raising.inline_calls import inline_scalar_calls

MODULE = """
func.func private @max_score(%a: i32, %b: i32) -> i32 {
  %c = arith.cmpi sge, %a, %b : i32
  %m = arith.select %c, %a, %b : i32
  return %m : i32
}
func.func private @first(%a: i32, %b: i32) -> i32 {
  return %a : i32
}
func.func private @reads(%m: memref<4xi32>, %a: i32) -> i32 {
  %c0 = arith.constant 0 : index
  %v = memref.load %m[%c0] : memref<4xi32>
  return %v : i32
}
func.func private @puts_back(%m: memref<4xi32>, %a: i32) {
  %c1 = arith.constant 1 : index
  memref.store %a, %m[%c1] : memref<4xi32>
  return
}
func.func private @allocates(%a: i32) -> i32 {
  %s = memref.alloca() : memref<i32>
  memref.store %a, %s[] : memref<i32>
  %v = memref.load %s[] : memref<i32>
  return %v : i32
}
func.func private @branches(%a: i32, %b: i32) -> i32 {
  %c = arith.cmpi sge, %a, %b : i32
  cf.cond_br %c, ^bb1, ^bb2
^bb1:
  return %a : i32
^bb2:
  return %b : i32
}
func.func private @extern(%a: i32) -> i32
func.func @kernel(%m: memref<4xi32>, %x: i32) -> i32 {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %x) -> (i32) {
    %v = memref.load %m[%i] : memref<4xi32>
    %s = func.call @max_score(%acc, %v) : (i32, i32) -> i32
    %t = func.call @first(%s, %v) : (i32, i32) -> i32
    %u = func.call @reads(%m, %t) : (memref<4xi32>, i32) -> i32
    func.call @puts_back(%m, %u) : (memref<4xi32>, i32) -> ()
    %w = func.call @branches(%u, %t) : (i32, i32) -> i32
    %z = func.call @allocates(%w) : (i32) -> i32
    %e = func.call @extern(%z) : (i32) -> i32
    scf.yield %e : i32
  }
  return %r : i32
}
"""


def _function(module: ir.Module, name: str) -> ir.Operation:
    for op in module.body.operations:
        if ir.StringAttr(op.operation.attributes["sym_name"]).value == name:
            return op.operation
    raise KeyError(name)


def test_scalar_helpers_are_inlined_and_others_kept() -> None:
    with ir.Context() as ctx:
        ctx.allow_unregistered_dialects = False
        module = ir.Module.parse(MODULE)
        kernel = _function(module, "kernel")
        assert inline_scalar_calls(module, [kernel]) == 4
        module.operation.verify()
        text = str(kernel)
        assert "@max_score" not in text and "@first" not in text
        assert "arith.select" in text
        # the accessors became their loads and stores, on the kernel's own array, in order
        assert "@reads" not in text and "@puts_back" not in text
        body = text[text.index("scf.for") :]
        assert body.count("memref.load %arg0") == 2 and "memref.store" in body
        assert body.index("memref.store") > body.rindex("memref.load %arg0")
        # the argument-returning helper became its operand: the next call reads %s directly
        for kept in ("@branches", "@allocates", "@extern"):
            assert f"call {kept}" in text
        assert "func.func private @max_score" in str(module)  # the helper stays


def test_only_the_callers_given_are_changed() -> None:
    with ir.Context():
        module = ir.Module.parse(MODULE)
        assert inline_scalar_calls(module, []) == 0
        assert "call @max_score" in str(_function(module, "kernel"))


PROGRAM = """#include <math.h>
#include <stdio.h>
#define N 300
static int max_score(int a, int b) { return a >= b ? a : b; }
static int pair(int a, int b) { return a + b == 3 ? 1 : 0; }
static double soft(double x) { return x / (1.0 + fabs(x)); }
static void kernel(int n, int T[N][N], const int seq[N], double D[N][N]) {
  for (int i = n - 1; i >= 0; i--)
    for (int j = i + 1; j < n; j++) {
      T[i][j] = max_score(T[i][j], T[i + 1][j - 1] + pair(seq[i], seq[j]));
      for (int k = i + 1; k < j; k++)
        T[i][j] = max_score(T[i][j], T[i][k] + T[k + 1][j]);
    }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) D[i][j] = soft(D[i][j] - 0.5 * j);
}
int main(void) {
  static int T[N][N], seq[N];
  static double D[N][N];
  for (int i = 0; i < N; i++) {
    seq[i] = (i * 7 + 1) % 4;
    for (int j = 0; j < N; j++) D[i][j] = ((i * j) % 17) * 0.25;
  }
  kernel(N, T, seq, D);
  long s = 0;
  double d = 0.0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      s += T[i][j] * (long)(i ^ j);
      d += D[i][j];
    }
  printf("%ld %.17g\\n", s, d);
  return 0;
}
"""


@pytest.mark.parametrize("level", [2, 3])
def test_kernel_with_helpers_is_raised_and_matches_gcc(level: int, tmp_path: Path) -> None:
    src = tmp_path / "helpers.c"
    src.write_text(PROGRAM)
    options = polyflow.Options(opt_level=level)
    affine = tmp_path / "out.mlir"
    polyflow.build_program(src, affine, options=options, emit="affine")
    # the alias guard's optimizable copy (T, seq and D might overlap: the dispatcher picks)
    kernel = affine.read_text().split("func.func private @kernel.affine")[1].split("func.func")[0]
    assert "call @" not in kernel and "affine.for" in kernel
    exe = tmp_path / "prog"
    report = polyflow.build_program(src, exe, options=options)
    assert not report.fallbacks, report.fallbacks
    if level == 3:
        assert "kernel" in report.schedules
    gcc = tmp_path / "prog.gcc"
    subprocess.run(["gcc", "-O2", str(src), "-o", str(gcc), "-lm"], check=True)
    expected = subprocess.run([str(gcc)], capture_output=True, text=True, check=True).stdout
    for threads in ("1", "2"):
        env = {"OMP_NUM_THREADS": threads, "PATH": "/usr/bin:/bin"}
        got = subprocess.run([str(exe)], capture_output=True, text=True, check=True, env=env)
        assert got.stdout == expected
