"""Shared-memory promotion, the third step of the GPU mapping: arrays a block's threads read with
reuse are copied to shared memory a tile at a time, the way PPCG and Tensor Comprehensions do
it, so that each element is read from global memory once per block instead of once per thread.

It works on a kernel as `launch.py` builds it (tile loops, a guard per thread, the band's body)
and looks in the body for a sequential loop L (a reduction's `k`) whose bounds are the same in
every thread. The reads inside L of arrays the kernel never writes, whose subscripts are affine
in the band's indices and L's index with constant coefficients, and whose box of elements over
one block and `T` iterations of L is smaller than the reads it serves, are promoted. L is
strip-mined by `T` into a block-uniform loop around three parts:

    guard { the body before L; L's initial values -> per-thread slots }      (once)
    for kk (uniform):  barrier; each tile copied in by all threads (in bounds only); barrier;
                       guard { slots -> L over [kk, kk+T) reading the tiles -> slots }
    guard { slots -> the body after L }                                       (once)

Each thread still runs L's iterations in their order, so floating-point results are unchanged.
The values L carries (its `iter_args`) live in per-thread slots in shared memory across the
barriers; the index arithmetic before L is computed again in each part. The tiles and slots are
`memref.alloca` marked `SHARED_ATTR`: the CUDA lowering makes them the kernel's workgroup
(`.shared`) memory, the CPU emulation one buffer per block; a tile's rows are padded to an odd
length (no bank conflicts when a warp reads down a column). `T` is 32, halved until everything
fits `budget` bytes (`Options.shared_memory`). Kernels that do not have this shape are left
as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf

from polyflow.ir.affine import index_constant
from polyflow.ir.ops import (
    all_operands,
    block_ops,
    defined_in,
    index_value,
    remap_operands,
    shared_buffer,
    unroll_loop,
)

TILE_STEPS = (32, 16, 8, 4)


# how many steps of the loop over a tile each pass of the unrolled loop does
UNROLL = 8


@dataclass
class KernelParts:
    """What `launch.py` built, as promotion needs it (lists by axis, x first)."""

    launch: ir.Operation
    tile: ir.Operation  # the innermost tile loop (uniform in a block)
    guard: ir.Operation  # scf.if: this thread's point is in range
    inside: ir.Value
    thread_ids: list[ir.Value]
    threads: list[int]
    ivs: list[ir.Value]
    steps: list[int]  # each band loop's step
    # every thread of the block has a point whenever the tile loop runs (full tiles only): the
    # guard is always true, and the carried values stay in registers across the barriers
    exact: bool = False


@dataclass
class Promoted:
    """One array read through shared memory: which (an argument number, or None), the tile's
    shape and its bytes."""

    argument: int | None
    shape: tuple[int, ...]
    bytes: int


@dataclass
class _Read:
    load: ir.Operation
    forms: list[dict[ir.Value | None, int]]  # per subscript: leaf -> coefficient, None: constant
    argument: int | None = None  # the function argument read, when it is one


class _NotPromotable(Exception):
    pass


def promote_to_shared(
    parts: KernelParts, budget: int, *, unroll: int | None = None
) -> list[Promoted]:
    """Promote the reads of `parts`' kernel that have reuse (module docstring), the loop over a
    tile unrolled `unroll` times where that divides the tile (None: `UNROLL`; 1: not
    unrolled); returns what was promoted (nothing, with the kernel unchanged, where its shape
    does not allow it)."""
    try:
        plan = _plan(parts, budget)
    except _NotPromotable:
        return []
    if plan is None:
        return []
    loop, reads, step, pre_pure = plan
    return _rewrite(parts, loop, reads, step, pre_pure, UNROLL if unroll is None else unroll)


# ----- analysis (nothing changes here)


def _is_pure(op: ir.Operation) -> bool:
    return not op.regions and op.name.startswith(("arith.", "math.", "index."))


def _linear(
    value: ir.Value, leaves: list[ir.Value], launch: ir.Operation, depth: int = 0
) -> dict[ir.Value | None, int] | None:
    """`value` as a sum of constant multiples of `leaves`, of values defined outside `launch`
    (the same in every thread) and a constant; None when it is not one."""
    if any(value == leaf for leaf in leaves) or not defined_in(value, launch):
        return {value: 1}
    constant = index_constant(value)
    if constant is not None:
        return {None: constant}
    owner = value.owner
    if isinstance(owner, ir.Block) or depth > 12:
        return None
    op = owner.operation
    if op.name in ("arith.addi", "arith.subi"):
        left = _linear(op.operands[0], leaves, launch, depth + 1)
        right = _linear(op.operands[1], leaves, launch, depth + 1)
        if left is None or right is None:
            return None
        sign = 1 if op.name == "arith.addi" else -1
        out = dict(left)
        for key, coefficient in right.items():
            out[key] = out.get(key, 0) + sign * coefficient
        return out
    if op.name == "arith.muli":
        for this, other in ((0, 1), (1, 0)):
            factor = index_constant(op.operands[this])
            if factor is not None:
                inner = _linear(op.operands[other], leaves, launch, depth + 1)
                return None if inner is None else {k: v * factor for k, v in inner.items()}
    return None


def _writes(launch: ir.Operation) -> list[ir.Value]:
    out: list[ir.Value] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in ("memref.store", "memref.atomic_rmw", "memref.copy"):
            out.append(op.operands[1])
        elif op.name == "func.call":
            out.extend(v for v in op.operands if isinstance(v.type, ir.MemRefType))
        return ir.WalkResult.ADVANCE

    launch.walk(visit)
    return out


def _plan(
    parts: KernelParts, budget: int
) -> tuple[ir.Operation, list[list[_Read]], int, list[ir.Operation]] | None:
    body = block_ops(parts.guard.regions[0].blocks[0])
    loops = [op for op in body if op.name == "scf.for"]
    written = _writes(parts.launch)
    for loop in loops:
        step = index_constant(loop.operands[2])
        bounds_uniform = all(
            not defined_in(v, parts.guard) or index_constant(v) is not None
            for v in loop.operands[:2]
        )
        if step != 1 or not bounds_uniform:
            continue
        k = loop.regions[0].blocks[0].arguments[0]
        reads = []
        for op in block_ops(loop.regions[0].blocks[0]):
            if op.name != "memref.load":
                continue
            array = op.operands[0]
            if defined_in(array, parts.launch) or any(array == w for w in written):
                continue
            if not _identity(array.type):
                continue
            forms = [_linear(v, [*parts.ivs, k], parts.launch) for v in list(op.operands)[1:]]
            if any(f is None for f in forms):
                continue
            number = array.arg_number if isinstance(array, ir.BlockArgument) else None
            reads.append(_Read(op, forms, number))  # type: ignore[arg-type]
        if not reads:
            continue
        position = body.index(loop)
        pre, post = body[:position], body[position + 1 : -1]
        # the pure ops before L that can be computed again after it: none of their operands
        # comes from a load or another op that must run once
        pre_pure: list[ir.Operation] = []
        impure: list[ir.Operation] = []
        for op in pre:
            tainted = any(any(v == r for o in impure for r in o.results) for v in op.operands)
            (pre_pure if _is_pure(op) and not tainted else impure).append(op)
        initial = list(loop.operands)[3:]
        for op in [loop, *post]:
            for value in all_operands(op):
                produced = [r for o in impure for r in o.results]
                if any(value == r for r in produced) and not (
                    op == loop and any(value == i for i in initial)
                ):
                    raise _NotPromotable("a value computed before the loop is used after it")
        slot_bytes = 0 if parts.exact else sum(_bytes(v.type) for v in initial)
        for tile_step in TILE_STEPS:
            kept = _same_tiles([r for r in reads if _reuse(r, parts, tile_step, k)])
            total = sum(_tile_bytes(group[0], parts, tile_step, k) for group in kept)
            total += slot_bytes * _product(parts.threads)
            if kept and total <= budget:
                return loop, kept, tile_step, pre_pure
    return None


def _same_tiles(reads: list[_Read]) -> list[list[_Read]]:
    """`reads` grouped by array and subscripts: one tile serves each group (a thread's register
    tile reads one row of A for all the points of its row)."""
    groups: dict[tuple[object, ...], list[_Read]] = {}
    for read in reads:
        key = (
            read.load.operands[0],
            *(frozenset(form.items()) for form in read.forms),
        )
        groups.setdefault(key, []).append(read)
    return list(groups.values())


def _identity(t: ir.Type) -> bool:
    mt = ir.MemRefType(t)
    dims = ", ".join(f"d{k}" for k in range(mt.rank))
    return str(mt.layout) == f"affine_map<({dims}) -> ({dims})>" and mt.memory_space is None


def _coefficient(form: dict[ir.Value | None, int], value: ir.Value) -> int:
    return sum(c for key, c in form.items() if key is not None and key == value)


def _extent(
    form: dict[ir.Value | None, int], parts: KernelParts, tile_step: int, k: ir.Value
) -> int:
    span = sum(
        abs(_coefficient(form, iv) * parts.steps[axis]) * (parts.threads[axis] - 1)
        for axis, iv in enumerate(parts.ivs)
    )
    return span + abs(_coefficient(form, k)) * (tile_step - 1) + 1


def _product(values: list[int] | tuple[int, ...]) -> int:
    out = 1
    for value in values:
        out *= value
    return out


def _tile_shape(read: _Read, parts: KernelParts, tile_step: int, k: ir.Value) -> tuple[int, ...]:
    return tuple(_extent(f, parts, tile_step, k) for f in read.forms)


def _reuse(read: _Read, parts: KernelParts, tile_step: int, k: ir.Value) -> bool:
    elements = _product(_tile_shape(read, parts, tile_step, k))
    return 2 * elements <= _product(parts.threads) * tile_step


def _bytes(t: ir.Type) -> int:
    if isinstance(t, ir.IndexType):
        return 8
    return max(1, (t.width + 7) // 8)  # type: ignore[attr-defined]


def _tile_bytes(read: _Read, parts: KernelParts, tile_step: int, k: ir.Value) -> int:
    element = ir.MemRefType(read.load.operands[0].type).element_type
    return _product(padded(_tile_shape(read, parts, tile_step, k))) * _bytes(element)


def padded(shape: tuple[int, ...]) -> tuple[int, ...]:
    """A tile's allocated shape: rows of an even length get one more element, so that threads
    reading down a column (a warp's threads on different rows, same column) hit different
    shared-memory banks instead of all the same one."""
    if len(shape) < 2 or shape[-1] % 2:
        return shape
    return (*shape[:-1], shape[-1] + 1)


# ----- the rewrite


def _rewrite(
    parts: KernelParts,
    loop: ir.Operation,
    groups: list[list[_Read]],
    tile_step: int,
    pre_pure: list[ir.Operation],
    unroll: int,
) -> list[Promoted]:
    loc = loop.location
    launch_body = parts.launch.regions[0].blocks[0]
    first = block_ops(launch_body)[0]
    k = loop.regions[0].blocks[0].arguments[0]
    initial = list(loop.operands)[3:]
    depth = len(parts.ivs)
    leaders = [group[0] for group in groups]
    shapes = [_tile_shape(r, parts, tile_step, k) for r in leaders]
    with ir.InsertionPoint(first), loc:
        tiles = [
            shared_buffer(padded(shape), ir.MemRefType(r.load.operands[0].type).element_type)
            for r, shape in zip(leaders, shapes, strict=True)
        ]
        slots_shape = tuple(reversed(parts.threads))  # z, y, x
        slots = [] if parts.exact else [shared_buffer(slots_shape, v.type) for v in initial]
    guard_block = parts.guard.regions[0].blocks[0]
    tid_index = list(reversed(parts.thread_ids[:depth]))  # slot subscripts: z, y, x
    lower, upper = loop.operands[0], loop.operands[1]
    if parts.exact:
        # (the guard is always true) its body runs unguarded, L's values carried by the strip
        for op in block_ops(guard_block)[:-1]:
            op.move_before(parts.guard)
        parts.guard.erase()
        with ir.InsertionPoint(loop), loc:
            strip = scf.ForOp(lower, upper, index_value(tile_step), initial)
        carried_in: list[ir.Value] = list(strip.inner_iter_args)
    else:
        # (1) the guard keeps the body before L; L's initial values go to the slots
        written = block_ops(guard_block)
        position = written.index(loop)
        post = written[position + 1 : -1]
        with ir.InsertionPoint(loop), loc:
            for slot, value in zip(slots, initial, strict=True):
                memref.StoreOp(value, slot, tid_index)
        for bound in (lower, upper):  # constants defined in the guard: the block needs them
            owner = bound.owner
            if not isinstance(owner, ir.Block) and defined_in(bound, parts.guard):
                owner.operation.move_before(parts.guard)
        # (2) the tile loop, after the guard
        after_guard = ir.InsertionPoint.after(parts.guard)  # type: ignore[attr-defined]
        with after_guard, loc:
            strip = scf.ForOp(lower, upper, index_value(tile_step))
    with ir.InsertionPoint(strip.body), loc:
        kk = strip.induction_variable
        gpu.BarrierOp()  # the tiles of the previous step are no longer read
        origins = [_origins(r, parts, tile_step, k, kk) for r in leaders]
        _copy_tiles(parts, leaders, tiles, origins, shapes)
        gpu.BarrierOp()
        stop = arith.AddIOp(kk, index_value(tile_step)).result
        low_c, high_c = index_constant(lower), index_constant(upper)
        whole_steps = low_c is not None and high_c is not None and (high_c - low_c) % tile_step == 0
        if not whole_steps:
            stop = arith.MinSIOp(stop, upper).result  # (a last, shorter step)
        if parts.exact:
            inner = scf.ForOp(kk, stop, index_value(1), carried_in)
            scf.YieldOp(list(inner.results))
            mapping: dict[ir.Value, ir.Value] = {}
            done = None
        else:
            compute = scf.IfOp(parts.inside)
            scf.YieldOp([])
    if not parts.exact:
        with ir.InsertionPoint(compute.then_block), loc:
            mapping = _clone(pre_pure)
            carried = [memref.LoadOp(slot, tid_index).result for slot in slots]
            inner = scf.ForOp(kk, stop, index_value(1), carried)
            done = scf.YieldOp([])
    old_body = loop.regions[0].blocks[0]
    for op in block_ops(old_body):  # L's body, its yield included, becomes the inner loop's
        inner.body.append(op)
    old_args = list(old_body.arguments)
    new_args = [inner.induction_variable, *inner.inner_iter_args]
    for old, new in zip(old_args, new_args, strict=True):
        old.replace_all_uses_with(new)
    remap_operands(block_ops(inner.body), mapping)
    if done is not None:
        with ir.InsertionPoint(done), loc:
            for slot, result in zip(slots, inner.results, strict=True):
                memref.StoreOp(result, slot, tid_index)
    for group, tile, origin in zip(groups, tiles, origins, strict=True):
        for read in group:
            with ir.InsertionPoint(read.load), loc:
                local = [
                    arith.SubIOp(index, start_at).result
                    for index, start_at in zip(list(read.load.operands)[1:], origin, strict=True)
                ]
                value = memref.LoadOp(tile, local).result
            read.load.results[0].replace_all_uses_with(value)
            read.load.erase()
    if whole_steps and unroll > 1 and tile_step % unroll == 0:
        # a constant trip: unrolled, the tile reads get constant offsets and the loop's
        # counting is paid once per `unroll` steps
        unroll_loop(inner.operation, unroll)
    if parts.exact:
        for old, new in zip(loop.results, strip.results, strict=True):
            old.replace_all_uses_with(new)
    else:
        # (3) the body after L, in a guard of its own after the tile loop
        with ir.InsertionPoint.after(strip.operation), loc:  # type: ignore[attr-defined]
            finish = scf.IfOp(parts.inside)
        with ir.InsertionPoint(finish.then_block), loc:
            mapping_after = _clone(pre_pure)
            results = [memref.LoadOp(slot, tid_index).result for slot in slots]
            end_after = scf.YieldOp([])
        for old, new in zip(loop.results, results, strict=True):
            old.replace_all_uses_with(new)
        for op in post:
            op.move_before(end_after)
        remap_operands(post, mapping_after)
    loop.erase()
    out = []
    for read, shape, tile in zip(leaders, shapes, tiles, strict=True):
        element = ir.MemRefType(tile.type).element_type
        out.append(Promoted(read.argument, shape, _product(padded(shape)) * _bytes(element)))
    return out


def _origins(
    read: _Read, parts: KernelParts, tile_step: int, k: ir.Value, kk: ir.Value
) -> list[ir.Value]:
    """The global subscripts of each tile's first element, for this block and step: each form
    at the block's first point and `kk`, lowered where a coefficient is negative."""
    out = []
    for form in read.forms:
        total = index_value(form.get(None, 0))
        shift = 0
        for key, coefficient in form.items():
            if key is None or coefficient == 0:
                continue
            axis = next((a for a, iv in enumerate(parts.ivs) if iv == key), None)
            if key == k:
                term = kk
                shift += min(0, coefficient) * (tile_step - 1)
            elif axis is not None:
                # the block's first point on this axis: the thread-0 value of the index
                term = _first_point(parts, axis)
                shift += min(0, coefficient * parts.steps[axis]) * (parts.threads[axis] - 1)
            else:
                term = key
            scaled = (
                term if coefficient == 1 else arith.MulIOp(term, index_value(coefficient)).result
            )
            total = arith.AddIOp(total, scaled).result
        out.append(arith.AddIOp(total, index_value(shift)).result if shift else total)
    return out


def _first_point(parts: KernelParts, axis: int) -> ir.Value:
    """The band index of thread 0 on `axis` in this block's tile: the index with the thread id
    replaced by 0 (iv = low + (tile + tid) * step)."""
    iv = parts.ivs[axis]
    return _substitute(iv, parts.thread_ids[axis], index_value(0))


def _substitute(value: ir.Value, old: ir.Value, new: ir.Value) -> ir.Value:
    """A copy of the pure computation of `value` with `old` replaced by `new` (at the current
    insertion point)."""
    if value == old:
        return new
    owner = value.owner
    if isinstance(owner, ir.Block):
        return value
    op = owner.operation
    if not _is_pure(op) or not any(_uses(v, old) for v in op.operands):
        return value
    operands = [_substitute(v, old, new) for v in op.operands]
    clone = op.clone()
    for index, operand in enumerate(operands):
        clone.operands[index] = operand
    return clone.results[0]


def _uses(value: ir.Value, old: ir.Value, depth: int = 0) -> bool:
    if value == old:
        return True
    owner = value.owner
    if isinstance(owner, ir.Block) or depth > 16:
        return False
    return any(_uses(v, old, depth + 1) for v in owner.operation.operands)


def _copy_tiles(
    parts: KernelParts,
    reads: list[_Read],
    tiles: list[ir.Value],
    origins: list[list[ir.Value]],
    shapes: list[tuple[int, ...]],
) -> None:
    """All threads of the block copy each tile in, element after element, skipping elements
    outside the array (no thread reads those)."""
    threads = _product(parts.threads)
    linear = index_value(0)
    stride = 1
    for axis, tid in enumerate(parts.thread_ids[: len(parts.threads)]):
        term = tid if stride == 1 else arith.MulIOp(tid, index_value(stride)).result
        linear = arith.AddIOp(linear, term).result
        stride *= parts.threads[axis]
    for read, tile, origin, shape in zip(reads, tiles, origins, shapes, strict=True):
        array = read.load.operands[0]
        count = _product(shape)
        copy = scf.ForOp(linear, index_value(count), index_value(threads))
        with ir.InsertionPoint(copy.body):
            rest = copy.induction_variable
            coords: list[ir.Value] = []
            for extent in reversed(shape):  # row-major: the last subscript varies fastest
                coords.insert(0, arith.RemUIOp(rest, index_value(extent)).result)
                rest = arith.DivUIOp(rest, index_value(extent)).result
            inside = None
            globals_: list[ir.Value] = []
            for dim, (start, coord) in enumerate(zip(origin, coords, strict=True)):
                position = arith.AddIOp(start, coord).result
                globals_.append(position)
                size = memref.DimOp(array, index_value(dim)).result
                low = arith.CmpIOp(arith.CmpIPredicate.sge, position, index_value(0)).result
                high = arith.CmpIOp(arith.CmpIPredicate.slt, position, size).result
                both = arith.AndIOp(low, high).result
                inside = both if inside is None else arith.AndIOp(inside, both).result
            assert inside is not None
            check = scf.IfOp(inside)
            with ir.InsertionPoint(check.then_block):
                value = memref.LoadOp(array, globals_).result
                memref.StoreOp(value, tile, coords)
                scf.YieldOp([])
            scf.YieldOp([])


def _clone(ops: list[ir.Operation]) -> dict[ir.Value, ir.Value]:
    """Clone `ops` (pure, in order) at the current insertion point; old value -> new value."""
    mapping: dict[ir.Value, ir.Value] = {}
    for op in ops:
        clone = op.clone()
        for index, operand in enumerate(clone.operands):
            if operand in mapping:
                clone.operands[index] = mapping[operand]
        for old, new in zip(op.results, clone.results, strict=True):
            mapping[old] = new
    return mapping
