"""schedule-split-statements: a reduction statement whose right-hand side reads several access
patterns → two statements, the right-hand side stored into a scratchpad and the reduction reading
it back (Polygeist's statement splitting); nothing is reordered, so results are bit-for-bit equal.

Why (the Polygeist thesis, 6.3.4): in a contraction such as `C[i][j] += A[i][k] * B[k][j]` in an
`i, j, k` nest, the update of `C[i][j]` carries a dependence along `k`, so a Pluto-like scheduler
keeps `k` innermost, although `(k, i, j)` would reuse `A[i][k]` and stream `B[k][j]`. Computed as
its own statement into a scratchpad expanded over the loops it depends on, `M[i][j][k] = A[i][k] *
B[k][j]`, the product carries no dependence at all and the scheduler may order it freely; what is
left, `C[i][j] += M[i][j][k]`, is a trivial reduction.

An `affine.store` is split when all of these hold:
- it lies directly in the innermost of at least 3 `affine.for` loops, and nothing but
  `affine.for` loops surrounds it up to its function (of one block);
- its subscripts use the IV of every loop around it but the innermost, and not the innermost one
  (a reduction along the innermost loop);
- in its stored value's backward slice inside the innermost loop, less the ops that depend on the
  load of the stored location itself (the accumulator), there is exactly one maximal value that
  those ops read (the right-hand side; the stored value itself when there is no accumulator);
- that slice holds only `affine.load`, `affine.apply`, `arith` and `math` ops (no side effects,
  nothing non-affine) and its values come from the loops' IVs, function arguments or code outside
  the innermost loop (no `iter_args`);
- the right-hand side reads at least two access patterns (loads that differ in memref, map or
  subscript operands): a single one is elementwise, with nothing for the scheduler to gain;
- the scratchpad is proven, at compile time, to take at most `max_scratchpad_bytes`.

The scratchpad has one dimension per loop whose IV the right-hand side depends on (through its
loads' subscripts and any value computed in the nest), outermost first, indexed by the IV less
the least value it takes. Its extents come from the iteration domain (isl): where the bounds are
symbolic, extent and offset are affine functions of the symbols when isl finds one closed form,
and the scratchpad is a `memref.alloc` with dynamic sizes, placed at the top level once its
symbols are defined and freed by a `memref.dealloc` before every return. The size limit is
checked on the largest extents the domain allows, bounding the loops by the static extents of
the arrays the statement reads and writes (an access beyond them is undefined behaviour
already); every dynamic size is clamped to that bound and to 0. A scratchpad of static shape is a
`memref.alloca` at function entry when it is small (a `memref.alloc` otherwise, off the stack).

The new statement (`affine.store` of the right-hand side into the scratchpad) goes right before
the first op of the reduction that reads the right-hand side, followed by the `affine.load` that
now feeds the reduction. Both keep the store's location; the new store's is a `NameLoc`
`"<name>_rhs"` around the store's file location when the store's is named `"<name>"`, so the
scheduling model names the new statement after the C statement.

Options:
    max_scratchpad_bytes: do not split a statement whose scratchpad may exceed this size.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import islpy as isl
from mlir import ir
from mlir.dialects import affine, memref

from polyflow.ir.names import NOT_AFFINE_ATTR

DEFAULT_MAX_SCRATCHPAD_BYTES = 64 * 1024 * 1024
# Scratchpads of static shape up to this size live on the stack (an 8 MiB main stack, and OpenMP
# worker stacks of a few MiB, must keep room for everything else).
_STACK_BYTES = 64 * 1024
MIN_LOOPS = 3

# Ops a right-hand side (and the reduction around it) may be made of: pure, or affine reads.
_PURE_PREFIXES = ("arith.", "math.")
_AFFINE_OPS = frozenset({"affine.load", "affine.apply"})

# A linear form over the isl parameters: ({parameter name: coefficient}, constant).
Linear = tuple[dict[str, int], int]


class Decline(Exception):
    """Why a store is not split (a statement that does not match the heuristic, or a domain the
    pass cannot bound): the store is left as it was."""


# ---------------------------------------------------------------------------------------------
# Small IR queries


def _defining_op(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def _is_within(op: ir.Operation, ancestor: ir.Operation) -> bool:
    parent = op.parent
    while parent is not None:
        if parent.operation == ancestor:
            return True
        parent = parent.parent
    return False


def _map_and_operands(op: ir.Operation) -> tuple[ir.AffineMap, list[ir.Value]]:
    """An `affine.load`/`affine.store`/`affine.apply`'s map and its dim and symbol operands."""
    first = {"affine.store": 2, "affine.load": 1}.get(op.name, 0)
    return ir.AffineMapAttr(op.attributes["map"]).value, list(op.operands)[first:]


def _used_positions(expr: ir.AffineExpr, n_dims: int, out: set[int]) -> None:
    """Add to `out` the operand positions `expr` uses (symbols after the dims)."""
    if isinstance(expr, ir.AffineDimExpr):
        out.add(expr.position)
    elif isinstance(expr, ir.AffineSymbolExpr):
        out.add(n_dims + expr.position)
    elif isinstance(expr, ir.AffineBinaryExpr):
        _used_positions(expr.lhs, n_dims, out)
        _used_positions(expr.rhs, n_dims, out)


def _used_operands(amap: ir.AffineMap, operands: Sequence[ir.Value]) -> list[ir.Value]:
    positions: set[int] = set()
    for expr in amap.results:
        _used_positions(expr, amap.n_dims, positions)
    return [operands[p] for p in sorted(positions)]


def _access_key(load: ir.Operation) -> tuple[Any, ...]:
    """What makes two loads the same access pattern: memref, map and subscript operands."""
    amap, operands = _map_and_operands(load)
    return (load.operands[0], str(amap), *operands)


def _element_bytes(element: ir.Type) -> int | None:
    if isinstance(element, ir.IndexType):
        return 8
    if isinstance(element, ir.FloatType | ir.IntegerType):
        return (element.width + 7) // 8
    return None  # vectors, complex...: not a scratchpad element this pass makes


def _loops_around(store: ir.Operation) -> tuple[list[ir.Operation], ir.Operation]:
    """The `affine.for` loops around `store`, outermost first, and its function."""
    loops: list[ir.Operation] = []
    parent = store.parent
    while parent is not None and parent.operation.name == "affine.for":
        loops.append(parent.operation)
        parent = parent.parent
    if parent is None or parent.operation.name != "func.func":
        raise Decline("not nested in affine.for loops only")
    return loops[::-1], parent.operation


# ---------------------------------------------------------------------------------------------
# The statement: accumulator, right-hand side, and the loops it depends on


@dataclass
class _Statement:
    """One `affine.store` inside its loop nest, read off the IR."""

    store: ir.Operation
    loops: list[ir.Operation]
    ivs: dict[ir.Value, int] = field(default_factory=dict)  # IV → loop depth

    @property
    def body(self) -> ir.Block:
        return self.loops[-1].regions[0].blocks[0]

    def slice(self, value: ir.Value) -> list[ir.Operation]:
        """The ops of the innermost loop body that `value` is computed from, in block order."""
        found: set[ir.Operation] = set()
        work = [value]
        while work:
            op = _defining_op(work.pop())
            if op is None or op in found or op.block != self.body:
                continue
            found.add(op)
            work.extend(op.operands)
        return [op.operation for op in self.body.operations if op.operation in found]

    def check_ops(self, ops: Sequence[ir.Operation]) -> None:
        """Decline unless every op is pure or an affine read, and reads only IVs, function
        arguments and values from outside the innermost loop or from the slice itself."""
        for op in ops:
            if NOT_AFFINE_ATTR in op.attributes:
                raise Decline(f"'{op.name}' is not affine")
            if op.name not in _AFFINE_OPS and not op.name.startswith(_PURE_PREFIXES):
                raise Decline(f"'{op.name}' may have side effects or is not affine")
            if len(op.regions) > 0:
                raise Decline(f"'{op.name}' has regions")
            for operand in op.operands:
                owner = operand.owner
                if isinstance(owner, ir.Block) and operand not in self.ivs:
                    if owner.owner.operation.name != "func.func":
                        raise Decline("the right-hand side reads a loop-carried value")

    def depth_of(self, value: ir.Value, memo: dict[ir.Value, frozenset[int]]) -> frozenset[int]:
        """The depths of the loops whose IVs `value` depends on (on all loops around its
        definition when that is an op with regions or a block argument other than an IV)."""
        known = memo.get(value)
        if known is not None:
            return known
        memo[value] = frozenset()  # no cycles in SSA outside regions; this only stops a revisit
        if value in self.ivs:
            result = frozenset({self.ivs[value]})
        else:
            owner = value.owner
            op = owner.owner.operation if isinstance(owner, ir.Block) else owner.operation
            if op.name == "func.func" or (
                op != self.loops[0] and not _is_within(op, self.loops[0])
            ):
                result = frozenset()  # defined outside the nest: the same for all of it
            elif isinstance(owner, ir.Block) or len(op.regions) > 0:
                result = frozenset(d for d, loop in enumerate(self.loops) if _is_within(op, loop))
                if op in self.loops:
                    result |= {self.loops.index(op)}
            else:
                deps: set[int] = set()
                for operand in op.operands:
                    deps |= self.depth_of(operand, memo)
                result = frozenset(deps)
        memo[value] = result
        return result


@dataclass(frozen=True)
class _Split:
    """What a split needs: the right-hand side, its readers and the scratchpad's shape."""

    store: ir.Operation
    root: ir.Value  # the right-hand side
    readers: tuple[ir.Operation, ...]  # the ops of the reduction that read it
    ivs: tuple[ir.Value, ...]  # one scratchpad dimension per IV, outermost first
    offsets: tuple[Linear, ...]  # least value of each IV
    sizes: tuple[Linear | None, ...]  # a dynamic extent, or None for the static one
    extents: tuple[int, ...]  # the largest extents, the static shape
    params: dict[str, ir.Value]
    element: ir.Type
    bytes: int


def _right_hand_side(stmt: _Statement) -> tuple[ir.Value, list[ir.Operation], list[ir.Operation]]:
    """The right-hand side of `stmt`'s store, the ops of the reduction that read it, and the
    right-hand side's own slice."""
    store = stmt.store
    stored = store.operands[0]
    whole = stmt.slice(stored)
    if not whole:
        raise Decline("the stored value is not computed in the innermost loop")
    stmt.check_ops(whole)
    target = _access_key_of_store(store)
    accumulator: set[ir.Operation] = set()  # ops that depend on a load of the stored location
    for op in whole:
        own_load = op.name == "affine.load" and _access_key(op) == target
        if own_load or any(_defining_op(v) in accumulator for v in op.operands):
            accumulator.add(op.operation)
    roots: list[ir.Value] = []
    readers: list[ir.Operation] = []
    if not accumulator:
        roots, readers = [stored], [store]
    for op in whole:
        if op not in accumulator or op.name == "affine.load":
            continue  # a load's operands are subscripts, not data
        for operand in op.operands:
            producer = _defining_op(operand)
            if producer is None or producer.block != stmt.body or producer in accumulator:
                continue
            if operand not in roots:
                roots.append(operand)
            if op not in readers:
                readers.append(op.operation)
    if len(roots) != 1:
        raise Decline(f"{len(roots)} right-hand sides around the accumulator, not 1")
    return roots[0], readers, stmt.slice(roots[0])


def _access_key_of_store(store: ir.Operation) -> tuple[Any, ...]:
    amap, operands = _map_and_operands(store)
    return (store.operands[1], str(amap), *operands)


# ---------------------------------------------------------------------------------------------
# The iteration domain in isl, and the scratchpad's extents


class _Domain:
    """The loops around a statement as isl text: dims `i0, i1...` by depth, parameters `p0...`
    for the top-level values in bounds and subscripts (constants and `affine.apply`s inlined)."""

    def __init__(self, stmt: _Statement, func: ir.Operation) -> None:
        self.stmt = stmt
        self.func_block = func.regions[0].blocks[0]
        self.params: dict[ir.Value, str] = {}
        self.constraints: list[str] = []
        for depth, loop in enumerate(stmt.loops):
            view = loop.opview
            for bound, operands, rel in (
                (view.lowerBoundMap.value, list(view.lowerBoundOperands), ">="),
                (view.upperBoundMap.value, list(view.upperBoundOperands), "<"),
            ):
                for expr in bound.results:
                    self.constraints.append(
                        f"i{depth} {rel} {self.expr(expr, operands, bound.n_dims)}"
                    )

    def value(self, value: ir.Value) -> str:
        if value in self.stmt.ivs:
            return f"i{self.stmt.ivs[value]}"
        owner = value.owner
        if isinstance(owner, ir.Block):
            if owner != self.func_block:
                raise Decline("a bound or subscript uses a loop-carried value")
        else:
            op = owner.operation
            if op.name == "arith.constant" and isinstance(value.type, ir.IndexType):
                return str(ir.IntegerAttr(op.attributes["value"]).value)
            if op.name == "affine.apply":
                amap, operands = _map_and_operands(op)
                if len(amap.results) != 1:
                    raise Decline("a multi-result affine.apply")
                return self.expr(amap.results[0], operands, amap.n_dims)
            if op.block != self.func_block:
                raise Decline("a bound or subscript is neither an IV nor a top-level symbol")
        name = self.params.get(value)
        if name is None:
            name = self.params[value] = f"p{len(self.params)}"
        return name

    def expr(self, expr: ir.AffineExpr, operands: Sequence[ir.Value], n_dims: int) -> str:
        if isinstance(expr, ir.AffineConstantExpr):
            return str(expr.value)
        if isinstance(expr, ir.AffineDimExpr):
            return self.value(operands[expr.position])
        if isinstance(expr, ir.AffineSymbolExpr):
            return self.value(operands[n_dims + expr.position])
        if not isinstance(expr, ir.AffineBinaryExpr):
            raise Decline(f"affine expression {expr}")
        lhs = self.expr(expr.lhs, operands, n_dims)
        rhs = self.expr(expr.rhs, operands, n_dims)
        if isinstance(expr, ir.AffineAddExpr):
            return f"({lhs} + {rhs})"
        if isinstance(expr, ir.AffineMulExpr):
            if isinstance(expr.rhs, ir.AffineConstantExpr):
                return f"({rhs} * {lhs})"  # isl wants the constant factor first
            if isinstance(expr.lhs, ir.AffineConstantExpr):
                return f"({lhs} * {rhs})"
            raise Decline(f"semi-affine expression {expr}")
        if not isinstance(expr.rhs, ir.AffineConstantExpr):
            raise Decline(f"semi-affine expression {expr}")
        if isinstance(expr, ir.AffineModExpr):
            return f"({lhs} mod {expr.rhs.value})"
        if isinstance(expr, ir.AffineFloorDivExpr):
            return f"floor({lhs} / {expr.rhs.value})"
        return f"ceil({lhs} / {expr.rhs.value})"

    def in_bounds(self, access: ir.Operation) -> list[str]:
        """Each subscript of `access` lies within its memref's static extents."""
        shaped = ir.MemRefType(access.operands[1 if access.name == "affine.store" else 0].type)
        amap, operands = _map_and_operands(access)
        out = []
        for dim, expr in enumerate(amap.results):
            if not shaped.is_dynamic_dim(dim):
                text = self.expr(expr, operands, amap.n_dims)
                out.append(f"0 <= {text} < {shaped.get_dim_size(dim)}")
        return out

    def set(self, extra: Sequence[str] = ()) -> isl.Set:
        dims = ", ".join(f"i{d}" for d in range(len(self.stmt.loops)))
        params = ", ".join(self.params.values())
        body = " and ".join([*self.constraints, *extra]) or "true"
        return isl.Set(f"[{params}] -> {{ [{dims}] : {body} }}")


def _var(space_set: isl.Set, depth: int) -> isl.Aff:
    local = isl.LocalSpace.from_space(space_set.get_space())
    return isl.Aff.var_on_domain(local, isl.dim_type.set, depth)


def _linear(aff: isl.Aff) -> Linear | None:
    """The linear form of an integral, division-free `aff` over parameters, else None."""
    if aff.dim(isl.dim_type.div) != 0 or not aff.get_denominator_val().is_one():
        return None
    coefficients: dict[str, int] = {}
    for k in range(aff.dim(isl.dim_type.param)):
        value = aff.get_coefficient_val(isl.dim_type.param, k).to_python()
        if value:
            coefficients[str(aff.get_dim_name(isl.dim_type.param, k))] = int(value)
    return coefficients, int(aff.get_constant_val().to_python())


def _closed_form(pw: isl.PwAff) -> Linear | None:
    """The one affine piece of `pw` as a linear form (None: several pieces, or divisions)."""
    pieces = pw.get_pieces()
    return _linear(pieces[0][1]) if len(pieces) == 1 else None


def _plan(stmt: _Statement, func: ir.Operation, max_bytes: int) -> _Split:
    """The split of `stmt`, or Decline with the reason it does not match."""
    store = stmt.store
    if len(stmt.loops) < MIN_LOOPS:
        raise Decline(f"nested in {len(stmt.loops)} loops, fewer than {MIN_LOOPS}")
    if len(func.regions[0].blocks) != 1:
        raise Decline("the function has more than one block")
    memo: dict[ir.Value, frozenset[int]] = {}
    used: set[int] = set()
    for operand in _used_operands(*_map_and_operands(store)):
        used |= stmt.depth_of(operand, memo)
    innermost = len(stmt.loops) - 1
    if innermost in used:
        raise Decline("the store uses the innermost IV: no reduction along the innermost loop")
    if used != set(range(innermost)):
        raise Decline("the store does not use the IV of every outer loop")

    root, readers, rhs = _right_hand_side(stmt)
    patterns = {_access_key(op) for op in rhs if op.name == "affine.load"}
    if len(patterns) < 2:
        raise Decline(f"{len(patterns)} access pattern(s) on the right-hand side, fewer than 2")
    element = root.type
    element_bytes = _element_bytes(element)
    if element_bytes is None:
        raise Decline(f"no scratchpad of {element}")
    depths = sorted(stmt.depth_of(root, memo))

    domain = _Domain(stmt, func)
    accesses = [store, *(op for op in rhs if op.name == "affine.load")]
    bounded = domain.set([c for access in accesses for c in domain.in_bounds(access)])
    anywhere = bounded.project_out(isl.dim_type.param, 0, bounded.dim(isl.dim_type.param))
    if anywhere.is_empty():
        raise Decline("the statement never runs within the extents of its arrays")
    symbolic = domain.set()
    offsets: list[Linear] = []
    sizes: list[Linear | None] = []
    extents: list[int] = []
    for depth in depths:
        low = anywhere.min_val(_var(anywhere, depth))
        high = anywhere.max_val(_var(anywhere, depth))
        if not (low.is_int() and high.is_int()):
            raise Decline(f"the extent of loop {depth} has no bound known at compile time")
        extents.append(high.to_python() - low.to_python() + 1)
        offsets.append(({}, low.to_python()))
        sizes.append(None)
        try:
            least = _closed_form(symbolic.dim_min(depth))
            most = _closed_form(symbolic.dim_max(depth))
        except isl.Error:  # unbounded without the arrays' extents: the static extent it is
            continue
        if least is None or most is None or (not least[0] and not most[0]):
            continue
        offsets[-1] = least
        names = set(least[0]) | set(most[0])
        coefficients = {n: most[0].get(n, 0) - least[0].get(n, 0) for n in names}
        size = ({n: c for n, c in coefficients.items() if c}, most[1] - least[1] + 1)
        if size[0]:
            sizes[-1] = size
        else:  # a constant extent at a symbolic offset
            extents[-1] = max(1, min(extents[-1], size[1]))
    total = element_bytes * math.prod(extents)
    if total > max_bytes:
        raise Decline(f"the scratchpad may take {total} bytes, more than {max_bytes}")
    return _Split(
        store=store,
        root=root,
        readers=tuple(readers),
        ivs=tuple(stmt.loops[d].opview.induction_variable for d in depths),
        offsets=tuple(offsets),
        sizes=tuple(sizes),
        extents=tuple(extents),
        params={name: value for value, name in domain.params.items()},
        element=element,
        bytes=total,
    )


# ---------------------------------------------------------------------------------------------
# The rewrite


def _affine(form: Linear, symbols: dict[str, int]) -> ir.AffineExpr:
    """`form` as an affine expression over symbols numbered by `symbols`."""
    expr: ir.AffineExpr = ir.AffineConstantExpr.get(form[1])
    for name, coefficient in sorted(form[0].items()):
        term = ir.AffineSymbolExpr.get(symbols[name]) * coefficient
        expr = expr + term
    return expr


def _symbol_numbers(forms: Sequence[Linear]) -> dict[str, int]:
    names = sorted({name for form in forms for name in form[0]})
    return {name: k for k, name in enumerate(names)}


def _statement_location(loc: ir.Location) -> ir.Location:
    """The new statement's location: `"S3_rhs"(file:line:col)` for a store at `"S3"(...)`."""
    if loc.is_a_name():
        return ir.Location.name(f"{loc.name_str}_rhs", childLoc=loc.child_loc)
    return loc


def _insertion_after_symbols(block: ir.Block, values: Sequence[ir.Value]) -> ir.InsertionPoint:
    """Right after the last top-level definition among `values` (the block's start if none)."""
    defining = {_defining_op(v) for v in values} - {None}
    position = -1
    operations = list(block.operations)
    for k, op in enumerate(operations):
        if op.operation in defining:
            position = k
    if position + 1 < len(operations):
        return ir.InsertionPoint(operations[position + 1])
    return ir.InsertionPoint(block)


def _allocate(split: _Split, func: ir.Operation) -> ir.Value:
    """The scratchpad, allocated at the top level and freed before every return if on the heap."""
    loc = split.store.location
    block = func.regions[0].blocks[0]
    dynamic = ir.ShapedType.get_dynamic_size()
    shape = [
        dynamic if size is not None else e
        for size, e in zip(split.sizes, split.extents, strict=True)
    ]
    mtype = ir.MemRefType.get(shape, split.element, loc=loc)
    if all(size is None for size in split.sizes) and split.bytes <= _STACK_BYTES:
        ip = ir.InsertionPoint.at_block_begin(block)
        return memref.AllocaOp(mtype, [], [], loc=loc, ip=ip).result
    forms = [size for size in split.sizes if size is not None]
    ip = _insertion_after_symbols(block, [split.params[name] for name in _symbol_numbers(forms)])
    extents: list[ir.Value] = []
    made: dict[tuple[str, int], ir.Value] = {}
    for form, extent in zip(split.sizes, split.extents, strict=True):
        if form is None:
            continue
        key = (str(sorted(form[0].items())) + str(form[1]), extent)
        if key in made:
            extents.append(made[key])
            continue
        # max(0, min(size, extent)): never negative where the loops do not run, never beyond
        # the bound the size limit was checked on
        numbers = _symbol_numbers([form])
        size = ir.AffineMap.get(
            0, len(numbers), [_affine(form, numbers), ir.AffineConstantExpr.get(extent)]
        )
        symbols = [split.params[name] for name in numbers]
        upper = affine.AffineMinOp(size, symbols, loc=loc, ip=ip).result
        lower = ir.AffineMap.get(1, 0, [ir.AffineDimExpr.get(0), ir.AffineConstantExpr.get(0)])
        made[key] = affine.AffineMaxOp(lower, [upper], loc=loc, ip=ip).result
        extents.append(made[key])
    scratch = memref.AllocOp(mtype, extents, [], loc=loc, ip=ip).result
    for ret in _returns(func):
        memref.DeallocOp(scratch, loc=loc, ip=ir.InsertionPoint(ret))
    return scratch


def _returns(func: ir.Operation) -> Iterator[ir.Operation]:
    for region in func.regions:
        for block in region.blocks:
            for op in block.operations:
                if op.operation.name == "func.return":
                    yield op.operation


def _rewrite(split: _Split, func: ir.Operation) -> None:
    scratch = _allocate(split, func)
    numbers = _symbol_numbers(split.offsets)
    subscripts = [
        ir.AffineDimExpr.get(k) - _affine(offset, numbers) for k, offset in enumerate(split.offsets)
    ]
    amap = ir.AffineMap.get(len(split.ivs), len(numbers), subscripts)
    operands = [*split.ivs, *(split.params[name] for name in numbers)]
    first = split.readers[0]
    ip = ir.InsertionPoint(first)
    loc = split.store.location
    affine.AffineStoreOp(split.root, scratch, operands, amap, loc=_statement_location(loc), ip=ip)
    reloaded = affine.AffineLoadOp(split.element, scratch, operands, amap, loc=loc, ip=ip).result
    for reader in split.readers:
        for k, operand in enumerate(reader.operands):
            if operand == split.root:
                reader.operands[k] = reloaded


def _stores(func: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "affine.store":
            found.append(op)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def explain_statements(
    func_op: ir.Operation, *, max_scratchpad_bytes: int = DEFAULT_MAX_SCRATCHPAD_BYTES
) -> list[tuple[ir.Operation, str | None]]:
    """Each `affine.store` of `func_op` with why it is not split (None: it is split)."""
    out: list[tuple[ir.Operation, str | None]] = []
    for store in _stores(func_op):
        try:
            _plan_store(store, max_scratchpad_bytes)
            out.append((store, None))
        except Decline as why:
            out.append((store, str(why)))
    return out


def _plan_store(store: ir.Operation, max_bytes: int) -> _Split:
    loops, func = _loops_around(store)
    if not loops:
        raise Decline("not in a loop")
    stmt = _Statement(store, loops)
    stmt.ivs = {loop.opview.induction_variable: d for d, loop in enumerate(loops)}
    try:
        return _plan(stmt, func, max_bytes)
    except isl.Error as exc:  # an isl failure is a domain this pass cannot bound
        raise Decline(f"isl: {exc}") from None


def split_statements(
    func_op: ir.Operation, *, max_scratchpad_bytes: int = DEFAULT_MAX_SCRATCHPAD_BYTES
) -> int:
    """Split the statements of `func_op` that match the heuristic (see the module docstring);
    returns how many were split."""
    plans: list[_Split] = []
    for store in _stores(func_op):
        try:
            plans.append(_plan_store(store, max_scratchpad_bytes))
        except Decline:
            continue
    # All planned first: the IR is not changed while it is read. Rewritten last to first, so
    # that allocations stack up in program order and deallocations in the reverse one.
    for split in reversed(plans):
        _rewrite(split, func_op)
    return len(plans)


@dataclass(frozen=True)
class SplitStatements:
    """Reduction statements with several access patterns on their right-hand side → a
    right-hand-side statement into a scratchpad and the reduction reading it (see the module
    docstring). `max_scratchpad_bytes`: the largest scratchpad a split may allocate."""

    name: ClassVar[str] = "schedule-split-statements"
    max_scratchpad_bytes: int = DEFAULT_MAX_SCRATCHPAD_BYTES

    def __call__(self, op: ir.Operation, pass_: Any) -> None:
        target = op.operation
        functions = (
            [target]
            if target.name == "func.func"
            else [
                o.operation
                for region in target.regions
                for block in region.blocks
                for o in block.operations
                if o.operation.name == "func.func"
            ]
        )
        try:
            for fn in functions:
                if len(fn.regions[0].blocks) > 0:
                    split_statements(fn, max_scratchpad_bytes=self.max_scratchpad_bytes)
        except Exception as exc:  # a bug here must fail the pass, not the process
            op.location.emit_error(f"{self.name}: {exc}")
            pass_.signal_pass_failure()


__all__ = [
    "DEFAULT_MAX_SCRATCHPAD_BYTES",
    "Decline",
    "SplitStatements",
    "explain_statements",
    "split_statements",
]
