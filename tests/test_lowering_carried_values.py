"""Two facts the lowering states for LLVM: a value a loop stored one iteration before is carried
in `iter_args` instead of loaded back (polyflow/lowering/carried_values.py), only where nothing
else can write that element in between; and the accesses of `noalias` arguments carry alias
scopes, so that OpenMP's outlined loop bodies keep knowing the arrays apart
(polyflow/lowering/alias_scopes.py)."""

from __future__ import annotations

import pytest
from mlir import ir

from polyflow.lowering.carried_values import carry_stored_values
from polyflow.lowering.llvm_dialect import lower_to_llvm_dialect

# Two rows of a recurrence side by side (adi's jammed rows), and an array written one column
# ahead of where it is read.
ROWS = """
func.func @rows(%A: memref<10x100xf64> {llvm.noalias}, %B: memref<10x100xf64> {llvm.noalias}) {
  affine.for %i = 0 to 8 step 2 {
    affine.for %j = 1 to 99 {
      %x = affine.load %A[%i, %j - 1] : memref<10x100xf64>
      %x2 = affine.load %A[%i + 1, %j - 1] : memref<10x100xf64>
      %w = affine.load %B[%i, %j] : memref<10x100xf64>
      %y = arith.addf %x, %w : f64
      %y2 = arith.mulf %x2, %w : f64
      affine.store %y, %A[%i, %j] : memref<10x100xf64>
      affine.store %y2, %A[%i + 1, %j] : memref<10x100xf64>
      affine.store %y, %B[%i, %j + 1] : memref<10x100xf64>
    }
  }
  return
}
"""


def _carried(source: str) -> tuple[int, str]:
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(source)
        count = carry_stored_values(module)
        assert module.operation.verify()
        return count, str(module)


def test_each_row_carries_what_it_stored() -> None:
    count, text = _carried(ROWS)
    assert count == 3
    assert "iter_args" in text and "affine.yield %" in text
    # the loop body loads nothing any more; the first values are read before it
    body = text.split("iter_args")[1]
    assert "affine.load" not in body.split("affine.yield")[0]
    assert text.count("memref.load") == 3


@pytest.mark.parametrize(
    ("source", "carried"),
    [
        # row i also stored at another column (i): it may be the element row i reads; row i + 1
        # has no store left to carry from; B still carries its own
        (ROWS.replace("affine.store %y2, %A[%i + 1, %j]", "affine.store %y2, %A[%i, %i]"), 1),
        # the arrays may be one: each store may write the other array's element
        (ROWS.replace(" {llvm.noalias}", ""), 0),
        # row i reads the element stored in the same iteration, not the one before
        (ROWS.replace("%A[%i, %j - 1]", "%A[%i, %j]"), 2),
    ],
    ids=["unknown_column", "may_alias", "same_element"],
)
def test_nothing_is_carried_where_memory_may_change_in_between(source: str, carried: int) -> None:
    count, _ = _carried(source)
    assert count == carried


def test_a_call_in_the_body_keeps_the_loads() -> None:
    source = ROWS.replace(
        "      %w = affine.load",
        "      func.call @touch() : () -> ()\n      %w = affine.load",
    ).replace("  return\n}\n", "  return\n}\nfunc.func private @touch()\n")
    count, _ = _carried(source)
    assert count == 0


PARALLEL = """
func.func @two(%A: memref<64x64xf64> {llvm.noalias}, %B: memref<64x64xf64> {llvm.noalias},
               %C: memref<64x64xf64>) {
  affine.parallel (%i) = (0) to (64) {
    affine.for %j = 0 to 64 {
      %a = affine.load %A[%i, %j] : memref<64x64xf64>
      %c = affine.load %C[%i, %j] : memref<64x64xf64>
      %s = arith.addf %a, %c : f64
      affine.store %s, %B[%i, %j] : memref<64x64xf64>
    }
  }
  return
}
"""


def test_noalias_accesses_in_a_parallel_loop_get_alias_scopes() -> None:
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(PARALLEL)
        lower_to_llvm_dialect(module, threads=2)
        assert module.operation.verify()
        text = str(module)
    region = text.split("omp.parallel")[1]
    accesses = [line for line in region.splitlines() if "llvm.load" in line or "llvm.store" in line]
    scoped = [line for line in accesses if "alias_scopes" in line]
    # A's load and B's store each in its own scope, the other's as noalias; C is no argument
    # marked noalias: its load gets nothing
    assert len(scoped) == 2 and len(accesses) == 3
    assert all("noalias_scopes" in line for line in scoped)
    assert "#llvm.alias_scope_domain" in text or "alias_scope_domain" in text


# A carried sum (a reduction) and a carried recurrence that is not one (adi's q[j] from q[j-1]).
CARRIED_CHAINS = """
func.func @chains(%A: memref<100xf64>, %a: f64, %b: f64) -> (f64, f64) {
  %zero = arith.constant 0.0 : f64
  %sum, %q = affine.for %j = 0 to 100 iter_args(%s = %zero, %x = %zero) -> (f64, f64) {
    %u = affine.load %A[%j] : memref<100xf64>
    %s2 = arith.addf %s, %u : f64
    %ax = arith.mulf %a, %x : f64
    %t = arith.subf %u, %ax : f64
    %t2 = arith.addf %t, %u : f64
    %x2 = arith.divf %t2, %b : f64
    %free = arith.mulf %u, %b : f64
    affine.store %free, %A[%j] : memref<100xf64>
    affine.yield %s2, %x2 : f64, f64
  }
  return %sum, %q : f64, f64
}
"""


def test_fast_math_reassociates_reductions_but_not_other_recurrences() -> None:
    """Under -ffast-math the ops from a carried value to its next value keep their order
    unless they are a plain sum or product: reassociation moved adi's `a * q[j-1]` to the front
    of a sum and ran adi 25% slower than C's order."""
    from polyflow.lowering.llvm_dialect import allow_fast_math, recurrence_ops

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(CARRIED_CHAINS)
        assert sorted(op.name for op in recurrence_ops(module)) == [
            "arith.addf", "arith.divf", "arith.mulf", "arith.subf"
        ]
        allow_fast_math(module)
        flags = [
            str(op.attributes["fastmath"])
            for op in _walked(module)
            if "fastmath" in op.attributes
        ]
    # in body order: %s2, %ax, %t, %t2, %x2, %free
    assert flags[0] == flags[5] == "#arith.fastmath<fast>", flags
    for flag in flags[1:5]:
        assert "reassoc" not in flag and "arcp" in flag, flags


def _walked(module: ir.Module) -> list[ir.Operation]:
    ops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        ops.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return ops
