"""Small queries over nested ops, and the builders the GPU mapping's steps share: walks, nesting,
operands, operand remapping, index constants and a block's shared buffers."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from mlir import ir
from mlir.dialects import arith, memref

from polyflow.ir.affine import index_constant
from polyflow.ir.names import SHARED_ATTR

# Integer division and remainder: they trap (or are undefined) on a divisor of 0 or, signed,
# on -1 with the smallest dividend, so they cannot run on values nobody asked for.
INTEGER_DIVISIONS = frozenset(
    {
        "arith.divsi",
        "arith.divui",
        "arith.remsi",
        "arith.remui",
        "arith.ceildivsi",
        "arith.ceildivui",
        "arith.floordivsi",
    }
)


def walk(op: ir.Operation) -> Iterator[ir.Operation]:
    """`op` and every op nested in it, pre-order."""
    yield op
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                yield from walk(inner.operation)


def block_ops(block: ir.Block) -> list[ir.Operation]:
    """The ops of a block, its terminator included."""
    return [op.operation for op in block.operations]


def ops_named(op: ir.Operation, name: str) -> list[ir.Operation]:
    """The ops called `name` nested in `op`, outermost first (not those nested in a match)."""
    found: list[ir.Operation] = []
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner = inner.operation
                if inner.name == name:
                    found.append(inner)
                else:
                    found += ops_named(inner, name)
    return found


def nested_in(op: ir.Operation, ancestor: ir.Operation) -> bool:
    """Whether `op` lies, at any depth, in the regions of `ancestor`."""
    parent = op.parent
    while parent is not None:
        if parent.operation == ancestor:
            return True
        parent = parent.parent
    return False


def defined_in(value: ir.Value, op: ir.Operation) -> bool:
    """Whether `value` is computed inside `op`: by `op` itself, by an op nested in it, or as an
    argument of one of their blocks."""
    owner = value.owner
    definer = owner.owner if isinstance(owner, ir.Block) else owner
    definer = definer.operation
    return definer == op or nested_in(definer, op)


def nested_in_any(op: ir.Operation | ir.OpView, ops: Sequence[ir.Operation]) -> bool:
    """Whether `op` is one of `ops` or lies, at any depth, in one of them."""
    current: ir.Operation | None = op.operation
    while current is not None:
        if any(current == candidate for candidate in ops):
            return True
        parent = current.parent
        current = parent.operation if parent is not None else None
    return False


def all_operands(op: ir.Operation) -> list[ir.Value]:
    """The operands of `op` and of every op nested in it."""
    out = list(op.operands)
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                out += all_operands(inner.operation)
    return out


def remap_operands(ops: Iterable[ir.Operation], mapping: Mapping[ir.Value, ir.Value]) -> None:
    """Replace, in `ops` and every op nested in them, each operand `mapping` has a value for."""
    for op in ops:
        for index, operand in enumerate(op.operands):
            if operand in mapping:
                op.operands[index] = mapping[operand]
        for region in op.regions:
            for block in region.blocks:
                remap_operands((inner.operation for inner in block.operations), mapping)


def index_value(value: int) -> ir.Value:
    """An `index` constant, at the current insertion point."""
    return arith.ConstantOp(ir.IndexType.get(), value).result


def shared_buffer(shape: Sequence[int], element: ir.Type) -> ir.Value:
    """A `memref.alloca` of a GPU block's shared memory (marked `SHARED_ATTR`), at the current
    insertion point."""
    alloca = memref.AllocaOp(ir.MemRefType.get(list(shape), element), [], [])
    alloca.operation.attributes[SHARED_ATTR] = ir.UnitAttr.get()
    return alloca.result


def unroll_loop(loop: ir.Operation, factor: int) -> None:
    """Unroll the `scf.for` `loop` by `factor` in place: its step becomes `factor` times the
    constant step and its body `factor` copies chained through the carried values. The caller
    guarantees the trip count is a multiple of `factor` (no remainder loop is made)."""
    if factor <= 1:
        return
    step = index_constant(loop.operands[2])
    assert step is not None, "unroll_loop needs a constant step"
    body = loop.regions[0].blocks[0]
    ops = [op.operation for op in body.operations]
    end, copied = ops[-1], ops[:-1]
    iv, carried = body.arguments[0], list(body.arguments)[1:]
    latest = list(end.operands)
    for copy_index in range(1, factor):
        with ir.InsertionPoint(end), loop.location:
            shifted = arith.AddIOp(iv, index_value(copy_index * step)).result
        mapping: dict[ir.Value, ir.Value] = {iv: shifted}
        mapping.update(zip(carried, latest, strict=True))
        for op in copied:
            clone = op.clone(ip=ir.InsertionPoint(end))
            remap_operands([clone], mapping)
            mapping.update(zip(op.results, clone.results, strict=True))
        latest = [mapping.get(v, v) for v in end.operands]
    for index, value in enumerate(latest):
        end.operands[index] = value
    with ir.InsertionPoint(loop), loop.location:
        loop.operands[2] = index_value(step * factor)
