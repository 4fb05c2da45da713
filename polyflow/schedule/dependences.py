"""Dependences between the statement instances of a `Scop`, by isl's dataflow analysis, and
questions about a schedule that respects them (which dimensions are parallel or permutable).

- RAW (flow): each read from the last write of the same element before it (value-based: writes
  are must-writes, an `affine.store` always writes its element).
- WAR (anti): each write after the reads of its element since the previous write.
- WAW (output): each write after the previous write of its element.
These three keep every read reading the same write and every element's last write last, so a
schedule that orders all of them as the source order does computes the same (CONTRACT.md:
validity = RAW ∪ WAR ∪ WAW). Pure: isl in, isl out.

isl's dataflow analysis can explode (coupled subscripts over several iterators under modulo
guards: minutes for one scop), so it runs under an operation budget (`poly/budget.py`, step
"dependences").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import islpy as isl

from polyflow.poly import isl_helpers as ih
from polyflow.poly.budget import isl_budget, step_budget

from .model import Scop


@dataclass(frozen=True)
class Dependences:
    """The dependences of a scop as relations `{ S1[i] -> S2[j] }` (source → target)."""

    raw: isl.UnionMap
    war: isl.UnionMap
    waw: isl.UnionMap
    live_in: isl.UnionMap  # reads of values written before the scop: { S[i] -> A[...] }

    @cached_property
    def all(self) -> isl.UnionMap:
        """RAW ∪ WAR ∪ WAW (computed once: coalescing them is not free)."""
        return coalesce_dependences(self.raw.union(self.war).union(self.waw))

    @property
    def validity(self) -> isl.UnionMap:
        """What every schedule must respect: all three kinds."""
        return self.all

    @property
    def proximity(self) -> isl.UnionMap:
        """What a schedule should keep close (Pluto: all dependences)."""
        return self.all

    @property
    def coincidence(self) -> isl.UnionMap:
        """What a parallel dimension must not carry: all dependences."""
        return self.all


# Past this, a coefficient in a dependence that has existentially quantified variables (modulo
# conditions) marks one isl's scheduler and legality checks cannot handle in bounded time: they
# spend it in arithmetic its operation count does not see (a random program whose linearized
# subscripts left coefficients in the millions took 90 s to schedule and 16 s per check;
# PolyBench's and the random programs' others stay below 30).
MAX_QUANTIFIED_COEFFICIENT = 1024


def largest_quantified_coefficient(relation: isl.UnionMap) -> int:
    """The largest absolute coefficient of a variable (input, output or existentially
    quantified) in the constraints of `relation`'s basic maps that quantify some variable."""
    largest = 0
    for part in ih.maps_of(relation):
        basics: list[isl.BasicMap] = []
        part.foreach_basic_map(basics.append)
        for basic in basics:
            if basic.dim(isl.dim_type.div) == 0:
                continue
            constraints: list[isl.Constraint] = []
            basic.foreach_constraint(constraints.append)
            for constraint in constraints:
                for kind in (isl.dim_type.in_, isl.dim_type.out, isl.dim_type.div):
                    for k in range(basic.dim(kind)):
                        value = abs(constraint.get_coefficient_val(kind, k).to_python())
                        largest = max(largest, value)
    return largest


def compute_dependences(
    scop: Scop, *, max_operations: int = step_budget("dependences")
) -> Dependences:
    """RAW, WAR and WAW of `scop` under its initial (source-order) schedule, value-based;
    `BudgetExhausted` past `max_operations` isl operations (0: unbounded)."""
    reads = scop.accesses("read")
    writes = scop.accesses("write")
    order = ih.schedule_tree(scop.domain, scop.initial_schedule)
    with isl_budget(reads.get_ctx(), "dependences", max_operations):
        raw, live_in = ih.flow(reads, order, must_source=writes)
        waw, _ = ih.flow(writes, order, must_source=writes)
        # A write kills the reads before it: each write depends on the reads since the previous
        # write (that write orders the earlier ones through WAW).
        war, _ = ih.flow(writes, order, may_source=reads, kill=writes)
        return Dependences(
            coalesce_dependences(raw),
            coalesce_dependences(war),
            coalesce_dependences(waw),
            live_in.coalesce(),
        )


def _as_map(schedule: isl.Schedule | isl.UnionMap | None, scop: Scop) -> isl.UnionMap:
    return ih.schedule_map(scop.initial_schedule if schedule is None else schedule)


def carried(
    scop: Scop,
    deps: isl.UnionMap,
    schedule_dim: int,
    *,
    schedule: isl.Schedule | isl.UnionMap | None = None,
) -> bool:
    """Whether dimension `schedule_dim` of `schedule` (default: the scop's initial schedule,
    flattened and padded) carries one of `deps`: source and target agree on the earlier
    dimensions and differ on this one."""
    deltas = ih.time_deltas(deps, _as_map(schedule, scop))
    return deltas is not None and not ih.carried_at(deltas, schedule_dim).is_empty()


def is_parallel(
    scop: Scop,
    deps: Dependences | isl.UnionMap,
    schedule_dim: int,
    *,
    schedule: isl.Schedule | isl.UnionMap | None = None,
) -> bool:
    """Whether the loop at `schedule_dim` of `schedule` may run its iterations in parallel:
    it carries no dependence (given the outer dimensions run in order)."""
    union = deps.all if isinstance(deps, Dependences) else deps
    return not carried(scop, union, schedule_dim, schedule=schedule)


def is_permutable(
    scop: Scop,
    deps: Dependences | isl.UnionMap,
    schedule_dims: Sequence[int],
    *,
    schedule: isl.Schedule | isl.UnionMap | None = None,
) -> bool:
    """Whether the consecutive dimensions `schedule_dims` of `schedule` form a permutable band:
    every dependence not carried before the band goes forward (or stays) on each of them."""
    if not schedule_dims:
        return True
    union = deps.all if isinstance(deps, Dependences) else deps
    deltas = ih.time_deltas(union, _as_map(schedule, scop))
    if deltas is None:
        return True
    inside = ih.equal_before(deltas, schedule_dims[0])
    if inside.is_empty():
        return True
    for dim in schedule_dims:
        low = ih.min_at(inside, dim)  # None: unbounded below
        if low is None or low < 0:
            return False
    return True


def respects(
    scop: Scop, deps: Dependences | isl.UnionMap, schedule: isl.Schedule | isl.UnionMap
) -> bool:
    """Whether `schedule` runs every dependence's source strictly before its target."""
    union = deps.all if isinstance(deps, Dependences) else deps
    order = _as_map(schedule, scop)
    return bool(union.is_subset(order.lex_lt_union_map(order)))


__all__ = [
    "Dependences",
    "carried",
    "compute_dependences",
    "is_parallel",
    "is_permutable",
    "respects",
]


def coalesce_dependences(relation: isl.UnionMap) -> isl.UnionMap:
    """`relation` with each map's pieces merged (`coalesce`) unless merging made a piece with
    more constraints than any piece it replaced. The scheduler's cost grows with the largest
    piece (Farkas multipliers are eliminated per piece), and that elimination counts no isl
    operations: heat-3d with constant extents, whose seven neighbour distances merge exactly
    into one octahedron of 27 constraints (the pieces have 12), took minutes, past any budget.
    Merging that does not grow a piece is kept: the scheduler sees what it always saw."""
    out = isl.UnionMap.empty(relation.get_space())
    for piecewise in ih.maps_of(relation):
        merged = piecewise.coalesce()
        if _largest_piece(merged) > _largest_piece(piecewise):
            merged = piecewise
        out = out.union(isl.UnionMap.from_map(merged))
    return out


def _largest_piece(relation: isl.Map) -> int:
    return max((piece.n_constraint() for piece in relation.get_basic_maps()), default=0)
