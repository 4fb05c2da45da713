"""raise-reductions end to end: affine kernels run before and after the pass give identical
results (exactly, floats included: the pass reorders nothing), the IR has the iter_args and the
`polyflow.reductions` marks expected, and declined cases are left alone. C kernels go through
the whole raising pipeline where its passes exist."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from mlir import ir
from mlir.execution_engine import ExecutionEngine
from mlir.passmanager import PassManager
from mlir.runtime import get_ranked_memref_descriptor

from polyflow.lowering.llvm_dialect import lower_to_llvm_dialect
from polyflow.raising import reductions

Args = Callable[[np.random.Generator], list[np.ndarray | int]]


@dataclass(frozen=True)
class Kernel:
    """An affine function `@k`, how to make its arguments, what the pass should make of it."""

    source: str
    args: Args
    marks: tuple[str, ...]  # the polyflow.reductions lists expected, in order ("" when none)
    promoted: bool = True  # whether the pass is expected to create iter_args


def _f32(*shape: int) -> Args:
    return lambda rng: [rng.standard_normal(shape).astype(np.float32)]


def _args(*parts: Args | int) -> Args:
    def make(rng: np.random.Generator) -> list[np.ndarray | int]:
        out: list[np.ndarray | int] = []
        for part in parts:
            out += [part] if isinstance(part, int) else part(rng)
        return out

    return make


def _i32(*shape: int) -> Args:
    return lambda rng: [rng.integers(-50, 50, shape).astype(np.int32)]


def _i64(*shape: int) -> Args:
    return lambda rng: [rng.integers(-(10**6), 10**6, shape).astype(np.int64)]


def _dominant(n: int) -> Args:
    """A diagonally dominant f64 matrix (lu and trisolv divide by its diagonal)."""

    def make(rng: np.random.Generator) -> list[np.ndarray | int]:
        a = rng.standard_normal((n, n))
        return [a + np.eye(n) * 4 * n]

    return make


MATMUL = """
func.func @k(%A: memref<?x?xf32>, %B: memref<?x?xf32>, %C: memref<?x?xf32>, %n: index) {
  affine.for %i = 0 to %n {
    affine.for %j = 0 to %n {
      affine.for %k = 0 to %n {
        %a = affine.load %A[%i, %k] : memref<?x?xf32>
        %b = affine.load %B[%k, %j] : memref<?x?xf32>
        %c = affine.load %C[%i, %j] : memref<?x?xf32>
        %p = arith.mulf %a, %b : f32
        %s = arith.addf %c, %p : f32
        affine.store %s, %C[%i, %j] : memref<?x?xf32>
      }
    }
  }
  return
}"""

DOT = """
func.func @k(%a: memref<?xf32>, %s: memref<1xf32>, %n: index) {
  affine.for %i = 0 to %n {
    %x = affine.load %a[%i] : memref<?xf32>
    %acc = affine.load %s[0] : memref<1xf32>
    %r = arith.addf %acc, %x : f32
    affine.store %r, %s[0] : memref<1xf32>
  }
  return
}"""

LU = """
#id = affine_map<(d0) -> (d0)>
func.func @k(%A: memref<?x?xf64>, %n: index) {
  affine.for %i = 0 to %n {
    affine.for %j = 0 to #id(%i) {
      affine.for %k = 0 to #id(%j) {
        %a = affine.load %A[%i, %k] : memref<?x?xf64>
        %b = affine.load %A[%k, %j] : memref<?x?xf64>
        %c = affine.load %A[%i, %j] : memref<?x?xf64>
        %p = arith.mulf %a, %b : f64
        %s = arith.subf %c, %p : f64
        affine.store %s, %A[%i, %j] : memref<?x?xf64>
      }
      %c = affine.load %A[%i, %j] : memref<?x?xf64>
      %d = affine.load %A[%j, %j] : memref<?x?xf64>
      %q = arith.divf %c, %d : f64
      affine.store %q, %A[%i, %j] : memref<?x?xf64>
    }
    affine.for %j = #id(%i) to %n {
      affine.for %k = 0 to #id(%i) {
        %a = affine.load %A[%i, %k] : memref<?x?xf64>
        %b = affine.load %A[%k, %j] : memref<?x?xf64>
        %c = affine.load %A[%i, %j] : memref<?x?xf64>
        %p = arith.mulf %a, %b : f64
        %s = arith.subf %c, %p : f64
        affine.store %s, %A[%i, %j] : memref<?x?xf64>
      }
    }
  }
  return
}"""

TRISOLV = """
#id = affine_map<(d0) -> (d0)>
func.func @k(%L: memref<?x?xf64>, %x: memref<?xf64>, %b: memref<?xf64>, %n: index) {
  affine.for %i = 0 to %n {
    %bi = affine.load %b[%i] : memref<?xf64>
    affine.store %bi, %x[%i] : memref<?xf64>
    affine.for %j = 0 to #id(%i) {
      %l = affine.load %L[%i, %j] : memref<?x?xf64>
      %xj = affine.load %x[%j] : memref<?xf64>
      %xi = affine.load %x[%i] : memref<?xf64>
      %p = arith.mulf %l, %xj : f64
      %r = arith.subf %xi, %p : f64
      affine.store %r, %x[%i] : memref<?xf64>
    }
    %xi = affine.load %x[%i] : memref<?xf64>
    %lii = affine.load %L[%i, %i] : memref<?x?xf64>
    %q = arith.divf %xi, %lii : f64
    affine.store %q, %x[%i] : memref<?xf64>
  }
  return
}"""

MINMAX = """
func.func @k(%a: memref<64xf32>, %b: memref<64xi32>, %m: memref<f32>, %r: memref<4xi32>) {
  affine.for %i = 0 to 64 {
    %x = affine.load %a[%i] : memref<64xf32>
    %acc = affine.load %m[] : memref<f32>
    %c = arith.cmpf ogt, %x, %acc : f32
    %s = arith.select %c, %x, %acc : f32
    affine.store %s, %m[] : memref<f32>
    %y = affine.load %b[%i] : memref<64xi32>
    %lo = affine.load %r[0] : memref<4xi32>
    %c1 = arith.cmpi sgt, %y, %lo : i32
    %s1 = arith.select %c1, %lo, %y : i32
    affine.store %s1, %r[0] : memref<4xi32>
    %hi = affine.load %r[1] : memref<4xi32>
    %s2 = arith.maxsi %hi, %y : i32
    affine.store %s2, %r[1] : memref<4xi32>
    %p = affine.load %r[2] : memref<4xi32>
    %s3 = arith.muli %p, %y : i32
    affine.store %s3, %r[2] : memref<4xi32>
  }
  return
}"""

NESTED_SUM = """
func.func @k(%a: memref<10x20xi64>, %s: memref<1xi64>) {
  affine.for %i = 0 to 10 {
    affine.for %j = 0 to 20 {
      %x = affine.load %a[%i, %j] : memref<10x20xi64>
      %acc = affine.load %s[0] : memref<1xi64>
      %r = arith.addi %x, %acc : i64
      affine.store %r, %s[0] : memref<1xi64>
    }
  }
  return
}"""

# s[0] updated twice per iteration, read again in between and inside an inner if and loop.
TWO_UPDATES = """
#odd = affine_set<(d0) : (d0 mod 2 - 1 == 0)>
func.func @k(%a: memref<32xf32>, %s: memref<2xf32>, %t: memref<32xf32>) {
  affine.for %i = 0 to 32 {
    %x = affine.load %a[%i] : memref<32xf32>
    %s0 = affine.load %s[0] : memref<2xf32>
    %r0 = arith.addf %s0, %x : f32
    affine.store %r0, %s[0] : memref<2xf32>
    %s1 = affine.load %s[1] : memref<2xf32>
    %r1 = arith.mulf %s1, %x : f32
    affine.store %r1, %s[1] : memref<2xf32>
    affine.if #odd(%i) {
      %seen = affine.load %s[0] : memref<2xf32>
      affine.store %seen, %t[%i] : memref<32xf32>
    }
    %again = affine.load %s[0] : memref<2xf32>
    %r2 = arith.subf %again, %x : f32
    affine.store %r2, %s[0] : memref<2xf32>
  }
  return
}"""

PREFIX_SUM = """
func.func @k(%a: memref<50xf32>, %b: memref<50xf32>, %s: memref<1xf32>) {
  %h = arith.constant 0.5 : f32
  affine.for %i = 0 to 50 {
    %x = affine.load %a[%i] : memref<50xf32>
    %acc = affine.load %s[0] : memref<1xf32>
    %m = arith.mulf %acc, %h : f32
    %r = arith.addf %m, %x : f32
    affine.store %r, %s[0] : memref<1xf32>
    affine.store %r, %b[%i] : memref<50xf32>
  }
  return
}"""

# An existing iter_arg and a promoted location, under a guard that must yield the former.
GUARDED_RESULTS = """
func.func @k(%a: memref<?xf32>, %s: memref<1xf32>, %out: memref<1xf32>, %n: index) {
  %z = arith.constant 1.0 : f32
  %r = affine.for %i = 0 to %n iter_args(%p = %z) -> (f32) {
    %x = affine.load %a[%i] : memref<?xf32>
    %acc = affine.load %s[0] : memref<1xf32>
    %v = arith.maxnumf %acc, %x : f32
    affine.store %v, %s[0] : memref<1xf32>
    %p2 = arith.addf %p, %x : f32
    affine.yield %p2 : f32
  }
  affine.store %r, %out[0] : memref<1xf32>
  return
}"""

MAY_INTERFERE = """
func.func @k(%A: memref<8x8xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      affine.for %k = 0 to 8 {
        %a = affine.load %A[%i, %k] : memref<8x8xf32>
        %c = affine.load %A[%i, %j] : memref<8x8xf32>
        %s = arith.addf %c, %a : f32
        affine.store %s, %A[%i, %j] : memref<8x8xf32>
      }
    }
  }
  return
}"""

STORE_UNDER_IF = """
#late = affine_set<(d0) : (d0 - 3 >= 0)>
func.func @k(%a: memref<16xf32>, %s: memref<1xf32>) {
  affine.for %i = 0 to 16 {
    %x = affine.load %a[%i] : memref<16xf32>
    %acc = affine.load %s[0] : memref<1xf32>
    %r = arith.addf %acc, %x : f32
    affine.if #late(%i) {
      affine.store %r, %s[0] : memref<1xf32>
    }
  }
  return
}"""

KERNELS: dict[str, Kernel] = {
    "matmul_n0": Kernel(MATMUL, _args(_f32(0, 0), _f32(0, 0), _f32(0, 0), 0), ('["add"]',)),
    "matmul_n1": Kernel(MATMUL, _args(_f32(1, 1), _f32(1, 1), _f32(1, 1), 1), ('["add"]',)),
    "matmul_n7": Kernel(MATMUL, _args(_f32(7, 7), _f32(7, 7), _f32(7, 7), 7), ('["add"]',)),
    "dot_n0": Kernel(DOT, _args(_f32(1), _f32(1), 0), ('["add"]',)),
    "dot_n9": Kernel(DOT, _args(_f32(9), _f32(1), 9), ('["add"]',)),
    "lu_n1": Kernel(LU, _args(_dominant(1), 1), ('["add"]', '["add"]')),
    "lu_n6": Kernel(LU, _args(_dominant(6), 6), ('["add"]', '["add"]')),
    "trisolv": Kernel(
        TRISOLV,
        _args(_dominant(7), lambda rng: [np.zeros(7)], lambda rng: [rng.random(7)], 7),
        ('["add"]',),
    ),
    "minmax": Kernel(
        MINMAX,
        _args(_f32(64), _i32(64), lambda rng: [np.array(-1e30, dtype=np.float32)], _i32(4)),
        ('["max", "min", "max", "mul"]',),
    ),
    "nested_sum": Kernel(NESTED_SUM, _args(_i64(10, 20), _i64(1)), ('["add"]', '["add"]')),
    "two_updates": Kernel(TWO_UPDATES, _args(_f32(32), _f32(2), _f32(32)), ('["none", "mul"]',)),
    "prefix_sum": Kernel(PREFIX_SUM, _args(_f32(50), _f32(50), _f32(1)), ('["none"]',)),
    "guarded_results_n0": Kernel(
        GUARDED_RESULTS, _args(_f32(1), _f32(1), _f32(1), 0), ('["add", "max"]',)
    ),
    "guarded_results_n5": Kernel(
        GUARDED_RESULTS, _args(_f32(5), _f32(1), _f32(1), 5), ('["add", "max"]',)
    ),
    "may_interfere": Kernel(MAY_INTERFERE, _args(_f32(8, 8)), (), promoted=False),
    "store_under_if": Kernel(STORE_UNDER_IF, _args(_f32(16), _f32(1)), (), promoted=False),
}


def _module(source: str) -> ir.Module:
    module = ir.Module.parse(source)
    for op in module.body.operations:
        op.operation.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
    return module


def _carried(module: ir.Module) -> int:
    """How many loop-carried values (iter_args) the loops of `module` have."""
    count = 0

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal count
        if op.name in ("affine.for", "scf.for"):
            count += len(op.results)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return count


def _raise_reductions(module: ir.Module) -> None:
    """Run the pass as the raising pipeline does: in a func.func pass manager, per function."""
    pm = PassManager("func.func")
    pass_ = reductions.RaiseReductions()
    pm.add(pass_, pass_.name)
    for op in module.body.operations:
        pm.run(op.operation)


def _execute(module: ir.Module, args: list[np.ndarray | int]) -> list[np.ndarray]:
    """Run `@k` on copies of `args`; returns the arrays as the function left them."""
    arrays = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    engine = ExecutionEngine(lower_to_llvm_dialect(module), opt_level=2)
    keep: list[object] = []
    pointers: list[object] = []
    for a in arrays:
        if isinstance(a, np.ndarray):
            descriptor = ctypes.pointer(get_ranked_memref_descriptor(a))
            keep.append(descriptor)
            pointers.append(ctypes.pointer(descriptor))
        else:
            pointers.append(ctypes.pointer(ctypes.c_int64(a)))
    engine.invoke("k", *pointers)
    return [a for a in arrays if isinstance(a, np.ndarray)]


@pytest.mark.parametrize("name", list(KERNELS))
def test_same_results_and_marks(name: str) -> None:
    kernel = KERNELS[name]
    args = kernel.args(np.random.default_rng(7))
    with ir.Context(), ir.Location.unknown():
        before = _module(kernel.source)
        after = _module(kernel.source)
        _raise_reductions(after)
        after.operation.verify()
        text = str(after)
        assert (_carried(after) > _carried(before)) == kernel.promoted, text
        expected = _execute(before, args)
        got = _execute(after, args)
    marks = [
        line.split("polyflow.reductions = ", 1)[1].split("}", 1)[0]
        for line in text.splitlines()
        if "polyflow.reductions" in line
    ]
    assert tuple(marks) == kernel.marks, text
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want)


def test_declined_kernels_are_untouched() -> None:
    for name in ("may_interfere", "store_under_if"):
        with ir.Context():
            module = ir.Module.parse(KERNELS[name].source)
            text = str(module)
            assert reductions.detect_reductions(module.operation) == 0
            assert str(module) == text


# One loop per reduction op: `acc = op(acc, x)` (or `op(x, acc)`), and what it is marked.
_UPDATES = [
    ("arith.addf %acc, %x : f32", "f32", "add"),
    ("arith.addf %x, %acc : f32", "f32", "add"),
    ("arith.subf %acc, %x : f32", "f32", "add"),
    ("arith.subf %x, %acc : f32", "f32", "none"),
    ("arith.mulf %x, %acc : f32", "f32", "mul"),
    ("arith.divf %acc, %x : f32", "f32", "none"),
    ("arith.minimumf %acc, %x : f32", "f32", "min"),
    ("arith.minnumf %x, %acc : f32", "f32", "min"),
    ("arith.maximumf %acc, %x : f32", "f32", "max"),
    ("arith.maxnumf %acc, %x : f32", "f32", "max"),
    ("arith.addf %acc, %acc : f32", "f32", "none"),
    ("arith.addi %x, %acc : i32", "i32", "add"),
    ("arith.subi %acc, %x : i32", "i32", "add"),
    ("arith.muli %acc, %x : i32", "i32", "mul"),
    ("arith.andi %acc, %x : i32", "i32", "and"),
    ("arith.ori %x, %acc : i32", "i32", "or"),
    ("arith.xori %acc, %x : i32", "i32", "xor"),
    ("arith.minsi %acc, %x : i32", "i32", "min"),
    ("arith.maxui %acc, %x : i32", "i32", "max"),
    ("arith.shli %acc, %x : i32", "i32", "none"),
]


@pytest.mark.parametrize(("update", "type_", "kind"), _UPDATES)
def test_reduction_kind(update: str, type_: str, kind: str) -> None:
    source = f"""
func.func @k(%a: memref<8x{type_}>, %s: memref<1x{type_}>) {{
  affine.for %i = 0 to 8 {{
    %x = affine.load %a[%i] : memref<8x{type_}>
    %acc = affine.load %s[0] : memref<1x{type_}>
    %r = {update}
    affine.store %r, %s[0] : memref<1x{type_}>
  }}
  return
}}"""
    with ir.Context():
        module = ir.Module.parse(source)
        assert reductions.detect_reductions(module.operation) == 1
        assert f'polyflow.reductions = ["{kind}"]' in str(module), str(module)


# `cmp(a, b) ? t : f` with {t, f} = {x, acc}: max when it picks the larger.
_SELECTS = [
    ("cmpf ogt, %x, %acc : f32", "%x, %acc", "f32", "max"),
    ("cmpf oge, %acc, %x : f32", "%acc, %x", "f32", "max"),
    ("cmpf olt, %x, %acc : f32", "%x, %acc", "f32", "min"),
    ("cmpf ole, %x, %acc : f32", "%acc, %x", "f32", "max"),
    ("cmpf ogt, %x, %acc : f32", "%acc, %x", "f32", "min"),
    ("cmpf ueq, %x, %acc : f32", "%x, %acc", "f32", "none"),
    ("cmpi slt, %acc, %x : i32", "%acc, %x", "i32", "min"),
    ("cmpi uge, %x, %acc : i32", "%x, %acc", "i32", "max"),
    ("cmpi sgt, %x, %acc : i32", "%x, %x", "i32", "none"),
]


@pytest.mark.parametrize(("cmp", "arms", "type_", "kind"), _SELECTS)
def test_select_kind(cmp: str, arms: str, type_: str, kind: str) -> None:
    source = f"""
func.func @k(%a: memref<8x{type_}>, %s: memref<1x{type_}>) {{
  affine.for %i = 0 to 8 {{
    %x = affine.load %a[%i] : memref<8x{type_}>
    %acc = affine.load %s[0] : memref<1x{type_}>
    %c = arith.{cmp}
    %r = arith.select %c, {arms} : {type_}
    affine.store %r, %s[0] : memref<1x{type_}>
  }}
  return
}}"""
    with ir.Context():
        module = ir.Module.parse(source)
        reductions.detect_reductions(module.operation)
        assert f'polyflow.reductions = ["{kind}"]' in str(module), str(module)


def test_allocations_and_arguments_do_not_alias() -> None:
    """A distinct argument and a local allocation are never the promoted location."""
    source = """
func.func @k(%a: memref<8xf32>, %s: memref<1xf32>) {
  %t = memref.alloca() : memref<8xf32>
  affine.for %i = 0 to 8 {
    %x = affine.load %a[%i] : memref<8xf32>
    affine.store %x, %t[%i] : memref<8xf32>
    %acc = affine.load %s[0] : memref<1xf32>
    %r = arith.addf %acc, %x : f32
    affine.store %r, %s[0] : memref<1xf32>
    affine.store %r, %a[%i] : memref<8xf32>
  }
  return
}"""
    with ir.Context():
        module = ir.Module.parse(source)
        assert reductions.detect_reductions(module.operation) == 1
        assert "iter_args" in str(module)


def test_unknown_op_blocks_promotion() -> None:
    source = """
func.func @k(%a: memref<8xf32>, %s: memref<1xf32>, %t: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    %x = affine.load %a[%i] : memref<8xf32>
    %acc = affine.load %s[0] : memref<1xf32>
    %r = arith.addf %acc, %x : f32
    affine.store %r, %s[0] : memref<1xf32>
    memref.copy %a, %t : memref<8xf32> to memref<8xf32>
  }
  return
}"""
    with ir.Context():
        module = ir.Module.parse(source)
        assert reductions.detect_reductions(module.operation) == 0
        assert "iter_args" not in str(module)


# ---- C through the frontend and the raising pipeline (which runs raise-reductions).

C_SUM = """
float kernel(int n, float a[n]) {
  float s = 0;
  for (int i = 0; i < n; i++)
    s += a[i];
  return s;
}
"""

C_GEMM = """
void kernel(int n, double alpha, double A[n][n], double B[n][n], double C[n][n]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      C[i][j] *= alpha;
      for (int k = 0; k < n; k++)
        C[i][j] += A[i][k] * B[k][j];
    }
}
"""

C_LU = """
void kernel(int n, double A[n][n]) {
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < i; j++) {
      for (int k = 0; k < j; k++)
        A[i][j] -= A[i][k] * A[k][j];
      A[i][j] /= A[j][j];
    }
    for (int j = i; j < n; j++)
      for (int k = 0; k < i; k++)
        A[i][j] -= A[i][k] * A[k][j];
  }
}
"""


def _compile_pair(source: str) -> tuple[object, object]:
    from polyflow.drivers.jit import compile_c
    from polyflow.options import Options

    raised = compile_c(source, "kernel", options=Options(fp_contract="off"))
    plain = compile_c(source, "kernel", options=Options(fp_contract="off", raise_affine=False))
    assert not getattr(raised, "warnings", []), raised.warnings  # type: ignore[attr-defined]
    return raised, plain


def test_c_scalar_sum_is_marked() -> None:
    raised, plain = _compile_pair(C_SUM)
    assert 'polyflow.reductions = ["add"]' in raised.mlir("affine")  # type: ignore[attr-defined]
    a = np.random.default_rng(3).standard_normal(100).astype(np.float32)
    assert raised(100, a) == plain(100, a)  # type: ignore[operator]
    assert raised(0, a) == plain(0, a) == 0.0  # type: ignore[operator]


@pytest.mark.parametrize("source", [C_GEMM, C_LU], ids=["gemm", "lu"])
def test_c_kernels_through_the_pipeline(source: str) -> None:
    raised, plain = _compile_pair(source)
    text = raised.mlir("affine")  # type: ignore[attr-defined]
    assert "affine.for" in text and 'polyflow.reductions = ["add"]' in text, text
    for n in (0, 1, 6):
        rng = np.random.default_rng(n)
        arrays = [rng.standard_normal((n, n)) + np.eye(n) * 4 * n for _ in range(3)]
        if source is C_GEMM:
            want, got = [a.copy() for a in arrays], [a.copy() for a in arrays]
            plain(n, 1.5, *want)  # type: ignore[operator]
            raised(n, 1.5, *got)  # type: ignore[operator]
        else:
            want, got = [arrays[0].copy()], [arrays[0].copy()]
            plain(n, *want)  # type: ignore[operator]
            raised(n, *got)  # type: ignore[operator]
        for w, g in zip(want, got, strict=True):
            np.testing.assert_array_equal(g, w)
