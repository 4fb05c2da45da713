"""schedule-micro-kernels: a three-deep nest that accumulates into one array element per (u, v)
over a loop r (`C[i][j] += A[i][k] * B[k][j]`, and every such nest) → register-tiled vector
code: MR rows × NR vectors of the element are kept in registers across the whole r loop.

Why: after tiling, LLVM vectorizes the innermost loop of gemm but loads and stores C in every
iteration of k and keeps one accumulator; the FMA units then idle on the store-to-load chain
(TC matmul 1024³: 4.2 GFLOP/s on 2 threads, 36x slower than NumPy's OpenBLAS). A BLIS-style
micro-kernel keeps MR*NR vector accumulators live, loads each vector of B once per k for MR
rows and broadcasts each element of A once per k for NR vectors: 81 GFLOP/s, 1.6x NumPy. The
panel copy of B removes the cache-set conflicts of a power-of-two row stride (1024 floats).

What is rewritten: three nested loops u, v, r (any order; the outermost may be a
one-dimensional `affine.parallel` if it is u, which then stays parallel as an `scf.parallel`),
step 1, bounds that do not use each other's induction variables, in one of two forms:
- a perfect nest whose innermost body holds loads, stores, floating-point arithmetic and
  guards (`affine.if` without else) around the same kinds of ops, X[u][v] updated in place;
- (u, v, r) where r is innermost and carries a register sum (`iter_args`) that v's body
  initializes from X[u][v] and stores back, with guarded code before and after it (a TC
  layer's bias and ReLU) and only loads and arithmetic inside;
such that
- every store writes array X at one access f(u, v) (map and operands) that does not use r
  and names u in one subscript (`u + e`) and v in the last one (`v + e`, unit stride), e free
  of u, v and r; every load of X reads exactly there;
- any other array is only read (and may not alias X); a read that varies with v but not u is
  copied into a panel when the r loop runs it unconditionally (any subscripts, so `W[v][r]`
  too), and must otherwise use v only in its last subscript, as `v + e`;
- guards do not test u or v.
The loops u and v then carry nothing (each (u, v) owns its element) and r's order is kept per
element, so running (u, v) blocks in any order, each over all of r, computes the same values,
bit for bit up to the `contract` of a multiply-add.

The nest becomes: panels (heap, per nest instance, laid out [column block][r][NR·W]), then
blocks of MR × (NR·W) elements (W lanes per vector), with scalar edges for the rows and
columns left over, each block loading its accumulators, running the r loop with them as
loop-carried values, and storing them. A guard becomes an `scf.if` yielding them; the one
guard that tests r (the `+=!` initialization fused into the first r) instead cuts the r loop
into the parts before, at and after the iterations where it can hold.

Options: `vector_bits` (the register width, 256 for AVX2), `rows` (MR) and `vectors` (NR);
`contract` marks the new multiplies and adds `contract` so the backend fuses them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from mlir import ir
from mlir.dialects import arith, scf, vector

from polyflow.ir.affine import affine_if_condition
from polyflow.ir.aliasing import may_alias
from polyflow.ir.ops import block_ops
from polyflow.ir.remarks import attach_remarks, remark_at
from polyflow.report import Remark

_ELEMENTWISE = frozenset(
    {
        "arith.addf",
        "arith.subf",
        "arith.mulf",
        "arith.divf",
        "arith.negf",
        "arith.maximumf",
        "arith.minimumf",
        "arith.maxnumf",
        "arith.minnumf",
        "math.absf",
        "math.sqrt",
        "math.fma",
        # ReLU written as a comparison and a choice (`y > 0 ? y : 0`)
        "arith.cmpf",
        "arith.select",
    }
)
_CONTRACTING = frozenset({"arith.addf", "arith.subf", "arith.mulf"})


def _pair_map() -> ir.AffineMap:
    return ir.AffineMap.get(2, 0, [ir.AffineDimExpr.get(0), ir.AffineDimExpr.get(1)])


@dataclass
class Contraction:
    """A nest `match_contraction` accepted: its three loops by role, the target array X and
    the canonical access to it, and the element type."""

    outer: ir.Operation  # the outermost of the three loops: the rewrite replaces it
    u: ir.Operation
    v: ir.Operation
    r: ir.Operation
    target: ir.Value
    access_map: ir.AffineMap
    access_operands: list[ir.Value]
    element: ir.Type
    body: list[ir.Operation] = field(default_factory=list)  # the r loop's ops, no terminator
    # Loads of the innermost body that vary with v and r but not u (B[k][j], or W[j][k]):
    # each vector block reads them from a panel, a copy laid out [column block][r][lanes].
    panels: list[ir.Operation] = field(default_factory=list)
    # The (u, v, r) form: r carries the sum in a register (`iter_args`); `prologue` and
    # `epilogue` are the ops around it in v's body. None: the perfect nest, X updated in place.
    reduction: ir.Operation | None = None
    prologue: list[ir.Operation] = field(default_factory=list)
    epilogue: list[ir.Operation] = field(default_factory=list)


def _iv(loop: ir.Operation) -> ir.Value:
    return loop.regions[0].blocks[0].arguments[0]


def _map_attr(op: ir.Operation) -> ir.AffineMap:
    return ir.AffineMapAttr(op.attributes["map"]).value


def _access(op: ir.Operation) -> tuple[ir.Value, ir.AffineMap, list[ir.Value]]:
    """(memref, map, map operands) of an affine.load or affine.store."""
    if op.name == "affine.load":
        return op.operands[0], _map_attr(op), list(op.operands[1:])
    return op.operands[1], _map_attr(op), list(op.operands[2:])


def _uses_operand(
    expr: ir.AffineExpr, operands: Sequence[ir.Value], n_dims: int, value: ir.Value
) -> bool:
    """Whether affine `expr` (over `operands`: dims then symbols) depends on `value`."""
    return any(_mentions(expr, probe) for probe in _positions_of(value, operands, n_dims))


def _positions_of(
    value: ir.Value, operands: Sequence[ir.Value], n_dims: int
) -> list[ir.AffineExpr]:
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


def _is_unit_plus_rest(
    expr: ir.AffineExpr, operands: Sequence[ir.Value], n_dims: int, value: ir.Value
) -> bool:
    """Whether `expr` is `value + e` with e free of `value`."""
    bound = _bound_on(expr, operands, n_dims, value)
    return bound is not None and bound[0] == 1


def _perfect_child(loop: ir.Operation) -> ir.Operation | None:
    ops = block_ops(loop.regions[0].blocks[0])
    if len(ops) == 2 and ops[0].name == "affine.for":
        return ops[0]
    return None


def _is_perfect_child(loop: ir.Operation, child: ir.Operation) -> bool:
    found = _perfect_child(loop)
    return found is not None and found == child


def _step_one(loop: ir.Operation) -> bool:
    if loop.name == "affine.parallel":
        return [ir.IntegerAttr(s).value for s in ir.ArrayAttr(loop.attributes["steps"])] == [1]
    return ir.IntegerAttr(loop.attributes["step"]).value == 1


def _simple_parallel(loop: ir.Operation) -> bool:
    """A one-dimensional `affine.parallel` without reductions, one map result per bound."""
    if len(loop.regions[0].blocks[0].arguments) != 1 or len(loop.results) > 0:
        return False
    lower = ir.AffineMapAttr(loop.attributes["lowerBoundsMap"]).value
    upper = ir.AffineMapAttr(loop.attributes["upperBoundsMap"]).value
    return len(lower.results) == 1 and len(upper.results) == 1


def _bound_maps(
    loop: ir.Operation,
) -> tuple[ir.AffineMap, list[ir.Value], ir.AffineMap, list[ir.Value]]:
    """(lower map, its operands, upper map, its operands) of an affine.for or a simple
    affine.parallel; an affine.for's lower bound is the max of its results, the upper the min."""
    suffix = "sMap" if loop.name == "affine.parallel" else "Map"
    lower = ir.AffineMapAttr(loop.attributes[f"lowerBound{suffix}"]).value
    upper = ir.AffineMapAttr(loop.attributes[f"upperBound{suffix}"]).value
    operands = list(loop.operands)  # lower bound's, upper bound's, then iter_args inits
    n_lower = lower.n_inputs
    return lower, operands[:n_lower], upper, operands[n_lower : n_lower + upper.n_inputs]


def _defined_in(value: ir.Value, op: ir.Operation) -> bool:
    """Whether `value` is defined inside `op` (by an op in it, or as one of its block's
    arguments): the rewrite computes all bounds before the nest."""
    owner = value.owner
    current: Any = owner.owner if isinstance(owner, ir.Block) else owner
    while current is not None:
        current = current.operation if isinstance(current, ir.OpView) else current
        if current == op:
            return True
        current = current.parent
    return False


def match_contraction(inner: ir.Operation, fn: ir.Operation) -> Contraction | str:
    """The contraction `inner` (an innermost `affine.for`) is the r loop of, or why not."""
    mid = inner.parent
    outer = mid.parent if mid is not None else None
    if mid is None or outer is None or mid.name != "affine.for":
        return "not three nested affine.for loops"
    if outer.name != "affine.for" and not (
        outer.name == "affine.parallel" and _simple_parallel(outer)
    ):
        return "not three nested affine.for loops"
    if not _is_perfect_child(outer, mid):
        return "not a perfect nest"
    if len(inner.results) == 1:  # (u, v, r) with r a reduction carried in a register
        if inner not in block_ops(mid.regions[0].blocks[0]):
            return "not a perfect nest"
        loops = [outer, mid, inner]
        mid_ops = block_ops(mid.regions[0].blocks[0])[:-1]
        at = mid_ops.index(inner)
        prologue, epilogue = mid_ops[:at], mid_ops[at + 1 :]
        r_body = block_ops(inner.regions[0].blocks[0])[:-1]
        outside = [*prologue, *epilogue]
        reduction: ir.Operation | None = inner
    else:
        if not _is_perfect_child(mid, inner):
            return "not a perfect nest"
        loops = [outer, mid, inner]
        prologue, epilogue, outside = [], [], []
        r_body = block_ops(inner.regions[0].blocks[0])[:-1]
        reduction = None
    if not all(_step_one(loop) for loop in loops):
        return "a loop has a step other than 1"
    if any(len(loop.results) > 0 for loop in loops[: 2 if reduction is not None else 3]):
        return "a loop carries values"
    for loop in loops:
        _, lower_operands, _, upper_operands = _bound_maps(loop)
        if any(_defined_in(o, outer) for o in [*lower_operands, *upper_operands]):
            return "a loop's bounds use another loop of the nest"
    ivs = [_iv(loop) for loop in loops]
    stores: list[ir.Operation] = []
    loads: list[ir.Operation] = []
    problem = _collect(r_body, stores, loads) or _collect(outside, stores, loads)
    if problem:
        return problem
    if reduction is not None and any(op.name in ("affine.store", "affine.if") for op in r_body):
        return "the reduction loop stores or tests"
    if not stores:
        return "nothing is stored"
    target, access_map, access_operands = _access(stores[0])
    for store in stores[1:]:
        if _access(store) != (target, access_map, access_operands):
            return "stores to more than one element"
    element = ir.MemRefType(target.type).element_type
    if not (isinstance(element, ir.F32Type) or isinstance(element, ir.F64Type)):
        return "the stored element is not f32 or f64"
    if not _identity_layout(target):
        return "the stored array has a strided layout"
    roles = _roles(access_map, access_operands, ivs)
    if roles is None or (reduction is not None and roles[2] != 2):
        return "the stored element is not indexed by two loops (one in the last subscript)"
    u, v, r = (loops[k] for k in roles)
    if outer.name == "affine.parallel" and outer != u:
        return "the parallel loop is not the row loop"
    iv_u, iv_v = ivs[roles[0]], ivs[roles[1]]
    # Only loads the r loop runs unconditionally may be read ahead into a panel.
    unconditional = [op for op in r_body if op.name == "affine.load"]
    panels: list[ir.Operation] = []
    for load in loads:
        memref, load_map, operands = _access(load)
        if memref == target:
            if (load_map, operands) != (access_map, access_operands):
                return "the stored array is read at another element"
            if reduction is not None and load in r_body:
                return "the reduction loop reads the stored array"
            continue
        if may_alias(memref, target):
            return "a read array may alias the stored one"
        if ir.MemRefType(memref.type).element_type != element:
            return "a read has another element type"
        if iv_v not in operands:
            continue
        if iv_u not in operands and load in unconditional:
            panels.append(load)  # copied into a panel: any subscripts will do
        elif not _contiguous(load, iv_v):
            return "a read is not contiguous along the vector loop"
    for op in [*r_body, *outside]:
        if op.name == "affine.if" and any(o in (iv_u, iv_v) for o in op.operands):
            return "a guard tests a vectorized loop"
    return Contraction(
        outer=outer,
        u=u,
        v=v,
        r=r,
        target=target,
        access_map=access_map,
        access_operands=access_operands,
        element=element,
        body=r_body,
        panels=panels,
        reduction=reduction,
        prologue=prologue,
        epilogue=epilogue,
    )


def _contiguous(load: ir.Operation, iv: ir.Value) -> bool:
    """Whether `load` reads consecutive elements for consecutive `iv`: `iv` only in its last
    subscript, with coefficient 1, of an array laid out row-major."""
    memref, amap, operands = _access(load)
    if not _identity_layout(memref):
        return False
    results = list(amap.results)
    if any(_uses_operand(e, operands, amap.n_dims, iv) for e in results[:-1]):
        return False
    return _is_unit_plus_rest(results[-1], operands, amap.n_dims, iv)


def _bound_on(
    expr: ir.AffineExpr, operands: Sequence[ir.Value], n_dims: int, iv: ir.Value
) -> tuple[int, ir.AffineExpr] | None:
    """`expr` as sign * iv + rest with sign in {-1, 0, 1} and rest free of iv, or None."""
    if not _uses_operand(expr, operands, n_dims, iv):
        return 0, expr
    n_symbols = len(operands) - n_dims
    for probe in _positions_of(iv, operands, n_dims):
        for sign in (1, -1):
            rest = ir.AffineExpr.simplify_affine_expr(expr - probe * sign, n_dims, n_symbols)
            if not _uses_operand(rest, operands, n_dims, iv):
                return sign, rest
    return None


def _identity_layout(memref: ir.Value) -> bool:
    layout = ir.MemRefType(memref.type).layout
    if not isinstance(layout, ir.AffineMapAttr):
        return False
    amap = layout.value
    return amap == ir.AffineMap.get_identity(amap.n_dims)


def _collect(
    ops: Sequence[ir.Operation], stores: list[ir.Operation], loads: list[ir.Operation]
) -> str | None:
    """Sort `ops` (recursively through guards) into stores and loads; why not, if an op is of
    a kind the rewrite does not handle."""
    for op in ops:
        if op.name == "affine.store":
            stores.append(op)
        elif op.name == "affine.load":
            loads.append(op)
        elif op.name == "affine.if":
            if len(op.regions[1].blocks) > 0 or len(op.results) > 0:
                return "a guard has an else branch or results"
            try:
                affine_if_condition(op)
            except Exception:
                return "a guard's condition cannot be read back"
            problem = _collect(block_ops(op.regions[0].blocks[0])[:-1], stores, loads)
            if problem:
                return problem
        elif op.name == "arith.constant":
            if not isinstance(op.results[0].type, ir.FloatType):
                return "an integer constant in the body"
        elif op.name not in _ELEMENTWISE:
            return f"'{op.name}' in the body"
    return None


def _roles(
    access_map: ir.AffineMap, operands: Sequence[ir.Value], ivs: Sequence[ir.Value]
) -> tuple[int, int, int] | None:
    """(u, v, r) positions among the nest's loops for the store access, or None."""
    n_dims = access_map.n_dims
    results = list(access_map.results)
    used = [
        [k for k, iv in enumerate(ivs) if _uses_operand(expr, operands, n_dims, iv)]
        for expr in results
    ]
    last = used[-1]
    if len(last) != 1:
        return None
    v = last[0]
    if not _is_unit_plus_rest(results[-1], operands, n_dims, ivs[v]):
        return None
    u_results = [k for k, names in enumerate(used[:-1]) if names]
    if len(u_results) != 1 or len(used[u_results[0]]) != 1:
        return None
    u = used[u_results[0]][0]
    if u == v or not _is_unit_plus_rest(results[u_results[0]], operands, n_dims, ivs[u]):
        return None
    r = 3 - u - v
    return u, v, r


# ----- emission


@dataclass
class _Block:
    """One register block being emitted: its row and column start values and vector width."""

    rows: list[ir.Value]  # u for each row
    cols: list[ir.Value]  # v of each column's first lane
    width: int  # lanes per column (1: scalars)


class _Emitter:
    """Builds the replacement of one contraction (see the module docstring)."""

    def __init__(
        self, nest: Contraction, *, rows: int, vectors: int, width: int, contract: bool
    ) -> None:
        self.nest = nest
        self.mr, self.nr, self.width = rows, vectors, width
        self.contract = contract
        self.window: tuple[ir.Operation, ir.Value, ir.Value] | None = None
        self.loc = nest.outer.location
        self.index = ir.IndexType.get()

    # -- small builders
    def const(self, value: int) -> ir.Value:
        return arith.ConstantOp(self.index, value, loc=self.loc).result

    def apply(
        self, expr: ir.AffineExpr, n_dims: int, n_syms: int, operands: Sequence[ir.Value]
    ) -> ir.Value:
        return self.minmax("affine.apply", ir.AffineMap.get(n_dims, n_syms, [expr]), operands)

    def bound(self, loop: ir.Operation, which: str) -> ir.Value:
        """The lower (max of its map) or upper (min) bound of `loop`, as one value."""
        lower, lower_operands, upper, upper_operands = _bound_maps(loop)
        amap, operands = (lower, lower_operands) if which == "lower" else (upper, upper_operands)
        if len(amap.results) == 1:
            return self.apply(amap.results[0], amap.n_dims, amap.n_symbols, operands)
        return self.minmax("affine.max" if which == "lower" else "affine.min", amap, operands)

    def minmax(self, kind: str, amap: ir.AffineMap, operands: Sequence[ir.Value]) -> ir.Value:
        """The largest (`affine.max`) or smallest (`affine.min`) result of `amap`, or its one
        result (`affine.apply`)."""
        return ir.Operation.create(
            kind,
            results=[self.index],
            operands=list(operands),
            attributes={"map": ir.AffineMapAttr.get(amap)},
            loc=self.loc,
        ).results[0]

    def full_end(self, lower: ir.Value, upper: ir.Value, step: int) -> ir.Value:
        """lower + the largest multiple of `step` that fits below `upper` (lower if none)."""
        d0, d1 = ir.AffineDimExpr.get(0), ir.AffineDimExpr.get(1)
        fitted = d0 + ir.AffineFloorDivExpr.get(d1 - d0, ir.AffineConstantExpr.get(step)) * step
        return self.minmax("affine.max", ir.AffineMap.get(2, 0, [d0, fitted]), [lower, upper])

    def loop(
        self,
        lower: ir.Value,
        upper: ir.Value,
        step: int,
        body: Callable[[ir.Value], None],
        *,
        parallel: bool = False,
    ) -> None:
        if parallel:  # the nest's OpenMP loop stays one
            op = scf.ParallelOp([], [lower], [upper], [self.const(step)], [], loc=self.loc)
            block = op.regions[0].blocks.append(self.index)
            with ir.InsertionPoint(block):
                body(block.arguments[0])
                scf.ReduceOp([], 0, loc=self.loc)
            return
        for_op = scf.ForOp(lower, upper, self.const(step), loc=self.loc)
        with ir.InsertionPoint(for_op.body):
            body(for_op.induction_variable)
            scf.YieldOp([], loc=self.loc)

    # -- the whole nest
    def emit(self) -> None:
        nest = self.nest
        with ir.InsertionPoint(nest.outer), self.loc:
            lu, uu = self.bound(nest.u, "lower"), self.bound(nest.u, "upper")
            lv, uv = self.bound(nest.v, "lower"), self.bound(nest.v, "upper")
            lr, ur = self.bound(nest.r, "lower"), self.bound(nest.r, "upper")
            self.r_bounds = (lr, ur)
            # Nothing runs (and nothing may be read) unless all three ranges are nonempty.
            nonempty = self._all(
                [
                    arith.CmpIOp(arith.CmpIPredicate.slt, lo, hi, loc=self.loc).result
                    for lo, hi in ((lu, uu), (lv, uv), (lr, ur))
                ]
            )
            guard = scf.IfOp(nonempty, loc=self.loc)
            with ir.InsertionPoint(guard.then_block):
                u_full = self.full_end(lu, uu, self.mr)
                v_full = self.full_end(lv, uv, self.nr * self.width)
                self.lv = lv
                self.window = self._guard_window()
                self.panels = self._pack_panels(lv, v_full)

                def row_blocks(u0: ir.Value) -> None:
                    rows = [self._offset(u0, k) for k in range(self.mr)]
                    self._columns(rows, lv, v_full, uv)

                def single_rows(u: ir.Value) -> None:
                    self._columns([u], lv, v_full, uv)

                parallel = nest.u.name == "affine.parallel"
                self.loop(lu, u_full, self.mr, row_blocks, parallel=parallel)
                self.loop(u_full, uu, 1, single_rows)
                for buffer in self.panels.values():
                    ir.Operation.create("memref.dealloc", operands=[buffer], loc=self.loc)
                scf.YieldOp([], loc=self.loc)
        nest.outer.erase()

    def _all(self, tests: list[ir.Value]) -> ir.Value:
        result = tests[0]
        for test in tests[1:]:
            result = arith.AndIOp(result, test, loc=self.loc).result
        return result

    def _pack_panels(self, lv: ir.Value, v_full: ir.Value) -> dict[Any, ir.Value]:
        """A panel per load of `nest.panels`: its values over the vector blocks' columns and
        all of r, laid out [column block][r - lower][NR·W] so that a block reads it in order."""
        nest = self.nest
        if not nest.panels or self.width == 1:
            return {}
        lr, ur = self.r_bounds
        span = self.nr * self.width
        d0, d1 = ir.AffineDimExpr.get(0), ir.AffineDimExpr.get(1)
        blocks = self.apply(
            ir.AffineFloorDivExpr.get(d1 - d0, ir.AffineConstantExpr.get(span)), 2, 0, [lv, v_full]
        )
        depth = self.apply(d1 - d0, 2, 0, [lr, ur])
        panel_type = ir.MemRefType.get(
            [ir.ShapedType.get_dynamic_size()] * 2 + [span], nest.element
        )
        panels: dict[Any, ir.Value] = {}
        for load in nest.panels:
            panels[load] = ir.Operation.create(
                "memref.alloc",
                results=[panel_type],
                operands=[blocks, depth],
                attributes={
                    "operandSegmentSizes": ir.DenseI32ArrayAttr.get([2, 0]),
                    "alignment": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64),
                },
                loc=self.loc,
            ).results[0]

        def copy_block(block: ir.Value) -> None:
            def copy_row(k: ir.Value) -> None:
                row = self.apply(d0 - d1, 2, 0, [k, lr])
                v0 = self.apply(d0 + d1 * span, 2, 0, [lv, block])
                for load, panel in panels.items():
                    memref, amap, operands = _access(load)
                    contiguous = _contiguous(load, _iv(nest.v))
                    for c in range(self.nr):
                        lanes = (
                            [c * self.width]
                            if contiguous
                            else [c * self.width + lane for lane in range(self.width)]
                        )
                        for first in lanes:
                            v = self._offset(v0, first)
                            mapped = [
                                v if o == _iv(nest.v) else k if o == _iv(nest.r) else o
                                for o in operands
                            ]
                            indices = [
                                self.apply(e, amap.n_dims, amap.n_symbols, mapped)
                                for e in amap.results
                            ]
                            width = self.width if contiguous else 1
                            value = self._load(memref, indices, width)
                            self._store(value, panel, [block, row, self.const(first)], width)

            self.loop(lr, ur, 1, copy_row)

        self.loop(self.const(0), blocks, 1, copy_block)
        return panels

    def _offset(self, base: ir.Value, offset: int) -> ir.Value:
        if offset == 0:
            return base
        return arith.AddIOp(base, self.const(offset), loc=self.loc).result

    def _columns(self, rows: list[ir.Value], lv: ir.Value, v_full: ir.Value, uv: ir.Value) -> None:
        step = self.nr * self.width

        def vector_block(v0: ir.Value) -> None:
            cols = [self._offset(v0, c * self.width) for c in range(self.nr)]
            self._block(_Block(rows, cols, self.width))

        def scalar_block(v: ir.Value) -> None:
            self._block(_Block(rows, [v], 1))

        self.loop(lv, v_full, step, vector_block)
        self.loop(v_full, uv, 1, scalar_block)

    # -- one register block
    def _type(self, width: int) -> ir.Type:
        if width == 1:
            return self.nest.element
        return ir.VectorType.get([width], self.nest.element)

    def _target_indices(self, block: _Block, r: int, c: int, k: ir.Value | None) -> list[ir.Value]:
        return self._indices(self.nest.access_map, self.nest.access_operands, block, r, c, k)

    def _indices(
        self,
        amap: ir.AffineMap,
        operands: Sequence[ir.Value],
        block: _Block,
        r: int | None,
        c: int | None,
        k: ir.Value | None,
    ) -> list[ir.Value]:
        nest = self.nest
        mapped = []
        for operand in operands:
            if operand == _iv(nest.u):
                assert r is not None
                mapped.append(block.rows[r])
            elif operand == _iv(nest.v):
                assert c is not None
                mapped.append(block.cols[c])
            elif operand == _iv(nest.r):
                assert k is not None
                mapped.append(k)
            else:
                mapped.append(operand)
        return [self.apply(e, amap.n_dims, amap.n_symbols, mapped) for e in amap.results]

    def _block(self, block: _Block) -> None:
        nest = self.nest
        keys = [(r, c) for r in range(len(block.rows)) for c in range(len(block.cols))]
        current = {
            (r, c): self._load(nest.target, self._target_indices(block, r, c, None), block.width)
            for r, c in keys
        }
        body = _Body(self, block, current)
        body.run(nest.prologue)
        lr, ur = self.r_bounds
        if nest.reduction is not None:
            body.reduce(nest.reduction, lr, ur)
        elif self.window is None:
            body.carry(lr, ur, skip=None)
        else:
            # The guard holds only for r in [first, last): outside, its test is known false.
            guard, first, last = self.window
            body.carry(lr, first, skip=guard)
            body.carry(first, last, skip=None)
            body.carry(last, ur, skip=guard)
        body.run(nest.epilogue)
        for (r, c), value in body.current.items():
            self._store(value, nest.target, self._target_indices(block, r, c, None), block.width)

    def _guard_window(self) -> tuple[ir.Operation, ir.Value, ir.Value] | None:
        """For the one guard that tests r (if there is exactly one, each constraint of the form
        ±r + e): the guard and the clamped range [first, last) of r where it can hold."""
        iv_r = _iv(self.nest.r)
        guards = [op for op in self.nest.body if op.name == "affine.if" and iv_r in op.operands]
        if len(guards) != 1:
            return None
        guard = guards[0]
        exprs, equalities, n_dims = affine_if_condition(guard)
        operands = list(guard.operands)
        lows: list[ir.AffineExpr] = []
        highs: list[ir.AffineExpr] = []  # inclusive
        for expr, is_eq in zip(exprs, equalities, strict=True):
            bound = _bound_on(expr, operands, n_dims, iv_r)
            if bound is None:
                return None
            sign, rest = bound
            if sign == 0:
                continue
            # sign 1: r + rest >= 0 (r >= -rest); sign -1: -r + rest >= 0 (r <= rest)
            if sign == 1 or is_eq:
                lows.append(rest * -1 if sign == 1 else rest)
            if sign == -1 or is_eq:
                highs.append(rest if sign == -1 else rest * -1)
        if not lows and not highs:
            return None
        lr = self.r_bounds[0]
        mapped = [lr if o == iv_r else o for o in operands]  # r does not occur in the bounds
        first = self._clamp(lows, "affine.max", mapped, n_dims, 0)
        last = self._clamp(highs, "affine.min", mapped, n_dims, 1)
        last = self.minmax("affine.max", _pair_map(), [first, last])
        return guard, first, last

    def _clamp(
        self,
        exprs: list[ir.AffineExpr],
        kind: str,
        operands: list[ir.Value],
        n_dims: int,
        shift: int,
    ) -> ir.Value:
        """`kind` (affine.max or affine.min) of `exprs` + shift over `operands`, clamped into
        [lr, ur]; lr (shift 0) or ur (shift 1) without exprs."""
        lr, ur = self.r_bounds
        if not exprs:
            return lr if shift == 0 else ur
        amap = ir.AffineMap.get(n_dims, len(operands) - n_dims, [e + shift for e in exprs])
        value = self.minmax(kind, amap, operands)
        return self.minmax(
            "affine.min", _pair_map(), [self.minmax("affine.max", _pair_map(), [value, lr]), ur]
        )

    def _load(self, memref: ir.Value, indices: list[ir.Value], width: int) -> ir.Value:
        if width == 1:
            return ir.Operation.create(
                "memref.load",
                results=[self.nest.element],
                operands=[memref, *indices],
                loc=self.loc,
            ).results[0]
        return vector.LoadOp(self._type(width), memref, indices, loc=self.loc).result

    def _store(
        self, value: ir.Value, memref: ir.Value, indices: list[ir.Value], width: int
    ) -> None:
        if width == 1:
            ir.Operation.create("memref.store", operands=[value, memref, *indices], loc=self.loc)
        else:
            vector.StoreOp(value, memref, indices, loc=self.loc)


Lanes = dict[tuple[int | None, int | None], ir.Value]


class _Body:
    """The innermost body of the nest, re-emitted for one register block and one k: each
    original value becomes a value per (row, column) it depends on (None: does not vary)."""

    def __init__(
        self, emitter: _Emitter, block: _Block, current: dict[tuple[int, int], ir.Value]
    ) -> None:
        self.e = emitter
        self.block = block
        self.k: ir.Value | None = None  # r's value, inside an r loop
        self.skip: ir.Operation | None = None  # a guard known false in this r loop
        self.current = current  # the value of X's element for each (row, column)
        self.values: dict[Any, Lanes] = {}
        self.broadcasts: dict[Any, ir.Value] = {}

    def carry(self, lower: ir.Value, upper: ir.Value, *, skip: ir.Operation | None) -> None:
        """The perfect nest's r loop over [lower, upper), X's elements carried in registers;
        the guard `skip` is left out."""
        keys = list(self.current)
        loop = scf.ForOp(lower, upper, self.e.const(1), [self.current[k] for k in keys])
        saved = dict(self.broadcasts)
        with ir.InsertionPoint(loop.body):
            self.k, self.skip = loop.induction_variable, skip
            self.current = dict(zip(keys, loop.inner_iter_args, strict=True))
            self.run(self.e.nest.body)
            scf.YieldOp([self.current[k] for k in keys], loc=self.e.loc)
        self.k, self.skip, self.broadcasts = None, None, saved
        self.current = dict(zip(keys, loop.results, strict=True))

    def reduce(self, reduction: ir.Operation, lower: ir.Value, upper: ir.Value) -> None:
        """The (u, v, r) form's r loop: its register sum becomes one per (row, column)."""
        keys = list(self.current)
        block = reduction.regions[0].blocks[0]
        start = self._lanes(reduction.operands[len(reduction.operands) - 1])
        loop = scf.ForOp(
            lower, upper, self.e.const(1), [self._at(start, r, c, True) for r, c in keys]
        )
        saved = dict(self.broadcasts)
        with ir.InsertionPoint(loop.body):
            self.k = loop.induction_variable
            self.values[block.arguments[1]] = dict(zip(keys, loop.inner_iter_args, strict=True))
            self.run(self.e.nest.body)
            yielded = self._lanes(block_ops(block)[-1].operands[0])
            scf.YieldOp([self._at(yielded, r, c, True) for r, c in keys], loc=self.e.loc)
        self.k, self.broadcasts = None, saved
        self.values[reduction.results[0]] = dict(zip(keys, loop.results, strict=True))

    def run(self, ops: Sequence[ir.Operation]) -> None:
        for op in ops:
            self._op(op)

    def _lanes(self, value: ir.Value) -> Lanes:
        found = self.values.get(value)
        if found is not None:
            return found
        return {(None, None): value}  # defined outside the nest: invariant

    def _keys(self, by_row: bool, by_col: bool) -> list[tuple[int | None, int | None]]:
        rows: list[int | None] = list(range(len(self.block.rows))) if by_row else [None]
        cols: list[int | None] = list(range(len(self.block.cols))) if by_col else [None]
        return [(r, c) for r in rows for c in cols]

    def _at(self, lanes: Lanes, r: int | None, c: int | None, as_vector: bool) -> ir.Value:
        """The value of `lanes` for row r, column c; broadcast when a vector is wanted from a
        value that does not vary by column."""
        for key in ((r, c), (r, None), (None, c), (None, None)):
            if key in lanes:
                value = lanes[key]
                break
        else:
            raise KeyError(f"no value for row {r}, column {c}")
        if not as_vector or self.block.width == 1 or isinstance(value.type, ir.VectorType):
            return value
        cached = self.broadcasts.get(value)
        if cached is None:
            wide = ir.VectorType.get([self.block.width], value.type)  # f32, f64 or i1
            cached = vector.BroadcastOp(wide, value, loc=self.e.loc).result
            self.broadcasts[value] = cached
        return cached

    def _varies(self, lanes: Lanes) -> tuple[bool, bool]:
        return (any(r is not None for r, _ in lanes), any(c is not None for _, c in lanes))

    def _op(self, op: ir.Operation) -> None:
        nest = self.e.nest
        if op.name == "affine.load":
            memref, amap, operands = _access(op)
            if memref == nest.target and (amap, operands) == (
                nest.access_map,
                nest.access_operands,
            ):
                self.values[op.results[0]] = {key: value for key, value in self.current.items()}
                return
            by_row = _iv(nest.u) in operands
            by_col = _iv(nest.v) in operands
            panel = self.e.panels.get(op) if self.block.width > 1 else None
            if panel is not None:
                self.values[op.results[0]] = self._panel_lanes(panel)
                return
            width = self.block.width if by_col else 1
            lanes: Lanes = {}
            for r, c in self._keys(by_row, by_col):
                indices = self.e._indices(amap, operands, self.block, r, c, self.k)
                lanes[(r, c)] = self.e._load(memref, indices, width)
            self.values[op.results[0]] = lanes
        elif op.name == "affine.store":
            value = self._lanes(op.operands[0])
            for key in self.current:
                self.current[key] = self._at(value, key[0], key[1], True)
        elif op.name == "affine.if":
            if self.skip is None or op != self.skip:
                self._guard(op)
        elif op.name == "arith.constant":
            self.values[op.results[0]] = {(None, None): op.clone().results[0]}
        else:
            self._elementwise(op)

    def _panel_lanes(self, panel: ir.Value) -> Lanes:
        e = self.e
        d0, d1 = ir.AffineDimExpr.get(0), ir.AffineDimExpr.get(1)
        span = e.nr * e.width
        block = e.apply(
            ir.AffineFloorDivExpr.get(d0 - d1, ir.AffineConstantExpr.get(span)),
            2,
            0,
            [self.block.cols[0], e.lv],
        )
        row = e.apply(d0 - d1, 2, 0, [self.k, e.r_bounds[0]])
        return {
            (None, c): e._load(panel, [block, row, e.const(c * e.width)], e.width)
            for c in range(len(self.block.cols))
        }

    def _elementwise(self, op: ir.Operation) -> None:
        inputs = [self._lanes(o) for o in op.operands]
        by_row = any(self._varies(lanes)[0] for lanes in inputs)
        by_col = any(self._varies(lanes)[1] for lanes in inputs)
        as_vector = by_col and self.block.width > 1
        scalar_type = op.results[0].type  # the element type, or i1 for a comparison
        result_type = (
            ir.VectorType.get([self.block.width], scalar_type) if as_vector else scalar_type
        )
        attributes = {name: op.attributes[name] for name in op.attributes}
        if self.e.contract and op.name in _CONTRACTING:
            attributes["fastmath"] = ir.Attribute.parse("#arith.fastmath<contract>")
        out: Lanes = {}
        for r, c in self._keys(by_row, by_col):
            operands = [self._at(lanes, r, c, as_vector) for lanes in inputs]
            out[(r, c)] = ir.Operation.create(
                op.name,
                results=[result_type],
                operands=operands,
                attributes=attributes,
                loc=op.location,
            ).results[0]
        self.values[op.results[0]] = out

    def _guard(self, op: ir.Operation) -> None:
        exprs, equalities, n_dims = affine_if_condition(op)
        mapped = [self.k if o == _iv(self.e.nest.r) else o for o in op.operands]
        n_symbols = len(mapped) - n_dims
        test: ir.Value | None = None
        for expr, is_eq in zip(exprs, equalities, strict=True):
            value = self.e.apply(expr, n_dims, n_symbols, mapped)
            zero = self.e.const(0)
            predicate = arith.CmpIPredicate.eq if is_eq else arith.CmpIPredicate.sge
            check = arith.CmpIOp(predicate, value, zero, loc=self.e.loc).result
            test = check if test is None else arith.AndIOp(test, check, loc=self.e.loc).result
        if test is None:
            self.run(block_ops(op.regions[0].blocks[0])[:-1])
            return
        keys = list(self.current)
        types = [self.current[key].type for key in keys]
        branch = scf.IfOp(test, types, has_else=True, loc=self.e.loc)
        before = dict(self.current)
        with ir.InsertionPoint(branch.then_block):
            saved = dict(self.broadcasts)
            self.run(block_ops(op.regions[0].blocks[0])[:-1])
            scf.YieldOp([self.current[key] for key in keys], loc=self.e.loc)
            self.broadcasts = saved  # values made in the branch do not dominate what follows
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp([before[key] for key in keys], loc=self.e.loc)
        self.current = dict(zip(keys, branch.results, strict=True))


def vectorize_contractions(
    fn: ir.Operation,
    *,
    rows: int = 6,
    vectors: int = 2,
    vector_bits: int = 256,
    contract: bool = True,
) -> int:
    """Rewrite every contraction nest of `fn` (see the module docstring) into register blocks;
    returns how many were rewritten, and says so in remarks on `fn` (the compile report's).
    Other code is untouched."""
    inner_loops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if (
            op.name == "affine.for"
            and _perfect_child(op) is None
            and not any(
                o.name in ("affine.for", "affine.parallel", "scf.for")
                for o in block_ops(op.regions[0].blocks[0])
            )
        ):
            inner_loops.append(op)
        return ir.WalkResult.ADVANCE

    fn.walk(visit)
    count = 0
    said: list[Remark] = []  # for the compile report
    for inner in inner_loops:
        nest = match_contraction(inner, fn)
        if isinstance(nest, str):
            continue
        width = vector_bits // (32 if isinstance(nest.element, ir.F32Type) else 64)
        said.append(
            remark_at(
                nest.outer.location,
                "schedule",
                "micro-kernel",
                "remark",
                f"contraction computed in register blocks of {rows} rows x {vectors} vectors "
                f"of {width} {nest.element}",
                {"rows": rows, "vectors": vectors, "lanes": width, "element": str(nest.element)},
            )
        )
        _Emitter(nest, rows=rows, vectors=vectors, width=width, contract=contract).emit()
        count += 1
    attach_remarks(fn, said)
    return count


@dataclass(frozen=True)
class ScheduleMicroKernels:
    """Contraction nests → register-blocked vector code (see the module docstring)."""

    name: ClassVar[str] = "schedule-micro-kernels"
    rows: int = 6
    vectors: int = 2
    vector_bits: int = 256
    contract: bool = True

    def __call__(self, op: ir.Operation, pass_: Any) -> None:
        try:
            vectorize_contractions(
                op,
                rows=self.rows,
                vectors=self.vectors,
                vector_bits=self.vector_bits,
                contract=self.contract,
            )
        except Exception as exc:  # a bug here must fail the pass, not the process
            op.location.emit_error(f"schedule-micro-kernels: {type(exc).__name__}: {exc}")
            pass_.signal_pass_failure()


__all__ = [
    "Contraction",
    "ScheduleMicroKernels",
    "match_contraction",
    "vectorize_contractions",
]
