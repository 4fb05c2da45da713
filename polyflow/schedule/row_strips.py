"""Row strips across loop nests: consecutive nests of a sequence whose dependences never leave a
row, each a recurrence along its other loop (adi's forward and backward sweeps along each row,
or along each column), run strip by strip. A strip loop over `rows` rows at a time goes around all of them; inside it each
nest runs its other loop with the strip's rows unrolled in its body (unroll and jam), so a
recurrence along that loop gets `rows` independent chains side by side, every row's data is
walked contiguously, and what one nest writes is still in cache when the next reads it.

`strip_rows_across_nests(node, validity, *, rows)` does it at a sequence node and returns the
node at the same position, and the number of nests of each run it put in strips (none: the
node unchanged).

Why: adi's sweeps are chains of divisions, one row at a time in C's order (gcc runs them at the
divider's latency). isl distributes each sweep into a forward and a backward nest over all rows,
so p and q (8 MB each at LARGE) go through memory between them, and interleaving rows in a loop
inside each nest strode across rows for every access. adi LARGE, one thread: 7.3 s interleaved,
5.5 s in strips of 8 rows, 4.9 s once the strips' previous values stay in registers
(`lowering/carried_values.py`) and the outlined parallel loop keeps its arrays apart
(`lowering/alias_scopes.py`); gcc -O3 8.5 s. Two threads: 4.1 -> 2.7 s.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice, product

import islpy as isl

from polyflow.poly.isl_helpers import band_time, maps_of, sets_of

from .scheduler import check_schedule_legal

# Rows per strip; the rows' chains run side by side in one loop body (see the module docstring).
STRIP_ROWS = 8
# A nest is one band of this many members (the row and the loop along it) over its statements.
NEST_MEMBERS = 2
# Row choices tried per group of nests before giving up (each nest offers its band's members).
MAX_ROW_CHOICES = 64


@dataclass(frozen=True)
class _Nest:
    """A child of the sequence: its filter, its band's partial schedule, and the members that no
    dependence inside the nest crosses (candidate rows)."""

    filter: isl.UnionSet
    partial: isl.MultiUnionPwAff
    rows: tuple[int, ...]
    recurrence: bool


def strip_rows_across_nests(
    node: isl.ScheduleNode, validity: isl.UnionMap, *, rows: int = STRIP_ROWS
) -> tuple[isl.ScheduleNode, list[int]]:
    """Sequence `node` with each run of consecutive row-aligned nests (at least two, all of them
    recurrences) in strips of `rows` rows (see the module docstring), where the whole result is
    legal; the node at `node`'s position, and the number of nests of each run put in strips
    (none: `node` unchanged)."""
    if node.get_type() != isl.schedule_node_type.sequence or rows < 2:
        return node, []
    try:
        return _strip_runs(node, validity, rows)
    except isl.Error:  # a tree shape this did not foresee: the nests stay as they are
        return node, []


def _strip_runs(
    node: isl.ScheduleNode, validity: isl.UnionMap, rows: int
) -> tuple[isl.ScheduleNode, list[int]]:
    prefix = node.get_prefix_schedule_union_map()
    # dependences whose ends share every outer loop's value: the ones the sequence orders
    inner = _same_prefix(validity, prefix)
    if inner.is_empty():
        return node, []
    nests = [_nest(node.child(pos), inner) for pos in range(node.n_children())]
    runs = _aligned_runs(nests, inner)
    if not runs:
        return node, []
    original, depth = node, node.get_tree_depth()
    whole = len(runs) == 1 and len(runs[0][1]) == node.n_children()
    if not whole:
        node = _group_runs(node, runs)
    # each run, now one child of `node` (or `node` itself), from the last one back
    for index in reversed(range(len(runs))):
        first, chosen = runs[index]
        run = [nest for nest in nests[first : first + len(chosen)] if nest is not None]
        if whole:
            target = node
        else:
            target = node.child(_grouped_position(runs, index)).child(0)
        stripped = _strip(target, run, chosen, rows)
        if stripped is None:
            return original, []
        node = stripped.ancestor(stripped.get_tree_depth() - depth)
    if not check_schedule_legal(node.get_schedule(), validity):
        return original, []
    return node, [len(chosen) for _, chosen in runs]


def _group_runs(node: isl.ScheduleNode, runs: list[tuple[int, list[int]]]) -> isl.ScheduleNode:
    """Sequence `node` with the nests of each run under one filter of their own (a sequence of
    them below it), the other children as they were."""
    starts = {first: len(chosen) for first, chosen in runs}
    filters = isl.UnionSetList.alloc(node.get_ctx(), 0)
    kept: list[int] = []
    pos = 0
    while pos < node.n_children():
        length = starts.get(pos, 1)
        group = node.child(pos).filter_get_filter()
        for other in range(pos + 1, pos + length):
            group = group.union(node.child(other).filter_get_filter())
        if pos not in starts:
            kept.append(filters.n_union_set())
        filters = filters.add(group)
        pos += length
    node = node.insert_sequence(filters)
    # each child not in a run may have a sequence of one child below its filter: back into
    # `node` (isl may have left the child's own subtree there already)
    for position in reversed(kept):
        if node.child(position).child(0).get_type() == isl.schedule_node_type.sequence:
            node = node.sequence_splice_child(position)
    return node


def _grouped_position(runs: list[tuple[int, list[int]]], index: int) -> int:
    """The position of run `index` among the children of the sequence `_group_runs` made."""
    first = runs[index][0]
    return first - sum(len(chosen) - 1 for start, chosen in runs if start < first)


def _same_prefix(validity: isl.UnionMap, prefix: isl.UnionMap) -> isl.UnionMap:
    instances = prefix.domain()
    deps = validity.intersect_domain(instances).intersect_range(instances)
    equal = prefix.apply_range(prefix.reverse())  # instances with the same outer values
    return deps.intersect(equal)


def _nest(child: isl.ScheduleNode, inner: isl.UnionMap) -> _Nest | None:
    """The sequence's child `child` (a filter) as a nest, or None where it is not one: a
    permutable band of `NEST_MEMBERS` members right under the filter, no band below it."""
    band = child.child(0)
    if (
        band.get_type() != isl.schedule_node_type.band
        or band.band_n_member() != NEST_MEMBERS
        or not band.band_get_permutable()
        or _has_band_below(band.child(0))
    ):
        return None
    statements = child.filter_get_filter()
    own = inner.intersect_domain(statements).intersect_range(statements)
    partial = band.band_get_partial_schedule()
    candidates = tuple(
        member
        for member in range(NEST_MEMBERS)
        if _keeps_equal(own, partial.get_at(member), partial.get_at(member))
    )
    time = band_time(band)
    recurrence = not own.is_empty() and not _carried_nowhere(own, time, band)
    return _Nest(statements, partial, candidates, recurrence)


def _carried_nowhere(own: isl.UnionMap, time: isl.UnionMap, band: isl.ScheduleNode) -> bool:
    """Whether no dependence of `own` is carried by `band`'s members (all go between statements
    at the same point of the band: they are ordered below it)."""
    start = band.get_schedule_depth()
    for deltas in sets_of(own.apply_domain(time).apply_range(time).deltas()):
        moved = deltas
        for pos in range(start, start + NEST_MEMBERS):
            moved = moved.fix_dim_si(pos, 0)
        if not deltas.is_subset(moved):
            return False
    return True


def _keeps_equal(deps: isl.UnionMap, source: isl.UnionPwAff, sink: isl.UnionPwAff) -> bool:
    """Whether every dependence of `deps` between instances `source` and `sink` cover goes
    between equal values of them."""
    if deps.is_empty():
        return True
    values = deps.apply_domain(isl.UnionMap.from_union_pw_aff(source)).apply_range(
        isl.UnionMap.from_union_pw_aff(sink)
    )
    for relation in maps_of(values):
        if not relation.is_subset(isl.Map.identity(relation.get_space())):
            return False
    return True


def _aligned_runs(nests: list[_Nest | None], inner: isl.UnionMap) -> list[tuple[int, list[int]]]:
    """The runs of consecutive nests (at least two, all recurrences) whose dependences all go
    between equal rows, longest first from the left: each run's first position and the row
    member chosen in each of its nests."""
    runs: list[tuple[int, list[int]]] = []
    first = 0
    while first < len(nests) - 1:
        found = None
        for last in range(len(nests) - 1, first, -1):
            run = nests[first : last + 1]
            present = [nest for nest in run if nest is not None and nest.rows]
            # only recurrences: a nest without one gains nothing from its rows jammed and may
            # lose its vector loop along them (gemver's update of A, strips over its columns:
            # 0.7x)
            if len(present) < len(run) or not all(nest.recurrence for nest in present):
                continue
            chosen = _aligned_rows(present, inner)
            if chosen is not None:
                found = chosen
                break
        if found is None:
            first += 1
        else:
            runs.append((first, found))
            first += len(found)
    return runs


def _aligned_rows(run: list[_Nest], inner: isl.UnionMap) -> list[int] | None:
    """A row member per nest of `run` such that every dependence between two of its nests goes
    between equal rows; None where no choice does."""
    for choice in islice(product(*(nest.rows for nest in run)), MAX_ROW_CHOICES):
        aligned = True
        for a, b in ((a, b) for a in range(len(run)) for b in range(len(run)) if a != b):
            deps = inner.intersect_domain(run[a].filter).intersect_range(run[b].filter)
            if not _keeps_equal(
                deps, run[a].partial.get_at(choice[a]), run[b].partial.get_at(choice[b])
            ):
                aligned = False
                break
        if aligned:
            return list(choice)
    return None


def _strip(
    node: isl.ScheduleNode, run: list[_Nest], chosen: list[int], rows: int
) -> isl.ScheduleNode | None:
    """Sequence `node` of the nests `run` (rows `chosen`) in strips: the rows of full strips
    under a strip loop with each nest's row loop innermost and unrolled, the others after them
    as they were; a node of the new tree, None where no row has a full strip."""
    ctx = node.get_ctx()
    group = run[0].filter
    row = run[0].partial.get_at(chosen[0])
    for nest, member in zip(run[1:], chosen[1:], strict=True):
        group = group.union(nest.filter)
        row = row.union_add(nest.partial.get_at(member))
    # the instances that reach the run (filters are statement names, no bounds)
    group = group.intersect(node.get_domain())
    jammed = _in_full_strips(row, group, rows)
    if jammed.is_empty():
        return None
    # the rows past the last full strip run after the strips, as they were
    if not group.subtract(jammed).is_empty():
        split = isl.UnionSetList.alloc(ctx, 2).add(jammed).add(group.subtract(jammed))
        node = node.insert_sequence(split).child(0).child(0)
    if node.get_type() != isl.schedule_node_type.sequence:
        return None
    for pos in range(node.n_children()):
        band = node.child(pos).child(0)
        found = _member_of(band, row)
        if found is None:
            return None
        node = _row_innermost(band, found).parent().parent()
    size = isl.Val.int_from_si(ctx, rows)
    strip = row.scale_down_val(size).floor().scale_val(size)
    node = node.insert_partial_schedule(isl.MultiUnionPwAff.from_union_pw_aff(strip))
    return node.band_set_permutable(1).band_member_set_coincident(0, 1)


def _in_full_strips(row: isl.UnionPwAff, group: isl.UnionSet, rows: int) -> isl.UnionSet:
    """The instances of `group` whose row lies in a strip all of whose `rows` rows the same
    statement has (per statement, so that no unrolled row of a strip needs a guard)."""
    values = isl.UnionMap.from_union_pw_aff(row).intersect_domain(group)
    jammed = isl.UnionSet.empty(group.get_space())
    for relation in maps_of(values):
        taken = relation.range()
        full = taken
        for k in range(rows):
            strip_row = isl.Map(f"{{ [b] -> [c] : c = b - (b mod {rows}) + {k} }}")
            strip_row = strip_row.align_params(taken.get_space())
            full = full.intersect(taken.apply(strip_row.reverse()))
        jammed = jammed.union(isl.UnionSet.from_set(relation.intersect_range(full).domain()))
    return jammed


def _member_of(band: isl.ScheduleNode, row: isl.UnionPwAff) -> int | None:
    """The member of `band` equal to `row` on the band's instances."""
    if band.get_type() != isl.schedule_node_type.band:
        return None
    partial = band.band_get_partial_schedule()
    domain = band.get_domain()
    wanted = isl.UnionMap.from_union_pw_aff(row).intersect_domain(domain)
    for member in range(band.band_n_member()):
        values = isl.UnionMap.from_union_pw_aff(partial.get_at(member)).intersect_domain(domain)
        if values.is_equal(wanted):
            return member
    return None


def _row_innermost(band: isl.ScheduleNode, member: int) -> isl.ScheduleNode:
    """`band` with its row member last and unrolled, the others kept in order with their first
    and last iterations apart (a statement placed at the start of a row stays out of the
    unrolled loop's body)."""
    partial = band.band_get_partial_schedule()
    order = [pos for pos in range(band.band_n_member()) if pos != member] + [member]
    permuted = partial
    for pos, source in enumerate(order):
        permuted = permuted.set_at(pos, partial.get_at(source))
    band = band.delete().insert_partial_schedule(permuted).band_set_permutable(1)
    for pos in range(len(order) - 1):
        band = band.band_member_set_ast_loop_type(pos, isl.ast_loop_type.separate)
    return band.band_member_set_ast_loop_type(len(order) - 1, isl.ast_loop_type.unroll)


def _has_band_below(node: isl.ScheduleNode) -> bool:
    if node.get_type() == isl.schedule_node_type.band:
        return True
    return any(_has_band_below(node.child(pos)) for pos in range(node.n_children()))


def is_row_strip(child: isl.ScheduleNode) -> bool:
    """Whether `child` of a sequence holds a run `strip_rows_across_nests` put in strips: its
    filter over a strip band, or over a sequence of such a band and the rows left over."""
    if child.get_type() != isl.schedule_node_type.filter:
        return False
    below = _only_child(child)
    if below is not None and below.get_type() == isl.schedule_node_type.sequence:
        below = _only_child(below.child(0))
    if (
        below is None
        or below.get_type() != isl.schedule_node_type.band
        or below.band_n_member() != 1
    ):
        return False
    runs = _only_child(below)
    if runs is None or runs.get_type() != isl.schedule_node_type.sequence:
        return False
    first = _only_child(runs.child(0))
    return first is not None and _unrolled_innermost(first)


def _only_child(node: isl.ScheduleNode) -> isl.ScheduleNode | None:
    return node.child(0) if node.n_children() > 0 else None


def _unrolled_innermost(band: isl.ScheduleNode) -> bool:
    if band.get_type() != isl.schedule_node_type.band:
        return False
    last = band.band_n_member() - 1
    return bool(band.band_member_get_ast_loop_type(last) == isl.ast_loop_type.unroll)
