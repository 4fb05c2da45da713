"""Affine MLIR → the polyhedral model: each maximal fully affine stretch of a function becomes a
`Scop` (statements with domains, access relations and their (2d+1) source order, isl side, pure
data) and a `ScopRegion` (which ops form each statement, which `ir.Value` each parameter and
array is, MLIR side, read by codegen.py).

How (Polygeist's statement formation, see CONTRACT.md):
1. Regions: in every block, a maximal run of consecutive ops that are fully affine
   (`affine.for`/`affine.if`/`affine.load`/`affine.store`, pure `arith`/`math`/`index` ops,
   `affine.apply`/`min`/`max`) is a candidate; an op with unknown effects (a call, `scf.while`,
   a `memref` access the raising left, anything marked `polyflow.not_affine`) ends it and is
   reported with its reason; regions inside such ops are searched in turn. Pure ops of the run
   that depend on nothing computed in it (constants, index casts of arguments) stay where they
   are and count as parameters; a run without loops is left alone.
2. Demotion to memory, so that the model has only loads and stores: an `iter_args` value of an
   `affine.for` whose result is stored to an array element right after the loop, an element
   that nothing in the loop touches (isl proves other accesses to the array address other
   elements), accumulates in that element (undoing raise-reductions); any other goes to a
   scratchpad with one element per iteration of the loop around that `affine.for` (a
   `memref.alloc` of its trip count before the region, freed after it: the iterations no
   longer share the value, so that loop can move inward; see `_Scratch.expanded_home`), or,
   where there is no such loop, a 0-d scratchpad `memref.alloca` at the function entry (an
   `i8` one for `i1`), as do results of `affine.if`. A value computed from memory stays in
   the statements it reaches when they are in its block and nothing up to the last of them
   may write what it loaded (each statement reads it again, at its store); otherwise it, too,
   goes to a 0-d scratchpad, and so does a value used after the region.
3. Statements: each `affine.store` with its backward slice in the region (pure ops are cloned
   per statement, loads stay next to their store). Domains come from the enclosing `affine.for`
   bounds (max/min maps, floordiv/mod, steps) and `affine.if` sets, read by isl; parameters are
   the index values from outside the region (named `P0`...), arrays the memrefs (`A0`...).

Nothing is changed but by step 2, and step 2 keeps the program's meaning. An exception
(a bug) may leave a function half demoted: callers work on a copy (schedule/__init__.py does).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

import islpy as isl
from mlir import ir
from mlir.dialects import affine, arith, func, memref

from polyflow.ir.affine import index_constant
from polyflow.ir.aliasing import may_alias
from polyflow.ir.locations import source_position, statement_name
from polyflow.ir.names import NOT_AFFINE_ATTR, REDUCTIONS_ATTR, symbol_name
from polyflow.poly import isl_helpers as ih

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


# ---------------------------------------------------------------------------------------------
# The model (isl side: pure data)


@dataclass(frozen=True)
class Access:
    """One array access of a statement: `{ S3[i, j] -> A0[i, j + 1] }` within S3's domain."""

    stmt: str
    array: str
    kind: Literal["read", "write"]
    relation: isl.Map


@dataclass(frozen=True)
class Statement:
    """A store and the computation it stores, run once per point of `domain`."""

    name: str
    domain: isl.Set
    accesses: tuple[Access, ...]
    line: int = 0
    column: int = 0

    @property
    def depth(self) -> int:
        """How many loops enclose the statement."""
        return int(self.domain.dim(isl.dim_type.set))


@dataclass(frozen=True)
class Scop:
    """A static control part: statements, arrays and their original (2d+1) order."""

    function: str
    params: tuple[str, ...]
    statements: tuple[Statement, ...]
    arrays: dict[str, tuple[int, ...]]
    initial_schedule: isl.UnionMap
    context: isl.Set

    @property
    def domain(self) -> isl.UnionSet:
        """Every statement instance."""
        return ih.union_set((s.domain for s in self.statements), self.params)

    def accesses(self, kind: Literal["read", "write"]) -> isl.UnionMap:
        """All reads (or all writes) as one relation from statement instances to elements."""
        return ih.union_map(
            (a.relation for s in self.statements for a in s.accesses if a.kind == kind),
            self.params,
        )

    def statement(self, name: str) -> Statement:
        """The statement called `name`."""
        for s in self.statements:
            if s.name == name:
                return s
        raise KeyError(name)


def initial_schedule_tree(scop: Scop) -> isl.Schedule:
    """The source order of `scop` as a schedule tree (sequences and one-member bands, every
    loop generated as one loop), ready for `codegen.generate`."""
    return ih.schedule_tree(scop.domain, scop.initial_schedule)


# ---------------------------------------------------------------------------------------------
# The MLIR side


@dataclass(eq=False)
class StatementOps:
    """The ops of one statement: its backward slice in dependence order, the store last; the
    IVs of the loops around it (outermost first; the domain's `i0, i1...`) and those loops."""

    name: str
    ops: tuple[ir.Operation, ...]
    ivs: tuple[ir.Value, ...]
    loops: tuple[ir.Operation, ...]

    @property
    def store(self) -> ir.Operation:
        return self.ops[-1]


@dataclass(eq=False)
class ScopRegion:
    """Where a Scop lives: the top-level ops of `block` it replaces (in order; pure ops kept in
    between are not among them), the value of each parameter and array, each statement's ops."""

    function: ir.Operation
    block: ir.Block
    ops: tuple[ir.Operation, ...]
    params: dict[str, ir.Value]
    arrays: dict[str, ir.Value]
    statements: dict[str, StatementOps]


@dataclass(frozen=True)
class LeftOut:
    """An op that ends an affine region (or a region not modeled), and why."""

    op: str
    reason: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        return f"{self.line}:{self.column}: {self.op}: {self.reason}"


@dataclass
class Extraction:
    """What `find_scops` found: the scops, and what was left out of them (with reasons)."""

    scops: list[tuple[Scop, ScopRegion]] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)


class NotModeled(Exception):
    """Something in a region that the model cannot express (the region is left alone)."""


# ---------------------------------------------------------------------------------------------
# Small IR queries


def _op(value_owner: object) -> ir.Operation:
    return value_owner.operation  # type: ignore[attr-defined,no-any-return]


def _defining_op(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return _op(owner)


def _block_owner(value: ir.Value) -> ir.Operation:
    """The op whose region holds the block of block argument `value`."""
    owner = value.owner
    assert isinstance(owner, ir.Block)
    return _op(owner.owner)


def _ancestor_in(op: ir.Operation, block: ir.Block) -> ir.Operation | None:
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


def _ops(block: ir.Block) -> list[ir.Operation]:
    return [op.operation for op in block.operations]


def _body_ops(block: ir.Block) -> list[ir.Operation]:
    """The ops of a block, its terminator aside."""
    ops = _ops(block)
    if ops and ops[-1].name in _TERMINATORS:
        ops.pop()
    return ops


def _walk(ops: Sequence[ir.Operation]) -> Iterator[ir.Operation]:
    """`ops` and everything nested in them, in program order (pre-order)."""
    for op in ops:
        yield op
        for region in op.regions:
            for block in region.blocks:
                yield from _walk(_ops(block))


def _is_pure(op: ir.Operation) -> bool:
    return len(op.regions) == 0 and (op.name.startswith(_PURE_PREFIXES) or op.name in _PURE_OPS)


def _position(op: ir.Operation) -> tuple[int, int]:
    where = source_position(op.location)
    if where is None:
        return 0, 0
    return int(where.line), int(where.column)


def _left_out(op: ir.Operation, reason: str) -> LeftOut:
    line, column = _position(op)
    return LeftOut(op.name, reason, line, column)


# ---------------------------------------------------------------------------------------------
# 1. Regions


def _culprit(op: ir.Operation) -> str | None:
    """Why `op` itself cannot be part of a scop (None: it can)."""
    if NOT_AFFINE_ATTR in op.attributes:
        return str(ir.StringAttr(op.attributes[NOT_AFFINE_ATTR]).value)
    if op.name in _STRUCTURE or _is_pure(op):
        return None
    if op.name in _KEEPABLE and op.parent is not None and op.parent.name == "func.func":
        return None  # an allocation at the function's top level: an array like an argument
    if op.name in ("func.call", "func.call_indirect", "llvm.call"):
        return "a call (it may touch any memory)"
    if op.name in ("memref.load", "memref.store"):
        return "an access the raising left non-affine"
    return f"'{op.name}' is not modeled (unknown effects)"


def _fully_affine(op: ir.Operation) -> bool:
    return all(_culprit(inner) is None for inner in _walk([op]))


@dataclass(eq=False)
class _Run:
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
        ops = _ops(self.block)
        start = next(k for k, o in enumerate(ops) if o == first)
        end = next(k for k, o in enumerate(ops) if o == last)
        self.ops = [o for o in ops[start : end + 1] if not any(o == k for k in self.kept)]

    def holds(self, op: ir.Operation) -> bool:
        """Whether `op` is one of the run's ops or nested in one."""
        # (by `==`: the bindings may hand out several Python objects for one op, and an op's
        # hash changes with its attributes)
        top = _ancestor_in(op, self.block)
        return top is not None and any(top == o for o in self.ops)

    def defines(self, value: ir.Value) -> bool:
        """Whether `value` is computed inside the run (not a parameter or free value)."""
        op = _defining_op(value)
        return self.holds(_block_owner(value) if op is None else op)


def _make_run(block: ir.Block, ops: list[ir.Operation]) -> _Run | None:
    """Split a run into the ops it replaces and the ops kept in place; None without loops."""
    needed: list[ir.Operation] = []
    kept: list[ir.Operation] = []
    inside: set[ir.Value] = set()
    for op in ops:
        keepable = (_is_pure(op) or op.name in _KEEPABLE) and not any(
            v in inside for v in op.operands
        )
        if keepable and not needed:
            continue  # before the region: stays where it is
        if keepable:
            kept.append(op)
        else:
            needed.append(op)
            for inner in _walk([op]):
                inside.update(inner.results)
    # Trailing ops whose values are used after the run stay after it too (the region's code
    # goes before them): a value read from memory for an op the model leaves out, say.
    while needed and _used_after(needed[-1], needed):
        needed.pop()
    # trailing kept ops stay after the region: only those between replaced ops count
    while kept and needed and not kept[-1].is_before_in_block(needed[-1]):
        kept.pop()
    if not any(inner.name == "affine.for" for inner in _walk(needed)):
        return None
    return _Run(block, needed, kept)


def _used_after(op: ir.Operation, ops: list[ir.Operation]) -> bool:
    """Whether `op` (a load or pure op, no regions) has a result used outside `ops`."""
    if op.regions or not (_is_pure(op) or op.name == "affine.load"):
        return False
    for result in op.results:
        for use in result.uses:
            top = _ancestor_in(_op(use.owner), op.block)
            if top is None or not any(top == o for o in ops):
                return True
    return False


def _scan(block: ir.Block, runs: list[_Run], left_out: list[LeftOut]) -> None:
    current: list[ir.Operation] = []

    def flush() -> None:
        if current:
            run = _make_run(block, list(current))
            if run is not None:
                runs.append(run)
            current.clear()

    for op in _body_ops(block):
        if _fully_affine(op):
            current.append(op)
            continue
        flush()
        reason = _culprit(op)
        if reason is not None:
            left_out.append(_left_out(op, reason))
        for region in op.regions:
            for inner in region.blocks:
                _scan(inner, runs, left_out)
    flush()


def _find_runs(func_op: ir.Operation) -> tuple[list[_Run], list[LeftOut]]:
    runs: list[_Run] = []
    left_out: list[LeftOut] = []
    for block in func_op.regions[0].blocks:
        _scan(block, runs, left_out)
    return runs, left_out


def _precheck(run: _Run) -> str | None:
    """Why `run` cannot be modeled, before anything is changed (None: it can)."""
    for op in _walk(run.ops):
        for value, _ in _map_operands(op):
            problem = _operand_problem(value, run)
            if problem is not None:
                return problem
    return _alias_problem(run)


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


def _operand_problem(value: ir.Value, run: _Run) -> str | None:
    if not run.defines(value):
        if not isinstance(value.type, ir.IndexType):
            return f"a map operand of type {value.type}"
        return None
    op = _defining_op(value)
    if op is None:
        owner = _block_owner(value)
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


def _memrefs(run: _Run) -> tuple[list[ir.Value], set[ir.Value]]:
    """The memrefs the run accesses (first access first) and those it writes."""
    seen: list[ir.Value] = []
    written: set[ir.Value] = set()
    for op in _walk(run.ops):
        if op.name in ("affine.load", "affine.store"):
            mem = op.operands[1 if op.name == "affine.store" else 0]
            if mem not in seen:
                seen.append(mem)
            if op.name == "affine.store":
                written.add(mem)
    return seen, written


def _alias_problem(run: _Run) -> str | None:
    """Two distinct memrefs that may share memory, one of them written: the model would
    miss their dependences (CONTRACT.md, "Semantics")."""
    seen, written = _memrefs(run)
    for a, b in itertools.combinations(seen, 2):
        if (a in written or b in written) and may_alias(a, b):
            return "two arrays it accesses may overlap (an argument from a C pointer, or views)"
    return None


# ---------------------------------------------------------------------------------------------
# 2. Demotion to memory


class _Scratch:
    """Makes 0-d scratchpads at the function entry, and (with `expand`) expanded ones."""

    def __init__(self, func_op: ir.Operation, *, expand: bool = True) -> None:
        self.entry = func_op.regions[0].blocks[0]
        self.expand = expand

    def home(self, value_type: ir.Type, loc: ir.Location) -> _Home:
        """A new scratchpad for values of `value_type`. Integers narrower than a byte are kept
        in an `i8` (LLVM lowering stores whole bytes)."""
        elem = value_type
        if isinstance(value_type, ir.IntegerType) and value_type.width < 8:
            elem = ir.IntegerType.get_signless(8)
        mtype = ir.MemRefType.get([], elem)
        op = memref.AllocaOp(
            mtype, [], [], loc=loc, ip=ir.InsertionPoint.at_block_begin(self.entry)
        )
        return _Home(op.result, ir.AffineMapAttr.get(ir.AffineMap.get(0, 0, [])), (), value_type)

    def expanded_home(self, value_type: ir.Type, loop: ir.Operation, run: _Run) -> _Home | None:
        """A scratchpad with one element per iteration of the loop around `loop` (which must
        lie in `run`), for a value `loop` carries: each iteration of the outer loop starts the
        value afresh, so the copies never meet, and the outer loop carries no dependence
        through it (deriche's column passes, a recurrence down each column, can then run row
        by row). On the heap around the run: its size, the outer loop's trip count, is known
        before the run. None when there is no such loop: not in the run, a step other than 1,
        a lower bound that is not a constant, an upper bound that is a min, or one computed
        inside the run."""
        if not self.expand or run.edges is None:
            return None
        if isinstance(value_type, ir.IntegerType) and value_type.width < 8:
            return None
        parent = loop.parent
        outer = parent.operation if parent is not None else None
        if (
            outer is None
            or outer.name != "affine.for"
            or not _inside_span(outer, run.block, *run.edges)
        ):
            return None
        view = outer.opview
        lower, upper = view.lowerBoundMap.value, view.upperBoundMap.value
        lows = list(lower.results)
        if view.step.value != 1 or len(lows) != 1 or len(upper.results) != 1:
            return None
        if not isinstance(lows[0], ir.AffineConstantExpr):
            return None
        before, after = run.edges
        if any(_computed_after(v, run.block, before) for v in view.upperBoundOperands):
            return None
        low = lows[0].value
        loc = loop.location
        ip = (
            ir.InsertionPoint.at_block_begin(run.block)
            if before is None
            else ir.InsertionPoint(_op_after(before))
        )
        upper_value = affine.AffineApplyOp(upper, list(view.upperBoundOperands), loc=loc, ip=ip)
        d0 = ir.AffineDimExpr.get(0)
        # at least one element: an empty outer loop still needs a valid allocation
        trip = ir.AffineMap.get(1, 0, [d0 - low, ir.AffineConstantExpr.get(1)])
        size = affine.AffineMaxOp(trip, [upper_value.result], loc=loc, ip=ip).result
        mtype = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], value_type)
        mem = memref.AllocOp(mtype, [size], [], loc=loc, ip=ip).result
        memref.DeallocOp(mem, loc=loc, ip=ir.InsertionPoint(after))
        index = ir.AffineMap.get(1, 0, [d0 - low])
        iv = outer.regions[0].blocks[0].arguments[0]
        return _Home(mem, ir.AffineMapAttr.get(index), (iv,), value_type)


def _inside_span(
    op: ir.Operation, block: ir.Block, before: ir.Operation | None, after: ir.Operation
) -> bool:
    """Whether `op` is (nested in) an op of `block` after `before` (None: from its start) and
    before `after`."""
    top = _ancestor_in(op, block)
    if top is None or top == after or not top.is_before_in_block(after):
        return False
    return before is None or before.is_before_in_block(top)


def _computed_after(value: ir.Value, block: ir.Block, before: ir.Operation | None) -> bool:
    """Whether `value` is computed in `block` after `before` (None: the block's start): by an op
    there or nested in one, or as the argument of a block nested in one (a loop's IV)."""
    op = _defining_op(value)
    if op is None:
        if value.owner == block:  # an argument of `block` itself is there before any op
            return False
        op = _block_owner(value)
    top = _ancestor_in(op, block)
    return top is not None and (before is None or not top.is_before_in_block(_op_after(before)))


def _op_after(op: ir.Operation) -> ir.Operation:
    """The op right after `op` in its block (a block ends with a terminator, so there is one)."""
    ops = _ops(op.block)
    return ops[next(k for k, o in enumerate(ops) if o == op) + 1]


@dataclass(frozen=True)
class _Home:
    """Where a value lives in memory: an element `mem[map(operands)]` (holding values of
    `value_type`, widened to the memref's element type when that is wider)."""

    mem: ir.Value
    amap: ir.Attribute
    operands: tuple[ir.Value, ...]
    value_type: ir.Type | None = None

    def load(self, before: ir.Operation, loc: ir.Location) -> ir.Value:
        ip = ir.InsertionPoint(before)
        elem = ir.MemRefType(self.mem.type).element_type
        value = affine.AffineLoadOp(elem, self.mem, list(self.operands), self.amap, loc=loc, ip=ip)
        if self.value_type is not None and self.value_type != elem:
            return arith.TruncIOp(self.value_type, value.result, loc=loc, ip=ip).result
        return value.result

    def store(self, value: ir.Value, before: ir.Operation, loc: ir.Location) -> list[ir.Operation]:
        """Store `value` before `before`; returns the ops made (the first uses `value`)."""
        ip = ir.InsertionPoint(before)
        made: list[ir.Operation] = []
        elem = ir.MemRefType(self.mem.type).element_type
        if self.value_type is not None and self.value_type != elem:
            widen = arith.ExtUIOp(elem, value, loc=loc, ip=ip)
            made.append(widen.operation)
            value = widen.result
        op = affine.AffineStoreOp(value, self.mem, list(self.operands), self.amap, loc=loc, ip=ip)
        return [*made, op.operation]

    @staticmethod
    def of(access: ir.Operation) -> _Home:
        first = 2 if access.name == "affine.store" else 1
        operands = list(access.operands)
        return _Home(operands[first - 1], access.attributes["map"], tuple(operands[first:]))

    def same(self, other: _Home) -> bool:
        return (
            self.mem == other.mem
            and str(self.amap) == str(other.amap)
            and len(self.operands) == len(other.operands)
            and all(a == b for a, b in zip(self.operands, other.operands, strict=True))
        )


def _loads_instead(value: ir.Value, home: _Home, skip: Sequence[ir.Operation] = ()) -> None:
    """Every use of `value` (but by `skip`) reads it from `home` instead, right before its user."""
    uses = [(_op(use.owner), use.operand_number) for use in value.uses]
    for user, number in uses:
        if any(user == s for s in skip):
            continue
        user.operands[number] = home.load(user, user.location)


def _store_after(
    value: ir.Value, home: _Home, op: ir.Operation, loc: ir.Location
) -> list[ir.Operation]:
    """Store `value` to `home` right after `op` (never a terminator); returns the ops made."""
    return home.store(value, _op_after(op), loc)


def _writes(op: ir.Operation, mem: ir.Value | None = None) -> bool:
    """Whether `op` (or an op nested in it) may write memory (that may alias `mem`, if given)."""
    for inner in _walk([op]):
        if inner.name in ("affine.store", "memref.store"):
            target = inner.operands[1]
            if mem is None or may_alias(target, mem):
                return True
        elif _culprit(inner) is not None:
            return True
    return False


def _touches(op: ir.Operation, home: _Home, run: _Run) -> bool:
    """Whether `op` or an op nested in it may access the element `home` (an access to its
    memref at an address isl proves different does not count)."""
    for inner in _walk([op]):
        if inner.name in ("affine.load", "affine.store"):
            access = _Home.of(inner)
            if access.mem == home.mem:
                if not _never_same(inner, home, run):
                    return True
            elif may_alias(access.mem, home.mem):
                return True
        elif _culprit(inner) is not None:
            return True
    return False


def _around(op: ir.Operation, run: _Run) -> tuple[list[ir.Operation], list[ir.Operation]]:
    """The `affine.for`s (outermost first) and the `affine.if`s whose then-branch holds `op`,
    inside the run."""
    loops: list[ir.Operation] = []
    ifs: list[ir.Operation] = []
    child = op
    while child.block != run.block:
        parent = child.parent.operation
        if parent.name == "affine.for":
            loops.insert(0, parent)
        elif parent.name == "affine.if" and child.block == parent.regions[0].blocks[0]:
            ifs.append(parent)
        child = parent
    return loops, ifs


def _never_same(access: ir.Operation, home: _Home, run: _Run) -> bool:
    """Whether isl proves that `access` never addresses `home` (whose operands are defined
    outside the loops around `access` or are their IVs), wherever it runs."""
    loops, ifs = _around(access, run)
    names = ih.iterator_names(len(loops))
    ivs = {loop.opview.induction_variable: n for loop, n in zip(loops, names, strict=True)}
    namer = _Namer(run)
    try:
        parts: list[str] = []
        for loop, name in zip(loops, names, strict=True):
            parts += _bounds(loop, name, namer, ivs)
        for if_op in ifs:
            amap, equalities = _condition(if_op)
            lhs = namer.map_results(amap, list(if_op.operands), ivs)
            parts += [f"{e} {'=' if eq else '>='} 0" for e, eq in zip(lhs, equalities, strict=True)]
        mine = _Home.of(access)
        there = namer.map_results(ir.AffineMapAttr(mine.amap).value, list(mine.operands), ivs)
        here = namer.map_results(ir.AffineMapAttr(home.amap).value, list(home.operands), ivs)
        parts += [f"{a} = {b}" for a, b in zip(there, here, strict=True)]
        params = tuple(namer.params.values())
        formula = " and ".join(f"({p})" for p in parts)
        return bool(ih.statement_set(params, "X", len(loops), formula).is_empty())
    except (NotModeled, isl.Error):
        return False


def _between(first: ir.Operation, last: ir.Operation) -> list[ir.Operation]:
    """The ops strictly between two ops of one block."""
    out: list[ir.Operation] = []
    inside = False
    for op in _ops(first.block):
        if op == last:
            break
        if inside:
            out.append(op)
        if op == first:
            inside = True
    return out


def _home_of_carried(
    loop: ir.Operation, index: int, run: _Run
) -> tuple[_Home, ir.Operation, bool] | None:
    """The array element iter_arg `index` of `loop` can live in, as raise-reductions found it:
    the result's one use is a store of it to that element right after the loop (nothing
    between them touches its memref) and nothing in the loop touches the element. Returns the
    element, that store, and whether the init must be stored there first (not when it is a
    load of the element before the loop with no write in between)."""
    view = loop.opview
    init = list(view.inits)[index]
    uses = list(loop.results[index].uses)
    if len(uses) != 1:
        return None
    store = _op(uses[0].owner)
    if store.name != "affine.store" or store.block != loop.block or uses[0].operand_number != 0:
        return None
    home = _Home.of(store)
    if _touches(loop, home, run):
        return None
    for op in _between(loop, store):  # they would see the element's new value too early
        if any(
            may_alias(_Home.of(inner).mem, home.mem)
            for inner in _walk([op])
            if inner.name in ("affine.load", "affine.store")
        ) or _writes(op, home.mem):
            return None
    load = _defining_op(init)
    loaded = (
        load is not None
        and load.name == "affine.load"
        and load.block == loop.block
        and load.is_before_in_block(loop)
        and _Home.of(load).same(home)
        and not any(_writes(op, home.mem) for op in _between(load, loop))
    )
    return home, store, not loaded


def _rebuild_loop(loop: ir.Operation) -> None:
    """Replace `loop` (whose iter_args and results are no longer used) by one without them."""
    view = loop.opview
    with loop.location:  # the IV (a block argument) takes the ambient location
        new = affine.AffineForOp(
            view.lowerBoundMap.value,
            view.upperBoundMap.value,
            view.step,
            None,
            lower_bound_operands=list(view.lowerBoundOperands),
            upper_bound_operands=list(view.upperBoundOperands),
            loc=loop.location,
            ip=ir.InsertionPoint(loop),
        )
    for name in [str(n) for n in loop.attributes]:
        if "." in name and name != REDUCTIONS_ATTR:  # discardable attributes travel along
            new.operation.attributes[name] = loop.attributes[name]
    old_body = loop.regions[0].blocks[0]
    old_body.arguments[0].replace_all_uses_with(new.induction_variable)
    ops = _ops(old_body)
    for op in ops[:-1]:
        new.body.append(op)
    affine.AffineYieldOp([], loc=ops[-1].location, ip=ir.InsertionPoint(new.body))
    loop.erase()


def _rebuild_if(if_op: ir.Operation) -> None:
    """Replace `if_op` (whose results are no longer used) by one without results."""
    new = ir.Operation.create(
        "affine.if",
        results=[],
        operands=list(if_op.operands),
        attributes={"condition": if_op.attributes["condition"]},
        regions=2,
        loc=if_op.location,
        ip=ir.InsertionPoint(if_op),
    )
    for k in range(2):
        if len(if_op.regions[k].blocks) == 0:
            continue
        old = if_op.regions[k].blocks[0]
        ops = _ops(old)
        if k == 1 and len(ops) <= 1:
            continue  # an else branch that only yields
        block = new.regions[k].blocks.append()
        for op in ops[:-1]:
            block.append(op)
        affine.AffineYieldOp([], loc=ops[-1].location, ip=ir.InsertionPoint(block))
    if_op.erase()


def _location_of(value: ir.Value, fallback: ir.Location) -> ir.Location:
    op = _defining_op(value)
    return fallback if op is None else op.location


def _demote_loop(loop: ir.Operation, scratch: _Scratch, run: _Run) -> None:
    body = loop.regions[0].blocks[0]
    yield_op = _ops(body)[-1]
    view = loop.opview
    inits = list(view.inits)
    for index in range(len(loop.results)):
        acc = body.arguments[1 + index]
        result = loop.results[index]
        found = _home_of_carried(loop, index, run)
        # the stores made take the location of what they store (a C statement's, usually)
        update = yield_op.operands[index]
        if found is not None:
            home, store, store_init = found
            update_loc = _location_of(update, store.location)
            init_loc = _location_of(inits[index], store.location)
            store.erase()  # the loop now leaves the element where that store would put it
            if store_init:
                home.store(inits[index], loop, init_loc)
        else:
            home = scratch.expanded_home(acc.type, loop, run) or scratch.home(
                acc.type, loop.location
            )
            home.store(inits[index], loop, _location_of(inits[index], loop.location))
            _loads_instead(result, home)
            update_loc = _location_of(update, yield_op.location)
        home.store(update, yield_op, update_loc)
        _loads_instead(acc, home, skip=[yield_op])
    init_ops = [op for op in (_defining_op(v) for v in inits) if op is not None]
    _rebuild_loop(loop)
    for op in init_ops:  # a promoted element's load, now unused
        if op.name == "affine.load" and not list(op.results[0].uses):
            op.erase()


def _demote_if(if_op: ir.Operation, scratch: _Scratch) -> None:
    yields = [_ops(if_op.regions[k].blocks[0])[-1] for k in range(2)]
    for index, result in enumerate(if_op.results):
        home = scratch.home(result.type, if_op.location)
        for y in yields:
            home.store(y.operands[index], y, _location_of(y.operands[index], y.location))
        _loads_instead(result, home)
    _rebuild_if(if_op)


def _reads_memory(value: ir.Value, run: _Run, memo: dict[ir.Value, bool]) -> bool:
    """Whether `value` is computed (in the run) from a load."""
    known = memo.get(value)
    if known is not None:
        return known
    op = _defining_op(value)
    out = False
    if op is not None and run.holds(op):
        if op.name == "affine.load":
            out = True
        elif _is_pure(op):
            out = any(_reads_memory(v, run, memo) for v in op.operands)
    memo[value] = out
    return out


def _stores_reached(value: ir.Value, run: _Run) -> list[ir.Operation] | None:
    """The stores that `value` flows into through pure ops (None: it flows elsewhere too)."""
    out: list[ir.Operation] = []
    for use in value.uses:
        user = _op(use.owner)
        if not run.holds(user):
            return None
        if user.name == "affine.store" and use.operand_number == 0:
            if not any(user == s for s in out):
                out.append(user)
        elif _is_pure(user):
            for result in user.results:
                inner = _stores_reached(result, run)
                if inner is None:
                    return None
                out += [s for s in inner if not any(s == o for o in out)]
        else:
            return None
    return out


def _stays(op: ir.Operation, run: _Run) -> bool:
    """Whether the values of `op` (computed from memory) may be recomputed by each statement
    they reach, at its store: the stores are in `op`'s block and no op up to the last of them
    may write what the loads behind `op` read. (A statement's reads count as happening at its
    store, where codegen puts its copy of them.)"""
    stores: list[ir.Operation] = []
    for result in op.results:
        reached = _stores_reached(result, run)
        if reached is None:
            return False
        stores += reached
    if any(store.block != op.block for store in stores):
        return False
    if not stores:
        return True
    last = stores[0]
    for store in stores[1:]:
        if last.is_before_in_block(store):
            last = store
    for load in _loads_behind(op, run):
        if load.block != op.block:
            return False
        mem = _Home.of(load).mem
        if any(_writes(o, mem) for o in _between(load, last)):
            return False
    return True


def _loads_behind(op: ir.Operation, run: _Run) -> list[ir.Operation]:
    """The loads in the run that `op` is computed from (through pure ops), `op` included."""
    out: list[ir.Operation] = []
    work = [op]
    while work:
        current = work.pop()
        if current.name == "affine.load":
            if not any(current == o for o in out):
                out.append(current)
            continue
        for value in current.operands:
            inner = _defining_op(value)
            if (
                inner is not None
                and run.holds(inner)
                and (_is_pure(inner) or inner.name == "affine.load")
            ):
                work.append(inner)
    return out


def _demote_carried(run: _Run, scratch: _Scratch) -> None:
    """Step 2 of the module docstring, for loop-carried values and results of ifs."""
    carried = [
        op
        for op in _walk(run.ops)
        if op.name in ("affine.for", "affine.if") and len(op.results) > 0
    ]
    ops = _ops(run.block)
    start = next(k for k, o in enumerate(ops) if o == run.ops[0])
    run.edges = (ops[start - 1] if start > 0 else None, _op_after(run.ops[-1]))
    for op in carried:  # outer loops first: an inner loop then sees its init loaded before it
        if op.name == "affine.for":
            _demote_loop(op, scratch, run)
        else:
            _demote_if(op, scratch)


def _demote_values(run: _Run, scratch: _Scratch) -> None:
    """Step 2 of the module docstring, for values shared by statements or blocks."""
    memo: dict[ir.Value, bool] = {}
    ops = list(_walk(run.ops))
    for op in reversed(ops):  # later ops first: a value is demoted at its last shared step
        if not op.results or not (_is_pure(op) or op.name == "affine.load"):
            continue
        if not any(_reads_memory(v, run, memo) for v in op.results) or _stays(op, run):
            continue
        for result in op.results:
            home = scratch.home(result.type, op.location)
            made = _store_after(result, home, op, op.location)
            _loads_instead(result, home, skip=made[:1])
            run.grow(made[-1])


# ---------------------------------------------------------------------------------------------
# 3. Statements, domains, accesses


def _condition(if_op: ir.Operation) -> tuple[ir.AffineMap, list[bool]]:
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


class _Namer:
    """isl text for affine expressions over a region's values: IVs by their statement's
    iterator names, parameters `P<n>` (numbered in order of first use), constants inline."""

    def __init__(self, run: _Run) -> None:
        self.run = run
        self.params: dict[ir.Value, str] = {}

    def value(self, value: ir.Value, ivs: dict[ir.Value, str]) -> str:
        name = ivs.get(value)
        if name is not None:
            return name
        constant = index_constant(value)
        if constant is not None:
            return str(constant)
        if not self.run.defines(value):
            if value not in self.params:
                self.params[value] = f"P{len(self.params)}"
            return self.params[value]
        op = _defining_op(value)
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


@dataclass
class _Site:
    """A store and where it sits: loops and conditions around it (inside the region) and its
    (2d+1) schedule row."""

    store: ir.Operation
    loops: list[ir.Operation]
    conds: list[tuple[ir.Operation, bool]]
    row: list[int | str]


def _sites(ops: Sequence[ir.Operation]) -> list[_Site]:
    out: list[_Site] = []

    def visit(
        ops: Sequence[ir.Operation],
        loops: list[ir.Operation],
        conds: list[tuple[ir.Operation, bool]],
        row: list[int | str],
        counter: Iterator[int],
    ) -> None:
        for op in ops:
            if op.name == "affine.for":
                name = ih.iterator_names(len(loops) + 1)[-1]
                inner = _body_ops(op.regions[0].blocks[0])
                visit(inner, [*loops, op], conds, [*row, next(counter), name], itertools.count())
            elif op.name == "affine.if":
                for k, branch in enumerate(op.regions):
                    for block in branch.blocks:
                        visit(_body_ops(block), loops, [*conds, (op, k == 0)], row, counter)
            elif op.name == "affine.store":
                out.append(_Site(op, loops, conds, [*row, next(counter)]))

    visit(ops, [], [], [], itertools.count())
    return out


def _slice(site: _Site, run: _Run) -> list[ir.Operation]:
    """The store's backward slice in the region, in dependence order, the store last."""
    ivs = {loop.opview.induction_variable for loop in site.loops}
    order: list[ir.Operation] = []

    def visit(value: ir.Value) -> None:
        if value in ivs or not run.defines(value):
            return
        op = _defining_op(value)
        if op is None:
            raise NotModeled(f"a block argument of '{_block_owner(value).name}' in a statement")
        if any(op == o for o in order):
            return
        if op.name == "affine.load":
            if op.block != site.store.block:
                raise NotModeled("a load used in another block (not demoted)")
        elif not _is_pure(op):
            raise NotModeled(f"a value of '{op.name}' used in a statement")
        for operand in op.operands:
            visit(operand)
        if not any(op == o for o in order):
            order.append(op)

    for operand in site.store.operands:
        visit(operand)
    return [*order, site.store]


@dataclass
class _Text:
    """One statement as isl text, before the parameters are all known."""

    name: str
    depth: int
    domain: list[str]
    excluded: list[str]
    accesses: list[tuple[Literal["read", "write"], ir.Value, list[str]]]
    row: list[int | str]
    ops: StatementOps
    line: int
    column: int


def _bounds(loop: ir.Operation, name: str, namer: _Namer, ivs: dict[ir.Value, str]) -> list[str]:
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


def _statement_text(site: _Site, run: _Run, namer: _Namer, name: str) -> _Text:
    names = ih.iterator_names(len(site.loops))
    ivs = {loop.opview.induction_variable: n for loop, n in zip(site.loops, names, strict=True)}
    domain: list[str] = []
    excluded: list[str] = []
    for loop, iv_name in zip(site.loops, names, strict=True):
        domain += _bounds(loop, iv_name, namer, ivs)
    for if_op, then in site.conds:
        amap, equalities = _condition(if_op)
        lhs = namer.map_results(amap, list(if_op.operands), ivs)
        parts = [f"{e} {'=' if eq else '>='} 0" for e, eq in zip(lhs, equalities, strict=True)]
        text = " and ".join(parts) if parts else "true"
        (domain if then else excluded).append(text)
    ops = _slice(site, run)
    accesses: list[tuple[Literal["read", "write"], ir.Value, list[str]]] = []
    for op in ops:
        if op.name in ("affine.load", "affine.store"):
            home = _Home.of(op)
            amap = ir.AffineMapAttr(home.amap).value
            subscripts = namer.map_results(amap, list(home.operands), ivs)
            kind: Literal["read", "write"] = "write" if op.name == "affine.store" else "read"
            accesses.append((kind, home.mem, subscripts))
    line, column = _position(site.store)
    stmt_ops = StatementOps(
        name,
        tuple(ops),
        tuple(ivs),
        tuple(site.loops),
    )
    return _Text(
        name, len(site.loops), domain, excluded, accesses, site.row, stmt_ops, line, column
    )


def _unique_names(sites: Sequence[_Site]) -> list[str]:
    used: set[str] = set()
    out: list[str] = []
    for site in sites:
        base = statement_name(site.store.location) or "S"
        name, k = base, 0
        while name in used or (name == "S" and base == "S"):
            k += 1
            name = f"{base}_{k}"
        used.add(name)
        out.append(name)
    return out


def _build(run: _Run, func_op: ir.Operation) -> tuple[Scop, ScopRegion]:
    """Step 3 of the module docstring, on a run already demoted."""
    namer = _Namer(run)
    sites = _sites(run.ops)
    texts = [
        _statement_text(site, run, namer, name)
        for site, name in zip(sites, _unique_names(sites), strict=True)
    ]
    params = tuple(namer.params.values())
    arrays: dict[ir.Value, str] = {}
    for text in texts:
        for _, mem, _ in text.accesses:
            if mem not in arrays:
                arrays[mem] = f"A{len(arrays)}"
    width = 2 * max((t.depth for t in texts), default=0) + 1
    statements: list[Statement] = []
    rows: list[isl.Map] = []
    for text in texts:
        formula = " and ".join(f"({part})" for part in text.domain) or None
        domain = ih.statement_set(params, text.name, text.depth, formula)
        for part in text.excluded:
            domain = domain.subtract(ih.statement_set(params, text.name, text.depth, part))
        domain = domain.coalesce()
        accesses = tuple(
            Access(
                text.name,
                arrays[mem],
                kind,
                ih.access_relation(params, text.name, text.depth, arrays[mem], subscripts)
                .intersect_domain(domain)
                .coalesce(),
            )
            for kind, mem, subscripts in text.accesses
        )
        statements.append(Statement(text.name, domain, accesses, text.line, text.column))
        row = text.row + [0] * (width - len(text.row))
        rows.append(ih.schedule_relation(params, text.name, text.depth, row))
    scop = Scop(
        function=symbol_name(func_op),
        params=params,
        statements=tuple(statements),
        arrays={name: _shape(mem) for mem, name in arrays.items()},
        initial_schedule=ih.union_map(rows, params),
        context=ih.params_universe(params),
    )
    region = ScopRegion(
        function=func_op,
        block=run.block,
        ops=tuple(run.ops),
        params={name: value for value, name in namer.params.items()},
        arrays={name: mem for mem, name in arrays.items()},
        statements={t.name: t.ops for t in texts},
    )
    return scop, region


def _shape(mem: ir.Value) -> tuple[int, ...]:
    mtype = ir.MemRefType(mem.type)
    return tuple(-1 if d < 0 else int(d) for d in mtype.shape)


# ---------------------------------------------------------------------------------------------
# Entry points


def find_scops(func_op: ir.Operation | ir.OpView, *, expand_scalars: bool = True) -> Extraction:
    """The scops of `func_op` (a `func.func`) with their regions, and what was left out and why.

    Demotes loop-carried and cross-statement values to memory first (module docstring, step 2;
    `expand_scalars`: values a loop carries get one element per iteration of the loop around
    it where `_Scratch.expanded_home` can): the function computes the same, and a region left
    as it is stays correct."""
    fn = func_op.operation
    out = Extraction()
    if not isinstance(fn.opview, func.FuncOp) or len(fn.regions[0].blocks) == 0:
        return out
    with fn.context, fn.location:
        scratch = _Scratch(fn, expand=expand_scalars)
        # Each step on fresh runs: demotion adds loads and stores at the runs' edges.
        for step in (_demote_carried, _demote_values):
            runs, _ = _find_runs(fn)
            for run in runs:
                if _precheck(run) is None:
                    step(run, scratch)
        runs, out.left_out = _find_runs(fn)
        for run in runs:
            problem = _precheck(run)
            if problem is None:
                try:
                    out.scops.append(_build(run, fn))
                    continue
                except (NotModeled, isl.Error) as exc:
                    problem = f"not modeled: {exc}"
            out.left_out.append(_left_out(run.ops[0], f"region not modeled: {problem}"))
    return out


def extract_scops(
    func_op: ir.Operation | ir.OpView, *, expand_scalars: bool = True
) -> list[tuple[Scop, ScopRegion]]:
    """The scops of `func_op` and their regions (see `find_scops`, which also says what was
    left out)."""
    return find_scops(func_op, expand_scalars=expand_scalars).scops


__all__ = [
    "Access",
    "Extraction",
    "LeftOut",
    "NotModeled",
    "Scop",
    "ScopRegion",
    "Statement",
    "StatementOps",
    "extract_scops",
    "find_scops",
    "initial_schedule_tree",
]
