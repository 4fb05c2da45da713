"""Reverse-mode differentiation of an affine function: `<f>_grad` runs f's body (the forward
sweep), then the adjoint sweep, which visits f's statements in reverse order, each loop run
backwards (`i' = -i` over the negated bounds, so any affine bounds reverse), and for every
statement `W[w] = e(reads)`:

    t = W̄[w];  W̄[w] = 0;  R̄[r] += t · ∂e/∂R[r]   for each read R[r] of e

Primal values an adjoint needs are computed again in the adjoint sweep (loads and arithmetic
cloned at the top of the reversed loop body) rather than taped: that is exact when nothing
overwrites the location between the read and the end of the function, which is checked for every
read whose value a derivative needs (a `NotDifferentiable` otherwise: a tape is not made yet).
A loop-carried value must be an `add` reduction (raising marks them): the adjoint of its
running value is the same in every iteration, so the reversed loop needs no tape either. The
adjoints of values defined outside a loop and used in it are summed by the reversed loop's own
`iter_args`. The result is plain affine code: the scheduler then reorders it like any other, so
an adjoint that scatters (`Ā[i,k] += C̄[i,j]·B[k,j]`) becomes a parallel gather where the
dependences allow, with no atomics.
"""

from __future__ import annotations

import math as pymath
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mlir import ir
from mlir.dialects import affine, arith, func, math, memref, scf

from polyflow.ir.affine import constant_trip_count, substituted
from polyflow.ir.aliasing import VIEW_OPS, may_alias, view_root
from polyflow.ir.names import KEEP_ORDER_ATTR, REDUCTIONS_ATTR, REGION_START_ATTR
from polyflow.ir.ops import all_operands, block_ops, defined_in, remap_operands, walk
from polyflow.ir.remarks import attach_remarks, remark_at

from .checkpoint import (
    Region,
    copy_state,
    restricted_loop,
    segments_of,
    snapshots,
)
from .contraction import fill_with_zeros, order_as_contraction
from .gather import merge_scatters
from .overwrites import Bound, Overwrites
from .transpose import accumulate_transposed


class NotDifferentiable(Exception):
    """Something in the function has no adjoint here; `location` is the op's."""

    def __init__(self, message: str, location: ir.Location) -> None:
        super().__init__(message)
        self.message = message
        self.location = location


_LOADS = ("affine.load", "memref.load")
# the tape size below which the default does not checkpoint (it costs a second run of the loop)
_CHECKPOINT_MIN_TAPE = 8 << 20
_STORES = ("affine.store", "memref.store")
# values the adjoint reads back from where the primal stored them rather than compute again
_COSTLY = frozenset(
    {
        "math.tanh", "math.exp", "math.exp2", "math.expm1", "math.log", "math.log1p",
        "math.log2", "math.log10", "math.sin", "math.cos", "math.tan", "math.atan",
        "math.atan2", "math.sinh", "math.cosh", "math.asin", "math.acos", "math.powf",
        "math.erf", "math.cbrt", "math.sqrt", "math.rsqrt",
    }
)  # fmt: skip
# on the products `adjoint·factor` that `_Differentiator._scaled` makes, until it is done
_SCALED_ATTR = "polyflow.scaled_adjoint"
# ops whose results never carry a derivative (their float results are pieces of rounding)
_ZERO_DERIVATIVE = frozenset({"math.floor", "math.ceil", "math.round", "math.trunc"})
# ops with nothing to reverse: terminators, constants, index arithmetic, sizes of arrays
_SKIPPED = frozenset(
    {"affine.yield", "scf.yield", "func.return", "arith.constant", "affine.apply", "affine.min",
     "affine.max", "memref.dim", "memref.rank", "memref.extract_aligned_pointer_as_index"}
)  # fmt: skip


def _is_float(t: ir.Type) -> bool:
    return isinstance(t, ir.FloatType)


@dataclass
class _Frame:
    """The adjoint of one primal block being emitted: the block, how its (and outer) primal
    values are reached here, where recomputed values go, and the adjoints so far."""

    block: ir.Block
    parent: _Frame | None
    values: dict[ir.Value, ir.Value] = field(default_factory=dict)
    anchor: ir.Operation | None = None  # recomputed values are placed before it
    adjoints: dict[ir.Value, ir.Value] = field(default_factory=dict)
    # stores whose seed is zeroed at the end of the block's adjoint (`_zero_later`)
    zeroed_at_end: list[ir.Operation] = field(default_factory=list)


class _Differentiator:
    def __init__(
        self,
        primal: ir.Operation,
        shadows: dict[ir.Value, ir.Value],
        fast: bool,
        active_scalars: set[ir.Value] | None = None,
        checkpoint_steps: int | None = None,
    ) -> None:
        self.primal = primal
        self.shadows = shadows  # primal memref argument -> its shadow in the gradient
        self.active_scalars = active_scalars or set()  # float scalar arguments with a shadow
        self.fast = fast
        self.order: list[ir.Operation] = list(walk(primal))
        self.active = self._activity()
        # loads whose value a store adds to in place: their shadow keeps the store's seed
        self.kept: list[ir.Operation] = []
        self.overwrites = Overwrites(primal)
        # set by `differentiate`: each primal op's copy in the forward sweep, and the values of
        # the function's top-level ops there (the parameters of loop bounds and tapes)
        self.forward: dict[ir.Operation, ir.Operation] = {}
        self.top_values: dict[ir.Value, ir.Value] = {}
        self.tapes: list[ir.Value] = []
        self.taped: dict[ir.Value, tuple[ir.Value, ir.AffineMap, list[ir.Value]]] = {}
        # while a loop nest's adjoint is emitted once per shadow it updates (`_distributed`):
        # the shadows this copy updates, and whether it also zeroes the seeds
        self.only: set[ir.Operation] | None = None  # the reads whose adjoint is emitted
        self.zeroing = True
        # while such a nest's adjoint is emitted: its iterations commute (each reads its own
        # seeds and adds to shadows), so its loops run in the primal's order
        self.in_order = False
        # checkpointing (`checkpoint.py`): None: where it saves memory; 0: never; else the
        # segment length of every top-level loop that tapes
        self.checkpoint_steps = checkpoint_steps
        self.for_cpu = True  # set by `differentiate`
        self.has_views = any(o.name in VIEW_OPS for o in self.order)
        # while a checkpointed loop's segment is reversed: its tapes are allocated here, and
        # each checkpointed loop's tape dimension holds one segment
        self.tape_point: ir.InsertionPoint | None = None
        self.checkpointed: dict[ir.Operation, int] = {}
        self.checkpoint_notes: list[tuple[ir.Location, str]] = []
        # set by `differentiate`: an op marking the end of the forward sweep; and the states
        # (regions, snapshots, slot) copied back at the end of the gradient
        self.forward_end: ir.Operation | None = None
        self.final_states: list[tuple[list[Region], list[ir.Value], ir.Value]] = []

    # ----- which values carry derivatives

    def _activity(self) -> set[ir.Value]:
        """Float values that depend on a float read of a shadowed array (a fixed point over the
        carried values of loops)."""
        active: set[ir.Value] = set(self.active_scalars)
        changed = True
        while changed:
            changed = False

            def mark(value: ir.Value) -> None:
                nonlocal changed
                if _is_float(value.type) and value not in active:
                    active.add(value)
                    changed = True

            for op in self.order:
                if op.name in _LOADS:
                    if op.operands[0] in self.shadows:
                        mark(op.results[0])
                elif op.name == "affine.for" and len(op.results):
                    body = op.regions[0].blocks[0]
                    inits = _inits(op)
                    yielded = list(block_ops(body)[-1].operands)
                    for k, result in enumerate(op.results):
                        if inits[k] in active or yielded[k] in active:
                            mark(body.arguments[k + 1])
                            mark(result)
                elif op.name in ("affine.if", "scf.if") and len(op.results):
                    for region in op.regions:
                        for block in region.blocks:
                            for k, value in enumerate(block_ops(block)[-1].operands):
                                if value in active:
                                    mark(op.results[k])
                elif op.results and op.name not in _ZERO_DERIVATIVE:
                    if any(v in active for v in op.operands):
                        for result in op.results:
                            mark(result)
        return active

    # ----- primal values in the adjoint sweep

    def value(self, frame: _Frame, value: ir.Value) -> ir.Value:
        """`value` as computed where `frame` emits: found, computed again at the top of the
        frame of the block that defines it, or read back from a tape where the memory it was
        computed from is overwritten later (and for the running values of carried loops)."""
        f: _Frame | None = frame
        while f is not None:
            if value in f.values:
                return f.values[value]
            f = f.parent
        owner = value.owner
        block = owner if isinstance(owner, ir.Block) else owner.operation.block
        home: _Frame | None = frame
        while home is not None and home.block != block:
            home = home.parent
        assert home is not None and home.anchor is not None, "a value from no enclosing block"
        if isinstance(owner, ir.Block):  # the running value of a loop-carried value
            return self._taped(home, value)
        op = owner.operation
        stored = _stored_where(value) if op.name in _COSTLY else None
        if stored is not None and not self.overwrites.overwritten(stored):
            # the primal stored it where nothing overwrites it: read, not computed again
            array = self.value(home, stored.operands[1])
            indices = [self.value(home, v) for v in list(stored.operands)[2:]]
            with ir.InsertionPoint(home.anchor):
                loaded = affine.AffineLoadOp(value.type, array, indices, _map(stored))
            home.values[value] = loaded.result
            return loaded.result
        if any(self.overwrites.overwritten(o) for o in walk(op) if o.name in _LOADS):
            return self._taped(home, value)
        outside: dict[ir.Value, ir.Value] = {}
        for operand in _external_operands(op):
            outside[operand] = self.value(home, operand)
        copy = op.clone(ip=ir.InsertionPoint(home.anchor))
        remap_operands([copy], outside)
        for old, new in zip(op.results, copy.results, strict=True):
            home.values[old] = new
        return home.values[value]

    def _taped(self, home: _Frame, value: ir.Value) -> ir.Value:
        """`value` read back from its tape: an array indexed by the iteration vector of the
        loops around it, written by the forward sweep where the value is computed."""
        owner = value.owner
        if isinstance(owner, ir.Block):
            site = owner.owner.operation
            loops = [*self.overwrites.loops(site), site]
        else:
            site = owner.operation
            loops = self.overwrites.loops(site)
        if value not in self.taped:
            self.taped[value] = self._make_tape(value, site, loops)
        tape, index, params = self.taped[value]
        ivs = [self.value(home, loop.regions[0].blocks[0].arguments[0]) for loop in loops]
        with ir.InsertionPoint(home.anchor):
            loaded = affine.AffineLoadOp(
                _stored_type(value.type), tape, [*ivs, *(self.top_values[p] for p in params)], index
            ).result
            if loaded.type != value.type:
                loaded = arith.TruncIOp(value.type, loaded).result
        home.values[value] = loaded
        return loaded

    def _make_tape(
        self, value: ir.Value, site: ir.Operation, loops: list[ir.Operation]
    ) -> tuple[ir.Value, ir.AffineMap, list[ir.Value]]:
        """The tape of `value` (allocated before the top-level op holding `site`, written by
        the forward sweep), the map from the loops' IVs and `params` to its element."""
        owner = value.owner
        box = self.overwrites.box(loops)
        if box is None:
            raise NotDifferentiable(
                "a value the derivative needs is overwritten later (or carried by a loop) and "
                "its tape needs loop bounds with one affine extreme each",
                site.location,
            )
        params = sorted(
            {v for low, high in box for v in (*low.parameters(), *high.parameters())},
            key=lambda v: self._parameter_rank(v),
        )
        top = self.top_values
        placement = self.tape_point or ir.InsertionPoint(
            self.forward[_top_level(site, self.primal)]
        )
        with placement:
            shape: list[int] = []
            sizes: list[ir.Value] = []
            for loop, (low, high) in zip(loops, box, strict=True):
                if loop in self.checkpointed:  # one segment of it
                    shape.append(self.checkpointed[loop])
                    continue
                if _constant(low) and _constant(high):
                    shape.append(max(0, high.constant - low.constant + 1))
                    continue
                shape.append(ir.ShapedType.get_dynamic_size())
                extent = _bound_expr(high, params) - _bound_expr(low, params) + 1
                zero = ir.AffineConstantExpr.get(0)
                sizes.append(
                    affine.AffineMaxOp(
                        ir.AffineMap.get(0, len(params), [zero, extent]), [top[p] for p in params]
                    ).result
                )
            tape = memref.AllocOp(
                ir.MemRefType.get(shape, _stored_type(value.type)), sizes, []
            ).result
        self.tapes.append(tape)
        index = ir.AffineMap.get(
            len(loops),
            len(params),
            [
                # a segment's iterations are C consecutive ones: distinct modulo C
                (ir.AffineDimExpr.get(k) - _bound_expr(low, params)) % self.checkpointed[loop]
                if loop in self.checkpointed
                else ir.AffineDimExpr.get(k) - _bound_expr(low, params)
                for k, (loop, (low, _)) in enumerate(zip(loops, box, strict=True))
            ],
        )
        forward_ivs = [self.forward[loop].regions[0].blocks[0].arguments[0] for loop in loops]
        if isinstance(owner, ir.Block):
            body = self.forward[site].regions[0].blocks[0]
            stored = body.arguments[value.arg_number]
            point = ir.InsertionPoint(block_ops(body)[0])
        else:
            clone = self.forward[site]
            stored = clone.results[next(k for k, r in enumerate(site.results) if r == value)]
            point = ir.InsertionPoint.after(clone)
        with point:
            if _stored_type(stored.type) != stored.type:  # a condition: kept as a byte
                stored = arith.ExtUIOp(_stored_type(stored.type), stored).result
            affine.AffineStoreOp(stored, tape, [*forward_ivs, *(top[p] for p in params)], index)
        return tape, index, params

    def _parameter_rank(self, value: ir.Value) -> int:
        owner = value.owner
        if isinstance(owner, ir.Block):
            return value.arg_number
        return (
            len(self.primal.regions[0].blocks[0].arguments) + self.overwrites.order[owner.operation]
        )

    # ----- adjoints

    def add_adjoint(self, frame: _Frame, value: ir.Value, contribution: ir.Value) -> None:
        if value not in self.active:
            return
        if value in frame.adjoints:
            frame.adjoints[value] = arith.AddFOp(frame.adjoints[value], contribution).result
        else:
            frame.adjoints[value] = contribution

    def _scaled(self, adjoint: ir.Value, factor: ir.Value) -> ir.Value:
        """`adjoint`·`factor`; where `adjoint` is itself an adjoint scaled by primal factors
        (`ō·B` on its way to `Ā` in `out = alpha·A·B`), `ō·(B·factor)`: the primal factors
        multiplied first. Why: they often vary with fewer loops than the adjoint (a
        contraction's `B[k,j]·alpha` against `ō[i,j]`), so the product of the two is the
        contraction's own (one multiply-add per term, not a multiply more)."""
        owner = adjoint.owner
        scaled = not isinstance(owner, ir.Block) and _SCALED_ATTR in owner.attributes
        if scaled:  # (base·factors)·factor → base·(factors·factor)
            base, factors = owner.operands
            adjoint, factor = base, _mul(factors, factor)
        value = _mul(adjoint, factor)
        value.owner.attributes[_SCALED_ATTR] = ir.UnitAttr.get()
        return value

    def _current(self, frame: _Frame, value: ir.Value) -> ir.Value:
        """The adjoint of `value` so far (zero when nothing has reached it)."""
        found = frame.adjoints.get(value)
        return found if found is not None else _zero(value.type)

    def reverse_block(self, frame: _Frame) -> None:
        for op in reversed(block_ops(frame.block)):
            self.reverse_op(frame, op)
        for store in frame.zeroed_at_end:
            self._shadow_store(frame, store, _zero(store.operands[0].type), 2)
        frame.zeroed_at_end.clear()

    def _zero_seed(self, frame: _Frame, op: ir.Operation) -> None:
        """Zero the seed of store `op` (the stored value is overwritten by it): at the end of
        its block's adjoint where `_zero_later` allows, else here, right after it was read."""
        if self._zero_later(frame, op):
            frame.zeroed_at_end.append(op)
        else:
            self._shadow_store(frame, op, _zero(op.operands[0].type), 2)

    def _zero_later(self, frame: _Frame, op: ir.Operation) -> bool:
        """Whether no op before store `op` in its block touches its array (no adjoint still to
        come there reads or adds to the seed): the seed is then zeroed after the block's
        adjoint. Why: a seed read and zeroed at once must be kept in a scalar by the scheduler's
        statements (one per store), which serializes the nest (a stencil's adjoint in a time
        loop: five updates of one seed value); read by each update and zeroed afterwards, every
        update is a statement of its own."""
        array = view_root(op.operands[1])
        views = self.has_views
        for before in block_ops(frame.block):
            if before == op:
                return True
            for inner in walk(before):
                for operand in inner.operands:
                    if not isinstance(operand.type, ir.MemRefType):
                        continue
                    if view_root(operand) == array or (views and may_alias(operand, array)):
                        return False
        return True

    def reverse_op(self, frame: _Frame, op: ir.Operation) -> None:
        name = op.name
        if name in _SKIPPED:
            return
        if name in _STORES:
            self._store(frame, op)
        elif name in _LOADS:
            self._load(frame, op)
        elif name == "affine.for":
            groups = self._distribution(op) if self._distributes(frame) else None
            if groups is not None and frame.parent is not None and not _scatters(groups):
                groups = None
            if groups is None:
                if frame.parent is None and self.checkpoint_steps != 0:
                    self._top_level_loop(frame, op)
                else:
                    self._loop(frame, op)
                return
            self.in_order = True
            # active values from outside (a scalar argument): their adjoints are summed by the
            # last copy alone, the others treat them as constants
            outside = set(self._carried(op))
            self.active -= outside
            copies: dict[ir.Value, list[ir.Operation]] = {}
            for group in groups:
                self.only, self.zeroing = set(group), False
                shadow = self.shadows[group[0].operands[0]]
                copy = order_as_contraction(self._loop(frame, op), shadow)
                if frame.parent is None:
                    copy.attributes[REGION_START_ATTR] = ir.UnitAttr.get()
                    if self.for_cpu:
                        copy = accumulate_transposed(copy, shadow)
                copies.setdefault(shadow, []).append(copy)
            if frame.parent is not None:  # a time loop's sweep: one gather per shadow
                for shadow, scattered in copies.items():
                    merge_scatters(scattered, shadow)
            self.active |= outside
            self.only, self.zeroing = set(), True  # the seeds zeroed, by a nest of their own
            zeroing = self._loop(frame, op)
            if frame.parent is None:
                zeroing.attributes[REGION_START_ATTR] = ir.UnitAttr.get()
            self.only, self.in_order = None, False
        elif name in ("affine.if", "scf.if"):
            self._if(frame, op)
        elif name.startswith(("arith.", "math.")):
            if any(r in frame.adjoints for r in op.results):
                self._arithmetic(frame, op)
        elif name in VIEW_OPS and op.results[0] in self.shadows:
            return  # its shadow's view was made with it
        elif name in ("memref.alloc", "memref.alloca", "memref.dealloc", "memref.copy"):
            local = op.results[0] if name in ("memref.alloc", "memref.alloca") else None
            if local is not None and (local in self.shadows or not _is_float_array(local)):
                return  # a local array of the function's body: its shadow is made with it
            if name == "memref.dealloc" and op.operands[0] in self.shadows:
                return  # freed (with its shadow) at the end of the gradient
            if any(_is_float_array(v) for v in [*op.operands, *op.results]):
                raise NotDifferentiable(
                    "a float array allocated inside a loop or copied is not differentiated yet",
                    op.location,
                )
        else:
            raise NotDifferentiable(f"'{name}' is not differentiated", op.location)

    def _distributes(self, frame: _Frame) -> bool:
        """Whether a nest in `frame` may be distributed (`_distribution`): at the top level,
        and in a loop (a time loop's sweeps) but not inside a copy being distributed."""
        return frame.parent is None or self.only is None

    def _distribution(self, nest: ir.Operation) -> list[list[ir.Operation]] | None:
        """The reads of loop nest `nest` (top-level, or a sweep in a loop whose adjoint
        scatters, `_scatters`) whose adjoints each copy of its adjoint nest
        emits (one copy per array and access pattern), when the copies may run one after the
        other, each in the primal's loop order, and a last one zeroes the seeds; None to
        reverse the nest once. Each copy is then one contraction (`Ā += C̄·Bᵀ`, `B̄ += Aᵀ·C̄`)
        for the scheduler; the adjoints of active values from outside (a scalar argument's)
        are summed by the last copy. Legal when the nest has no results, each array it stores
        is stored by one op writing each element once (so no seed is read after it is zeroed),
        no shadow it updates is one of those seeds (but for `X[a] = X[a] + e`, which leaves
        it), its carried values are sums, and no two memrefs of the function may be one array
        (no views)."""
        if len(nest.results):
            return None
        ops = list(walk(nest))
        if any(o.name in VIEW_OPS for o in walk(self.primal)):
            return None  # two memrefs may be one array: the groups below compare memrefs
        for loop in ops:  # a carried value other than a sum needs its iterations reversed
            if loop.name == "affine.for" and len(loop.results):
                kinds = _reduction_kinds(loop)
                body = loop.regions[0].blocks[0]
                yielded = list(block_ops(body)[-1].operands)
                if not all(
                    kinds[k] == "add" and _private_sum(body.arguments[k + 1], yielded[k])
                    for k in range(len(loop.results))
                ):
                    return None
            elif loop.name in ("scf.while", "scf.for"):
                return None
        stores = [o for o in ops if o.name in _STORES and o.operands[1] in self.shadows]
        stored = [o.operands[1] for o in stores]
        if len(set(stored)) != len(stored) or not all(_writes_once(s, nest) for s in stores):
            return None
        kept = [_accumulated_load(s) for s in stores]
        # one copy per access pattern of a read: reads of one array at two patterns
        # (corr̄ feeds normed̄[k,i] and normed̄[k,j]) are two contractions
        groups: dict[tuple[object, ...], list[ir.Operation]] = {}
        for load in ops:
            if load.name not in _LOADS or load.results[0] not in self.active:
                continue
            array = load.operands[0]
            if array not in self.shadows:
                continue
            if array in stored:
                if not any(load == k for k in kept if k is not None):
                    return None
                continue
            pattern = (array, str(load.attributes["map"]) if "map" in load.attributes else None)
            key = (*pattern, *list(load.operands)[1:])
            groups.setdefault(key, []).append(load)
        return list(groups.values()) or None

    def _shadow_load(self, frame: _Frame, op: ir.Operation, first: int) -> ir.Value:
        shadow = self.shadows[op.operands[first - 1]]
        indices = [self.value(frame, v) for v in list(op.operands)[first:]]
        element = ir.MemRefType(shadow.type).element_type
        if op.name.startswith("affine."):
            return affine.AffineLoadOp(element, shadow, indices, _map(op)).result
        return memref.LoadOp(shadow, indices).result

    def _shadow_store(self, frame: _Frame, op: ir.Operation, value: ir.Value, first: int) -> None:
        shadow = self.shadows[op.operands[first - 1]]
        indices = [self.value(frame, v) for v in list(op.operands)[first:]]
        if op.name.startswith("affine."):
            affine.AffineStoreOp(value, shadow, indices, _map(op))
        else:
            memref.StoreOp(value, shadow, indices)

    def _store(self, frame: _Frame, op: ir.Operation) -> None:
        value, array = op.operands[0], op.operands[1]
        if array not in self.shadows:
            if _is_float(value.type) and value in self.active:
                raise NotDifferentiable(
                    "a derivative flows into an array that has no shadow", op.location
                )
            return
        if value not in self.active:  # a constant or an inactive value: nothing flows back
            if self.zeroing:
                self._zero_seed(frame, op)
            return
        seed = self._shadow_load(frame, op, 2)
        accumulated = _accumulated_load(op)
        if accumulated is None:
            if self.zeroing:
                self._zero_seed(frame, op)
        else:
            # X[a] = X[a] + e: the seed would be zeroed here and added back at the load
            self.kept.append(accumulated)
        self.add_adjoint(frame, value, seed)

    def _load(self, frame: _Frame, op: ir.Operation) -> None:
        result = op.results[0]
        if result not in frame.adjoints or op.operands[0] not in self.shadows:
            return
        adjoint = frame.adjoints.pop(result)
        if any(op == kept for kept in self.kept):
            return  # the seed of the store it accumulates into stayed in place
        if self.only is not None and op not in self.only:
            return  # another copy of the nest's adjoint updates this shadow
        current = self._shadow_load(frame, op, 1)
        self._shadow_store(frame, op, arith.AddFOp(current, adjoint).result, 1)

    # ----- loops and conditions

    def _carried(self, op: ir.Operation) -> list[ir.Value]:
        """The active values defined outside `op` and used inside it, in a stable order."""
        out: list[ir.Value] = []
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    for value in all_operands(inner.operation):
                        if (
                            value in self.active
                            and not defined_in(value, op)
                            and not any(value == seen for seen in out)
                        ):
                            out.append(value)
        return out

    def _loop(
        self,
        frame: _Frame,
        op: ir.Operation,
        bounds: tuple[ir.AffineMap, list[ir.Value], ir.AffineMap, list[ir.Value]] | None = None,
    ) -> ir.Operation:
        """Emit the adjoint of loop `op` (over `bounds`, adjoint values, in place of its own
        where given: one segment of it); returns the loop it builds."""
        step = ir.IntegerAttr(op.attributes["step"]).value
        body = op.regions[0].blocks[0]
        seeds: dict[ir.Value, ir.Value] = {}
        # carried values other than private sums: their adjoint runs backwards through the
        # reversed loop's iterations (and their running values come from a tape)
        threaded: list[int] = []
        if len(op.results):
            kinds = _reduction_kinds(op)
            yielded = list(block_ops(body)[-1].operands)
            for k, result in enumerate(op.results):
                running = body.arguments[k + 1]
                if result not in self.active and running not in self.active:
                    continue
                if kinds[k] == "add" and _private_sum(running, yielded[k]):
                    if result in frame.adjoints:
                        adjoint = frame.adjoints.pop(result)
                        self.add_adjoint(frame, _inits(op)[k], adjoint)
                        seeds[yielded[k]] = adjoint
                    continue
                if not defined_in(yielded[k], op):
                    raise NotDifferentiable(
                        "a loop that yields a value computed outside it is not differentiated",
                        op.location,
                    )
                threaded.append(k)
        carried = self._carried(op)
        if bounds is None:
            lower_map, lower_operands, upper_map, upper_operands = _bounds(op)
            lower = [self.value(frame, v) for v in lower_operands]
            upper = [self.value(frame, v) for v in upper_operands]
        else:
            lower_map, lower, upper_map, upper = bounds
        initial = [self._current(frame, v) for v in carried]
        initial += [self._current(frame, op.results[k]) for k in threaded]
        for k in threaded:
            frame.adjoints.pop(op.results[k], None)
        if self.in_order:
            reversed_loop = affine.AffineForOp(
                lower_map,
                upper_map,
                step,
                initial,
                lower_bound_operands=lower,
                upper_bound_operands=upper,
            )
            index = reversed_loop.induction_variable
        elif step == 1:
            # i' = -i runs [max L, min U) backwards: i' in [max(1 - U), min(1 - L))
            reversed_loop = affine.AffineForOp(
                _negated(upper_map),
                _negated(lower_map),
                1,
                initial,
                lower_bound_operands=upper,
                upper_bound_operands=lower,
            )
            with ir.InsertionPoint(reversed_loop.body):
                index = affine.AffineApplyOp(
                    ir.AffineMap.get(1, 0, [ir.AffineDimExpr.get(0) * -1]),
                    [reversed_loop.induction_variable],
                ).result
        else:
            reversed_loop, index = _reversed_strided_loop(
                lower_map, lower, upper_map, upper, step, initial
            )
        inner_body = reversed_loop.body
        with ir.InsertionPoint(inner_body):
            anchor = arith.ConstantOp(ir.IndexType.get(), 0).operation
        inner = _Frame(body, frame, {body.arguments[0]: index}, anchor)
        iter_args = list(reversed_loop.inner_iter_args)
        for value, argument in zip(carried, iter_args, strict=False):
            inner.adjoints[value] = argument
        inner.adjoints.update(seeds)
        yielded = list(block_ops(body)[-1].operands)
        with ir.InsertionPoint(inner_body):
            for k, argument in zip(threaded, iter_args[len(carried) :], strict=True):
                self.add_adjoint(inner, yielded[k], argument)
            self.reverse_block(inner)
            running = [self._current(inner, body.arguments[k + 1]) for k in threaded]
            affine.AffineYieldOp([inner.adjoints[v] for v in carried] + running)
        anchor.erase()
        results = list(reversed_loop.results)
        for value, result in zip(carried, results, strict=False):
            frame.adjoints[value] = result
        for k, result in zip(threaded, results[len(carried) :], strict=True):
            self.add_adjoint(frame, _inits(op)[k], result)
        return reversed_loop.operation

    # ----- checkpointing (checkpoint.py)

    def _top_level_loop(self, frame: _Frame, op: ir.Operation) -> None:
        """Reverse top-level loop `op`; where that tapes values of its iterations and
        checkpointing pays (or is asked for), once more with checkpoints instead."""
        tapes, taped, adjoints, kept = (
            len(self.tapes), dict(self.taped), dict(frame.adjoints), list(self.kept)
        )  # fmt: skip
        adjoint = self._loop(frame, op)
        made = self.tapes[tapes:]
        plan = self._checkpoint_plan(op, made) if made else None
        if plan is None:
            if _rewrites_in_place(op):
                adjoint.attributes[KEEP_ORDER_ATTR] = ir.UnitAttr.get()
            return
        adjoint.erase()
        for tape in made:  # its stores in the forward sweep, then itself
            for use in list(tape.uses):
                use.owner.erase()
            tape.owner.erase()
        del self.tapes[tapes:]
        self.taped, self.kept = taped, kept
        frame.adjoints.clear()
        frame.adjoints.update(adjoints)
        self._checkpointed_loop(frame, op, *plan)

    def _checkpoint_plan(
        self, op: ir.Operation, tapes: list[ir.Value]
    ) -> tuple[int, list[Region], str] | None:
        """(segment length, the arrays `op` writes, a note for the report) when loop `op`,
        whose adjoint made `tapes`, is to be checkpointed: always where `checkpoint_steps`
        asks (and the loop has more iterations), else when sizes are known, the whole tapes
        would take at least `_CHECKPOINT_MIN_TAPE` bytes, and the snapshots and one segment's
        tapes at most half of that."""
        state = self._state(op)
        if len(op.results) or state is None or segments_of(op, 1) is None:
            return None
        trip = constant_trip_count(op)
        per_step = _bytes_per_first_index(tapes)
        state_bytes = _bytes_of(state)
        if self.checkpoint_steps is not None:
            length = self.checkpoint_steps
            if trip is not None and length >= trip:
                return None
        else:
            if trip is None or per_step is None or state_bytes is None or trip < 4:
                return None
            if trip * per_step < _CHECKPOINT_MIN_TAPE:
                return None  # small tapes: not worth a second run of the loop
            length = max(1, round(pymath.sqrt(trip * state_bytes / per_step)))
            with_checkpoints = (-(-trip // length) + 1) * state_bytes + length * per_step
            if length >= trip or 2 * with_checkpoints > trip * per_step:
                return None
        note = f"checkpointed: the adjoint runs it again in segments of {length} iterations"
        if trip is not None and per_step is not None and state_bytes is not None:
            segments = -(-trip // length)
            note += (
                f", from {segments + 1} snapshots of {_size(state_bytes)} (tapes "
                f"{_size(length * per_step)} instead of {_size(trip * per_step)})"
            )
        return length, state, note

    def _state(self, op: ir.Operation) -> list[Region] | None:
        """The parts of arrays that loop `op` writes (boxes, in the gradient's values); None
        where it writes an array defined inside it or a part isl cannot bound."""
        roots: list[ir.Value] = []
        for inner in walk(op):
            if inner.name not in _STORES:
                continue
            root = view_root(inner.operands[1])
            if root not in self.top_values:
                return None
            if not any(root == seen for seen in roots):
                roots.append(root)
        state = []
        for root in roots:
            box = self.overwrites.written_box(op, root)
            if box is None:
                return None
            params = sorted(
                {v for low, high in box for v in (*low.parameters(), *high.parameters())},
                key=lambda v: self._parameter_rank(v),
            )
            lows = [_bound_expr(low, params) for low, _ in box]
            extents = [
                ir.AffineConstantExpr.get(high.constant - low.constant + 1)
                if _constant(low) and _constant(high)
                else _bound_expr(high, params) - _bound_expr(low, params) + 1
                for low, high in box
            ]
            values = [self.top_values[p] for p in params]
            state.append(Region(self.top_values[root], lows, extents, values))
        return state

    def _checkpointed_loop(
        self, frame: _Frame, op: ir.Operation, length: int, state: list[Region], note: str
    ) -> None:
        """Reverse top-level loop `op` segment by segment from snapshots of its state (the
        forward sweep's copy of it stripmined and snapshotting); see checkpoint.py."""
        segments = segments_of(op, length)
        assert segments is not None
        params = [self.value(frame, v) for v in segments.operands]
        n = len(params)
        zero = ir.AffineMap.get(0, 0, [ir.AffineConstantExpr.get(0)])
        one = ir.AffineMap.get(0, 0, [ir.AffineConstantExpr.get(1)])
        lower, upper = segments.first()
        forward = self.forward[op]
        with ir.InsertionPoint(forward), op.location:
            count_map = ir.AffineMap.get(0, n, [ir.AffineConstantExpr.get(0), segments.count()])
            count = affine.AffineMaxOp(count_map, params).result
            slots = affine.AffineApplyOp(
                ir.AffineMap.get(0, 1, [ir.AffineSymbolExpr.get(0) + 1]), [count]
            ).result
            copies = snapshots(state, slots)
            self.tapes += copies  # freed at the end with the tapes
            forward_segments = affine.AffineForOp(
                zero,
                ir.AffineMap.get(0, n, [segments.count()]),
                1,
                [],
                lower_bound_operands=[],
                upper_bound_operands=params,
            )
            with ir.InsertionPoint(forward_segments.body):
                copy_state(state, copies, forward_segments.induction_variable, save=True)
                end = affine.AffineYieldOp([])
        forward.move_before(end.operation)
        forward_index = forward_segments.induction_variable
        self.forward[op] = restricted_loop(forward, lower, upper, [forward_index, *params])
        assert self.forward_end is not None
        with ir.InsertionPoint(self.forward_end), op.location:
            # the state at the end of the forward sweep, restored at the end of the gradient
            # (the segments' runs change it; later statements may have written it again)
            copy_state(state, copies, count, save=True)
        self.final_states.append((state, copies, count))

        carried = self._carried(op)
        initial = [self._current(frame, v) for v in carried]
        with op.location:
            backwards = affine.AffineForOp(
                ir.AffineMap.get(0, n, [segments.count() * -1 + 1]),
                one,
                1,
                initial,
                lower_bound_operands=params,
                upper_bound_operands=[],
            )
        saved = {o: self.forward[o] for o in walk(op)}
        self.tape_point = ir.InsertionPoint(backwards.operation)
        self.checkpointed[op] = length
        with ir.InsertionPoint(backwards.body), op.location:
            segment = affine.AffineApplyOp(
                ir.AffineMap.get(1, 0, [ir.AffineDimExpr.get(0) * -1]),
                [backwards.induction_variable],
            ).result
            copy_state(state, copies, segment, save=False)
            rerun = op.clone()
            remap_operands([rerun], self.top_values)
            self.forward.update(zip(walk(op), walk(rerun), strict=True))
            self.forward[op] = restricted_loop(rerun, lower, upper, [segment, *params])
            for value, argument in zip(carried, backwards.inner_iter_args, strict=True):
                frame.adjoints[value] = argument
            segment_bounds = (lower, [segment, *params], upper, [segment, *params])
            self._loop(frame, op, segment_bounds)
            affine.AffineYieldOp([frame.adjoints[v] for v in carried])
        for value, result in zip(carried, backwards.results, strict=True):
            frame.adjoints[value] = result
        self.forward.update(saved)
        del self.checkpointed[op]
        self.tape_point = None
        self.checkpoint_notes.append((op.location, note))

    def _if(self, frame: _Frame, op: ir.Operation) -> None:
        """An `affine.if` or `scf.if`: reversed under the same condition, each branch's adjoint
        in the same branch; the adjoint of a result goes to the value its branch yields, and
        the adjoints of values from outside come back as the reversed if's results."""
        carried = self._carried(op)
        seeds = [frame.adjoints.pop(r, None) for r in op.results]
        initial = [self._current(frame, v) for v in carried]
        types = [v.type for v in carried]
        with_else = bool(carried) or (len(op.regions) > 1 and bool(op.regions[1].blocks))
        if op.name == "affine.if":
            operands = [self.value(frame, v) for v in op.operands]
            # (the bindings give no IntegerSet from the attribute: a placeholder, then the
            # primal's)
            condition = ir.IntegerSet.get_empty(len(operands), 0)
            branch: Any = affine.AffineIfOp(
                condition, types or None, cond_operands=operands, has_else=with_else
            )
            branch.operation.attributes["condition"] = op.attributes["condition"]
            yield_op: Callable[[list[ir.Value]], Any] = affine.AffineYieldOp
        else:
            branch = scf.IfOp(self.value(frame, op.operands[0]), types, has_else=with_else)
            yield_op = scf.YieldOp
        targets = [branch.then_block] + ([branch.else_block] if with_else else [])
        for index, target in enumerate(targets):
            region = op.regions[index]
            if not region.blocks:  # no else in the primal: nothing happened there
                with ir.InsertionPoint(target):
                    yield_op(initial)
                continue
            block = region.blocks[0]
            with ir.InsertionPoint(target):
                anchor = arith.ConstantOp(ir.IndexType.get(), 0).operation
            inner = _Frame(block, frame, {}, anchor)
            inner.adjoints.update(zip(carried, initial, strict=True))
            with ir.InsertionPoint(target):
                yielded = list(block_ops(block)[-1].operands)
                for seed, value in zip(seeds, yielded, strict=True):
                    if seed is not None:
                        self.add_adjoint(inner, value, seed)
                self.reverse_block(inner)
                yield_op([inner.adjoints[v] for v in carried])
            anchor.erase()
        for value, result in zip(carried, branch.results, strict=True):
            frame.adjoints[value] = result

    # ----- arithmetic

    def _arithmetic(self, frame: _Frame, op: ir.Operation) -> None:
        name = op.name
        result = op.results[0]
        a = frame.adjoints.pop(result)
        if name in _ZERO_DERIVATIVE or not _is_float(result.type):
            return
        x = lambda k: self.value(frame, op.operands[k])  # noqa: E731
        r = lambda: self.value(frame, result)  # noqa: E731
        t = result.type
        active = [v in self.active for v in op.operands]

        def add(k: int, contribution: Callable[[], ir.Value]) -> None:
            # only for an active operand: the derivative of an inactive one may need primal
            # values (a tape) for nothing (`0.2 * (A[i-1] + A[i])`: no value of A is needed)
            if active[k]:
                self.add_adjoint(frame, op.operands[k], contribution())

        if name == "arith.addf":
            add(0, lambda: a)
            add(1, lambda: a)
        elif name == "arith.subf":
            add(0, lambda: a)
            add(1, lambda: _neg(a))
        elif name == "arith.mulf":
            add(0, lambda: self._scaled(a, x(1)))
            add(1, lambda: self._scaled(a, x(0)))
        elif name == "arith.divf":
            quotient = _div(a, x(1))
            add(0, lambda: quotient)
            add(1, lambda: _neg(_mul(quotient, r())))
        elif name == "arith.negf":
            add(0, lambda: _neg(a))
        elif name in ("arith.maximumf", "arith.maxnumf", "arith.minimumf", "arith.minnumf"):
            wins = "ogt" if "max" in name else "olt"
            first = _cmp(wins, x(0), x(1))
            tie = _cmp("oeq", x(0), x(1))
            half = _mul(a, _const(t, 0.5))
            to_first = arith.SelectOp(first, a, arith.SelectOp(tie, half, _zero(t)).result).result
            add(0, lambda: to_first)
            add(1, lambda: arith.SubFOp(a, to_first).result)
        elif name == "arith.select":
            zero = _zero(t)
            condition = self.value(frame, op.operands[0])
            add(1, lambda: arith.SelectOp(condition, a, zero).result)
            add(2, lambda: arith.SelectOp(condition, zero, a).result)
        elif name == "arith.extf":
            add(0, lambda: arith.TruncFOp(op.operands[0].type, a).result)
        elif name == "arith.truncf":
            add(0, lambda: arith.ExtFOp(op.operands[0].type, a).result)
        elif name == "arith.remf":
            add(0, lambda: a)
            add(1, lambda: _neg(_mul(a, math.TruncOp(_div(x(0), x(1))).result)))
        elif name in ("arith.sitofp", "arith.uitofp"):
            return
        elif name == "math.fma":
            add(0, lambda: _mul(a, x(1)))
            add(1, lambda: _mul(a, x(0)))
            add(2, lambda: a)
        elif name == "math.powf":
            one = _const(t, 1.0)
            add(
                0,
                lambda: _mul(
                    a, _mul(x(1), math.PowFOp(x(0), arith.SubFOp(x(1), one).result).result)
                ),
            )
            add(1, lambda: _mul(a, _mul(r(), math.LogOp(x(0)).result)))
        elif name == "math.atan2":
            y, xx = x(0), x(1)
            norm = arith.AddFOp(_mul(xx, xx), _mul(y, y)).result
            add(0, lambda: _div(_mul(a, xx), norm))
            add(1, lambda: _neg(_div(_mul(a, y), norm)))
        elif name == "math.copysign":
            sign = _mul(
                math.CopySignOp(_const(t, 1.0), x(0)).result,
                math.CopySignOp(_const(t, 1.0), x(1)).result,
            )
            add(0, lambda: _mul(a, sign))
        elif name in _UNARY:
            add(0, lambda: _UNARY[name](a, x(0), r, t))
        else:
            raise NotDifferentiable(f"'{name}' has no derivative rule yet", op.location)


# ----- unary derivative rules: (adjoint, operand, result thunk, type) -> operand's adjoint


def _sqrt1(t: ir.Type, v: ir.Value, sign: float) -> ir.Value:
    """sqrt(1 + sign·v²)."""
    return math.SqrtOp(
        arith.AddFOp(_const(t, 1.0), _mul(_const(t, sign), _mul(v, v))).result
    ).result


_UNARY: dict[str, Callable[[ir.Value, ir.Value, Callable[[], ir.Value], ir.Type], ir.Value]] = {
    "math.exp": lambda a, x, r, t: _mul(a, r()),
    "math.exp2": lambda a, x, r, t: _mul(a, _mul(r(), _const(t, pymath.log(2.0)))),
    "math.expm1": lambda a, x, r, t: _mul(a, arith.AddFOp(r(), _const(t, 1.0)).result),
    "math.log": lambda a, x, r, t: _div(a, x),
    "math.log2": lambda a, x, r, t: _div(a, _mul(x, _const(t, pymath.log(2.0)))),
    "math.log10": lambda a, x, r, t: _div(a, _mul(x, _const(t, pymath.log(10.0)))),
    "math.log1p": lambda a, x, r, t: _div(a, arith.AddFOp(x, _const(t, 1.0)).result),
    "math.sqrt": lambda a, x, r, t: _div(_mul(a, _const(t, 0.5)), r()),
    "math.rsqrt": lambda a, x, r, t: _neg(_div(_mul(_mul(a, _const(t, 0.5)), r()), x)),
    "math.cbrt": lambda a, x, r, t: _div(a, _mul(_const(t, 3.0), _mul(r(), r()))),
    "math.tanh": lambda a, x, r, t: _mul(a, arith.SubFOp(_const(t, 1.0), _mul(r(), r())).result),
    "math.sin": lambda a, x, r, t: _mul(a, math.CosOp(x).result),
    "math.cos": lambda a, x, r, t: _neg(_mul(a, math.SinOp(x).result)),
    "math.tan": lambda a, x, r, t: _mul(a, arith.AddFOp(_const(t, 1.0), _mul(r(), r())).result),
    "math.asin": lambda a, x, r, t: _div(a, _sqrt1(t, x, -1.0)),
    "math.acos": lambda a, x, r, t: _neg(_div(a, _sqrt1(t, x, -1.0))),
    "math.atan": lambda a, x, r, t: _div(a, arith.AddFOp(_const(t, 1.0), _mul(x, x)).result),
    "math.sinh": lambda a, x, r, t: _mul(a, math.CoshOp(x).result),
    "math.cosh": lambda a, x, r, t: _mul(a, math.SinhOp(x).result),
    "math.asinh": lambda a, x, r, t: _div(a, _sqrt1(t, x, 1.0)),
    "math.acosh": lambda a, x, r, t: _div(
        a, math.SqrtOp(arith.SubFOp(_mul(x, x), _const(t, 1.0)).result).result
    ),
    "math.atanh": lambda a, x, r, t: _div(a, arith.SubFOp(_const(t, 1.0), _mul(x, x)).result),
    "math.erf": lambda a, x, r, t: _mul(
        a, _mul(_const(t, 2.0 / pymath.sqrt(pymath.pi)), math.ExpOp(_neg(_mul(x, x))).result)
    ),
    "math.erfc": lambda a, x, r, t: _neg(
        _mul(a, _mul(_const(t, 2.0 / pymath.sqrt(pymath.pi)), math.ExpOp(_neg(_mul(x, x))).result))
    ),
    "math.absf": lambda a, x, r, t: (
        arith.SelectOp(
            _cmp("ogt", x, _zero(t)),
            a,
            arith.SelectOp(_cmp("olt", x, _zero(t)), _neg(a), _zero(t)).result,
        ).result
    ),
}


# ----- small builders


def _const(t: ir.Type, value: float) -> ir.Value:
    return arith.ConstantOp(t, ir.FloatAttr.get(t, value)).result


def _zero(t: ir.Type) -> ir.Value:
    return _const(t, 0.0)


def _mul(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.MulFOp(a, b).result


def _div(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.DivFOp(a, b).result


def _neg(a: ir.Value) -> ir.Value:
    return arith.NegFOp(a).result


def _cmp(predicate: str, a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.CmpFOp(getattr(arith.CmpFPredicate, predicate.upper()), a, b).result


def _map(op: ir.Operation) -> ir.AffineMap:
    return ir.AffineMapAttr(op.attributes["map"]).value


def _inits(loop: ir.Operation) -> list[ir.Value]:
    return list(loop.operands)[len(loop.operands) - len(loop.results) :]


def _bounds(
    loop: ir.Operation,
) -> tuple[ir.AffineMap, list[ir.Value], ir.AffineMap, list[ir.Value]]:
    lower = ir.AffineMapAttr(loop.attributes["lowerBoundMap"]).value
    upper = ir.AffineMapAttr(loop.attributes["upperBoundMap"]).value
    operands = list(loop.operands)
    lower_count = lower.n_dims + lower.n_symbols
    upper_count = upper.n_dims + upper.n_symbols
    return (
        lower,
        operands[:lower_count],
        upper,
        operands[lower_count : lower_count + upper_count],
    )


def _negated(bound: ir.AffineMap) -> ir.AffineMap:
    """1 - e for each result e of `bound`."""
    return ir.AffineMap.get(
        bound.n_dims, bound.n_symbols, [expr * -1 + 1 for expr in bound.results]
    )


def _reversed_strided_loop(
    lower_map: ir.AffineMap,
    lower: list[ir.Value],
    upper_map: ir.AffineMap,
    upper: list[ir.Value],
    step: int,
    initial: list[ir.Value],
) -> tuple[affine.AffineForOp, ir.Value]:
    """The loop `for i = L to U step s` backwards: t' over [1 - T, 1) with T = ceildiv(U - L, s)
    iterations (the max over pairs of bounds, as L is a max and U a min), i = L - s·t'; the
    reversed loop (built at the insertion point) and i in its body."""
    n_lower, n_upper = lower_map.n_dims, upper_map.n_dims
    dims = [ir.AffineDimExpr.get(k) for k in range(n_lower + n_upper)]
    symbols = [ir.AffineSymbolExpr.get(k) for k in range(lower_map.n_symbols + upper_map.n_symbols)]
    lows = [
        substituted(e, dims[:n_lower], symbols[: lower_map.n_symbols]) for e in lower_map.results
    ]
    highs = [
        substituted(e, dims[n_lower:], symbols[lower_map.n_symbols :]) for e in upper_map.results
    ]
    step_expr = ir.AffineConstantExpr.get(step)
    starts = ir.AffineMap.get(
        len(dims),
        len(symbols),
        [
            ir.AffineExpr.get_ceil_div(high - low, step_expr) * -1 + 1
            for high in highs
            for low in lows
        ],
    )
    operands = [
        *lower[:n_lower],
        *upper[:n_upper],
        *lower[n_lower:],
        *upper[n_upper:],
    ]
    first = affine.AffineMaxOp(lower_map, lower).result if len(lows) > 1 else None
    loop = affine.AffineForOp(
        starts,
        ir.AffineMap.get(0, 0, [ir.AffineConstantExpr.get(1)]),
        1,
        initial,
        lower_bound_operands=operands,
        upper_bound_operands=[],
    )
    with ir.InsertionPoint(loop.body):
        t = loop.induction_variable
        if first is not None:
            index = affine.AffineApplyOp(
                ir.AffineMap.get(2, 0, [ir.AffineDimExpr.get(0) - ir.AffineDimExpr.get(1) * step]),
                [first, t],
            ).result
        else:
            start_dims = [ir.AffineDimExpr.get(k) for k in range(n_lower)]
            here = substituted(
                lower_map.results[0],
                start_dims,
                [ir.AffineSymbolExpr.get(k) for k in range(lower_map.n_symbols)],
            )
            index = affine.AffineApplyOp(
                ir.AffineMap.get(
                    n_lower + 1, lower_map.n_symbols, [here - ir.AffineDimExpr.get(n_lower) * step]
                ),
                [*lower[:n_lower], t, *lower[n_lower:]],
            ).result
    return loop, index


def _rewrites_in_place(loop: ir.Operation) -> bool:
    """Whether no store in `loop` has a subscript that depends on its induction variable:
    each iteration rewrites the same elements (a time loop of sweeps, a solver's iterations)."""
    iv = loop.regions[0].blocks[0].arguments[0]
    depends: dict[ir.Value, bool] = {}

    def on_iv(value: ir.Value) -> bool:
        if value == iv:
            return True
        if value in depends:
            return depends[value]
        depends[value] = False  # a cycle through block arguments ends here
        owner = value.owner
        found = False
        if isinstance(owner, ir.Block):
            parent = owner.owner
            found = parent.name == "affine.for" and any(
                on_iv(v) for v in parent.operands
            )  # an inner loop's variable: its bounds may use the iv
        else:
            found = any(on_iv(v) for v in owner.operands)
        depends[value] = found
        return found

    stores = [o for o in walk(loop) if o.name in _STORES]
    return bool(stores) and not any(
        on_iv(index) for store in stores for index in list(store.operands)[2:]
    )


def _stored_where(value: ir.Value) -> ir.Operation | None:
    """An `affine.store` of `value` in its block, when there is one."""
    block = value.owner.operation.block
    for use in value.uses:
        user = use.owner.operation if hasattr(use.owner, "operation") else use.owner
        if user.name == "affine.store" and use.operand_number == 0 and user.block == block:
            return user
    return None


def _scatters(groups: list[list[ir.Operation]]) -> bool:
    """Whether two of `groups` (reads, by array and access pattern) read one array: their
    adjoints update one shadow at two offsets (a stencil's), which in a single nest carries
    dependences from one iteration to the next through memory and stays scalar."""
    arrays = [group[0].operands[0] for group in groups]
    return len(set(arrays)) < len(arrays)


def _reduction_kinds(loop: ir.Operation) -> list[str]:
    if REDUCTIONS_ATTR not in loop.attributes:
        return ["none"] * len(loop.results)
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(loop.attributes[REDUCTIONS_ATTR])]


def _external_operands(op: ir.Operation) -> list[ir.Value]:
    out: list[ir.Value] = []
    for value in all_operands(op):
        if (not op.regions or not defined_in(value, op)) and not any(value == v for v in out):
            out.append(value)
    return out


def _accumulated_load(store: ir.Operation) -> ir.Operation | None:
    """The load of the same element that `store` adds to (`X[a] = X[a] + e`, or a sum loop
    started from `X[a]`), read by nothing else and with no store to X in between; else None."""
    value, array = store.operands[0], store.operands[1]
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    producer = owner.operation
    candidates: list[ir.Value] = []
    if producer.name == "arith.addf":
        candidates = list(producer.operands)
    elif producer.name == "arith.subf":
        candidates = [producer.operands[0]]
    elif producer.name == "affine.for" and len(producer.results):
        k = next(i for i, r in enumerate(producer.results) if r == value)
        body = producer.regions[0].blocks[0]
        if _reduction_kinds(producer)[k] == "add" and _private_sum(
            body.arguments[k + 1], list(block_ops(body)[-1].operands)[k]
        ):
            candidates = [_inits(producer)[k]]
    for candidate in candidates:
        load_owner = candidate.owner
        if isinstance(load_owner, ir.Block):
            continue
        load = load_owner.operation
        if (
            load.name == store.name.replace("store", "load")
            and load.operands[0] == array
            and len(list(candidate.uses)) == 1
            and list(load.operands)[1:] == list(store.operands)[2:]
            and (not load.name.startswith("affine.") or _map(load) == _map(store))
            and load.block == store.block
            and not _stores_between(load, store, array)
        ):
            return load
    return None


def _stores_between(first: ir.Operation, last: ir.Operation, array: ir.Value) -> bool:
    ops = block_ops(first.block)
    begin = next(k for k, op in enumerate(ops) if op == first)
    stop = next(k for k, op in enumerate(ops) if op == last)
    return any(
        inner.name in _STORES and inner.operands[1] == array
        for op in ops[begin + 1 : stop]
        for inner in walk(op)
    )


def _private_sum(running: ir.Value, last: ir.Value) -> bool:
    """Whether the running value `running` reaches `last` through additions only (`acc + x`,
    `x + acc`, `acc - x`, nested loops' sums), each step used by nothing else: its adjoint is
    then the same in every iteration."""
    value = running
    while value != last:
        uses = list(value.uses)
        if len(uses) != 1:
            return False
        user = uses[0].owner.operation
        if user.name == "arith.addf" or (user.name == "arith.subf" and uses[0].operand_number == 0):
            value = user.results[0]
        elif user.name == "affine.for" and len(user.results):
            k = uses[0].operand_number - (len(user.operands) - len(user.results))
            if k < 0 or _reduction_kinds(user)[k] != "add":
                return False
            inner = user.regions[0].blocks[0]
            if not _private_sum(inner.arguments[k + 1], list(block_ops(inner)[-1].operands)[k]):
                return False
            value = user.results[k]
        else:
            return False
    return True


def _writes_once(store: ir.Operation, nest: ir.Operation) -> bool:
    """Whether each iteration of the loops from `nest` down to affine `store` writes its own
    element: every such loop's IV is one subscript, alone (plus a constant)."""
    if store.name != "affine.store":
        return False
    amap = _map(store)
    operands = list(store.operands)[2:]
    plain: list[ir.Value] = []
    for expr in amap.results:
        if isinstance(expr, ir.AffineAddExpr) and isinstance(expr.rhs, ir.AffineConstantExpr):
            expr = expr.lhs
        if isinstance(expr, ir.AffineDimExpr):
            plain.append(operands[expr.position])
    loops: list[ir.Operation] = []
    parent = store.parent
    while parent is not None:
        if parent.operation.name == "affine.for":
            loops.append(parent.operation)
        if parent.operation == nest:
            break
        parent = parent.operation.parent
    return all(any(loop.regions[0].blocks[0].arguments[0] == v for v in plain) for loop in loops)


def _top_level(op: ir.Operation, function: ir.Operation) -> ir.Operation:
    """The op of `function`'s body that is or holds `op`."""
    while op.parent is not None and op.parent.operation != function:
        op = op.parent.operation
    return op


def _constant(bound: Bound) -> bool:
    return not (bound.parameters() or bound.divs)


def _bound_expr(bound: Bound, params: list[ir.Value]) -> ir.AffineExpr:
    expr: ir.AffineExpr = ir.AffineConstantExpr.get(bound.constant)
    for value, coefficient in bound.terms:
        position = next(k for k, p in enumerate(params) if p == value)
        expr = expr + ir.AffineSymbolExpr.get(position) * coefficient
    for coefficient, numerator, denominator in bound.divs:
        quotient = ir.AffineExpr.get_floor_div(
            _bound_expr(numerator, params), ir.AffineConstantExpr.get(denominator)
        )
        expr = expr + quotient * coefficient
    return expr


# ----- the gradient function


def differentiate(
    primal: ir.Operation,
    gradient: ir.Operation,
    active: list[bool],
    fast: bool,
    checkpoint_steps: int | None = None,
    discarded: list[bool] | None = None,
    for_cpu: bool = True,
) -> None:
    """Fill the declared `gradient` with primal's body and its adjoint sweep. The declaration
    takes primal's arguments, then one shadow per argument marked in `active` (an array's
    shadow has its type; a float scalar's is a one-element memref its adjoint is added to), then one
    seed per float result of primal; it returns nothing. `checkpoint_steps`: see
    `Options.checkpoint_steps`. `discarded`: the arguments whose final values the caller
    ignores; the forward sweep's nests that only compute those are left out. `for_cpu`: loop
    orders meant for the CPU's micro-kernels (`transpose.py`) are made; the GPU mapping wants
    every nest scheduled."""
    primal_body = primal.regions[0].blocks[0]
    primal_args = list(primal_body.arguments)
    declared = list(ir.FunctionType(ir.TypeAttr(gradient.attributes["function_type"]).value).inputs)
    entry = gradient.regions[0].blocks.append(*declared)
    args = list(entry.arguments)
    values: dict[ir.Value, ir.Value] = dict(zip(primal_args, args[: len(primal_args)], strict=True))
    shadows: dict[ir.Value, ir.Value] = {}
    scalar_shadows: dict[ir.Value, ir.Value] = {}
    extra = iter(args[len(primal_args) :])
    for argument, on in zip(primal_args, active, strict=True):
        if on:
            shadow = next(extra)
            if isinstance(argument.type, ir.MemRefType):
                shadows[argument] = shadow
            else:
                scalar_shadows[argument] = shadow
    seeds = list(extra)
    returned = list(block_ops(primal_body)[-1].operands)
    forward: dict[ir.Operation, ir.Operation] = {}
    freed: list[ir.Value] = []  # local arrays and their shadows, freed at the very end
    with ir.InsertionPoint(entry):
        for op in block_ops(primal_body)[:-1]:  # the forward sweep
            if op.name == "memref.dealloc" and op.operands[0] in shadows:
                continue  # the adjoint sweep reads the array: freed at the end
            copy = op.clone()
            remap_operands([copy], values)
            for old, new in zip(op.results, copy.results, strict=True):
                values[old] = new
            forward.update(zip(walk(op), walk(copy), strict=True))
            if op.name in VIEW_OPS and op.operands[0] in shadows:
                # a view of an array with a shadow: the same view of the shadow
                view = copy.clone()
                view.operands[0] = shadows[op.operands[0]]
                shadows[op.results[0]] = view.results[0]
            if op.name in ("memref.alloc", "memref.alloca") and _is_float_array(op.results[0]):
                # a local array of the body: a shadow of zeros beside it
                shadow = copy.clone().results[0]
                fill_with_zeros(shadow)
                shadows[op.results[0]] = shadow
                if op.name == "memref.alloc":
                    freed += [copy.results[0], shadow]
        differentiator = _Differentiator(
            primal, shadows, fast, set(scalar_shadows), checkpoint_steps
        )
        differentiator.for_cpu = for_cpu
        differentiator.forward = forward
        differentiator.forward_end = arith.ConstantOp(ir.IndexType.get(), 0).operation
        differentiator.top_values = values
        top = _Frame(primal_body, None, values)
        float_results = [v for v in returned if _is_float(v.type)]
        for value, seed in zip(float_results, seeds, strict=True):
            differentiator.add_adjoint(top, value, seed)
        differentiator.reverse_block(top)
        for argument, shadow in scalar_shadows.items():
            adjoint = top.adjoints.get(argument)
            if adjoint is not None:
                at = [arith.ConstantOp(ir.IndexType.get(), 0).result] * ir.MemRefType(
                    shadow.type
                ).rank
                total = arith.AddFOp(memref.LoadOp(shadow, at).result, adjoint).result
                memref.StoreOp(total, shadow, at)
        for state, copies, slot in differentiator.final_states:
            copy_state(state, copies, slot, save=False)
        if discarded is not None:
            ignored = {a for a, off in zip(args, discarded, strict=False) if off}
            _drop_unneeded_forward(entry, differentiator.forward_end, ignored)
        differentiator.forward_end.erase()
        for made in walk(gradient):
            if _SCALED_ATTR in made.attributes:
                del made.attributes[_SCALED_ATTR]
        for array in [*differentiator.tapes, *freed]:
            memref.DeallocOp(array)
        func.ReturnOp([])
    attach_remarks(
        gradient,
        [
            remark_at(location, "grad", "checkpoint", "remark", note)
            for location, note in differentiator.checkpoint_notes
        ],
    )


def _drop_unneeded_forward(entry: ir.Block, end: ir.Operation, ignored: set[ir.Value]) -> None:
    """Erase the forward sweep's top-level ops (those before `end`) that only store into
    arrays in `ignored` which nothing after them reads: primal work nobody needs (a gradient
    of `C = A·B` needs A and B, not C)."""
    while True:
        ops = block_ops(entry)
        stop = next(k for k, op in enumerate(ops) if op == end)
        for k in reversed(range(stop)):
            written = _only_writes(ops[k], ignored)
            if written and not any(_reads(op, written) for op in ops[k + 1 :]):
                ops[k].erase()
                break
        else:
            return


_PURE_PREFIXES = ("affine.", "arith.", "math.", "scf.")


def _only_writes(op: ir.Operation, ignored: set[ir.Value]) -> set[ir.Value]:
    """The arrays `op` stores into when they all are in `ignored`, its results are unused and
    it does nothing else with memory but reading; else the empty set."""
    if any(len(list(result.uses)) for result in op.results):
        return set()
    written: set[ir.Value] = set()
    for inner in walk(op):
        if inner.name in _STORES:
            root = view_root(inner.operands[1])
            if root not in ignored:
                return set()
            written.add(root)
        elif not (inner.name.startswith(_PURE_PREFIXES) or inner.name in _LOADS):
            return set()
    return written


def _reads(op: ir.Operation, arrays: set[ir.Value]) -> bool:
    """Whether `op` (or an op in it) uses one of `arrays` (or a view of one) other than as the
    array a store writes."""
    for inner in walk(op):
        for k, operand in enumerate(inner.operands):
            if not isinstance(operand.type, ir.MemRefType) or view_root(operand) not in arrays:
                continue
            if not (inner.name in _STORES and k == 1):
                return True
    return False


def _stored_type(t: ir.Type) -> ir.Type:
    """The element type a tape keeps values of type `t` in: integers narrower than a byte
    (conditions) as bytes, which memory holds."""
    if isinstance(t, ir.IntegerType) and ir.IntegerType(t).width < 8:
        return ir.IntegerType.get_signless(8)
    return t


def _is_float_array(value: ir.Value) -> bool:
    return isinstance(value.type, ir.MemRefType) and _is_float(
        ir.MemRefType(value.type).element_type
    )


def _element_bytes(t: ir.Type) -> int:
    if isinstance(t, ir.IndexType):
        return 8
    width = ir.FloatType(t).width if isinstance(t, ir.FloatType) else ir.IntegerType(t).width
    return max(1, width // 8)


def _bytes_of(state: list[Region]) -> int | None:
    """The bytes of the regions together; None where a size is not a constant."""
    total = 0
    for region in state:
        if not all(isinstance(e, ir.AffineConstantExpr) for e in region.extents):
            return None
        extents = [max(0, ir.AffineConstantExpr(e).value) for e in region.extents]
        total += _element_bytes(ir.MemRefType(region.array.type).element_type) * pymath.prod(
            extents
        )
    return total


def _bytes_per_first_index(tapes: list[ir.Value]) -> int | None:
    """The bytes `tapes` hold per value of their first index; None where a size is dynamic."""
    total = 0
    for tape in tapes:
        tape_type = ir.MemRefType(tape.type)
        if not tape_type.has_static_shape:
            return None
        total += _element_bytes(tape_type.element_type) * pymath.prod(tape_type.shape[1:])
    return total


def _size(count: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"
