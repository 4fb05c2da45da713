"""Index-set splitting: a loop whose carried dependences all start or end at one iteration (a
function of the enclosing loops) is cut into the iterations before that one, that one, and the
iterations after it. The execution order is unchanged; each piece carries none of those
dependences, so it can run in parallel or vectorize.

floyd-warshall is the case: `path[i][j] = min(path[i][j], path[i][k] + path[k][j])`. Row `k`
is written only at `i == k`, so the `i` loop carries dependences from and to that one iteration;
`path[i][k]` is written only at `j == k`, likewise for `j`. Split at `k` both ways, the `i`
pieces run in parallel and the `j` pieces vectorize (LLVM's runtime alias checks now pass).

`split_index_sets(band, validity, *, parallel)` is called by tiling on the bands it leaves
untiled (tiled bands keep their tiles: lu's and cholesky's loops would split here too). A member
is split when it carries a dependence and either (with `parallel`) no enclosing loop runs in
parallel (the pieces give the outermost parallel loop) or it is the innermost loop (the pieces
vectorize). The band is split before that member and a sequence [before, at, after] goes above
the rest; each filter holds the instances whose value of the member lies before, at or after
the pinned iteration (instances whose enclosing loops have no pinned iteration go first: they
carry nothing there). At most `MAX_SPLITS_PER_NEST` splits nest (3 copies of the body each),
within `SPLIT_MAX_OPERATIONS` isl operations; anything else comes back unchanged.
"""

from __future__ import annotations

import islpy as isl

from polyflow.poly.budget import BudgetExhausted, isl_budget, step_budget
from polyflow.poly.isl_helpers import carries_dependence, maps_of

# Splits on one path from the root: floyd-warshall needs two (i, then j); 9 copies of the body.
MAX_SPLITS_PER_NEST = 2
# isl operations the whole walk may take by default (poly/budget.py; tiling passes the options' own);
# past it the schedule comes back unchanged.
SPLIT_MAX_OPERATIONS = step_budget("index splitting")


def _time_through(node: isl.ScheduleNode, member: int) -> isl.UnionMap:
    """Each instance under band `node` → its outer loops' values and the band's members up to
    `member` (included)."""
    time = node.get_prefix_schedule_union_map()
    partial = node.band_get_partial_schedule()
    for pos in range(member + 1):
        time = time.flat_range_product(isl.UnionMap.from_union_pw_aff(partial.get_at(pos)))
    return time


def _carried_pairs(n_dims: int) -> isl.Map:
    """Pairs of points of an `n_dims`-dimensional time space equal in all but the last
    dimension and different in it."""
    a = [f"a{k}" for k in range(n_dims)]
    b = [f"b{k}" for k in range(n_dims)]
    equal = [f"{x} = {y}" for x, y in zip(a[:-1], b[:-1], strict=True)]
    different = f"{a[-1]} != {b[-1]}"
    return isl.Map(
        f"{{ [{', '.join(a)}] -> [{', '.join(b)}] : {' and '.join([*equal, different])} }}"
    )


def _as_function(points: isl.Set) -> isl.Map:
    """`points` of a time space as a relation from all but the last dimension to the last."""
    n_outer = points.dim(isl.dim_type.set) - 1
    return isl.Map.from_range(points).move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0, n_outer)


def _pinned_iterations(carried: isl.Map) -> isl.Set | None:
    """The points (outer values, iteration) where each dependence of `carried` starts or ends,
    when every dependence has one end at a single iteration per outer values and those
    iterations are one function of the outer values; None otherwise."""
    pinned: isl.Set | None = None
    for piece in carried.get_basic_maps():
        for end in (isl.Set.from_basic_set(piece.domain()), isl.Set.from_basic_set(piece.range())):
            if _as_function(end).is_single_valued():
                pinned = end if pinned is None else pinned.union(end)
                break
        else:
            return None
    if pinned is None or not _as_function(pinned.coalesce()).is_single_valued():
        return None
    return pinned.coalesce()


def _pieces(pinned: isl.Set) -> list[isl.Set]:
    """The time points before, at and after the pinned iteration of their outer values (those
    with no pinned iteration count as before)."""
    n_dims = pinned.dim(isl.dim_type.set)
    outer = ", ".join(f"o{k}" for k in range(n_dims - 1))
    sep = ", " if outer else ""
    below = isl.Map(f"{{ [{outer}{sep}x] -> [{outer}{sep}y] : x < y }}")
    above = isl.Map(f"{{ [{outer}{sep}x] -> [{outer}{sep}y] : x > y }}")
    has_pin = pinned.project_out(isl.dim_type.set, n_dims - 1, 1).add_dims(isl.dim_type.set, 1)
    unpinned = isl.Set.universe(pinned.get_space()).subtract(has_pin)
    before = below.intersect_range(pinned).domain().union(unpinned).coalesce()
    after = above.intersect_range(pinned).domain().coalesce()
    return [before, pinned, after]


def _split_filters(
    node: isl.ScheduleNode, member: int, validity: isl.UnionMap
) -> list[isl.UnionSet] | None:
    """The instances under band `node` before, at and after the iteration of `member` that all
    its carried dependences start or end at (the empty ones left out); None when there is no
    such iteration or the pieces would not be free of those dependences."""
    instances = node.get_domain()
    time = _time_through(node, member).intersect_domain(instances)
    deps = validity.intersect_domain(instances).intersect_range(instances)
    n_dims = node.get_schedule_depth() + member + 1
    carried_maps = maps_of(deps.apply_domain(time).apply_range(time))
    if len(carried_maps) != 1:
        return None
    carried = carried_maps[0].intersect(_carried_pairs(n_dims))
    if carried.is_empty():
        return None
    pinned = _pinned_iterations(carried)
    if pinned is None:
        return None
    filters: list[isl.UnionSet] = []
    for piece in _pieces(pinned):
        instances_in = time.intersect_range(isl.UnionSet.from_set(piece)).domain().coalesce()
        if instances_in.is_empty():
            continue
        inside = carried.intersect_domain(piece).intersect_range(piece)
        if not inside.is_empty():
            return None
        filters.append(instances_in)
    covered = filters[0]
    for more in filters[1:]:
        if not covered.intersect(more).is_empty():
            return None
        covered = covered.union(more)
    if len(filters) < 2 or not covered.is_equal(instances):
        return None
    return filters


def _is_innermost(node: isl.ScheduleNode, member: int) -> bool:
    return (
        member == node.band_n_member() - 1
        and node.n_children() == 1
        and node.child(0).get_type() == isl.schedule_node_type.leaf
    )


def _parallel_outside(node: isl.ScheduleNode, validity: isl.UnionMap) -> bool:
    """Whether a band member above `node` carries no dependence (runs in parallel)."""
    while node.has_parent():
        node = node.parent()
        if node.get_type() == isl.schedule_node_type.band and not all(
            carries_dependence(node, member, validity) for member in range(node.band_n_member())
        ):
            return True
    return False


def _split_band(
    band: isl.ScheduleNode, validity: isl.UnionMap, *, parallel: bool, splits_left: int
) -> isl.ScheduleNode:
    """`band` with its first member worth splitting split, and the pieces' bands in turn;
    returns the node at `band`'s position."""
    outside: bool | None = None  # whether a loop above the member runs in parallel, when asked
    for member in range(band.band_n_member()):
        if not carries_dependence(band, member, validity):
            outside = True
            continue
        if not _is_innermost(band, member):
            if not parallel:
                continue
            if outside is None:
                outside = _parallel_outside(band, validity)
            if outside:
                continue
        filters = _split_filters(band, member, validity)
        if filters is None:
            continue
        outer = band.band_split(member) if member > 0 else None
        target = outer.child(0) if outer is not None else band
        listed = isl.UnionSetList.alloc(band.get_ctx(), len(filters))
        for one in filters:
            listed = listed.add(one)
        sequence = target.insert_sequence(listed)
        if splits_left > 1:
            for pos in range(sequence.n_children()):
                piece = sequence.child(pos).child(0)  # the band from the split member on
                piece = _split_band(piece, validity, parallel=parallel, splits_left=splits_left - 1)
                sequence = piece.parent().parent()
        return sequence.parent() if outer is not None else sequence
    return band


def split_index_sets(
    band: isl.ScheduleNode,
    validity: isl.UnionMap,
    *,
    parallel: bool,
    max_operations: int = SPLIT_MAX_OPERATIONS,
) -> isl.ScheduleNode:
    """Band `band` with a member split where its carried dependences all meet one iteration
    (module docstring), and so on in the pieces; the same execution order. Returns the node at
    `band`'s position, `band` itself when nothing is split or the operation budget runs out."""
    try:
        with isl_budget(band.get_ctx(), "index splitting", max_operations):
            return _split_band(band, validity, parallel=parallel, splits_left=MAX_SPLITS_PER_NEST)
    except (BudgetExhausted, isl.Error):
        return band


__all__ = ["MAX_SPLITS_PER_NEST", "split_index_sets"]
