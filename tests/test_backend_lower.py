"""The lowering to the LLVM dialect: reduction variables of parallel loops hoisted out of
sequential loops, and the alias guard's no-overlap guarantee carried to LLVM as `noalias`; and
what LLVM's optimizer makes of it with polyflow's flags."""

from __future__ import annotations

import re
from pathlib import Path

from mlir import ir
from mlir.passmanager import PassManager

import polyflow
from polyflow.lowering.libm_calls import call_libm_for_inexact_math
from polyflow.lowering.llvm_dialect import (
    PARALLEL_TO_OPENMP,
    hoist_loop_allocas,
    lower_to_llvm_dialect,
    schedule_tile_loops_dynamically,
)

REDUCTION_IN_A_LOOP = """
func.func @rows(%A: memref<100x100xf64>, %out: memref<100xf64>) {
  affine.for %i = 0 to 100 {
    %r = affine.parallel (%j) = (0) to (100) reduce ("addf") -> (f64) {
      %v = affine.load %A[%i, %j] : memref<100x100xf64>
      affine.yield %v : f64
    }
    affine.store %r, %out[%i] : memref<100xf64>
  }
  return
}
"""


def _allocas(module: ir.Module) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "llvm.alloca":
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def test_reduction_variables_move_to_the_function_entry() -> None:
    with ir.Context():
        module = ir.Module.parse(REDUCTION_IN_A_LOOP)
        PassManager.parse(f"builtin.module({PARALLEL_TO_OPENMP})").run(module.operation)
        (alloca,) = _allocas(module)
        fn = module.body.operations[-1].operation
        entry = fn.regions[0].blocks[0]
        assert alloca.block != entry  # convert-scf-to-openmp puts it inside the loop
        hoist_loop_allocas(module)
        (alloca,) = _allocas(module)
        assert alloca.block == entry
        module.operation.verify()


def test_the_whole_lowering_verifies() -> None:
    with ir.Context():
        module = ir.Module.parse(REDUCTION_IN_A_LOOP)
        lower_to_llvm_dialect(module)
        module.operation.verify()
        assert "omp.wsloop" in str(module)


TILES_AND_ROWS = """
func.func @f(%A: memref<128x128xf64>, %x: memref<128xf64>) {
  %c = arith.constant 1.0 : f64
  affine.parallel (%t) = (0) to (128) step (32) {
    affine.for %i = #map(%t) to #map1(%t) {
      affine.store %c, %A[%i, %i] : memref<128x128xf64>
    }
  }
  affine.parallel (%i) = (0) to (128) {
    affine.store %c, %x[%i] : memref<128xf64>
  }
  return
}
"""


def test_loops_over_tiles_are_scheduled_dynamically_and_others_statically() -> None:
    with ir.Context():
        text = "#map = affine_map<(d0) -> (d0)>\n#map1 = affine_map<(d0) -> (d0 + 32)>\n"
        module = ir.Module.parse(text + TILES_AND_ROWS)
        PassManager.parse(f"builtin.module({PARALLEL_TO_OPENMP})").run(module.operation)
        schedule_tile_loops_dynamically(module)
        module.operation.verify()
        loops = re.findall(r"omp\.wsloop[^{]*\{", str(module))
        assert len(loops) == 2
        assert "schedule(dynamic)" in loops[0] and "schedule" not in loops[1]


SOURCE = """
void axpy(int n, double a, double x[100], double y[100]) {
  for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}
void axpy_ptr(int n, double a, double *x, double y[100]) {
  for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}
"""


def _llvm_func_header(text: str, name: str) -> str:
    match = re.search(rf"llvm\.func internal @{re.escape(name)}\((.*?)\) ", text)
    assert match, name
    return match.group(1)


def test_the_guarded_copy_gets_noalias_arrays_only(tmp_path: Path) -> None:
    src = tmp_path / "axpy.c"
    src.write_text(SOURCE)
    out = tmp_path / "axpy.mlir"
    polyflow.build_program(src, out, options=polyflow.Options(opt_level=2), emit="llvm-dialect")
    text = out.read_text()
    # two memrefs of rank 1, each (allocated, aligned, offset, size, stride): the aligned
    # pointers are the ones accessed
    fast = _llvm_func_header(text, "axpy.affine")
    assert fast.count("llvm.noalias") == 2
    assert "llvm.noalias" not in _llvm_func_header(text, "axpy.scf")
    # a C pointer argument may point into the other array: no copy is made, nothing is noalias
    assert "axpy_ptr.affine" not in text and "llvm.noalias" not in text.split("@axpy_ptr(")[1]


STENCIL_1D = """
void smooth(int steps, int n, double A[1000], double B[1000]) {
  for (int t = 0; t < steps; t++) {
    for (int i = 1; i < n - 1; i++)
      B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1]);
    for (int i = 1; i < n - 1; i++)
      A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1]);
  }
}
"""


def test_stencil_vectors_are_loaded_not_shuffled_from_the_previous_iteration(
    tmp_path: Path,
) -> None:
    # GVN's load PRE would carry A[i + 1] over as the next iteration's A[i], and the vectorizer
    # would then rebuild each vector from the previous one with cross-lane shuffles
    src = tmp_path / "smooth.c"
    src.write_text(STENCIL_1D)
    out = tmp_path / "smooth.ll"
    options = polyflow.Options(opt_level=3, march="haswell")
    polyflow.build_program(src, out, options=options, emit="llvm")
    text = out.read_text()
    assert "<4 x double>" in text and "vector.recur" not in text
    # in the vector loops (the whole vectors before and after an aligned middle,
    # lowering/vector_alignment.py, may build their neighbours once per row)
    loops = re.findall(r"\n(vector\.body[\w.]*:.*?)\n\n", text, re.S)
    assert loops
    for loop in loops:
        assert "shufflevector" not in loop.replace("<4 x i32> zeroinitializer", "")


EXPM1_LOG1P = """
func.func @near_zero(%x: f64, %y: f32, %v: vector<2xf64>) -> (f64, f64, f32, f32, vector<2xf64>) {
  %a = math.expm1 %x : f64
  %b = math.log1p %x : f64
  %c = math.expm1 %y : f32
  %d = math.log1p %y : f32
  %e = math.expm1 %v : vector<2xf64>
  return %a, %b, %c, %d, %e : f64, f64, f32, f32, vector<2xf64>
}
"""


def test_expm1_and_log1p_call_libm_not_exp_minus_one() -> None:
    """MLIR's own lowering computes exp(x) - 1 and log(1 + x), which lose every digit near 0."""
    with ir.Context():
        module = ir.Module.parse(EXPM1_LOG1P)
        call_libm_for_inexact_math(module)
        text = str(module)
    for name, t in (("expm1", "f64"), ("log1p", "f64"), ("expm1f", "f32"), ("log1pf", "f32")):
        assert f"func.func private @{name}({t}) -> {t}" in text
        assert f"call @{name}(" in text
    assert text.count("func.func private @expm1(") == 1
    # vectors stay math ops: nothing polyflow generates computes them (see libm_calls.py)
    assert "math.expm1 %arg2 : vector<2xf64>" in text
    assert "math.log1p %arg0" not in text
