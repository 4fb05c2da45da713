"""Kernel formation, the first step of the GPU mapping (affine IR in, affine IR out): which parts
of a scheduled function run on the GPU, as what.

The polyhedral stage has scheduled the function for the GPU (`target="cuda"`: the coincident
members of each band outermost, no cache tiles) and marked every loop that may run in parallel
(`PARALLEL_LOOP_ATTR`). Here, walking the function's body from the outside in:

- a marked loop starts a **band kernel**: it and up to five marked loops nested perfectly inside
  it (with bounds that do not depend on the band's own induction variables) become nested
  one-dimensional `affine.parallel` ops, the band, which `launch.py` maps to blocks and threads
  (the last one to `threadIdx.x`: the loop most accesses walk contiguously is moved there, for
  coalescing); what the band's innermost loop contains (sequential loops, reductions) runs in
  each thread;
- a sequential loop or an `affine.if` that contains marked loops stays on the host and the walk
  goes on inside it: one kernel per step of a time loop, or of lu's and cholesky's k loop (the
  multi-kernel strategy);
- every other op that touches memory (and the pure ops that compute from what it loads) goes to
  a **single-thread kernel** (a one-iteration `affine.parallel`), consecutive ones together, so
  that the host never touches an array: arrays live in GPU memory from the function's start to
  its end.

A function with no marked loop is left as it is (it runs on the host), unless the caller needs
all of it on the GPU (`whole`: the Python API, whose arrays are already on the GPU): then the
whole body becomes one single-thread kernel. What cannot be placed (a value computed from GPU
memory steering the host's loops) raises `NotMappable` with the reason, before anything changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir

from polyflow.ir.names import PARALLEL_LOOP_ATTR
from polyflow.ir.ops import nested_in_any, walk

# The ops that read or write memory, or whose effects are unknown; nested inside anything, they
# put it on the GPU.
_MEMORY_OPS = frozenset(
    {
        "affine.load",
        "affine.store",
        "affine.vector_load",
        "affine.vector_store",
        "memref.load",
        "memref.store",
        "memref.copy",
        "memref.atomic_rmw",
        "memref.generic_atomic_rmw",
        "vector.load",
        "vector.store",
        "vector.transfer_read",
        "vector.transfer_write",
        "func.call",
        "func.call_indirect",
        "llvm.call",
        "llvm.load",
        "llvm.store",
    }
)
# Host control flow the walk may enter: what is inside it is placed op by op.
_HOST_CONTROL = frozenset({"affine.for", "affine.if"})
# Ops that stay on the host wherever they are: they read an array's shape or address, not its
# elements, or make room for one.
_HOST_ANYWAY = frozenset(
    {
        "memref.dim",
        "memref.alloca",
        "memref.alloc",
        "memref.dealloc",
        "memref.extract_aligned_pointer_as_index",
        "memref.extract_strided_metadata",
        "memref.cast",
    }
)
# A grid and a block have three axes; the threads take a band's three innermost loops, and up
# to three loops outside them are folded into the grid's x axis (launch.py).
MAX_BAND = 6
# host ops a pending single-thread kernel may move past (they read shapes and addresses only)
_PURE_HOST = frozenset(
    {
        "memref.dim",
        "memref.extract_aligned_pointer_as_index",
        "memref.extract_strided_metadata",
        "memref.cast",
    }
)


def _pure(op: ir.Operation) -> bool:
    return not op.regions and (
        op.name.startswith(("arith.", "math.", "index."))
        or op.name in ("affine.apply", "affine.min", "affine.max")
    )


class NotMappable(Exception):
    """The function cannot be split into host code and kernels; the message says why."""


@dataclass
class KernelFormation:
    """What `form_kernels` made of a function: its band kernels (the outermost
    `affine.parallel` of each, with the source location of every loop it maps, outer to inner) and
    the number of single-thread kernels."""

    bands: list[ir.Operation] = field(default_factory=list)
    single_thread: int = 0
    # loops not mapped to blocks or threads, and why: (location, reason)
    unmapped: list[tuple[ir.Location, str]] = field(default_factory=list)

    @property
    def mapped(self) -> bool:
        return bool(self.bands) or self.single_thread > 0


def form_kernels(
    fn: ir.Operation, *, whole: bool = False, host_calls: frozenset[str] = frozenset()
) -> KernelFormation:
    """Split `fn` (a scheduled affine function) into host code and kernels (module docstring);
    returns what was formed. A function without parallel loops is left unchanged unless
    `whole`. Calls of `host_calls` (functions that are themselves split, with `whole`) stay on
    the host. Raises `NotMappable` (with `fn` unchanged) where the split is impossible."""
    with fn.location:  # what the builders create without a location of their own
        return _form_kernels(fn, whole, host_calls)


def _form_kernels(fn: ir.Operation, whole: bool, host_calls: frozenset[str]) -> KernelFormation:
    for op in walk(fn):
        if any("f80" in str(v.type) for v in [*op.operands, *op.results]):
            raise NotMappable("it computes in long double (x87's 80 bits), which GPUs do not have")
    body = fn.regions[0].blocks[0]
    formed = KernelFormation()
    marked = _contains_marked(fn)
    if not marked and not whole:
        return formed
    if marked:
        _check_host_control(fn)
    _place_block(body, formed, host_calls)
    return formed


def _body_ops(block: ir.Block) -> list[ir.Operation]:
    """The ops of `block` without its terminator."""
    ops = [op.operation for op in block.operations]
    return ops[:-1] if ops and _is_terminator(ops[-1]) else ops


def _is_terminator(op: ir.Operation) -> bool:
    return op.name in ("func.return", "affine.yield", "scf.yield", "gpu.terminator")


def _contains_marked(op: ir.Operation) -> bool:
    return any(
        inner.name == "affine.for" and PARALLEL_LOOP_ATTR in inner.attributes for inner in walk(op)
    )


def _touches_memory(op: ir.Operation, host_calls: frozenset[str] = frozenset()) -> bool:
    return any(
        inner.name in _MEMORY_OPS and not _host_call(inner, host_calls) for inner in walk(op)
    )


def _host_call(op: ir.Operation, host_calls: frozenset[str]) -> bool:
    return (
        op.name == "func.call" and str(op.attributes["callee"]).lstrip("@").strip('"') in host_calls
    )


def _defined_in(value: ir.Value, ops: list[ir.Operation]) -> bool:
    """Whether `value` is a result of one of `ops` or of an op nested in one of them."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        parent = owner.owner
        op: ir.Operation | None = parent.operation if parent is not None else None
    else:
        op = owner.operation
    while op is not None:
        if any(op == candidate for candidate in ops):
            return True
        parent_op = op.parent
        op = parent_op.operation if parent_op is not None else None
    return False


def _check_host_control(fn: ir.Operation) -> None:
    """Raise `NotMappable` where host control flow (a sequential loop or an `if` the walk enters,
    around parallel loops) depends on values loaded from memory, or carries values: the host
    cannot read GPU memory."""
    for op in walk(fn):
        if op.name not in _HOST_CONTROL or not _contains_marked(op):
            continue
        if op.name == "affine.for" and PARALLEL_LOOP_ATTR in op.attributes:
            continue
        if len(op.results) > 0:
            raise NotMappable(
                "a loop around parallel loops carries a value from one iteration to the next"
            )
        for operand in op.operands:
            if _loaded(operand):
                raise NotMappable(
                    "a loop bound or condition around parallel loops is read from memory"
                )


def _loaded(value: ir.Value, depth: int = 0) -> bool:
    """Whether `value` is computed from a value loaded from memory (within a few ops)."""
    owner = value.owner
    if isinstance(owner, ir.Block) or depth > 16:
        return False
    op = owner.operation
    if op.name in _MEMORY_OPS:
        return True
    return any(_loaded(operand, depth + 1) for operand in op.operands)


def _place_block(block: ir.Block, formed: KernelFormation, host_calls: frozenset[str]) -> None:
    """Place the ops of `block` on the host or in kernels (module docstring)."""
    pending: list[ir.Operation] = []  # the next single-thread kernel's ops
    for op in _body_ops(block):
        marked = op.name == "affine.for" and PARALLEL_LOOP_ATTR in op.attributes
        fed = any(_defined_in(v, pending) for v in op.operands)
        if marked:
            _flush(pending, formed)
            formed.bands.append(_band_kernel(op, formed))
        elif op.name in _HOST_CONTROL and _contains_marked(op):
            _flush(pending, formed)
            if op.name == "affine.for":
                formed.unmapped.append(
                    (
                        op.location,
                        "runs on the host, one kernel launch per iteration: "
                        "it carries a dependence",
                    )
                )
            for region in op.regions:
                for inner in region.blocks:
                    _place_block(inner, formed, host_calls)
        elif op.name in _HOST_ANYWAY and not fed:
            if op.name not in _PURE_HOST:
                _flush(pending, formed)  # a free must not move before the kernel's reads
            continue
        elif _touches_memory(op, host_calls) or fed:
            if fed and _touches_memory(op) and not _touches_memory(op, host_calls):
                raise NotMappable("a function is called with a value read from GPU memory")
            pending.append(op)
        elif not _pure(op):
            # the pending kernel is placed where its last op is: it may move past pure ops
            # only (a call of a host function may touch the same arrays)
            _flush(pending, formed)
    _flush(pending, formed)


def _flush(pending: list[ir.Operation], formed: KernelFormation) -> None:
    """Make the pending ops a single-thread kernel (nothing when there are none)."""
    if not pending:
        return
    for op in pending:
        for result in op.results:
            for use in result.uses:
                user = use.owner
                if not nested_in_any(user, pending):
                    raise NotMappable(
                        "a value computed from GPU memory is used by the host "
                        f"({op.name} at {op.location})"
                    )
    _single_thread_kernel(list(pending))
    formed.single_thread += 1
    pending.clear()


def _single_thread_kernel(ops: list[ir.Operation]) -> ir.Operation:
    """Move `ops` (consecutive up to pure host ops, none of which they feed) into a
    one-iteration `affine.parallel` placed where the last of them was."""
    last = ops[-1]
    with ir.InsertionPoint(last), last.location:
        kernel = _parallel_op(
            ir.AffineMap.get_constant(0), [], ir.AffineMap.get_constant(1), [], 1, last.location
        )
    body = kernel.regions[0].blocks[0]
    end = ops_terminator(body)
    for op in ops:
        op.move_before(end)
    return kernel


def ops_terminator(block: ir.Block) -> ir.Operation:
    return [op.operation for op in block.operations][-1]


def _parallel_op(
    lower: ir.AffineMap,
    lower_operands: list[ir.Value],
    upper: ir.AffineMap,
    upper_operands: list[ir.Value],
    step: int,
    loc: ir.Location,
) -> ir.Operation:
    """A one-dimensional `affine.parallel` without reductions, with an empty body (a yield),
    at the current insertion point."""
    i32 = ir.IntegerType.get_signless(32)
    i64 = ir.IntegerType.get_signless(64)

    def group(amap: ir.AffineMap) -> ir.Attribute:
        return ir.DenseElementsAttr.get_splat(
            ir.RankedTensorType.get([1], i32), ir.IntegerAttr.get(i32, len(amap.results))
        )

    op = ir.Operation.create(
        "affine.parallel",
        results=[],
        operands=[*lower_operands, *upper_operands],
        attributes={
            "lowerBoundsMap": ir.AffineMapAttr.get(lower),
            "lowerBoundsGroups": group(lower),
            "upperBoundsMap": ir.AffineMapAttr.get(upper),
            "upperBoundsGroups": group(upper),
            "steps": ir.ArrayAttr.get([ir.IntegerAttr.get(i64, step)]),
            "reductions": ir.ArrayAttr.get([]),
        },
        regions=1,
        loc=loc,
    )
    body = op.regions[0].blocks.append(ir.IndexType.get())
    with ir.InsertionPoint(body):
        ir.Operation.create("affine.yield", loc=loc)
    return op


def _band_kernel(loop: ir.Operation, formed: KernelFormation) -> ir.Operation:
    """Turn `loop` and the marked loops perfectly nested in it (up to `MAX_BAND`, with bounds
    free of the band's induction variables) into nested `affine.parallel` ops, the one most
    accesses walk contiguously innermost; returns the outermost. The loops left inside, which
    each thread runs, go to `formed.unmapped` with the reason."""
    band = [loop]
    while len(band) < MAX_BAND:
        inner = _perfectly_nested_marked(band[-1], band)
        if inner is None:
            break
        band.append(inner)
    for inner in walk(band[-1]):
        if inner.name != "affine.for" or any(inner == b for b in band):
            continue
        formed.unmapped.append((inner.location, _why_in_thread(inner, len(band))))
    order = _coalescing_order(band)
    # The band's loops are independent of each other's bounds, so any order is legal: rebuild
    # them outside in, in `order`, around the innermost loop's body.
    innermost_body = band[-1].regions[0].blocks[0]
    ivs = [b.regions[0].blocks[0].arguments[0] for b in band]
    with ir.InsertionPoint(loop):
        outer: ir.Operation | None = None
        ip = ir.InsertionPoint(loop)
        new_ivs: dict[int, ir.Value] = {}
        for index in order:
            view = band[index].opview
            with ip:
                parallel = _parallel_op(
                    view.lowerBoundMap.value,
                    list(view.lowerBoundOperands),
                    view.upperBoundMap.value,
                    list(view.upperBoundOperands),
                    view.step.value,
                    band[index].location,
                )
            outer = outer or parallel
            body = parallel.regions[0].blocks[0]
            new_ivs[index] = body.arguments[0]
            ip = ir.InsertionPoint.at_block_begin(body)
    assert outer is not None
    target = parallel.regions[0].blocks[0]
    end = ops_terminator(target)
    # pure ops between the band's loops move into the innermost body (recomputed per point)
    for level in band[:-1]:
        for op in _body_ops(level.regions[0].blocks[0]):
            if not any(op == b for b in band):
                op.move_before(end)
    for op in _body_ops(innermost_body):
        op.move_before(end)
    for index, iv in enumerate(ivs):
        iv.replace_all_uses_with(new_ivs[index])
    loop.erase()
    return outer


def _why_in_thread(loop: ir.Operation, depth: int) -> str:
    if PARALLEL_LOOP_ATTR in loop.attributes:
        why = (
            f"a kernel maps at most {MAX_BAND} loops"
            if depth == MAX_BAND
            else "it is not perfectly nested in the mapped loops, or its bounds depend on them"
        )
        return f"parallel, but runs sequentially in each GPU thread: {why}"
    if len(loop.results) > 0:
        return (
            "a reduction: runs in each GPU thread in C's order (a tree over a block's threads "
            "needs a band of few points, a long reduction over a rectangular nest, and "
            "-fassociative-math for floating point)"
        )
    return "runs sequentially in each GPU thread: it carries a dependence"


def _perfectly_nested_marked(loop: ir.Operation, band: list[ir.Operation]) -> ir.Operation | None:
    """The marked loop that is the only non-pure op of `loop`'s body, with bounds that use none
    of `band`'s induction variables; else None."""
    ops = _body_ops(loop.regions[0].blocks[0])
    loops = [op for op in ops if op.regions]
    if len(loops) != 1 or any(_touches_memory(op) for op in ops if op != loops[0]):
        return None
    inner = loops[0]
    if inner.name != "affine.for" or PARALLEL_LOOP_ATTR not in inner.attributes:
        return None
    ivs = [b.regions[0].blocks[0].arguments[0] for b in band]
    pure = [op for op in ops if op != inner]
    for operand in inner.operands:
        if any(operand == iv for iv in ivs) or _defined_in(operand, pure):
            return None
    return inner


def _coalescing_order(band: list[ir.Operation]) -> list[int]:
    """The band's loops outer to inner, the one whose induction variable is the last subscript
    of the most accesses (contiguous in memory: threadIdx.x, coalesced) moved innermost; ties
    keep the innermost."""
    ivs = [b.regions[0].blocks[0].arguments[0] for b in band]
    scores = [0] * len(band)
    for op in walk(band[-1]):
        if op.name not in ("affine.load", "affine.store"):
            continue
        amap = ir.AffineMapAttr(op.attributes["map"]).value
        if not amap.results:
            continue
        index_operands = (
            list(op.operands)[2:] if op.name == "affine.store" else list(op.operands)[1:]
        )
        last = amap.results[-1]
        for k, iv in enumerate(ivs):
            for pos, operand in enumerate(index_operands[: amap.n_dims]):
                if operand == iv and _uses_dim_with_unit(last, pos):
                    scores[k] += 1
    best = max(range(len(band)), key=lambda k: (scores[k], k))
    return [k for k in range(len(band)) if k != best] + [best]


def _uses_dim_with_unit(expr: ir.AffineExpr, pos: int) -> bool:
    """Whether `expr` is `d<pos>` plus terms of other dims/symbols/constants (coefficient 1)."""
    text = str(expr)
    name = f"d{pos}"
    terms = [t.strip() for t in text.replace("-", "+-").split("+") if t.strip()]
    return any(t == name for t in terms)
