"""raise-scf-to-affine: `scf.for` → `affine.for`, `memref.load/store` → `affine.load/store`,
`scf.if` → `affine.if` (or `arith.select` when both branches are pure), wherever provably legal;
every `scf.for`, `scf.while`, `scf.if`, `memref.load` and `memref.store` left behind carries
`polyflow.not_affine = "<reason>"`.

Guarantees: the function computes what it did (C semantics, CONTRACT.md); the values used in
affine maps and sets are valid dims (counters of `affine.for`) or symbols (values of the function's
top level, integer ones cast to `index` there); loop bounds become multi-result maps for
`minsi`/`maxsi`; an `scf.if` on a disjunction becomes a chain of `affine.if`s with its then-part
cloned; every created op has the location of the op it replaces.

Order: pure `scf.if`s with results → `arith.select` (innermost first); loops and accesses
outermost first, so a bound or subscript sees the enclosing loops already raised; `scf.if` →
`affine.if` innermost first, so a cloned then-part is already raised; reasons on `scf.while`.

Options:
- `speculate_loads`: a branch of a pure `scf.if` may still hold loads when every one reads an
  address the function has already accessed before the `if` on every path to it (so hoisting it
  cannot fault): such `if`s become selects too. Off: any load keeps the `scf.if`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from mlir import ir
from mlir.dialects import affine, arith

from polyflow.ir.names import NOT_AFFINE_ATTR
from polyflow.ir.ops import INTEGER_DIVISIONS

from .affine_expr import (
    AffineAnalysis,
    Constraint,
    Leaf,
    Lin,
    NotAffine,
    affine_map,
    existing_index_cast,
    integer_set,
)

# Branches with more ops than this are not speculated into selects.
MAX_SPECULATED_OPS = 32

_ACCESSES = frozenset({"memref.load", "memref.store"})
# Uses of a memref that leave its memory where it is (for speculating loads from it).
_KEEPS_MEMORY = frozenset(
    {"memref.dim", "affine.load", "affine.store", "memref.cast", "memref.subview"}
)


@dataclass(frozen=True)
class RaiseScfToAffine:
    """Raise the structured control flow and memory accesses of each function to the affine
    dialect where provably legal, and mark the rest with the reason (see the module docstring)."""

    name: ClassVar[str] = "raise-scf-to-affine"
    speculate_loads: bool = True

    def __call__(self, op: ir.Operation, pass_: Any) -> None:
        try:
            raise_scf_to_affine(op, speculate_loads=self.speculate_loads)
        except Exception as exc:  # a bug here must fail the pass with a message, not the process
            op.location.emit_error(f"{self.name}: internal error: {type(exc).__name__}: {exc}")
            pass_.signal_pass_failure()


def raise_scf_to_affine(
    op: ir.Operation | ir.OpView | ir.Module, *, speculate_loads: bool = True
) -> None:
    """Raise every `func.func` in `op` (a function, or a module of them) in place."""
    top = op.operation
    funcs = (
        [top]
        if top.name == "func.func"
        else [
            f.operation
            for f in top.regions[0].blocks[0].operations
            if f.operation.name == "func.func"
        ]
    )
    for func in funcs:
        if func.regions[0].blocks:
            with func.context:
                _Raiser(func, speculate_loads).run()


def _reason(what: str, exc: NotAffine) -> str:
    if exc.reason.startswith("uses "):
        return f"{what} {exc.reason}"
    return f"{what} is not affine: {exc.reason}"


def _mark(op: ir.Operation, reason: str) -> None:
    op.attributes[NOT_AFFINE_ATTR] = ir.StringAttr.get(reason)


def _const_int(value: ir.Value) -> int | None:
    if isinstance(value, ir.BlockArgument) or value.owner.operation.name != "arith.constant":
        return None
    attr = value.owner.attributes["value"]
    return int(attr.value) if isinstance(attr, ir.IntegerAttr | ir.BoolAttr) else None


def _copy_discardable(src: ir.Operation, dst: ir.Operation) -> None:
    # discardable attributes are the dialect-prefixed ones (`polyflow.reductions`, ...);
    # iterating an attribute map yields the names
    for name in list(src.attributes):
        if "." in name:
            dst.attributes[name] = src.attributes[name]


def _terminator(block: ir.Block) -> ir.Operation:
    ops = block.operations
    return ops[len(ops) - 1].operation


def _operands_within(op: ir.Operation) -> list[ir.Value]:
    """The operands of `op` and of every op nested in it."""
    out: list[ir.Value] = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        out.extend(inner.operands)
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return out


def _move_body(src: ir.Block, dst: ir.Block) -> None:
    """Move `src`'s ops to the end of `dst`, its `scf.yield` becoming an `affine.yield`."""
    old = _terminator(src)
    new = affine.AffineYieldOp(list(old.operands), loc=old.location, ip=ir.InsertionPoint(dst))
    for op in list(src.operations)[:-1]:
        op.operation.move_before(new.operation)


# Pure casts between integer widths and `index`.
_CASTS = frozenset(
    {"arith.index_cast", "arith.index_castui", "arith.extui", "arith.extsi", "arith.trunci"}
)


def hoist_casts_of_top_level_values(func: ir.Operation) -> ir.Operation:
    """Move every cast of a function argument or top-level value to the top level (after its
    operand): it has the same value everywhere, and there it is a symbol of the loops nested in
    conditionals (a loop after an early `return`, whose `size_t` bound is cast to `index`)."""
    entry = func.regions[0].blocks[0]
    while found := _nested_casts_of_top_level_values(func):
        for op in found:
            operand = op.operands[0]
            if isinstance(operand, ir.BlockArgument):
                op.move_before(entry.operations[0])
            else:
                op.move_after(operand.owner.operation)
    return func


def _nested_casts_of_top_level_values(func: ir.Operation) -> list[ir.Operation]:
    def at_top(parent: ir.OpView | None) -> bool:
        return parent is not None and parent.operation == func

    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in _CASTS and not at_top(op.parent):
            operand = op.operands[0]
            if isinstance(operand, ir.BlockArgument):
                if operand.owner.owner.operation == func:
                    found.append(op)
            elif at_top(operand.owner.operation.parent):
                found.append(op)
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    return found


class _Raiser:
    """One function's raising (see the module docstring for the order of the phases)."""

    def __init__(self, func: ir.Operation, speculate_loads: bool) -> None:
        self.func = func
        hoist_casts_of_top_level_values(func)
        self.analysis = AffineAnalysis(func)
        self.speculate_loads = speculate_loads
        self.maybe_dead: list[ir.Operation] = []

    def run(self) -> None:
        for op in self._collect({"scf.if"}, ir.WalkOrder.POST_ORDER):
            self._to_select(op)
        for op in self._collect({"scf.for", *_ACCESSES}, ir.WalkOrder.PRE_ORDER):
            if op.name == "scf.for":
                self._raise_for(op)
            else:
                self._raise_access(op)
        for op in self._collect({"scf.if"}, ir.WalkOrder.POST_ORDER):
            self._raise_if(op)
        for op in self._collect({"scf.while"}, ir.WalkOrder.PRE_ORDER):
            _mark(op, self._while_reason(op))
        self._erase_dead()

    def _collect(self, names: set[str], order: ir.WalkOrder) -> list[ir.Operation]:
        found: list[ir.Operation] = []

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name in names:
                found.append(op)
            return ir.WalkResult.ADVANCE

        self.func.walk(visit, order)
        return found

    # -- operands -------------------------------------------------------------------------------

    def _top_ancestor(self, op: ir.Operation) -> ir.Operation:
        while True:
            parent = op.parent
            if parent is None or parent.operation == self.func:
                return op
            op = parent.operation

    def _operands(self, leaves: Sequence[Leaf], at: ir.Operation) -> list[ir.Value]:
        """The `index` values for a map's leaves, used by an op created at `at`."""
        return [
            leaf.value
            if leaf.is_dim or isinstance(leaf.value.type, ir.IndexType)
            else self._index_of(leaf.value, at)
            for leaf in leaves
        ]

    def _index_of(self, value: ir.Value, at: ir.Operation) -> ir.Value:
        """`value` (a top-level integer) cast to `index` at the top level, before `at`."""
        anchor = self._top_ancestor(at)
        existing = existing_index_cast(value, self.func, anchor)
        if existing is not None:
            return existing
        cast = arith.IndexCastOp(
            ir.IndexType.get(), value, loc=at.location, ip=ir.InsertionPoint(anchor)
        )
        return cast.result

    def _note_dead(self, values: Iterable[ir.Value]) -> None:
        for v in values:
            if isinstance(v, ir.OpResult):
                op = v.owner.operation
                if (op.name.startswith("arith.") or op.name == "affine.apply") and not any(
                    op == seen for seen in self.maybe_dead
                ):
                    self.maybe_dead.append(op)

    def _erase_dead(self) -> None:
        """Erase the index arithmetic that only the replaced bounds, subscripts and conditions
        used (what canonicalize would, so the raised IR reads cleanly)."""
        changed = True
        while changed:
            changed = False
            for op in list(self.maybe_dead):
                if all(next(iter(r.uses), None) is None for r in op.results):
                    self.maybe_dead.remove(op)
                    operands = list(op.operands)
                    op.erase()
                    self._note_dead(operands)
                    changed = True

    # -- scf.if → arith.select --------------------------------------------------------------------

    def _to_select(self, op: ir.Operation) -> None:
        if not op.results or not op.regions[1].blocks:
            return
        then_block, else_block = op.regions[0].blocks[0], op.regions[1].blocks[0]
        body = [*list(then_block.operations)[:-1], *list(else_block.operations)[:-1]]
        if len(body) > MAX_SPECULATED_OPS:
            return
        if not all(self._speculatable(o.operation, op) for o in body):
            return
        for o in body:
            o.operation.move_before(op)
        cond = op.operands[0]
        then_values = list(_terminator(then_block).operands)
        else_values = list(_terminator(else_block).operands)
        ip = ir.InsertionPoint(op)
        for result, a, b in zip(op.results, then_values, else_values, strict=True):
            select = arith.SelectOp(cond, a, b, loc=op.location, ip=ip)
            result.replace_all_uses_with(select.result)
        self.analysis.forget(op.results)
        op.erase()

    def _speculatable(self, op: ir.Operation, if_op: ir.Operation) -> bool:
        """Whether `op` may run before `if_op` whichever way it goes: no regions, no effects
        beyond reading memory that cannot fault, no division that may trap."""
        name = op.name
        if op.regions:
            return False
        # speculatable only by a constant other than 0 and -1 (else UB or a trap)
        if name in INTEGER_DIVISIONS:
            divisor = _const_int(op.operands[1])
            return divisor is not None and divisor not in (0, -1)
        if name.startswith(("arith.", "math.")) or name == "affine.apply":
            return True
        if name == "memref.load":
            return self.speculate_loads and self._accessed_before(op, if_op)
        return False

    def _accessed_before(self, load: ir.Operation, if_op: ir.Operation) -> bool:
        """Whether the address `load` reads is valid: a 0-d memref, or the same memref and the
        same index values already loaded or stored on every path to `if_op`."""
        memref, indices = load.operands[0], list(load.operands[1:])
        found = not indices
        for use in memref.uses:
            other = use.owner.operation
            if other.name == "memref.load" and use.operand_number == 0:
                other_indices = list(other.operands[1:])
            elif other.name == "memref.store" and use.operand_number == 1:
                other_indices = list(other.operands[2:])
            elif other.name in _KEEPS_MEMORY:
                continue
            else:
                return False  # handed to a call or freed: the address may not stay valid
            found = found or (other_indices == indices and self._runs_before(other, if_op))
        return found

    def _runs_before(self, op: ir.Operation, target: ir.Operation) -> bool:
        """Whether `op` runs, earlier, whenever `target` does: it precedes `target` or one of
        its ancestors in the same block (structured control flow has no early exits)."""
        block = op.block
        anchor = target
        while anchor.block != block:
            parent = anchor.parent
            if parent is None or parent.operation == self.func:
                return False
            anchor = parent.operation
        return op.is_before_in_block(anchor)

    # -- scf.for → affine.for -------------------------------------------------------------------

    def _raise_for(self, op: ir.Operation) -> None:
        lb, ub, step_value = op.operands[0], op.operands[1], op.operands[2]
        inits = list(op.operands[3:])
        body = op.regions[0].blocks[0]
        if not isinstance(body.arguments[0].type, ir.IndexType):
            return _mark(op, "loop counter is not of index type")
        if "unsignedCmp" in op.attributes:
            return _mark(op, "loop compares its bounds as unsigned")
        step = _const_int(step_value)
        if step is None:
            return _mark(op, "step is not a constant")
        if step <= 0:
            return _mark(op, "step is not positive")
        try:
            lower = self.analysis.bound(lb, "max")
        except NotAffine as exc:
            return _mark(op, _reason("lower bound", exc))
        try:
            upper = self.analysis.bound(ub, "min")
        except NotAffine as exc:
            return _mark(op, _reason("upper bound", exc))
        lower_map, lower_leaves = affine_map(lower)
        upper_map, upper_leaves = affine_map(upper)
        with op.location:  # the block arguments take it too
            new = affine.AffineForOp(
                lower_map,
                upper_map,
                step,
                iter_args=inits,
                lower_bound_operands=self._operands(lower_leaves, op),
                upper_bound_operands=self._operands(upper_leaves, op),
                loc=op.location,
                ip=ir.InsertionPoint(op),
            )
        for old_arg, new_arg in zip(body.arguments, new.body.arguments, strict=True):
            old_arg.replace_all_uses_with(new_arg)
        _move_body(body, new.body)
        for old, result in zip(op.results, new.results, strict=True):
            old.replace_all_uses_with(result)
        _copy_discardable(op, new.operation)
        self.analysis.forget([*body.arguments, *op.results])
        op.erase()
        self._note_dead([lb, ub, step_value])

    # -- memref.load/store → affine.load/store ------------------------------------------------

    def _raise_access(self, op: ir.Operation) -> None:
        is_load = op.name == "memref.load"
        operands = list(op.operands)
        memref, indices = (operands[0], operands[1:]) if is_load else (operands[1], operands[2:])
        exprs: list[Lin] = []
        for k, index in enumerate(indices):
            try:
                exprs.append(self.analysis.expr(index))
            except NotAffine as exc:
                return _mark(op, _reason(f"subscript {k}", exc))
        amap, leaves = affine_map(exprs)
        map_attr = ir.AffineMapAttr.get(amap)
        values = self._operands(leaves, op)
        ip = ir.InsertionPoint(op)
        new: ir.OpView
        if is_load:
            new = affine.AffineLoadOp(
                op.results[0].type, memref, values, map_attr, loc=op.location, ip=ip
            )
            op.results[0].replace_all_uses_with(new.result)
        else:
            new = affine.AffineStoreOp(
                operands[0], memref, values, map_attr, loc=op.location, ip=ip
            )
        _copy_discardable(op, new.operation)
        self.analysis.forget(op.results)
        op.erase()
        self._note_dead(indices)

    # -- scf.if → affine.if ---------------------------------------------------------------------

    def _raise_if(self, op: ir.Operation) -> None:
        cond = op.operands[0]
        try:
            dnf = self.analysis.condition(cond)
        except NotAffine as exc:
            return _mark(op, _reason("condition", exc))
        if not dnf:  # never true: one affine.if with an empty set keeps the IR's shape
            dnf = ((Constraint(Lin(const=-1)),),)
        has_else = bool(op.regions[1].blocks)
        types = [r.type for r in op.results]
        # operands first: a cast they need goes before the whole chain
        sets = [integer_set(conj) for conj in dnf]
        operands = [self._operands(leaves, op) for _, leaves in sets]
        # A disjunction A or B: if A {then} else { if B {then'} else {else} }, then' a clone.
        sources = [op.clone(ip=ir.InsertionPoint(op)) for _ in dnf[1:]] + [op]
        chain: list[affine.AffineIfOp] = []
        ip = ir.InsertionPoint(op)
        for k, (iset, _) in enumerate(sets):
            last = k == len(dnf) - 1
            new = affine.AffineIfOp(
                iset,
                types,
                cond_operands=operands[k],
                has_else=has_else or not last,
                loc=op.location,
                ip=ip,
            )
            _move_body(sources[k].regions[0].blocks[0], new.then_block)
            if not last:
                ip = ir.InsertionPoint(new.else_block)
            chain.append(new)
        if has_else:
            _move_body(op.regions[1].blocks[0], chain[-1].else_block)
        for outer, inner in itertools.pairwise(chain):
            affine.AffineYieldOp(
                list(inner.results), loc=op.location, ip=ir.InsertionPoint(outer.else_block)
            )
        for old, result in zip(op.results, chain[0].results, strict=True):
            old.replace_all_uses_with(result)
        _copy_discardable(op, chain[0].operation)
        for clone in sources[:-1]:
            clone.erase()
        self.analysis.forget(op.results)
        op.erase()
        self._note_dead([cond])

    # -- scf.while --------------------------------------------------------------------------------

    def _while_reason(self, op: ir.Operation) -> str:
        """What the exit test of a while loop depends on, as its reason."""
        before = op.regions[0].blocks[0]
        after_yield = _terminator(op.regions[1].blocks[0])
        pending = [_terminator(before).operands[0]]
        seen: list[ir.Value] = []
        calls = floats = False
        while pending:
            value = pending.pop()
            if any(value == s for s in seen):
                continue
            seen.append(value)
            if isinstance(value, ir.BlockArgument):
                if value.owner == before:  # loop-carried: what the body passes on
                    pending.append(after_yield.operands[value.arg_number])
                continue
            producer = value.owner.operation
            if not self._inside(producer, op):
                continue  # loop-invariant
            name = producer.name
            if name in ("memref.load", "affine.load"):
                memref = producer.operands[0]
                local = (
                    isinstance(memref, ir.OpResult)
                    and memref.owner.operation.name == "memref.alloca"
                )
                if not local:
                    return "while loop: data-dependent exit"
                # a C local: what is stored into it decides
                for use in memref.uses:
                    user = use.owner.operation
                    if user.name in ("memref.store", "affine.store") and use.operand_number == 1:
                        pending.append(user.operands[0])
                continue
            calls = calls or name in ("func.call", "func.call_indirect")
            floats = floats or name == "arith.cmpf"
            # of an scf.if, what its branches compute and yield too
            pending += _operands_within(producer)
        if calls:
            return "while loop: exit depends on a function call"
        if floats:
            return "while loop: data-dependent exit"
        return (
            "while loop: not a counted loop (polyflow counts loops whose exit compares a "
            "variable stepped by a constant with a bound the loop does not change; a variable "
            "step, a break or a second exit make it a while loop, which is not optimized)"
        )

    def _inside(self, op: ir.Operation, ancestor: ir.Operation) -> bool:
        parent = op.parent
        while parent is not None and parent.operation != self.func:
            if parent.operation == ancestor:
                return True
            parent = parent.operation.parent
        return False
