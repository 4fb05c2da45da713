"""Register tiles: each GPU thread computes several points of its band instead of one, with the
reduction loops of those points jammed into one loop, so that a value loaded once (a row of A
in a matrix product, from shared memory or global memory) serves every point that reads it and
the partial sums stay in registers.

`launch.py` chooses the factors (per axis, only where every tile is full: no point of a tile can
fall outside the iteration space, so no copy needs a guard of its own) and places copy `j` of a
thread's point at `j · blockDim` further along the axis, so that a warp's accesses of each copy
stay as contiguous as the original's. Jamming is legal because the band's points are
independent (its loops are parallel): any interleaving of two points' operations computes the
same values, and each point keeps its own order.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from mlir import ir
from mlir.dialects import arith, scf

from polyflow.ir.affine import index_constant
from polyflow.ir.ops import defined_in, index_value, remap_operands


def jammable_loop(block: ir.Block, band: ir.Operation) -> ir.Operation | None:
    """The one `scf.for` of a band point's body (`block`), when the body is straight-line code
    around it and its bounds are the same in every point (defined outside `band`, or
    constants); else None."""
    ops = [op.operation for op in block.operations][:-1]
    with_regions = [op for op in ops if op.regions]
    if len(with_regions) != 1 or with_regions[0].name != "scf.for":
        return None
    loop = with_regions[0]
    for bound in list(loop.operands)[:3]:
        if index_constant(bound) is None and defined_in(bound, band):
            return None
    return loop


def jam_copies(
    body: list[ir.Operation],
    loop: ir.Operation,
    ivs: Sequence[ir.Value],
    offsets: Sequence[Sequence[int]],
) -> int:
    """Make a band point's body (`body`: code, `loop`, code, in one block, ending before the
    block's terminator) compute the points `ivs + offset` for each offset in the product of
    `offsets` (per axis, the first 0: the point itself) as: each copy's code before the loop,
    one loop running every copy's body per iteration (carrying every copy's values), each
    copy's code after it. Returns the number of copies."""
    position = body.index(loop)
    pre, post = body[:position], body[position + 1 :]
    after_post = ir.InsertionPoint.after(body[-1])  # type: ignore[attr-defined]
    combos = [c for c in itertools.product(*offsets) if any(c)]
    copies: list[ir.Operation] = []
    for combo in combos:
        mapping: dict[ir.Value, ir.Value] = {}
        with ir.InsertionPoint(body[0]), loop.location:
            for iv, offset in zip(ivs, combo, strict=True):
                if offset:
                    mapping[iv] = arith.AddIOp(iv, index_value(offset)).result
        _clone_all(pre, mapping, ir.InsertionPoint(loop))
        (copy,) = _clone_all([loop], mapping, ir.InsertionPoint(loop))
        copies.append(copy)
        _clone_all(post, mapping, after_post)
    _fuse([*copies, loop])
    return len(combos) + 1


def _clone_all(
    ops: list[ir.Operation], mapping: dict[ir.Value, ir.Value], ip: ir.InsertionPoint
) -> list[ir.Operation]:
    out = []
    for op in ops:
        clone = op.clone(ip=ip)
        remap_operands([clone], mapping)
        for old, new in zip(op.results, clone.results, strict=True):
            mapping[old] = new
        out.append(clone)
    return out


def _fuse(loops: list[ir.Operation]) -> None:
    """Replace `loops` (same bounds; nothing between the first and the last uses their results)
    by one loop at the last's place whose body runs each one's body in turn."""
    first = loops[0]
    initial = [v for loop in loops for v in list(loop.operands)[3:]]
    lower, upper, step = list(first.operands)[:3]
    with ir.InsertionPoint(loops[-1]), first.location:
        fused = scf.ForOp(lower, upper, step, initial)
    body = fused.body
    carried = list(body.arguments)[1:]
    yielded: list[ir.Value] = []
    offset = 0
    results = list(fused.results)
    for loop in loops:
        old_body = loop.regions[0].blocks[0]
        count = len(loop.results)
        old_args = list(old_body.arguments)
        old_args[0].replace_all_uses_with(fused.induction_variable)
        for old, new in zip(old_args[1:], carried[offset : offset + count], strict=True):
            old.replace_all_uses_with(new)
        ops = [op.operation for op in old_body.operations]
        yielded += list(ops[-1].operands)
        for op in ops[:-1]:
            body.append(op)
        for old, new in zip(loop.results, results[offset : offset + count], strict=True):
            old.replace_all_uses_with(new)
        offset += count
    with ir.InsertionPoint(body), first.location:
        scf.YieldOp(yielded)
    for loop in loops:
        loop.erase()
