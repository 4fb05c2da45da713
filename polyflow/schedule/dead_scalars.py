"""schedule-dead-scalars: stores into function-local scalars that nothing reads afterwards are
dropped, and so are the loop-carried values (`iter_args`) that only fed them.

Why: raise-reductions threads a scratchpad scalar through the loops that update it and stores
the final value back after the outermost one, whether or not anything reads it there. In
deriche, the recurrence state `ym1`/`ym2` is reset at the start of every row, yet the row loop
carried it to its end for a store nothing read, and a loop carrying a value cannot run in
parallel.

A candidate is a `memref.alloca` of rank 0 in the function's entry block whose every use is the
memref operand of an `affine.load`/`affine.store`/`memref.load`/`memref.store`, nested only in
`affine.for`, `affine.if`, `affine.parallel`, `scf.for` and `scf.if`. Liveness runs backwards
over these structured ops (a loop's body to a fixed point, since it may run again or not at
all; the function's end reads nothing: the scalar dies with its frame); a store whose value no
load can read is erased. Then an `iter_args` value whose result is unused and whose block
argument is used by nothing but its own slot of the yield is removed from its loop, repeatedly
(a removed outer value can free an inner loop's result). The loads left unused go with the
canonicalizer that follows. No options.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from mlir import ir
from mlir.dialects import affine

_LOOPS = frozenset({"affine.for", "affine.parallel", "scf.for"})
_BRANCHES = frozenset({"affine.if", "scf.if"})


def _scalar_access(op: ir.Operation) -> tuple[ir.Value, bool] | None:
    """The memref `op` loads from or stores to, and whether it stores; None for other ops."""
    if op.name in ("affine.load", "memref.load"):
        return op.operands[0], False
    if op.name in ("affine.store", "memref.store"):
        return op.operands[1], True
    return None


def _user(use: Any) -> ir.Operation:
    """The op holding operand `use`."""
    return use.owner.operation if isinstance(use.owner, ir.OpView) else use.owner


def _candidates(fn: ir.Operation) -> set[ir.Value]:
    """The function-local rank-0 scalars of `fn` accessed only by loads and stores in the
    structured ops this pass understands."""
    entry = fn.regions[0].blocks[0]
    found: set[ir.Value] = set()
    for op in entry.operations:
        if op.operation.name != "memref.alloca":
            continue
        value = op.results[0]
        if ir.MemRefType(value.type).rank != 0:
            continue
        if all(_is_plain_access(use, value, fn) for use in value.uses):
            found.add(value)
    return found


def _is_plain_access(use: Any, value: ir.Value, fn: ir.Operation) -> bool:
    user = _user(use)
    access = _scalar_access(user)
    if access is None or access[0] != value:
        return False
    if access[1] and use.operand_number != 1:
        return False  # the scalar's address stored as a value
    parent = user.parent
    while parent is not None and parent != fn:
        if parent.name not in _LOOPS and parent.name not in _BRANCHES:
            return False
        parent = parent.parent
    return True


class _Liveness:
    """Backward liveness of the candidate scalars; `dead` collects the stores nothing reads."""

    def __init__(self, fn: ir.Operation, candidates: set[ir.Value]) -> None:
        self.candidates = candidates
        self.dead: set[ir.Operation] = set()
        # the region ops holding a candidate access: the others leave liveness unchanged
        self.holders: set[ir.Operation] = set()
        for scalar in candidates:
            for use in scalar.uses:
                parent = _user(use).parent
                while parent is not None and parent != fn:
                    self.holders.add(parent)
                    parent = parent.parent

    def block(self, block: ir.Block, live_after: frozenset[ir.Value], record: bool) -> frozenset:
        live = live_after
        for op in reversed(list(block.operations)):
            live = self.op(op.operation, live, record)
        return live

    def op(self, op: ir.Operation, live_after: frozenset[ir.Value], record: bool) -> frozenset:
        access = _scalar_access(op)
        if access is not None and access[0] in self.candidates:
            memref, is_store = access
            if not is_store:
                return live_after | {memref}
            if record and memref not in live_after:
                self.dead.add(op)
            return live_after - {memref}  # a rank-0 store overwrites the whole scalar
        if op not in self.holders:
            return live_after
        if op.name in _BRANCHES:
            branches = [r.blocks[0] for r in op.regions if len(r.blocks) > 0]
            # without an else, control may pass the op by: what is live after it stays live
            live = live_after if len(branches) < 2 else frozenset()
            for body in branches:
                live = live | self.block(body, live_after, record)
            return live
        if op.name in _LOOPS:
            body = op.regions[0].blocks[0]
            # the body may be followed by itself or by what follows the loop
            loop_live = live_after
            while True:
                entry = self.block(body, loop_live, record=False)
                widened = loop_live | entry
                if widened == loop_live:
                    break
                loop_live = widened
            if record:
                self.block(body, loop_live, record=True)
            return live_after | entry
        return live_after


def _unused_carried(loop: ir.Operation) -> list[int]:
    """The `iter_args` slots of `affine.for` `loop` whose result nothing uses and whose block
    argument nothing uses but its own slot of the yield."""
    body = loop.regions[0].blocks[0]
    yield_op = list(body.operations)[-1].operation
    out = []
    for index, result in enumerate(loop.results):
        if list(result.uses):
            continue
        arg = body.arguments[1 + index]
        if all(_user(use) == yield_op and use.operand_number == index for use in arg.uses):
            out.append(index)
    return out


def _drop_carried(loop: ir.Operation, drop: list[int]) -> None:
    """Replace `affine.for` `loop` by one without the `iter_args` slots in `drop` (unused, see
    `_unused_carried`), same bounds, body and discardable attributes."""
    view = loop.opview
    keep = [k for k in range(len(loop.results)) if k not in drop]
    inits = list(view.inits)
    with loop.location:
        new = affine.AffineForOp(
            view.lowerBoundMap.value,
            view.upperBoundMap.value,
            view.step,
            [inits[k] for k in keep],
            lower_bound_operands=list(view.lowerBoundOperands),
            upper_bound_operands=list(view.upperBoundOperands),
            loc=loop.location,
            ip=ir.InsertionPoint(loop),
        )
    for name in [str(n) for n in loop.attributes]:
        if "." not in name:
            continue  # the op's own (bounds, segment sizes) were set by the builder
        value = loop.attributes[name]
        if isinstance(value, ir.ArrayAttr) and len(value) == len(loop.results):
            value = ir.ArrayAttr.get([value[k] for k in keep])  # per-slot marks
        new.operation.attributes[name] = value
    old_body = loop.regions[0].blocks[0]
    ops = [op.operation for op in old_body.operations]
    yield_op = ops[-1]
    yielded = list(yield_op.operands)
    for op in ops[:-1]:
        new.body.append(op)
    affine.AffineYieldOp(
        [yielded[k] for k in keep], loc=yield_op.location, ip=ir.InsertionPoint(new.body)
    )
    # after the new yield exists: a slot may yield a block argument itself (`yield %a, %a`)
    new_args = list(new.body.arguments)
    old_body.arguments[0].replace_all_uses_with(new_args[0])
    for position, k in enumerate(keep):
        old_body.arguments[1 + k].replace_all_uses_with(new_args[1 + position])
    for position, k in enumerate(keep):
        loop.results[k].replace_all_uses_with(new.results[position])
    loop.erase()


def drop_dead_scalars(fn: ir.Operation) -> int:
    """Erase the stores into `fn`'s local scalars that no load reads, then the `affine.for`
    carried values left feeding nothing (see the module docstring); returns how many stores and
    carried values went."""
    fn = fn.operation
    liveness = _Liveness(fn, _candidates(fn))
    removed = 0
    if liveness.candidates:
        liveness.block(fn.regions[0].blocks[0], frozenset(), record=True)
        for store in liveness.dead:
            store.erase()
        removed += len(liveness.dead)
    while True:
        drop_from = next(
            ((loop, drop) for loop in _carrying_loops(fn) if (drop := _unused_carried(loop))), None
        )
        if drop_from is None:
            return removed
        _drop_carried(*drop_from)  # outer loops first: that can free an inner loop's result
        removed += len(drop_from[1])


def _carrying_loops(fn: ir.Operation) -> list[ir.Operation]:
    """The `affine.for` ops of `fn` with `iter_args`, outer before inner."""
    loops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "affine.for" and len(op.results) > 0:
            loops.append(op)
        return ir.WalkResult.ADVANCE

    fn.walk(visit, ir.WalkOrder.PRE_ORDER)
    return loops


@dataclass(frozen=True)
class ScheduleDeadScalars:
    """Stores into local scalars that nothing reads, and the loop-carried values that only fed
    them, removed (see the module docstring)."""

    name: ClassVar[str] = "schedule-dead-scalars"

    def __call__(self, op: ir.Operation, pass_: Any) -> None:
        try:
            drop_dead_scalars(op)
        except Exception as exc:  # a bug here must fail the pass, not the process
            op.location.emit_error(f"schedule-dead-scalars: {type(exc).__name__}: {exc}")
            pass_.signal_pass_failure()


__all__ = ["ScheduleDeadScalars", "drop_dead_scalars"]
