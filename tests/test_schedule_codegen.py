"""isl schedule → affine MLIR (polyflow/schedule/codegen.py), checked by running the code.

Round trips: every scop of a function is extracted and regenerated with its initial schedule
(the source order: results identical), with a hand-made legal interchange, and with isl's own
schedule tiled by 3 (every dependence respected, so every value is computed from the same
operands in the same order: results identical too, bit for bit, with FMA contraction off).
Small MLIR functions run through the JIT on NumPy arrays; C programs (the 30 PolyBench kernels
at MINI and tests/programs) are built with the round trip inserted after raising and their
output compared with the untransformed build's.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import islpy as isl
import numpy as np
import pytest
from mlir import ir
from mlir.execution_engine import ExecutionEngine
from mlir.runtime import get_ranked_memref_descriptor

import polyflow
from polyflow import pipeline
from polyflow.drivers import compile as entry
from polyflow.lowering.llvm_dialect import lower_to_llvm_dialect
from polyflow.options import Options
from polyflow.poly import isl_helpers as ih
from polyflow.poly.budget import BudgetExhausted
from polyflow.schedule import codegen
from polyflow.schedule import dependences as deps_mod
from polyflow.schedule.codegen import CodegenError, generate
from polyflow.schedule.model import Scop, extract_scops, find_scops, initial_schedule_tree

sys.path.insert(0, str(Path(__file__).parent))
import difftest  # tests/ is not a package

from polyflow import raising
from polyflow.ir.functions import raisable_functions

ROOT = Path(__file__).resolve().parent.parent
KERNELS = sorted((ROOT / "bench_polybench" / "kernels").glob("*.c"))
PROGRAMS = sorted((ROOT / "tests" / "programs").glob("*.c"))
HARNESS = ROOT / "bench_polybench" / "harness"

Transform = Callable[[Scop], isl.Schedule]


# ---------------------------------------------------------------------------------------------
# Schedules


def initial(scop: Scop) -> isl.Schedule:
    return initial_schedule_tree(scop)


def tile_permutable(schedule: isl.Schedule, size: int) -> isl.Schedule:
    """Tile every permutable band of two members or more by `size`."""

    def visit(node: isl.ScheduleNode) -> isl.ScheduleNode:
        kind = node.get_type()
        if kind == isl.schedule_node_type.band and node.band_get_permutable():
            if node.band_n_member() > 1:
                sizes = isl.MultiVal.zero(node.band_get_space())
                for k in range(node.band_n_member()):
                    sizes = sizes.set_val(k, isl.Val.int_from_si(sizes.get_ctx(), size))
                node = node.band_tile(sizes)
        return node

    return schedule.map_schedule_node_bottom_up(visit)


def isl_tiled(scop: Scop) -> isl.Schedule:
    """isl's schedule for the scop's dependences, its permutable bands tiled by 3. (Not for
    tests/programs: on heat3d.c, with constant sizes, isl's scheduler runs for many minutes.)"""
    deps = deps_mod.compute_dependences(scop)
    constraints = (
        isl.ScheduleConstraints.on_domain(scop.domain)
        .set_validity(deps.validity)
        .set_proximity(deps.proximity)
        .set_coincidence(deps.coincidence)
    )
    return tile_permutable(constraints.compute_schedule(), 3)


def strip_mined(scop: Scop) -> isl.Schedule:
    """The source order with every loop strip-mined by 3 (a one-member band tiled): nothing is
    reordered, but the code has min bounds, steps and tile loops."""

    def visit(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if node.get_type() == isl.schedule_node_type.band and node.band_n_member() == 1:
            sizes = isl.MultiVal.zero(node.band_get_space())
            node = node.band_tile(sizes.set_val(0, isl.Val.int_from_si(sizes.get_ctx(), 3)))
        return node

    return initial(scop).map_schedule_node_bottom_up(visit)


def rewrite(fn: ir.Operation, transform: Transform) -> int:
    """Extract `fn`'s scops and regenerate each with `transform`'s schedule; returns how many."""
    count = 0
    for scop, region in extract_scops(fn):
        generate(region, scop, transform(scop))
        count += 1
    return count


# ---------------------------------------------------------------------------------------------
# Pure helpers: min/max and conditions


def test_alternatives_push_min_and_max_outwards() -> None:
    a, b, c = ih.Var("a"), ih.Var("b"), ih.Var("c")
    e = ih.Add((ih.Max((a, b)), ih.Const(1)))
    assert codegen.alternatives(e, "max") == [
        ih.Add((a, ih.Const(1))),
        ih.Add((b, ih.Const(1))),
    ]
    # -min(a, b) = max(-a, -b); floor(max(a, b) / 2) = max(floor(a / 2), floor(b / 2))
    assert codegen.alternatives(ih.Mul(-1, ih.Min((a, b))), "max") == [ih.Mul(-1, a), ih.Mul(-1, b)]
    assert codegen.alternatives(ih.FloorDiv(ih.Max((a, c)), 2), "max") == [
        ih.FloorDiv(a, 2),
        ih.FloorDiv(c, 2),
    ]
    with pytest.raises(CodegenError):
        codegen.alternatives(ih.Min((a, b)), "max")


def test_conditions_become_disjunctions_of_constraints() -> None:
    a, b, c = ih.Var("a"), ih.Var("b"), ih.Var("c")
    # a <= min(b, c): both; a <= max(b, c): either
    both = codegen.condition_dnf(ih.Compare("<=", a, ih.Min((b, c))))
    assert len(both) == 1 and len(both[0]) == 2
    either = codegen.condition_dnf(ih.Compare("<=", a, ih.Max((b, c))))
    assert len(either) == 2 and all(len(conj) == 1 for conj in either)
    eq = codegen.condition_dnf(ih.Compare("==", ih.Mod(a, 2), ih.Const(0)))
    assert eq == [[(codegen._minus(ih.Mod(a, 2), ih.Const(0)), True)]]
    mixed = codegen.condition_dnf(
        ih.And((ih.Compare(">", a, b), ih.Or((ih.Compare("<", a, c), ih.Compare(">=", b, c)))))
    )
    assert [len(conj) for conj in mixed] == [2, 2]


def test_upper_bounds_of_a_loop_condition() -> None:
    c0, p = ih.Var("c0"), ih.Var("P0")
    bounds = codegen.upper_bounds(ih.Compare("<=", c0, ih.Min((ih.Const(2), p))), "c0")
    assert bounds == [ih.Add((ih.Const(2), ih.Const(1))), ih.Add((p, ih.Const(1)))]
    assert codegen.upper_bounds(ih.Compare(">", p, c0), "c0") == [p]
    with pytest.raises(CodegenError):
        codegen.upper_bounds(ih.Compare(">=", c0, p), "c0")


# ---------------------------------------------------------------------------------------------
# MLIR functions through the JIT

MLIR_FUNCTIONS = {
    # max/min bounds, a step, a condition with an else branch, floordiv/mod subscripts
    "constructs": """
#lb = affine_map<(d0)[s0] -> (d0, s0 floordiv 2)>
#ub = affine_map<(d0)[s0] -> (d0 + 8, s0)>
#even = affine_set<(d0) : (d0 mod 2 == 0)>
func.func @k(%A: memref<64xf32>, %B: memref<64x64xf32>, %n: index) {
  affine.for %i = 0 to 10 {
    affine.for %j = max #lb(%i)[%n] to min #ub(%i)[%n] step 3 {
      affine.if #even(%j) {
        %x = affine.load %A[%j floordiv 2] : memref<64xf32>
        %y = affine.load %B[%i, %j] : memref<64x64xf32>
        %s = arith.addf %x, %y : f32
        affine.store %s, %B[%i, %j] : memref<64x64xf32>
      } else {
        %y = affine.load %A[%j mod 5] : memref<64xf32>
        affine.store %y, %B[%j, %i] : memref<64x64xf32>
      }
    }
  }
  return
}""",
    # loop-carried values (a scalar and a reduction into memory) and an if with results
    "carried": """
func.func @k(%A: memref<16x16xf64>, %x: memref<16xf64>, %y: memref<16xf64>, %n: index) {
  %zero = arith.constant 0.0 : f64
  %r = affine.for %i = 0 to %n iter_args(%run = %zero) -> (f64) {
    %y0 = affine.load %y[%i] : memref<16xf64>
    %s = affine.for %j = 0 to %n iter_args(%acc = %y0) -> (f64) {
      %a = affine.load %A[%i, %j] : memref<16x16xf64>
      %b = affine.load %x[%j] : memref<16xf64>
      %p = arith.mulf %a, %b : f64
      %q = arith.addf %acc, %p : f64
      affine.yield %q : f64
    }
    affine.store %s, %y[%i] : memref<16xf64>
    %big = arith.cmpf ogt, %s, %run : f64
    %m = affine.if affine_set<(d0) : (d0 - 2 >= 0)>(%i) -> f64 {
      %t = arith.select %big, %s, %run : f64
      affine.yield %t : f64
    } else {
      affine.yield %run : f64
    }
    affine.yield %m : f64
  }
  affine.store %r, %x[0] : memref<16xf64>
  return
}""",
    # stencil in time: the isl schedule skews and tiles it
    "seidel": """
func.func @k(%A: memref<12x12xf64>, %t: index) {
  %c = arith.constant 0.2 : f64
  affine.for %s = 0 to %t {
    affine.for %i = 1 to 11 {
      affine.for %j = 1 to 11 {
        %a = affine.load %A[%i - 1, %j] : memref<12x12xf64>
        %b = affine.load %A[%i, %j - 1] : memref<12x12xf64>
        %m = affine.load %A[%i, %j] : memref<12x12xf64>
        %d = affine.load %A[%i, %j + 1] : memref<12x12xf64>
        %e = affine.load %A[%i + 1, %j] : memref<12x12xf64>
        %s1 = arith.addf %a, %b : f64
        %s2 = arith.addf %s1, %m : f64
        %s3 = arith.addf %s2, %d : f64
        %s4 = arith.addf %s3, %e : f64
        %r = arith.mulf %s4, %c : f64
        affine.store %r, %A[%i, %j] : memref<12x12xf64>
      }
    }
  }
  return
}""",
}

ARGS: dict[str, Callable[[np.random.Generator], list[np.ndarray | int]]] = {
    "constructs": lambda rng: [
        rng.standard_normal(64).astype(np.float32),
        rng.standard_normal((64, 64)).astype(np.float32),
        37,
    ],
    "carried": lambda rng: [
        rng.standard_normal((16, 16)),
        rng.standard_normal(16),
        rng.standard_normal(16),
        13,
    ],
    "seidel": lambda rng: [rng.standard_normal((12, 12)), 5],
}


def _module(source: str) -> ir.Module:
    module = ir.Module.parse(source)
    for op in module.body.operations:
        op.operation.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
    return module


def _execute(module: ir.Module, args: list[np.ndarray | int]) -> list[np.ndarray]:
    """Run `@k` on copies of `args`; returns the arrays as the function left them."""
    arrays = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    engine = ExecutionEngine(lower_to_llvm_dialect(module), opt_level=0)
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


def _unknown_locations(fn: ir.Operation) -> list[str]:
    out: list[str] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if str(op.location) == "loc(unknown)":
            out.append(op.name)
        return ir.WalkResult.ADVANCE

    fn.walk(visit, ir.WalkOrder.PRE_ORDER)
    return out


@pytest.mark.parametrize(
    "transform", [initial, strip_mined, isl_tiled], ids=["initial", "strip-mined", "isl-tiled"]
)
@pytest.mark.parametrize("name", list(MLIR_FUNCTIONS))
def test_mlir_functions_compute_the_same(name: str, transform: Transform) -> None:
    args = ARGS[name](np.random.default_rng(3))
    with ir.Context(), ir.Location.file("k.mlir", 1, 1):
        before = _module(MLIR_FUNCTIONS[name])
        after = _module(MLIR_FUNCTIONS[name])
        fn = after.body.operations[0].operation
        assert rewrite(fn, transform) >= 1
        after.operation.verify()
        text = str(after)
        assert "iter_args" not in text
        expected = _execute(before, args)
        got = _execute(after, args)
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want, err_msg=text)


def test_new_ops_take_their_locations_from_the_ops_they_replace() -> None:
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(MLIR_FUNCTIONS["seidel"])
        fn = module.body.operations[0].operation
        # parsed ops carry the text's positions; the new code keeps them all
        assert _unknown_locations(fn) == []
        loops_before = {str(op.location) for op in _ops_named(fn, "affine.for")}
        assert rewrite(fn, isl_tiled) == 1
        assert _unknown_locations(fn) == []
        loops_after = {str(op.location) for op in _ops_named(fn, "affine.for")}
        assert loops_after <= loops_before and len(loops_after) >= 2


def _ops_named(fn: ir.Operation, name: str) -> list[ir.Operation]:
    out: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == name:
            out.append(op)
        return ir.WalkResult.ADVANCE

    fn.walk(visit, ir.WalkOrder.PRE_ORDER)
    return out


def test_a_failing_generation_leaves_the_region_as_it_was() -> None:
    with ir.Context(), ir.Location.unknown():
        module = _module(MLIR_FUNCTIONS["seidel"])
        fn = module.body.operations[0].operation
        ((scop, region),) = find_scops(fn).scops
        before = str(module)
        # a schedule over a statement the region does not have
        stranger = isl.UnionSet("[P0] -> { T[i] : 0 <= i < P0 }")
        with pytest.raises(CodegenError, match="no statement"):
            generate(region, scop, isl.Schedule.from_domain(stranger))
        assert str(module) == before
        # the region still generates afterwards
        generate(region, scop, initial(scop))
        module.operation.verify()


def test_ast_building_is_bounded_by_an_operation_budget() -> None:
    with ir.Context(), ir.Location.unknown():
        module = _module(MLIR_FUNCTIONS["seidel"])
        fn = module.body.operations[0].operation
        ((scop, _region),) = find_scops(fn).scops
        with pytest.raises(BudgetExhausted, match="ast ran out of its isl budget"):
            ih.build_ast(scop.context, initial(scop), max_operations=10)
        ih.build_ast(scop.context, initial(scop))  # the default budget suffices; it is restored
        assert scop.context.get_ctx().get_max_operations() == 0


# ---------------------------------------------------------------------------------------------
# C programs, built whole with the round trip after raising


def _stage(transform: Transform, counts: list[int]) -> pipeline.ModuleStage:
    def run(module: ir.Module, options: Options) -> ir.Module:
        with module.context:
            for fn in list(raisable_functions(module)):
                counts.append(rewrite(fn, transform))
        return module

    return ("schedule-roundtrip", run)


def _build_and_run(
    source: Path, exe: Path, options: Options, transform: Transform | None
) -> tuple[str, int]:
    stages = list(pipeline.MODULE_STAGES)
    counts: list[int] = []
    if transform is not None:
        where = [name for name, _ in stages].index("affine") + 1
        stages.insert(where, _stage(transform, counts))
    saved = pipeline.MODULE_STAGES[:]
    pipeline.MODULE_STAGES[:] = stages
    # the counts are kept by this process: no parallel workers (they would count in theirs)
    cores = entry.worker_count
    entry.worker_count = lambda: 1  # type: ignore[assignment]
    try:
        polyflow.build_program(source, exe, options=options)
    finally:
        pipeline.MODULE_STAGES[:] = saved
        entry.worker_count = cores  # type: ignore[assignment]
    args = difftest.read_header(source).args
    run = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 or source.parent.name == "programs", run.stderr
    return f"{run.stdout}\nexit {run.returncode}", sum(counts)


_REFERENCE: dict[Path, str] = {}


def _options(source: Path) -> Options:
    if source.parent.name == "kernels":
        return Options(defines=("MINI_DATASET",), include_dirs=(str(HARNESS),), fp_contract="off")
    return Options(fp_contract="off")


def _reference(source: Path, tmp: Path) -> str:
    if source not in _REFERENCE:
        _REFERENCE[source] = _build_and_run(source, tmp / "ref", _options(source), None)[0]
    return _REFERENCE[source]


def _check_program(source: Path, tmp: Path, transforms: dict[str, Transform]) -> Iterator[int]:
    want = _reference(source, tmp)
    for label, transform in transforms.items():
        got, count = _build_and_run(source, tmp / label, _options(source), transform)
        assert got == want, f"{source.name} with the {label} schedule"
        yield count


# A few kernels on every run; the full sets carry the `slow` mark.
QUICK = {"gemm", "lu", "jacobi-2d", "durbin", "seidel-2d", "correlation", "adi", "cholesky"}


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(k, marks=() if k.stem in QUICK else pytest.mark.slow, id=k.stem)
        for k in KERNELS
    ],
)
def test_polybench_kernel_round_trips(source: Path, tmp_path: Path) -> None:
    counts = list(_check_program(source, tmp_path, {"initial": initial, "isl-tiled": isl_tiled}))
    assert counts[0] >= 1 and counts[0] == counts[1]


@pytest.mark.slow
@pytest.mark.parametrize("source", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_program_round_trips(source: Path, tmp_path: Path) -> None:
    list(_check_program(source, tmp_path, {"initial": initial, "strip-mined": strip_mined}))


def test_gemm_with_k_and_j_interchanged(tmp_path: Path) -> None:
    """The hand-made interchange of gemm's second nest (i, k, j) → (i, j, k): legal (every
    dependence is along k for a fixed C[i][j]), so the output is exactly the same."""

    def interchange(scop: Scop) -> isl.Schedule:
        if not scop.function.startswith("kernel_gemm"):
            return initial(scop)
        swapped = isl.UnionMap(
            "[P0, P1, P2] -> { S0[i, j] -> [0, i, 0, j, 0]; S1[i, k, j] -> [0, i, 1, j, k] }"
        )
        deps = deps_mod.compute_dependences(scop)
        assert deps_mod.respects(scop, deps, swapped)
        return ih.schedule_tree(scop.domain, swapped)

    source = ROOT / "bench_polybench" / "kernels" / "gemm.c"
    list(_check_program(source, tmp_path, {"interchange": interchange}))

    # and the nest really is interchanged: j outside k, k innermost around S1
    raised = polyflow.Options(defines=("MINI_DATASET",), include_dirs=(str(HARNESS),))
    from polyflow.frontend.c import emit_c_module
    from polyflow.frontend.c_parse import parse_c

    cmod = emit_c_module(parse_c(source.read_text(), str(source), raised, source.parent))
    with cmod.context:
        raising.raise_to_affine(cmod.module, raised)
        fn = next(
            f
            for f in raisable_functions(cmod.module)
            if ir.StringAttr(f.attributes["sym_name"]).value == "kernel_gemm.affine"
        )
        assert rewrite(fn, interchange) == 1
        fn.verify()
        loads = [line.split("=", 1)[1].strip() for line in str(fn).splitlines() if "%arg6[" in line]
    # A[i][k] with k the innermost IV (%arg10): the loop order is now i, j, k
    assert loads == ["affine.load %arg6[%arg8, %arg10] : memref<20x30xf64>"], loads
