"""raise-reductions: memory updated at a loop-invariant address in an `affine.for` → `iter_args`
(loaded once before the loop, stored once after it), and every loop-carried value marked with
its reduction kind; the program computes exactly what it computed before, in the same order.

A location is promoted only when nothing else in the loop can touch it: every other access to the
same memref is proven (with isl, from the loop and `affine.if` bounds around it) to address
another element, no op in the loop may touch memory unseen (calls, unknown ops), and the memref
has no other use there. The hoisted load runs only where the loop provably runs at least once
(from its bounds and those around it) or the location is accessed next to the loop anyway;
otherwise the loop is wrapped in `affine.if` on its being non-empty.

Every `affine.for`/`scf.for` with `iter_args` then gets `polyflow.reductions = [...]`, one of
`add mul min max and or xor` per iter_arg whose update is a chain of that one associative and
commutative operation (`acc - x` counts as `add`), `none` otherwise.

Options:
    guard: wrap a loop that may not run in `affine.if` (`true`) rather than leave its
        locations in memory (`false`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from mlir import ir
from mlir.dialects import affine

from polyflow.ir.affine import Inexpressible, Linear, linear_form
from polyflow.ir.aliasing import VIEW_OPS, may_alias
from polyflow.ir.names import REDUCTIONS_ATTR

from .domain import Space

# Ops that touch no memory but through their results (a memref operand is still a "use").
_PURE_PREFIXES = ("arith.", "math.", "index.")
_PURE_OPS = frozenset(
    "affine.apply affine.min affine.max affine.for affine.if affine.parallel affine.yield "
    "scf.for scf.if scf.while scf.condition scf.yield "
    "memref.dim memref.alloca memref.alloc memref.get_global ub.poison".split()
)
_ACCESSES = frozenset({"affine.load", "affine.store", "memref.load", "memref.store"})

# Reduction chains: an op name → the kind it applies; one chain uses one kind throughout.
_BINARY = {
    f"arith.{name}": name
    for name in "addf addi mulf muli andi ori xori minimumf maximumf minnumf maxnumf "
    "minsi maxsi minui maxui".split()
}
# `acc - x` is `acc + (-x)`, bit for bit in IEEE arithmetic and exactly for integers.
_SUBTRACT = {"arith.subf": "addf", "arith.subi": "addi"}
# What a kind is reported as; a float select stays apart from maxnumf & co. (they differ on NaN).
_REPORTED = {
    **{name: "add" for name in ("addf", "addi")},
    **{name: "mul" for name in ("mulf", "muli")},
    **{"andi": "and", "ori": "or", "xori": "xor"},
    **{name: "min" for name in ("minimumf", "minnumf", "minsi", "minui", "select-f-min")},
    **{name: "max" for name in ("maximumf", "maxnumf", "maxsi", "maxui", "select-f-max")},
}
# cmp predicate → (value kind, True for "greater"); cmpi's s/u versions select like minsi/maxui.
_CMPF = {2: ("f", True), 3: ("f", True), 4: ("f", False), 5: ("f", False)}  # ogt oge olt ole
_CMPI = {p: ("si" if p < 6 else "ui", p in (4, 5, 8, 9)) for p in range(2, 10)}  # slt ... uge


# ---------------------------------------------------------------------------------------------
# Small IR queries


def _within(op: ir.Operation, ancestor: ir.Operation) -> bool:
    """Whether `op` is nested, at any depth, in the regions of `ancestor`."""
    parent = op.parent
    while parent is not None:
        if parent.operation == ancestor:
            return True
        parent = parent.parent
    return False


def _defined_in(value: ir.Value, loop: ir.Operation) -> bool:
    """Whether `value` is defined by `loop` itself (its IV, its iter_args) or inside it."""
    owner = value.owner
    op = owner.owner.operation if isinstance(owner, ir.Block) else owner.operation
    return op == loop or _within(op, loop)


def _top_level(op: ir.Operation, block: ir.Block) -> ir.Operation:
    """The ancestor of `op` (or `op`) that lies directly in `block`."""
    while op.block != block:
        op = op.parent.operation
    return op


def _contains_call(op: ir.Operation) -> bool:
    """Whether `op` is or holds a call (which may not return, or touch any memory)."""
    found = False

    def visit(inner: ir.Operation) -> ir.WalkResult:
        nonlocal found
        if inner.name in ("func.call", "func.call_indirect", "llvm.call"):
            found = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


# ---------------------------------------------------------------------------------------------
# Affine expressions: exact linear forms, and isl questions


def _subscripts(op: ir.Operation) -> tuple[Linear, ...] | None:
    """The linear forms of an `affine.load`/`affine.store`'s subscripts (None: not linear)."""
    amap, operands = _access_map(op)
    try:
        return tuple(linear_form(e, operands, amap.n_dims) for e in amap.results)
    except Inexpressible:
        return None


def _access_map(op: ir.Operation) -> tuple[ir.AffineMap, list[ir.Value]]:
    first = 2 if op.name == "affine.store" else 1
    return ir.AffineMapAttr(op.attributes["map"]).value, list(op.operands)[first:]


def _never_equal(access: ir.Operation, ref: ir.Operation) -> bool:
    """Whether `access` (somewhere in the loop) never addresses the element that the
    loop-invariant `ref` does: a subscript differs by a nonzero constant, or isl finds no
    iteration around `access` where all subscripts coincide."""
    mine, theirs = _subscripts(access), _subscripts(ref)
    if mine is not None and theirs is not None:
        for (terms_a, const_a), (terms_b, const_b) in zip(mine, theirs, strict=True):
            if terms_a == terms_b and const_a != const_b:
                return True
    space = Space()
    try:
        space.around(access)
        amap, aops = _access_map(access)
        rmap, rops = _access_map(ref)
        equal = [
            f"{space.expr(a, aops, amap.n_dims)} = {space.expr(r, rops, rmap.n_dims)}"
            for a, r in zip(amap.results, rmap.results, strict=True)
        ]
    except Inexpressible:
        return False
    return space.empty(equal)


# ---------------------------------------------------------------------------------------------
# Which locations of a loop to promote


@dataclass
class _Location:
    """A memory element at a loop-invariant address: its loads anywhere in the loop, its stores
    (all directly in the loop body, in program order), and `ref`, a store whose map and operands
    (all defined outside the loop) the hoisted load and the sunk store reuse."""

    memref: ir.Value
    subscripts: tuple[Linear, ...]
    ref: ir.Operation
    loads: list[ir.Operation] = field(default_factory=list)
    stores: list[ir.Operation] = field(default_factory=list)


def _scan(loop: ir.Operation) -> tuple[list[ir.Operation], set[ir.Value]] | None:
    """The memory accesses in `loop` and the memrefs it uses otherwise; None when an op in it
    may touch memory in a way not seen here (a call, an op not known to be pure)."""
    accesses: list[ir.Operation] = []
    other_uses: set[ir.Value] = set()
    unknown = False

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal unknown
        if op.name in _ACCESSES:
            accesses.append(op)
            memref_pos = 1 if op.name.endswith("store") else 0
            other_uses.update(
                v
                for i, v in enumerate(op.operands)
                if i != memref_pos and isinstance(v.type, ir.MemRefType)
            )
        elif op.name.startswith(_PURE_PREFIXES) or op.name in _PURE_OPS or op.name in VIEW_OPS:
            other_uses.update(v for v in op.operands if isinstance(v.type, ir.MemRefType))
        else:
            unknown = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    for op in loop.regions[0].blocks[0].operations:
        op.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
        if unknown:
            return None
    return accesses, other_uses


def _memref_of(op: ir.Operation) -> ir.Value:
    return op.operands[1] if op.name.endswith("store") else op.operands[0]


def _locations(loop: ir.Operation) -> list[_Location]:
    """The locations of `loop` that may live in an iter_arg instead of memory."""
    scanned = _scan(loop)
    if scanned is None:
        return []
    accesses, other_uses = scanned
    body = loop.regions[0].blocks[0]
    found: dict[tuple[ir.Value, tuple[Linear, ...]], _Location] = {}
    for op in accesses:
        if op.name != "affine.store" or op.block != body:
            continue
        memref, subs = _memref_of(op), _subscripts(op)
        if subs is None or _defined_in(memref, loop) or memref in other_uses:
            continue
        if any(_defined_in(v, loop) for v in _access_map(op)[1]):
            continue  # the address is computed in the loop (even if it never changes)
        if (memref, subs) not in found:
            found[(memref, subs)] = _Location(memref, subs, op)
    return [loc for loc in found.values() if _collect(loc, accesses, body)]


def _collect(location: _Location, accesses: list[ir.Operation], body: ir.Block) -> bool:
    """Fill in the loads and stores of `location`; whether it may be promoted: it is loaded,
    stored only directly in the loop body, and no other access can touch it."""
    for op in accesses:
        memref = _memref_of(op)
        mine = op.name.startswith("affine.") and memref == location.memref
        if mine and _subscripts(op) == location.subscripts:
            if op.name == "affine.load":
                location.loads.append(op)
            elif op.block != body:
                return False  # stored only in some iterations, or in an inner loop
            else:
                location.stores.append(op)
        elif may_alias(memref, location.memref) and not (mine and _never_equal(op, location.ref)):
            return False
    return bool(location.loads)


# ---------------------------------------------------------------------------------------------
# Does the loop run at least once?


def _accessed_beside(loop: ir.Operation, location: _Location) -> bool:
    """Whether the block around `loop` accesses `location` anyway, before the loop or after it
    with no call in between: then loading it before and storing it after is harmless."""
    block = loop.block
    after = False
    for op in block.operations:
        op = op.operation
        if op == loop:
            after = True
            continue
        if after and _contains_call(op):
            return False
        same = (
            op.name in ("affine.load", "affine.store")
            and _memref_of(op) == location.memref
            and _subscripts(op) == location.subscripts
        )
        if same:
            return True
    return False


def _runs(loop: ir.Operation) -> bool:
    """Whether `loop` provably runs at least once wherever it is reached."""
    view = loop.opview
    lb, ub = view.lowerBoundMap.value, view.upperBoundMap.value
    lops, uops = list(view.lowerBoundOperands), list(view.upperBoundOperands)
    for low in lb.results:
        for high in ub.results:
            if isinstance(low, ir.AffineConstantExpr) and isinstance(high, ir.AffineConstantExpr):
                if high.value > low.value:
                    continue
                return False
            space = Space()
            try:
                space.around(loop)
                empty = f"{space.expr(high, uops, ub.n_dims)} <= {space.expr(low, lops, lb.n_dims)}"
            except Inexpressible:
                return False
            if not space.empty([empty]):
                return False
    return True


def _nonempty_condition(loop: ir.Operation) -> tuple[ir.IntegerSet, list[ir.Value]]:
    """`ub - lb - 1 >= 0` for each pair of bound results, over the loop's bound operands."""
    view = loop.opview
    lb, ub = view.lowerBoundMap.value, view.upperBoundMap.value
    lops, uops = list(view.lowerBoundOperands), list(view.upperBoundOperands)
    n_dims, n_symbols = lb.n_dims + ub.n_dims, lb.n_symbols + ub.n_symbols
    exprs = [
        ir.AffineExpr.simplify_affine_expr(
            high.shift_dims(ub.n_dims, lb.n_dims).shift_symbols(ub.n_symbols, lb.n_symbols)
            - low
            - 1,
            n_dims,
            n_symbols,
        )
        for low in lb.results
        for high in ub.results
    ]
    cond = ir.IntegerSet.get(n_dims, n_symbols, exprs, [False] * len(exprs))
    operands = lops[: lb.n_dims] + uops[: ub.n_dims] + lops[lb.n_dims :] + uops[ub.n_dims :]
    return cond, operands


# ---------------------------------------------------------------------------------------------
# The rewrite


def _promote(loop: ir.Operation, locations: list[_Location], guard: bool) -> None:
    """Replace `loop` by one that carries `locations` as extra iter_args (see the module doc)."""
    view = loop.opview
    n_old = len(loop.results)
    # what the hoisted load and the sunk store need, read before the stores are erased
    addresses = [_access_map(location.ref) for location in locations]
    load_locs = [location.loads[0].location for location in locations]
    store_locs = [location.stores[-1].location for location in locations]
    types = [location.loads[0].results[0].type for location in locations]
    guard_if: Any = None
    if guard:
        cond, cond_operands = _nonempty_condition(loop)
        with ir.InsertionPoint(loop):
            guard_if = affine.AffineIfOp(
                cond,
                [r.type for r in loop.results],
                cond_operands=cond_operands,
                has_else=n_old > 0,
                loc=loop.location,
            )
        guard_if.then_block.append(loop)
        if n_old:
            with ir.InsertionPoint(guard_if.else_block):
                affine.AffineYieldOp(list(view.inits), loc=loop.location)
            for old, new in zip(loop.results, guard_if.results, strict=True):
                old.replace_all_uses_with(new)

    with ir.InsertionPoint(loop):
        inits = [
            affine.AffineLoadOp(
                types[index],
                location.memref,
                addresses[index][1],
                ir.AffineMapAttr.get(addresses[index][0]),
                loc=load_locs[index],
            ).result
            for index, location in enumerate(locations)
        ]
        new = affine.AffineForOp(
            view.lowerBoundMap.value,
            view.upperBoundMap.value,
            view.step,
            [*view.inits, *inits],
            lower_bound_operands=list(view.lowerBoundOperands),
            upper_bound_operands=list(view.upperBoundOperands),
            loc=loop.location,
        )
    for name in loop.attributes:
        if "." in name:  # discardable attributes (dialect-prefixed) travel with the loop
            new.operation.attributes[name] = loop.attributes[name]

    old_body, body = loop.regions[0].blocks[0], new.body
    for op in list(old_body.operations):
        body.append(op)
    for old_arg, new_arg in zip(old_body.arguments, body.arguments, strict=False):
        old_arg.replace_all_uses_with(new_arg)

    # Walk the body in program order with each location's current value: a load reads it, a
    # store sets it (loads nested in inner ops read the value current where their op is).
    # (Lists, not dicts: an Operation's hash changes as the IR around it changes.)
    current = list(body.arguments[1 + n_old :])
    loads = [
        (_top_level(load, body), load, index)
        for index, location in enumerate(locations)
        for load in location.loads
    ]
    stores = [
        (store, index) for index, location in enumerate(locations) for store in location.stores
    ]
    for top in list(body.operations):
        top = top.operation
        here = [entry for entry in loads if entry[0] == top]
        loads = [entry for entry in loads if not entry[0] == top]  # erased ones drop out
        for _, load, index in here:
            load.results[0].replace_all_uses_with(current[index])
            load.erase()
        stored = [entry for entry in stores if entry[0] == top]
        if stored:
            stores = [entry for entry in stores if not entry[0] == top]
            current[stored[0][1]] = top.operands[0]
            top.erase()
    old_yield = list(body.operations)[-1].operation
    with ir.InsertionPoint(old_yield):
        affine.AffineYieldOp([*old_yield.operands, *current], loc=old_yield.location)
    old_yield.erase()

    for old, result in zip(loop.results, new.results, strict=False):
        old.replace_all_uses_with(result)
    with ir.InsertionPoint(loop):
        for index, location in enumerate(locations):
            affine.AffineStoreOp(
                new.results[n_old + index],
                location.memref,
                addresses[index][1],
                ir.AffineMapAttr.get(addresses[index][0]),
                loc=store_locs[index],
            )
    loop.erase()
    if guard_if is not None:
        with ir.InsertionPoint(guard_if.then_block):
            affine.AffineYieldOp(list(new.results)[:n_old], loc=new.location)


def _promote_all(root: ir.Operation, *, guard: bool) -> int:
    """Promote the locations of every `affine.for` in `root`, inner loops first (so that a
    location carried by an inner loop can be carried further out); returns how many."""
    loops: list[ir.Operation] = []

    def collect(op: ir.Operation) -> ir.WalkResult:
        if op.name == "affine.for":
            loops.append(op.operation)
        return ir.WalkResult.ADVANCE

    root.walk(collect, ir.WalkOrder.POST_ORDER)
    promoted = 0
    for loop in loops:
        locations = _locations(loop)
        if not locations:
            continue
        needs_guard = not all(_accessed_beside(loop, loc) for loc in locations) and not _runs(loop)
        if needs_guard and not guard:
            locations = [loc for loc in locations if _accessed_beside(loop, loc)]
            needs_guard = False
        if locations:
            with loop.location:  # the new loop's block arguments take the loop's location
                _promote(loop, locations, needs_guard)
            promoted += len(locations)
    return promoted


# ---------------------------------------------------------------------------------------------
# Marking


def _dependents(acc: ir.Value, loop: ir.Operation) -> set[ir.Value]:
    """The values in `loop` computed from `acc` (an op with regions counts as using whatever
    its nested ops use)."""
    seen = {acc}
    work = [acc]
    while work:
        value = work.pop()
        for use in value.uses:
            op: Any = use.owner.operation
            while op is not None and op != loop:
                for result in op.results:
                    if result not in seen:
                        seen.add(result)
                        work.append(result)
                op = op.parent.operation if op.parent is not None else None
    return seen


# Reduction kinds of the loops seen so far, by their first result (an Operation's hash changes
# when its attributes do; a Value's does not).
_Kinds = dict[ir.Value, list[str | None]]
_Step = tuple[str, ir.Value, list[ir.Operation]]


def _chain_step(value: ir.Value, dependent: set[ir.Value], inner: _Kinds) -> _Step | None:
    """One link of a reduction chain ending in `value`: (kind, the chain value it consumes, the
    ops that consume it); None when `value` is not such a link."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation
    if op.name in _SUBTRACT:
        lhs, rhs = op.operands
        if lhs in dependent and rhs not in dependent:
            return _SUBTRACT[op.name], lhs, [op]
        return None
    if op.name in _BINARY:
        chain = [v for v in op.operands if v in dependent]
        if len(chain) != 1:
            return None
        return _BINARY[op.name], chain[0], [op]
    if op.name == "arith.select":
        return _select_step(op, dependent)
    if op.name in ("affine.for", "scf.for"):
        kinds = inner.get(op.results[0])
        index = ir.OpResult(value).result_number
        if kinds is None or kinds[index] is None:
            return None
        init = list(op.opview.inits if op.name == "affine.for" else op.opview.initArgs)[index]
        if init not in dependent:
            return None
        kind = kinds[index]
        assert kind is not None
        return kind, init, [op]
    return None


def _select_step(select: ir.Operation, dependent: set[ir.Value]) -> _Step | None:
    """`cmp(a, b) ? a : b` (or `? b : a`) as a min or max link."""
    cond, true_value, false_value = select.operands
    if isinstance(cond.owner, ir.Block) or len(list(cond.uses)) != 1:
        return None
    cmp = cond.owner.operation
    table = {"arith.cmpf": _CMPF, "arith.cmpi": _CMPI}.get(cmp.name)
    pred = int(ir.IntegerAttr(cmp.attributes["predicate"]).value) if table else -1
    if table is None or pred not in table:
        return None
    a, b = cmp.operands
    if a == b or {true_value, false_value} != {a, b}:
        return None
    chain = [v for v in (true_value, false_value) if v in dependent]
    if len(chain) != 1:
        return None
    domain, greater = table[pred]
    # `a > b ? a : b` is max; swapping the arms or the comparison flips it
    largest = (true_value == a) == greater
    extreme = "max" if largest else "min"
    # an integer select is exactly maxsi/minui... (so they may share a chain); a float one is not
    kind = f"select-f-{extreme}" if domain == "f" else extreme + domain
    return kind, chain[0], [cmp, select]


def _classify(loop: ir.Operation, index: int, inner: _Kinds) -> str | None:
    """The kind of reduction iter_arg `index` of `loop` performs (None: merely loop-carried)."""
    body = loop.regions[0].blocks[0]
    acc = body.arguments[1 + index]
    value = list(body.operations)[-1].operation.operands[index]
    if value == acc or len(list(value.uses)) != 1:
        return None  # unchanged, or the running value is also used for something else
    dependent = _dependents(acc, loop)
    kind: str | None = None
    while value != acc:
        step = _chain_step(value, dependent, inner)
        if step is None or (kind is not None and step[0] != kind):
            return None
        kind, value, users = step
        # the chain value feeds this link only: nothing else sees partial results
        owners = [use.owner.operation for use in value.uses]
        if len(owners) != len(users) or any(not any(o == u for u in users) for o in owners):
            return None
    return kind


def _mark_all(root: ir.Operation) -> int:
    """Set `polyflow.reductions` on every loop with iter_args in `root`; returns how many
    iter_args were marked."""
    loops: list[ir.Operation] = []

    def collect(op: ir.Operation) -> ir.WalkResult:
        if op.name in ("affine.for", "scf.for") and len(op.results) > 0:
            loops.append(op.operation)
        return ir.WalkResult.ADVANCE

    root.walk(collect, ir.WalkOrder.POST_ORDER)
    kinds: _Kinds = {}
    for loop in loops:  # inner loops first: an outer chain may run through an inner loop
        kinds[loop.results[0]] = [_classify(loop, i, kinds) for i in range(len(loop.results))]
    for loop in loops:
        names = [_REPORTED.get(k, "none") if k else "none" for k in kinds[loop.results[0]]]
        loop.attributes[REDUCTIONS_ATTR] = ir.ArrayAttr.get(
            [ir.StringAttr.get(n) for n in names]
        )
    return sum(len(k) for k in kinds.values())


def detect_reductions(func_op: ir.Operation | ir.OpView, *, guard: bool = True) -> int:
    """Promote loop-invariant memory locations of the loops in `func_op` (a function, or any op
    around functions) to iter_args, then mark every loop-carried value's reduction kind.

    Returns how many loop-carried values it marked (those it created included)."""
    op = func_op.operation
    _promote_all(op, guard=guard)
    return _mark_all(op)


@dataclass(frozen=True)
class RaiseReductions:
    """Loop-invariant memory updates → `iter_args`; `polyflow.reductions` on every loop-carried
    value (see the module docstring). `guard`: wrap possibly empty loops in `affine.if`."""

    name: ClassVar[str] = "raise-reductions"
    guard: bool = True

    def __call__(self, op: ir.Operation, pass_: Any) -> None:
        try:
            detect_reductions(op, guard=self.guard)
        except Exception as exc:  # a bug here must fail the pass, not the process
            op.location.emit_error(f"raise-reductions: {exc}")
            pass_.signal_pass_failure()


__all__ = ["RaiseReductions", "detect_reductions"]
