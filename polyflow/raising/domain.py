"""Iteration domains as isl sets: what the loops and `affine.if`s around an op say of the values
it uses, for proofs that no point of the domain does something (shared by the raising passes).

A `Space` names SSA values as integer variables and collects facts about them: the bounds of the
`affine.for`s (and `scf.for`s) around an op, the conditions of the `affine.if`s it is in, what
constants and `affine.apply`s are, and, given an `AffineAnalysis`, the affine expression of any
other value it names (so an `index_cast` of a bound and the bound are one number). `empty(extra)`
asks isl whether any integer point satisfies the facts and `extra`; isl answers over the integers,
so an empty set is an exact proof. Symbols are only what the facts say of them: nothing else is
assumed (a loop `0 <= k < m` around the op implies `m >= 1` where the op runs, and no more).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import islpy as isl
from mlir import ir

from polyflow.ir.affine import Inexpressible, affine_apply_of, affine_if_condition, index_constant

from .affine_expr import AffineAnalysis, Div, Leaf, Lin, NotAffine


@dataclass
class Space:
    """Integer variables named after SSA values and the facts known of them, for one question
    to isl (which answers over the integers, so a proof is exact and sound).

    `analysis`: when given, a value named here that is an affine expression of other values
    (a cast, a sum, ...) is stated equal to it, so that facts about either apply to both.
    """

    analysis: AffineAnalysis | None = None
    names: dict[ir.Value, str] = field(default_factory=dict)
    facts: list[str] = field(default_factory=list)

    def name(self, value: ir.Value) -> str:
        known = self.names.get(value)
        if known is not None:
            return known
        name = self.names[value] = f"v{len(self.names)}"
        constant = index_constant(value)
        applied = affine_apply_of(value)
        if constant is not None:
            self.facts.append(f"{name} = {constant}")
        elif applied is not None and len(applied[0].results) == 1:
            amap, operands = applied
            self.facts.append(f"{name} = {self.expr(amap.results[0], operands, amap.n_dims)}")
        elif self.analysis is not None:
            defined = self._definition(value)
            if defined is not None:
                self.facts.append(f"{name} = {self.lin(defined)}")
        return name

    def _definition(self, value: ir.Value) -> Lin | None:
        """`value` as an affine expression of other values, if the analysis knows one."""
        assert self.analysis is not None
        if not isinstance(value.type, ir.IndexType | ir.IntegerType):
            return None
        try:
            e = self.analysis.expr(value)
        except NotAffine:
            return None
        if e.const == 0 and len(e.terms) == 1:
            (atom, coeff), *_ = e.terms.items()
            if coeff == 1 and isinstance(atom, Leaf) and atom.value == value:
                return None  # a leaf: nothing more to say
        return e

    def lin(self, e: Lin) -> str:
        """`e` (leaves and divisions of `affine_expr`) as isl text."""
        parts = [str(e.const)]
        for atom, coeff in e.terms.items():
            if isinstance(atom, Leaf):
                text = self.name(atom.value)
            else:
                text = self._division(atom)
            parts.append(f"{coeff} * {text}")  # the constant factor first, as isl wants it
        return "(" + " + ".join(parts) + ")"

    def _division(self, div: Div) -> str:
        num = self.lin(div.num)
        if div.kind == "mod":
            return f"({num} mod {div.den})"
        if div.kind == "floordiv":
            return f"floor({num} / {div.den})"
        return f"ceil({num} / {div.den})"

    def expr(self, e: ir.AffineExpr, operands: Sequence[ir.Value], n_dims: int) -> str:
        if isinstance(e, ir.AffineConstantExpr):
            return str(e.value)  # bare: isl reads `-1 * x` and `x + -1`, not `(-1) * x`
        if isinstance(e, ir.AffineDimExpr):
            return self.name(operands[e.position])
        if isinstance(e, ir.AffineSymbolExpr):
            return self.name(operands[n_dims + e.position])
        if not isinstance(e, ir.AffineBinaryExpr):
            raise Inexpressible(str(e))
        lhs = self.expr(e.lhs, operands, n_dims)
        rhs = self.expr(e.rhs, operands, n_dims)
        if isinstance(e, ir.AffineAddExpr):
            return f"({lhs} + {rhs})"
        if isinstance(e, ir.AffineMulExpr):
            if isinstance(e.rhs, ir.AffineConstantExpr):
                return f"({rhs} * {lhs})"  # isl wants the constant factor first
            if isinstance(e.lhs, ir.AffineConstantExpr):
                return f"({lhs} * {rhs})"
            raise Inexpressible(str(e))  # semi-affine: a product of two unknowns
        if not isinstance(e.rhs, ir.AffineConstantExpr):
            raise Inexpressible(str(e))
        if isinstance(e, ir.AffineModExpr):
            return f"({lhs} mod {e.rhs.value})"
        if isinstance(e, ir.AffineFloorDivExpr):
            return f"floor({lhs} / {e.rhs.value})"
        return f"ceil({lhs} / {e.rhs.value})"

    def around(self, op: ir.Operation) -> None:
        """Add what the loops and `affine.if`s around `op` say of their IVs and operands."""
        child, parent = op, op.parent
        while parent is not None and parent.operation.name != "func.func":
            parent = parent.operation
            if parent.name == "affine.for":
                loop = parent.opview
                iv = self.name(loop.induction_variable)
                for bound, operands, rel in (
                    (loop.lowerBoundMap.value, list(loop.lowerBoundOperands), ">="),
                    (loop.upperBoundMap.value, list(loop.upperBoundOperands), "<"),
                ):
                    for e in bound.results:
                        self.facts.append(f"{iv} {rel} {self.expr(e, operands, bound.n_dims)}")
            elif parent.name == "affine.if":
                exprs, equalities, n_dims = affine_if_condition(parent)
                operands = list(parent.operands)
                if child.block == parent.regions[0].blocks[0]:
                    for e, eq in zip(exprs, equalities, strict=True):
                        rel = "=" if eq else ">="
                        self.facts.append(f"{self.expr(e, operands, n_dims)} {rel} 0")
                elif len(exprs) == 1 and not equalities[0]:
                    # the else branch of one inequality is its negation (more is a disjunction)
                    self.facts.append(f"{self.expr(exprs[0], operands, n_dims)} < 0")
            elif parent.name == "scf.for" and "unsignedCmp" not in parent.attributes:
                loop = parent.opview
                iv = self.name(loop.induction_variable)
                self.facts.append(f"{iv} >= {self.name(loop.lowerBound)}")
                self.facts.append(f"{iv} < {self.name(loop.upperBound)}")
            child, parent = parent, parent.parent

    def empty(self, extra: Sequence[str], *, answers: dict[str, bool] | None = None) -> bool:
        """Whether no integer point satisfies the facts and `extra` (a text isl cannot read is a
        bug here, and raises). `answers`: earlier answers by question, to ask isl only once."""
        constraints = " and ".join([*self.facts, *extra]) or "true"
        question = f"{{ [{', '.join(self.names.values())}] : {constraints} }}"
        known = None if answers is None else answers.get(question)
        if known is None:
            known = bool(isl.Set(question).is_empty())
            if answers is not None:
                answers[question] = known
        return known


__all__ = ["Space"]
