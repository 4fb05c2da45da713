"""Reading affine IR back: constants, `affine.apply`s and the constraints of an `affine.if`, for
the stages that reason about what the raised code says."""

from __future__ import annotations

from collections.abc import Sequence

from mlir import ir


class Inexpressible(Exception):
    """An affine expression outside what a linear form or the isl text can say."""


# A subscript as an exact linear form: {value: coefficient} (no zero entries) and a constant.
Linear = tuple[frozenset[tuple[ir.Value, int]], int]


def index_constant(value: ir.Value) -> int | None:
    """The integer of an `index`-typed `arith.constant`, else None."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant":
        return None
    if not isinstance(value.type, ir.IndexType):
        return None
    return int(ir.IntegerAttr(owner.operation.attributes["value"]).value)


def affine_apply_of(value: ir.Value) -> tuple[ir.AffineMap, list[ir.Value]] | None:
    """The map and operands of the `affine.apply` that defines `value`, else None."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "affine.apply":
        return None
    amap = ir.AffineMapAttr(owner.operation.attributes["map"]).value
    return amap, list(owner.operation.operands)


def affine_if_condition(if_op: ir.Operation) -> tuple[list[ir.AffineExpr], list[bool], int]:
    """An `affine.if`'s constraints (`e >= 0`, or `e == 0` where flagged) and its dim count.

    The bindings cannot read the IntegerSet out of an IntegerSetAttr, so this re-reads the
    set's text (`affine_set<(d0)[s0] : (d0 - 1 >= 0, s0 == 0)>`) as the map of its left sides.
    """
    text = str(if_op.attributes["condition"]).strip()
    head, _, body = text[len("affine_set<") : -1].partition(" : ")
    parts = [p.strip() for p in body.strip()[1:-1].split(",")]  # affine exprs have no commas
    if not all(p.endswith((">= 0", "== 0")) for p in parts):
        raise Inexpressible(text)
    lhs = ", ".join(p[:-4].strip() for p in parts)
    amap = ir.AffineMapAttr(ir.Attribute.parse(f"affine_map<{head} -> ({lhs})>")).value
    return list(amap.results), [p.endswith("== 0") for p in parts], amap.n_dims


def substituted(
    expr: ir.AffineExpr, dims: list[ir.AffineExpr], symbols: list[ir.AffineExpr]
) -> ir.AffineExpr:
    """`expr` with its dims and symbols replaced by `dims` and `symbols`."""
    if isinstance(expr, ir.AffineDimExpr):
        return dims[expr.position]
    if isinstance(expr, ir.AffineSymbolExpr):
        return symbols[expr.position]
    if isinstance(expr, ir.AffineConstantExpr):
        return expr
    assert isinstance(expr, ir.AffineBinaryExpr)
    lhs = substituted(expr.lhs, dims, symbols)
    rhs = substituted(expr.rhs, dims, symbols)
    if isinstance(expr, ir.AffineAddExpr):
        return lhs + rhs
    if isinstance(expr, ir.AffineMulExpr):
        return lhs * rhs
    if isinstance(expr, ir.AffineModExpr):
        return lhs % rhs
    if isinstance(expr, ir.AffineFloorDivExpr):
        return ir.AffineExpr.get_floor_div(lhs, rhs)
    return ir.AffineExpr.get_ceil_div(lhs, rhs)


def constant_trip_count(loop: ir.Operation) -> int | None:
    """The iterations of a step-1 `affine.for` with constant single bounds; None otherwise."""
    bounds = []
    for name in ("lowerBoundMap", "upperBoundMap"):
        bound = ir.AffineMapAttr(loop.attributes[name]).value
        if len(bound.results) != 1 or not isinstance(bound.results[0], ir.AffineConstantExpr):
            return None
        bounds.append(ir.AffineConstantExpr(bound.results[0]).value)
    if ir.IntegerAttr(loop.attributes["step"]).value != 1:
        return None
    return max(0, bounds[1] - bounds[0])


def linear_form(expr: ir.AffineExpr, operands: Sequence[ir.Value], n_dims: int) -> Linear:
    """The linear form of `expr` over `operands` (constants and `affine.apply` folded in);
    `Inexpressible` when it has none (a division, a product of two values)."""
    terms: dict[ir.Value, int] = {}
    const = 0

    def add(e: ir.AffineExpr, scale: int) -> None:
        nonlocal const
        if isinstance(e, ir.AffineConstantExpr):
            const += scale * e.value
        elif isinstance(e, ir.AffineDimExpr | ir.AffineSymbolExpr):
            pos = e.position + (n_dims if isinstance(e, ir.AffineSymbolExpr) else 0)
            add_value(operands[pos], scale)
        elif isinstance(e, ir.AffineAddExpr):
            add(e.lhs, scale)
            add(e.rhs, scale)
        elif isinstance(e, ir.AffineMulExpr) and isinstance(e.rhs, ir.AffineConstantExpr):
            add(e.lhs, scale * e.rhs.value)
        elif isinstance(e, ir.AffineMulExpr) and isinstance(e.lhs, ir.AffineConstantExpr):
            add(e.rhs, scale * e.lhs.value)
        else:
            raise Inexpressible(str(e))

    def add_value(value: ir.Value, scale: int) -> None:
        nonlocal const
        constant = index_constant(value)
        applied = affine_apply_of(value)
        if constant is not None:
            const += scale * constant
        elif applied is not None and len(applied[0].results) == 1:
            inner = linear_form(applied[0].results[0], applied[1], applied[0].n_dims)
            for v, c in inner[0]:
                terms[v] = terms.get(v, 0) + scale * c
            const += scale * inner[1]
        else:
            terms[value] = terms.get(value, 0) + scale

    add(expr, 1)
    return frozenset((v, c) for v, c in terms.items() if c != 0), const


# Ops a straight-line loop body may hold besides its loads, stores and terminator.
_PURE_PREFIXES = ("arith.", "math.", "affine.apply", "affine.min", "affine.max")


def straight_line_loops(module: ir.Module) -> list[ir.Operation]:
    """The `affine.for` ops of `module` whose bodies hold only `affine.load`/`affine.store` and
    pure arithmetic: innermost loops, with no call, no region and no other access."""
    loops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "affine.for" and _straight_line(op):
            loops.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return loops


def _straight_line(loop: ir.Operation) -> bool:
    body = loop.regions[0].blocks[0]
    for op in body.operations:
        name = op.operation.name
        if name in ("affine.load", "affine.store", "affine.yield"):
            continue
        if op.operation.regions or not name.startswith(_PURE_PREFIXES):
            return False
    return True


def defined_in_loop_body(value: ir.Value, body: ir.Block) -> bool:
    """Whether `value` is defined in loop body `body`: by one of its ops, or as one of its
    carried values (the loop's own variable, `body`'s first argument, is not)."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return owner == body and value != body.arguments[0]
    return owner.operation.block == body


def for_bounds(
    loop: ir.Operation,
) -> tuple[tuple[ir.AffineMap, list[ir.Value]], tuple[ir.AffineMap, list[ir.Value]]]:
    """The lower and upper bound of `affine.for` `loop`: each its map and the map's operands."""
    segments = list(ir.DenseI32ArrayAttr(loop.attributes["operandSegmentSizes"]))
    operands = list(loop.operands)
    lower = ir.AffineMapAttr(loop.attributes["lowerBoundMap"]).value
    upper = ir.AffineMapAttr(loop.attributes["upperBoundMap"]).value
    return (
        (lower, operands[: segments[0]]),
        (upper, operands[segments[0] : segments[0] + segments[1]]),
    )


def trip_bound(loop: ir.Operation) -> int | None:
    """An upper bound on the iterations of `loop` where some upper bound minus some lower bound
    is a constant (a tile's rows: `max(b, ..)` to `min(b + 16, ..)`); None when unknown."""
    step = ir.IntegerAttr(loop.attributes["step"]).value
    (lb_map, lb_operands), (ub_map, ub_operands) = for_bounds(loop)
    best: int | None = None
    lows = _linear_results(lb_map, lb_operands)
    highs = _linear_results(ub_map, ub_operands)
    for low_terms, low in lows:
        for high_terms, high in highs:
            if low_terms == high_terms:
                trips = max(0, -(-(high - low) // step))
                best = trips if best is None else min(best, trips)
    return best


def _linear_results(amap: ir.AffineMap, operands: list[ir.Value]) -> list[Linear]:
    """The results of bound map `amap` that are linear (a bound's other results only tighten it)."""
    forms = []
    for expr in amap.results:
        try:
            forms.append(linear_form(expr, operands, amap.n_dims))
        except Inexpressible:
            continue
    return forms


def static_row_major(memref_type: ir.Type) -> tuple[list[int], int] | None:
    """The extents and element size of a statically shaped memref in row-major layout."""
    if not isinstance(memref_type, ir.MemRefType):
        return None
    mtype = memref_type
    layout = mtype.layout
    identity = isinstance(layout, ir.AffineMapAttr) and layout.value == ir.AffineMap.get_identity(
        mtype.rank
    )
    if not mtype.has_static_shape or not identity or mtype.rank == 0:
        return None
    element = mtype.element_type
    if isinstance(element, ir.FloatType | ir.IntegerType):
        bits = element.width
    else:
        return None
    return list(mtype.shape), max(1, bits // 8)


def uses_operand(
    expr: ir.AffineExpr, operands: Sequence[ir.Value], n_dims: int, value: ir.Value
) -> bool:
    """Whether affine `expr` (over `operands`: dims then symbols) depends on `value`."""
    return any(_mentions(expr, probe) for probe in positions_of(value, operands, n_dims))


def positions_of(value: ir.Value, operands: Sequence[ir.Value], n_dims: int) -> list[ir.AffineExpr]:
    """The dim or symbol expressions that stand for `value` among a map's `operands`."""
    return [
        ir.AffineDimExpr.get(pos) if pos < n_dims else ir.AffineSymbolExpr.get(pos - n_dims)
        for pos, operand in enumerate(operands)
        if operand == value
    ]


def _mentions(expr: ir.AffineExpr, probe: ir.AffineExpr) -> bool:
    if expr == probe:
        return True
    binary = expr.maybe_downcast()
    if hasattr(binary, "lhs"):
        return _mentions(binary.lhs, probe) or _mentions(binary.rhs, probe)
    return False
