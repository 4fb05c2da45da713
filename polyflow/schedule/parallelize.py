"""schedule-parallelize: `affine.for` loops without loop-carried dependences → `affine.parallel`,
outermost first, reduction loops with `reduce`; the result computes what the loops computed
(exactly: floating-point reductions are reordered only when asked, `reassociate`).

A loop becomes parallel when all of these hold:
- no iteration depends on another through memory: upstream MLIR's dependence analysis
  (`affine-parallelize`, run as an oracle on a copy of the function whose `iter_args` are
  removed) finds none, and no op in the loop has unknown side effects (calls, non-affine
  accesses);
- each `iter_args` value is a reduction marked by `polyflow.reductions` whose update is one chain
  of `addf/subf/addi/subi`, `mulf/muli`, `andi` or `ori` (what `affine.parallel` verifies and the
  OpenMP lowering supports), on an integer or f32/f64 value, with `parallel_reductions`;
  floating-point ones only with `reassociate` as well;
- its trip count is not a known constant below `min_trip`;
- it neither lies in nor contains the else region of an `affine.if` (upstream's analysis applies
  the if's condition there too, and misses dependences);
- no two distinct memrefs accessed in it may alias with a write among them (upstream's analysis
  assumes distinct memref values are disjoint; polyflow guarantees it only for arguments of known
  extent, see polyflow/ir/aliasing.py), counting only pairs of one element type;
- no enclosing loop is parallel (one level of parallelism: inner loops stay sequential), and
  it contains no `affine.parallel` itself;
- it is not an innermost loop inside sequential loops that may run more than
  `MAX_INNER_FORK_JOINS` iterations in all: that would fork and join the threads once per
  outer iteration for little work (symm's inner reduction ran 1.2 million parallel regions of
  a few hundred iterations each);
- it is not a loop nest inside sequential loops that may run more than `MAX_INNER_FORK_JOINS`
  iterations in all whose nest is known to run fewer than `REPEATED_PARALLEL_WORK_FACTOR`
  times `min_work` innermost iterations: forked on each outer iteration, the fork and join
  cost about what two threads save (doitgen's loop over 5 column tiles of 25 600 iterations,
  forked 21 000 times, ran 40% slower on 2 threads than on 1);
- it is not a nest known to run fewer than `min_work` innermost iterations (the pass option;
  `Options.min_parallel_work`, `MIN_PARALLEL_WORK` by default) whatever its bounds' values
  (`bounded_work`: a tile's point loops, a loop over a small array), even once: the fork and join cost more than sharing saves (lu's tiled code, parallel over 32 rows
  of a tile of 32 columns, was slower on 2 threads than on 1; so were trisolv and ludcmp, whose
  only parallel loops copy a vector of 2000 doubles).

A loop that fails a condition stays an `affine.for` and its inner loops are considered in turn.
A reduction becomes `affine.parallel ... reduce ("addf")` whose body yields the iteration's
contribution (the update chain applied to the identity); the initial value is combined after
the loop, as `init + sum`.

With `reassociate`, the floating-point add and mul reductions left in sequential loops
get the `reassoc` fast-math flag on their update chain (`allow_reassociation`), so that LLVM
vectorizes them with partial sums: the same reordering a parallel reduction does.

Options:
    parallel_reductions: parallelize reduction loops (false: none runs in parallel).
    reassociate: floating-point sums and products may be reordered (-fassociative-math,
        -ffast-math): their reduction loops may run in parallel, and sequential ones are
        reassociated; without it neither happens, as in C without fast-math.
    min_trip: keep loops that are known to run fewer iterations than this sequential.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from mlir import ir
from mlir.dialects import affine
from mlir.passmanager import PassManager

from polyflow.ir.aliasing import VIEW_OPS, has_argument_attribute, may_alias, view_root
from polyflow.ir.names import (
    INDEPENDENT_ATTR,
    NOALIAS_ATTR,
    PARALLEL_LOOP_ATTR,
    REASSOCIATED_ATTR,
    REDUCTIONS_ATTR,
    WAVEFRONT_ATTR,
    WAVEFRONT_COLUMNS_ATTR,
)
from polyflow.ir.remarks import attach_remarks, remark_at

# arith op → (reduction family, whether the chained value must be its left operand)
_CHAIN_OPS = {
    "arith.addf": ("add", False),
    "arith.subf": ("add", True),  # acc - x == acc + (-x)
    "arith.addi": ("add", False),
    "arith.subi": ("add", True),
    "arith.mulf": ("mul", False),
    "arith.muli": ("mul", False),
    "arith.andi": ("and", False),
    "arith.ori": ("or", False),
}
# (family, is float) → the AtomicRMWKind name `affine.parallel` reduces with. Only kinds that
# verify on MLIR 22 and that convert-scf-to-openmp turns into an OpenMP reduction: integer
# min/max, xori and minnumf/maxnumf fail `affine.parallel`'s verifier there, and
# maximumf/minimumf reductions fail the OpenMP conversion.
_KINDS = {
    ("add", True): "addf",
    ("add", False): "addi",
    ("mul", True): "mulf",
    ("mul", False): "muli",
    ("and", False): "andi",
    ("or", False): "ori",
}
# AtomicRMWKind values (mlir/Dialect/Arith/IR/ArithBase.td), as `affine.parallel` stores them.
_KIND_CODES = {"addf": 0, "addi": 1, "andi": 2, "mulf": 12, "muli": 13, "ori": 14}
_FLOAT_KINDS = frozenset({"addf", "mulf"})

_READS = {"affine.load": 0, "memref.load": 0, "affine.vector_load": 0, "memref.dim": 0}


@dataclass(frozen=True)
class Reduction:
    """One `iter_args` value of a loop that can run in parallel: its kind and identity."""

    kind: str  # an AtomicRMWKind name: addf addi mulf muli andi ori
    type: ir.Type


# ---------------------------------------------------------------------------------------------
# Small IR queries


def _loops(op: ir.Operation) -> Iterator[ir.Operation]:
    """The `affine.for`/`affine.parallel` ops nested in `op`, in pre-order (outer before inner,
    program order among siblings); the same order on a copy of `op`."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner = inner.operation
                if inner.name in ("affine.for", "affine.parallel"):
                    yield inner
                yield from _loops(inner)


def _within(op: ir.Operation, ancestor: ir.Operation) -> bool:
    """Whether `op` is nested, at any depth, in the regions of `ancestor`."""
    parent = op.parent
    while parent is not None:
        if parent.operation == ancestor:
            return True
        parent = parent.parent
    return False


# An innermost loop runs in parallel inside sequential loops only when those run at most this
# many iterations in all: each one forks and joins the threads for one loop's work.
MAX_INNER_FORK_JOINS = 64
# Nor does a loop nest known to run fewer innermost iterations than this (whatever its bounds'
# values: tile-sized loops), as a fork and join costs microseconds.
MIN_PARALLEL_WORK = 8192
# And a loop nest forked on each iteration of sequential loops (more than MAX_INNER_FORK_JOINS
# of them) only when it runs at least this many times that (65 536 by default): a fork and
# join here costs about 5 µs, what a core does with some 30 000 innermost iterations of a
# vectorized body.
REPEATED_PARALLEL_WORK_FACTOR = 8


def _isl_independent(loop: ir.Operation) -> bool:
    """Whether isl showed that `loop` carries no dependence (see INDEPENDENT_ATTR) and it has no
    call inside, whose effects isl did not model."""
    if INDEPENDENT_ATTR not in loop.attributes:
        return False
    return not _contains(loop, lambda op: op.name in _CALL_OPS)


_CALL_OPS = frozenset({"func.call", "func.call_indirect", "llvm.call"})


def _contains(op: ir.Operation, wanted: Callable[[ir.Operation], bool]) -> bool:
    """Whether `op`, or an op nested in it, is `wanted`."""
    found = False

    def visit(inner: ir.Operation) -> ir.WalkResult:
        nonlocal found
        if wanted(inner):
            found = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return found


def _too_many_fork_joins(loop: ir.Operation, fn: ir.Operation) -> bool:
    """Whether the loops around `loop` (inside `fn`) may run more than MAX_INNER_FORK_JOINS
    iterations in all (any trip count not a known constant counts as too many)."""
    total = 1
    parent = loop.parent
    while parent is not None and parent.operation != fn:
        if parent.operation.name == "affine.for":
            trip = constant_trip_count(parent.operation)
            if trip is None:
                return True
            total *= trip
            if total > MAX_INNER_FORK_JOINS:
                return True
        parent = parent.parent
    return False


def _touches_else_region(loop: ir.Operation, fn: ir.Operation) -> bool:
    """Whether `loop` lies in, or contains, the else region of an `affine.if`. Upstream's
    dependence analysis constrains an access by each enclosing `affine.if`'s condition even in
    its else region, where the condition is false: it found no dependence in lu's tiled k loop
    (which has one) and the parallel loop computed NaNs."""
    parent = loop.parent
    child = loop
    while parent is not None and parent.operation != fn:
        if parent.operation.name == "affine.if" and len(parent.operation.regions) > 1:
            else_region = parent.operation.regions[1]
            if any(block == child.block for block in else_region.blocks):
                return True
        child = parent.operation
        parent = parent.parent
    return _contains(
        loop,
        lambda op: op.name == "affine.if" and len(op.regions) > 1 and len(op.regions[1].blocks) > 0,
    )


def _constant_bound(attr: ir.Attribute, pick: Any) -> int | None:
    """A bound map's value when every result is a constant (`pick`: max for lower, min for
    upper bounds), else None."""
    values = []
    for expr in ir.AffineMapAttr(attr).value.results:
        if not isinstance(expr, ir.AffineConstantExpr):
            return None
        values.append(expr.value)
    return pick(values) if values else None


def constant_trip_count(loop: ir.Operation) -> int | None:
    """The number of iterations of an `affine.for` with constant bounds, None when unknown."""
    lower = _constant_bound(loop.attributes["lowerBoundMap"], max)
    upper = _constant_bound(loop.attributes["upperBoundMap"], min)
    if lower is None or upper is None:
        return None
    step = ir.IntegerAttr(loop.attributes["step"]).value
    return max(0, -(-(upper - lower) // step))


def bounded_trip_count(loop: ir.Operation) -> int | None:
    """An upper bound on the iterations of an `affine.for` whose extent is a constant however
    its bounds' operands vary (a tile's point loop: `%t to min(%t + 32, %n)` runs at most 32),
    None when no upper bound minus lower bound is one. Decided by evaluating the bounds at a
    few operand values: it steers a cost choice, never correctness."""
    view = loop.opview
    lower_map = ir.AffineMapAttr(loop.attributes["lowerBoundMap"]).value
    upper_map = ir.AffineMapAttr(loop.attributes["upperBoundMap"]).value
    lower_operands, upper_operands = list(view.lowerBoundOperands), list(view.upperBoundOperands)
    operands = list(dict.fromkeys([*lower_operands, *upper_operands]))
    samples = [
        {value: _SAMPLE_VALUES[(k * 7 + n) % 11] for k, value in enumerate(operands)}
        for n in range(4)
    ]
    step = ir.IntegerAttr(loop.attributes["step"]).value
    best: int | None = None
    for upper in upper_map.results:
        for lower in lower_map.results:
            extents = {
                _evaluate(upper, upper_map, upper_operands, sample)
                - _evaluate(lower, lower_map, lower_operands, sample)
                for sample in samples
            }
            if len(extents) == 1:
                extent = extents.pop()
                trips = max(0, -(-extent // step))
                best = trips if best is None else min(best, trips)
    return best


def _extent_bound(loop: ir.Operation) -> int | None:
    """The smallest static extent of an array dimension that `loop`'s body indexes with the
    loop's own counter (plus a constant): a program within its arrays runs at most that many
    iterations (trisolv's `for (i = 0; i < n; i++) x[i] = b[i]` with x of 2000 doubles). None
    when no access says. A cost estimate, never a correctness argument."""
    counter = loop.regions[0].blocks[0].arguments[0]
    best: int | None = None

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal best
        if op.name not in ("affine.load", "affine.store"):
            return ir.WalkResult.ADVANCE
        first = 0 if op.name == "affine.load" else 1
        memref_type = ir.MemRefType(op.operands[first].type)
        indices = list(op.operands)[first + 1 :]
        access = ir.AffineMapAttr(op.attributes["map"]).value
        for dim, expr in enumerate(access.results):
            if isinstance(expr, ir.AffineAddExpr) and isinstance(expr.rhs, ir.AffineConstantExpr):
                expr = expr.lhs
            if not isinstance(expr, ir.AffineDimExpr):
                continue
            if expr.position >= len(indices) or indices[expr.position] != counter:
                continue
            size = memref_type.shape[dim]
            if not ir.ShapedType.is_dynamic_size(size):
                best = size if best is None else min(best, size)
        return ir.WalkResult.ADVANCE

    loop.walk(visit)
    return best


def bounded_work(loop: ir.Operation) -> int | None:
    """An upper bound on the innermost iterations one run of `loop` executes (its bounded trip
    count times the work of the loops in its body, siblings added), None when some loop in it
    has no bounded trip count."""
    trips = bounded_trip_count(loop)  # constant bounds included
    if trips is None:
        trips = _extent_bound(loop)
    if trips is None:
        trips = _tile_extent_bound(loop)
    if trips is None:
        return None
    body = 0
    for inner in _child_loops(loop):
        work = bounded_work(inner)
        if work is None:
            return None
        body += work
    return trips * max(1, body)


def _tile_extent_bound(loop: ir.Operation) -> int | None:
    """For a tile loop (a loop inside it starts at its counter: a tile's point loop), the
    tiles an array extent allows: the point loop's `_extent_bound` over the tile loop's step.
    None when no such point loop says. A cost estimate, like `_extent_bound`."""
    counter = loop.regions[0].blocks[0].arguments[0]
    step = ir.IntegerAttr(loop.attributes["step"]).value
    best: int | None = None
    for inner in _loops(loop):
        if inner.name != "affine.for" or inner == loop:
            continue
        lower = ir.AffineMapAttr(inner.attributes["lowerBoundMap"]).value
        operands = list(inner.opview.lowerBoundOperands)
        if len(lower.results) != 1:
            continue
        expr = lower.results[0]
        if isinstance(expr, ir.AffineAddExpr) and isinstance(expr.rhs, ir.AffineConstantExpr):
            expr = expr.lhs
        if isinstance(expr, ir.AffineDimExpr):
            position = expr.position
        elif isinstance(expr, ir.AffineSymbolExpr):
            position = lower.n_dims + expr.position
        else:
            continue
        if position >= len(operands) or operands[position] != counter:
            continue
        extent = _extent_bound(inner)
        if extent is not None:
            tiles = -(-extent // step)
            best = tiles if best is None else min(best, tiles)
    return best


def _child_loops(op: ir.Operation) -> Iterator[ir.Operation]:
    """The `affine.for` ops nested in `op` with no loop between (through `affine.if`s)."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner = inner.operation
                if inner.name == "affine.for":
                    yield inner
                elif inner.name == "affine.if":
                    yield from _child_loops(inner)


_SAMPLE_VALUES = (1009, 7919, 104729, 3, 65537, 271, 40503, 12289, 97, 524287, 2039)


def _evaluate(
    expr: ir.AffineExpr, amap: ir.AffineMap, operands: list[ir.Value], values: dict[ir.Value, int]
) -> int:
    """`expr` (a result of `amap`) with its dims and symbols bound to `operands`' `values`."""
    if isinstance(expr, ir.AffineConstantExpr):
        return int(expr.value)
    if isinstance(expr, ir.AffineDimExpr):
        return values[operands[expr.position]]
    if isinstance(expr, ir.AffineSymbolExpr):
        return values[operands[amap.n_dims + expr.position]]
    assert isinstance(expr, ir.AffineBinaryExpr), expr
    lhs = _evaluate(expr.lhs, amap, operands, values)
    rhs = _evaluate(expr.rhs, amap, operands, values)
    if isinstance(expr, ir.AffineAddExpr):
        return lhs + rhs
    if isinstance(expr, ir.AffineMulExpr):
        return lhs * rhs
    if isinstance(expr, ir.AffineModExpr):
        return lhs % rhs
    if isinstance(expr, ir.AffineFloorDivExpr):
        return lhs // rhs
    return -(-lhs // rhs)  # ceildiv


def _aliasing_conflict(loop: ir.Operation, fn: ir.Operation) -> bool:
    """Whether `loop` accesses two distinct memrefs that may alias, one of them written, of the
    same element type, or a view made inside it (one SSA value that may address different
    memory in each iteration): the cases upstream's analysis would wrongly call independent."""
    accessed: list[tuple[ir.Value, bool]] = []  # (memref, written), lists: Values hash by identity
    local_view = False

    def note(value: ir.Value, written: bool) -> None:
        for k, (seen, was_written) in enumerate(accessed):
            if seen == value:
                accessed[k] = (seen, was_written or written)
                return
        accessed.append((value, written))

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal local_view
        for index, operand in enumerate(op.operands):
            if not isinstance(operand.type, ir.MemRefType):
                continue
            if _defined_inside(operand, loop):
                if not _defined_inside(view_root(operand), loop):
                    local_view = True
                continue  # memory allocated in the loop is private to an iteration
            if op.name in _READS and index == _READS[op.name]:
                note(operand, False)
            elif op.name in VIEW_OPS and index == 0:
                continue  # the view's own uses are seen where they happen
            else:  # a store, or an op that may write through it
                note(operand, True)
        return ir.WalkResult.ADVANCE

    loop.walk(visit, ir.WalkOrder.PRE_ORDER)
    if local_view:
        return True
    for i, (a, a_written) in enumerate(accessed):
        for b, b_written in accessed[i + 1 :]:
            if not (a_written or b_written):
                continue
            same_type = ir.MemRefType(a.type).element_type == ir.MemRefType(b.type).element_type
            if same_type and may_alias(a, b):
                return True
    return False


def _defined_inside(value: ir.Value, loop: ir.Operation) -> bool:
    owner = value.owner
    op = owner.owner.operation if isinstance(owner, ir.Block) else owner.operation
    return op == loop or _within(op, loop)


def _reduction_of(loop: ir.Operation, index: int, family: str) -> Reduction | None:
    """The reduction that `iter_args` value `index` of `loop` performs when its update is one
    chain of ops of `family` from the loop-carried value to what the loop yields, each chain
    value used once (so nothing else reads the partial result); None otherwise."""
    value_type = loop.regions[0].blocks[0].arguments[1 + index].type
    is_float = isinstance(value_type, ir.F32Type | ir.F64Type)
    is_int = isinstance(value_type, ir.IntegerType) and value_type.width >= 8
    if not (is_float or is_int):
        return None
    chain = _update_chain(loop, index, family)
    if chain is None or any(op.name.endswith("f") != is_float for op in chain):
        return None
    kind = _KINDS.get((family, is_float))
    return None if kind is None else Reduction(kind, value_type)


def _update_chain(loop: ir.Operation, index: int, family: str) -> list[ir.Operation] | None:
    """The ops of `family` leading from `iter_args` value `index` of `loop` to what the loop
    yields, each chain value used once; None when the update is not such a chain."""
    body = loop.regions[0].blocks[0]
    yielded = body.operations[len(body.operations) - 1].operation.operands[index]
    current: ir.Value = body.arguments[1 + index]
    ops: list[ir.Operation] = []
    while current != yielded:
        uses = list(current.uses)
        if len(uses) != 1:
            return None
        user = uses[0].owner.operation
        chain = _CHAIN_OPS.get(user.name)
        if chain is None or chain[0] != family or user.block != body:
            return None
        if chain[1] and uses[0].operand_number != 0:
            return None  # x - acc is no reduction
        ops.append(user)
        current = user.results[0]
    if len(list(yielded.uses)) != 1:  # read again besides the yield
        return None
    return ops


def loop_reductions(
    loop: ir.Operation, *, floats: bool, ints: bool = True
) -> list[Reduction] | None:
    """The reduction of each `iter_args` value of `loop`, or None when one is not a reduction
    it can run in parallel (not marked, not a simple chain, a float and `floats` is false, an
    integer and `ints` is false)."""
    body = loop.regions[0].blocks[0]
    count = len(body.arguments) - 1
    if count == 0:
        return []
    if REDUCTIONS_ATTR not in loop.attributes:
        return None
    marks = [ir.StringAttr(a).value for a in ir.ArrayAttr(loop.attributes[REDUCTIONS_ATTR])]
    if len(marks) != count:
        return None
    out = []
    for index, family in enumerate(marks):
        reduction = _reduction_of(loop, index, family)
        if reduction is None or not (floats if reduction.kind in _FLOAT_KINDS else ints):
            return None
        out.append(reduction)
    return out


# ---------------------------------------------------------------------------------------------
# The dependence oracle


def _strip_iter_args(loop: ir.Operation) -> None:
    """Replace `loop` by an `affine.for` with the same bounds and body but no `iter_args` (the
    carried values replaced by their initial values): its memory accesses are unchanged, so
    upstream's analysis then answers for memory alone."""
    view = loop.opview
    with ir.InsertionPoint(loop):
        new = affine.AffineForOp(
            view.lowerBoundMap.value,
            view.upperBoundMap.value,
            view.step,
            [],
            lower_bound_operands=list(view.lowerBoundOperands),
            upper_bound_operands=list(view.upperBoundOperands),
            loc=loop.location,
        )
    old_body = loop.regions[0].blocks[0]
    inits = list(view.inits)
    ops = [op.operation for op in old_body.operations]
    for op in ops[:-1]:
        new.body.append(op)
    with ir.InsertionPoint(new.body):
        affine.AffineYieldOp([], loc=loop.location)
    old_body.arguments[0].replace_all_uses_with(new.induction_variable)
    for arg, init in zip(list(old_body.arguments)[1:], inits, strict=True):
        arg.replace_all_uses_with(init)
    for result, init in zip(loop.results, inits, strict=True):
        result.replace_all_uses_with(init)
    loop.erase()


def _drop_read_only_gathers(fn: ir.Operation) -> None:
    """Replace each `memref.load` of `fn` from a function argument that nothing in `fn` writes
    (and that aliases no written argument: every written one is marked `noalias`) by a zero."""
    written: list[ir.Value] = []
    loads: list[ir.Operation] = []
    calls = False

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal calls
        if op.name in ("affine.store", "memref.store", "affine.vector_store", "memref.atomic_rmw"):
            written.append(view_root(op.operands[1]))
        elif op.name in _CALL_OPS:
            calls = True
        elif op.name == "memref.load":
            loads.append(op)
        return ir.WalkResult.ADVANCE

    fn.walk(visit)
    if calls:
        return
    arguments = list(fn.regions[0].blocks[0].arguments)
    for load in loads:
        array = view_root(load.operands[0])
        if not any(array == a for a in arguments) or any(array == w for w in written):
            continue
        if any(not has_argument_attribute(w, NOALIAS_ATTR) for w in written):
            continue  # a written array might be this one
        element = load.results[0].type
        with ir.InsertionPoint(load), load.location:
            zero = (
                ir.FloatAttr.get(element, 0.0)
                if isinstance(element, ir.FloatType)
                else ir.IntegerAttr.get(element, 0)
            )
            constant = ir.Operation.create(
                "arith.constant", results=[element], attributes={"value": zero}
            )
        load.results[0].replace_all_uses_with(constant.results[0])
        load.erase()


def memory_parallel_loops(fn: ir.Operation, *, read_only_gathers: bool = False) -> list[bool]:
    """For each loop of `fn` in `_loops` order: whether upstream's dependence analysis finds
    no dependence carried by it through memory and no op with unknown effects in it. With
    `read_only_gathers`, reads whose subscripts are data (`memref.load`, which upstream's
    analysis gives up on) of arrays `fn` never writes are left out of the question: nothing
    they read changes while the loops run."""
    scratch = ir.Module.create(loc=fn.location)
    with ir.InsertionPoint(scratch.body):
        copy = fn.clone()
    if read_only_gathers:
        _drop_read_only_gathers(copy)
    carrying = [
        loop
        for loop in _loops(copy)
        if loop.name == "affine.for"
        and len(loop.results) > 0
        and not any(isinstance(r.type, ir.MemRefType) for r in loop.results)
    ]
    for loop in carrying:
        _strip_iter_args(loop)
    pm = PassManager("func.func")
    pm.add("affine-parallelize")  # no nesting limit: every parallel loop converts
    pm.enable_verifier(False)  # the copy's calls name functions the scratch module lacks
    pm.run(copy)
    flags = [loop.name == "affine.parallel" for loop in _loops(copy)]
    del scratch
    return flags


# ---------------------------------------------------------------------------------------------
# Choosing and rewriting


def choose_parallel_loops(
    fn: ir.Operation,
    *,
    parallel_reductions: bool,
    min_trip: int,
    reassociate: bool = True,
    kept_sequential: list[tuple[ir.Operation, str]] | None = None,
    min_work: int = MIN_PARALLEL_WORK,
) -> list[tuple[ir.Operation, list[Reduction]]]:
    """The loops of `fn` to make parallel, outermost first, with their reductions (see the
    module docstring); the chosen loops are never nested in each other.

    A loop only isl showed independent (`INDEPENDENT_ATTR`; upstream's analysis did not) is
    chosen only on a wavefront (`WAVEFRONT_ATTR`) or in place of loops chosen inside it without
    that mark: it moves parallelism outwards (gramschmidt's column tiles instead of a row loop
    forked 20 000 times), but does not add it where there was none (lu's and cholesky's column
    tiles, a few per fork at the end of their triangles, ran slower on 2 threads than lu's
    sequential tiles).

    `kept_sequential`, when given, receives the outermost loops that carry no dependence but
    stay sequential, each with the reason (too few iterations or too little work to fork for,
    a reduction that may not be reordered, arrays that may overlap)."""
    loops = list(_loops(fn))
    oracle = memory_parallel_loops(fn)
    if len(oracle) != len(loops):
        raise RuntimeError("the dependence oracle's copy lost track of the loops")
    floats, ints = parallel_reductions and reassociate, parallel_reductions
    rejected: list[tuple[ir.Operation, str]] = []
    plain = _choose(
        fn, loops, oracle, trust_isl=False, floats=floats, ints=ints, min_trip=min_trip,
        rejected=rejected, min_work=min_work,
    )
    hoisted = _choose(
        fn, loops, oracle, trust_isl=True, floats=floats, ints=ints, min_trip=min_trip,
        min_work=min_work,
    )
    independent = {loop for loop, free in zip(loops, oracle, strict=True) if free}
    chosen = [
        (loop, reductions)
        for loop, reductions in hoisted
        if loop in independent
        or WAVEFRONT_ATTR in loop.attributes
        or any(_within(inner, loop) for inner, _ in plain)
    ]
    if kept_sequential is not None:
        parallel = [loop for loop, _ in chosen]
        kept: list[ir.Operation] = []
        for loop, reason in rejected:  # outermost first, as `_loops` walks
            if any(loop == p or _within(loop, p) for p in parallel):
                continue
            if any(_within(loop, outer) for outer in kept):
                continue
            kept.append(loop)
            kept_sequential.append((loop, reason))
    return chosen


def _choose(
    fn: ir.Operation,
    loops: list[ir.Operation],
    oracle: list[bool],
    *,
    trust_isl: bool,
    floats: bool,
    ints: bool,
    min_trip: int,
    rejected: list[tuple[ir.Operation, str]] | None = None,
    min_work: int = MIN_PARALLEL_WORK,
) -> list[tuple[ir.Operation, list[Reduction]]]:
    """The outermost loops meeting the module docstring's conditions, with their reductions;
    with `trust_isl`, isl's `INDEPENDENT_ATTR` stands in for the oracle's verdict. `rejected`
    receives the independent loops left sequential for their cost or their reductions, with
    the reason."""
    def reject(loop: ir.Operation, reason: str) -> None:
        if rejected is not None:
            rejected.append((loop, reason))

    chosen: list[tuple[ir.Operation, list[Reduction]]] = []
    blocked: list[ir.Operation] = []  # chosen loops and existing affine.parallel ops
    for loop, independent in zip(loops, oracle, strict=True):
        if any(_within(loop, outer) for outer in blocked):
            continue
        if loop.name == "affine.parallel":
            blocked.append(loop)
            continue
        if not (independent or (trust_isl and _isl_independent(loop))):
            continue
        trip = constant_trip_count(loop)
        if trip is not None and trip < min_trip:
            reject(loop, f"it runs {trip} iterations, fewer than --min-parallel-trip ({min_trip})")
            continue
        # (isl's own check, made on the schedule, does not share upstream's mistake)
        if _touches_else_region(loop, fn) and not (trust_isl and _isl_independent(loop)):
            continue
        inner_loops = list(_loops(loop))
        if any(inner.name == "affine.parallel" for inner in inner_loops):
            continue
        if not inner_loops and _too_many_fork_joins(loop, fn):
            reject(
                loop,
                "an innermost loop inside sequential loops of more than "
                f"{MAX_INNER_FORK_JOINS} iterations: it would fork and join the threads "
                "on each",
            )
            continue
        work = bounded_work(loop)
        if (
            inner_loops
            and work is not None
            and work < REPEATED_PARALLEL_WORK_FACTOR * min_work
            and _too_many_fork_joins(loop, fn)
        ):
            reject(
                loop,
                f"its nest runs at most {work} innermost iterations, forked on each of more "
                f"than {MAX_INNER_FORK_JOINS} iterations of the loops around it: too little "
                "work each time to pay for forking and joining the threads",
            )
            continue
        if work is not None and work < min_work:
            # a tile's point loops under tile loops: lu forked 60 000 times for 32²
            reject(
                loop,
                f"its nest runs at most {work} innermost iterations: too little work to pay "
                "for forking and joining the threads",
            )
            continue
        reductions = loop_reductions(loop, floats=floats, ints=ints)
        if reductions is None:
            reject(
                loop,
                "it carries a value from one iteration to the next that is not a reduction "
                "it may reorder (a floating-point sum runs in parallel only with "
                "-fassociative-math or -ffast-math)",
            )
            continue
        if _aliasing_conflict(loop, fn):
            reject(loop, "two arrays it writes and reads may overlap")
            continue
        chosen.append((loop, reductions))
        blocked.append(loop)
    return chosen


def _identity(reduction: Reduction, loc: ir.Location) -> ir.Value:
    """The neutral element of a reduction, as a constant (-0.0 for addf: -0.0 + x == x)."""
    t = reduction.type
    if reduction.kind in _FLOAT_KINDS:
        value = ir.FloatAttr.get(t, -0.0 if reduction.kind == "addf" else 1.0)
    else:
        value = ir.IntegerAttr.get(t, {"addi": 0, "muli": 1, "andi": -1, "ori": 0}[reduction.kind])
    op = ir.Operation.create("arith.constant", results=[t], attributes={"value": value}, loc=loc)
    return op.results[0]


def make_parallel(loop: ir.Operation, reductions: list[Reduction]) -> ir.Operation:
    """Rewrite `affine.for` `loop` into a one-dimensional `affine.parallel` (see the module
    docstring); returns the new op."""
    view = loop.opview
    loc = loop.location
    lower = ir.AffineMapAttr(loop.attributes["lowerBoundMap"])
    upper = ir.AffineMapAttr(loop.attributes["upperBoundMap"])
    i32 = ir.IntegerType.get_signless(32)
    i64 = ir.IntegerType.get_signless(64)

    def group(attr: ir.AffineMapAttr) -> ir.Attribute:
        return ir.DenseElementsAttr.get_splat(
            ir.RankedTensorType.get([1], i32, loc=loc),
            ir.IntegerAttr.get(i32, len(attr.value.results)),
        )

    inits = list(view.inits)
    with ir.InsertionPoint(loop):
        parallel = ir.Operation.create(
            "affine.parallel",
            results=[r.type for r in reductions],
            operands=[*view.lowerBoundOperands, *view.upperBoundOperands],
            attributes={
                "lowerBoundsMap": lower,
                "lowerBoundsGroups": group(lower),
                "upperBoundsMap": upper,
                "upperBoundsGroups": group(upper),
                "steps": ir.ArrayAttr.get([ir.IntegerAttr.get(i64, view.step.value)]),
                "reductions": ir.ArrayAttr.get(
                    [ir.IntegerAttr.get(i64, _KIND_CODES[r.kind]) for r in reductions]
                ),
            },
            regions=1,
            loc=loc,
        )
    if WAVEFRONT_COLUMNS_ATTR in loop.attributes:  # for lowering/wavefront_pipeline.py
        parallel.attributes[WAVEFRONT_COLUMNS_ATTR] = ir.UnitAttr.get()
    body = parallel.regions[0].blocks.append(ir.IndexType.get())
    old_body = loop.regions[0].blocks[0]
    ops = [op.operation for op in old_body.operations]
    old_yield = ops[-1]
    with ir.InsertionPoint(body):
        identities = [_identity(r, loc) for r in reductions]
    for op in ops[:-1]:
        body.append(op)
    with ir.InsertionPoint(body):
        affine.AffineYieldOp(list(old_yield.operands), loc=old_yield.location)
    old_body.arguments[0].replace_all_uses_with(body.arguments[0])
    for arg, identity in zip(list(old_body.arguments)[1:], identities, strict=True):
        arg.replace_all_uses_with(identity)
    # The initial value joins after the loop: init ⊕ (⊕ over the iterations).
    with ir.InsertionPoint(loop):
        for result, init, partial, reduction in zip(
            loop.results, inits, parallel.results, reductions, strict=True
        ):
            combined = ir.Operation.create(
                f"arith.{reduction.kind}",
                results=[reduction.type],
                operands=[init, partial],
                loc=loc,
            )
            result.replace_all_uses_with(combined.results[0])
    loop.erase()
    return parallel


def parallelize(
    fn: ir.Operation,
    *,
    parallel_reductions: bool = True,
    reassociate: bool = False,
    min_trip: int = 8,
    min_work: int = MIN_PARALLEL_WORK,
) -> int:
    """Make the parallel loops of function `fn` `affine.parallel` (see the module docstring);
    with `reassociate` (-fassociative-math), floating-point reductions may run in parallel
    (with `parallel_reductions`) and the sequential loops' ones are reassociated
    (`allow_reassociation`). Returns how many loops were made parallel."""
    with fn.location:  # the default for what the builders create without `loc=` (blocks)
        kept: list[tuple[ir.Operation, str]] = []
        chosen = choose_parallel_loops(
            fn,
            parallel_reductions=parallel_reductions,
            min_trip=min_trip,
            reassociate=reassociate,
            kept_sequential=kept,
            min_work=min_work,
        )
        attach_remarks(
            fn,
            [
                remark_at(
                    loop.location,
                    "schedule",
                    "sequential-loop",
                    "remark",
                    f"loop could run in parallel but stays sequential: {reason}",
                    {"reason": reason},
                )
                for loop, reason in kept
            ],
        )
        for loop, reductions in chosen:
            make_parallel(loop, reductions)
        if reassociate:
            allow_reassociation(fn)
    return len(chosen)


def allow_reassociation(fn: ir.Operation) -> int:
    """Give the update chain of each floating-point add or mul reduction of a sequential loop of
    `fn` the `reassoc` fast-math flag, so that LLVM may vectorize it with partial results (it
    reorders the sum, as a parallel reduction does; only under -fassociative-math). Returns
    the number of loops changed; each is marked `polyflow.reassociated`."""
    changed = 0
    for loop in list(_loops(fn)):
        if loop.name != "affine.for" or REDUCTIONS_ATTR not in loop.attributes:
            continue
        marks = [ir.StringAttr(a).value for a in ir.ArrayAttr(loop.attributes[REDUCTIONS_ATTR])]
        kinds = []
        for index, family in enumerate(marks):
            chain = _update_chain(loop, index, family) if family in ("add", "mul") else None
            if not chain or not all(op.name.endswith("f") for op in chain):
                continue
            for op in chain:
                op.attributes["fastmath"] = _with_reassoc(op)
            kinds.append(f"{family}f")
        if kinds:
            loop.attributes[REASSOCIATED_ATTR] = ir.ArrayAttr.get(
                [ir.StringAttr.get(k) for k in kinds]
            )
            changed += 1
    return changed


def _with_reassoc(op: ir.Operation) -> ir.Attribute:
    flags: list[str] = []
    if "fastmath" in op.attributes:
        text = str(op.attributes["fastmath"])  # #arith.fastmath<none> / <contract,afn>
        inner = text[text.index("<") + 1 : text.rindex(">")]
        flags = [f.strip() for f in inner.split(",") if f.strip() not in ("", "none")]
    if "reassoc" not in flags:
        flags.insert(0, "reassoc")
    return ir.Attribute.parse(f"#arith.fastmath<{','.join(flags)}>")


def parallel_loops(fn: ir.Operation) -> list[tuple[ir.Location, list[str]]]:
    """(location, reduction kinds) of each parallel loop of `fn`, outermost first: the
    `affine.parallel` loops, and the `scf.parallel` ones the micro-kernels make (their kinds
    are not read)."""
    names = {code: kind for kind, code in _KIND_CODES.items()}
    out: list[tuple[ir.Location, list[str]]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "scf.parallel":
            out.append((op.location, []))
        elif op.name == "affine.parallel":
            codes = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes["reductions"])]
            out.append((op.location, [names.get(c, str(c)) for c in codes]))
        return ir.WalkResult.ADVANCE

    fn.walk(visit, ir.WalkOrder.PRE_ORDER)
    return out


def float_reductions(fn: ir.Operation) -> list[tuple[ir.Location, str]]:
    """(location, kind) of each floating-point reduction of `fn` that is reordered: by an
    `affine.parallel`, or in a sequential loop by `allow_reassociation`."""
    codes = {code: kind for kind, code in _KIND_CODES.items() if kind in _FLOAT_KINDS}
    out: list[tuple[ir.Location, str]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "affine.for" and REASSOCIATED_ATTR in op.attributes:
            for attr in ir.ArrayAttr(op.attributes[REASSOCIATED_ATTR]):
                out.append((op.location, ir.StringAttr(attr).value))
        if op.name == "affine.parallel":
            for attr in ir.ArrayAttr(op.attributes["reductions"]):
                kind = codes.get(ir.IntegerAttr(attr).value)
                if kind is not None:
                    out.append((op.location, kind))
        return ir.WalkResult.ADVANCE

    fn.walk(visit, ir.WalkOrder.PRE_ORDER)
    return out


def mark_parallel_loops(fn: ir.Operation) -> int:
    """Mark every `affine.for` of `fn` that could run its iterations in any order and at once
    with `PARALLEL_LOOP_ATTR`, nested ones included (for the GPU mapping, which turns nests of
    them into blocks and threads): no dependence carried through memory (upstream's analysis, or
    isl's `INDEPENDENT_ATTR`), no carried values (reductions stay sequential in a thread), no
    call inside, no aliasing conflict, not in or around an else region. Returns how many."""
    loops = list(_loops(fn))
    oracle = memory_parallel_loops(fn, read_only_gathers=True)
    if len(oracle) != len(loops):
        raise RuntimeError("the dependence oracle's copy lost track of the loops")
    marked = 0
    for loop, independent in zip(loops, oracle, strict=True):
        if loop.name != "affine.for" or len(loop.results) > 0:
            continue
        if not (independent or _isl_independent(loop)):
            continue
        if _contains(loop, lambda op: op.name in _CALL_OPS):
            continue
        if _touches_else_region(loop, fn) or _aliasing_conflict(loop, fn):
            continue
        loop.attributes[PARALLEL_LOOP_ATTR] = ir.UnitAttr.get()
        marked += 1
    return marked


@dataclass(frozen=True)
class ScheduleMarkParallel:
    """Mark each loop that could run in parallel (`mark_parallel_loops`), changing nothing else:
    the polyhedral stage's last step for `target="cuda"`."""

    name: ClassVar[str] = "schedule-mark-parallel"

    def __call__(self, op: ir.Operation, pass_: Any) -> None:
        try:
            mark_parallel_loops(op)
        except Exception as exc:  # a bug here must fail the pass, not the process
            op.location.emit_error(f"schedule-mark-parallel: {type(exc).__name__}: {exc}")
            pass_.signal_pass_failure()


@dataclass(frozen=True)
class ScheduleParallelize:
    """`affine.for` without loop-carried dependences → `affine.parallel` (with `reduce` for
    reductions), outermost first, never nested (see the module docstring)."""

    name: ClassVar[str] = "schedule-parallelize"
    parallel_reductions: bool = True
    reassociate: bool = False
    min_trip: int = 8
    min_work: int = MIN_PARALLEL_WORK

    def __call__(self, op: ir.Operation, pass_: Any) -> None:
        try:
            parallelize(
                op,
                parallel_reductions=self.parallel_reductions,
                reassociate=self.reassociate,
                min_trip=self.min_trip,
                min_work=self.min_work,
            )
        except Exception as exc:  # a bug here must fail the pass, not the process
            op.location.emit_error(f"schedule-parallelize: {type(exc).__name__}: {exc}")
            pass_.signal_pass_failure()


__all__ = [
    "Reduction",
    "ScheduleParallelize",
    "choose_parallel_loops",
    "constant_trip_count",
    "float_reductions",
    "loop_reductions",
    "make_parallel",
    "mark_parallel_loops",
    "memory_parallel_loops",
    "parallel_loops",
    "parallelize",
]
