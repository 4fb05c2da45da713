"""Affine code as isl text: the domain of an op (the `affine.for` bounds and `affine.if`
conditions around it) and its subscripts, over named IVs and parameters. The scheduling stage's
model and demotion (polyflow/schedule) and the pointer extents of the raising stage read affine
code through these.

Nothing here changes the IR.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mlir import ir

from polyflow.ir.affine import index_constant


class NotModeled(Exception):
    """Something in a region that the model cannot express (the region is left alone)."""


def operation_of(value_owner: object) -> ir.Operation:
    """The `ir.Operation` of an op view or of a use's owner."""
    return value_owner.operation  # type: ignore[attr-defined,no-any-return]


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The op that computes `value` (None: a block argument)."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return operation_of(owner)


def block_owner(value: ir.Value) -> ir.Operation:
    """The op whose region holds the block of block argument `value`."""
    owner = value.owner
    assert isinstance(owner, ir.Block)
    return operation_of(owner.owner)


def if_condition(if_op: ir.Operation) -> tuple[ir.AffineMap, list[bool]]:
    """An `affine.if`'s constraints as a map of their left sides (`e >= 0`, or `e == 0` where
    flagged). The bindings cannot read an IntegerSetAttr's set, so its text is read back."""
    text = str(if_op.attributes["condition"]).strip()
    head, _, body = text[len("affine_set<") : -1].partition(" : ")
    parts = [p.strip() for p in body.strip()[1:-1].split(",")]  # affine exprs have no commas
    if not all(p.endswith((">= 0", "== 0")) for p in parts):
        raise NotModeled(f"condition {text}")
    lhs = ", ".join(p[:-4].strip() for p in parts)
    amap = ir.AffineMapAttr(ir.Attribute.parse(f"affine_map<{head} -> ({lhs})>")).value
    return amap, [p.endswith("== 0") for p in parts]


class Namer:
    """isl text for affine expressions over a region's values: IVs by their statement's
    iterator names, parameters `P<n>` (numbered in order of first use), constants inline."""

    def __init__(self, defines: Callable[[ir.Value], bool]) -> None:
        self.defines = defines  # whether a value is computed in the code being described
        self.params: dict[ir.Value, str] = {}

    def value(self, value: ir.Value, ivs: dict[ir.Value, str]) -> str:
        name = ivs.get(value)
        if name is not None:
            return name
        constant = index_constant(value)
        if constant is not None:
            return str(constant)
        if not self.defines(value):
            if value not in self.params:
                self.params[value] = f"P{len(self.params)}"
            return self.params[value]
        op = defining_op(value)
        if op is not None and op.name == "affine.apply":
            amap = ir.AffineMapAttr(op.attributes["map"]).value
            return f"({self.expr(amap.results[0], list(op.operands), amap.n_dims, ivs)})"
        raise NotModeled("a map operand computed inside the region")

    def expr(
        self, e: ir.AffineExpr, operands: Sequence[ir.Value], n_dims: int, ivs: dict[ir.Value, str]
    ) -> str:
        if isinstance(e, ir.AffineConstantExpr):
            return str(e.value)
        if isinstance(e, ir.AffineDimExpr):
            return self.value(operands[e.position], ivs)
        if isinstance(e, ir.AffineSymbolExpr):
            return self.value(operands[n_dims + e.position], ivs)
        assert isinstance(e, ir.AffineBinaryExpr)
        lhs = self.expr(e.lhs, operands, n_dims, ivs)
        rhs = self.expr(e.rhs, operands, n_dims, ivs)
        if isinstance(e, ir.AffineAddExpr):
            return f"({lhs} + {rhs})"
        if isinstance(e, ir.AffineMulExpr):
            if isinstance(e.rhs, ir.AffineConstantExpr):
                return f"({rhs} * {lhs})"
            if isinstance(e.lhs, ir.AffineConstantExpr):
                return f"({lhs} * {rhs})"
            raise NotModeled(f"semi-affine expression {e}")
        if not isinstance(e.rhs, ir.AffineConstantExpr):
            raise NotModeled(f"semi-affine expression {e}")
        if isinstance(e, ir.AffineModExpr):
            return f"({lhs} mod {rhs})"
        if isinstance(e, ir.AffineFloorDivExpr):
            return f"floor(({lhs}) / {rhs})"
        return f"ceil(({lhs}) / {rhs})"

    def map_results(
        self, amap: ir.AffineMap, operands: Sequence[ir.Value], ivs: dict[ir.Value, str]
    ) -> list[str]:
        return [self.expr(e, operands, amap.n_dims, ivs) for e in amap.results]


def loop_bounds(loop: ir.Operation, name: str, namer: Namer, ivs: dict[ir.Value, str]) -> list[str]:
    """The constraints an `affine.for` puts on its IV, called `name`, as isl text."""
    view = loop.opview
    lb, ub = view.lowerBoundMap.value, view.upperBoundMap.value
    lows = namer.map_results(lb, list(view.lowerBoundOperands), ivs)
    highs = namer.map_results(ub, list(view.upperBoundOperands), ivs)
    out = [f"{name} >= {low}" for low in lows] + [f"{name} < {high}" for high in highs]
    step = int(ir.IntegerAttr(view.step).value)
    if step != 1:
        start = lows[0] if len(lows) == 1 else f"max({', '.join(lows)})"
        out.append(f"({name} - {start}) mod {step} = 0")
    return out


__all__ = [
    "Namer",
    "NotModeled",
    "block_owner",
    "defining_op",
    "if_condition",
    "loop_bounds",
    "operation_of",
]
