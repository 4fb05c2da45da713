"""Under -ffast-math, a sum of three or more terms written as a chain (`((a + b) + c) + d`, C's
left-to-right order) becomes a balanced tree (`(a + b) + (c + d)`), the terms that are ready
first added first: the same number of adds, fewer of them one after the other.

Why: seidel-2d's nine-point sum is one chain of eight dependent adds per point (about 25
cycles from the first load to the store), and LLVM keeps it so: its Reassociate pass writes
every sum of reassociable adds back as a chain, and the backend's machine combiner did not
shorten it. The points of a tile's inner loop are independent, but each waits in the
scheduler for its chain, and only a few fit there at once: -ffast-math ran seidel-2d no faster
than C's order. gcc's reassociation builds such trees (its "reassociation width"). Measured
at LARGE's sizes (fewer time steps), one thread, median over 9 alternating rounds of the time
ratio tree/chain: seidel-2d 0.945, jacobi-2d 0.938 (its five-term sum, vectorized); no other
PolyBench kernel has such a sum.

Only sums whose terms are not products that a multiply-add would absorb (a chain
`a*b + c*d + e*f` is one multiply and two multiply-adds; as a tree it needs a multiply more),
and not a loop's running sum (a term that is the loop's carried value: LLVM vectorizes those
as reductions, which needs the adds' reassociation flag). The new adds carry the sum's flags
less reassociation, so LLVM keeps their shape.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import arith

# Rough latencies (cycles) for ordering the terms: which is ready first matters, not the values.
_LATENCY = {"arith.addf": 3, "arith.subf": 3, "arith.mulf": 4, "arith.divf": 14}
_DEFAULT_LATENCY = 1
_LOADS = frozenset(
    {"affine.load", "memref.load", "vector.load", "vector.transfer_read", "vector.maskedload",
     "affine.vector_load", "llvm.load"}
)  # fmt: skip
_LOAD_LATENCY = 5
# -ffast-math's flags but reassociation, in the order MLIR prints them.
_NOT_REASSOCIATION = ("nnan", "ninf", "nsz", "arcp", "contract", "afn")
# A chain of fewer adds is as short as a tree (two adds of three terms: two levels either way).
_MIN_ADDS = 3


def balance_float_sums(module: ir.Module) -> int:
    """Rewrite each qualifying chain of reassociable `arith.addf` ops in `module` as a balanced
    tree (module docstring); returns how many sums changed. Values are those of a reordered
    sum, which the ops' `reassoc` flag allows."""
    sums: list[_Sum] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if _reassociable_add(op) and not _feeds_same_sum(op):
            found = _collect(op)
            if found is not None:
                sums.append(found)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for found in sums:
        _rebuild(found)
    return len(sums)


@dataclass
class _Sum:
    root: ir.Operation
    adds: list[ir.Operation] = field(default_factory=list)
    terms: list[ir.Value] = field(default_factory=list)


def _flags(op: ir.Operation) -> str:
    return str(op.attributes["fastmath"]) if "fastmath" in op.attributes else ""


def _flag_names(flags: str) -> set[str]:
    """The flags of `#arith.fastmath<...>` (`fast` spelled out as all of them)."""
    if "<" not in flags:
        return set()
    inside = {name.strip() for name in flags[flags.index("<") + 1 : flags.rindex(">")].split(",")}
    if "fast" in inside:
        inside |= {"reassoc", *_NOT_REASSOCIATION}
    return inside - {"fast", "none", ""}


def _reassociable_add(op: ir.Operation) -> bool:
    return op.name == "arith.addf" and "reassoc" in _flag_names(_flags(op))


def _feeds_same_sum(op: ir.Operation) -> bool:
    """Whether `op`'s only use is an add of the same sum (then it is not the sum's root)."""
    uses = list(op.results[0].uses)
    if len(uses) != 1:
        return False
    user = uses[0].owner
    user_op = user.operation if isinstance(user, ir.OpView) else user
    return _inner_add(user_op, op)


def _inner_add(user: ir.Operation, op: ir.Operation) -> bool:
    return (
        _reassociable_add(user)
        and user.block == op.block
        and _flags(user) == _flags(op)
        and user.results[0].type == op.results[0].type
    )


def _collect(root: ir.Operation) -> _Sum | None:
    """The sum ending at `root`: its adds (each after the one using it) and terms in C's
    order; None when it does not qualify (too short, a product term, a loop's carried value,
    or already a tree). Iterative: an unrolled sum may have thousands of terms."""
    found = _Sum(root)
    stack: list[ir.Operation | ir.Value] = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, ir.Value):
            found.terms.append(item)
            continue
        found.adds.append(item)
        for value in reversed(list(item.operands)):  # the left operand comes off first
            owner = _defining_op(value)
            if owner is not None and _inner_add(owner, item) and len(list(value.uses)) == 1:
                stack.append(owner)
            else:
                stack.append(value)
    if len(found.adds) < _MIN_ADDS:
        return None
    if any(_product_or_carried(term) for term in found.terms):
        return None
    if _depth(found.adds) <= (len(found.terms) - 1).bit_length():
        return None
    return found


def _defining_op(value: ir.Value) -> ir.Operation | None:
    if isinstance(value.owner, ir.Block):
        return None
    owner = value.owner
    return owner.operation if isinstance(owner, ir.OpView) else owner


def _product_or_carried(term: ir.Value) -> bool:
    owner = _defining_op(term)
    if owner is None:
        # a loop body's argument past its induction variable is a carried value
        block = term.owner
        parent = block.owner
        return (
            parent is not None
            and parent.name in ("affine.for", "scf.for")
            and (ir.BlockArgument(term).arg_number > 0)
        )
    return owner.name == "arith.mulf" and len(list(term.uses)) == 1


def _depth(adds: list[ir.Operation]) -> int:
    """The most adds one after the other in a sum (`adds` as `_collect` lists them)."""
    depth: dict[ir.Operation, int] = {}
    for op in reversed(adds):  # each add after those it uses
        below = [depth[o] for v in op.operands if (o := _defining_op(v)) is not None and o in depth]
        depth[op] = 1 + max(below, default=0)
    return depth[adds[0]]


def _ready(value: ir.Value, block: ir.Block, memo: dict[ir.Value, int]) -> int:
    """When `value` is ready, in rough cycles from the start of `block`'s iteration
    (iterative: a block may hold long chains)."""
    stack = [value]
    while stack:
        current = stack[-1]
        if current in memo:
            stack.pop()
            continue
        owner = _defining_op(current)
        if owner is None or owner.block != block:
            memo[current] = 0
        elif owner.name in _LOADS:
            memo[current] = _LOAD_LATENCY
        else:
            pending = [v for v in owner.operands if v not in memo]
            if pending:
                stack.extend(pending)
                continue
            latency = _LATENCY.get(owner.name, _DEFAULT_LATENCY)
            memo[current] = latency + max((memo[v] for v in owner.operands), default=0)
        stack.pop()
    return memo[value]


def _rebuild(found: _Sum) -> None:
    """Add the two terms ready first, then the next two ready, ... (Huffman's order on ready
    times): the result of each add is a term ready an add later."""
    root = found.root
    block = root.block
    flags = ir.Attribute.parse(_without_reassociation(_flags(root)))
    memo: dict[ir.Value, int] = {}
    queue = [
        (_ready(term, block, memo), position, term) for position, term in enumerate(found.terms)
    ]
    heapq.heapify(queue)
    position = len(queue)
    with ir.InsertionPoint(root), root.location:
        while len(queue) > 1:
            ready_a, _, a = heapq.heappop(queue)
            ready_b, _, b = heapq.heappop(queue)
            total = arith.AddFOp(a, b, fastmath=flags).result
            heapq.heappush(queue, (max(ready_a, ready_b) + _LATENCY["arith.addf"], position, total))
            position += 1
    root.results[0].replace_all_uses_with(queue[0][2])
    for op in found.adds:  # the root first: each add's only use is the one before it
        op.erase()


def _without_reassociation(flags: str) -> str:
    """`#arith.fastmath<...>` less `reassoc`."""
    names = _flag_names(flags)
    kept = [name for name in _NOT_REASSOCIATION if name in names]
    return f"#arith.fastmath<{','.join(kept) if kept else 'none'}>"
