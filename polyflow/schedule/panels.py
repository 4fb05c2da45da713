"""Blocked factorizations' tile order: under a sequential outer tile loop, the tiles that other
tiles of the same step depend on run first, and the rest, which then depend on none of each
other, run as parallel tile loops (the right-looking blocked LU and Cholesky order).

`split_dependence_sources(band, validity)` takes a permutable tile band whose first member (the
step, k's tiles in lu and cholesky) carries a dependence and whose second does too (so the band
has no parallel loop below the step). At each step, the *source* tiles are those with a
dependence to another tile of the same step (the diagonal block and the panels); the others
(the trailing update) have none by construction, so running the sources first keeps every
dependence forward and leaves the others free to run in parallel. The band is split after its
first member, a sequence [sources, others] goes below it, the others' band gets all its members
coincident and `PARALLEL_TILES_MARK` (codegen tags its first loop for the parallelizer, which
cannot see through tile bounds), and the sources are split again the same way (in lu: the
diagonal block, then both panels in parallel), up to `MAX_SPLIT_LEVELS` splits in all, within
`SPLIT_MAX_OPERATIONS` isl operations.

Only where it pays: the others must hold at least `MIN_PARALLEL_SHARE` times as many tiles as
the sources, counted with every parameter at `SAMPLE_PARAMETER` (a band whose tiles nearly all
feed the same step, a chain, would only lose its order). Other bands come back unchanged.
"""

from __future__ import annotations

import islpy as isl

from polyflow.ir.names import PARALLEL_TILES_MARK
from polyflow.poly.budget import BudgetExhausted, isl_budget, step_budget
from polyflow.poly.isl_helpers import band_time, carries_dependence, sets_of

# Splits in all, the first included (lu and cholesky need two: step, then diagonal vs panels).
MAX_SPLIT_LEVELS = 2
# isl operations the whole split may take by default (poly/budget.py; tiling passes the options' own;
# past it: the band is left unchanged). A third level on lu's diagonal tiles ran out of 24 GB of
# memory without the limit.
SPLIT_MAX_OPERATIONS = step_budget("panels")
# Parameters' value when counting tiles to judge a split: 512 points, 16 tiles of 32 per loop.
SAMPLE_PARAMETER = 512
# The parallel tiles must outnumber the sequential ones this many times.
MIN_PARALLEL_SHARE = 2


def _same_step(n_outer: int, n_dims: int) -> isl.Map:
    """Pairs of distinct points of an `n_dims`-dimensional time space equal in the first
    `n_outer` dimensions."""
    a = [f"a{k}" for k in range(n_dims)]
    b = [f"b{k}" for k in range(n_dims)]
    equal = " and ".join(f"{x} = {y}" for x, y in zip(a[:n_outer], b[:n_outer], strict=True))
    pairs = isl.Map(f"{{ [{', '.join(a)}] -> [{', '.join(b)}] : {equal or '1 = 1'} }}")
    return pairs.subtract(isl.Map(f"{{ [{', '.join(a)}] -> [{', '.join(a)}] }}"))


def _count_at_sample(tiles: isl.UnionSet) -> int | None:
    """How many points `tiles` (in one unnamed space) has with every parameter at
    `SAMPLE_PARAMETER`; None when that cannot be told."""
    sets = sets_of(tiles)
    if len(sets) != 1:
        return None
    one = sets[0]
    for pos in range(one.dim(isl.dim_type.param)):
        one = one.fix_val(
            isl.dim_type.param, pos, isl.Val.int_from_si(one.get_ctx(), SAMPLE_PARAMETER)
        )
    if not one.is_bounded():
        return None
    count = one.count_val()
    return int(count.to_python()) if count.is_int() else None


def _split_once(band: isl.ScheduleNode, validity: isl.UnionMap, levels: int) -> isl.ScheduleNode:
    """`band` (below the step loops) with its instances split into [sources, others] as the
    module docstring says, recursively on the sources; unchanged when that does not pay."""
    schedule = band_time(band)
    instances = band.get_domain()
    deps = validity.intersect_domain(instances).intersect_range(instances)
    n_outer = band.get_schedule_depth()
    n_dims = n_outer + band.band_n_member()
    tile_deps = deps.apply_domain(schedule).apply_range(schedule)
    same = tile_deps.intersect(_same_step(n_outer, n_dims).to_union_map())
    if same.is_empty():
        return band  # no tile of a step waits for another: parallel already
    tiles = instances.apply(schedule)
    # Over-approximated without existentials (which tiles have a successor at all): fewer
    # sources is not what matters, simple filters are (each becomes AST conditions and every
    # loop's independence check works through them). Others stay free of same-step successors.
    sources = same.domain().remove_divs().intersect(tiles).coalesce()
    others = tiles.subtract(sources).coalesce()
    n_sources, n_others = _count_at_sample(sources), _count_at_sample(others)
    if n_sources is None or n_others is None or n_others < MIN_PARALLEL_SHARE * n_sources:
        return band
    # each filter from its own tiles: subtracting instance sets makes filters the AST cannot take
    filters = isl.UnionSetList.alloc(band.get_ctx(), 2)
    for tiles in (sources, others):
        filters = filters.add(schedule.intersect_range(tiles).domain().coalesce())
    sequence = band.insert_sequence(filters)
    parallel = sequence.child(1).child(0)
    for member in range(parallel.band_n_member()):
        parallel = parallel.band_member_set_coincident(member, 1)
    sequence = parallel.insert_mark(isl.Id(PARALLEL_TILES_MARK)).parent().parent()
    if levels > 1:
        sequence = _split_once(sequence.child(0).child(0), validity, levels - 1).parent().parent()
    return sequence


def split_dependence_sources(
    band: isl.ScheduleNode, validity: isl.UnionMap, *, max_operations: int = SPLIT_MAX_OPERATIONS
) -> isl.ScheduleNode:
    """The permutable tile band `band` with the tiles of each step of its first member ordered
    sources first and the others in parallel (module docstring); returns the node at `band`'s
    position, `band` itself when nothing changes."""
    n_member = band.band_n_member()
    if n_member < 2 or not all(carries_dependence(band, m, validity) for m in (0, 1)):
        return band
    try:
        with isl_budget(band.get_ctx(), "panels", max_operations):
            split = _split_once(band.band_split(1).child(0), validity, MAX_SPLIT_LEVELS)
    except (BudgetExhausted, isl.Error):
        return band
    if split.get_type() != isl.schedule_node_type.sequence:
        return band
    return split.parent()


__all__ = ["PARALLEL_TILES_MARK", "split_dependence_sources"]
