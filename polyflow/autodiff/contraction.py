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
from mlir.dialects import affine

from polyflow.ir.ops import block_ops, walk

_STORES = ("affine.store", "memref.store")


def _chain(nest: ir.Operation) -> list[ir.Operation] | None:
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


def _defined_outside(value: ir.Value, nest: ir.Operation) -> bool:
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
    chain = _chain(nest)
    if chain is None or len(chain) < 2:
        return nest
    ivs = [loop.regions[0].blocks[0].arguments[0] for loop in chain]
    for loop in chain:  # rectangular: bounds from outside the nest
        if not all(_defined_outside(v, nest) for v in loop.operands):
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
    if order == list(range(len(chain))):
        return nest
    # the ops between the loops are pure (loads of primal arrays and seeds, arithmetic): they
    # move into the innermost body, ahead of its own
    loops: list[affine.AffineForOp] = []
    point = ir.InsertionPoint(nest)
    for k in order:
        old = chain[k].opview
        with point:
            loop = affine.AffineForOp(
                old.lowerBoundMap.value,
                old.upperBoundMap.value,
                1,
                [],
                lower_bound_operands=list(old.lowerBoundOperands),
                upper_bound_operands=list(old.upperBoundOperands),
            )
        loops.append(loop)
        point = ir.InsertionPoint(loop.body)
    for loop in loops:
        with ir.InsertionPoint(loop.body):
            affine.AffineYieldOp([])
    terminator = loops[-1].body.operations[0]
    for loop in chain:
        for op in block_ops(loop.regions[0].blocks[0]):
            if not op.regions and op.name != "affine.yield":
                op.move_before(terminator)
    for k, loop in zip(order, loops, strict=True):
        ivs[k].replace_all_uses_with(loop.induction_variable)
    nest.erase()
    return loops[0].operation


def _dims(expr: ir.AffineExpr) -> list[int]:
    """The positions of the dims in `expr`, left to right."""
    if isinstance(expr, ir.AffineDimExpr):
        return [expr.position]
    if isinstance(expr, ir.AffineBinaryExpr):
        return _dims(expr.lhs) + _dims(expr.rhs)
    return []
