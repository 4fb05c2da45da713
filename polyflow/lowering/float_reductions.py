"""Parallel floating-point reductions with a result that does not depend on the threads.

An OpenMP reduction combines the threads' partial results in whatever order they finish (and
splits the work by the number of threads), so a float sum could differ from run to run. Under
-fassociative-math polyflow parallelizes float reductions (schedule/parallelize.py), so before
`convert-scf-to-openmp` each 1-d `scf.parallel` whose reductions are all float `addf`/`mulf`
becomes:

    partials[c] for c in 0..CHUNKS-1, in parallel (no OpenMP reduction):
        the iterations of the c-th of CHUNKS equal contiguous chunks, summed in a sequential
        `scf.for` whose updates carry `reassoc` (LLVM vectorizes it with partial sums)
    result = init ⊕ (pairwise tree over partials, in a fixed order)

The chunks are fixed (not one per thread), so the result is the same for every thread count
and every run of one build; and it is more accurate than the sequential loop's (each chunk's
sum is short, and vectorized into lanes; the chunks are added pairwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from mlir import ir
from mlir.dialects import arith, memref, scf

# The number of chunks: enough to share among the cores of one machine (the loop over chunks is
# the OpenMP loop), few enough that the pairwise tree costs nothing.
CHUNKS = 64

_KINDS = {"arith.addf": "addf", "arith.mulf": "mulf"}


def deterministic_float_reductions(root: ir.Operation, chunks: int = CHUNKS) -> int:
    """Rewrite every 1-d `scf.parallel` in `root` (a module or a function) whose reductions are
    all float add/mul (see the module docstring); returns how many were rewritten. Other loops
    are untouched."""
    loops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "scf.parallel" and _float_reduction_kinds(op) is not None:
            loops.append(op)
        return ir.WalkResult.ADVANCE

    with root.context:
        root.walk(visit)
        for loop in loops:
            _rewrite(loop, chunks)
    return len(loops)


def _float_reduction_kinds(loop: ir.Operation) -> list[str] | None:
    """The kinds (`addf`/`mulf`) of a 1-d `scf.parallel`'s reductions, or None when it has none,
    more than one dimension, or one that is not a float add or mul."""
    count = len(loop.results)
    if count == 0 or len(loop.operands) != 3 + count:
        return None
    block = loop.regions[0].blocks[0]
    reduce = block.operations[len(block.operations) - 1].operation
    if reduce.name != "scf.reduce" or len(reduce.regions) != count:
        return None
    kinds = []
    for region in reduce.regions:
        ops = [op.operation for op in region.blocks[0].operations]
        if len(ops) != 2 or ops[0].name not in _KINDS or ops[1].name != "scf.reduce.return":
            return None
        if not isinstance(ops[0].results[0].type, ir.FloatType):
            return None
        kinds.append(_KINDS[ops[0].name])
    return kinds


def _identity(kind: str, ftype: ir.Type) -> ir.Value:
    # -0.0 is the identity of a float sum (0.0 + -0.0 is 0.0, not -0.0)
    return arith.constant(ftype, -0.0 if kind == "addf" else 1.0)


def _combine(kind: str, a: ir.Value, b: ir.Value, reassoc: bool) -> ir.Value:
    flags = ir.Attribute.parse(f"#arith.fastmath<{'reassoc' if reassoc else 'none'}>")
    op = arith.AddFOp if kind == "addf" else arith.MulFOp
    return op(a, b, fastmath=flags).result


def _rewrite(loop: ir.Operation, chunks: int) -> None:
    kinds = _float_reduction_kinds(loop)
    assert kinds is not None
    lb, ub, step = loop.operands[0], loop.operands[1], loop.operands[2]
    inits = list(loop.operands[3:])
    types = [r.type for r in loop.results]
    body = loop.regions[0].blocks[0]
    ops = [o.operation for o in body.operations]
    reduce = ops[-1]
    contributions = list(reduce.operands)
    index = ir.IndexType.get()
    with loop.location, ir.InsertionPoint.at_block_begin(_entry_block(loop)):
        # at the function's entry: a loop around this one must not grow the stack
        partials = [memref.alloca(ir.MemRefType.get([chunks], t), [], []) for t in types]
    with loop.location, ir.InsertionPoint(loop):
        zero = arith.constant(index, 0)
        one = arith.constant(index, 1)
        count = arith.constant(index, chunks)
        # trips = ceil((ub - lb) / step), 0 for an empty range; chunk = ceil(trips / chunks)
        trips = arith.ceildivsi(arith.maxsi(arith.subi(ub, lb), zero), step)
        chunk = arith.ceildivsi(trips, count)
        outer = scf.ParallelOp([], [zero], [count], [one], [])
        outer_block = outer.regions[0].blocks.append(index)
    with loop.location, ir.InsertionPoint(outer_block):
        c = outer_block.arguments[0]
        first = arith.muli(c, chunk)
        last = arith.minsi(arith.addi(first, chunk), trips)
        identities = [_identity(k, t) for k, t in zip(kinds, types, strict=True)]
        inner = scf.ForOp(first, last, one, identities)
        for partial, result in zip(partials, inner.results, strict=True):
            memref.store(result, partial, [c])
        scf.ReduceOp([], 0)
    with loop.location, ir.InsertionPoint(inner.body):
        i = arith.addi(lb, arith.muli(inner.induction_variable, step))
    # the iteration's ops, moved (not copied) into the chunk loop
    anchor = i.owner
    for op in ops[:-1]:
        op.move_after(anchor)
        anchor = op
    body.arguments[0].replace_all_uses_with(i)
    with loop.location, ir.InsertionPoint(inner.body):
        updated = [
            _combine(kind, acc, contribution, reassoc=True)
            for kind, acc, contribution in zip(
                kinds, inner.inner_iter_args, contributions, strict=True
            )
        ]
        scf.YieldOp(updated)
    with loop.location, ir.InsertionPoint(loop):
        results = []
        for kind, init, partial in zip(kinds, inits, partials, strict=True):
            values = [memref.load(partial, [arith.constant(index, j)]) for j in range(chunks)]
            while len(values) > 1:  # pairwise, in a fixed order
                pairs = [
                    _combine(kind, values[j], values[j + 1], reassoc=False)
                    for j in range(0, len(values) - 1, 2)
                ]
                values = pairs + ([values[-1]] if len(values) % 2 else [])
            results.append(_combine(kind, init, values[0], reassoc=False))
    for old, new in zip(loop.results, results, strict=True):
        old.replace_all_uses_with(new)
    loop.erase()


def _entry_block(op: ir.Operation) -> ir.Block:
    """The entry block of the function around `op`."""
    while op.name != "func.func":
        op = op.parent
    return op.regions[0].blocks[0]


@dataclass(frozen=True)
class DeterministicFloatReductions:
    """Parallel float reductions → fixed chunks and a pairwise combination (module docstring)."""

    name: ClassVar[str] = "lower-deterministic-float-reductions"
    chunks: int = CHUNKS

    def __call__(self, op: ir.Operation, pass_: Any) -> None:
        try:
            deterministic_float_reductions(op, self.chunks)
        except Exception as exc:  # a bug here must fail the pass, not the process
            op.location.emit_error(f"{self.name}: {type(exc).__name__}: {exc}")
            pass_.signal_pass_failure()
