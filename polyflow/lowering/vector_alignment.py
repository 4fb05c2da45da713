"""Vector loops that start on a vector boundary: an innermost `affine.for` that LLVM's loop
vectorizer will take, with a unit-stride store, runs its vector loop from where the store's
address is a multiple of the vector size. Every vector load and store along the same rows then
stays within one cache line.

Why: a stencil's rows start at element 1 (`B[i][j][1 .. n-2]`), and arrays are allocated
page-aligned (PolyBench's `posix_memalign(4096)`) or 16 bytes past it (glibc's large
`calloc`), so every other 32-byte access of the vectorized row straddles two cache lines, and
the core pays for a split access each time. Measured on a Zen 3, the 7-point stencil's row in
L1: 0.73 ns per point misaligned, 0.51 aligned; heat-3d at LARGE, one core, 1.07 -> 0.98 s.

The aligned start is `lb + (-(base + offset(lb))) mod V` for each lower bound (the largest
of them: aligning up is monotone), with `base` the array's address in elements modulo V (an
`memref.extract_aligned_pointer_as_index` at the function's top level, so a symbol of every
loop in it) and offset(lb) the store's element offset at that bound. Two shapes:
- the body reads no array it writes (an out-of-place sweep, `_repeatable`), so running an
  iteration twice changes nothing: where the loop runs at least V iterations, one whole vector
  from the start, whole vectors from the aligned start, one whole vector ending at the end
  (the three overlap; no scalar iteration is left); else the loop as it was. The aligned
  middle takes the rows it reads around its element from registers where it can
  (`register_shifts.py`);
- otherwise (an in-place update): the iterations before the aligned start in an `scf.for` of
  their own (fewer than V), then the loop from the aligned start (`register_shifts.py`'s
  vectors where the update reads each array it writes only at the element it writes).
Either shape, where `register_shifts.py` takes the rows from registers and the body may run
masked, is instead its whole-row form (`shifted_row`): one masked vector before the aligned
middle and one after it, no scalar loop.
Either way each iteration's last run comes in the loop's order, so this is correct for any
address, aligned or not. Only static row lengths (all extents but the first known) and loops
not known to run fewer than `MIN_ALIGNED_VECTORS` vectors (a tile's rows) qualify; a parallel
loop keeps its start (OpenMP cuts it into chunks anyway).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import affine, arith, scf
from mlir.dialects import memref as memref_dialect

from polyflow.ir.affine import (
    Inexpressible,
    Linear,
    defined_in_loop_body,
    for_bounds,
    linear_form,
    straight_line_loops,
    trip_bound,
)
from polyflow.ir.aliasing import may_alias
from polyflow.ir.functions import enclosing_function_name, source_names
from polyflow.ir.remarks import attach_remarks, remark_at

from .register_shifts import shifted_in_place_loop, shifted_middle_loop, shifted_row

# A loop known to run fewer than this many vectors gains less from the alignment than its
# extra loop costs.
MIN_ALIGNED_VECTORS = 16
_AFFINE_LOOPS = frozenset({"affine.for", "affine.parallel"})


@dataclass(frozen=True)
class _Plan:
    """How to split one loop: the store's array, its elements per vector, and the store's
    element offset without the loop's variable (whose coefficient is 1)."""

    store: ir.Operation
    memref: ir.Value
    lanes: int
    element_bytes: int
    offset: Linear


def align_vector_loops(module: ir.Module, vector_bytes: int) -> int:
    """Run every innermost straight-line `affine.for` of `module` with a unit-stride store as
    vectors from where that store is `vector_bytes`-aligned (module docstring); returns how
    many loops it split."""
    split = 0
    bases: dict[ir.Value, ir.Value] = {}
    names = source_names(module)
    said = []
    for loop in straight_line_loops(module):
        plan = _plan(loop, vector_bytes)
        if plan is None:
            continue
        base = bases.get(plan.memref)
        if base is None:
            base = bases[plan.memref] = _base_in_lanes(plan)
        location, symbol = loop.location, enclosing_function_name(loop)
        if _split(loop, plan, base):
            said.append(
                remark_at(
                    location,
                    "lowering",
                    "register-shifts",
                    "remark",
                    f"vector loop of {plan.lanes} lanes takes each row's neighbours from "
                    "registers: one load per row and iteration, shifted across lanes",
                    {"lanes": plan.lanes},
                    function=names.get(symbol, symbol) if symbol else None,
                )
            )
        split += 1
    attach_remarks(module.operation, said)
    return split


def _plan(loop: ir.Operation, vector_bytes: int) -> _Plan | None:
    """The store `loop` is aligned on, or None where the loop does not qualify: step 1, no
    carried values, linear lower bounds, not known to be short, a unit-stride store into a
    row-major array with static rows (`_row_major`) defined at the function's top level."""
    if ir.IntegerAttr(loop.attributes["step"]).value != 1 or len(loop.results):
        return None
    (lb_map, lb_operands), _ = for_bounds(loop)
    try:
        for result in lb_map.results:
            linear_form(result, lb_operands, lb_map.n_dims)
    except Inexpressible:
        return None
    body = loop.regions[0].blocks[0]
    iv = body.arguments[0]
    for op in body.operations:
        store = op.operation
        if store.name != "affine.store":
            continue
        memref = store.operands[1]
        shape = _row_major(memref.type)
        if shape is None or not _top_level(memref):
            continue
        extents, element_bytes = shape
        lanes = vector_bytes // element_bytes
        if lanes < 2 or vector_bytes % element_bytes:
            continue
        trips = trip_bound(loop)
        if trips is not None and trips < MIN_ALIGNED_VECTORS * lanes:
            return None
        amap = ir.AffineMapAttr(store.attributes["map"]).value
        try:
            subscripts = [
                linear_form(e, list(store.operands)[2:], amap.n_dims) for e in amap.results
            ]
        except Inexpressible:
            continue
        offset: dict[ir.Value, int] = {}
        constant = 0
        stride = 1
        for extent, (terms, const) in zip(reversed(extents), reversed(subscripts), strict=True):
            for value, coefficient in terms:
                offset[value] = offset.get(value, 0) + stride * coefficient
            constant += stride * const
            stride *= extent
        if offset.pop(iv, 0) != 1:
            continue
        if any(not _valid_dim(value, body) for value in offset):
            continue
        return _Plan(store, memref, lanes, element_bytes, (frozenset(offset.items()), constant))
    return None


def _row_major(memref_type: ir.Type) -> tuple[list[int], int] | None:
    """The extents and element size of a row-major memref whose extents are static but for
    the first (which no element's offset depends on: `double A[n][M]`, `double *p`)."""
    if not isinstance(memref_type, ir.MemRefType) or memref_type.rank == 0:
        return None
    identity = ir.AffineMap.get_identity(memref_type.rank)
    layout = memref_type.layout
    if not (isinstance(layout, ir.AffineMapAttr) and layout.value == identity):
        return None
    if any(ir.ShapedType.is_dynamic_size(extent) for extent in memref_type.shape[1:]):
        return None
    element = memref_type.element_type
    if not isinstance(element, ir.FloatType | ir.IntegerType) or element.width % 8:
        return None
    return list(memref_type.shape), element.width // 8


def _top_level(value: ir.Value) -> bool:
    """Whether `value` is defined in its function's entry block (an argument or an op there)."""
    owner = value.owner
    block = owner if isinstance(owner, ir.Block) else owner.operation.block
    parent = block.owner
    return parent is not None and parent.operation.name == "func.func"


def _valid_dim(value: ir.Value, body: ir.Block) -> bool:
    """Whether `value` may be a dimension of an affine bound outside `body`: an enclosing affine
    loop's variable or a value of the function's top level."""
    if defined_in_loop_body(value, body):
        return False
    owner = value.owner
    if isinstance(owner, ir.Block):
        parent = owner.owner
        return parent is not None and parent.operation.name in (*_AFFINE_LOOPS, "func.func")
    return _top_level(value)


def _base_in_lanes(plan: _Plan) -> ir.Value:
    """The array's address in elements modulo the lanes, computed right where the array is
    defined (the function's top level: a symbol for every loop of the function)."""
    memref = plan.memref
    owner = memref.owner
    if isinstance(owner, ir.Block):
        ip = ir.InsertionPoint.at_block_begin(owner)
    else:
        ip = ir.InsertionPoint.after(owner.operation)
    index = ir.IndexType.get()
    with ip, memref.location:
        address = memref_dialect.extract_aligned_pointer_as_index(memref)
        elements = arith.divui(address, arith.constant(index, plan.element_bytes))
        return arith.remui(elements, arith.constant(index, plan.lanes))


def _split(loop: ir.Operation, plan: _Plan, base: ir.Value) -> bool:
    """Replace `loop` by its prologue, an `scf.for` up to the aligned start, and the aligned
    rest. With several lower bounds (a skewed tile's row: `max(tile start, 2t + 1)`) the
    aligned start is the largest of each bound's aligned start (aligning up is monotone).
    Returns whether the aligned middle takes row neighbours from registers
    (`register_shifts.py`)."""
    (lb_map, lb_operands), (ub_map, ub_operands) = for_bounds(loop)
    lowers = [linear_form(result, lb_operands, lb_map.n_dims) for result in lb_map.results]
    values: list[ir.Value] = []
    # the terms in a fixed order (their sets iterate in address order): the same IR every run
    order = [*_leaves([*lb_operands, *list(plan.store.operands)[2:]]), base]

    def dim(value: ir.Value) -> ir.AffineExpr:
        if value not in values:
            values.append(value)
        return ir.AffineDimExpr.get(values.index(value))

    def linear(form: Linear) -> ir.AffineExpr:
        terms, constant = form
        expr = ir.AffineConstantExpr.get(constant)
        for value, coefficient in sorted(terms, key=lambda term: order.index(term[0])):
            expr = expr + dim(value) * coefficient
        return expr

    starts = []
    for lower in lowers:
        at_start: dict[ir.Value, int] = dict(plan.offset[0])
        for value, coefficient in lower[0]:
            at_start[value] = at_start.get(value, 0) + coefficient
        at_start[base] = at_start.get(base, 0) + 1
        store_at_start = linear((frozenset(at_start.items()), plan.offset[1] + lower[1]))
        starts.append(linear(lower) + (store_at_start * -1) % plan.lanes)
    aligned_map = ir.AffineMap.get(len(values), 0, starts)

    index = ir.IndexType.get()
    with ir.InsertionPoint(loop), loop.location:
        first = affine.AffineMaxOp(lb_map, lb_operands, results=[index]).result
        aligned = affine.AffineMaxOp(aligned_map, values, results=[index]).result
        end = affine.AffineMinOp(ub_map, ub_operands, results=[index]).result
        one = arith.constant(index, 1)
        repeatable = _repeatable(loop)
        if shifted_row(
            loop, first, aligned, end, plan.lanes, _copy_body_unaffine, in_place=not repeatable
        ):
            loop.erase()
            return True
        if not repeatable:
            prologue = scf.ForOp(first, arith.minsi(aligned, end), one)
            _copy_body_unaffine(loop, prologue)
            if shifted_in_place_loop(loop, aligned, end, plan.lanes, _copy_body_unaffine):
                loop.erase()
                return True
            _rebound(loop, aligned_map, values, ub_map, ub_operands)
            return False
        # A loop whose iterations may run twice: a whole vector at each end, overlapping the
        # aligned middle, where it runs at least a vector's iterations (else as it was).
        lanes = arith.constant(index, plan.lanes)
        fits = arith.cmpi(arith.CmpIPredicate.sge, arith.subi(end, first), lanes)
        guard = scf.IfOp(fits, [], has_else=True)
    with ir.InsertionPoint(guard.then_block), loop.location:
        head = scf.ForOp(first, arith.addi(first, lanes), one)
        _copy_body_unaffine(loop, head)
        # the middle: whole vectors from the aligned start (`end - aligned` > 0 here)
        stop = arith.subi(end, arith.remui(arith.subi(end, aligned), lanes))
        shifted = shifted_middle_loop(loop, aligned, stop, plan.lanes, _copy_body_unaffine)
        tail = scf.ForOp(arith.subi(end, lanes), end, one)
        _copy_body_unaffine(loop, tail)
        scf.YieldOp([])
    with ir.InsertionPoint(guard.else_block), loop.location:
        otherwise = scf.YieldOp([])
    loop.move_before(otherwise)
    return shifted


def _repeatable(loop: ir.Operation) -> bool:
    """Whether running some iterations of `loop` twice (each time after all iterations before
    it) leaves memory as running each once: the body reads no array it writes, and its arrays
    do not alias (polyflow.ir.aliasing), so an iteration's values depend on nothing the loop
    changes, and each location's last write stays the last iteration's."""
    body = loop.regions[0].blocks[0]
    loaded: list[ir.Value] = []
    stored: list[ir.Value] = []
    for op in body.operations:
        op = op.operation
        if op.name == "affine.load":
            loaded.append(op.operands[0])
        elif op.name == "affine.store":
            stored.append(op.operands[1])
    return all(not may_alias(written, read) for written in stored for read in loaded)


def _copy_body_unaffine(loop: ir.Operation, into: scf.ForOp) -> None:
    """Copy `loop`'s body into `into`, its affine accesses as `memref.load`/`memref.store` of
    `affine.apply`ed subscripts (the `scf.for` variable is no affine dimension)."""
    body = loop.regions[0].blocks[0]
    mapping: dict[ir.Value, ir.Value] = {body.arguments[0]: into.induction_variable}
    index = ir.IndexType.get()
    with ir.InsertionPoint(into.body):
        for op in body.operations:
            op = op.operation
            if op.name == "affine.yield":
                scf.YieldOp([])
                continue
            with op.location:
                if op.name in ("affine.load", "affine.store"):
                    write = op.name == "affine.store"
                    operands = [mapping.get(value, value) for value in op.operands]
                    amap = ir.AffineMapAttr(op.attributes["map"]).value
                    indices = operands[2 if write else 1 :]
                    subscripts = [
                        affine.AffineApplyOp(
                            ir.AffineMap.get(amap.n_dims, amap.n_symbols, [result]),
                            indices,
                            results=[index],
                        ).result
                        for result in amap.results
                    ]
                    if write:
                        memref_dialect.StoreOp(operands[0], operands[1], subscripts)
                    else:
                        loaded = memref_dialect.LoadOp(operands[0], subscripts).result
                        mapping[op.results[0]] = loaded
                    continue
                copy = op.clone()
                for position, value in enumerate(op.operands):
                    if value in mapping:
                        copy.operands[position] = mapping[value]
                for old, new in zip(op.results, copy.results, strict=True):
                    mapping[old] = new


def _leaves(roots: list[ir.Value]) -> list[ir.Value]:
    """`roots` and the operands of the `affine.apply`s behind them, in first-seen order."""
    seen: list[ir.Value] = []
    pending = list(reversed(roots))
    while pending:
        value = pending.pop()
        if value in seen:
            continue
        seen.append(value)
        owner = value.owner
        if not isinstance(owner, ir.Block) and owner.operation.name == "affine.apply":
            pending.extend(reversed(list(owner.operation.operands)))
    return seen


def _rebound(
    loop: ir.Operation,
    lower: ir.AffineMap,
    lower_operands: list[ir.Value],
    upper: ir.AffineMap,
    upper_operands: list[ir.Value],
) -> None:
    """Give `loop` new bounds: a new `affine.for` in its place takes its body and attributes."""
    with loop.location:
        new = affine.AffineForOp(
            lower,
            upper,
            ir.IntegerAttr(loop.attributes["step"]).value,
            lower_bound_operands=lower_operands,
            upper_bound_operands=upper_operands,
            ip=ir.InsertionPoint(loop),
        )
    old_body = loop.regions[0].blocks[0]
    old_body.arguments[0].replace_all_uses_with(new.induction_variable)
    for op in list(new.body.operations):
        op.operation.erase()
    for op in list(old_body.operations):
        new.body.append(op.operation)
    for name in list(loop.attributes):  # the discardable ones: dialect-prefixed
        if "." in name:
            new.operation.attributes[name] = loop.attributes[name]
    loop.erase()
