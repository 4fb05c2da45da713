"""raise-mem2reg: scalar C locals kept in memory → SSA values threaded through scf regions.

A candidate is a `memref.alloca` in the function's entry block of type `memref<T>` or
`memref<1xT>` whose every use is the memref operand of a `memref.load`/`memref.store` (at the
constant index 0 for `memref<1xT>`), each nested only in `scf.for`, `scf.if` and `scf.while`.
Loads take the reaching stored value, stores and the alloca disappear. A value that crosses a
region boundary is threaded through it: an extra `iter_args` of `scf.for`, an extra result of
`scf.if` (yielded by both branches), extra before/after arguments of `scf.while`. Only values
that are live across the boundary are threaded (a local written and read within one iteration
adds no `iter_args`). A load with no reaching store (an uninitialized C local) reads `ub.poison`.
Anything else is left untouched: correct, just not promoted. No options.

How: the function body is first mirrored (`_scan`: the candidate accesses and the scf ops that
contain some, in order), then analysed on the mirror alone (per block and region: read before
written, written on every path, written somewhere; then backwards liveness picks what each
region threads), and only then rewritten, top down, carrying the reaching value of every local.
A value written in a region but not threaded out of it is marked dead after it; reading a dead
value is an internal error (the liveness analysis rules it out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from mlir import ir
from mlir.dialects import arith

try:
    from mlir.dialects import ub
except ImportError:  # bindings built without the ub dialect: a zero constant stands in
    ub = None

_REGION_OPS = frozenset({"scf.for", "scf.if", "scf.while"})
Locals = frozenset[int]  # candidate allocas, by index
_EMPTY: Locals = frozenset()


@dataclass(eq=False)
class _Access:
    """A load or store of candidate `idx`."""

    op: ir.Operation
    idx: int
    is_store: bool


@dataclass(eq=False)
class _Block:
    """The candidate accesses and region ops of one block, in order, with its summary."""

    block: ir.Block
    items: list[_Access | _Region]
    ue: Locals = _EMPTY  # read before written on some path from the block's entry
    must: Locals = _EMPTY  # written on every path through the block
    may: Locals = _EMPTY  # written somewhere in the block


@dataclass(eq=False)
class _Region:
    """An scf.for / scf.if / scf.while containing candidate accesses, with what it threads."""

    op: ir.Operation
    blocks: list[_Block]
    ue: Locals = _EMPTY
    must: Locals = _EMPTY
    may: Locals = _EMPTY
    # scf.for: iter_args; scf.if: results; scf.while: before-region arguments (init/yield)
    threaded: list[int] = field(default_factory=list)
    # scf.while only: condition operands, after-region arguments and results
    threaded_after: list[int] = field(default_factory=list)


class _Dead:
    """The env marker of a value written in a region but dead after it (never read)."""


_DEAD = _Dead()
Env = dict[int, "ir.Value | _Dead | None"]  # None: no store reaches (uninitialized)


def _is_zero_index(value: ir.Value) -> bool:
    owner = value.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name != "arith.constant":
        return False
    attr = owner.attributes["value"]
    return isinstance(attr, ir.IntegerAttr) and attr.value == 0


def _is_candidate(alloca: ir.Operation, func_op: ir.Operation) -> bool:
    mtype = ir.MemRefType(alloca.results[0].type)
    if list(mtype.shape) not in ([], [1]):
        return False
    for use in alloca.results[0].uses:
        user = use.owner.operation
        if user.name == "memref.load" and use.operand_number == 0:
            indices = list(user.operands)[1:]
        elif user.name == "memref.store" and use.operand_number == 1:
            indices = list(user.operands)[2:]
        else:
            return False  # passed to a call, stored as a value, cast, ...
        if not all(_is_zero_index(i) for i in indices):
            return False
        parent = user.parent
        while parent is not None and parent != func_op:
            if parent.name not in _REGION_OPS:
                return False  # inside execute_region, parallel, an unknown region op
            parent = parent.parent
    return True


def _scan(block: ir.Block, index: dict[ir.Value, int]) -> _Block:
    """Mirror `block`: its candidate accesses and the region ops that contain some."""
    items: list[_Access | _Region] = []
    for op in block.operations:
        name = op.operation.name
        if name == "memref.load" or name == "memref.store":
            idx = index.get(op.operands[0 if name == "memref.load" else 1])
            if idx is not None:
                items.append(_Access(op.operation, idx, name == "memref.store"))
        elif name in _REGION_OPS:
            blocks = [_scan(b, index) for r in op.regions for b in r.blocks]
            if any(b.items for b in blocks):
                items.append(_Region(op.operation, blocks))
    return _Block(block, items)


def _summarize_block(node: _Block) -> None:
    ue: set[int] = set()
    must: set[int] = set()
    may: set[int] = set()
    for item in node.items:
        if isinstance(item, _Access):
            if item.is_store:
                must.add(item.idx)
                may.add(item.idx)
            elif item.idx not in must:
                ue.add(item.idx)
            continue
        _summarize_region(item)
        ue |= item.ue - must
        must |= item.must
        may |= item.may
    node.ue, node.must, node.may = frozenset(ue), frozenset(must), frozenset(may)


def _summarize_region(node: _Region) -> None:
    for b in node.blocks:
        _summarize_block(b)
    name = node.op.name
    node.may = frozenset().union(*(b.may for b in node.blocks))
    if name == "scf.for":
        node.ue, node.must = node.blocks[0].ue, _EMPTY  # zero trips possible
    elif name == "scf.if":
        then = node.blocks[0]
        other = node.blocks[1] if len(node.blocks) > 1 else _Block(then.block, [])
        node.ue, node.must = then.ue | other.ue, then.must & other.must
    else:  # scf.while: the before region runs at least once
        before, after = node.blocks
        node.ue, node.must = before.ue | (after.ue - before.must), before.must


def _live_in(node: _Block, live_out: Locals) -> Locals:
    return node.ue | (live_out - node.must)


def _decide_block(node: _Block, live_out: Locals) -> None:
    """Choose what each region op threads, from the values live at the end of `node`."""
    live = live_out
    for item in reversed(node.items):
        if isinstance(item, _Access):
            live = live | {item.idx} if not item.is_store else live - {item.idx}
            continue
        _decide_region(item, live)
        live = item.ue | (live - item.must)


def _decide_region(node: _Region, live_after: Locals) -> None:
    name = node.op.name
    if name == "scf.for":
        body = node.blocks[0]
        # the end of the body flows to its start (back edge) or out of the loop
        body_out = body.ue | live_after
        node.threaded = sorted(node.may & body_out)
        _decide_block(body, body_out)
    elif name == "scf.if":
        node.threaded = sorted(node.may & live_after)
        for b in node.blocks:
            _decide_block(b, live_after)
    else:
        before, after = node.blocks
        before_out, after_out = _EMPTY, _EMPTY
        while True:  # fixpoint: before → after or exit, after → before
            new_before = _live_in(after, after_out) | live_after
            new_after = _live_in(before, new_before)
            if new_before == before_out and new_after == after_out:
                break
            before_out, after_out = new_before, new_after
        node.threaded = sorted(node.may & after_out)  # live at the before region's entry
        node.threaded_after = sorted(node.may & before_out)  # live at the after region's entry
        _decide_block(before, before_out)
        _decide_block(after, after_out)


@dataclass
class _Rewriter:
    """Renames loads to reaching values and rebuilds region ops with their threaded values."""

    allocas: list[ir.Operation]
    poison: dict[int, ir.Value] = field(default_factory=dict)

    def elem_type(self, idx: int) -> ir.Type:
        return ir.MemRefType(self.allocas[idx].results[0].type).element_type

    def value(self, env: Env, idx: int, at: ir.Operation) -> ir.Value:
        v = env[idx]
        if isinstance(v, _Dead):
            raise RuntimeError(f"raise-mem2reg: internal error: dead value read at {at.location}")
        if v is None:
            return self.undefined(idx)
        return v

    def undefined(self, idx: int) -> ir.Value:
        """The value of a local read before any store: poison, made once before its alloca."""
        if idx not in self.poison:
            alloca = self.allocas[idx]
            t = self.elem_type(idx)
            ip = ir.InsertionPoint(alloca)
            if ub is not None:
                self.poison[idx] = ub.PoisonOp(t, loc=alloca.location, ip=ip).result
            else:
                zero = (
                    ir.FloatAttr.get(t, 0.0)
                    if ir.FloatType.isinstance(t)
                    else ir.IntegerAttr.get(t, 0)
                )
                self.poison[idx] = arith.ConstantOp(t, zero, loc=alloca.location, ip=ip).result
        return self.poison[idx]

    def block(self, node: _Block, env: Env) -> Env:
        for item in node.items:
            if isinstance(item, _Access):
                if item.is_store:
                    env[item.idx] = item.op.operands[0]
                else:
                    item.op.results[0].replace_all_uses_with(self.value(env, item.idx, item.op))
                item.op.erase()
            else:
                self.region(item, env)
        return env

    def entry_env(self, env: Env, node: _Region, args: dict[int, ir.Value]) -> Env:
        """The env at the entry of a loop region: loop-written values come in as arguments."""
        inner = dict(env)
        for idx in node.may:
            inner[idx] = args.get(idx, _DEAD)
        return inner

    def region(self, node: _Region, env: Env) -> None:
        old = node.op
        name = old.name
        extra_results = node.threaded_after if name == "scf.while" else node.threaded
        extra_operands = [] if name == "scf.if" else node.threaded
        if not node.threaded and not node.threaded_after:
            new = old  # nothing to thread: rename in place
        else:
            attributes = {n: old.attributes[n] for n in old.attributes}
            new = ir.Operation.create(
                name,
                results=[r.type for r in old.results] + [self.elem_type(i) for i in extra_results],
                operands=list(old.operands) + [self.value(env, i, old) for i in extra_operands],
                attributes=attributes,
                regions=len(old.regions),
                loc=old.location,
                ip=ir.InsertionPoint(old),
            )
            for src, dst in zip(old.regions, new.regions, strict=True):
                for b in list(src.blocks):
                    b.append_to(dst)
        if name == "scf.for":
            body = new.regions[0].blocks[0]
            args = {i: body.add_argument(self.elem_type(i), old.location) for i in node.threaded}
            out = self.block(node.blocks[0], self.entry_env(env, node, args))
            self.extend_terminator(body, [self.value(out, i, old) for i in node.threaded])
        elif name == "scf.if":
            for branch in node.blocks:
                out = self.block(branch, dict(env))
                self.extend_terminator(
                    branch.block, [self.value(out, i, old) for i in node.threaded]
                )
            if len(node.blocks) == 1 and node.threaded:  # no else: it yields the incoming values
                other = new.regions[1].blocks.append()
                ir.Operation.create(
                    "scf.yield",
                    operands=[self.value(env, i, old) for i in node.threaded],
                    loc=old.location,
                    ip=ir.InsertionPoint(other),
                )
        else:
            before, after = (r.blocks[0] for r in new.regions)
            b_args = {
                i: before.add_argument(self.elem_type(i), old.location) for i in node.threaded
            }
            a_args = {
                i: after.add_argument(self.elem_type(i), old.location) for i in node.threaded_after
            }
            out = self.block(node.blocks[0], self.entry_env(env, node, b_args))
            self.extend_terminator(before, [self.value(out, i, old) for i in node.threaded_after])
            out = self.block(node.blocks[1], self.entry_env(env, node, a_args))
            self.extend_terminator(after, [self.value(out, i, old) for i in node.threaded])
        for idx in node.may:
            env[idx] = _DEAD
        if new is not old:
            n = len(old.results)
            for k in range(n):
                old.results[k].replace_all_uses_with(new.results[k])
            for k, idx in enumerate(extra_results):
                env[idx] = new.results[n + k]
            old.erase()

    def extend_terminator(self, block: ir.Block, extra: list[ir.Value]) -> None:
        if not extra:
            return
        ops = block.operations
        term = ops[len(ops) - 1].operation
        ir.Operation.create(
            term.name,
            operands=list(term.operands) + extra,
            attributes={n: term.attributes[n] for n in term.attributes},
            loc=term.location,
            ip=ir.InsertionPoint(term),
        )
        term.erase()


def promote_scalars(func_op: ir.Operation) -> int:
    """Promote the candidate allocas of `func_op` (a func.func) to SSA values, in place.

    Returns how many allocas were promoted; the IR is left unchanged when none qualifies.
    """
    func_op = func_op.operation
    body = func_op.regions[0]
    if len(body.blocks) != 1:
        return 0  # unstructured control flow: not the frontend's output
    entry = body.blocks[0]
    allocas = [
        op.operation
        for op in entry.operations
        if op.operation.name == "memref.alloca" and _is_candidate(op.operation, func_op)
    ]
    if not allocas:
        return 0
    index = {a.results[0]: i for i, a in enumerate(allocas)}
    root = _scan(entry, index)
    _summarize_block(root)
    _decide_block(root, _EMPTY)  # nothing is live at the function's return
    with func_op.context:
        _Rewriter(allocas).block(root, {i: None for i in range(len(allocas))})
    for alloca in allocas:
        alloca.erase()
    return len(allocas)


@dataclass(frozen=True)
class Mem2Reg:
    """C scalar locals in 0-d / 1-element allocas → SSA values threaded through scf regions (see
    the module docstring). Runs on a func.func, or on each func.func of the op it is given."""

    name: ClassVar[str] = "raise-mem2reg"

    def __call__(self, op: ir.Operation, pass_: Any) -> None:
        target = op.operation
        if target.name == "func.func":
            functions = [target]
        else:
            functions = [
                o.operation
                for r in target.regions
                for b in r.blocks
                for o in b.operations
                if o.operation.name == "func.func"
            ]
        try:
            for fn in functions:
                promote_scalars(fn)
        except Exception as exc:  # a bug here must fail the pass, not the process
            target.location.emit_error(f"raise-mem2reg: {exc}")
            pass_.signal_pass_failure()
