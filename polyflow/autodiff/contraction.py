"""One copy of a distributed adjoint nest (reverse.py, `_distribution`) as a contraction: its
loop chain made perfect and ordered with the loops that index the updated shadow outside and
the others inside, so that the shadow's element is loop-invariant in the inner loops (raising's
raise-reductions then keeps it in a register: `B̄[k,j] += Σ_i C̄[i,j]·A[i,k]`, the form the
scheduler's micro-kernels know).

The copy's iterations commute (each adds its own terms to the shadow), so any loop order
computes the same sums; only their rounding order changes, as for any loop order of a sum.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import affine, arith, memref

from polyflow.ir.affine import constant_trip_count
from polyflow.ir.ops import block_ops, walk

_STORES = ("affine.store", "memref.store")


def loop_chain(nest: ir.Operation) -> list[ir.Operation] | None:
    """The loops of `nest` from the outside in, when each body holds at most one loop and no
    loop carries values; else None."""
    chain = [nest]
    while True:
        loop = chain[-1]
        if len(loop.results) or ir.IntegerAttr(loop.attributes["step"]).value != 1:
            return None
        inner = [o for o in block_ops(loop.regions[0].blocks[0]) if o.regions]
        if not inner:
            return chain
        if len(inner) != 1 or inner[0].name != "affine.for":
            return None
        chain.append(inner[0])


def defined_outside(value: ir.Value, nest: ir.Operation) -> bool:
    owner = value.owner
    op = owner.owner if isinstance(owner, ir.Block) else owner
    while op is not None:
        if op.operation == nest:
            return False
        parent = op.operation.parent
        op = parent.operation if parent is not None else None  # type: ignore[assignment]
    return True


def order_as_contraction(nest: ir.Operation, shadow: ir.Value) -> ir.Operation:
    """`nest` (in the insertion block of its parent) rebuilt as a perfect nest whose loops
    indexing `shadow` (in the order of its subscripts) come first; returns the new outer loop,
    or `nest` unchanged where it is not a chain of rectangular loops with all its stores
    innermost and only to `shadow`."""
    chain = loop_chain(nest)
    if chain is None or len(chain) < 2:
        return nest
    ivs = [loop.regions[0].blocks[0].arguments[0] for loop in chain]
    for loop in chain:  # rectangular: bounds from outside the nest
        if not all(defined_outside(v, nest) for v in loop.operands):
            return nest
    innermost = chain[-1].regions[0].blocks[0]
    stores = [o for o in walk(nest) if o.name in _STORES]
    if not stores or any(
        s.operands[1] != shadow or s.parent.operation != chain[-1] for s in stores
    ):
        return nest
    if any(o.regions for o in block_ops(innermost)):
        return nest
    indexed: list[int] = []  # the loops indexing the shadow, in the order of its subscripts
    for store in stores:
        operands = list(store.operands)[2:]
        if store.name == "affine.store":
            amap = ir.AffineMapAttr(store.attributes["map"]).value
            used = [operands[d] for e in amap.results for d in _dims(e)]
        else:
            used = operands
        for value in used:
            for k, iv in enumerate(ivs):
                if iv == value and k not in indexed:
                    indexed.append(k)
    order = indexed + [k for k in range(len(chain)) if k not in indexed]
    vector = _window_vector_loop(stores, innermost, chain)
    if vector is not None:
        # the shadow is written through a window (`x̄[c, h+kh, w+kw]`, a convolution's input):
        # its reduction innermost would be a strided, latency-bound sum; a loop that moves
        # every access by one element instead makes the body a vectorizable update
        order = [k for k in order if k != vector] + [vector]
    if order == list(range(len(chain))):
        return nest
    loops = reordered(nest, chain, order)
    nest.erase()
    return loops[0]


def empty_loops(loops: list[ir.Operation]) -> list[ir.Operation]:
    """Empty step-1 loops with the bounds of `loops`, nested in that order at the insertion
    point."""
    made: list[ir.Operation] = []
    point = ir.InsertionPoint.current
    for old in loops:
        view = old.opview
        with point:
            loop = affine.AffineForOp(
                view.lowerBoundMap.value,
                view.upperBoundMap.value,
                1,
                [],
                lower_bound_operands=list(view.lowerBoundOperands),
                upper_bound_operands=list(view.upperBoundOperands),
            )
        with ir.InsertionPoint(loop.body):
            affine.AffineYieldOp([])
        made.append(loop.operation)
        point = ir.InsertionPoint(loop.body.operations[0])
    return made


def reordered(
    nest: ir.Operation, chain: list[ir.Operation], order: list[int]
) -> list[ir.Operation]:
    """The loops of `chain` (`nest`'s, `loop_chain`) rebuilt before `nest` in `order`, with
    every op of their bodies moved into the new innermost one; `nest` is left empty for the
    caller to erase. Returns the new loops, outermost first."""
    ivs = [loop.regions[0].blocks[0].arguments[0] for loop in chain]
    with ir.InsertionPoint(nest):
        loops = empty_loops([chain[k] for k in order])
    # the ops between the loops are pure (loads of primal arrays and seeds, arithmetic): they
    # move into the innermost body, ahead of its own
    terminator = block_ops(loops[-1].regions[0].blocks[0])[-1]
    for loop in chain:
        for op in block_ops(loop.regions[0].blocks[0]):
            if not op.regions and op.name != "affine.yield":
                op.move_before(terminator)
    for k, loop in zip(order, loops, strict=True):
        ivs[k].replace_all_uses_with(loop.regions[0].blocks[0].arguments[0])
    return loops


def fill_with_zeros(array: ir.Value) -> ir.Operation | None:
    """Store 0 in every element of `array` (a loop nest at the insertion point); returns the
    nest's outer loop (None for a 0-d array)."""
    memref_type = ir.MemRefType(array.type)
    element = memref_type.element_type
    zero = arith.ConstantOp(element, ir.FloatAttr.get(element, 0.0)).result
    uppers: list[tuple[ir.AffineMap, list[ir.Value]]] = []
    for k, extent in enumerate(memref_type.shape):
        if ir.ShapedType.is_dynamic_size(extent):
            size = memref.DimOp(array, arith.ConstantOp(ir.IndexType.get(), k).result).result
            uppers.append((ir.AffineMap.get(0, 1, [ir.AffineSymbolExpr.get(0)]), [size]))
        else:
            uppers.append((ir.AffineMap.get(0, 0, [ir.AffineConstantExpr.get(extent)]), []))
    indices: list[ir.Value] = []
    loops: list[ir.Operation] = []
    point = ir.InsertionPoint.current
    for upper, operands in uppers:
        with point:
            loop = affine.AffineForOp(
                ir.AffineMap.get(0, 0, [ir.AffineConstantExpr.get(0)]),
                upper,
                1,
                [],
                lower_bound_operands=[],
                upper_bound_operands=operands,
            )
        with ir.InsertionPoint(loop.body):
            affine.AffineYieldOp([])
        indices.append(loop.induction_variable)
        loops.append(loop.operation)
        point = ir.InsertionPoint(loop.body.operations[0])
    with point:
        if indices:
            affine.AffineStoreOp(zero, array, indices, ir.AffineMap.get_identity(len(indices)))
        else:
            memref.StoreOp(zero, array, [])
    return loops[0] if loops else None


def _dims(expr: ir.AffineExpr) -> list[int]:
    """The positions of the dims in `expr`, left to right."""
    if isinstance(expr, ir.AffineDimExpr):
        return [expr.position]
    if isinstance(expr, ir.AffineBinaryExpr):
        return _dims(expr.lhs) + _dims(expr.rhs)
    return []


def _accesses(op: ir.Operation, first: int) -> list[tuple[ir.AffineExpr | None, list[ir.Value]]]:
    """Each subscript of a load (`first` = 1) or store (2): its expression over `operands`
    (None for a `memref` op's plain index) and those operands."""
    operands = list(op.operands)[first:]
    if not op.name.startswith("affine."):
        return [(None, [value]) for value in operands]
    amap = ir.AffineMapAttr(op.attributes["map"]).value
    return [(e, operands) for e in amap.results]


def _unit_in(expr: ir.AffineExpr | None, operands: list[ir.Value], iv: ir.Value) -> bool:
    """Whether subscript `expr` is `iv + (terms without iv)`."""
    if expr is None:
        return operands[0] == iv
    if isinstance(expr, ir.AffineDimExpr):
        return operands[expr.position] == iv
    if isinstance(expr, ir.AffineAddExpr):
        lhs, rhs = expr.lhs, expr.rhs
        uses = [any(operands[d] == iv for d in _dims(side)) for side in (lhs, rhs)]
        if uses == [True, False]:
            return _unit_in(lhs, operands, iv)
        if uses == [False, True]:
            return _unit_in(rhs, operands, iv)
    return False


def _mentions(expr: ir.AffineExpr | None, operands: list[ir.Value], iv: ir.Value) -> bool:
    if expr is None:
        return operands[0] == iv
    return any(operands[d] == iv for d in _dims(expr))


def _window_vector_loop(
    stores: list[ir.Operation], body: ir.Block, chain: list[ir.Operation]
) -> int | None:
    """Where the store's subscripts add two loops (a window), the loop that moves the last
    subscript of the store and of every other access by one element or not at all (of those,
    the one of most iterations: `w` rather than `kw`); None otherwise."""
    ivs = [loop.regions[0].blocks[0].arguments[0] for loop in chain]
    if len(stores) != 1:
        return None
    subscripts = _accesses(stores[0], 2)
    if not subscripts or not any(
        sum(_mentions(e, ops, iv) for iv in ivs) >= 2 for e, ops in subscripts
    ):
        return None
    reads = [o for o in block_ops(body) if o.name in ("affine.load", "memref.load")]
    last, last_operands = subscripts[-1]
    candidates = []
    for k, iv in enumerate(ivs):
        if not _unit_in(last, last_operands, iv):
            continue
        fits = True
        for read in reads:
            *leading, (tail, tail_operands) = _accesses(read, 1) or [(None, [])]
            if any(_mentions(e, ops, iv) for e, ops in leading) or (
                tail_operands
                and _mentions(tail, tail_operands, iv)
                and not _unit_in(tail, tail_operands, iv)
            ):
                fits = False
                break
        if fits:
            candidates.append(k)
    if not candidates:
        return None
    return max(candidates, key=lambda k: (_iterations(chain[k]), -k))


def _iterations(loop: ir.Operation) -> float:
    """The iterations of a loop with constant bounds; infinity for other bounds."""
    count = constant_trip_count(loop)
    return float("inf") if count is None else float(count)
