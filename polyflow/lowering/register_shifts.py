"""Vector loops that take a row's neighbours from registers: the aligned middle of an
out-of-place sweep (`vector_alignment.py`) written as explicit vectors, where the elements a
row is read at around the loop's own (`A[i][j-1]`, `A[i][j]`, `A[i][j+1]`) come from one
vector load per iteration and lane shifts of the vectors before and after it.

Why: LLVM vectorizes `A[i][j-1] + A[i][j] + A[i][j+1]` as three loads, of which with 64-byte
vectors two straddle cache lines whatever the start (one element apart); the core pays twice
for a split load and has two load ports. From registers it is one aligned load (the middle
loop starts where the store is aligned, and the rows of a stencil usually share the
alignment) and two lane permutes (`vpermt2pd`). Measured on a Sapphire Rapids core, jacobi-2d's row (5 points,
rows 64 x 512 in the L2): 7.9-8.6 -> 6.8-7.2 cycles per vector.

Which loops: the middle `[aligned, stop)` of a loop `_split` found repeatable (no array it
reads is written, no aliasing: its iterations are independent), or the aligned rest of an
in-place update that reads each array it writes only at the element it writes (fdtd-2d's
`ex[i][j] = ex[i][j] - 0.5 * (hz[i][j] - hz[i][j-1])`: again independent iterations, and
the shifted rows are not written), whose body is loads and
stores that move with the loop's variable through the last subscript only (coefficient 1) or
not at all, and elementwise arithmetic. A row read at offsets `lo <= 0 <= hi` of the
variable (within a vector) is shifted from registers; any other read is a plain vector load.
The vector before the first iteration and the one after the last are masked loads of only
the lanes the shifts use, so every element the register loop loads is one the scalar loop
reads. Ranges of fewer than `MIN_SHIFTED_VECTORS` vectors stay one scalar loop.

The iterations before the aligned start and after the last whole vector (`shifted_row`) run
as one vector each, at the aligned positions around the middle, masked: stores to the lanes
of iterations in the loop, loads to the elements the scalar loop reads (the lanes outside get
zeros). A row of heat-3d (118 of 120 elements) is then 15 aligned vectors, not LLVM's scalar
head and tail loops around 13: heat-3d at LARGE, 1 thread, alternating runs, 0.955x the time
(median of 11 per-run ratios), jacobi-2d 0.975x, fdtd-2d 0.986x. Bodies that could trap on
the zeros (integer division) or whose elements are narrower than 32 bits (no masked
accesses of their own before AVX-512BW) keep those scalar loops.

Results are the scalar loop's to the bit: each lane computes the same operations on the same
elements in the same order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import affine, arith, scf, vector
from mlir.dialects import memref as memref_dialect

from polyflow.ir.affine import Inexpressible, Linear, defined_in_loop_body, linear_form
from polyflow.ir.aliasing import may_alias
from polyflow.ir.ops import INTEGER_DIVISIONS

# Elementwise ops whose vector form is the same op on vectors of the operands.
_ELEMENTWISE_PREFIXES = ("arith.", "math.")
_NOT_ELEMENTWISE = frozenset({"arith.constant", "arith.index_cast", "arith.index_castui"})
# A middle of fewer than this many vectors stays a scalar loop, vectorized by LLVM (the
# register loop needs one vector before and one after it).
MIN_SHIFTED_VECTORS = 2
# The register loop prefetches the rows the next iteration of the loop around it reads first
# (`_rows_of_next_iteration`), this many vectors ahead of its own element. jacobi-2d at LARGE,
# alternating runs: one thread 0.542 -> 0.488 s best, two threads 0.343 -> 0.302 s median (the
# row a sweep reads first came from the L2 each time and the core stalled on it: the hardware
# prefetchers stop at 4 KiB pages, and the row tiles span two).
PREFETCH_AHEAD = 4
# ... where that row lies at least this far from the one read before it: rows closer than a
# page (heat-3d's next row along `j`, 960 B on) stream through the hardware prefetchers, and
# prefetching them gained nothing (0.738 -> 0.757 s best).
PREFETCH_MIN_STEP_BYTES = 4096


# A row of an array as the loop reads it: the array, the subscripts but the last, and the
# last one's terms without the loop's variable and constant.
RowKey = tuple[ir.Value, tuple[Linear, ...], frozenset[tuple[ir.Value, int]]]


@dataclass
class _Row:
    """The reads of one row: one of its loads (whose map gives the row's subscripts), that
    load's offset from the loop's variable, and every offset the row is read at."""

    memref: ir.Value
    load: ir.Operation
    offset: int
    offsets: set[int] = field(default_factory=set)

    def shifted(self, lanes: int) -> bool:
        """Whether the row's reads come from registers: more than one offset, 0 among them
        (so the vectors loaded lie between elements the loop reads) and all within a vector."""
        low, high = min(self.offsets), max(self.offsets)
        return len(self.offsets) > 1 and -lanes < low <= 0 <= high < lanes


@dataclass
class _Plan:
    rows: dict[RowKey, _Row]
    load_rows: dict[ir.Operation, tuple[RowKey, int]]  # each moving load: its row, its offset
    invariant_loads: list[ir.Operation]


def _access_row(op: ir.Operation, iv: ir.Value) -> tuple[RowKey | None, int] | None:
    """(row, offset) of an access whose last subscript is `iv` plus an offset (coefficient 1)
    and whose other subscripts do not use `iv`; (None, 0) for one that does not use `iv`; None
    for any other."""
    first = 2 if op.name == "affine.store" else 1
    operands = list(op.operands)[first:]
    amap = ir.AffineMapAttr(op.attributes["map"]).value
    try:
        forms: list[Linear] = [linear_form(e, operands, amap.n_dims) for e in amap.results]
    except Inexpressible:
        return None
    uses = [dict(terms).get(iv, 0) for terms, _ in forms]
    if not any(uses):
        return None, 0
    if any(uses[:-1]) or uses[-1] != 1:
        return None
    last_terms, constant = forms[-1]
    moving = frozenset(term for term in last_terms if term[0] != iv)
    return (op.operands[first - 1], tuple(forms[:-1]), moving), constant


def _plan(loop: ir.Operation, lanes: int, *, in_place: bool = False) -> _Plan | None:
    """What the register loop of `loop` loads, or None where its body is not loads and stores
    along rows (or fixed loads) and elementwise arithmetic on scalars, or no row is shifted.
    `in_place`: the body may read what it writes, provided it reads each written array (or
    one that may alias it) only at the element it writes, and writes it at one element per
    iteration, so its iterations stay independent and no shifted row changes under it."""
    body = loop.regions[0].blocks[0]
    iv = body.arguments[0]
    rows: dict[RowKey, _Row] = {}
    load_rows: dict[ir.Operation, tuple[RowKey, int]] = {}
    invariant: list[ir.Operation] = []
    stores: list[tuple[ir.Value, RowKey, int]] = []
    for op in body.operations:
        op = op.operation
        name = op.name
        if name == "affine.yield":
            continue
        if name in ("affine.load", "affine.store"):
            access = _access_row(op, iv)
            if access is None:
                return None
            key, offset = access
            if name == "affine.store":
                if key is None:
                    return None  # the same element every iteration: not a sweep
                stores.append((op.operands[1], key, offset))
            elif key is None:
                invariant.append(op)
            else:
                row = rows.get(key)
                if row is None:
                    row = rows[key] = _Row(op.operands[0], op, offset)
                row.offsets.add(offset)
                load_rows[op] = (key, offset)
            continue
        elementwise = name.startswith(_ELEMENTWISE_PREFIXES) and name not in _NOT_ELEMENTWISE
        if op.regions or not (elementwise or name == "arith.constant"):
            return None
        # (an operand of index type: the loop's variable or a subscript, no vector element)
        if not all(_scalar(value.type) for value in [*op.results, *op.operands]):
            return None
    if not stores or not any(row.shifted(lanes) for row in rows.values()):
        return None
    # each array written at one element per iteration per row: two stores of a row at
    # different offsets would, vectorized, leave an earlier iteration's value last. Rows of
    # one array that differ only in their outer subscripts (rows unrolled and jammed into one
    # loop), stored at one offset, keep each element's order: where two turn out to be one
    # row, it is the same element in the same iteration, and both orders write the later
    # store's value last.
    for memref, key, offset in stores:
        for other, other_key, other_offset in stores:
            if may_alias(memref, other) and not _same_element_or_row_apart(
                (key, offset), (other_key, other_offset)
            ):
                return None
    if in_place and not _reads_only_own_elements(stores, rows, invariant):
        return None
    return _Plan(rows, load_rows, invariant)


def _same_element_or_row_apart(a: tuple[RowKey, int], b: tuple[RowKey, int]) -> bool:
    """Whether stores at `a` and `b` (row, offset) write one element in one iteration or not
    at all: the same row and offset, or one array at one offset along rows whose last
    subscripts move alike (they differ in the outer subscripts only)."""
    (key_a, offset_a), (key_b, offset_b) = a, b
    return offset_a == offset_b and key_a[0] == key_b[0] and key_a[2] == key_b[2]


def _reads_only_own_elements(
    stores: list[tuple[ir.Value, RowKey, int]],
    rows: dict[RowKey, _Row],
    invariant: list[ir.Operation],
) -> bool:
    """Whether every array the body writes (at one element per iteration) is read, through
    it or anything that may alias it, only at that element."""
    # (the stores of arrays that may alias each other are of one array: `_plan` checked)
    own = {(key, offset) for _, key, offset in stores}
    for memref, _, _ in stores:
        for row_key, row in rows.items():
            if may_alias(memref, row.memref) and not (
                len(row.offsets) == 1 and (row_key, *row.offsets) in own
            ):
                return False
        if any(may_alias(memref, load.operands[0]) for load in invariant):
            return False
    return True


def _scalar(type_: ir.Type) -> bool:
    return isinstance(type_, ir.FloatType | ir.IntegerType)


def shifted_middle_loop(
    loop: ir.Operation,
    start: ir.Value,
    stop: ir.Value,
    lanes: int,
    copy_body: Callable[[ir.Operation, scf.ForOp], None],
) -> bool:
    """At the insertion point: `loop`'s iterations `[start, stop)` (a multiple of `lanes`,
    `start` where the store is aligned) as the register loop, where the plan applies and the
    range holds at least `MIN_SHIFTED_VECTORS` vectors (else one scalar loop); a scalar loop
    where it does not; returns whether the plan applied.
    `copy_body(loop, for_op)` fills a scalar `scf.for` with `loop`'s body."""
    plan = _plan(loop, lanes)
    if plan is None:
        middle = scf.ForOp(start, stop, arith.constant(ir.IndexType.get(), 1))
        copy_body(loop, middle)
        return False
    _guarded_register_loop(loop, plan, start, stop, lanes, copy_body, whole_vectors=True)
    return True


def shifted_in_place_loop(
    loop: ir.Operation,
    start: ir.Value,
    end: ir.Value,
    lanes: int,
    copy_body: Callable[[ir.Operation, scf.ForOp], None],
) -> bool:
    """At the insertion point: `loop`'s iterations `[start, end)` (`start` where the store is
    aligned) as the register loop over their whole vectors and a scalar loop for the rest,
    where `loop` reads and writes its arrays in place as `_plan(in_place=True)` allows, and
    the range holds at least `MIN_SHIFTED_VECTORS` vectors (else one scalar loop); returns
    False, emitting nothing, where the plan does not apply."""
    plan = _plan(loop, lanes, in_place=True)
    if plan is None:
        return False
    _guarded_register_loop(loop, plan, start, end, lanes, copy_body, whole_vectors=False)
    return True


def shifted_row(
    loop: ir.Operation,
    first: ir.Value,
    aligned: ir.Value,
    end: ir.Value,
    lanes: int,
    copy_body: Callable[[ir.Operation, scf.ForOp], None],
    *,
    in_place: bool,
) -> bool:
    """At the insertion point: all of `loop`'s iterations `[first, end)` (`aligned` where the
    store is aligned, less than a vector past `first`) as vectors: the register loop over the
    whole vectors from `aligned`, a masked vector for the iterations before it and one for
    those after the last whole vector (`_Vectors.masked_iteration`), where the plan applies
    (`in_place`: as `_plan` allows), its lanes may run masked (`_maskable`) and the whole
    vectors number at least `MIN_SHIFTED_VECTORS` (else one scalar loop); returns False,
    emitting nothing, where the plan or the masks do not apply."""
    plan = _plan(loop, lanes, in_place=in_place)
    if plan is None or not _maskable(loop):
        return False
    width = arith.constant(ir.IndexType.get(), lanes)
    count = arith.subi(end, aligned)
    guard = _if_enough_vectors(loop, count, first, end, lanes, copy_body)
    with ir.InsertionPoint(guard.then_block):
        stop = arith.subi(end, arith.remui(count, width))  # past the last whole vector
        vectors = _Vectors(loop, plan, aligned, lanes)
        head = scf.IfOp(arith.cmpi(arith.CmpIPredicate.sgt, aligned, first))
        with ir.InsertionPoint(head.then_block):
            vectors.masked_iteration(arith.subi(aligned, width), first, end)
            scf.YieldOp([])
        _register_loop(vectors, aligned, arith.subi(stop, width))
        tail = scf.IfOp(arith.cmpi(arith.CmpIPredicate.slt, stop, end))
        with ir.InsertionPoint(tail.then_block):
            vectors.masked_iteration(stop, first, end)
            scf.YieldOp([])
        scf.YieldOp([])
    return True


def _if_enough_vectors(
    loop: ir.Operation,
    count: ir.Value,
    first: ir.Value,
    end: ir.Value,
    lanes: int,
    copy_body: Callable[[ir.Operation, scf.ForOp], None],
) -> scf.IfOp:
    """An `scf.if` on `count` holding at least `MIN_SHIFTED_VECTORS` vectors, its then-block
    left for the vectors to fill (and yield), its else-block `loop`'s iterations `[first, end)`
    as one scalar loop."""
    index = ir.IndexType.get()
    enough = arith.cmpi(
        arith.CmpIPredicate.sge, count, arith.constant(index, MIN_SHIFTED_VECTORS * lanes)
    )
    guard = scf.IfOp(enough, [], has_else=True)
    with ir.InsertionPoint(guard.else_block):
        whole = scf.ForOp(first, end, arith.constant(index, 1))
        copy_body(loop, whole)
        scf.YieldOp([])
    return guard


# Elements narrower than this have no masked loads and stores of their own before AVX-512BW
# (LLVM splits them into a branch per lane).
_MIN_MASKED_ELEMENT_BITS = 32


def _maskable(loop: ir.Operation) -> bool:
    """Whether the body may run on lanes outside its iterations, masked: nothing in it traps
    on any value, and the arrays it loads and stores have elements of 32 bits or more."""
    for op in loop.regions[0].blocks[0].operations:
        op = op.operation
        if op.name in INTEGER_DIVISIONS:  # the masked-off lanes hold zeros
            return False
        if op.name in ("affine.load", "affine.store"):
            memref = op.operands[0 if op.name == "affine.load" else 1]
            element = ir.MemRefType(memref.type).element_type
            if getattr(element, "width", 0) < _MIN_MASKED_ELEMENT_BITS:
                return False
    return True


def _guarded_register_loop(
    loop: ir.Operation,
    plan: _Plan,
    start: ir.Value,
    end: ir.Value,
    lanes: int,
    copy_body: Callable[[ir.Operation, scf.ForOp], None],
    *,
    whole_vectors: bool,
) -> None:
    """`[start, end)` as the register loop where it holds at least `MIN_SHIFTED_VECTORS`
    vectors, else as one scalar loop; unless `whole_vectors` (the range is a multiple of
    `lanes`), the iterations past the last whole vector in a scalar loop after it."""
    index = ir.IndexType.get()
    one = arith.constant(index, 1)
    width = arith.constant(index, lanes)
    count = arith.subi(end, start)
    guard = _if_enough_vectors(loop, count, start, end, lanes, copy_body)
    with ir.InsertionPoint(guard.then_block):
        # past the last whole vector
        stop = end if whole_vectors else arith.subi(end, arith.remui(count, width))
        _register_loop(_Vectors(loop, plan, start, lanes), start, arith.subi(stop, width))
        if not whole_vectors:
            rest = scf.ForOp(stop, end, one)
            copy_body(loop, rest)
        scf.YieldOp([])


def _subscripts(op: ir.Operation, iv_value: ir.Value, shift: int) -> list[ir.Value]:
    """The subscripts of access `op` with the loop variable bound to `iv_value`, the last one
    plus `shift`."""
    body_iv = op.block.arguments[0]
    first = 2 if op.name == "affine.store" else 1
    operands = [iv_value if value == body_iv else value for value in list(op.operands)[first:]]
    amap = ir.AffineMapAttr(op.attributes["map"]).value
    index = ir.IndexType.get()
    results = list(amap.results)
    results[-1] = results[-1] + ir.AffineConstantExpr.get(shift)
    return [
        affine.AffineApplyOp(
            ir.AffineMap.get(amap.n_dims, amap.n_symbols, [result]), operands, results=[index]
        ).result
        for result in results
    ]


class _Vectors:
    """The vector form of `loop`'s body under `plan`: the invariant values (broadcasts,
    loads the body makes at one element), made once at the insertion point of construction,
    and the body's ops on vectors of `lanes` iterations."""

    def __init__(self, loop: ir.Operation, plan: _Plan, start: ir.Value, lanes: int) -> None:
        self.loop, self.plan, self.lanes = loop, plan, lanes
        self.body = loop.regions[0].blocks[0]
        self.shifted = {key: row for key, row in plan.rows.items() if row.shifted(lanes)}
        self.broadcasts: dict[ir.Value, ir.Value] = {}
        self.mapping: dict[ir.Value, ir.Value] = {}
        for op in plan.invariant_loads:
            indices = _subscripts(op, start, 0)  # the subscripts do not use the variable
            scalar = memref_dialect.LoadOp(op.operands[0], indices).result
            self.mapping[op.results[0]] = self.broadcast(scalar)
        for op in self.body.operations:
            op = op.operation
            if op.name == "arith.constant":
                self.mapping[op.results[0]] = self.broadcast(op.clone().results[0])
            elif op.name.startswith(_ELEMENTWISE_PREFIXES):
                for value in op.operands:
                    if value not in self.mapping and not defined_in_loop_body(value, self.body):
                        self.mapping[value] = self.broadcast(value)

    def vector_of(self, type_: ir.Type) -> ir.VectorType:
        return ir.VectorType.get([self.lanes], type_)

    def broadcast(self, value: ir.Value) -> ir.Value:
        found = self.broadcasts.get(value)
        if found is None:
            found = vector.BroadcastOp(self.vector_of(value.type), value).result
            self.broadcasts[value] = found
        return found

    def load(
        self, row: _Row, at: ir.Value, element: int, mask: range | ir.Value | None = None
    ) -> ir.Value:
        """The vector of `row` whose first lane is element `at + element` of the loop's
        variable (the row's load with offset `element`); with `mask`, only those lanes (a
        range of them, or an i1 vector), the others zero."""
        indices = _subscripts(row.load, at, element - row.offset)
        type_ = self.vector_of(row.load.results[0].type)
        if mask is None:
            return vector.LoadOp(type_, row.memref, indices).result
        if isinstance(mask, range):
            mask_type = ir.VectorType.get([self.lanes], ir.IntegerType.get_signless(1))
            flags = ", ".join("true" if lane in mask else "false" for lane in range(self.lanes))
            mask = arith.constant(mask_type, ir.Attribute.parse(f"dense<[{flags}]> : {mask_type}"))
        zero = arith.constant(
            type_, ir.DenseElementsAttr.get_splat(type_, _zero(row.load.results[0].type))
        )
        return vector.MaskedLoadOp(type_, row.memref, indices, mask, zero).result

    def iteration(
        self,
        j: ir.Value,
        windows: dict[RowKey, tuple[ir.Value | None, ir.Value, ir.Value | None]],
        mask: ir.Value | None = None,
    ) -> None:
        """The body on the vector of iterations from `j`, the shifted rows' elements taken
        from `windows` (each row's vectors before, at and after `j`); with `mask`, only its
        lanes' iterations load (rows not shifted) and store."""
        values = dict(self.mapping)
        plan = self.plan
        for op in self.body.operations:
            op = op.operation
            name = op.name
            if name in ("affine.yield", "arith.constant") or op in plan.invariant_loads:
                continue
            if name == "affine.load":
                key, offset = plan.load_rows[op]
                window = windows.get(key)
                values[op.results[0]] = (
                    self.load(plan.rows[key], j, offset, mask)
                    if window is None
                    else _from_window(window, offset, self.lanes)
                )
            elif name == "affine.store":
                indices = _subscripts(op, j, 0)
                if mask is None:
                    vector.StoreOp(values[op.operands[0]], op.operands[1], indices)
                else:
                    vector.MaskedStoreOp(op.operands[1], indices, mask, values[op.operands[0]])
            else:
                copy = ir.Operation.create(
                    name,
                    results=[self.vector_of(result.type) for result in op.results],
                    operands=[values[value] for value in op.operands],
                    attributes={key: op.attributes[key] for key in op.attributes},
                )
                for old, new in zip(op.results, copy.results, strict=True):
                    values[old] = new

    def masked_iteration(self, j: ir.Value, first: ir.Value, end: ir.Value) -> None:
        """The body on the vector of iterations from `j`, only those in `[first, end)`: every
        load masked to the elements those iterations read (a shifted row's vectors to the
        lanes between its first and last element read), the stores to those iterations."""
        windows: dict[RowKey, tuple[ir.Value | None, ir.Value, ir.Value | None]] = {}
        width = self.lanes
        for key, row in self.shifted.items():
            low, high = min(row.offsets), max(row.offsets)
            read = (_plus(first, low), _plus(end, high))
            windows[key] = (
                self._masked_vector(row, j, -width, read) if low < 0 else None,
                self._masked_vector(row, j, 0, read),
                self._masked_vector(row, j, width, read) if high > 0 else None,
            )
        self.iteration(j, windows, _lanes_between(j, first, end, width))

    def _masked_vector(
        self, row: _Row, j: ir.Value, shift: int, read: tuple[ir.Value, ir.Value]
    ) -> ir.Value:
        """`row`'s vector from element `j + shift`, only its lanes in `[read[0], read[1])`."""
        at = _plus(j, shift)
        return self.load(row, at, 0, _lanes_between(at, *read, self.lanes))


def _plus(value: ir.Value, constant: int) -> ir.Value:
    if constant == 0:
        return value
    return arith.addi(value, arith.constant(ir.IndexType.get(), constant))


def _lanes_between(at: ir.Value, low: ir.Value, high: ir.Value, lanes: int) -> ir.Value:
    """The i1 vector of the lanes `l` with `low <= at + l < high`."""
    index = ir.IndexType.get()
    type_ = ir.VectorType.get([lanes], index)
    steps = arith.constant(type_, ir.Attribute.parse(f"dense<{list(range(lanes))}> : {type_}"))
    positions = arith.addi(vector.BroadcastOp(type_, at).result, steps)
    above = arith.cmpi(arith.CmpIPredicate.sge, positions, vector.BroadcastOp(type_, low).result)
    below = arith.cmpi(arith.CmpIPredicate.slt, positions, vector.BroadcastOp(type_, high).result)
    return arith.andi(above, below)


def _register_loop(vectors: _Vectors, start: ir.Value, last: ir.Value) -> None:
    """The vector loop over `[start, last]` (whole vectors) with the shifted rows' vectors
    carried from one iteration to the next, its last iteration peeled. The vector before the
    first iteration and the one after the last are masked loads of the lanes the shifts use
    (elements the scalar loop reads), so no load strays past the row's elements."""
    loop, plan, lanes = vectors.loop, vectors.plan, vectors.lanes
    index = ir.IndexType.get()
    shifted = vectors.shifted
    # the vectors carried into the first iteration
    initial: list[ir.Value] = []
    layout: list[tuple[RowKey, str]] = []
    for key, row in shifted.items():
        low = min(row.offsets)
        if low < 0:  # the vector before `start`: its last -low lanes
            initial.append(vectors.load(row, start, -lanes, range(lanes + low, lanes)))
            layout.append((key, "before"))
        if max(row.offsets) > 0:  # the vector at `start`, carried
            initial.append(vectors.load(row, start, 0))
            layout.append((key, "at"))

    next_rows = _rows_of_next_iteration(loop, plan)

    def iteration(j: ir.Value, carried_in: list[ir.Value], peeled: bool) -> list[ir.Value]:
        """The body on the vector of iterations from `j`; returns the vectors to carry."""
        carried = dict(zip(layout, carried_in, strict=True))
        windows: dict[RowKey, tuple[ir.Value | None, ir.Value, ir.Value | None]] = {}
        for key, row in shifted.items():
            before = carried.get((key, "before"))
            high = max(row.offsets)
            if high > 0:
                at = carried[(key, "at")]
                # the last iteration's vector after: its first `high` lanes
                after: ir.Value | None = vectors.load(
                    row, j, lanes, range(high) if peeled else None
                )
            else:
                at = vectors.load(row, j, 0)
                after = None
            windows[key] = (before, at, after)
        if not peeled:
            for row, shifts in next_rows:
                indices = _subscripts(row.load, j, PREFETCH_AHEAD * lanes - row.offset)
                for position, shift in shifts.items():
                    indices[position] = arith.addi(indices[position], arith.constant(index, shift))
                memref_dialect.PrefetchOp(row.memref, indices, False, 3, True)
        vectors.iteration(j, windows)
        carried_out: list[ir.Value] = []
        for key, kind in layout:
            before, at, after = windows[key]
            carried_out.append(at if kind == "before" else _present(after))
        return carried_out

    sweep = scf.ForOp(start, last, arith.constant(index, lanes), initial)
    with ir.InsertionPoint(sweep.body):
        scf.YieldOp(iteration(sweep.induction_variable, list(sweep.inner_iter_args), False))
    iteration(last, list(sweep.results), True)


def _rows_of_next_iteration(loop: ir.Operation, plan: _Plan) -> list[tuple[_Row, dict[int, int]]]:
    """The rows the next iteration of the loop around `loop` reads that this one does not, as
    (a row read now, the constants to add to its outer subscripts, by position): for a 2-D
    sweep, the row past those it reads (`A[i + 2]` where `i - 1 .. i + 1` are read).
    Rows whose last subscript moves with the loop around are left out."""
    outer = loop.parent
    while outer is not None and outer.name != "affine.for":
        if outer.name not in ("affine.if", "scf.if"):
            return []
        outer = outer.parent
    if outer is None:
        return []
    variable = outer.regions[0].blocks[0].arguments[0]
    step = ir.IntegerAttr(outer.attributes["step"]).value
    found: list[tuple[_Row, dict[int, int]]] = []
    for (memref, subscripts, moving), row in plan.rows.items():
        if any(value == variable for value, _ in moving):
            continue
        shifts: dict[int, int] = {}
        moved: list[Linear] = []
        for position, (terms, constant) in enumerate(subscripts):
            coefficient = dict(terms).get(variable, 0)
            if coefficient:
                shifts[position] = coefficient * step
            moved.append((terms, constant + coefficient * step))
        if (
            shifts
            and (memref, tuple(moved), moving) not in plan.rows
            and _bytes_apart(memref.type, shifts) >= PREFETCH_MIN_STEP_BYTES
        ):
            found.append((row, shifts))
    return found


def _bytes_apart(memref_type: ir.Type, shifts: dict[int, int]) -> int:
    """How far apart in memory two elements of a row-major `memref_type` are whose subscripts
    differ by `shifts` (by position); 0 where the extents it takes are not known."""
    if not isinstance(memref_type, ir.MemRefType):
        return 0
    shape = list(memref_type.shape)
    element = memref_type.element_type
    width = getattr(element, "width", 0)
    total = 0
    for position, shift in shifts.items():
        inner = shape[position + 1 :]
        if any(ir.ShapedType.is_dynamic_size(extent) for extent in inner):
            return 0
        stride = 1
        for extent in inner:
            stride *= extent
        total += shift * stride
    return abs(total) * width // 8


def _from_window(
    window: tuple[ir.Value | None, ir.Value, ir.Value | None], offset: int, lanes: int
) -> ir.Value:
    """The vector of a shifted row at `offset` from its window (vector before, at, after the
    iteration's elements)."""
    before, at, after = window
    if offset == 0:
        return at
    if offset < 0:
        return vector.shuffle(_present(before), at, [lanes + offset + k for k in range(lanes)])
    return vector.shuffle(at, _present(after), [offset + k for k in range(lanes)])


def _present(value: ir.Value | None) -> ir.Value:
    assert value is not None
    return value


def _zero(element: ir.Type) -> ir.Attribute:
    if isinstance(element, ir.FloatType):
        return ir.FloatAttr.get(element, 0.0)
    return ir.IntegerAttr.get(element, 0)
