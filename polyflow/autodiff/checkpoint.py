"""Checkpointing of a sequential loop by stripmining: the IR pieces. The forward sweep runs the
loop in segments of `C` iterations and copies the arrays the loop writes (its state) into one
snapshot slot before each segment, and once more at the end of the forward sweep; the adjoint
sweep visits the segments backwards, restores a segment's snapshot, runs the segment forward
again (writing the tapes, which then hold `C` iterations instead of all) and runs its adjoint;
the end of the gradient restores the state of the end of the forward sweep. Memory: `(T / C + 1)` states and `C` iterations of tape instead of `T`
iterations of tape; time: the loop's primal work once more.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import affine, arith, memref

from polyflow.ir.affine import substituted

_BOUND_ATTRS = ("lowerBoundMap", "upperBoundMap", "step", "operandSegmentSizes")


@dataclass
class Segments:
    """The segments of a loop `for t = L to U` (one lower and one upper bound): `L` and `U` as
    expressions of symbols `operands` (the loop's bound operands, values at the function's top
    level), and the segment length."""

    lower: ir.AffineExpr
    upper: ir.AffineExpr
    operands: list[ir.Value]
    length: int

    def count(self) -> ir.AffineExpr:
        """How many segments (≤ 0 when the loop runs no iteration)."""
        return ir.AffineExpr.get_ceil_div(
            self.upper - self.lower, ir.AffineConstantExpr.get(self.length)
        )

    def first(self) -> tuple[ir.AffineMap, ir.AffineMap]:
        """The bounds of segment `d0`: `L + d0·C` and `min(U, L + (d0 + 1)·C)`, over
        `[d0, *operands]`."""
        start = self.lower + ir.AffineDimExpr.get(0) * self.length
        n = len(self.operands)
        return (
            ir.AffineMap.get(1, n, [start]),
            ir.AffineMap.get(1, n, [self.upper, start + self.length]),
        )


def segments_of(loop: ir.Operation, length: int) -> Segments | None:
    """The segments of `length` iterations of top-level loop `loop`; None unless it has step 1
    and single bounds."""
    if ir.IntegerAttr(loop.attributes["step"]).value != 1:
        return None
    lower = ir.AffineMapAttr(loop.attributes["lowerBoundMap"]).value
    upper = ir.AffineMapAttr(loop.attributes["upperBoundMap"]).value
    if len(lower.results) != 1 or len(upper.results) != 1:
        return None
    operands = list(loop.operands)[: lower.n_inputs + upper.n_inputs]
    symbols = [ir.AffineSymbolExpr.get(k) for k in range(len(operands))]
    return Segments(
        _with_symbols(lower, symbols[: lower.n_inputs]),
        _with_symbols(upper, symbols[lower.n_inputs :]),
        operands,
        length,
    )


def _with_symbols(bound: ir.AffineMap, symbols: list[ir.AffineExpr]) -> ir.AffineExpr:
    """The single result of `bound` with its dims, then its symbols, replaced by `symbols`."""
    return substituted(bound.results[0], symbols[: bound.n_dims], symbols[bound.n_dims :])


def restricted_loop(
    loop: ir.Operation,
    lower: ir.AffineMap,
    upper: ir.AffineMap,
    operands: list[ir.Value],
) -> ir.Operation:
    """Replace `loop` (no results) by a loop with bounds `lower`, `upper` over `operands` and
    the same body (its ops moved, not copied); returns the new loop."""
    with ir.InsertionPoint(loop), loop.location:
        new = affine.AffineForOp(
            lower, upper, 1, [], lower_bound_operands=operands, upper_bound_operands=operands
        )
        for name in loop.attributes:
            if name not in _BOUND_ATTRS:
                new.operation.attributes[name] = loop.attributes[name]
        with ir.InsertionPoint(new.body):
            placeholder = arith.ConstantOp(ir.IndexType.get(), 0).operation
    old_body = loop.regions[0].blocks[0]
    old_body.arguments[0].replace_all_uses_with(new.induction_variable)
    for op in list(old_body.operations):  # its terminator included
        op.move_before(placeholder)
    placeholder.erase()
    loop.erase()
    return new.operation


@dataclass
class Region:
    """The part of `array` a loop writes: in each dimension, the first subscript and the
    extent, as expressions of the symbols `params` (values at the function's top level)."""

    array: ir.Value
    lows: list[ir.AffineExpr]
    extents: list[ir.AffineExpr]
    params: list[ir.Value]


def snapshots(state: list[Region], slots: ir.Value) -> list[ir.Value]:
    """One array per region, of `slots` copies of it (allocated at the insertion point)."""
    out = []
    for region in state:
        shape = [ir.ShapedType.get_dynamic_size()]
        sizes = [slots]
        for extent in region.extents:
            if isinstance(extent, ir.AffineConstantExpr):
                shape.append(max(0, ir.AffineConstantExpr(extent).value))
                continue
            shape.append(ir.ShapedType.get_dynamic_size())
            at_least_zero = ir.AffineMap.get(
                0, len(region.params), [ir.AffineConstantExpr.get(0), extent]
            )
            sizes.append(affine.AffineMaxOp(at_least_zero, region.params).result)
        element = ir.MemRefType(region.array.type).element_type
        out.append(memref.AllocOp(ir.MemRefType.get(shape, element), sizes, []).result)
    return out


def copy_state(state: list[Region], snapshot: list[ir.Value], slot: ir.Value, save: bool) -> None:
    """Copy each region into slot `slot` of its snapshot (`save`), or back from it: a loop nest
    per region at the insertion point."""
    for region, copies in zip(state, snapshot, strict=True):
        n = len(region.params)
        ivs: list[ir.Value] = []
        point = ir.InsertionPoint.current
        for extent in region.extents:
            with point:
                loop = affine.AffineForOp(
                    ir.AffineMap.get(0, 0, [ir.AffineConstantExpr.get(0)]),
                    ir.AffineMap.get(0, n, [extent]),
                    1,
                    [],
                    lower_bound_operands=[],
                    upper_bound_operands=region.params,
                )
            with ir.InsertionPoint(loop.body):
                affine.AffineYieldOp([])
            ivs.append(loop.induction_variable)
            point = ir.InsertionPoint(loop.body.operations[0])
        rank = len(ivs)
        element = ir.AffineMap.get(
            rank, n, [low + ir.AffineDimExpr.get(k) for k, low in enumerate(region.lows)]
        )
        with_slot = ir.AffineMap.get_identity(rank + 1)
        element_type = ir.MemRefType(region.array.type).element_type
        array_at = [*ivs, *region.params]
        with point:
            if save:
                value = affine.AffineLoadOp(element_type, region.array, array_at, element).result
                affine.AffineStoreOp(value, copies, [slot, *ivs], with_slot)
            else:
                value = affine.AffineLoadOp(element_type, copies, [slot, *ivs], with_slot).result
                affine.AffineStoreOp(value, region.array, array_at, element)
