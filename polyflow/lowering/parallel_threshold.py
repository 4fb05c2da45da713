"""serialize-small-parallel-loops: a parallel loop whose work is known only when the program runs
forks the threads only when it runs at least `min_work` innermost iterations; below that, the
same iterations run as nested sequential loops.

schedule-parallelize keeps a loop nest sequential when its work is *known* to be small (constant
bounds, `bounded_work`); a nest whose bounds are function arguments or outer loop variables
passes that test, and a function called many times with small sizes then pays a fork and join
per call (a 118-point row, 16 million calls: 15x slower than gcc on 2 threads). Here each
outermost `scf.parallel` without results whose nest's innermost iteration count can be computed
before it becomes

    scf.if (work >= min_work) { the scf.parallel } else { the same body in nested scf.for }

The count is computed from the loops' bounds, hoisted when they are pure integer arithmetic
(divisions only by nonzero constants) of values defined outside the parallel loop; sibling
loops add, nested ones multiply, a region of another op (`scf.if`) counts as its larger
branch. Each factor and partial sum is clamped to `min_work`, so the comparison is exact and
nothing overflows. A nest with a loop whose bounds depend on the parallel loop's variables (a
tile's point loops, a chunk of a float reduction), or a `scf.while`, is left as it is: its
work cannot be known before the loop without running it. Runs on `scf` (after lower-affine),
before convert-scf-to-openmp.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from mlir import ir
from mlir.dialects import arith, scf

from polyflow.ir.ops import defined_in, walk

Count: TypeAlias = int | ir.Value  # a Python int when known while compiling, else an index value

# arith ops that may be evaluated before the loop that holds them: pure, never trapping
# (divisions are admitted separately, by a nonzero constant only)
_HOISTABLE = frozenset(
    {"arith.constant", "arith.addi", "arith.subi", "arith.muli", "arith.maxsi", "arith.minsi",
     "arith.maxui", "arith.minui", "arith.select", "arith.cmpi", "arith.index_cast",
     "arith.index_castui", "arith.extsi", "arith.extui", "arith.trunci", "arith.andi",
     "arith.ori", "arith.xori", "arith.shli", "arith.shrsi", "arith.shrui"}
)  # fmt: skip
_DIVISIONS = frozenset(
    {"arith.divsi", "arith.divui", "arith.ceildivsi", "arith.ceildivui", "arith.floordivsi",
     "arith.remsi", "arith.remui"}
)  # fmt: skip


class _Uncountable(Exception):
    """The nest's work cannot be computed before it runs."""


def serialize_small_parallel_loops(module: ir.Module, min_work: int) -> int:
    """Guard each outermost result-less `scf.parallel` of `module` whose work is computable
    before it and not a compile-time constant: it runs in parallel only when that work is at
    least `min_work`, else as nested `scf.for` loops. Returns how many were guarded."""
    if min_work <= 1:
        return 0
    loops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "scf.parallel":
            if len(op.results) == 0:
                loops.append(op)
            return ir.WalkResult.SKIP  # inner parallel loops run inside this one
        if op.name.startswith("gpu."):
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    guarded = 0
    for loop in loops:
        with loop.location:
            if _guard(loop, min_work):
                guarded += 1
    return guarded


def _guard(loop: ir.Operation, min_work: int) -> bool:
    counter = _WorkCounter(loop, min_work)
    try:
        work = counter.parallel_work()
    except _Uncountable:
        counter.discard()
        return False
    if isinstance(work, int):  # known now: schedule-parallelize has decided on it already
        counter.discard()
        return False
    with ir.InsertionPoint(loop):
        threshold = arith.constant(ir.IndexType.get(), min_work)
        enough = arith.cmpi(arith.CmpIPredicate.uge, work, threshold)
        choice = scf.IfOp(enough, [], has_else=True)
    with ir.InsertionPoint(choice.then_block):
        then_end = scf.YieldOp([])
    with ir.InsertionPoint(choice.else_block):
        else_end = scf.YieldOp([])
    sequential = loop.clone(ir.InsertionPoint(else_end))
    loop.move_before(then_end)
    _as_nested_for(sequential)
    return True


def _as_nested_for(loop: ir.Operation) -> None:
    """Replace the result-less `scf.parallel` `loop` by nested `scf.for` loops, one per
    dimension in order, around its body."""
    rank = (len(loop.operands)) // 3
    lowers = list(loop.operands[:rank])
    uppers = list(loop.operands[rank : 2 * rank])
    steps = list(loop.operands[2 * rank : 3 * rank])
    body = loop.regions[0].blocks[0]
    variables: list[ir.Value] = []
    point = ir.InsertionPoint(loop)
    innermost_end: ir.Operation | None = None
    for lower, upper, step in zip(lowers, uppers, steps, strict=True):
        with point:
            nested = scf.ForOp(lower, upper, step)
        with ir.InsertionPoint(nested.body):
            innermost_end = scf.YieldOp([]).operation
        variables.append(nested.induction_variable)
        point = ir.InsertionPoint(innermost_end)
    assert innermost_end is not None
    operations = [op.operation for op in body.operations]
    for op in operations[:-1]:  # the last is the parallel loop's scf.reduce
        op.move_before(innermost_end)
    for old, new in zip(body.arguments, variables, strict=True):
        old.replace_all_uses_with(new)
    loop.erase()


class _WorkCounter:
    """Computes, before `loop`, how many innermost iterations its nest runs (clamped to
    `limit`), creating the ops it needs there."""

    def __init__(self, loop: ir.Operation, limit: int) -> None:
        self.loop = loop
        self.limit = limit
        self.created: list[ir.Operation] = []
        self.hoisted: dict[ir.Value, ir.Value] = {}
        self.point = ir.InsertionPoint(loop)
        self.index = ir.IndexType.get()

    def discard(self) -> None:
        """Erase the ops made so far (the loop stays as it was)."""
        for op in reversed(self.created):
            op.erase()
        self.created.clear()

    def parallel_work(self) -> Count:
        rank = len(self.loop.operands) // 3
        operands = [self._hoist(value) for value in self.loop.operands]
        work: Count = 1
        for dim in range(rank):
            trips = self._trips(operands[dim], operands[rank + dim], operands[2 * rank + dim])
            work = self._times(work, trips)
        return self._times(work, self._block_work(self.loop.regions[0].blocks[0]))

    def _block_work(self, block: ir.Block) -> Count:
        total: Count = 0
        nested = False
        for op in block.operations:
            op = op.operation
            if op.name == "scf.for":
                nested = True
                lower, upper, step = (self._hoist(value) for value in list(op.operands)[:3])
                inner = self._block_work(op.regions[0].blocks[0])
                total = self._plus(total, self._times(self._trips(lower, upper, step), inner))
            elif op.name in ("scf.while", "scf.parallel"):
                raise _Uncountable
            elif len(op.regions) > 0:
                branches = [
                    self._block_work(region.blocks[0])
                    for region in op.regions
                    if len(region.blocks) > 0
                ]
                if any(_has_loops(region) for region in op.regions):
                    nested = True
                    largest: Count = 0
                    for branch in branches:
                        largest = self._max(largest, branch)
                    total = self._plus(total, largest)
        return total if nested else 1

    # -- arithmetic on counts, folded in Python where both sides are known ----------------------

    def _emit(self, build: Callable[[], ir.Value]) -> ir.Value:
        with self.point:
            value = build()
        self.created.append(value.owner)
        return value

    def _const(self, count: Count) -> ir.Value:
        if isinstance(count, int):
            return self._emit(lambda: arith.constant(self.index, count))
        return count

    def _clamp(self, count: Count) -> Count:
        if isinstance(count, int):
            return min(count, self.limit)
        limit = self._const(self.limit)
        return self._emit(lambda: arith.minui(count, limit))

    def _trips(self, lower: Count, upper: Count, step: Count) -> Count:
        if isinstance(lower, int) and isinstance(upper, int) and isinstance(step, int):
            if step <= 0:
                raise _Uncountable
            return self._clamp(max(0, -((lower - upper) // step)))
        lo, hi, st = self._const(lower), self._const(upper), self._const(step)
        zero = self._const(0)
        span = self._emit(lambda: arith.maxsi(self._emit(lambda: arith.subi(hi, lo)), zero))
        return self._clamp(self._emit(lambda: arith.ceildivui(span, st)))

    def _times(self, a: Count, b: Count) -> Count:
        if isinstance(a, int) and isinstance(b, int):
            return self._clamp(a * b)
        if isinstance(a, int) and a == 1:
            return b
        if isinstance(b, int) and b == 1:
            return a
        if (isinstance(a, int) and a == 0) or (isinstance(b, int) and b == 0):
            return 0
        x, y = self._const(a), self._const(b)
        return self._clamp(self._emit(lambda: arith.muli(x, y)))  # both <= limit: no overflow

    def _plus(self, a: Count, b: Count) -> Count:
        if isinstance(a, int) and isinstance(b, int):
            return self._clamp(a + b)
        if isinstance(a, int) and a == 0:
            return b
        if isinstance(b, int) and b == 0:
            return a
        x, y = self._const(a), self._const(b)
        return self._clamp(self._emit(lambda: arith.addi(x, y)))

    def _max(self, a: Count, b: Count) -> Count:
        if isinstance(a, int) and isinstance(b, int):
            return max(a, b)
        if isinstance(a, int) and a == 0:
            return b
        if isinstance(b, int) and b == 0:
            return a
        x, y = self._const(a), self._const(b)
        return self._emit(lambda: arith.maxui(x, y))

    # -- values of the nest, available before it ------------------------------------------------

    def _hoist(self, value: ir.Value) -> Count:
        """`value` as a compile-time int or a value defined before the loop; raises
        `_Uncountable` when it depends on what the loop computes."""
        owner = value.owner
        if isinstance(owner, ir.Block):
            if defined_in(value, self.loop):
                raise _Uncountable
            return value
        op = owner.operation
        if op.name == "arith.constant" and isinstance(value.type, ir.IndexType):
            return ir.IntegerAttr(op.attributes["value"]).value
        if not defined_in(value, self.loop):
            return value
        if value in self.hoisted:
            return self.hoisted[value]
        if op.name in _DIVISIONS:
            divisor = op.operands[1].owner
            if isinstance(divisor, ir.Block) or divisor.operation.name != "arith.constant":
                raise _Uncountable
            if ir.IntegerAttr(divisor.operation.attributes["value"]).value == 0:
                raise _Uncountable
        elif op.name not in _HOISTABLE or len(op.regions) > 0:
            raise _Uncountable
        operands = [self._const(self._hoist(operand)) for operand in op.operands]
        with self.point:
            copy = op.clone()
        self.created.append(copy)
        for position, operand in enumerate(operands):
            copy.operands[position] = operand
        for old, new in zip(op.results, copy.results, strict=True):
            self.hoisted[old] = new
        return self.hoisted[value]


def _has_loops(region: ir.Region) -> bool:
    return any(
        inner.name in ("scf.for", "scf.while", "scf.parallel")
        for block in region.blocks
        for op in block.operations
        for inner in walk(op.operation)
    )
