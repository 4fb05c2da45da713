"""A contraction copy of the adjoint (contraction.py) whose shadow's last subscript runs over a
few elements only (a filter's window: `W̄[f,c,kh,kw] += Σ Ō[n,f,h,w]·I[n,c,h+kh,w+kw]`) made to
accumulate into a transposed temporary whose last subscript is a long loop:
`T[kh,kw,c,f] += Ō[n,f,h,w]·I[n,c,h+kh,w+kw]` with the loops ordered (kh, kw, n, h | c, f, w),
then `W̄[f,c,kh,kw] += T[kh,kw,c,f]`.

Why: the filter's gradient is a sum over (n, h, w) per element; with the element innermost it is
a chain of dependent adds (a convolution's filter gradient ran 7x its primal). Transposed, the
three innermost loops (c, f, w) are a matrix product per (kh, kw, n, h) that the scheduler's
micro-kernels run in register blocks, vectorized along f.

A shadow whose last subscript already runs a long loop but whose sum runs over several loops
(`means̄[k,b] -= Σ_i Σ_a L[k,a,b]·q̄[i,k,a]`, GMM's once its centred points are recomputed) needs
no temporary: its loops are ordered (other loops | u, v, r) the same way, the micro-kernel taking
(k, b, i) per a.

The temporary is summed in the order of its loops and added to the shadow once: the copy's
iterations commute (contraction.py), so only the rounding order of each sum changes. The
accumulating nest keeps its loop order (`KEEP_ORDER_ATTR`): isl, which puts a nest's reduction
loops innermost, would give the chain back.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import affine, arith, memref

from polyflow.ir.affine import constant_trip_count
from polyflow.ir.names import KEEP_ORDER_ATTR, REGION_START_ATTR
from polyflow.ir.ops import block_ops, walk

from .contraction import defined_outside, empty_loops, fill_with_zeros, loop_chain, reordered

# a last subscript over at most this many elements makes a poor vector loop (a 3x3 window's)
_SHORT = 4
# and a long loop is one of at least this many
_LONG = 16
_STORES = ("affine.store", "memref.store")
_LOADS = ("affine.load", "memref.load")


def accumulate_transposed(nest: ir.Operation, shadow: ir.Value) -> ir.Operation:
    """`nest` (a perfect chain, the loops indexing `shadow` outermost, as contraction.py makes
    it) rebuilt as the module docstring says, when its form allows; returns the first op of the
    rebuilt code, or `nest` unchanged."""
    plan = _plan(nest, shadow)
    if plan is None:
        return nest
    chain, positions, order, perm = plan
    if perm is None:
        return _reorder(nest, chain, order)
    shadow_type = ir.MemRefType(shadow.type)
    element = shadow_type.element_type
    shape = [shadow_type.shape[k] for k in perm]
    innermost = chain[-1].regions[0].blocks[0]
    store = next(o for o in block_ops(innermost) if o.name == "affine.store")
    load = next(
        o for o in block_ops(innermost) if o.name == "affine.load" and o.operands[0] == shadow
    )
    access = ir.AffineMapAttr(store.attributes["map"]).value
    permuted = ir.AffineMap.get(access.n_dims, access.n_symbols, [access.results[k] for k in perm])
    with ir.InsertionPoint(nest), nest.location:
        temporary = memref.AllocOp(ir.MemRefType.get(shape, element), [], []).result
        zeroing = fill_with_zeros(temporary)
        assert zeroing is not None  # the temporary has the shadow's rank, at least 2
        zeroing.attributes[REGION_START_ATTR] = ir.UnitAttr.get()
        loops = reordered(nest, chain, order)
        loops[0].attributes[KEEP_ORDER_ATTR] = ir.UnitAttr.get()
        with ir.InsertionPoint(load):
            new_load = affine.AffineLoadOp(
                element, temporary, list(load.operands)[1:], permuted
            ).result
        load.results[0].replace_all_uses_with(new_load)
        load.erase()
        with ir.InsertionPoint(store):
            affine.AffineStoreOp(store.operands[0], temporary, list(store.operands)[2:], permuted)
        store.erase()
        # W̄[x] += T[perm x], over the shadow's loops in the order of its subscripts
        adds = empty_loops([chain[p] for p in positions])
        adds[0].attributes[REGION_START_ATTR] = ir.UnitAttr.get()
        point = block_ops(adds[-1].regions[0].blocks[0])[-1]
        with ir.InsertionPoint(point):
            xs = [loop.regions[0].blocks[0].arguments[0] for loop in adds]
            identity = ir.AffineMap.get_identity(len(xs))
            current = affine.AffineLoadOp(element, shadow, xs, identity).result
            partial = affine.AffineLoadOp(element, temporary, [xs[k] for k in perm], identity)
            affine.AffineStoreOp(arith.AddFOp(current, partial.result).result, shadow, xs, identity)
        memref.DeallocOp(temporary)
    first = temporary.owner.operation
    nest.erase()
    return first


def _reorder(nest: ir.Operation, chain: list[ir.Operation], order: list[int]) -> ir.Operation:
    """`nest` with its loops in `order`, kept so (`_reordered`); returns the new outer loop."""
    with nest.location:
        loops = reordered(nest, chain, order)
    loops[0].attributes[KEEP_ORDER_ATTR] = ir.UnitAttr.get()
    nest.erase()
    return loops[0]


def _plan(
    nest: ir.Operation, shadow: ir.Value
) -> tuple[list[ir.Operation], list[int], list[int], list[int] | None] | None:
    """(the chain of loops, the loop of each shadow subscript, the new loop order, the shadow's
    dimensions in the temporary's order, None for no temporary), or None where the module
    docstring's form does not hold."""
    chain = loop_chain(nest)
    if chain is None or len(chain) < 4:
        return None
    shadow_type = ir.MemRefType(shadow.type)
    if not shadow_type.has_static_shape or not isinstance(shadow_type.layout, ir.AffineMapAttr):
        return None
    if shadow_type.layout.value != ir.AffineMap.get_identity(shadow_type.rank):
        return None
    ivs = [loop.regions[0].blocks[0].arguments[0] for loop in chain]
    if not all(defined_outside(v, nest) for loop in chain for v in loop.operands):
        return None
    ops = [o for o in walk(nest) if o not in chain]
    stores = [o for o in ops if o.name in _STORES]
    innermost = block_ops(chain[-1].regions[0].blocks[0])
    if len(stores) != 1 or stores[0].name != "affine.store" or stores[0].operands[1] != shadow:
        return None
    store = stores[0]
    if store not in innermost or any(o.regions for o in innermost):
        return None
    accumulated = [o for o in ops if o.name in _LOADS and o.operands[0] == shadow]
    if len(accumulated) != 1 or accumulated[0].name != "affine.load":
        return None
    if (
        str(accumulated[0].attributes["map"]) != str(store.attributes["map"])
        or list(accumulated[0].operands)[1:] != list(store.operands)[2:]
    ):
        return None
    positions = _subscript_loops(store, ivs, first=2)
    if positions is None or len(set(positions)) != len(positions):
        return None
    trips = [constant_trip_count(loop) for loop in chain]
    last = positions[-1]
    reductions = [k for k in range(len(chain)) if k not in positions]
    short = trips[last]
    if short is not None and short >= _LONG and len(reductions) >= 2:
        return _reordered(chain, positions, trips, reductions)
    if short is None or short > _SHORT:
        return None
    leading = [p for p in positions[:-1] if trips[p] is not None]
    if not leading:
        return None
    v = max(leading, key=lambda p: trips[p] or 0)
    if (trips[v] or 0) < _LONG:
        return None
    others = [p for p in positions if p not in (v, last)]
    if not others:
        return None
    u = max(others, key=lambda p: (trips[p] or 0, -p))
    reads = [o for o in ops if o.name in _LOADS and o.operands[0] != shadow]
    candidates = [k for k in reductions if _unit_stride_in_reads(reads, ivs[k])]
    if not candidates:
        return None
    r = max(candidates, key=lambda k: (trips[k] or 0, -k))
    outer = [p for p in positions if p not in (u, v)] + [k for k in reductions if k != r]
    order = [*outer, u, v, r]
    perm = [k for k in range(len(positions)) if positions[k] != v]
    perm.append(positions.index(v))
    return chain, positions, order, perm


def _reordered(
    chain: list[ir.Operation], positions: list[int], trips: list[int | None], reductions: list[int]
) -> tuple[list[ir.Operation], list[int], list[int], list[int] | None] | None:
    """The plan for a shadow whose last subscript runs a long loop (v) but whose sum runs
    over several loops (`means̄[k,b] -= Σ_i Σ_a L[k,a,b]·q̄[i,k,a]`): no temporary, the loops
    ordered (other shadow loops, reductions but the longest | u, v, the longest reduction),
    each (u, v) block summed over one loop, in registers."""
    v = positions[-1]
    others = [p for p in positions[:-1] if (trips[p] or 0) >= 2]
    if not others:
        return None
    u = max(others, key=lambda p: (trips[p] or 0, -p))
    r = max(reductions, key=lambda k: (trips[k] or 0, -k))
    outer = [p for p in positions if p not in (u, v)] + [k for k in reductions if k != r]
    return chain, positions, [*outer, u, v, r], None


def _subscript_loops(op: ir.Operation, ivs: list[ir.Value], first: int) -> list[int] | None:
    """The loop of each subscript of `op` when each is a plain loop variable; else None."""
    amap = ir.AffineMapAttr(op.attributes["map"]).value
    operands = list(op.operands)[first:]
    loops = []
    for expr in amap.results:
        if not isinstance(expr, ir.AffineDimExpr) or operands[expr.position] not in ivs:
            return None
        loops.append(ivs.index(operands[expr.position]))
    return loops


def _unit_stride_in_reads(reads: list[ir.Operation], iv: ir.Value) -> bool:
    """Whether `iv` moves some read by one element and every read by one element or none:
    it appears only in last subscripts, as `iv + (terms without it)`."""
    moved = False
    for read in reads:
        if read.name != "affine.load":
            return False
        amap = ir.AffineMapAttr(read.attributes["map"]).value
        operands = list(read.operands)[1:]
        dims = [k for k, o in enumerate(operands) if o == iv and k < amap.n_dims]
        if not dims:
            continue
        *leading, last = amap.results
        if any(_uses(e, dims) for e in leading):
            return False
        if not _unit(last, dims):
            return False
        moved = True
    return moved


def _uses(expr: ir.AffineExpr, dims: list[int]) -> bool:
    if isinstance(expr, ir.AffineDimExpr):
        return expr.position in dims
    if isinstance(expr, ir.AffineBinaryExpr):
        return _uses(expr.lhs, dims) or _uses(expr.rhs, dims)
    return False


def _unit(expr: ir.AffineExpr, dims: list[int]) -> bool:
    """Whether `expr` is one of `dims` plus terms that use none of them."""
    if isinstance(expr, ir.AffineDimExpr):
        return expr.position in dims
    if isinstance(expr, ir.AffineAddExpr):
        lhs, rhs = expr.lhs, expr.rhs
        if _uses(lhs, dims) and not _uses(rhs, dims):
            return _unit(lhs, dims)
        if _uses(rhs, dims) and not _uses(lhs, dims):
            return _unit(rhs, dims)
    return False


__all__ = ["accumulate_transposed"]
