"""The affine regions of a function, as the scheduling stage's front reads them: demotion to
memory (scratch.py) rewrites them and the model (model.py) is built from them, and both must
agree on what a region is, so that the model finds what demotion prepared.

A region (a `Run`): in every block, a maximal run of consecutive ops that are fully affine
(`affine.for`/`affine.if`/`affine.load`/`affine.store`, pure `arith`/`math`/`index` ops,
`affine.apply`/`min`/`max`) is a candidate (an op marked `polyflow.region_start` begins a new
one); an op with unknown effects (a call, `scf.while`, a
`memref` access the raising left, anything marked `polyflow.not_affine`) ends it and is reported
with its reason; regions inside such ops are searched in turn. Pure ops of the run that depend on
nothing computed in it (constants, index casts of arguments) stay where they are and count as
parameters; a run without loops is left alone. `precheck` says, before anything is changed, why
a run cannot be modeled (a map operand computed in it, two arrays it accesses that may overlap).

`Namer`, `loop_bounds` and `if_condition` (polyflow/ir/affine_text.py, re-exported here)
write a run's affine expressions as isl text: the model's domains and accesses, and demotion's
proofs that two accesses never meet.

Nothing here changes the IR.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from mlir import ir

from polyflow.ir.affine_text import (
    Namer,
    NotModeled,
    block_owner,
    defining_op,
    if_condition,
    loop_bounds,
    operation_of,
)
from polyflow.ir.aliasing import may_alias
from polyflow.ir.locations import source_position
from polyflow.ir.names import KEEP_ORDER_ATTR, NOT_AFFINE_ATTR, REGION_START_ATTR
from polyflow.ir.ops import block_ops

# Ops that touch no memory and have no regions: they may be cloned into every statement.
_PURE_PREFIXES = ("arith.", "math.", "index.")
_PURE_OPS = frozenset({"affine.apply", "affine.min", "affine.max", "ub.poison"})
# Ops that may sit in a run without computing anything the run's statements write.
_STRUCTURE = frozenset({"affine.for", "affine.if", "affine.yield", "affine.load", "affine.store"})
# What may stay in place at the top of a run (besides pure ops) when it needs nothing from it.
_KEEPABLE = frozenset({"memref.alloca", "memref.get_global"})
_TERMINATORS = frozenset(
    {"func.return", "affine.yield", "scf.yield", "scf.condition", "cf.br", "cf.cond_br"}
)


@dataclass(frozen=True)
class LeftOut:
    """An op that ends an affine region (or a region not modeled), and why."""

    op: str
    reason: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        return f"{self.line}:{self.column}: {self.op}: {self.reason}"


# ---------------------------------------------------------------------------------------------
# Small IR queries


def ancestor_in(op: ir.Operation, block: ir.Block) -> ir.Operation | None:
    """The ancestor of `op` (or `op`) that lies directly in `block`, or None."""
    current: ir.Operation | None = op
    while current is not None:
        parent = current.parent
        if parent is None:  # a detached op or the module: no block to ask about
            return None
        if current.block == block:
            return current
        current = parent.operation
    return None


def body_ops(block: ir.Block) -> list[ir.Operation]:
    """The ops of a block, its terminator aside."""
    ops = block_ops(block)
    if ops and ops[-1].name in _TERMINATORS:
        ops.pop()
    return ops


def walk(ops: Sequence[ir.Operation]) -> Iterator[ir.Operation]:
    """`ops` and everything nested in them, in program order (pre-order)."""
    for op in ops:
        yield op
        for region in op.regions:
            for block in region.blocks:
                yield from walk(block_ops(block))


def is_pure(op: ir.Operation) -> bool:
    """Whether `op` touches no memory and has no regions (it may be cloned anywhere)."""
    return len(op.regions) == 0 and (op.name.startswith(_PURE_PREFIXES) or op.name in _PURE_OPS)


def line_column(op: ir.Operation) -> tuple[int, int]:
    """The C (or TC) source position of `op`; (0, 0) when unknown."""
    where = source_position(op.location)
    if where is None:
        return 0, 0
    return int(where.line), int(where.column)


def left_out_of(op: ir.Operation, reason: str) -> LeftOut:
    """`op` left out of the scops for `reason`, at its source position."""
    line, column = line_column(op)
    return LeftOut(op.name, reason, line, column)


# ---------------------------------------------------------------------------------------------
# Regions


def culprit(op: ir.Operation) -> str | None:
    """Why `op` itself cannot be part of a scop (None: it can)."""
    if NOT_AFFINE_ATTR in op.attributes:
        return str(ir.StringAttr(op.attributes[NOT_AFFINE_ATTR]).value)
    if op.name in _STRUCTURE or is_pure(op):
        return None
    if op.name in _KEEPABLE and op.parent is not None and op.parent.name == "func.func":
        return None  # an allocation at the function's top level: an array like an argument
    if op.name in ("func.call", "func.call_indirect", "llvm.call"):
        return "a call (it may touch any memory)"
    if op.name in ("memref.load", "memref.store"):
        return "an access the raising left non-affine"
    return f"'{op.name}' is not modeled (unknown effects)"


def _fully_affine(op: ir.Operation) -> bool:
    return all(culprit(inner) is None for inner in walk([op]))


@dataclass(eq=False)
class Run:
    """A candidate region: consecutive fully affine ops of one block; `ops` are those it
    replaces (from the first op that needs the run to the last), `kept` the pure ops left in
    place between them."""

    block: ir.Block
    ops: list[ir.Operation]
    kept: list[ir.Operation]
    # the ops around the run (None: it starts its block), which demotion never replaces;
    # set while loop-carried values are demoted
    edges: tuple[ir.Operation | None, ir.Operation] | None = None

    def grow(self, op: ir.Operation) -> None:
        """Count the new ops of the block up to `op` (when it is new and last) as the run's
        (demotion inserts loads and stores among the run's ops)."""
        first, last = self.ops[0], self.ops[-1]
        if op.block == self.block and last.is_before_in_block(op):
            last = op
        ops = block_ops(self.block)
        start = next(k for k, o in enumerate(ops) if o == first)
        end = next(k for k, o in enumerate(ops) if o == last)
        self.ops = [o for o in ops[start : end + 1] if not any(o == k for k in self.kept)]

    def holds(self, op: ir.Operation) -> bool:
        """Whether `op` is one of the run's ops or nested in one."""
        # (by `==`: the bindings may hand out several Python objects for one op, and an op's
        # hash changes with its attributes)
        top = ancestor_in(op, self.block)
        return top is not None and any(top == o for o in self.ops)

    def defines(self, value: ir.Value) -> bool:
        """Whether `value` is computed inside the run (not a parameter or free value)."""
        op = defining_op(value)
        return self.holds(block_owner(value) if op is None else op)


def _make_run(block: ir.Block, ops: list[ir.Operation]) -> Run | None:
    """Split a run into the ops it replaces and the ops kept in place; None without loops."""
    needed: list[ir.Operation] = []
    kept: list[ir.Operation] = []
    inside: set[ir.Value] = set()
    for op in ops:
        keepable = (is_pure(op) or op.name in _KEEPABLE) and not any(
            v in inside for v in op.operands
        )
        if keepable and not needed:
            continue  # before the region: stays where it is
        if keepable:
            kept.append(op)
        else:
            needed.append(op)
            for inner in walk([op]):
                inside.update(inner.results)
    # Trailing ops whose values are used after the run stay after it too (the region's code
    # goes before them): a value read from memory for an op the model leaves out, say.
    while needed and _used_after(needed[-1], needed):
        needed.pop()
    # trailing kept ops stay after the region: only those between replaced ops count
    while kept and needed and not kept[-1].is_before_in_block(needed[-1]):
        kept.pop()
    if not any(inner.name == "affine.for" for inner in walk(needed)):
        return None
    return Run(block, needed, kept)


def _used_after(op: ir.Operation, ops: list[ir.Operation]) -> bool:
    """Whether `op` (a load or pure op, no regions) has a result used outside `ops`."""
    if op.regions or not (is_pure(op) or op.name == "affine.load"):
        return False
    for result in op.results:
        for use in result.uses:
            top = ancestor_in(operation_of(use.owner), op.block)
            if top is None or not any(top == o for o in ops):
                return True
    return False


def _scan(block: ir.Block, runs: list[Run], left_out: list[LeftOut]) -> None:
    current: list[ir.Operation] = []

    def flush() -> None:
        if current:
            run = _make_run(block, list(current))
            if run is not None:
                runs.append(run)
            current.clear()

    for op in body_ops(block):
        if _fully_affine(op):
            if KEEP_ORDER_ATTR in op.attributes:
                flush()
                continue
            if REGION_START_ATTR in op.attributes:
                flush()
            current.append(op)
            continue
        flush()
        reason = culprit(op)
        if reason is not None:
            left_out.append(left_out_of(op, reason))
        for region in op.regions:
            for inner in region.blocks:
                _scan(inner, runs, left_out)
    flush()


def find_runs(func_op: ir.Operation) -> tuple[list[Run], list[LeftOut]]:
    """The candidate regions of `func_op`, and the ops that ended them (with reasons)."""
    runs: list[Run] = []
    left_out: list[LeftOut] = []
    for block in func_op.regions[0].blocks:
        _scan(block, runs, left_out)
    return runs, left_out


def precheck(run: Run) -> str | None:
    """Why `run` cannot be modeled, before anything is changed (None: it can)."""
    for op in walk(run.ops):
        for value, _ in _map_operands(op):
            problem = _operand_problem(value, run)
            if problem is not None:
                return problem
        if op.name == "affine.for" and _passes_carried_values_on(op):
            return "a loop hands one carried value on to another (a second-order recurrence)"
    return _alias_problem(run)


def _passes_carried_values_on(loop: ir.Operation) -> bool:
    """Whether `loop` yields, as its carried value `i`, its own earlier carried value `j < i`
    (`yield %new, %a` for `a, b = new, a`): the demotion to memory, value by value, has then
    already replaced `a` (the other order, deriche's `yield %b, %new`, it handles)."""
    body = loop.regions[0].blocks[0]
    carried = list(body.arguments)[1:]
    terminator = list(body.operations)[-1]
    return any(
        value == carried[j]
        for i, value in enumerate(terminator.operands)
        for j in range(min(i, len(carried)))
    )


def _map_operands(op: ir.Operation) -> list[tuple[ir.Value, int]]:
    """The operands of `op` that stand in affine maps (with their operand index)."""
    operands = list(op.operands)
    if op.name == "affine.load":
        return [(v, k) for k, v in enumerate(operands) if k >= 1]
    if op.name == "affine.store":
        return [(v, k) for k, v in enumerate(operands) if k >= 2]
    if op.name in ("affine.for", "affine.if", "affine.apply"):
        view = op.opview
        if op.name == "affine.for":
            n = len(list(view.lowerBoundOperands)) + len(list(view.upperBoundOperands))
            return [(v, k) for k, v in enumerate(operands[:n])]
        return [(v, k) for k, v in enumerate(operands)]
    return []


def _operand_problem(value: ir.Value, run: Run) -> str | None:
    if not run.defines(value):
        if not isinstance(value.type, ir.IndexType):
            return f"a map operand of type {value.type}"
        return None
    op = defining_op(value)
    if op is None:
        owner = block_owner(value)
        if owner.name == "affine.for" and value == owner.opview.induction_variable:
            return None
        return f"a map operand is a block argument of '{owner.name}'"
    if op.name == "arith.constant":
        return None
    if op.name == "affine.apply":
        for inner in op.operands:
            problem = _operand_problem(inner, run)
            if problem is not None:
                return problem
        return None
    return f"a map operand is computed by '{op.name}' inside the region"


def _memrefs(run: Run) -> tuple[list[ir.Value], set[ir.Value]]:
    """The memrefs the run accesses (first access first) and those it writes."""
    seen: list[ir.Value] = []
    written: set[ir.Value] = set()
    for op in walk(run.ops):
        if op.name in ("affine.load", "affine.store"):
            mem = op.operands[1 if op.name == "affine.store" else 0]
            if mem not in seen:
                seen.append(mem)
            if op.name == "affine.store":
                written.add(mem)
    return seen, written


def _alias_problem(run: Run) -> str | None:
    """Two distinct memrefs that may share memory, one of them written: the model would
    miss their dependences (CONTRACT.md, "Semantics")."""
    seen, written = _memrefs(run)
    for a, b in itertools.combinations(seen, 2):
        if (a in written or b in written) and may_alias(a, b):
            return "two arrays it accesses may overlap (an argument from a C pointer, or views)"
    return None


__all__ = [
    "LeftOut",
    "Namer",
    "NotModeled",
    "Run",
    "ancestor_in",
    "block_ops",
    "block_owner",
    "body_ops",
    "culprit",
    "defining_op",
    "find_runs",
    "if_condition",
    "is_pure",
    "left_out_of",
    "line_column",
    "loop_bounds",
    "operation_of",
    "precheck",
    "walk",
]
