"""Blocks and threads, the second step of the GPU mapping (SCF in, `gpu.launch` out): each band
of nested `scf.parallel` loops that `kernels.py` formed (lowered from `affine.parallel`) becomes
one `gpu.launch`.

The band's three innermost loops, innermost first, go to x, y and z. Each is strip-mined by the
block's size on its axis: thread `t` of block `b` runs iteration `(b + k·gridDim)·blockDim + t`
for k = 0, 1, ... (the tile loop is uniform across a block, so barriers inside it are safe; it
runs once per block unless the grid is capped), guarded by `iteration < trip count`, which
handles parametric sizes and partial tiles. A band's loops outside those three (up to three
more: a convolution's batch and group) are folded into the grid's x axis: block x enumerates
(their points) × (x tiles), each block decoding its point, so that every parallel loop gets
its own blocks instead of running sequentially in each thread. Block sizes are `Options.block` (x, y, z) or the defaults by band depth
(256; 32×8; 32×4×2), shrunk to a trip count known to be smaller; the grid covers the trip
counts, capped by `Options.grid` or the CUDA limits.

Memory the host allocates for the kernels (scratchpads, local arrays) becomes `gpu.alloc`,
freed before the function returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import arith, gpu, scf

from polyflow.ir.affine import index_constant
from polyflow.ir.locations import source_position
from polyflow.ir.ops import index_value, nested_in, walk

from .kernels import MAX_BAND
from .promotion import KernelParts, Promoted, promote_to_shared
from .reduction import (
    MAX_POINTS_FOR_TREE,
    MIN_REDUCTION_TRIP,
    REDUCTION_THREADS,
    Carried,
    reduction_loops,
    reduction_nest,
    tree_kernel,
)
from .register_tiles import jam_copies, jammable_loop

# Threads per block by band depth, (x, y, z): a warp's worth along x (coalesced), 256 threads.
DEFAULT_BLOCKS: dict[int, tuple[int, ...]] = {1: (256,), 2: (32, 8), 3: (32, 4, 2)}
# CUDA's limits on the grid, per axis (x, y, z), and on the threads of a block.
GRID_LIMITS = (2**31 - 1, 65535, 65535)
MAX_BLOCK_THREADS = 1024
BLOCK_LIMITS = (1024, 1024, 64)
AXES = ("x", "y", "z")
# Register tiles, (x, y) points per thread, preferred first: the first whose tiles are all full
# and that leaves at least `MIN_TILED_BLOCKS` blocks (a wave on a 132-multiprocessor H100/H200)
# is taken.
REGISTER_TILES = ((4, 4), (4, 2), (2, 2), (2, 1))
MIN_TILED_BLOCKS = 132


@dataclass
class MappedLoop:
    """One loop of a band: its source line (when known) and the axis it went to."""

    line: int | None
    axis: str


@dataclass
class LaunchInfo:
    """One `gpu.launch` made: the loops mapped, the block shape, and whether it is a
    single-thread kernel (no parallel loop)."""

    location: ir.Location
    loops: list[MappedLoop] = field(default_factory=list)
    block: tuple[int, ...] = ()
    single_thread: bool = False
    promoted: list[Promoted] = field(default_factory=list)
    # a tree reduction over the block's threads: for each carried value, whether it is a float
    tree: list[bool] = field(default_factory=list)
    # the host runs this kernel when the band has fewer points than this (else the next one)
    chosen_below: int | None = None
    register_tile: tuple[int, ...] = ()  # points per thread by axis (x first), when above one


def map_launches(
    fn: ir.Operation,
    *,
    block: Sequence[int] | None = None,
    grid: Sequence[int] | None = None,
    shared_memory: int = 0,
    reassociate: bool = False,
    register_tile: Sequence[int] | None = None,
    unroll: int | None = None,
) -> list[LaunchInfo]:
    """Turn every outermost `scf.parallel` band of `fn` into a `gpu.launch` (module docstring),
    promoting reads with reuse to at most `shared_memory` bytes of shared memory per block
    (promotion.py; 0: none; its loops over a tile unrolled `unroll` times, None: its own
    choice), and sharing a large reduction of a small band out over a block's threads
    (reduction.py; floating-point ones with `reassociate` only); `register_tile` (points per
    thread by axis, x first) instead of `REGISTER_TILES`' choice; returns what each launch
    maps, in program order."""
    bands = list(_outermost_parallels(fn))
    launches: list[LaunchInfo] = []
    for band in bands:
        launches += _launches(
            band, block, grid, shared_memory, reassociate, register_tile, unroll
        )
    _device_allocations(fn)
    return launches


def _launches(
    outer: ir.Operation,
    block: Sequence[int] | None,
    grid: Sequence[int] | None,
    shared_memory: int,
    reassociate: bool,
    register_tile: Sequence[int] | None = None,
    unroll: int | None = None,
) -> list[LaunchInfo]:
    """The launch of one band; for a band whose size is known only when the program runs and
    whose body qualifies for tree reductions, both kernels, the host choosing by the band's
    size (`MAX_POINTS_FOR_TREE`)."""
    band = _band(outer)
    if _tree_reduction(band, reassociate, unknown_size=True) is None:
        return [_launch(outer, block, grid, shared_memory, reassociate, register_tile, unroll)]
    loc = outer.location
    with ir.InsertionPoint(outer), loc:
        points = index_value(1)
        for loop in band:
            low, high, step = list(loop.operands)[:3]
            span = arith.SubIOp(high, low).result
            trip = arith.MaxSIOp(arith.CeilDivSIOp(span, step).result, index_value(0)).result
            points = arith.MulIOp(points, trip).result
        few = arith.CmpIOp(arith.CmpIPredicate.slt, points, index_value(MAX_POINTS_FOR_TREE)).result
        choice = scf.IfOp(few, has_else=True)
    with ir.InsertionPoint(choice.then_block), loc:
        end_then = scf.YieldOp([])
    with ir.InsertionPoint(choice.else_block), loc:
        end_else = scf.YieldOp([])
    copy = outer.clone(ip=ir.InsertionPoint(end_then))
    outer.move_before(end_else)
    copy_band = _band(copy)
    loops = _tree_reduction(copy_band, reassociate, unknown_size=True)
    assert loops is not None  # a copy qualifies as the original did
    tree = _tree_launch(copy, copy_band, loops, block, grid, LaunchInfo(loc))
    tree.chosen_below = MAX_POINTS_FOR_TREE
    return [tree, _launch(outer, block, grid, shared_memory, reassociate, register_tile, unroll)]


def _outermost_parallels(op: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []
    for region in op.regions:
        for blk in region.blocks:
            for inner in blk.operations:
                inner = inner.operation
                if inner.name == "scf.parallel":
                    found.append(inner)
                else:
                    found += _outermost_parallels(inner)
    return found


def _band(outer: ir.Operation) -> list[ir.Operation]:
    """`outer` and the `scf.parallel` loops perfectly nested in it (up to `MAX_BAND`), hoisting
    the pure ops between them (their bounds' arithmetic) above `outer`."""
    band = [outer]
    while len(band) < MAX_BAND:
        ops = [op.operation for op in band[-1].regions[0].blocks[0].operations][:-1]
        inner = [op for op in ops if op.name == "scf.parallel"]
        if len(inner) != 1 or ops[-1] != inner[0]:
            break
        between = ops[:-1]
        ivs = [b.regions[0].blocks[0].arguments[0] for b in band]
        if any(op.regions or _uses_any(op, ivs) or op.name not in _HOISTABLE for op in between):
            break
        for op in between:
            op.move_before(outer)
        band.append(inner[0])
    return band


# what lower-affine makes of a loop's bounds
_HOISTABLE = frozenset(
    {
        "arith.constant",
        "arith.addi",
        "arith.subi",
        "arith.muli",
        "arith.divsi",
        "arith.divui",
        "arith.ceildivsi",
        "arith.floordivsi",
        "arith.remsi",
        "arith.cmpi",
        "arith.select",
        "arith.maxsi",
        "arith.minsi",
        "arith.index_cast",
    }
)


def _uses_any(op: ir.Operation, values: list[ir.Value]) -> bool:
    return any(operand == v for operand in op.operands for v in values)


def block_shape(depth: int, trips: Sequence[int | None], block: Sequence[int] | None) -> list[int]:
    """Threads per axis (x first) for a band of `depth` loops whose trip counts (x first) are
    `trips` (None: unknown): `block` (x, y, z; missing axes 1) or the default, each shrunk to a
    smaller known trip count (at least 1)."""
    wanted = list(block) if block is not None else list(DEFAULT_BLOCKS[depth])
    wanted = ([*wanted, 1, 1, 1])[:depth]
    return [
        max(1, min(size, trip)) if trip is not None else size
        for size, trip in zip(wanted, trips, strict=True)
    ]


def _launch(
    outer: ir.Operation,
    block: Sequence[int] | None,
    grid: Sequence[int] | None,
    shared_memory: int,
    reassociate: bool = False,
    register_tile: Sequence[int] | None = None,
    unroll: int | None = None,
) -> LaunchInfo:
    band = _band(outer)  # (a second call finds the ops between its loops hoisted already)
    info = LaunchInfo(outer.location)
    tree = _tree_reduction(band, reassociate)
    if tree is not None:
        return _tree_launch(outer, band, tree, block, grid, info)
    every = list(reversed(band))  # innermost first
    by_axis, folded = every[: len(AXES)], every[len(AXES) :]  # threads; folded into grid x
    depth = len(by_axis)
    with ir.InsertionPoint(outer), outer.location:
        lows, trips, steps, known = [], [], [], []
        zero = index_value(0)
        for loop in every:
            low, high, step = list(loop.operands)[:3]
            span = arith.SubIOp(high, low).result
            trip = arith.MaxSIOp(arith.CeilDivSIOp(span, step).result, zero).result
            lows.append(low)
            steps.append(step)
            trips.append(trip)
            lo_c, hi_c, st_c = (index_constant(v) for v in (low, high, step))
            known.append(
                max(0, -(-(hi_c - lo_c) // st_c))
                if lo_c is not None and hi_c is not None and st_c
                else None
            )
        threads = block_shape(depth, known[:depth], block)
        full = not folded and all(
            trip is not None and trip % size == 0
            for trip, size in zip(known[:depth], threads, strict=True)
        )
        factors = (
            _register_tile(band, known[:depth], threads, steps[:depth], register_tile)
            if full
            else None
        )
        tile_sizes = [size * f for size, f in zip(threads, factors or [1] * depth, strict=True)]
        caps = [
            min(grid[k], GRID_LIMITS[k]) if grid is not None and k < len(grid) else GRID_LIMITS[k]
            for k in range(depth)
        ]
        one = index_value(1)
        tiles_per_axis: list[ir.Value] = []
        grid_sizes: list[ir.Value] = []
        for k in range(depth):
            blocks = arith.CeilDivSIOp(trips[k], index_value(tile_sizes[k])).result
            tiles_per_axis.append(blocks)
            if k == 0:
                for trip in trips[depth:]:  # the folded loops' points, times the x tiles
                    blocks = arith.MulIOp(blocks, trip).result
            blocks = arith.MinSIOp(blocks, index_value(caps[k])).result
            grid_sizes.append(arith.MaxSIOp(blocks, one).result)  # a launch needs one block
        x_span = arith.MulIOp(tiles_per_axis[0], index_value(threads[0])).result
        for trip in trips[depth:]:
            x_span = arith.MulIOp(x_span, trip).result
        grid3 = ([*grid_sizes, one, one])[:3]
        block3 = ([index_value(t) for t in threads] + [one, one])[:3]
        launch = gpu.LaunchOp(tuple(grid3), tuple(block3))
    body = launch.regions[0].blocks[0]
    args = list(body.arguments)
    block_ids, thread_ids, grid_dims = args[0:3], args[3:6], args[6:9]
    loc = outer.location
    ip = ir.InsertionPoint(body)
    tiles: list[scf.ForOp] = []
    tile_starts: list[ir.Value] = []
    folded_points: list[ir.Value] = []
    for k in range(depth):
        with ip, loc:
            size = index_value(tile_sizes[k])
            start = arith.MulIOp(block_ids[k], size).result
            stride = arith.MulIOp(grid_dims[k], size).result
            # x runs over (folded points) × (x tiles) when loops are folded into it
            tile = scf.ForOp(start, x_span if k == 0 and folded else trips[k], stride)
        with ir.InsertionPoint(tile.body), loc:
            scf.YieldOp([])
        ip = ir.InsertionPoint(next(op.operation for op in tile.body.operations))
        tiles.append(tile)
        tile_starts.append(tile.induction_variable)
        if k == 0 and folded:
            with ip, loc:
                x_tiles = tiles_per_axis[0]
                linear = arith.DivSIOp(tile.induction_variable, size).result
                tile_starts[0] = arith.MulIOp(arith.RemSIOp(linear, x_tiles).result, size).result
                rest = arith.DivSIOp(linear, x_tiles).result
                for j in range(len(folded)):
                    trip = trips[depth + j]
                    folded_points.append(arith.RemSIOp(rest, trip).result)
                    rest = arith.DivSIOp(rest, trip).result
    with ip, loc:
        positions = [arith.AddIOp(tile_starts[k], thread_ids[k]).result for k in range(depth)]
        inside = None
        for k in range(depth):
            below = arith.CmpIOp(arith.CmpIPredicate.slt, positions[k], trips[k]).result
            inside = below if inside is None else arith.AndIOp(inside, below).result
        if full:  # every tile is full: whenever the tile loop runs, each thread has its point
            inside = arith.ConstantOp(ir.IntegerType.get_signless(1), 1).result
        guard = scf.IfOp(inside)
    with ir.InsertionPoint(guard.then_block), loc:
        ivs = [
            arith.AddIOp(lows[k], arith.MulIOp(position, steps[k]).result).result
            for k, position in enumerate(positions + folded_points)
        ]
        end = scf.YieldOp([])
    with ir.InsertionPoint(body), loc:
        gpu.TerminatorOp()
    innermost = band[-1].regions[0].blocks[0]
    point_body = [op.operation for op in innermost.operations][:-1]
    jammed = jammable_loop(innermost, outer) if factors else None
    for op in point_body:
        op.move_before(end.operation)
    for k, loop in enumerate(every):
        loop.regions[0].blocks[0].arguments[0].replace_all_uses_with(ivs[k])
    if factors and jammed is not None:
        offsets = [
            [j * threads[k] * int(index_constant(steps[k]) or 0) for j in range(factors[k])]
            for k in range(depth)
        ]
        jam_copies(point_body, jammed, ivs[:depth], offsets)
        info.register_tile = tuple(factors)
    for k, loop in enumerate(every):
        position = source_position(loop.location)
        axis = AXES[k] if k < depth else "blocks x"
        info.loops.append(MappedLoop(position.line if position else None, axis))
    outer.erase()
    step_values = [index_constant(step) for step in steps]
    # promotion assumes every index is a thread's band position or block-uniform outside the
    # launch; folded points are neither (decoded inside it), so folded kernels keep their reads
    if shared_memory > 0 and not folded and all(step is not None for step in step_values):
        parts = KernelParts(
            launch.operation,
            tiles[-1].operation,
            guard.operation,
            inside,
            thread_ids[:depth],
            list(threads),
            ivs,
            [int(step) for step in step_values if step is not None],
            exact=full,
        )
        with loc:
            info.promoted = promote_to_shared(parts, shared_memory, unroll=unroll)
    _sink_constants(launch.operation)
    info.block = tuple(threads)
    info.single_thread = known == [1]
    return info


def _register_tile(
    band: list[ir.Operation],
    trips: list[int | None],
    threads: list[int],
    steps: list[ir.Value],
    wanted: Sequence[int] | None = None,
) -> list[int] | None:
    """Points per thread by axis (x first; `wanted`, else the first of `REGISTER_TILES` that
    leaves a wave of blocks) for a band whose point body is a jammable reduction
    (register_tiles.py) and whose tiles would all be full; None for one point (also where the
    tiles `wanted` would not all be full)."""
    if len(band) > 2 or jammable_loop(band[-1].regions[0].blocks[0], band[0]) is None:
        return None
    if any(index_constant(step) is None for step in steps):
        return None
    if wanted is not None:
        factors = [*wanted[: len(band)], *[1] * (len(band) - len(wanted))]
        if all(f == 1 for f in factors):
            return None
        for trip, size, factor in zip(trips, threads, factors, strict=True):
            if trip is None or trip % (size * factor):
                return None
        return factors
    for choice in REGISTER_TILES:
        factors = list(choice[: len(band)])
        blocks = 1
        for trip, size, factor in zip(trips, threads, factors, strict=True):
            if trip is None or trip % (size * factor):
                blocks = 0
                break
            blocks *= trip // (size * factor)
        if blocks >= MIN_TILED_BLOCKS:
            return factors
    return None


def _trip(loop: ir.Operation) -> int | None:
    low, high, step = (index_constant(v) for v in list(loop.operands)[:3])
    if low is None or high is None or not step:
        return None
    return max(0, -(-(high - low) // step))


def _nest_trip(loop: ir.Operation) -> int | None:
    """The iteration count of `loop`'s reduction nest (reduction.py), when known here."""
    total = 1
    for level in reduction_nest(loop):
        trip = _trip(level)
        if trip is None:
            return None
        total *= trip
    return total


def _tree_reduction(
    band: list[ir.Operation], reassociate: bool, *, unknown_size: bool = False
) -> list[tuple[ir.Operation, list[Carried]]] | None:
    """The reduction loops of the band's body to share out over a block's threads
    (reduction.py), when the band has few points and the loops many iterations; with
    `unknown_size`, only for a band whose size is not known here (the host then chooses)."""
    if len(band) > len(AXES):
        return None  # one block per band point: the grid has three axes
    points = 1
    for loop in band:
        trip = _trip(loop)
        if trip is None:
            points = -1
            break
        points *= trip
    if unknown_size != (points < 0) or points >= MAX_POINTS_FOR_TREE:
        return None
    body = band[-1].regions[0].blocks[0]
    found = reduction_loops(body, reassociate)
    if found is None:
        return None
    trips = [_nest_trip(loop) for loop, _ in found]
    if all(trip is not None and trip < MIN_REDUCTION_TRIP for trip in trips):
        return None
    return found


def _tree_launch(
    outer: ir.Operation,
    band: list[ir.Operation],
    loops: list[tuple[ir.Operation, list[Carried]]],
    block: Sequence[int] | None,
    grid: Sequence[int] | None,
    info: LaunchInfo,
) -> LaunchInfo:
    """One band point per block (grid-stride when the grid is capped), its reduction loop over
    the block's threads, combined by a tree in shared memory (reduction.py)."""
    by_axis = list(reversed(band))
    depth = len(band)
    wanted = block[0] if block is not None else REDUCTION_THREADS
    threads = 1
    while threads * 2 <= wanted:
        threads *= 2  # the tree halves the active threads: a power of two
    loc = outer.location
    reduction_positions = [
        source_position(level.location) for loop, _ in loops for level in reduction_nest(loop)
    ]
    with ir.InsertionPoint(outer), loc:
        one = index_value(1)
        trips, lows, steps = [], [], []
        for axis_loop in by_axis:
            low, high, step = list(axis_loop.operands)[:3]
            trip = arith.MaxSIOp(
                arith.CeilDivSIOp(arith.SubIOp(high, low).result, step).result, index_value(0)
            ).result
            trips.append(trip)
            lows.append(low)
            steps.append(step)
        sizes = []
        for k in range(depth):
            cap = (
                min(grid[k], GRID_LIMITS[k])
                if grid is not None and k < len(grid)
                else GRID_LIMITS[k]
            )
            sizes.append(
                arith.MaxSIOp(arith.MinSIOp(trips[k], index_value(cap)).result, one).result
            )
        launch = gpu.LaunchOp(tuple(([*sizes, one, one])[:3]), (index_value(threads), one, one))
    body = launch.regions[0].blocks[0]
    args = list(body.arguments)
    block_ids, thread_x, grid_dims = args[0:3], args[3], args[6:9]
    ip = ir.InsertionPoint(body)
    points: list[ir.Value] = []
    for k in range(depth):
        with ip, loc:
            point = scf.ForOp(block_ids[k], trips[k], grid_dims[k])
        with ir.InsertionPoint(point.body), loc:
            end = scf.YieldOp([])
        ip = ir.InsertionPoint(end)
        with ip, loc:
            points.append(
                arith.AddIOp(
                    lows[k], arith.MulIOp(point.induction_variable, steps[k]).result
                ).result
            )
    with ir.InsertionPoint(body), loc:
        gpu.TerminatorOp()
    ivs = [axis_loop.regions[0].blocks[0].arguments[0] for axis_loop in by_axis]
    top = ir.InsertionPoint(next(op.operation for op in body.operations))
    tree_kernel(band[-1].regions[0].blocks[0], ivs, points, loops, thread_x, threads, ip, top, loc)
    for k, axis_loop in enumerate(by_axis):
        position = source_position(axis_loop.location)
        info.loops.append(MappedLoop(position.line if position else None, f"blocks {AXES[k]}"))
    for position in reduction_positions:
        info.loops.append(MappedLoop(position.line if position else None, "threads x (tree)"))
    info.block = (threads,)
    info.tree = [c.floating for _, carried in loops for c in carried]
    outer.erase()
    _sink_constants(launch.operation)
    return info


def _sink_constants(launch: ir.Operation) -> None:
    """Clone the constants a launch body uses from outside into it: the kernel then knows them
    (block sizes, strides) instead of receiving them as arguments."""
    body = launch.regions[0].blocks[0]
    first = next(op.operation for op in body.operations)
    clones: dict[str, ir.Value] = {}

    def visit(op: ir.Operation) -> None:
        for index, operand in enumerate(op.operands):
            owner = operand.owner
            if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant":
                continue
            if nested_in(owner.operation, launch):
                continue
            key = str(owner.operation)
            if key not in clones:
                clone = owner.operation.clone(ip=ir.InsertionPoint(first))
                clones[key] = clone.results[0]
            op.operands[index] = clones[key]
        for region in op.regions:
            for blk in region.blocks:
                for inner in blk.operations:
                    visit(inner.operation)

    for region in launch.regions:
        for blk in region.blocks:
            for inner in list(blk.operations):
                visit(inner.operation)


def _device_allocations(fn: ir.Operation) -> None:
    """Host allocations (`memref.alloca`/`alloc` at the function's top level) that kernels use
    become `gpu.alloc` (the kernels cannot reach host memory), freed where the program freed
    them (`alloc`) or before each return (`alloca`)."""
    body = fn.regions[0].blocks[0]
    launches = [op for op in walk(fn) if op.name == "gpu.launch"]
    returns = [op for op in walk(fn) if op.name == "func.return"]
    for op in [o.operation for o in body.operations]:
        if op.name not in ("memref.alloca", "memref.alloc"):
            continue
        result = op.results[0]
        used = any(
            nested_in(use.owner.operation, launch) for use in result.uses for launch in launches
        )
        if not used:
            continue
        with ir.InsertionPoint(op), op.location:
            device = gpu.AllocOp(result.type, None, [], list(op.operands), []).memref
        frees = [
            use.owner.operation
            for use in result.uses
            if use.owner.operation.name == "memref.dealloc"
        ]
        result.replace_all_uses_with(device)
        stack = op.name == "memref.alloca"
        op.erase()
        for free in frees:  # the program's own free of it
            with ir.InsertionPoint(free), free.location:
                gpu.DeallocOp(None, [], device)
            free.erase()
        if stack:  # a stack array's storage ends with the function
            for ret in returns:
                with ir.InsertionPoint(ret), ret.location:
                    gpu.DeallocOp(None, [], device)
