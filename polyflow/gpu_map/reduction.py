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

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf

from polyflow.ir.ops import all_operands, index_value, remap_operands, shared_buffer

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


def reduction_loops(
    body: ir.Block, reassociate: bool
) -> list[tuple[ir.Operation, list[Carried]]] | None:
    """The loops of `body` (a band's innermost body) to share out over a block's threads, each
    with how its carried values combine: every top-level loop that carries values must qualify
    (module docstring); None when one does not, or there is none."""
    ops = [op.operation for op in body.operations]
    loops = [op for op in ops if op.name == "scf.for" and len(op.results) > 0]
    if not loops:
        return None
    out = []
    for loop in loops:
        carried = _carried(loop, reassociate)
        if carried is None:
            return None
        out.append((loop, carried))
    return out


_WRITES = frozenset(
    {
        "memref.store",
        "memref.atomic_rmw",
        "memref.generic_atomic_rmw",
        "memref.copy",
        "func.call",
        "func.call_indirect",
        "llvm.call",
        "llvm.store",
        "vector.store",
    }
)


def reduction_nest(loop: ir.Operation) -> list[ir.Operation]:
    """`loop` and the loops perfectly nested in it that pass its carried values straight
    through (`for d { for h { for w { acc += ... } } }`), outermost first, each with bounds
    that do not depend on the nest's indices (constants may sit beside the inner loops): one
    reduction over their product."""
    nest = [loop]
    while True:
        body = nest[-1].regions[0].blocks[0]
        ops = [op.operation for op in body.operations]
        others = [op for op in ops[:-1] if op.name != "arith.constant"]
        if len(others) != 1 or others[0].name != "scf.for":
            return nest
        inner = others[0]
        carried = list(body.arguments)[1:]
        inits = list(inner.operands)[3:]
        if len(inits) != len(carried) or any(a != b for a, b in zip(inits, carried, strict=True)):
            return nest
        if len(list(ops[-1].operands)) != len(inner.results) or any(
            a != b for a, b in zip(ops[-1].operands, inner.results, strict=True)
        ):
            return nest
        if any(len(list(arg.uses)) != 1 for arg in carried):
            return nest
        ivs = [level.regions[0].blocks[0].arguments[0] for level in nest]
        if any(v == iv for v in list(inner.operands)[:3] for iv in ivs):
            return nest
        nest.append(inner)


def _carried(loop: ir.Operation, reassociate: bool) -> list[Carried] | None:
    """How each value `loop` (or the innermost loop of its reduction nest) carries combines, or
    None when its iterations cannot run at once: it writes memory (its iterations might depend
    on each other), or a carried value is used other than by its one update (a running sum)."""
    loop = reduction_nest(loop)[-1]
    if any(_writes(op.operation) for op in loop.regions[0].blocks[0].operations):
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
        if len(list(update.results[0].uses)) != 1:  # only the yield may read the update
            return None
        floating = update.name.endswith("f")
        if floating and not reassociate:
            return None
        combine = {
            "add": "addf" if floating else "addi",
            "mul": "mulf" if floating else "muli",
        }.get(family, update.name.split(".", 1)[1])
        out.append(Carried(f"arith.{combine}", floating))
    return out


def _writes(op: ir.Operation) -> bool:
    if op.name in _WRITES:
        return True
    return any(
        _writes(inner.operation)
        for region in op.regions
        for block in region.blocks
        for inner in block.operations
    )


def _operands_of_body(loop: ir.Operation) -> list[ir.Value]:
    return [v for op in loop.regions[0].blocks[0].operations for v in all_operands(op.operation)]


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


def tree_kernel(
    body: ir.Block,
    point_ivs: list[ir.Value],
    point_values: list[ir.Value],
    loops: list[tuple[ir.Operation, list[Carried]]],
    thread: ir.Value,
    threads: int,
    ip: ir.InsertionPoint,
    top: ir.InsertionPoint,
    loc: ir.Location,
) -> None:
    """Emit at `ip` (inside the block-uniform loops over the band's points, whose indices are
    `point_values`) the per-point work of the module docstring, moving `body`'s ops: the code
    between the reduction loops runs in thread 0, each loop over all `threads` (threadIdx.x
    `thread`, a power of two) with a tree. Values that pass from one part to another go through
    shared slots (made at `top`), except index arithmetic, computed again where needed."""
    for old, new in zip(point_ivs, point_values, strict=True):
        old.replace_all_uses_with(new)
    ops = [op.operation for op in body.operations][:-1]
    loop_ops = [loop for loop, _ in loops]
    parts: list[list[ir.Operation]] = [[]]  # serial parts (thread 0) between the loops
    for op in ops:
        if any(op == loop for loop in loop_ops):
            parts.append([])
        else:
            parts[-1].append(op)
    recomputable = _recomputable(ops, loop_ops)
    # the operands of every op as written: moving a part remaps its ops' operands, and the
    # clones of index arithmetic made for other parts must start from the originals
    written = [list(op.operands) for op in ops]

    def clones(values: list[ir.Value], here: int | None) -> dict[ir.Value, ir.Value]:
        mapping: dict[ir.Value, ir.Value] = {}
        for op in _needed_ops(values, recomputable, ops):
            if here is not None and made.get(op.results[0]) == here:
                continue  # this part has it already
            copy = op.clone()
            for index, operand in enumerate(written[_index_of(ops, op)]):
                copy.operands[index] = mapping.get(operand, operand)
            for old, new in zip(op.results, copy.results, strict=True):
                mapping[old] = new
        return mapping

    # where each value is made: serial part k, or a loop's result in the serial part after it
    made: dict[ir.Value, int] = {}
    for k, part in enumerate(parts):
        for op in part:
            for result in op.results:
                made[result] = k
    for k, loop in enumerate(loop_ops):
        for result in loop.results:
            made[result] = k + 1
    # what each part uses: serial part k (with the combination of loop k-1), loop k
    serial_uses = [
        [v for op in part for v in all_operands(op)]
        + (list(loop_ops[k - 1].operands)[3:] if k > 0 else [])
        for k, part in enumerate(parts)
    ]
    loop_uses = [list(loop.operands)[:3] + _operands_of_body(loop) for loop in loop_ops]

    def crossing(values: list[ir.Value], here: int | None) -> list[ir.Value]:
        out: list[ir.Value] = []
        for value in values:
            if value in made and made[value] != here and value not in recomputable:
                if not any(value == seen for seen in out):
                    out.append(value)
        return out

    incoming_serial = [crossing(uses, k) for k, uses in enumerate(serial_uses)]
    incoming_loop = [crossing(uses, None) for uses in loop_uses]
    needed = [v for group in incoming_serial + incoming_loop for v in group]
    slots: dict[ir.Value, ir.Value] = {}
    with top, loc:
        for value in needed:
            if value not in slots:
                slots[value] = shared_buffer([1], value.type)
        partials = [
            [shared_buffer([threads], v.type) for v in list(loop.operands)[3:]] for loop in loop_ops
        ]
    with ip, loc:
        zero = index_value(0)
    for k, part in enumerate(parts):
        with ip, loc:
            first = arith.CmpIOp(arith.CmpIPredicate.eq, thread, index_value(0)).result
            serial = scf.IfOp(first)
        with ir.InsertionPoint(serial.then_block), loc:
            end = scf.YieldOp([])
        with ir.InsertionPoint(end), loc:
            mapping = {
                v: memref.LoadOp(slots[v], [index_value(0)]).result for v in incoming_serial[k]
            }
            mapping.update(clones(serial_uses[k], k))
            if k > 0:  # the previous loop's results: its initial values combined with the tree's
                loop = loop_ops[k - 1]
                initial = [mapping.get(v, v) for v in list(loop.operands)[3:]]
                for result, start, buffer, c in zip(
                    loop.results, initial, partials[k - 1], loops[k - 1][1], strict=True
                ):
                    total = memref.LoadOp(buffer, [index_value(0)]).result
                    combined = _combine(c.combine, start, total)
                    result.replace_all_uses_with(combined)
        for op in part:
            op.move_before(end)
        remap_operands(part, mapping)
        with ir.InsertionPoint(end), loc:
            for value, slot in slots.items():
                if made.get(value) == k:
                    memref.StoreOp(value, slot, [index_value(0)])
        with ip, loc:
            gpu.BarrierOp()
        if k == len(loop_ops):
            break
        loop = loop_ops[k]
        with ip, loc:
            mapping = {v: memref.LoadOp(slots[v], [zero]).result for v in incoming_loop[k]}
            mapping.update(clones(loop_uses[k], None))
            nest = reduction_nest(loop)
            for level in nest[:-1]:  # the constants beside the inner loops, made here once
                for op in [o.operation for o in level.regions[0].blocks[0].operations]:
                    if op.name == "arith.constant":
                        mapping[op.results[0]] = op.clone().results[0]
            bounds = [[mapping.get(v, v) for v in list(level.operands)[:3]] for level in nest]
            identities = [
                identity(c.combine, v.type) for c, v in zip(loops[k][1], loop.results, strict=True)
            ]
            if len(nest) == 1:
                low, high, step = bounds[0]
                start = arith.AddIOp(low, arith.MulIOp(thread, step).result).result
                stride = arith.MulIOp(step, index_value(threads)).result
                shared_loop = scf.ForOp(start, high, stride, identities)
                indices = [shared_loop.induction_variable]
            else:
                shared_loop, indices = _flat_loop(bounds, thread, threads, identities)
        old_body = nest[-1].regions[0].blocks[0]
        for op in [o.operation for o in old_body.operations]:
            shared_loop.body.append(op)
        for old, new in zip(
            [level.regions[0].blocks[0].arguments[0] for level in nest[:-1]]
            + list(old_body.arguments),
            [*indices, *shared_loop.inner_iter_args],
            strict=True,
        ):
            old.replace_all_uses_with(new)
        remap_operands([o.operation for o in shared_loop.body.operations], mapping)
        with ip, loc:
            for buffer, value in zip(partials[k], shared_loop.results, strict=True):
                memref.StoreOp(value, buffer, [thread])
            gpu.BarrierOp()
            width = threads // 2
            while width >= 1:
                active = arith.CmpIOp(arith.CmpIPredicate.ult, thread, index_value(width)).result
                step_if = scf.IfOp(active)
                with ir.InsertionPoint(step_if.then_block):
                    other = arith.AddIOp(thread, index_value(width)).result
                    for buffer, c in zip(partials[k], loops[k][1], strict=True):
                        mine = memref.LoadOp(buffer, [thread]).result
                        theirs = memref.LoadOp(buffer, [other]).result
                        memref.StoreOp(_combine(c.combine, mine, theirs), buffer, [thread])
                    scf.YieldOp([])
                gpu.BarrierOp()
                width //= 2
    for loop in reversed(loop_ops):
        loop.erase()


def _flat_loop(
    bounds: list[list[ir.Value]], thread: ir.Value, threads: int, identities: list[ir.Value]
) -> tuple[scf.ForOp, list[ir.Value]]:
    """One loop over the product of a reduction nest's iteration counts (`bounds`: low, high,
    step per level, outermost first), thread `thread` taking every `threads`-th iteration
    (consecutive threads, consecutive innermost indices: coalesced reads), and each level's
    index computed from the flat one, in the nest's lexicographic order."""
    zero = index_value(0)
    trips = [
        arith.MaxSIOp(arith.CeilDivSIOp(arith.SubIOp(high, low).result, step).result, zero).result
        for low, high, step in bounds
    ]
    total = trips[0]
    for trip in trips[1:]:
        total = arith.MulIOp(total, trip).result
    flat = scf.ForOp(thread, total, index_value(threads), identities)
    indices: list[ir.Value] = []
    with ir.InsertionPoint(flat.body):
        rest = flat.induction_variable
        for level in reversed(range(len(bounds))):
            if level > 0:
                position = arith.RemUIOp(rest, trips[level]).result
                rest = arith.DivUIOp(rest, trips[level]).result
            else:
                position = rest
            low, _, step = bounds[level]
            indices.append(arith.AddIOp(low, arith.MulIOp(position, step).result).result)
    indices.reverse()
    return flat, indices


def _index_of(ops: list[ir.Operation], op: ir.Operation) -> int:
    return next(k for k, candidate in enumerate(ops) if candidate == op)


def _recomputable(ops: list[ir.Operation], loops: list[ir.Operation]) -> set[ir.Value]:
    """The values of `ops` that are index arithmetic over values from outside `ops` (and each
    other): computed again wherever they are needed."""
    out: set[ir.Value] = set()
    made = {r for op in ops for r in op.results} | {r for loop in loops for r in loop.results}
    for op in ops:
        if op.regions or not op.name.startswith(("arith.", "math.", "index.")):
            continue
        if all(v in out or v not in made for v in op.operands):
            out.update(op.results)
    return out


def _needed_ops(
    values: list[ir.Value], recomputable: set[ir.Value], order: list[ir.Operation]
) -> list[ir.Operation]:
    """The ops making the recomputable `values`, with those they need, in their order in
    `order` (the body as it was)."""
    wanted: list[ir.Operation] = []
    pending = [v for v in values if v in recomputable]
    while pending:
        value = pending.pop()
        op = value.owner.operation  # type: ignore[union-attr]
        if any(op == seen for seen in wanted):
            continue
        wanted.append(op)
        pending.extend(v for v in op.operands if v in recomputable)
    rank = [next(k for k, o in enumerate(order) if o == op) for op in wanted]
    return [op for _, op in sorted(zip(rank, wanted, strict=True), key=lambda pair: pair[0])]
