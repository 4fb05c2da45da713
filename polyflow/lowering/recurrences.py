"""The recurrences of a loop body: for each loop-carried value (`iter_args`), the ops on the path
from it to the value the body yields for the next iteration (its cycle). A cycle whose ops are
all of one reduction kind (a sum, a product) is a reduction, which LLVM's loop vectorizer runs
in vector lanes; any other cycle (a division by the previous value, a product and a sum) makes
each iteration wait for the one before, and the loop stays scalar."""

from __future__ import annotations

from collections.abc import Iterable

from mlir import ir

# Float sums and products: the recurrences -ffast-math may reorder (llvm_dialect.allow_fast_math).
FLOAT_REDUCTION_KINDS = ({"arith.addf", "arith.subf"}, {"arith.mulf"})
# Every kind LLVM's loop vectorizer recognizes as a reduction (min and max also as a compare and
# a select).
VECTORIZABLE_REDUCTION_KINDS = (
    *FLOAT_REDUCTION_KINDS,
    {"arith.addi", "arith.subi"},
    {"arith.muli"},
    {"arith.andi"},
    {"arith.ori"},
    {"arith.xori"},
    {"arith.maxsi", "arith.cmpi", "arith.select"},
    {"arith.minsi", "arith.cmpi", "arith.select"},
    {"arith.maxui", "arith.cmpi", "arith.select"},
    {"arith.minui", "arith.cmpi", "arith.select"},
    {"arith.maximumf", "arith.maxnumf", "arith.cmpf", "arith.select"},
    {"arith.minimumf", "arith.minnumf", "arith.cmpf", "arith.select"},
)


def recurrence_cycles(
    loop: ir.Operation, reduction_kinds: Iterable[set[str]] = FLOAT_REDUCTION_KINDS
) -> list[ir.Operation]:
    """The ops of `loop`'s body on the cycles of its carried values, leaving out the cycles whose
    ops all fall in one of `reduction_kinds`; empty for a loop without recurrences."""
    kinds_of_reductions = list(reduction_kinds)
    body = loop.regions[0].blocks[0]
    ops = [op.operation for op in body.operations]
    carried = list(body.arguments)[1:]  # after the induction variable
    yielded = list(ops[-1].operands)
    cycles: list[ir.Operation] = []
    for value, next_value in zip(carried, yielded, strict=False):
        reached = _users_in(value, ops)
        cycle = [op for op in _producers_in(next_value, set(ops)) if op in reached]
        kinds = {op.name for op in cycle}
        if cycle and any(kinds <= kind for kind in kinds_of_reductions):
            continue
        cycles.extend(cycle)
    return cycles


def _users_in(value: ir.Value, ops: list[ir.Operation]) -> set[ir.Operation]:
    """The ops of the body (`ops`, in order) that `value` reaches through their operands."""
    reached: set[ir.Operation] = set()
    values = {value}
    for op in ops:
        if any(operand in values for operand in op.operands):
            reached.add(op)
            values.update(op.results)
    return reached


def _producers_in(value: ir.Value, body: set[ir.Operation]) -> set[ir.Operation]:
    """The ops of `body` that `value` is computed from."""
    seen: set[ir.Operation] = set()
    stack = [value]
    while stack:
        owner = stack.pop().owner
        if isinstance(owner, ir.Block):
            continue
        op = owner.operation
        if op not in body or op in seen:
            continue
        seen.add(op)
        stack.extend(op.operands)
    return seen
