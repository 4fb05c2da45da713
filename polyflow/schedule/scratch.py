"""schedule-demote-to-memory: the values an affine region keeps in SSA form across loop
iterations, branches or statements move to memory, so that every statement of the region is a
store plus its backward slice (what the polyhedral model, model.py, is made of), and the
function computes the same.

Why: the model has only loads and stores. Polygeist demotes the same way before building its
statements; the regions are those of regions.py, and a region `precheck` rejects is left as it
is.

What moves where:
- an `iter_args` value of an `affine.for` whose result is stored to an array element right after
  the loop, an element that nothing in the loop touches (isl proves other accesses to the array
  address other elements), accumulates in that element (undoing raise-reductions);
- any other goes to a scratchpad with one element per iteration of the loop around that
  `affine.for` (a `memref.alloc` of its trip count before the region, freed after it: the
  iterations no longer share the value, so that loop can move inward; see
  `_Scratch.expanded_home`), or, where there is no such loop, a 0-d scratchpad `memref.alloca`
  at the function entry (an `i8` one for `i1`), as do results of `affine.if`;
- a value computed from memory stays in the statements it reaches when they are in its block and
  nothing up to the last of them may write what it loaded (each statement reads it again, at its
  store); otherwise it, too, goes to a 0-d scratchpad, and so does a value used after the region.

Option `expand` (default true): false gives every carried value that does not accumulate in an
array element a 0-d scratchpad (what `reschedule_function(..., expand_scalars=False)` retries
with). An exception (a bug) may leave a function half demoted: callers work on a copy
(schedule/__init__.py does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import islpy as isl
from mlir import ir
from mlir.dialects import affine, arith, func, memref

from polyflow.ir.aliasing import may_alias
from polyflow.ir.names import REDUCTIONS_ATTR
from polyflow.poly import isl_helpers as ih

from .regions import (
    Namer,
    NotModeled,
    Run,
    ancestor_in,
    block_ops,
    block_owner,
    culprit,
    defining_op,
    find_runs,
    if_condition,
    is_pure,
    loop_bounds,
    operation_of,
    precheck,
    walk,
)

# ---------------------------------------------------------------------------------------------
# Where values live


class _Scratch:
    """Makes 0-d scratchpads at the function entry, and (with `expand`) expanded ones."""

    def __init__(self, func_op: ir.Operation, *, expand: bool = True) -> None:
        self.entry = func_op.regions[0].blocks[0]
        self.expand = expand

    def home(self, value_type: ir.Type, loc: ir.Location) -> Home:
        """A new scratchpad for values of `value_type`. Integers narrower than a byte are kept
        in an `i8` (LLVM lowering stores whole bytes)."""
        elem = value_type
        if isinstance(value_type, ir.IntegerType) and value_type.width < 8:
            elem = ir.IntegerType.get_signless(8)
        mtype = ir.MemRefType.get([], elem)
        op = memref.AllocaOp(
            mtype, [], [], loc=loc, ip=ir.InsertionPoint.at_block_begin(self.entry)
        )
        return Home(op.result, ir.AffineMapAttr.get(ir.AffineMap.get(0, 0, [])), (), value_type)

    def expanded_home(self, value_type: ir.Type, loop: ir.Operation, run: Run) -> Home | None:
        """A scratchpad with one element per iteration of the loop around `loop` (which must
        lie in `run`), for a value `loop` carries: each iteration of the outer loop starts the
        value afresh, so the copies never meet, and the outer loop carries no dependence
        through it (deriche's column passes, a recurrence down each column, can then run row
        by row). On the heap around the run: its size, the outer loop's trip count, is known
        before the run. None when there is no such loop: not in the run, a step other than 1,
        a lower bound that is not a constant, an upper bound that is a min, or one computed
        inside the run."""
        if not self.expand or run.edges is None:
            return None
        if isinstance(value_type, ir.IntegerType) and value_type.width < 8:
            return None
        parent = loop.parent
        outer = parent.operation if parent is not None else None
        if (
            outer is None
            or outer.name != "affine.for"
            or not _inside_span(outer, run.block, *run.edges)
        ):
            return None
        view = outer.opview
        lower, upper = view.lowerBoundMap.value, view.upperBoundMap.value
        lows = list(lower.results)
        if view.step.value != 1 or len(lows) != 1 or len(upper.results) != 1:
            return None
        if not isinstance(lows[0], ir.AffineConstantExpr):
            return None
        before, after = run.edges
        if any(_computed_after(v, run.block, before) for v in view.upperBoundOperands):
            return None
        low = lows[0].value
        loc = loop.location
        ip = (
            ir.InsertionPoint.at_block_begin(run.block)
            if before is None
            else ir.InsertionPoint(_op_after(before))
        )
        upper_value = affine.AffineApplyOp(upper, list(view.upperBoundOperands), loc=loc, ip=ip)
        d0 = ir.AffineDimExpr.get(0)
        # at least one element: an empty outer loop still needs a valid allocation
        trip = ir.AffineMap.get(1, 0, [d0 - low, ir.AffineConstantExpr.get(1)])
        size = affine.AffineMaxOp(trip, [upper_value.result], loc=loc, ip=ip).result
        mtype = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], value_type)
        mem = memref.AllocOp(mtype, [size], [], loc=loc, ip=ip).result
        memref.DeallocOp(mem, loc=loc, ip=ir.InsertionPoint(after))
        index = ir.AffineMap.get(1, 0, [d0 - low])
        iv = outer.regions[0].blocks[0].arguments[0]
        return Home(mem, ir.AffineMapAttr.get(index), (iv,), value_type)


def _inside_span(
    op: ir.Operation, block: ir.Block, before: ir.Operation | None, after: ir.Operation
) -> bool:
    """Whether `op` is (nested in) an op of `block` after `before` (None: from its start) and
    before `after`."""
    top = ancestor_in(op, block)
    if top is None or top == after or not top.is_before_in_block(after):
        return False
    return before is None or before.is_before_in_block(top)


def _computed_after(value: ir.Value, block: ir.Block, before: ir.Operation | None) -> bool:
    """Whether `value` is computed in `block` after `before` (None: the block's start): by an op
    there or nested in one, or as the argument of a block nested in one (a loop's IV)."""
    op = defining_op(value)
    if op is None:
        if value.owner == block:  # an argument of `block` itself is there before any op
            return False
        op = block_owner(value)
    top = ancestor_in(op, block)
    return top is not None and (before is None or not top.is_before_in_block(_op_after(before)))


def _op_after(op: ir.Operation) -> ir.Operation:
    """The op right after `op` in its block (a block ends with a terminator, so there is one)."""
    ops = block_ops(op.block)
    return ops[next(k for k, o in enumerate(ops) if o == op) + 1]


@dataclass(frozen=True)
class Home:
    """Where a value lives in memory: an element `mem[map(operands)]` (holding values of
    `value_type`, widened to the memref's element type when that is wider)."""

    mem: ir.Value
    amap: ir.Attribute
    operands: tuple[ir.Value, ...]
    value_type: ir.Type | None = None

    def load(self, before: ir.Operation, loc: ir.Location) -> ir.Value:
        ip = ir.InsertionPoint(before)
        elem = ir.MemRefType(self.mem.type).element_type
        value = affine.AffineLoadOp(elem, self.mem, list(self.operands), self.amap, loc=loc, ip=ip)
        if self.value_type is not None and self.value_type != elem:
            return arith.TruncIOp(self.value_type, value.result, loc=loc, ip=ip).result
        return value.result

    def store(self, value: ir.Value, before: ir.Operation, loc: ir.Location) -> list[ir.Operation]:
        """Store `value` before `before`; returns the ops made (the first uses `value`)."""
        ip = ir.InsertionPoint(before)
        made: list[ir.Operation] = []
        elem = ir.MemRefType(self.mem.type).element_type
        if self.value_type is not None and self.value_type != elem:
            widen = arith.ExtUIOp(elem, value, loc=loc, ip=ip)
            made.append(widen.operation)
            value = widen.result
        op = affine.AffineStoreOp(value, self.mem, list(self.operands), self.amap, loc=loc, ip=ip)
        return [*made, op.operation]

    @staticmethod
    def of(access: ir.Operation) -> Home:
        first = 2 if access.name == "affine.store" else 1
        operands = list(access.operands)
        return Home(operands[first - 1], access.attributes["map"], tuple(operands[first:]))

    def same(self, other: Home) -> bool:
        return (
            self.mem == other.mem
            and str(self.amap) == str(other.amap)
            and len(self.operands) == len(other.operands)
            and all(a == b for a, b in zip(self.operands, other.operands, strict=True))
        )


def _loads_instead(value: ir.Value, home: Home, skip: Sequence[ir.Operation] = ()) -> None:
    """Every use of `value` (but by `skip`) reads it from `home` instead, right before its user."""
    uses = [(operation_of(use.owner), use.operand_number) for use in value.uses]
    for user, number in uses:
        if any(user == s for s in skip):
            continue
        user.operands[number] = home.load(user, user.location)


def _store_after(
    value: ir.Value, home: Home, op: ir.Operation, loc: ir.Location
) -> list[ir.Operation]:
    """Store `value` to `home` right after `op` (never a terminator); returns the ops made."""
    return home.store(value, _op_after(op), loc)


def _writes(op: ir.Operation, mem: ir.Value | None = None) -> bool:
    """Whether `op` (or an op nested in it) may write memory (that may alias `mem`, if given)."""
    for inner in walk([op]):
        if inner.name in ("affine.store", "memref.store"):
            target = inner.operands[1]
            if mem is None or may_alias(target, mem):
                return True
        elif culprit(inner) is not None:
            return True
    return False


def _touches(op: ir.Operation, home: Home, run: Run) -> bool:
    """Whether `op` or an op nested in it may access the element `home` (an access to its
    memref at an address isl proves different does not count)."""
    for inner in walk([op]):
        if inner.name in ("affine.load", "affine.store"):
            access = Home.of(inner)
            if access.mem == home.mem:
                if not _never_same(inner, home, run):
                    return True
            elif may_alias(access.mem, home.mem):
                return True
        elif culprit(inner) is not None:
            return True
    return False


def _around(op: ir.Operation, run: Run) -> tuple[list[ir.Operation], list[ir.Operation]]:
    """The `affine.for`s (outermost first) and the `affine.if`s whose then-branch holds `op`,
    inside the run."""
    loops: list[ir.Operation] = []
    ifs: list[ir.Operation] = []
    child = op
    while child.block != run.block:
        parent = child.parent.operation
        if parent.name == "affine.for":
            loops.insert(0, parent)
        elif parent.name == "affine.if" and child.block == parent.regions[0].blocks[0]:
            ifs.append(parent)
        child = parent
    return loops, ifs


def _never_same(access: ir.Operation, home: Home, run: Run) -> bool:
    """Whether isl proves that `access` never addresses `home` (whose operands are defined
    outside the loops around `access` or are their IVs), wherever it runs."""
    loops, ifs = _around(access, run)
    names = ih.iterator_names(len(loops))
    ivs = {loop.opview.induction_variable: n for loop, n in zip(loops, names, strict=True)}
    namer = Namer(run.defines)
    try:
        parts: list[str] = []
        for loop, name in zip(loops, names, strict=True):
            parts += loop_bounds(loop, name, namer, ivs)
        for if_op in ifs:
            amap, equalities = if_condition(if_op)
            lhs = namer.map_results(amap, list(if_op.operands), ivs)
            parts += [f"{e} {'=' if eq else '>='} 0" for e, eq in zip(lhs, equalities, strict=True)]
        mine = Home.of(access)
        there = namer.map_results(ir.AffineMapAttr(mine.amap).value, list(mine.operands), ivs)
        here = namer.map_results(ir.AffineMapAttr(home.amap).value, list(home.operands), ivs)
        parts += [f"{a} = {b}" for a, b in zip(there, here, strict=True)]
        params = tuple(namer.params.values())
        formula = " and ".join(f"({p})" for p in parts)
        return bool(ih.statement_set(params, "X", len(loops), formula).is_empty())
    except (NotModeled, isl.Error):
        return False


def _between(first: ir.Operation, last: ir.Operation) -> list[ir.Operation]:
    """The ops strictly between two ops of one block."""
    out: list[ir.Operation] = []
    inside = False
    for op in block_ops(first.block):
        if op == last:
            break
        if inside:
            out.append(op)
        if op == first:
            inside = True
    return out


def _home_of_carried(
    loop: ir.Operation, index: int, run: Run
) -> tuple[Home, ir.Operation, bool] | None:
    """The array element iter_arg `index` of `loop` can live in, as raise-reductions found it:
    the result's one use is a store of it to that element right after the loop (nothing
    between them touches its memref) and nothing in the loop touches the element. Returns the
    element, that store, and whether the init must be stored there first (not when it is a
    load of the element before the loop with no write in between)."""
    view = loop.opview
    init = list(view.inits)[index]
    uses = list(loop.results[index].uses)
    if len(uses) != 1:
        return None
    store = operation_of(uses[0].owner)
    if store.name != "affine.store" or store.block != loop.block or uses[0].operand_number != 0:
        return None
    home = Home.of(store)
    if _touches(loop, home, run):
        return None
    for op in _between(loop, store):  # they would see the element's new value too early
        if any(
            may_alias(Home.of(inner).mem, home.mem)
            for inner in walk([op])
            if inner.name in ("affine.load", "affine.store")
        ) or _writes(op, home.mem):
            return None
    load = defining_op(init)
    loaded = (
        load is not None
        and load.name == "affine.load"
        and load.block == loop.block
        and load.is_before_in_block(loop)
        and Home.of(load).same(home)
        and not any(_writes(op, home.mem) for op in _between(load, loop))
    )
    return home, store, not loaded


def _rebuild_loop(loop: ir.Operation) -> None:
    """Replace `loop` (whose iter_args and results are no longer used) by one without them."""
    view = loop.opview
    with loop.location:  # the IV (a block argument) takes the ambient location
        new = affine.AffineForOp(
            view.lowerBoundMap.value,
            view.upperBoundMap.value,
            view.step,
            None,
            lower_bound_operands=list(view.lowerBoundOperands),
            upper_bound_operands=list(view.upperBoundOperands),
            loc=loop.location,
            ip=ir.InsertionPoint(loop),
        )
    for name in [str(n) for n in loop.attributes]:
        if "." in name and name != REDUCTIONS_ATTR:  # discardable attributes travel along
            new.operation.attributes[name] = loop.attributes[name]
    old_body = loop.regions[0].blocks[0]
    old_body.arguments[0].replace_all_uses_with(new.induction_variable)
    ops = block_ops(old_body)
    for op in ops[:-1]:
        new.body.append(op)
    affine.AffineYieldOp([], loc=ops[-1].location, ip=ir.InsertionPoint(new.body))
    loop.erase()


def _rebuild_if(if_op: ir.Operation) -> None:
    """Replace `if_op` (whose results are no longer used) by one without results."""
    new = ir.Operation.create(
        "affine.if",
        results=[],
        operands=list(if_op.operands),
        attributes={"condition": if_op.attributes["condition"]},
        regions=2,
        loc=if_op.location,
        ip=ir.InsertionPoint(if_op),
    )
    for k in range(2):
        if len(if_op.regions[k].blocks) == 0:
            continue
        old = if_op.regions[k].blocks[0]
        ops = block_ops(old)
        if k == 1 and len(ops) <= 1:
            continue  # an else branch that only yields
        block = new.regions[k].blocks.append()
        for op in ops[:-1]:
            block.append(op)
        affine.AffineYieldOp([], loc=ops[-1].location, ip=ir.InsertionPoint(block))
    if_op.erase()


def _location_of(value: ir.Value, fallback: ir.Location) -> ir.Location:
    op = defining_op(value)
    return fallback if op is None else op.location


# ---------------------------------------------------------------------------------------------
# Demotion


def _demote_loop(loop: ir.Operation, scratch: _Scratch, run: Run) -> None:
    body = loop.regions[0].blocks[0]
    yield_op = block_ops(body)[-1]
    view = loop.opview
    inits = list(view.inits)
    for index in range(len(loop.results)):
        acc = body.arguments[1 + index]
        result = loop.results[index]
        found = _home_of_carried(loop, index, run)
        # the stores made take the location of what they store (a C statement's, usually)
        update = yield_op.operands[index]
        if found is not None:
            home, store, store_init = found
            update_loc = _location_of(update, store.location)
            init_loc = _location_of(inits[index], store.location)
            store.erase()  # the loop now leaves the element where that store would put it
            if store_init:
                home.store(inits[index], loop, init_loc)
        else:
            home = scratch.expanded_home(acc.type, loop, run) or scratch.home(
                acc.type, loop.location
            )
            home.store(inits[index], loop, _location_of(inits[index], loop.location))
            _loads_instead(result, home)
            update_loc = _location_of(update, yield_op.location)
        home.store(update, yield_op, update_loc)
        _loads_instead(acc, home, skip=[yield_op])
    init_ops = [op for op in (defining_op(v) for v in inits) if op is not None]
    _rebuild_loop(loop)
    for op in init_ops:  # a promoted element's load, now unused
        if op.name == "affine.load" and not list(op.results[0].uses):
            op.erase()


def _demote_if(if_op: ir.Operation, scratch: _Scratch) -> None:
    yields = [block_ops(if_op.regions[k].blocks[0])[-1] for k in range(2)]
    for index, result in enumerate(if_op.results):
        home = scratch.home(result.type, if_op.location)
        for y in yields:
            home.store(y.operands[index], y, _location_of(y.operands[index], y.location))
        _loads_instead(result, home)
    _rebuild_if(if_op)


def _reads_memory(value: ir.Value, run: Run, memo: dict[ir.Value, bool]) -> bool:
    """Whether `value` is computed (in the run) from a load."""
    known = memo.get(value)
    if known is not None:
        return known
    op = defining_op(value)
    out = False
    if op is not None and run.holds(op):
        if op.name == "affine.load":
            out = True
        elif is_pure(op):
            out = any(_reads_memory(v, run, memo) for v in op.operands)
    memo[value] = out
    return out


def _stores_reached(value: ir.Value, run: Run) -> list[ir.Operation] | None:
    """The stores that `value` flows into through pure ops (None: it flows elsewhere too)."""
    out: list[ir.Operation] = []
    for use in value.uses:
        user = operation_of(use.owner)
        if not run.holds(user):
            return None
        if user.name == "affine.store" and use.operand_number == 0:
            if not any(user == s for s in out):
                out.append(user)
        elif is_pure(user):
            for result in user.results:
                inner = _stores_reached(result, run)
                if inner is None:
                    return None
                out += [s for s in inner if not any(s == o for o in out)]
        else:
            return None
    return out


def _stays(op: ir.Operation, run: Run) -> bool:
    """Whether the values of `op` (computed from memory) may be recomputed by each statement
    they reach, at its store: the stores are in `op`'s block and no op up to the last of them
    may write what the loads behind `op` read. (A statement's reads count as happening at its
    store, where codegen puts its copy of them.)"""
    stores: list[ir.Operation] = []
    for result in op.results:
        reached = _stores_reached(result, run)
        if reached is None:
            return False
        stores += reached
    if any(store.block != op.block for store in stores):
        return False
    if not stores:
        return True
    last = stores[0]
    for store in stores[1:]:
        if last.is_before_in_block(store):
            last = store
    for load in _loads_behind(op, run):
        if load.block != op.block:
            return False
        mem = Home.of(load).mem
        if any(_writes(o, mem) for o in _between(load, last)):
            return False
    return True


def _loads_behind(op: ir.Operation, run: Run) -> list[ir.Operation]:
    """The loads in the run that `op` is computed from (through pure ops), `op` included."""
    out: list[ir.Operation] = []
    work = [op]
    while work:
        current = work.pop()
        if current.name == "affine.load":
            if not any(current == o for o in out):
                out.append(current)
            continue
        for value in current.operands:
            inner = defining_op(value)
            if (
                inner is not None
                and run.holds(inner)
                and (is_pure(inner) or inner.name == "affine.load")
            ):
                work.append(inner)
    return out


def _demote_carried(run: Run, scratch: _Scratch) -> None:
    """The module docstring's loop-carried values and results of ifs, in `run`."""
    carried = [
        op for op in walk(run.ops) if op.name in ("affine.for", "affine.if") and len(op.results) > 0
    ]
    ops = block_ops(run.block)
    start = next(k for k, o in enumerate(ops) if o == run.ops[0])
    run.edges = (ops[start - 1] if start > 0 else None, _op_after(run.ops[-1]))
    for op in carried:  # outer loops first: an inner loop then sees its init loaded before it
        if op.name == "affine.for":
            _demote_loop(op, scratch, run)
        else:
            _demote_if(op, scratch)


def _demote_values(run: Run, scratch: _Scratch) -> None:
    """The module docstring's values shared by statements or blocks, in `run`."""
    memo: dict[ir.Value, bool] = {}
    ops = list(walk(run.ops))
    for op in reversed(ops):  # later ops first: a value is demoted at its last shared step
        if not op.results or not (is_pure(op) or op.name == "affine.load"):
            continue
        if not any(_reads_memory(v, run, memo) for v in op.results) or _stays(op, run):
            continue
        for result in op.results:
            home = scratch.home(result.type, op.location)
            made = _store_after(result, home, op, op.location)
            _loads_instead(result, home, skip=made[:1])
            run.grow(made[-1])


# ---------------------------------------------------------------------------------------------
# The pass


def demote_to_memory(fn: ir.Operation, *, expand: bool = True) -> None:
    """Move the values `fn`'s affine regions carry across iterations, branches and statements
    to memory (module docstring): `fn` computes the same, and each store then is a statement."""
    fn = fn.operation
    if not isinstance(fn.opview, func.FuncOp) or len(fn.regions[0].blocks) == 0:
        return
    with fn.context, fn.location:
        scratch = _Scratch(fn, expand=expand)
        # Each step on fresh runs: demotion adds loads and stores at the runs' edges.
        for step in (_demote_carried, _demote_values):
            runs, _ = find_runs(fn)
            for run in runs:
                if precheck(run) is None:
                    step(run, scratch)


@dataclass(frozen=True)
class DemoteToMemory:
    """Loop-carried values, results of `affine.if` and values shared by statements → memory (see
    the module docstring); `expand`: carried values get one element per outer iteration."""

    name: ClassVar[str] = "schedule-demote-to-memory"
    expand: bool = True

    def __call__(self, op: ir.Operation, pass_: Any) -> None:
        try:
            demote_to_memory(op, expand=self.expand)
        except Exception as exc:  # a bug here must fail the pass, not the process
            op.location.emit_error(f"schedule-demote-to-memory: {type(exc).__name__}: {exc}")
            pass_.signal_pass_failure()


__all__ = ["DemoteToMemory", "Home", "demote_to_memory"]
