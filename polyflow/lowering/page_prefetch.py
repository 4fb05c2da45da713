"""Software prefetches for accesses that cross a page every iteration: in an innermost
`affine.for` whose loads or stores move by a page or more per iteration (a walk down a column of
a large row-major array), each such access gets a `memref.prefetch` of the element it will touch
`PREFETCH_ITERATIONS_AHEAD` iterations later, its subscripts clamped to the array's bounds.

Why: the hardware prefetchers do not cross 4 KiB pages, so a column walk of rows longer than a
page misses the cache on every iteration, one access at a time. adi's column sweep in strips of
8 rows (schedule/row_strips.py) reads `u[j][i-1 .. i+8]` and writes `v[j][i .. i+7]` one row
further each step.

Only loops that LLVM's loop vectorizer leaves scalar get them, those with a recurrence that is
not a reduction (lowering/recurrences.py): a call of `llvm.prefetch` keeps a loop from
vectorizing (jacobi-2d's rows with prefetches ran 5x slower). And only loops that walk a whole
extent, with bounds that depend on no enclosing loop and not known to run fewer than
`MIN_PREFETCH_TRIPS` iterations: a tile's rows (seidel-2d's interleaved rows, 2.4x slower with
prefetches) or a triangle's column (symm's, 1.3x slower) are in the cache already, brought in by
the iterations around them. A prefetch never faults and never changes a value; one past the
loop's last iteration only fetches a line for nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import affine, arith
from mlir.dialects import memref as memref_dialect

from polyflow.ir.affine import (
    Inexpressible,
    Linear,
    defined_in_loop_body,
    for_bounds,
    linear_form,
    static_row_major,
    straight_line_loops,
    trip_bound,
)
from polyflow.lowering.recurrences import VECTORIZABLE_REDUCTION_KINDS, recurrence_cycles

PAGE_BYTES = 4096
CACHE_LINE_BYTES = 64
# Iterations ahead: a walk of this kind runs a few ns per iteration, a miss to memory ~100 ns.
PREFETCH_ITERATIONS_AHEAD = 32
MIN_PREFETCH_TRIPS = 64
# Lines prefetched per array row an iteration touches (a row's accesses far apart: their own).
MAX_PREFETCHED_SPAN_LINES = 4
_LOOPS = frozenset({"affine.for", "affine.parallel", "scf.for", "scf.parallel", "scf.while"})


@dataclass
class _Group:
    """The accesses of one array that differ only in their last subscript's constant: one walk,
    prefetched line by line over the span of those constants."""

    memref: ir.Value
    subscripts: tuple[Linear, ...]  # the first access's
    offsets: set[int] = field(default_factory=set)  # last-subscript constants seen
    write: bool = False


def prefetch_page_strided_accesses(module: ir.Module) -> int:
    """Every innermost `affine.for` of `module` prefetches the accesses that move by a page or
    more per iteration, `PREFETCH_ITERATIONS_AHEAD` iterations ahead (module docstring);
    returns how many prefetches it placed."""
    placed = 0
    for loop in straight_line_loops(module):
        trips = trip_bound(loop)
        if (trips is not None and trips < MIN_PREFETCH_TRIPS) or not _bounds_loop_invariant(loop):
            continue
        if not recurrence_cycles(loop, VECTORIZABLE_REDUCTION_KINDS):
            continue  # LLVM may vectorize it, and a prefetch call keeps a loop scalar
        groups = _page_strided_groups(loop)
        for group in groups:
            placed += _prefetch(loop, group)
    return placed


def _bounds_loop_invariant(loop: ir.Operation) -> bool:
    """Whether `loop`'s bounds depend on no enclosing loop's variable: it walks a whole extent,
    not a tile's share or a triangle's row (data an enclosing loop has just brought in)."""
    (_, lb_operands), (_, ub_operands) = for_bounds(loop)
    pending = [*lb_operands, *ub_operands]
    seen: set[ir.Value] = set()
    while pending:
        value = pending.pop()
        if value in seen:
            continue
        seen.add(value)
        owner = value.owner
        if isinstance(owner, ir.Block):
            parent = owner.owner
            if parent is not None and parent.name in _LOOPS:
                return False
            continue
        pending.extend(owner.operands)
    return True


def _page_strided_groups(loop: ir.Operation) -> list[_Group]:
    body = loop.regions[0].blocks[0]
    iv = body.arguments[0]
    step = ir.IntegerAttr(loop.attributes["step"]).value
    groups: dict[tuple[object, ...], _Group] = {}
    for op in body.operations:
        access = op.operation
        if access.name not in ("affine.load", "affine.store"):
            continue
        write = access.name == "affine.store"
        memref = access.operands[1 if write else 0]
        indices = list(access.operands)[2 if write else 1 :]
        shape = static_row_major(memref.type)
        if shape is None:
            continue
        extents, element_bytes = shape
        amap = ir.AffineMapAttr(access.attributes["map"]).value
        try:
            subscripts = tuple(linear_form(e, indices, amap.n_dims) for e in amap.results)
        except Inexpressible:
            continue
        if any(defined_in_loop_body(value, body) for terms, _ in subscripts for value, _ in terms):
            continue  # a subscript computed in the body cannot be shifted ahead
        stride = 1
        moved = 0
        for extent, (terms, _) in zip(reversed(extents), reversed(subscripts), strict=True):
            moved += stride * dict(terms).get(iv, 0)
            stride *= extent
        if abs(moved * step * element_bytes) < PAGE_BYTES:
            continue
        last_terms, last_constant = subscripts[-1]
        key = (memref, subscripts[:-1], last_terms)
        group = groups.setdefault(key, _Group(memref, subscripts))
        group.offsets.add(last_constant)
        group.write |= write
    return list(groups.values())


def _prefetch(loop: ir.Operation, group: _Group) -> int:
    """Prefetches at the top of `loop`'s body for the lines `group` spans, ahead of the loop."""
    body = loop.regions[0].blocks[0]
    iv = body.arguments[0]
    step = ir.IntegerAttr(loop.attributes["step"]).value
    shape = static_row_major(group.memref.type)
    assert shape is not None
    extents, element_bytes = shape
    per_line = max(1, CACHE_LINE_BYTES // element_bytes)
    low, high = min(group.offsets), max(group.offsets)
    if high - low <= MAX_PREFETCHED_SPAN_LINES * per_line:
        offsets = sorted({*range(low, high + 1, per_line), high})  # every line of the span
    else:  # far apart in the row: the line of each access
        first_of_line: dict[int, int] = {}
        for offset in sorted(group.offsets):
            first_of_line.setdefault(offset // per_line, offset)
        offsets = list(first_of_line.values())[:MAX_PREFETCHED_SPAN_LINES]
    first = body.operations[0]
    index = ir.IndexType.get()
    with ir.InsertionPoint(first), loop.location:
        leading = [
            _clamped(_ahead(terms, constant, iv, step), extent, index)
            for (terms, constant), extent in zip(group.subscripts[:-1], extents, strict=False)
        ]
        last_terms, _ = group.subscripts[-1]
        for offset in offsets:
            last = _clamped(_ahead(last_terms, offset, iv, step), extents[-1], index)
            memref_dialect.PrefetchOp(group.memref, [*leading, last], group.write, 3, True)
    return len(offsets)


def _ahead(terms: frozenset[tuple[ir.Value, int]], constant: int, iv: ir.Value, step: int) -> ir.Value:
    """`affine.apply` of the linear form (terms, constant) with the loop's variable taken
    `PREFETCH_ITERATIONS_AHEAD` iterations further."""
    values: list[ir.Value] = [value for value, _ in terms]
    expr = ir.AffineConstantExpr.get(constant)
    for position, (value, coefficient) in enumerate(terms):
        expr = expr + ir.AffineDimExpr.get(position) * coefficient
        if value == iv:
            expr = expr + coefficient * step * PREFETCH_ITERATIONS_AHEAD
    amap = ir.AffineMap.get(len(values), 0, [expr])
    return affine.apply(amap, values)


def _clamped(value: ir.Value, extent: int, index: ir.Type) -> ir.Value:
    """`value` within [0, extent - 1]: the prefetched address stays inside the array."""
    zero = arith.constant(index, 0)
    top = arith.constant(index, extent - 1)
    return arith.maxsi(arith.minsi(value, top), zero)
