"""Reductions across threads: a band whose points are few but whose body is one large reduction
(moments, a matrix-vector product, a normalization's mean) runs one band point per block, the
reduction's iterations shared out over the block's threads, combined by a tree in shared memory
(Tensor Comprehensions maps reduction dimensions to threads the same way).

    for each band point p of this block (block-uniform):
        thread 0: the body before the reduction loop L; L's initial values -> shared slots
        each thread t: partial = identity; for k = lo + t·step; k < hi; k += R·step: L's body
        partials -> red[t]; barrier; for s = R/2 .. 1: t < s: red[t] ⊕= red[t + s]; barrier
        thread 0: result = initial ⊕ red[0]; the body after L

The partial results are combined in a different order than C's: integer reductions (exact
whatever the order) always qualify, floating-point ones only under reassociation
(`-fassociative-math`, `-ffast-math`), each reported as reordered. A loop qualifies when each
value it carries is updated by one operation of a reduction family (add, mul, min, max, and,
or; `acc - x` as an add), its bounds are the same in every thread, and what comes before it and
after it does not pass values to each other except through L. Bands of many points keep one
point per thread (`launch.py`): this form is chosen when the band has fewer than
`MAX_POINTS_FOR_TREE` points known, and L more than `MIN_REDUCTION_TRIP` iterations or an
unknown count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf

from polyflow.ir.names import SHARED_ATTR

MAX_POINTS_FOR_TREE = 32768
MIN_REDUCTION_TRIP = 128
REDUCTION_THREADS = 256

# the op that updates a carried value -> (family, whether the carried value must be its lhs)
_UPDATES = {
    "arith.addf": ("add", False),
    "arith.subf": ("add", True),
    "arith.addi": ("add", False),
    "arith.subi": ("add", True),
    "arith.mulf": ("mul", False),
    "arith.muli": ("mul", False),
    "arith.andi": ("and", False),
    "arith.ori": ("or", False),
    "arith.minsi": ("min", False),
    "arith.maxsi": ("max", False),
    "arith.minui": ("min", False),
    "arith.maxui": ("max", False),
    "arith.minnumf": ("min", False),
    "arith.maxnumf": ("max", False),
    "arith.minimumf": ("min", False),
    "arith.maximumf": ("max", False),
}


@dataclass
class Carried:
    """One value the reduction loop carries: how two partial results combine (an arith op name)
    and its identity."""

    combine: str
    floating: bool


def reduction_loop(
    body: ir.Block, ivs: list[ir.Value], reassociate: bool
) -> tuple[ir.Operation, list[Carried]] | None:
    """The loop of `body` (a band's innermost body) that qualifies for a tree reduction (module
    docstring), with how each carried value combines; None when there is none."""
    ops = [op.operation for op in body.operations]
    loops = [op for op in ops if op.name == "scf.for" and len(op.results) > 0]
    if len(loops) != 1:
        return None
    loop = loops[0]
    position = ops.index(loop)
    pre, post = ops[:position], ops[position + 1 : -1]
    if any(_inside(v, pre) for op in post for v in _operands(op) if not _pure_from(v, pre)):
        return None
    if any(_inside(v, pre) and not _pure_from(v, pre) for v in _operands_of_body(loop)):
        return None
    for bound in loop.operands[:3]:
        if _inside(bound, pre) and not _pure_from(bound, pre):
            return None
    inner = loop.regions[0].blocks[0]
    carried_args = list(inner.arguments)[1:]
    yielded = list([op.operation for op in inner.operations][-1].operands)
    out = []
    for arg, value in zip(carried_args, yielded, strict=True):
        owner = value.owner
        if isinstance(owner, ir.Block) or owner.operation.name not in _UPDATES:
            return None
        update = owner.operation
        family, left = _UPDATES[update.name]
        uses = list(arg.uses)
        if len(uses) != 1 or uses[0].owner.operation != update:
            return None
        if left and update.operands[0] != arg:
            return None
        floating = update.name.endswith("f")
        if floating and not reassociate:
            return None
        combine = {
            "add": "addf" if floating else "addi",
            "mul": "mulf" if floating else "muli",
        }.get(family, update.name.split(".", 1)[1])
        out.append(Carried(f"arith.{combine}", floating))
    del ivs
    return loop, out


def _operands(op: ir.Operation) -> list[ir.Value]:
    out = list(op.operands)
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                out += _operands(inner.operation)
    return out


def _operands_of_body(loop: ir.Operation) -> list[ir.Value]:
    return [v for op in loop.regions[0].blocks[0].operations for v in _operands(op.operation)]


def _inside(value: ir.Value, ops: list[ir.Operation]) -> bool:
    owner = value.owner
    return not isinstance(owner, ir.Block) and any(owner.operation == op for op in ops)


def _pure_from(value: ir.Value, pre: list[ir.Operation], depth: int = 0) -> bool:
    """Whether `value`, if made by `pre`, is pure arithmetic over values from outside `pre`."""
    owner = value.owner
    if isinstance(owner, ir.Block) or not _inside(value, pre):
        return True
    op = owner.operation
    if op.regions or not op.name.startswith(("arith.", "math.", "index.")) or depth > 16:
        return False
    return all(_pure_from(v, pre, depth + 1) for v in op.operands)


def identity(combine: str, t: ir.Type) -> ir.Value:
    """The identity of `combine` on `t`, as a constant."""
    if isinstance(t, ir.FloatType):
        values = {
            "arith.addf": -0.0,
            "arith.mulf": 1.0,
            "arith.minnumf": float("inf"),
            "arith.minimumf": float("inf"),
            "arith.maxnumf": float("-inf"),
            "arith.maximumf": float("-inf"),
        }
        return arith.ConstantOp(t, ir.FloatAttr.get(t, values[combine])).result
    width = ir.IntegerType(t).width if not isinstance(t, ir.IndexType) else 64
    values_i = {
        "arith.addi": 0,
        "arith.muli": 1,
        "arith.andi": -1,
        "arith.ori": 0,
        "arith.minsi": (1 << (width - 1)) - 1,
        "arith.maxsi": -(1 << (width - 1)),
        "arith.minui": -1,
        "arith.maxui": 0,
    }
    return arith.ConstantOp(t, ir.IntegerAttr.get(t, values_i[combine])).result


def _combine(name: str, a: ir.Value, b: ir.Value) -> ir.Value:
    return ir.Operation.create(name, results=[a.type], operands=[a, b]).results[0]


def _index(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), value).result


def _shared(shape: list[int], element: ir.Type) -> ir.Value:
    alloca = memref.AllocaOp(ir.MemRefType.get(shape, element), [], [])
    alloca.operation.attributes[SHARED_ATTR] = ir.UnitAttr.get()
    return alloca.result


def tree_kernel(
    body: ir.Block,
    point_ivs: list[ir.Value],
    point_values: list[ir.Value],
    loop: ir.Operation,
    carried: list[Carried],
    thread: ir.Value,
    threads: int,
    ip: ir.InsertionPoint,
    loc: ir.Location,
) -> None:
    """Emit at `ip` (inside the block-uniform loops over the band's points, whose indices are
    `point_values`) the per-point work of the module docstring, moving `body`'s ops; `thread`
    is threadIdx.x of `threads` (a power of two)."""
    ops = [op.operation for op in body.operations][:-1]
    position = ops.index(loop)
    pre, post = ops[:position], ops[position + 1 :]
    pure = [
        op
        for op in pre
        if op.name.startswith(("arith.", "math.", "index."))
        and not op.regions
        and all(_pure_from(v, pre) for v in op.results)
    ]
    for old, new in zip(point_ivs, point_values, strict=True):
        old.replace_all_uses_with(new)
    with ip, loc:
        initial = list(loop.operands)[3:]
        slots = [_shared([1], v.type) for v in initial]
        partials = [_shared([threads], v.type) for v in initial]
        first = arith.CmpIOp(arith.CmpIPredicate.eq, thread, _index(0)).result
        before = scf.IfOp(first)
    with ir.InsertionPoint(before.then_block), loc:
        end_before = scf.YieldOp([])
    for op in pre:
        op.move_before(end_before)
    with ir.InsertionPoint(end_before), loc:
        zero = _index(0)
        for slot, value in zip(slots, initial, strict=True):
            memref.StoreOp(value, slot, [zero])
    with ip, loc:
        mapping = _clone(pure)  # the index arithmetic the loop and the rest need, per thread
        low, high, step = (mapping.get(v, v) for v in list(loop.operands)[:3])
        start = arith.AddIOp(low, arith.MulIOp(thread, step).result).result
        stride = arith.MulIOp(step, _index(threads)).result
        identities = [identity(c.combine, v.type) for c, v in zip(carried, initial, strict=True)]
        shared_loop = scf.ForOp(start, high, stride, identities)
    old_body = loop.regions[0].blocks[0]
    for op in [o.operation for o in old_body.operations]:
        shared_loop.body.append(op)
    for old, new in zip(
        old_body.arguments,
        [shared_loop.induction_variable, *shared_loop.inner_iter_args],
        strict=True,
    ):
        old.replace_all_uses_with(new)
    _remap([o.operation for o in shared_loop.body.operations], mapping)
    with ip, loc:
        for buffer, value in zip(partials, shared_loop.results, strict=True):
            memref.StoreOp(value, buffer, [thread])
        gpu.BarrierOp()
        width = threads // 2
        while width >= 1:
            active = arith.CmpIOp(arith.CmpIPredicate.ult, thread, _index(width)).result
            step_if = scf.IfOp(active)
            with ir.InsertionPoint(step_if.then_block):
                other = arith.AddIOp(thread, _index(width)).result
                for buffer, c in zip(partials, carried, strict=True):
                    mine = memref.LoadOp(buffer, [thread]).result
                    theirs = memref.LoadOp(buffer, [other]).result
                    memref.StoreOp(_combine(c.combine, mine, theirs), buffer, [thread])
                scf.YieldOp([])
            gpu.BarrierOp()
            width //= 2
        last = arith.CmpIOp(arith.CmpIPredicate.eq, thread, _index(0)).result
        after = scf.IfOp(last)
    with ir.InsertionPoint(after.then_block), loc:
        mapping_after = _clone(pure)
        zero = _index(0)
        results = []
        for slot, buffer, c in zip(slots, partials, carried, strict=True):
            start_value = memref.LoadOp(slot, [zero]).result
            total = memref.LoadOp(buffer, [zero]).result
            results.append(_combine(c.combine, start_value, total))
        end_after = scf.YieldOp([])
    for old, new in zip(loop.results, results, strict=True):
        old.replace_all_uses_with(new)
    for op in post:
        op.move_before(end_after)
    _remap(post, mapping_after)
    loop.erase()
    with ip, loc:
        gpu.BarrierOp()  # the next point's partials overwrite these


def _clone(ops: Sequence[ir.Operation]) -> dict[ir.Value, ir.Value]:
    mapping: dict[ir.Value, ir.Value] = {}
    for op in ops:
        clone = op.clone()
        for index, operand in enumerate(clone.operands):
            if operand in mapping:
                clone.operands[index] = mapping[operand]
        for old, new in zip(op.results, clone.results, strict=True):
            mapping[old] = new
    return mapping


def _remap(ops: list[ir.Operation], mapping: dict[ir.Value, ir.Value]) -> None:
    for op in ops:
        for index, operand in enumerate(op.operands):
            if operand in mapping:
                op.operands[index] = mapping[operand]
        for region in op.regions:
            for block in region.blocks:
                _remap([o.operation for o in block.operations], mapping)
