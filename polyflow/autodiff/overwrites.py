"""Exact answers, from isl, to the two questions the adjoint sweep asks about a primal function:
is the element a read sees overwritten later in the function (then the adjoint cannot read it
again at the end and must tape the value), and how large a tape indexed by an op's iteration
vector must be (the bounding box of its loops' domain, as affine functions of the function's
parameters).

Accesses and bounds that the affine text cannot express make the answer conservative
("overwritten"; no box), never wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import islpy as isl
from mlir import ir

from polyflow.ir.affine_text import Namer, NotModeled, if_condition, loop_bounds
from polyflow.ir.aliasing import VIEW_OPS, view_root
from polyflow.ir.ops import walk

_LOADS = ("affine.load", "memref.load")
_STORES = ("affine.store", "memref.store")


@dataclass(frozen=True)
class Bound:
    """`constant + Σ coefficient · parameter + Σ coefficient · floor(numerator / denominator)`:
    a bound of a tape dimension."""

    constant: int
    terms: tuple[tuple[ir.Value, int], ...]
    divs: tuple[tuple[int, Bound, int], ...] = ()

    def parameters(self) -> list[ir.Value]:
        out = [value for value, _ in self.terms]
        for _, numerator, _ in self.divs:
            out += numerator.parameters()
        return out


def enclosing(op: ir.Operation, function: ir.Operation) -> list[tuple[ir.Operation, int]]:
    """The `affine.for` and `affine.if` ops around `op` in `function`, outermost first, each with
    the index of the region holding `op` (an if's 0: then, 1: else)."""
    out: list[tuple[ir.Operation, int]] = []
    child = op
    parent = op.parent
    while parent is not None and parent.operation != function:
        parent_op = parent.operation
        if parent_op.name in ("affine.for", "affine.if"):
            region = next(
                k
                for k, r in enumerate(parent_op.regions)
                if any(o.operation == child for b in r.blocks for o in b.operations)
            )
            out.append((parent_op, region))
        child = parent_op
        parent = parent_op.parent
    out.reverse()
    return out


class Overwrites:
    """The program order and the iteration domains of `function`'s ops, asked through isl."""

    def __init__(self, function: ir.Operation) -> None:
        self.function = function
        self.order = {op: k for k, op in enumerate(walk(function))}
        entry = function.regions[0].blocks[0]
        top_values = {a for a in entry.arguments} | {
            r for op in entry.operations for r in op.operation.results
        }
        # parameters: the function's arguments and the values of its top-level ops
        self.namer = Namer(lambda v: v not in top_values)
        self._answers: dict[ir.Operation, bool] = {}

    def loops(self, op: ir.Operation) -> list[ir.Operation]:
        """The `affine.for` ops around `op`, outermost first."""
        return [o for o, _ in enclosing(op, self.function) if o.name == "affine.for"]

    # ----- is a read overwritten later?

    def overwritten(self, load: ir.Operation) -> bool:
        """Whether some op of the function may write the element `load` reads after it reads
        it (True where the accesses cannot be modeled); for a store, the element it writes
        after it writes it."""
        if load in self._answers:
            return self._answers[load]
        array = load.operands[1] if load.name in _STORES else load.operands[0]
        root = view_root(array)
        answer = False
        for op in self.order:
            touched = [v for v in op.operands if isinstance(v.type, ir.MemRefType)]
            if not any(view_root(v) == root for v in touched) or op.name in _LOADS:
                continue
            if op.name in VIEW_OPS:
                continue  # a view itself writes nothing; its stores are seen below
            if op.name not in _STORES or op.operands[1] != array:
                answer = True  # a call, a copy, a store through another view: anything
                break
            if self._may_follow(load, op):
                answer = True
                break
        self._answers[load] = answer
        return answer

    def _may_follow(self, load: ir.Operation, store: ir.Operation) -> bool:
        try:
            return not self._later_writes(load, store).is_empty()
        except (NotModeled, isl.Error):
            return True

    def _later_writes(self, load: ir.Operation, store: ir.Operation) -> isl.Set:
        """`{ [a..., b...] }`: the instances a of `load` and b of `store` that touch the same
        element, with b after a in program order."""
        around_load = enclosing(load, self.function)
        around_store = enclosing(store, self.function)
        load_loops = [o for o, _ in around_load if o.name == "affine.for"]
        store_loops = [o for o, _ in around_store if o.name == "affine.for"]
        a = [f"a{k}" for k in range(len(load_loops))]
        b = [f"b{k}" for k in range(len(store_loops))]
        a_ivs = {
            loop.regions[0].blocks[0].arguments[0]: n for loop, n in zip(load_loops, a, strict=True)
        }
        b_ivs = {
            loop.regions[0].blocks[0].arguments[0]: n
            for loop, n in zip(store_loops, b, strict=True)
        }
        constraints = self._domain(around_load, a_ivs) + self._domain(around_store, b_ivs)
        load_subscripts = self._subscripts(load, 2 if load.name in _STORES else 1, a_ivs)
        store_subscripts = self._subscripts(store, 2, b_ivs)
        if load_subscripts is not None and store_subscripts is not None:
            constraints += [
                f"{x} = {y}" for x, y in zip(load_subscripts, store_subscripts, strict=True)
            ]
        common = 0
        while (
            common < min(len(load_loops), len(store_loops))
            and load_loops[common] == store_loops[common]
        ):
            common += 1
        later: list[str] = []
        for k in range(common):
            equal = [f"{a[j]} = {b[j]}" for j in range(k)]
            later.append(" and ".join([*equal, f"{b[k]} > {a[k]}"]))
        if self._textually_after(load, store):
            later.append(" and ".join([f"{a[j]} = {b[j]}" for j in range(common)]) or "true")
        if not later:
            return isl.Set("{ : false }")
        constraints.append("(" + " or ".join(f"({c})" for c in later) + ")")
        params = ", ".join(self.namer.params.values())
        text = f"[{params}] -> {{ [{', '.join(a + b)}] : {' and '.join(constraints)} }}"
        return isl.Set(text)

    def _textually_after(self, first: ir.Operation, second: ir.Operation) -> bool:
        """Whether `second` comes after `first` within one iteration of their common loops."""
        return self.order[second] > self.order[first]

    def _domain(
        self, around: list[tuple[ir.Operation, int]], ivs: dict[ir.Value, str]
    ) -> list[str]:
        out: list[str] = []
        for op, region in around:
            if op.name == "affine.for":
                out += loop_bounds(op, ivs[op.regions[0].blocks[0].arguments[0]], self.namer, ivs)
                continue
            amap, equalities = if_condition(op)
            lhs = self.namer.map_results(amap, list(op.operands), ivs)
            parts = [f"{e} {'=' if eq else '>='} 0" for e, eq in zip(lhs, equalities, strict=True)]
            text = " and ".join(parts) if parts else "true"
            out.append(text if region == 0 else f"not ({text})")
        return out

    def _subscripts(
        self, op: ir.Operation, first: int, ivs: dict[ir.Value, str]
    ) -> list[str] | None:
        if not op.name.startswith("affine."):
            return None  # data-dependent subscripts: any element
        amap = ir.AffineMapAttr(op.attributes["map"]).value
        return self.namer.map_results(amap, list(op.operands)[first:], ivs)

    # ----- the part of an array a loop writes

    def written_box(self, loop: ir.Operation, array: ir.Value) -> list[tuple[Bound, Bound]] | None:
        """(lowest, highest) subscript in each dimension of the elements of `array` that the
        stores in `loop` write, as affine functions of the parameters; None where a store
        reaches it through a view or without affine subscripts, or isl gives no single affine
        bound."""
        stores = [
            op
            for op in walk(loop)
            if op.name in ("affine.store", "memref.store") and view_root(op.operands[1]) == array
        ]
        rank = ir.MemRefType(array.type).rank
        names = [f"e{k}" for k in range(rank)]
        try:
            written: isl.Set | None = None
            for store in stores:
                if store.operands[1] != array:
                    return None
                around = enclosing(store, self.function)
                store_loops = [o for o, _ in around if o.name == "affine.for"]
                inner = [f"b{k}" for k in range(len(store_loops))]
                ivs = {
                    o.regions[0].blocks[0].arguments[0]: n
                    for o, n in zip(store_loops, inner, strict=True)
                }
                subscripts = self._subscripts(store, 2, ivs)
                if subscripts is None:
                    return None
                constraints = self._domain(around, ivs) + [
                    f"{e} = {x}" for e, x in zip(names, subscripts, strict=True)
                ]
                params = ", ".join(self.namer.params.values())
                exists = f"exists ({', '.join(inner)} : " if inner else "("
                piece = isl.Set(
                    f"[{params}] -> {{ [{', '.join(names)}] : {exists}"
                    f"{' and '.join(constraints) or 'true'}) }}"
                )
                written = piece if written is None else written.union(piece)
            if written is None:
                return []  # nothing written
            written = written.coalesce()
            by_name = {n: v for v, n in self.namer.params.items()}
            out: list[tuple[Bound, Bound]] = []
            for k in range(rank):
                extremes = _extremes(written, k, by_name, coalesce=True)
                if extremes is None:
                    return None
                out.append(extremes)
            return out
        except (NotModeled, isl.Error):
            return None

    # ----- the box of a tape

    def box(self, loops: Sequence[ir.Operation]) -> list[tuple[Bound, Bound]] | None:
        """(lowest, highest) value of each loop's IV over the nest's domain, as affine
        functions of the parameters; None where isl gives no single affine bound."""
        names = [f"a{k}" for k in range(len(loops))]
        ivs = {
            loop.regions[0].blocks[0].arguments[0]: n for loop, n in zip(loops, names, strict=True)
        }
        try:
            per_loop = [
                # without a strided loop's `mod`: the box of its range, a superset
                [c for c in loop_bounds(loop, name, self.namer, ivs) if " mod " not in c]
                for loop, name in zip(loops, names, strict=True)
            ]
            by_name = {n: v for v, n in self.namer.params.items()}
            params = ", ".join(self.namer.params.values())
            out: list[tuple[Bound, Bound]] = []
            for k in range(len(loops)):
                # loop k's range over the outer loops' alone: the inner loops' bounds would only
                # drop outer iterations that run no inner one (and split the bounds in pieces)
                constraints = [c for bounds in per_loop[: k + 1] for c in bounds]
                domain = isl.Set(
                    f"[{params}] -> {{ [{', '.join(names[: k + 1])}] : "
                    f"{' and '.join(constraints) or 'true'} }}"
                )
                extremes = _extremes(domain, k, by_name)
                if extremes is None:
                    return None
                out.append(extremes)
            return out
        except (NotModeled, isl.Error):
            return None


def _extremes(
    points: isl.Set, k: int, by_name: dict[str, ir.Value], *, coalesce: bool = False
) -> tuple[Bound, Bound] | None:
    """(lowest, highest) value of dimension `k` of `points` as Bounds (with `coalesce`, each
    with its pieces merged first); None where either is not a single affine piece."""
    low, high = points.dim_min(k), points.dim_max(k)
    if coalesce:
        low, high = low.coalesce(), high.coalesce()
    low_bound, high_bound = _bound(low, by_name), _bound(high, by_name)
    return None if low_bound is None or high_bound is None else (low_bound, high_bound)


def _bound(value: isl.PwAff, by_name: dict[str, ir.Value]) -> Bound | None:
    pieces = value.get_pieces()
    if len(pieces) != 1:
        return None
    return _affine(pieces[0][1], by_name, 1)


def _affine(aff: isl.Aff, by_name: dict[str, ir.Value], scale: int) -> Bound | None:
    """`scale · aff` as a Bound, where that has integer coefficients; else None."""

    def integer(val: isl.Val) -> int | None:
        numerator, denominator = val.get_num_si() * scale, val.get_den_val().get_num_si()
        return numerator // denominator if numerator % denominator == 0 else None

    constant = integer(aff.get_constant_val())
    if constant is None:
        return None
    terms = []
    for j in range(aff.dim(isl.dim_type.param)):
        coefficient = integer(aff.get_coefficient_val(isl.dim_type.param, j))
        if coefficient is None:
            return None
        if coefficient:
            name = aff.get_dim_name(isl.dim_type.param, j)
            terms.append((by_name[str(name)], coefficient))
    divs = []
    for k in range(aff.dim(isl.dim_type.div)):
        coefficient = integer(aff.get_coefficient_val(isl.dim_type.div, k))
        if coefficient is None:
            return None
        if not coefficient:
            continue
        inner = aff.get_div(k)
        denominator = inner.get_denominator_val().get_num_si()
        numerator = _affine(inner, by_name, denominator)
        if numerator is None:
            return None
        divs.append((coefficient, numerator, denominator))
    return Bound(constant, tuple(terms), tuple(divs))
