"""Values carried across iterations instead of through memory: in an innermost `affine.for`
whose body stores `A[f(j)]` and loads `A[f(j - step)]`, the value the load reads is the one the
store wrote one iteration before, so the loop carries it (`iter_args`) and the load goes; the
first iteration reads the element from memory before the loop, as it did.

Legal where nothing else in the body can write that element in between: every other store to
`A` in the body writes, in the same iteration and in the one before, elements that differ from
it by a nonzero constant in some subscript; every store to another array writes an array that
cannot be `A` (two `noalias` arguments, or two different allocations); the body holds no call,
no region and no access other than `affine.load`/`affine.store`.

Why: a recurrence along the loop (adi's `p[i][j] = -c / (a * p[i][j - 1] + b)`, unrolled over
8 rows) then runs through registers. LLVM's own forwarding (GVN's load PRE, off in polyflow:
see `lowering/llvm_ir.py`; LoopLoadElimination) gave up on 8 rows' stores to one array, so each
row's previous value came back from memory after its store and the 8 divisions stayed scalar.
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
)
from polyflow.ir.aliasing import has_argument_attribute, origin
from polyflow.ir.names import INDEPENDENT_ATTR, NOALIAS_ATTR


@dataclass(frozen=True)
class _Forward:
    load: ir.Operation
    store: ir.Operation


def carry_stored_values(module: ir.Module) -> int:
    """Every innermost `affine.for` of `module` carries the values its loads read back from the
    previous iteration's stores (module docstring); returns how many loads went."""
    removed = 0
    for loop in straight_line_loops(module):
        forwards = _forwards(loop)
        if forwards:
            _carry(loop, forwards)
            removed += len(forwards)
    return removed


def _forwards(loop: ir.Operation) -> list[_Forward]:
    body = loop.regions[0].blocks[0]
    iv = body.arguments[0]
    step = ir.IntegerAttr(loop.attributes["step"]).value
    ops = [op.operation for op in body.operations]
    stores = [op for op in ops if op.name == "affine.store"]
    found = []
    for load in (op for op in ops if op.name == "affine.load"):
        target = load.operands[0]
        wanted = _subscripts(load)
        # its first value is read before the loop: from the loop variable and values there
        if wanted is None or any(defined_in_loop_body(value, body) for value in load.operands):
            continue
        writers = [s for s in stores if s.operands[1] == target]
        if any(not _distinct(s.operands[1], target) for s in stores if s.operands[1] != target):
            continue
        sources = []
        safe = True
        for store in writers:
            written = _subscripts(store)
            if written is None:
                safe = False
                break
            if _walks(written, iv) and _shifted(written, iv, step) == wanted:
                sources.append(store)
            elif not (_differ(written, wanted) and _differ(_shifted(written, iv, step), wanted)):
                safe = False
                break
        if safe and len(sources) == 1:
            found.append(_Forward(load, sources[0]))
    return found


def _carry(loop: ir.Operation, forwards: list[_Forward]) -> None:
    """`loop` rebuilt with one more `iter_args` value per forward: its first value loaded before
    the loop (where the loop runs at all), each iteration's the store's value."""
    body = loop.regions[0].blocks[0]
    old_iv = body.arguments[0]
    (lb_map, lb_operands), (ub_map, ub_operands) = for_bounds(loop)
    inits = list(loop.operands)[len(lb_operands) + len(ub_operands) :]
    with ir.InsertionPoint(loop), loop.location:
        first = _bound(lb_map, lb_operands, "affine.max")
        last = _bound(ub_map, ub_operands, "affine.min")
        runs = arith.cmpi(arith.CmpIPredicate.slt, first, last)
        firsts = [_first_value(forward.load, old_iv, first, runs) for forward in forwards]
        new = affine.AffineForOp(
            lb_map,
            ub_map,
            ir.IntegerAttr(loop.attributes["step"]).value,
            [*inits, *firsts],
            lower_bound_operands=lb_operands,
            upper_bound_operands=ub_operands,
        )
    for name in loop.attributes:
        attr = name.name if hasattr(name, "name") else str(name)
        # (isl's independence mark goes: a loop carrying a stored value is not independent)
        if attr not in (
            "lowerBoundMap",
            "upperBoundMap",
            "step",
            "operandSegmentSizes",
            INDEPENDENT_ATTR,
        ):
            new.operation.attributes[attr] = loop.attributes[attr]
    new_body = new.regions[0].blocks[0]
    old_yield = body.operations[len(body.operations) - 1].operation
    with ir.InsertionPoint(new_body), loop.location:
        new_yield = affine.AffineYieldOp(
            [*old_yield.operands, *(forward.store.operands[0] for forward in forwards)]
        )
    for op in list(body.operations)[:-1]:
        op.operation.move_before(new_yield.operation)
    old_iv.replace_all_uses_with(new_body.arguments[0])
    for k in range(1, len(body.arguments)):
        body.arguments[k].replace_all_uses_with(new_body.arguments[k])
    carried = new_body.arguments[len(body.arguments) :]
    for forward, value in zip(forwards, carried, strict=True):
        forward.load.results[0].replace_all_uses_with(value)
        forward.load.erase()
    for k in range(len(loop.results)):
        loop.results[k].replace_all_uses_with(new.results[k])
    loop.erase()


def _bound(amap: ir.AffineMap, operands: list[ir.Value], combine: str) -> ir.Value:
    """The loop bound `amap` over `operands` as a value (the max of a lower bound's results,
    the min of an upper bound's)."""
    index = ir.IndexType.get()
    if len(amap.results) == 1:
        return affine.AffineApplyOp(amap, operands).result
    op = ir.Operation.create(
        combine, results=[index], operands=operands, attributes={"map": ir.AffineMapAttr.get(amap)}
    )
    return op.results[0]


def _first_value(load: ir.Operation, iv: ir.Value, first: ir.Value, runs: ir.Value) -> ir.Value:
    """What `load` reads in the loop's first iteration, read before the loop where it runs (a
    zero otherwise: never used)."""
    amap = ir.AffineMapAttr(load.attributes["map"]).value
    operands = [first if value == iv else value for value in list(load.operands)[1:]]
    element = ir.MemRefType(load.operands[0].type).element_type
    branch = scf.IfOp(runs, [element], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        indices = [
            affine.AffineApplyOp(
                ir.AffineMap.get(amap.n_dims, amap.n_symbols, [result]), operands
            ).result
            for result in amap.results
        ]
        scf.YieldOp([memref_dialect.LoadOp(load.operands[0], indices).result])
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp([_zero(element)])
    return branch.results[0]


def _zero(element: ir.Type) -> ir.Value:
    if isinstance(element, ir.FloatType):
        return arith.ConstantOp(element, ir.FloatAttr.get(element, 0.0)).result
    return arith.ConstantOp(element, ir.IntegerAttr.get(element, 0)).result


def _subscripts(op: ir.Operation) -> tuple[Linear, ...] | None:
    first = 2 if op.name == "affine.store" else 1
    amap = ir.AffineMapAttr(op.attributes["map"]).value
    operands = list(op.operands)[first:]
    try:
        return tuple(linear_form(e, operands, amap.n_dims) for e in amap.results)
    except Inexpressible:
        return None


def _walks(subscripts: tuple[Linear, ...], iv: ir.Value) -> bool:
    """Whether some subscript moves with the loop (the store writes a new element each time)."""
    return any(dict(terms).get(iv, 0) != 0 for terms, _ in subscripts)


def _shifted(subscripts: tuple[Linear, ...], iv: ir.Value, step: int) -> tuple[Linear, ...]:
    """The subscripts one iteration earlier (the loop variable `step` less)."""
    return tuple((terms, const - dict(terms).get(iv, 0) * step) for terms, const in subscripts)


def _differ(a: tuple[Linear, ...], b: tuple[Linear, ...]) -> bool:
    """Whether two accesses of one array never meet: some subscript differs by a nonzero
    constant."""
    return any(ta == tb and ca != cb for (ta, ca), (tb, cb) in zip(a, b, strict=True))


def _distinct(a: ir.Value, b: ir.Value) -> bool:
    """Whether memrefs `a` and `b` cannot share memory: two `noalias` arguments, two different
    allocations or globals, or an allocation and anything else (`aliasing.origin`; stricter
    than `may_alias`, which takes any two arguments for distinct)."""
    (kind_a, what_a), (kind_b, what_b) = origin(a), origin(b)
    if "unknown" in (kind_a, kind_b) or (kind_a, what_a) == (kind_b, what_b):
        return False
    if kind_a == kind_b == "argument":
        return has_argument_attribute(what_a, NOALIAS_ATTR) and has_argument_attribute(
            what_b, NOALIAS_ATTR
        )
    if "global" in (kind_a, kind_b):
        return kind_a == kind_b  # two globals of different names
    return True  # an allocation against another allocation, an argument or a global
