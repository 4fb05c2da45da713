"""A schedule → affine MLIR in place of a scop's region: isl builds the loop AST
(`isl_helpers.build_ast`), each AST loop becomes an `affine.for` (max/min bounds as
multi-result maps, constant steps), each condition an `affine.if` (a disjunction as a chain of
them), and each statement instance set a copy of the statement's ops with its original IVs
replaced by `affine.apply`s of the new ones (what the AST gives for them).

The new code goes right after the region's last op; only when it is complete and the function
verifies are the region's ops erased. On any failure the new code is erased and `CodegenError`
raised: the region is then exactly as it was. Every op made takes its location from the op it
re-materializes (a loop from the original loop whose IV it drives, a statement's ops from its
own ops).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import islpy as isl
from mlir import ir
from mlir.dialects import affine

from polyflow.ir.names import (
    WAVEFRONT_COLUMNS_ATTR,
    WAVEFRONT_COLUMNS_MARK,
    WAVEFRONT_MARK,
)
from polyflow.poly import isl_helpers as ih
from polyflow.poly.budget import DEFAULT_ISL_MAX_OPERATIONS, BudgetExhausted, step_budget

from .model import Scop, ScopRegion, StatementOps
from .panels import PARALLEL_TILES_MARK
from .parallelize import INDEPENDENT_ATTR, WAVEFRONT_ATTR

Want = Literal["min", "max"]
# A conjunction of affine constraints `expr >= 0` (or `expr == 0` when flagged), and a
# disjunction of those.
Conjunction = list[tuple[ih.Expr, bool]]
Dnf = list[Conjunction]


class CodegenError(Exception):
    """The schedule could not be turned into affine code; the region is left as it was."""


# ---------------------------------------------------------------------------------------------
# AST expressions: min/max pushed outwards, comparisons to constraints (pure)


def _has_extremum(e: ih.Expr) -> bool:
    if isinstance(e, ih.Min | ih.Max):
        return True
    if isinstance(e, ih.Add):
        return any(_has_extremum(t) for t in e.terms)
    if isinstance(e, ih.Mul | ih.FloorDiv | ih.Mod):
        return _has_extremum(e.expr)
    return False


def alternatives(e: ih.Expr, want: Want) -> list[ih.Expr]:
    """Affine expressions (no min/max inside) whose maximum (`want="max"`) or minimum equals
    `e`; raises `CodegenError` when `e` is not of that form (a min where a max is wanted)."""
    if not _has_extremum(e):
        return [e]
    if isinstance(e, ih.Max | ih.Min):
        if (want == "max") != isinstance(e, ih.Max):
            if len(e.args) == 1:
                return alternatives(e.args[0], want)
            raise CodegenError(f"a {'min' if want == 'max' else 'max'} where a {want} is needed")
        return [alt for arg in e.args for alt in alternatives(arg, want)]
    if isinstance(e, ih.Add):
        sums: list[list[ih.Expr]] = [[]]
        for term in e.terms:
            sums = [[*s, alt] for s in sums for alt in alternatives(term, want)]
        return [ih.Add(tuple(s)) for s in sums]
    if isinstance(e, ih.Mul):
        flip: Want = "min" if want == "max" else "max"
        inner = alternatives(e.expr, want if e.factor >= 0 else flip)
        return [ih.Mul(e.factor, alt) for alt in inner]
    if isinstance(e, ih.FloorDiv):  # non-decreasing: floor(max(a, b) / d) = max(floor(a/d), ...)
        return [ih.FloorDiv(alt, e.divisor) for alt in alternatives(e.expr, want)]
    raise CodegenError("a remainder of a min or max")


# ---------------------------------------------------------------------------------------------
# Selects (`c ? a : b`) become conditions around the node that uses them (pure)


def _first_select(e: ih.Expr | ih.Cond) -> ih.Select | None:
    if isinstance(e, ih.Select):
        return e
    children: tuple[ih.Expr | ih.Cond, ...] = ()
    if isinstance(e, ih.Add):
        children = e.terms
    elif isinstance(e, ih.Min | ih.Max | ih.And | ih.Or):
        children = e.args
    elif isinstance(e, ih.Mul | ih.FloorDiv | ih.Mod):
        children = (e.expr,)
    elif isinstance(e, ih.Compare):
        children = (e.lhs, e.rhs)
    for child in children:
        found = _first_select(child)
        if found is not None:
            return found
    return None


def _subst_expr(e: ih.Expr, target: ih.Select, value: ih.Expr) -> ih.Expr:
    if e == target:
        return value
    if isinstance(e, ih.Add):
        return ih.Add(tuple(_subst_expr(t, target, value) for t in e.terms))
    if isinstance(e, ih.Min):
        return ih.Min(tuple(_subst_expr(t, target, value) for t in e.args))
    if isinstance(e, ih.Max):
        return ih.Max(tuple(_subst_expr(t, target, value) for t in e.args))
    if isinstance(e, ih.Mul):
        return ih.Mul(e.factor, _subst_expr(e.expr, target, value))
    if isinstance(e, ih.FloorDiv):
        return ih.FloorDiv(_subst_expr(e.expr, target, value), e.divisor)
    if isinstance(e, ih.Mod):
        return ih.Mod(_subst_expr(e.expr, target, value), e.divisor)
    if isinstance(e, ih.Select):
        return ih.Select(
            _subst_cond(e.cond, target, value),
            _subst_expr(e.then, target, value),
            _subst_expr(e.else_, target, value),
        )
    return e


def _subst_cond(c: ih.Cond, target: ih.Select, value: ih.Expr) -> ih.Cond:
    if isinstance(c, ih.And):
        return ih.And(tuple(_subst_cond(a, target, value) for a in c.args))
    if isinstance(c, ih.Or):
        return ih.Or(tuple(_subst_cond(a, target, value) for a in c.args))
    return ih.Compare(
        c.relation, _subst_expr(c.lhs, target, value), _subst_expr(c.rhs, target, value)
    )


def lift_selects(node: ih.AstNode) -> ih.AstNode:
    """`node` with every select in a loop's bounds, a condition or a statement's arguments
    turned into an if/else around that loop, condition or statement."""
    if isinstance(node, ih.AstBlock):
        return ih.AstBlock(tuple(lift_selects(c) for c in node.children))
    if isinstance(node, ih.AstMark):
        return ih.AstMark(node.mark, lift_selects(node.child))
    own: list[ih.Expr | ih.Cond]
    if isinstance(node, ih.AstFor):
        own = [node.init, node.cond]
    elif isinstance(node, ih.AstIf):
        own = [node.cond]
    else:
        own = list(node.args)
    select = next((s for s in map(_first_select, own) if s is not None), None)
    if select is not None:
        branches = [_replace_in(node, select, v) for v in (select.then, select.else_)]
        return lift_selects(ih.AstIf(select.cond, branches[0], branches[1]))
    if isinstance(node, ih.AstFor):
        return replace(node, body=lift_selects(node.body))
    if isinstance(node, ih.AstIf):
        else_ = lift_selects(node.else_) if node.else_ is not None else None
        return ih.AstIf(node.cond, lift_selects(node.then), else_)
    return node


def _replace_in(node: ih.AstNode, target: ih.Select, value: ih.Expr) -> ih.AstNode:
    """`node` with `target` replaced by `value` in its own expressions (not its children's)."""
    if isinstance(node, ih.AstFor):
        return replace(
            node,
            init=_subst_expr(node.init, target, value),
            cond=_subst_cond(node.cond, target, value),
        )
    if isinstance(node, ih.AstIf):
        return ih.AstIf(_subst_cond(node.cond, target, value), node.then, node.else_)
    assert isinstance(node, ih.AstUser)
    return ih.AstUser(node.statement, tuple(_subst_expr(a, target, value) for a in node.args))


def _minus(a: ih.Expr, b: ih.Expr, shift: int = 0) -> ih.Expr:
    return ih.Add((a, ih.Mul(-1, b), ih.Const(shift)))


def condition_dnf(cond: ih.Cond) -> Dnf:
    """`cond` as a disjunction of conjunctions of affine constraints."""
    if isinstance(cond, ih.And):
        out: Dnf = [[]]
        for arg in cond.args:
            out = [[*a, *b] for a in out for b in condition_dnf(arg)]
        return out
    if isinstance(cond, ih.Or):
        return [conj for arg in cond.args for conj in condition_dnf(arg)]
    lhs, rhs = cond.lhs, cond.rhs
    if cond.relation == "==":
        if _has_extremum(lhs) or _has_extremum(rhs):
            raise CodegenError("an equality with a min or max")
        return [[(_minus(lhs, rhs), True)]]
    diff = {
        "<=": _minus(rhs, lhs),
        "<": _minus(rhs, lhs, -1),
        ">=": _minus(lhs, rhs),
        ">": _minus(lhs, rhs, -1),
    }[cond.relation]
    try:  # diff >= 0 with diff = min(a, b): a >= 0 and b >= 0
        return [[(alt, False) for alt in alternatives(diff, "min")]]
    except CodegenError:  # diff = max(a, b): a >= 0 or b >= 0
        return [[(alt, False)] for alt in alternatives(diff, "max")]


def upper_bounds(cond: ih.Cond, iterator: str) -> list[ih.Expr]:
    """The exclusive upper bounds (their minimum is the bound) of a loop whose condition is
    `cond` on `iterator`."""
    parts = cond.args if isinstance(cond, ih.And) else (cond,)
    out: list[ih.Expr] = []
    it = ih.Var(iterator)
    for part in parts:
        if not isinstance(part, ih.Compare):
            raise CodegenError("a loop condition that is not a conjunction of bounds")
        if part.lhs == it and part.relation in ("<=", "<"):
            bound, inclusive = part.rhs, part.relation == "<="
        elif part.rhs == it and part.relation in (">=", ">"):
            bound, inclusive = part.lhs, part.relation == ">="
        else:
            raise CodegenError(f"a loop condition that does not bound '{iterator}' above")
        for alt in alternatives(bound, "min"):
            out.append(ih.Add((alt, ih.Const(1))) if inclusive else alt)
    return out


def _names(e: ih.Expr, out: list[str]) -> None:
    if isinstance(e, ih.Var):
        if e.name not in out:
            out.append(e.name)
    elif isinstance(e, ih.Add | ih.Min | ih.Max):
        for arg in e.terms if isinstance(e, ih.Add) else e.args:
            _names(arg, out)
    elif isinstance(e, ih.Mul | ih.FloorDiv | ih.Mod):
        _names(e.expr, out)


# ---------------------------------------------------------------------------------------------
# MLIR


@dataclass(frozen=True)
class _Leaf:
    """What an AST name stands for: a new IV or a parameter's value, and whether it may be an
    affine symbol (a top-level value of the function) or must be a dimension."""

    value: ir.Value
    symbol: bool


def _is_top_level(value: ir.Value, function: ir.Operation) -> bool:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return owner.owner.operation == function
    op = owner.operation
    if op.name == "arith.constant":
        return True
    parent = op.parent
    return parent is not None and parent.operation == function


def _affine(e: ih.Expr, position: dict[str, ir.AffineExpr]) -> ir.AffineExpr:
    if isinstance(e, ih.Var):
        return position[e.name]
    if isinstance(e, ih.Const):
        return ir.AffineConstantExpr.get(e.value)
    if isinstance(e, ih.Add):
        terms = [_affine(t, position) for t in e.terms]
        out = terms[0]
        for t in terms[1:]:
            out = ir.AffineExpr.get_add(out, t)
        return out
    if isinstance(e, ih.Mul):
        return ir.AffineExpr.get_mul(_affine(e.expr, position), ir.AffineConstantExpr.get(e.factor))
    if isinstance(e, ih.FloorDiv):
        return ir.AffineExpr.get_floor_div(
            _affine(e.expr, position), ir.AffineConstantExpr.get(e.divisor)
        )
    if isinstance(e, ih.Mod):
        return ir.AffineExpr.get_mod(
            _affine(e.expr, position), ir.AffineConstantExpr.get(e.divisor)
        )
    raise CodegenError("a min or max inside an affine expression")


class _Emitter:
    """Builds the new code for one region, node by node."""

    def __init__(self, region: ScopRegion) -> None:
        self.region = region
        fn = region.function
        self.params = {
            name: _Leaf(value, _is_top_level(value, fn)) for name, value in region.params.items()
        }
        self.fallback_loc = region.ops[0].location
        # Inside a WAVEFRONT_MARK (or a ..._COLUMNS_MARK, or PARALLEL_TILES_MARK), above its
        # first loop: the wavefront's parallel one; the mark, None outside.
        self._wavefront: str | None = None

    # maps over AST names ------------------------------------------------------------------

    def _map(
        self, exprs: Sequence[ih.Expr], env: dict[str, _Leaf]
    ) -> tuple[ir.AffineMap, list[ir.Value]]:
        used: list[str] = []
        for e in exprs:
            _names(e, used)
        leaves = []
        for name in used:
            leaf = env.get(name) or self.params.get(name)
            if leaf is None:
                raise CodegenError(
                    f"the AST names '{name}', which is neither a loop nor a parameter"
                )
            leaves.append((name, leaf))
        dims = [(n, leaf) for n, leaf in leaves if not leaf.symbol]
        syms = [(n, leaf) for n, leaf in leaves if leaf.symbol]
        position: dict[str, ir.AffineExpr] = {}
        for k, (n, _) in enumerate(dims):
            position[n] = ir.AffineDimExpr.get(k)
        for k, (n, _) in enumerate(syms):
            position[n] = ir.AffineSymbolExpr.get(k)
        results = [_affine(e, position) for e in exprs]
        amap = ir.AffineMap.get(len(dims), len(syms), results)
        return amap, [leaf.value for _, leaf in dims + syms]

    # nodes --------------------------------------------------------------------------------

    def node(self, node: ih.AstNode, ip: ir.InsertionPoint, env: dict[str, _Leaf]) -> None:
        if isinstance(node, ih.AstBlock):
            for child in node.children:
                self.node(child, ip, env)
        elif isinstance(node, ih.AstMark):
            marks = (WAVEFRONT_MARK, WAVEFRONT_COLUMNS_MARK, PARALLEL_TILES_MARK)
            saved, self._wavefront = self._wavefront, node.mark if node.mark in marks else None
            self.node(node.child, ip, env)
            self._wavefront = saved
        elif isinstance(node, ih.AstFor):
            self._for(node, ip, env)
        elif isinstance(node, ih.AstIf):
            self._if(condition_dnf(node.cond), node.then, node.else_, ip, env)
        else:
            self._user(node, ip, env)

    def _for(self, node: ih.AstFor, ip: ir.InsertionPoint, env: dict[str, _Leaf]) -> None:
        lower, lower_operands = self._map(alternatives(node.init, "max"), env)
        upper, upper_operands = self._map(upper_bounds(node.cond, node.iterator), env)
        loc = self._loop_location(node)
        with loc:  # the IV (a block argument) takes the ambient location
            loop = affine.AffineForOp(
                lower,
                upper,
                node.step,
                None,
                lower_bound_operands=lower_operands,
                upper_bound_operands=upper_operands,
                loc=loc,
                ip=ip,
            )
        end = affine.AffineYieldOp([], loc=loop.location, ip=ir.InsertionPoint(loop.body))
        inner = {**env, node.iterator: _Leaf(loop.induction_variable, False)}
        if node.independent:
            loop.operation.attributes[INDEPENDENT_ATTR] = ir.UnitAttr.get()
        wavefront, self._wavefront = self._wavefront, None
        if wavefront is not None:
            loop.operation.attributes[WAVEFRONT_ATTR] = ir.UnitAttr.get()
        if wavefront == WAVEFRONT_COLUMNS_MARK:
            loop.operation.attributes[WAVEFRONT_COLUMNS_ATTR] = ir.UnitAttr.get()
        self.node(node.body, ir.InsertionPoint(end), inner)
        self._wavefront = wavefront

    def _if(
        self,
        dnf: Dnf,
        then: ih.AstNode,
        else_: ih.AstNode | None,
        ip: ir.InsertionPoint,
        env: dict[str, _Leaf],
    ) -> None:
        if not dnf:  # false
            if else_ is not None:
                self.node(else_, ip, env)
            return
        first, rest = dnf[0], dnf[1:]
        if not first:  # true
            self.node(then, ip, env)
            return
        amap, operands = self._map([e for e, _ in first], env)
        cond = ir.IntegerSet.get(
            amap.n_dims, amap.n_symbols, list(amap.results), [eq for _, eq in first]
        )
        has_else = bool(rest) or else_ is not None
        loc = self._first_location(then)
        op = affine.AffineIfOp(
            cond, None, cond_operands=operands, has_else=has_else, loc=loc, ip=ip
        )
        end = affine.AffineYieldOp([], loc=loc, ip=ir.InsertionPoint(op.then_block))
        self.node(then, ir.InsertionPoint(end), env)
        if has_else:
            end = affine.AffineYieldOp([], loc=loc, ip=ir.InsertionPoint(op.else_block))
            self._if(rest, then, else_, ir.InsertionPoint(end), env)

    def _user(self, node: ih.AstUser, ip: ir.InsertionPoint, env: dict[str, _Leaf]) -> None:
        stmt = self.region.statements.get(node.statement)
        if stmt is None:
            raise CodegenError(f"the AST runs '{node.statement}', which is no statement here")
        if len(node.args) != len(stmt.ivs):
            raise CodegenError(f"'{node.statement}' has {len(stmt.ivs)} iterators")
        mapping: dict[ir.Value, ir.Value] = {}
        loc = stmt.store.location
        for iv, arg in zip(stmt.ivs, node.args, strict=True):
            leaf = env.get(arg.name) if isinstance(arg, ih.Var) else None
            if leaf is not None and not leaf.symbol:
                mapping[iv] = leaf.value
                continue
            amap, operands = self._map([arg], env)
            mapping[iv] = affine.AffineApplyOp(amap, operands, loc=loc, ip=ip).result
        for op in stmt.ops:
            copy = op.clone(ip=ip)
            for k, operand in enumerate(copy.operands):
                replacement = mapping.get(operand)
                if replacement is not None:
                    copy.operands[k] = replacement
            for old, new in zip(op.results, copy.results, strict=True):
                mapping[old] = new

    # locations ----------------------------------------------------------------------------

    def _statements_under(self, node: ih.AstNode) -> list[tuple[StatementOps, ih.AstUser]]:
        if isinstance(node, ih.AstUser):
            stmt = self.region.statements.get(node.statement)
            return [(stmt, node)] if stmt is not None else []
        if isinstance(node, ih.AstBlock):
            return [x for child in node.children for x in self._statements_under(child)]
        if isinstance(node, ih.AstMark):
            return self._statements_under(node.child)
        if isinstance(node, ih.AstFor):
            return self._statements_under(node.body)
        out = self._statements_under(node.then)
        return out + (self._statements_under(node.else_) if node.else_ is not None else [])

    def _loop_location(self, node: ih.AstFor) -> ir.Location:
        """The location of the original loop whose IV the new one drives (exactly, if one
        does), else of the first loop whose IV depends on it."""
        it = ih.Var(node.iterator)
        found: ir.Location | None = None
        for stmt, user in self._statements_under(node.body):
            for loop, arg in zip(stmt.loops, user.args, strict=False):
                if arg == it:
                    return loop.location
                names: list[str] = []
                _names(arg, names)
                if found is None and node.iterator in names:
                    found = loop.location
        return found or self._first_location(node.body)

    def _first_location(self, node: ih.AstNode) -> ir.Location:
        under = self._statements_under(node)
        return under[0][0].store.location if under else self.fallback_loc


# ---------------------------------------------------------------------------------------------
# The entry point


def _nested(op: ir.Operation, ancestors: Sequence[ir.Operation]) -> bool:
    current: ir.Operation | None = op
    while current is not None:
        if any(current == a for a in ancestors):
            return True
        parent = current.parent
        current = parent.operation if parent is not None else None
    return False


def _escaping_use(region: ScopRegion) -> str | None:
    """A value of the region used outside it (the region could not be erased), or None."""
    for top in region.ops:
        for op in _walk([top]):
            for result in op.results:
                for use in result.uses:
                    if not _nested(use.owner.operation, region.ops):
                        return f"a value of '{op.name}' is used after the region"
    return None


def _walk(ops: Sequence[ir.Operation]) -> list[ir.Operation]:
    out: list[ir.Operation] = []
    for op in ops:
        out.append(op)
        for region in op.regions:
            for block in region.blocks:
                out += _walk([o.operation for o in block.operations])
    return out


def _after(op: ir.Operation) -> ir.Operation:
    """The op right after `op` in its block (a region never ends its block: a terminator
    follows)."""
    ops = [o.operation for o in op.block.operations]
    index = next(k for k, o in enumerate(ops) if o == op)
    return ops[index + 1]


def generate(
    region: ScopRegion,
    scop: Scop,
    schedule: isl.Schedule,
    dependences: isl.UnionMap | None = None,
    *,
    budget_base: int = DEFAULT_ISL_MAX_OPERATIONS,
) -> None:
    """Replace `region`'s ops by code running `scop`'s statements in the order of `schedule`
    (module docstring); with `dependences` (all of the scop's), loops that carry none of them
    get `INDEPENDENT_ATTR`. Raises `CodegenError` and leaves the region as it was when that
    fails. `budget_base` scales the AST build's and the independence checks' isl budgets
    (poly/budget.py)."""
    try:
        ast = ih.build_ast(
            scop.context,
            schedule,
            dependences=dependences,
            max_operations=step_budget("ast", budget_base),
            independence_operations=step_budget("independence", budget_base),
        )
        tree = lift_selects(ast)
    except BudgetExhausted as exc:
        raise CodegenError(str(exc)) from exc
    except isl.Error as exc:
        raise CodegenError(f"isl could not build the AST: {exc}") from exc
    except ih.AstUnsupported as exc:
        raise CodegenError(f"isl could not build the AST: {exc}") from exc
    problem = _escaping_use(region)
    if problem is not None:
        raise CodegenError(problem)
    fn = region.function
    last = region.ops[-1]
    anchor = _after(last)
    with fn.context:
        try:
            _Emitter(region).node(tree, ir.InsertionPoint(anchor), {})
            fn.verify()
        except Exception as exc:  # any failure: take the new code out again
            made = _between(last, anchor)
            for op in reversed(made):
                op.erase()
            if isinstance(exc, CodegenError):
                raise
            raise CodegenError(f"{type(exc).__name__}: {exc}") from exc
    for op in reversed(region.ops):
        op.erase()


def _between(first: ir.Operation, last: ir.Operation) -> list[ir.Operation]:
    out: list[ir.Operation] = []
    inside = False
    for o in first.block.operations:
        op = o.operation
        if op == last:
            break
        if inside:
            out.append(op)
        if op == first:
            inside = True
    return out


__all__ = [
    "CodegenError",
    "alternatives",
    "condition_dnf",
    "generate",
    "lift_selects",
    "upper_bounds",
]
