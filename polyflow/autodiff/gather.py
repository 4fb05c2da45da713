"""The copies of a distributed adjoint nest that scatter into one shadow at shifted elements (a
stencil's: `Ā[i][j-1] += c·B̄[i][j]`, `Ā[i][j+1] += c·B̄[i][j]`, ...) merged into one gather
over the shadow's elements: `Ā[y] += c·B̄[y - o₁]; Ā[y] += c·B̄[y - o₂]; ...`, each term where
`y - oₘ` lies in the nest's domain.

Why: each copy is a sweep over the arrays (a five-point stencil's adjoint made ten sweeps per
time step, three times the primal's time); the gather is one sweep that loads the shadow's
element once, adds the terms in a register and stores it once, vectorizable as the primal is.

Exactness: every element receives the same terms in the same order as from the copies run one
after the other (copy m's term before copy m+1's), so the sums are bit for bit those of the
distributed copies. Legal because a copy reads only arrays no copy writes (checked), so no term
depends on when another is added.

Borders: the domain of term m is the nest's box shifted by oₘ. When the box is at least as wide
as the offsets spread in every dimension (tested once, at run time), each dimension runs the
elements where every term applies in a loop and peels those below and above it one by one,
each with the terms known to reach it: no test per element. Otherwise every element tests each
term's domain (`affine.if`).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import affine, arith

from polyflow.ir.affine import substituted
from polyflow.ir.aliasing import view_root
from polyflow.ir.ops import block_ops, remap_operands

from .contraction import defined_outside, loop_chain

# the most innermost pieces (a 3-D seven-point stencil's gather has 125) before the copies are
# left as they are instead
_MAX_LEAVES = 256
_PURE_OR_LOAD = ("arith.", "math.", "affine.apply", "affine.load", "affine.store", "memref.load")


@dataclass
class _Term:
    """One copy: its loops, the (loop position, offset) of each shadow subscript, and the ops
    that compute its term (innermost body less the shadow's load, add and store)."""

    loops: list[ir.Operation]
    subscripts: list[tuple[int, int]]
    ops: list[ir.Operation]
    term: ir.Value  # the value added to the shadow's element


def merge_scatters(copies: list[ir.Operation], shadow: ir.Value) -> ir.Operation | None:
    """Replace `copies` (loop nests in one block, in order, each adding one term to `shadow`)
    by one gather nest after the last of them, when the module docstring's form holds; returns
    its first op, or None leaving the copies as they are."""
    if len(copies) < 2:
        return None
    terms = [_term(copy, shadow) for copy in copies]
    if any(t is None for t in terms):
        return None
    found = [t for t in terms if t is not None]
    first = found[0]
    if any(
        [p for p, _ in t.subscripts] != [p for p, _ in first.subscripts]
        or not all(_same_bounds(a, b) for a, b in zip(t.loops, first.loops, strict=True))
        for t in found
    ):
        return None
    written = view_root(shadow)
    for t in found:  # a term may not read what the gather writes
        for op in t.ops:
            if op.name in ("affine.load", "memref.load") and view_root(op.operands[0]) == written:
                return None
    bounds = _Bounds([first.loops[p] for p, _ in first.subscripts])
    if bounds.failed:
        return None
    if _leaves(found, len(bounds.lower)) > _MAX_LEAVES:
        return None
    anchor = copies[-1]
    with ir.InsertionPoint.after(anchor), anchor.location:
        roomy = affine.AffineIfOp(
            _roomy(found, bounds), cond_operands=bounds.operands, has_else=True
        )
        with ir.InsertionPoint(roomy.then_block):
            _peeled(found, shadow, bounds, 0, [])
            affine.AffineYieldOp([])
        with ir.InsertionPoint(roomy.else_block):
            _guarded(found, shadow, bounds, 0, [])
            affine.AffineYieldOp([])
    ops = block_ops(anchor.block)
    gather = ops[next(k for k, op in enumerate(ops) if op == anchor) + 1]
    for copy in copies:
        copy.erase()
    return gather


def _term(copy: ir.Operation, shadow: ir.Value) -> _Term | None:
    """`copy` read as one term added to `shadow` at a shifted element of its loops, or None."""
    if copy.name != "affine.for":
        return None
    loops = loop_chain(copy)
    if loops is None:
        return None
    ivs = [loop.regions[0].blocks[0].arguments[0] for loop in loops]
    for loop in loops:
        if not all(defined_outside(v, copy) for v in loop.operands):
            return None
    for loop in loops[:-1]:  # values computed between the loops are not cloned with the term
        if len(block_ops(loop.regions[0].blocks[0])) != 2:
            return None
    body = block_ops(loops[-1].regions[0].blocks[0])[:-1]
    if any(op.regions or not op.name.startswith(_PURE_OR_LOAD) for op in body):
        return None
    stores = [op for op in body if op.name in ("affine.store", "memref.store")]
    if len(stores) != 1 or stores[0].name != "affine.store" or stores[0].operands[1] != shadow:
        return None
    store = stores[0]
    total = _defining(store.operands[0])
    if total is None or total.name != "arith.addf":
        return None
    loads = [
        op
        for op in map(_defining, total.operands)
        if op is not None and op.name == "affine.load" and op.operands[0] == shadow
    ]
    if len(loads) != 1:
        return None
    load = loads[0]
    if (
        str(load.attributes["map"]) != str(store.attributes["map"])
        or list(load.operands)[1:] != list(store.operands)[2:]
    ):
        return None
    if len(list(load.results[0].uses)) != 1 or len(list(total.results[0].uses)) != 1:
        return None
    term = next(o for o in total.operands if o != load.results[0])
    amap = ir.AffineMapAttr(store.attributes["map"]).value
    operands = list(store.operands)[2:]
    subscripts = []
    for expr in amap.results:
        found = _dim_plus_constant(expr)
        if found is None:
            return None
        dim, offset = found
        if dim >= amap.n_dims or operands[dim] not in ivs:
            return None
        subscripts.append((ivs.index(operands[dim]), offset))
    if sorted(p for p, _ in subscripts) != list(range(len(loops))):
        return None  # each loop indexes one subscript of the shadow
    ops = [op for op in body if op not in (load, total, store)]
    return _Term(loops, subscripts, ops, term)


def _defining(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def _dim_plus_constant(expr: ir.AffineExpr) -> tuple[int, int] | None:
    if isinstance(expr, ir.AffineDimExpr):
        return expr.position, 0
    if isinstance(expr, ir.AffineAddExpr):
        lhs, rhs = expr.lhs, expr.rhs
        if isinstance(lhs, ir.AffineConstantExpr):
            lhs, rhs = rhs, lhs
        if isinstance(lhs, ir.AffineDimExpr) and isinstance(rhs, ir.AffineConstantExpr):
            return lhs.position, ir.AffineConstantExpr(rhs).value
    return None


def _same_bounds(a: ir.Operation, b: ir.Operation) -> bool:
    return all(
        str(a.attributes[name]) == str(b.attributes[name])
        for name in ("lowerBoundMap", "upperBoundMap")
    ) and list(a.operands) == list(b.operands)


class _Bounds:
    """The loops' single-result bounds as expressions over one list of operands (dims, then
    symbols), so that shifted and combined bounds are maps of their own."""

    def __init__(self, loops: list[ir.Operation]) -> None:
        self.dims: list[ir.Value] = []
        self.symbols: list[ir.Value] = []
        self.lower: list[ir.AffineExpr] = []
        self.upper: list[ir.AffineExpr] = []  # exclusive
        self.failed = False
        for loop in loops:
            view = loop.opview
            for bound_map, operands, out in (
                (view.lowerBoundMap.value, list(view.lowerBoundOperands), self.lower),
                (view.upperBoundMap.value, list(view.upperBoundOperands), self.upper),
            ):
                if len(bound_map.results) != 1:
                    self.failed = True
                    return
                dims = [self._dim(v) for v in operands[: bound_map.n_dims]]
                symbols = [self._symbol(v) for v in operands[bound_map.n_dims :]]
                out.append(substituted(bound_map.results[0], dims, symbols))

    def _dim(self, value: ir.Value) -> ir.AffineExpr:
        if value not in self.dims:
            self.dims.append(value)
        return ir.AffineDimExpr.get(self.dims.index(value))

    def _symbol(self, value: ir.Value) -> ir.AffineExpr:
        if value not in self.symbols:
            self.symbols.append(value)
        return ir.AffineSymbolExpr.get(self.symbols.index(value))

    def map(self, exprs: list[ir.AffineExpr]) -> ir.AffineMap:
        return ir.AffineMap.get(len(self.dims), len(self.symbols), exprs)

    @property
    def operands(self) -> list[ir.Value]:
        return [*self.dims, *self.symbols]


def _loop(
    bounds: _Bounds, lower: list[ir.AffineExpr], upper: list[ir.AffineExpr]
) -> affine.AffineForOp:
    """A loop from the max of `lower` to the min of `upper` (exclusive), at the insertion
    point, with its yield."""
    loop = affine.AffineForOp(
        bounds.map(lower),
        bounds.map(upper),
        1,
        [],
        lower_bound_operands=bounds.operands,
        upper_bound_operands=bounds.operands,
    )
    with ir.InsertionPoint(loop.body):
        affine.AffineYieldOp([])
    return loop


def _leaves(terms: list[_Term], rank: int) -> int:
    """How many innermost pieces the peeled gather has: per dimension, each offset spread
    (highest - lowest) gives that many peeled elements at each end, around the interior."""
    count = 1
    for d in range(rank):
        offsets = [t.subscripts[d][1] for t in terms]
        count *= 2 * (max(offsets) - min(offsets)) + 1
    return count


def _roomy(terms: list[_Term], bounds: _Bounds) -> ir.IntegerSet:
    """{ the box holds, in every dimension, at least as many elements as the terms' offsets
    spread }: then each element's terms are known from where it lies (`_peeled`)."""
    constraints = []
    for d in range(len(bounds.lower)):
        offsets = [t.subscripts[d][1] for t in terms]
        spread = ir.AffineConstantExpr.get(max(offsets) - min(offsets))
        constraints.append(bounds.upper[d] - bounds.lower[d] - spread)
    return ir.IntegerSet.get(
        len(bounds.dims), len(bounds.symbols), constraints, [False] * len(constraints)
    )


def _at(bounds: _Bounds, expr: ir.AffineExpr) -> ir.Value:
    return affine.AffineApplyOp(bounds.map([expr]), bounds.operands).result


def _peeled(
    terms: list[_Term], shadow: ir.Value, bounds: _Bounds, d: int, ys: list[ir.Value]
) -> None:
    """The gather over dimension `d` and inward, for a box roomy enough (`_roomy`): the
    elements where every one of `terms` applies in a loop, and those below and above it one by
    one, each with the terms that reach it (none tested at run time)."""
    if d == len(bounds.lower):
        _element(terms, shadow, ys)
        return
    offsets = [t.subscripts[d][1] for t in terms]
    low, high = min(offsets), max(offsets)
    lower, upper = bounds.lower[d], bounds.upper[d]
    const = ir.AffineConstantExpr.get
    for k in range(high - low):  # y = lower + low + k: the terms whose x = y - offset >= lower
        reaching = [t for t, o in zip(terms, offsets, strict=True) if o <= low + k]
        _peeled(reaching, shadow, bounds, d + 1, [*ys, _at(bounds, lower + const(low + k))])
    loop = _loop(bounds, [lower + const(high)], [upper + const(low)])
    with ir.InsertionPoint(loop.body.operations[0]):
        _peeled(terms, shadow, bounds, d + 1, [*ys, loop.induction_variable])
    for k in range(high - low):  # y = upper + low + k: those whose x < upper
        reaching = [t for t, o in zip(terms, offsets, strict=True) if o > low + k]
        _peeled(reaching, shadow, bounds, d + 1, [*ys, _at(bounds, upper + const(low + k))])


def _guarded(
    terms: list[_Term], shadow: ir.Value, bounds: _Bounds, d: int, ys: list[ir.Value]
) -> None:
    """The gather over dimension `d` and inward for any box: every element where a term may
    apply, each term under a test of its domain."""
    rank = len(bounds.lower)
    if d == rank:
        element = ir.MemRefType(shadow.type).element_type
        identity = ir.AffineMap.get_identity(rank)
        for term in terms:
            branch = affine.AffineIfOp(
                _domain(term, bounds, rank), cond_operands=[*ys, *bounds.operands]
            )
            with ir.InsertionPoint(branch.then_block):
                value = _clone_term(term, ys)
                current = affine.AffineLoadOp(element, shadow, ys, identity).result
                affine.AffineStoreOp(arith.AddFOp(current, value).result, shadow, ys, identity)
                affine.AffineYieldOp([])
        return
    offsets = [t.subscripts[d][1] for t in terms]
    const = ir.AffineConstantExpr.get
    loop = _loop(
        bounds, [bounds.lower[d] + const(min(offsets))], [bounds.upper[d] + const(max(offsets))]
    )
    with ir.InsertionPoint(loop.body.operations[0]):
        _guarded(terms, shadow, bounds, d + 1, [*ys, loop.induction_variable])


def _element(terms: list[_Term], shadow: ir.Value, ys: list[ir.Value]) -> None:
    """At shadow element `ys`: its terms, in order, summed in a register between one load and
    one store of the element."""
    if not terms:
        return
    identity = ir.AffineMap.get_identity(len(ys))
    element = ir.MemRefType(shadow.type).element_type
    total = affine.AffineLoadOp(element, shadow, ys, identity).result
    for term in terms:
        total = arith.AddFOp(total, _clone_term(term, ys)).result
    affine.AffineStoreOp(total, shadow, ys, identity)


def _domain(term: _Term, bounds: _Bounds, rank: int) -> ir.IntegerSet:
    """{ y : y - offset in the nest's box }, over (y..., the bounds' dims) and their symbols."""
    shift_dims = [ir.AffineDimExpr.get(rank + k) for k in range(len(bounds.dims))]
    symbols = [ir.AffineSymbolExpr.get(k) for k in range(len(bounds.symbols))]
    constraints = []
    for d, (_, offset) in enumerate(term.subscripts):
        x = ir.AffineDimExpr.get(d) - ir.AffineConstantExpr.get(offset)
        lower = substituted(bounds.lower[d], shift_dims, symbols)
        upper = substituted(bounds.upper[d], shift_dims, symbols)
        constraints += [x - lower, upper - x - ir.AffineConstantExpr.get(1)]
    return ir.IntegerSet.get(
        rank + len(bounds.dims), len(bounds.symbols), constraints, [False] * len(constraints)
    )


def _clone_term(term: _Term, ys: list[ir.Value]) -> ir.Value:
    """The term's ops cloned at the insertion point for shadow element `ys`: each loop's
    variable is the element's subscript less the offset."""
    ivs = [loop.regions[0].blocks[0].arguments[0] for loop in term.loops]
    mapping: dict[ir.Value, ir.Value] = {}
    for d, (position, offset) in enumerate(term.subscripts):
        if offset == 0:
            mapping[ivs[position]] = ys[d]
        else:
            shift = ir.AffineMap.get(1, 0, [ir.AffineDimExpr.get(0) - offset])
            mapping[ivs[position]] = affine.AffineApplyOp(shift, [ys[d]]).result
    for op in term.ops:
        copy = op.clone()
        remap_operands([copy], mapping)
        for old, new in zip(op.results, copy.results, strict=True):
            mapping[old] = new
    return mapping.get(term.term, term.term)


__all__ = ["merge_scatters"]
