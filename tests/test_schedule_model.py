"""The polyhedral model read off raised affine IR (polyflow/schedule/model.py) and the
dependences computed from it (dependences.py), compared with hand-derived domains, accesses,
schedules and dependence relations of known kernels; regions cut at non-affine ops; values
demoted to memory (scratchpads, or back to the array element raise-reductions took them from)."""

from __future__ import annotations

from pathlib import Path

import islpy as isl
import pytest
from mlir import ir

from polyflow import raising
from polyflow.frontend.c import emit_c_module
from polyflow.frontend.c_parse import parse_c
from polyflow.ir.functions import raisable_functions
from polyflow.options import Options
from polyflow.poly import isl_helpers as ih
from polyflow.schedule import dependences as deps_mod
from polyflow.schedule.model import Extraction, Scop, ScopRegion, find_scops

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "bench_polybench" / "kernels"
HARNESS = ROOT / "bench_polybench" / "harness"


# ---------------------------------------------------------------------------------------------
# Helpers


class Raised:
    """A C file or source raised to affine; `scops(name)` models function `name` (its
    alias-guarded `.affine` copy when there is one). Keeps the MLIR context alive."""

    def __init__(self, source: str | Path, *, mini: bool = True) -> None:
        if isinstance(source, Path):
            text, filename, where = source.read_text(), str(source), source.parent
        else:
            text, filename, where = source, "input.c", None
        options = Options(defines=("MINI_DATASET",) if mini else (), include_dirs=(str(HARNESS),))
        self.cmod = emit_c_module(parse_c(text, filename, options, where))
        self.context = self.cmod.context
        with self.context:
            raising.raise_to_affine(self.cmod.module, options)

    def function(self, name: str) -> ir.Operation:
        wanted = {name, f"{name}.affine"}
        found = [
            fn
            for fn in raisable_functions(self.cmod.module)
            if ir.StringAttr(fn.attributes["sym_name"]).value in wanted
        ]
        assert found, f"no raised function {name}"
        return found[-1]

    def extract(self, name: str, *, expand_scalars: bool = True) -> Extraction:
        with self.context:
            return find_scops(self.function(name), expand_scalars=expand_scalars)

    def scops(self, name: str, *, expand_scalars: bool = True) -> list[tuple[Scop, ScopRegion]]:
        return self.extract(name, expand_scalars=expand_scalars).scops


def kernel(name: str) -> Raised:
    return Raised(KERNELS / f"{name}.c")


def only_scop(
    raised: Raised, function: str, *, expand_scalars: bool = True
) -> tuple[Scop, ScopRegion]:
    scops = raised.scops(function, expand_scalars=expand_scalars)
    assert len(scops) == 1, [s.function for s, _ in scops]
    return scops[0]


def same_set(got: isl.Set, text: str) -> bool:
    return bool(got.is_equal(isl.Set(text)))


def same_map(got: isl.Map | isl.UnionMap, text: str) -> bool:
    return bool(isl.UnionMap(str(got)).is_equal(isl.UnionMap(text)))


def _arg_number(value: ir.Value) -> int:
    """The function argument an index parameter comes from (through an index cast)."""
    owner = value.owner
    if not isinstance(owner, ir.Block):
        value = owner.operation.operands[0]
    assert isinstance(value, ir.BlockArgument)
    return int(value.arg_number)


# ---------------------------------------------------------------------------------------------
# gemm

GEMM = "[P0, P1, P2] -> { "


@pytest.fixture(scope="module")
def gemm() -> tuple[Raised, Scop, ScopRegion]:
    raised = kernel("gemm")
    scop, region = only_scop(raised, "kernel_gemm")
    return raised, scop, region


def test_gemm_statements_domains_and_parameters(gemm: tuple[Raised, Scop, ScopRegion]) -> None:
    _, scop, region = gemm
    assert [s.name for s in scop.statements] == ["S0", "S1"]
    assert scop.params == ("P0", "P1", "P2")
    # P0 = ni, P1 = nj, P2 = nk: the index casts of arguments 0, 1, 2
    assert [_arg_number(region.params[p]) for p in scop.params] == [0, 1, 2]
    s0, s1 = scop.statements
    assert same_set(s0.domain, GEMM + "S0[i, j] : 0 <= i < P0 and 0 <= j < P1 }")
    assert same_set(s1.domain, GEMM + "S1[i, k, j] : 0 <= i < P0 and 0 <= k < P2 and 0 <= j < P1 }")
    assert (s0.line, s1.line) == (41, 43)
    assert scop.arrays == {"A0": (20, 25), "A1": (20, 30), "A2": (30, 25)}
    assert [region.arrays[a].arg_number for a in ("A0", "A1", "A2")] == [5, 6, 7]
    assert same_map(
        scop.initial_schedule,
        GEMM + "S0[i, j] -> [0, i, 0, j, 0, 0, 0]; S1[i, k, j] -> [0, i, 1, k, 0, j, 0] }",
    )
    assert [len(region.statements[s].ivs) for s in ("S0", "S1")] == [2, 3]


def test_gemm_accesses(gemm: tuple[Raised, Scop, ScopRegion]) -> None:
    _, scop, _ = gemm
    reads = scop.accesses("read")
    writes = scop.accesses("write")
    dom = "0 <= i < P0 and 0 <= k < P2 and 0 <= j < P1"
    assert same_map(
        reads,
        GEMM
        + f"S0[i, j] -> A0[i, j] : 0 <= i < P0 and 0 <= j < P1; S1[i, k, j] -> A0[i, j] : {dom};"
        f" S1[i, k, j] -> A1[i, k] : {dom}; S1[i, k, j] -> A2[k, j] : {dom} }}",
    )
    assert same_map(
        writes,
        GEMM
        + f"S0[i, j] -> A0[i, j] : 0 <= i < P0 and 0 <= j < P1; S1[i, k, j] -> A0[i, j] : {dom} }}",
    )
    assert {a.kind for a in scop.statement("S1").accesses} == {"read", "write"}


def test_gemm_dependences(gemm: tuple[Raised, Scop, ScopRegion]) -> None:
    _, scop, _ = gemm
    deps = deps_mod.compute_dependences(scop)
    # C[i][j] *= beta, then C[i][j] += ... for k = 0, 1, ...: a chain per element.
    chain = (
        GEMM + "S0[i, j] -> S1[i, 0, j] : 0 <= i < P0 and 0 <= j < P1 and P2 > 0;"
        " S1[i, k, j] -> S1[i, k + 1, j] : 0 <= i < P0 and 0 <= k < P2 - 1 and 0 <= j < P1 }"
    )
    assert same_map(deps.raw, chain)
    assert same_map(deps.war, chain)
    assert same_map(deps.waw, chain)
    assert same_map(deps.validity, chain)
    # loops: i (dim 1) and j (dim 5) are parallel, k (dim 3) is not
    assert deps_mod.is_parallel(scop, deps, 1)
    assert not deps_mod.is_parallel(scop, deps, 3)
    assert deps_mod.is_parallel(scop, deps, 5)
    assert deps_mod.respects(scop, deps, scop.initial_schedule)
    # interchanging k and j in S1 keeps every dependence forward; running k backwards does not
    swapped = isl.UnionMap(GEMM + "S0[i, j] -> [i, 0, j, 0]; S1[i, k, j] -> [i, 1, j, k] }")
    assert deps_mod.respects(scop, deps, swapped)
    assert deps_mod.is_permutable(scop, deps, [2, 3], schedule=swapped)
    backwards = isl.UnionMap(GEMM + "S0[i, j] -> [i, 0, j, 0]; S1[i, k, j] -> [i, 1, j, -k] }")
    assert not deps_mod.respects(scop, deps, backwards)
    assert not deps_mod.is_permutable(scop, deps, [2, 3], schedule=backwards)


# ---------------------------------------------------------------------------------------------
# jacobi


def test_jacobi_1d() -> None:
    scop, _ = only_scop(kernel("jacobi-1d"), "kernel_jacobi_1d")
    p = "[P0, P1] -> { "  # P0 = tsteps, P1 = n
    inside = "1 <= i <= P1 - 2"
    assert same_set(scop.statement("S0").domain, p + f"S0[t, i] : 0 <= t < P0 and {inside} }}")
    assert same_set(scop.statement("S1").domain, p + f"S1[t, i] : 0 <= t < P0 and {inside} }}")
    assert same_map(
        scop.accesses("read"),
        p + f"S0[t, i] -> A0[x] : 0 <= t < P0 and {inside} and -1 <= x - i <= 1;"
        f" S1[t, i] -> A1[x] : 0 <= t < P0 and {inside} and -1 <= x - i <= 1 }}",
    )
    deps = deps_mod.compute_dependences(scop)
    near = "1 <= i <= P1 - 2 and 1 <= i2 <= P1 - 2 and -1 <= i2 - i <= 1"
    assert same_map(
        deps.raw,
        p + f"S0[t, i] -> S1[t, i2] : 0 <= t < P0 and {near};"
        f" S1[t, i] -> S0[t + 1, i2] : 0 <= t < P0 - 1 and {near} }}",
    )
    assert same_map(deps.war, str(deps.raw))  # each read's element is written right after
    assert same_map(
        deps.waw,
        p + f"S0[t, i] -> S0[t + 1, i] : 0 <= t < P0 - 1 and {inside};"
        f" S1[t, i] -> S1[t + 1, i] : 0 <= t < P0 - 1 and {inside} }}",
    )
    assert not deps_mod.is_parallel(scop, deps, 1)  # t
    assert deps_mod.is_parallel(scop, deps, 3)  # i, in either statement
    assert same_map(
        deps.live_in,
        p + f"S0[0, i] -> A0[x] : {inside} and P0 > 0 and -1 <= x - i <= 1;"
        f" S0[t, i] -> A0[x] : 0 < t < P0 and {inside} and -1 <= x - i <= 1 and"
        " (x = 0 or x = P1 - 1);"
        f" S1[t, i] -> A1[x] : 0 <= t < P0 and {inside} and -1 <= x - i <= 1 and"
        " (x = 0 or x = P1 - 1) }",
    )


def test_jacobi_2d() -> None:
    scop, _ = only_scop(kernel("jacobi-2d"), "kernel_jacobi_2d")
    p = "[P0, P1] -> { "
    inside = "1 <= i <= P1 - 2 and 1 <= j <= P1 - 2"
    assert same_set(scop.statement("S0").domain, p + f"S0[t, i, j] : 0 <= t < P0 and {inside} }}")
    five = "((x = i and -1 <= y - j <= 1) or (y = j and -1 <= x - i <= 1))"
    assert same_map(
        scop.accesses("read"),
        p + f"S0[t, i, j] -> A0[x, y] : 0 <= t < P0 and {inside} and {five};"
        f" S1[t, i, j] -> A1[x, y] : 0 <= t < P0 and {inside} and {five} }}",
    )
    assert same_map(
        scop.accesses("write"),
        p + f"S0[t, i, j] -> A1[i, j] : 0 <= t < P0 and {inside};"
        f" S1[t, i, j] -> A0[i, j] : 0 <= t < P0 and {inside} }}",
    )
    deps = deps_mod.compute_dependences(scop)
    near = (
        "1 <= i <= P1 - 2 and 1 <= j <= P1 - 2 and 1 <= i2 <= P1 - 2 and 1 <= j2 <= P1 - 2 and"
        " ((i2 = i and -1 <= j2 - j <= 1) or (j2 = j and -1 <= i2 - i <= 1))"
    )
    assert same_map(
        deps.raw,
        p + f"S0[t, i, j] -> S1[t, i2, j2] : 0 <= t < P0 and {near};"
        f" S1[t, i, j] -> S0[t + 1, i2, j2] : 0 <= t < P0 - 1 and {near} }}",
    )
    assert [deps_mod.is_parallel(scop, deps, d) for d in (1, 3, 5)] == [False, True, True]


# ---------------------------------------------------------------------------------------------
# Triangular domains; loop-carried values back in memory


def test_lu_triangular_domains_and_memory_form() -> None:
    raised = kernel("lu")
    scop, region = only_scop(raised, "kernel_lu")
    p = "[P0] -> { "
    assert [s.name for s in scop.statements] == ["S0", "S1", "S2"]
    assert same_set(
        scop.statement("S0").domain, p + "S0[i, j, k] : 0 <= i < P0 and 0 <= k < j < i }"
    )
    assert same_set(scop.statement("S1").domain, p + "S1[i, j] : 0 <= j < i < P0 }")
    # `if (i > 0)` from the raising (the k loop runs only then) is part of S2's domain
    assert same_set(scop.statement("S2").domain, p + "S2[i, j, k] : 0 <= k < i <= j < P0 }")
    # raise-reductions' iter_args went back to A[i][j] itself: no scratchpad array
    assert scop.arrays == {"A0": (40, 40)}
    assert same_map(
        scop.accesses("write"),
        p + "S0[i, j, k] -> A0[i, j] : 0 <= k < j < i < P0; S1[i, j] -> A0[i, j] : 0 <= j < i < P0;"
        " S2[i, j, k] -> A0[i, j] : 0 <= k < i <= j < P0 }",
    )
    with raised.context:
        text = str(raised.function("kernel_lu"))
    assert "memref.alloca" not in text and "iter_args" not in text
    deps = deps_mod.compute_dependences(scop)
    # S0's chain over k for one element, then S1 divides it
    raw = deps.raw
    assert isl.UnionMap(
        p + "S0[i, j, k] -> S0[i, j, k + 1] : 0 <= k < j - 1 and j < i < P0 }"
    ).is_subset(raw)
    assert isl.UnionMap(p + "S0[i, j, j - 1] -> S1[i, j] : 0 < j < i < P0 }").is_subset(raw)
    assert len(region.statements["S0"].loops) == 3


ROWSUM = """
void rowsum(int n, int m, double A[50][60], double B[50]) {
  for (int i = 0; i < n; i++) {
    double s = 0.0;
    for (int j = 0; j < m; j++)
      s += A[i][j];
    B[i] = EXPR;
  }
}
"""


def test_a_sum_stored_as_it_is_accumulates_in_its_element() -> None:
    raised = Raised(ROWSUM.replace("EXPR", "s"), mini=False)
    scop, _ = only_scop(raised, "rowsum")
    # B[i] = 0, then B[i] += A[i][j]: no scratchpad, the rows stay independent
    assert scop.arrays == {"A0": (50,), "A1": (50, 60)}
    p = "[P0, P1] -> { "
    init, update = (s.name for s in scop.statements)
    assert same_map(
        scop.accesses("write"),
        p
        + f"{init}[i] -> A0[i] : 0 <= i < P0; {update}[i, j] -> A0[i] : 0 <= i < P0 and 0 <= j < P1 }}",
    )
    deps = deps_mod.compute_dependences(scop)
    assert deps_mod.is_parallel(scop, deps, 1)
    assert not deps_mod.is_parallel(scop, deps, 3)


def test_a_scalar_used_in_an_expression_goes_to_a_scratchpad() -> None:
    raised = Raised(ROWSUM.replace("EXPR", "s / m"), mini=False)
    scop, region = only_scop(raised, "rowsum", expand_scalars=False)
    assert scop.arrays == {"A0": (), "A1": (50, 60), "A2": (50,)}
    assert [len(s.accesses) for s in scop.statements] == [1, 3, 2]
    p = "[P0, P1] -> { "
    first, update, last = (s.name for s in scop.statements)
    assert same_map(
        scop.accesses("write"),
        p
        + f"{first}[i] -> A0[] : 0 <= i < P0; {update}[i, j] -> A0[] : 0 <= i < P0 and 0 <= j < P1;"
        f" {last}[i] -> A2[i] : 0 <= i < P0 }}",
    )
    scratch = region.arrays["A0"]
    assert scratch.owner.operation.name == "memref.alloca"
    deps = deps_mod.compute_dependences(scop)
    # the 0-d scratchpad orders the rows
    assert not deps_mod.is_parallel(scop, deps, 1)
    assert isl.UnionMap(p + f"{first}[i] -> {update}[i, 0] : 0 <= i < P0 and P1 > 0 }}").is_subset(
        deps.raw
    )


def test_a_value_a_loop_carries_gets_an_element_per_outer_iteration() -> None:
    raised = Raised(ROWSUM.replace("EXPR", "s / m"), mini=False)
    scop, region = only_scop(raised, "rowsum")
    assert scop.arrays == {"A0": (-1,), "A1": (50, 60), "A2": (50,)}
    p = "[P0, P1] -> { "
    first, update, last = (s.name for s in scop.statements)
    assert same_map(
        scop.accesses("write"),
        p
        + f"{first}[i] -> A0[i] : 0 <= i < P0; {update}[i, j] -> A0[i] : 0 <= i < P0 and 0 <= j < P1;"
        f" {last}[i] -> A2[i] : 0 <= i < P0 }}",
    )
    # on the heap, one element per row (the trip count of i, at least 1), freed after the region
    scratch = region.arrays["A0"]
    alloc = scratch.owner.operation
    assert alloc.name == "memref.alloc"
    assert any(use.owner.name == "memref.dealloc" for use in scratch.uses)
    deps = deps_mod.compute_dependences(scop)
    assert deps_mod.is_parallel(scop, deps, 1)  # the rows no longer share the sum


def test_a_load_shared_by_two_statements_is_read_by_each() -> None:
    """gesummv: x[j] feeds both sums; nothing writes x in between, so each statement reads it
    (no scratchpad), and both sums accumulate in their elements."""
    scop, _ = only_scop(kernel("gesummv"), "kernel_gesummv")
    assert all(shape != () for shape in scop.arrays.values())
    inner = [s for s in scop.statements if s.depth == 2]
    assert len(inner) == 2
    x = [
        {a.array for a in s.accesses if a.kind == "read" and a.relation.dim(isl.dim_type.out) == 1}
        for s in inner
    ]
    assert x[0] & x[1]  # one 1-d array (x) read by both


# ---------------------------------------------------------------------------------------------
# Affine constructs: max/min bounds, steps, floordiv/mod, else branches, outer parameters

CONSTRUCTS = """
#lb = affine_map<(d0)[s0] -> (d0, s0 floordiv 2)>
#ub = affine_map<(d0)[s0] -> (d0 + 8, s0)>
#even = affine_set<(d0) : (d0 mod 2 == 0)>
func.func @f(%A: memref<?xf32>, %B: memref<100x100xf32>, %n: index) {
  affine.for %i = 0 to 10 {
    affine.for %j = max #lb(%i)[%n] to min #ub(%i)[%n] step 3 {
      affine.if #even(%j) {
        %x = affine.load %A[%j floordiv 2] : memref<?xf32>
        affine.store %x, %B[%i, %j] : memref<100x100xf32>
      } else {
        %y = affine.load %A[%j mod 5] : memref<?xf32>
        affine.store %y, %B[%j, %i] : memref<100x100xf32>
      }
    }
  }
  return
}
"""


def _mlir_scops(source: str) -> tuple[ir.Context, ir.Module, Extraction]:
    context = ir.Context()
    with context, ir.Location.unknown():
        module = ir.Module.parse(source)
        fn = module.body.operations[0].operation
        return context, module, find_scops(fn)


def test_bounds_steps_divisions_and_branches() -> None:
    _context, _module, found = _mlir_scops(CONSTRUCTS)
    ((scop, _region),) = found.scops
    p = "[P0] -> { "
    loop = "0 <= i <= 9 and j >= i and 2 * j >= P0 - 1 and j < i + 8 and j < P0"
    step = "exists (q : j = max(i, floor(P0 / 2)) + 3 * q)"
    then_, else_ = scop.statements
    assert same_set(then_.domain, p + f"{then_.name}[i, j] : {loop} and {step} and j mod 2 = 0 }}")
    assert same_set(else_.domain, p + f"{else_.name}[i, j] : {loop} and {step} and j mod 2 = 1 }}")
    assert same_map(
        scop.accesses("read"),
        p + f"{then_.name}[i, j] -> A0[floor(j / 2)] : {loop} and {step} and j mod 2 = 0;"
        f" {else_.name}[i, j] -> A0[j mod 5] : {loop} and {step} and j mod 2 = 1 }}",
    )
    assert scop.arrays == {"A0": (-1,), "A1": (100, 100)}


def test_region_inside_a_loop_the_model_leaves_out() -> None:
    source = """
func.func @f(%A: memref<10x10xf32>, %n: index, %p: memref<f32>) {
  affine.for %i = 0 to 10 {
    %v = memref.load %p[] : memref<f32>
    affine.for %j = 0 to 10 {
      affine.store %v, %A[%i, %j] : memref<10x10xf32>
    }
  }
  return
}
"""
    _context, _module, found = _mlir_scops(source)
    ((scop, region),) = found.scops
    # the outer IV is a parameter; the loaded value is a free value of the statement
    assert same_set(
        scop.statements[0].domain,
        "[P0] -> { S[j] : 0 <= j <= 9 }".replace("S", scop.statements[0].name),
    )
    assert region.params["P0"].owner.owner.operation.name == "affine.for"
    assert [lo.op for lo in found.left_out] == ["memref.load"]


# ---------------------------------------------------------------------------------------------
# Cut at non-affine ops; declined regions


def test_region_is_cut_at_a_data_dependent_loop() -> None:
    source = """
void k(int n, double A[100], double B[100]) {
  for (int i = 0; i < n; i++)
    A[i] = A[i] * 2.0;
  int j = 0;
  while (j < n && A[j] > 0.5)
    j++;
  for (int i = 0; i < n; i++)
    B[i] = A[i] + j;
}
"""
    raised = Raised(source, mini=False)
    found = raised.extract("k")
    assert len(found.scops) == 2
    first, second = (scop for scop, _ in found.scops)
    assert [s.depth for s in first.statements] == [1]
    assert [s.depth for s in second.statements] == [1]
    assert any(lo.op == "scf.while" and lo.line == 6 for lo in found.left_out), found.left_out
    # the second region reads j (computed by the loop left out) as a free value
    assert len(second.params) == 1


def test_calls_cut_regions_and_are_reported() -> None:
    source = """
func.func private @g() -> ()
func.func @f(%A: memref<10xf32>) {
  affine.for %i = 0 to 10 {
    %x = affine.load %A[%i] : memref<10xf32>
    affine.store %x, %A[%i] : memref<10xf32>
  }
  func.call @g() : () -> ()
  affine.for %i = 0 to 10 {
    %x = affine.load %A[%i] : memref<10xf32>
    %y = arith.addf %x, %x : f32
    affine.store %y, %A[%i] : memref<10xf32>
  }
  return
}
"""
    context = ir.Context()
    with context, ir.Location.unknown():
        module = ir.Module.parse(source)
        found = find_scops(module.body.operations[1].operation)
    assert len(found.scops) == 2
    assert [(lo.op, lo.reason) for lo in found.left_out] == [
        ("func.call", "a call (it may touch any memory)")
    ]


def test_arrays_that_may_overlap_are_not_modeled() -> None:
    source = """
void k(int n, double *a, double *b) {
  for (int i = 0; i < n; i++)
    a[i] = b[i] + 1.0;
}
"""
    raised = Raised(source, mini=False)
    found = raised.extract("k")
    assert found.scops == []
    assert any("may overlap" in lo.reason for lo in found.left_out), found.left_out


def test_a_function_without_loops_has_no_scop() -> None:
    source = "void k(double A[4]) { A[0] = A[1] + A[2]; }"
    found = Raised(source, mini=False).extract("k")
    assert found.scops == [] and found.left_out == []


# ---------------------------------------------------------------------------------------------
# isl helpers


def test_schedule_tree_of_a_2d_plus_1_schedule() -> None:
    domain = isl.UnionSet(
        "[P] -> { S0[i] : 0 <= i < P; S1[i, j] : 0 <= i < P and 0 <= j < i; S2[] }"
    )
    order = isl.UnionMap("[P] -> { S0[i] -> [0, i, 0]; S1[i, j] -> [0, i, 1, j, 0]; S2[] -> [1] }")
    tree = ih.schedule_tree(domain, order)
    assert ih.band_count(tree) == 2
    text = ih.ast_text(ih.params_universe(["P"]), tree)
    assert text.splitlines() == [
        "{",
        "  for (int c0 = 0; c0 < P; c0 += 1) {",
        "    S0(c0);",
        "    for (int c1 = 0; c1 < c0; c1 += 1)",
        "      S1(c0, c1);",
        "  }",
        "  S2();",
        "}",
    ]
    assert ih.schedule_map(tree).is_equal(ih.padded_schedule(ih.schedule_map(tree)))


@pytest.mark.parametrize(
    "name", ["gemm", "lu", "cholesky", "durbin", "seidel-2d", "correlation", "adi"]
)
def test_kernels_model_without_loss(name: str) -> None:
    """Each kernel function yields scops and leaves nothing out."""
    raised = kernel(name)
    function = f"kernel_{name.replace('-', '_')}"
    found = raised.extract(function)
    assert found.scops and found.left_out == [], found.left_out
    for scop, region in found.scops:
        assert set(region.statements) == {s.name for s in scop.statements}
        deps = deps_mod.compute_dependences(scop)
        assert deps_mod.respects(scop, deps, scop.initial_schedule)


def test_loops_that_hand_carried_values_on_keep_their_code_at_O3(tmp_path: Path) -> None:
    # b2 = b1; b1 = b0 (GSL's Clenshaw sums): the demotion to memory read a value it had
    # already replaced and MLIR aborted the process; such a run is not modeled now
    from difftest import check_program_against_gcc

    from polyflow import Options

    program = Path(__file__).parent / "programs" / "second_order_recurrence.c"
    check_program_against_gcc(program, tmp_path, Options(opt_level=3))
