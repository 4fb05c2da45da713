"""A wavefront of tile columns (`WAVEFRONT_COLUMNS_ATTR`: the loop over steps `w`, inside it
the parallel loop over the blocks of step `w`, one per column) runs as a pipeline: each thread
takes a whole column, its blocks in order of `w`, and waits before each block until the
column before it has finished every block of an earlier step; no barrier between steps.

Why: the wavefront forked and joined the threads at each step, and a step held a handful of
blocks (heat-3d at LARGE: 5.3 on average over 202 steps), so with two threads one of them
idled through the last block of every step with an odd count: a simulation of the schedule
(equal blocks) kept the threads 88% busy, the pipeline 94%. Measured at LARGE, 2 threads,
alternating runs against the wavefront: heat-3d 0.939x the time (median of 9 per-round
ratios; best 0.356 s against 0.403), seidel-2d 0.932x (7 rounds; best 1.87 s against 2.06);
one thread unchanged (columns one after the other: heat-3d 0.70 s against 0.72, seidel-2d
0.973x).

Why it is right: the wavefront's steps are `w = B0 + B1`, its columns B1, in a permutable
band of blocks, so a block depends only on blocks with no larger B0 nor B1 (`tiling._wavefront`);
those in another column lie in an earlier column at an earlier step. Each column publishes,
after its block of step `w`, that it is done up to `w` (`done[c] = w + 1`), and only after it
waited for the column before it to be done up to `w` (`done[c - 1] >= w`); so, by induction,
`done[c] >= x` means every column `c - k` finished its blocks of steps below `x - k`, which
is what the block of column `c + 1` at step `x` needs. A column done with all its blocks
waits for the column before it to be done entirely before it says so (`done[c] = MAX`).
Columns are handed out in order (OpenMP's monotonic dynamic schedule, one at a time:
`hand_out_columns_in_order`), and a column only ever waits for the one before it, which is
already running or done: no deadlock, and one thread runs them one after the other, a legal
order of the band (B1, then B0).

The counters are read and written with atomic read-modify-writes (acquire-release, so a
block's stores are seen by the thread that saw its counter move). A thread that
finds the column before it not far enough gives up the core (`sched_yield`) before it looks
again: with more threads than cores, the one it waits for may be the one not running.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from polyflow.ir.functions import enclosing_function_name, source_names
from polyflow.ir.names import WAVEFRONT_COLUMNS_ATTR
from polyflow.ir.ops import walk
from polyflow.ir.remarks import attach_remarks, remark_at

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_YIELD = "sched_yield"
# On the pipeline's parallel loop until convert-scf-to-openmp (which drops it): its worksharing
# loop must hand columns out in order (`hand_out_columns_in_order`).
IN_ORDER_ATTR = "polyflow.in_order"


def wavefront_column_marks(module: ir.Module) -> list[bool]:
    """Before lower-affine: for each parallel loop (`affine.parallel`, `scf.parallel`) in walk
    order, whether it is a wavefront's loop over columns whose every lower bound is a multiple
    of its step (so every step's columns are the same grid, the pipeline's)."""
    return [
        WAVEFRONT_COLUMNS_ATTR in op.attributes and _on_the_grid(op)
        for op in walk(module.operation)
        if op.name in ("affine.parallel", "scf.parallel")
    ]


def _on_the_grid(parallel: ir.Operation) -> bool:
    steps = [ir.IntegerAttr(s).value for s in ir.ArrayAttr(parallel.attributes["steps"])]
    lower = ir.AffineMapAttr(parallel.attributes["lowerBoundsMap"]).value
    return len(steps) == 1 and all(_multiple_of(e, steps[0]) for e in lower.results)


def _multiple_of(expr: ir.AffineExpr, factor: int) -> bool:
    """Whether `expr` is a multiple of `factor` for every value of its dims and symbols (a
    sufficient test: sums and products of multiples)."""
    if isinstance(expr, ir.AffineConstantExpr):
        return expr.value % factor == 0
    if isinstance(expr, ir.AffineAddExpr):
        return _multiple_of(expr.lhs, factor) and _multiple_of(expr.rhs, factor)
    if isinstance(expr, ir.AffineMulExpr):
        return _multiple_of(expr.lhs, factor) or _multiple_of(expr.rhs, factor)
    return False


def pipeline_wavefront_columns(module: ir.Module, marks: list[bool]) -> int:
    """After lower-affine: rewrite each wavefront that `marks` (`wavefront_column_marks`, taken
    before it) points at, whose step loop holds only the bounds of its parallel loop and the
    loop, into a pipeline of columns (module docstring); returns how many. Nothing changes when
    the parallel loops no longer match the marks one for one."""
    loops = [op for op in walk(module.operation) if op.name == "scf.parallel"]
    if len(loops) != len(marks) or not any(marks):
        return 0
    names = source_names(module)
    said = []
    for parallel, marked in zip(loops, marks, strict=True):
        if not marked:
            continue
        loc, symbol = parallel.location, enclosing_function_name(parallel)
        if _pipeline(parallel):
            said.append(
                remark_at(
                    loc,
                    "lowering",
                    "pipelined",
                    "remark",
                    "wavefront runs as a pipeline: each thread takes a column of tiles, which "
                    "waits only for the column before it (no barrier between steps)",
                    function=names.get(symbol, symbol) if symbol else None,
                )
            )
    if said:
        _declare_yield(module)
        attach_remarks(module.operation, said)
    return len(said)


def in_order_marks(module: ir.Module) -> list[bool]:
    """Before convert-scf-to-openmp: for each `scf.parallel` in walk order, whether it is a
    pipeline's loop over columns."""
    return [
        IN_ORDER_ATTR in op.attributes for op in walk(module.operation) if op.name == "scf.parallel"
    ]


def hand_out_columns_in_order(module: ir.Module, marks: list[bool]) -> int:
    """After convert-scf-to-openmp: the worksharing loops (`omp.wsloop`, one per `scf.parallel`
    in the same order) that `marks` points at get a monotonic dynamic schedule; returns how
    many. LLVM's OpenMP lowering makes a plain dynamic schedule nonmonotonic, which libomp runs
    by stealing: each thread starts on a block of columns of its own, and the second one
    waited for the last column of the first (heat-3d, 2 threads: as slow as one)."""
    loops = [op for op in walk(module.operation) if op.name == "omp.wsloop"]
    if len(loops) != len(marks) or not any(marks):
        return 0
    dynamic = ir.Attribute.parse("#omp<schedulekind dynamic>")
    monotonic = ir.Attribute.parse("#omp<sched_mod monotonic>")
    count = 0
    for loop, marked in zip(loops, marks, strict=True):
        if marked:
            loop.attributes["schedule_kind"] = dynamic
            loop.attributes["schedule_mod"] = monotonic
            count += 1
    return count


def _declare_yield(module: ir.Module) -> None:
    """`int sched_yield(void)` declared in `module` (libc's), unless it is there."""
    for op in module.body.operations:
        if (
            op.operation.name == "func.func"
            and ir.StringAttr(op.operation.attributes["sym_name"]).value == _YIELD
        ):
            return
    with ir.InsertionPoint.at_block_begin(module.body):
        declared = func.FuncOp(_YIELD, ir.FunctionType.get([], [ir.IntegerType.get_signless(32)]))
        declared.sym_visibility = ir.StringAttr.get("private")


def _pipeline(parallel: ir.Operation) -> bool:
    steps = parallel.parent
    if steps is None or steps.name != "scf.for" or len(steps.results) != 0:
        return False
    if len(parallel.results) != 0 or len(parallel.regions[0].blocks[0].arguments) != 1:
        return False
    body = steps.regions[0].blocks[0]
    ops = [op.operation for op in body.operations]
    if ops[-2] != parallel or ops[-1].name != "scf.yield":
        return False
    bounds = ops[:-2]
    if not all(op.name.startswith("arith.") and len(op.regions) == 0 for op in bounds):
        return False
    lower, upper, step = list(parallel.operands)
    width = _constant(step)
    if width is None or width < 2:  # blocks of one point: too little work per wait
        return False
    step_iv = body.arguments[0]
    index, i64 = ir.IndexType.get(), ir.IntegerType.get_signless(64)
    loc = parallel.location
    with ir.InsertionPoint(steps), loc:
        first, last, stride = list(steps.operands)
        width_value = arith.constant(index, width)
        # the columns' range: the union of every step's range of the parallel loop
        scan = scf.ForOp(
            first, last, stride, [arith.constant(index, 2**62), arith.constant(index, -(2**62))]
        )
        with ir.InsertionPoint(scan.body):
            low, high = _clone_bounds(bounds, step_iv, scan.induction_variable, lower, upper)
            lowest, highest = scan.inner_iter_args
            nonempty = arith.cmpi(arith.CmpIPredicate.slt, low, high)
            scf.YieldOp(
                [
                    arith.select(nonempty, arith.minsi(lowest, low), lowest),
                    arith.select(nonempty, arith.maxsi(highest, high), highest),
                ]
            )
        column_first, column_end = scan.results
        columns = arith.maxsi(
            arith.ceildivsi(arith.subi(column_end, column_first), width_value),
            arith.constant(index, 0),
        )
        counters_type = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], i64)
        counters = memref.AllocOp(counters_type, [columns], []).result
        zero, one = arith.constant(index, 0), arith.constant(index, 1)
        reset = scf.ForOp(zero, columns, one)
        with ir.InsertionPoint(reset.body):
            memref.StoreOp(arith.constant(i64, _INT64_MIN), counters, [reset.induction_variable])
            scf.YieldOp([])
        pipeline = scf.ParallelOp([], [column_first], [column_end], [width_value], [])
        pipeline.attributes[IN_ORDER_ATTR] = ir.UnitAttr.get()
    pipeline_body = pipeline.regions[0].blocks.append(index)
    column_iv = pipeline_body.arguments[0]
    with ir.InsertionPoint(pipeline_body), loc:
        column = arith.divsi(arith.subi(column_iv, column_first), width_value)
        before = arith.subi(column, arith.constant(index, 1))
        has_before = arith.cmpi(arith.CmpIPredicate.sgt, column, arith.constant(index, 0))
        walk_steps = scf.ForOp(first, last, stride)
        with ir.InsertionPoint(walk_steps.body):
            mapping: dict[ir.Value, ir.Value] = {step_iv: walk_steps.induction_variable}
            low, high = _clone_bounds(
                bounds, step_iv, walk_steps.induction_variable, lower, upper, mapping
            )
            here = arith.andi(
                arith.cmpi(arith.CmpIPredicate.sle, low, column_iv),
                arith.cmpi(arith.CmpIPredicate.slt, column_iv, high),
            )
            block = scf.IfOp(here)
            with ir.InsertionPoint(block.then_block):
                step_number = arith.index_cast(i64, walk_steps.induction_variable)
                waited = scf.IfOp(has_before)
                with ir.InsertionPoint(waited.then_block):
                    _wait_at_least(counters, before, step_number)
                    scf.YieldOp([])
                end = scf.YieldOp([])
            scf.YieldOp([])
        finished = scf.IfOp(has_before)
        with ir.InsertionPoint(finished.then_block):
            _wait_at_least(counters, before, arith.constant(i64, _INT64_MAX))
            scf.YieldOp([])
        _publish(counters, column, arith.constant(i64, _INT64_MAX))
        scf.ReduceOp([], 0)
    # the block's work moves into the pipeline, then says the column is done up to this step
    old_body = parallel.regions[0].blocks[0]
    work = [op.operation for op in old_body.operations]
    for op in work[:-1]:  # not its scf.reduce
        op.move_before(end.operation)
    with ir.InsertionPoint(end.operation), loc:
        _publish(counters, column, arith.addi(step_number, arith.constant(i64, 1)))
    old_body.arguments[0].replace_all_uses_with(column_iv)
    for old, new in mapping.items():
        if old != step_iv:
            old.replace_all_uses_with(new)
    step_iv.replace_all_uses_with(walk_steps.induction_variable)
    with ir.InsertionPoint(steps), loc:
        memref.DeallocOp(counters)
    steps.erase()
    return True


def _constant(value: ir.Value) -> int | None:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation if isinstance(owner, ir.OpView) else owner
    if op.name != "arith.constant" or not isinstance(op.attributes["value"], ir.IntegerAttr):
        return None
    return ir.IntegerAttr(op.attributes["value"]).value


def _clone_bounds(
    bounds: list[ir.Operation],
    step_iv: ir.Value,
    new_iv: ir.Value,
    lower: ir.Value,
    upper: ir.Value,
    mapping: dict[ir.Value, ir.Value] | None = None,
) -> tuple[ir.Value, ir.Value]:
    """Copies of the ops computing the parallel loop's bounds at the insertion point, for step
    `new_iv` instead of `step_iv`; returns (lower, upper). `mapping` receives old -> new."""
    mapping = {step_iv: new_iv} if mapping is None else mapping
    for op in bounds:
        copy = op.clone(ip=ir.InsertionPoint.current)
        for k, operand in enumerate(copy.operands):
            if operand in mapping:
                copy.operands[k] = mapping[operand]
        for old, new in zip(op.results, copy.results, strict=True):
            mapping[old] = new
    return mapping.get(lower, lower), mapping.get(upper, upper)


def _wait_at_least(counters: ir.Value, position: ir.Value, target: ir.Value) -> None:
    """Spin until `counters[position] >= target` (an atomic read each time)."""
    i64 = ir.IntegerType.get_signless(64)
    loop = scf.WhileOp([], [])
    check = loop.before.blocks.append()
    with ir.InsertionPoint(check):
        seen = memref.AtomicRMWOp(
            arith.AtomicRMWKind.addi, arith.constant(i64, 0), counters, [position]
        ).result
        scf.ConditionOp(arith.cmpi(arith.CmpIPredicate.slt, seen, target), [])
    again = loop.after.blocks.append()
    with ir.InsertionPoint(again):
        # in a scope of its own: convert-scf-to-openmp's scope around the parallel loop's body
        # is then one canonicalize inlines (a call may allocate on the stack, a scope ends that)
        scope = memref.AllocaScopeOp([])
        with ir.InsertionPoint(scope.regions[0].blocks.append()):
            func.CallOp([ir.IntegerType.get_signless(32)], ir.FlatSymbolRefAttr.get(_YIELD), [])
            memref.AllocaScopeReturnOp([])
        scf.YieldOp([])


def _publish(counters: ir.Value, position: ir.Value, value: ir.Value) -> None:
    memref.AtomicRMWOp(arith.AtomicRMWKind.assign, value, counters, [position])
