"""Fusing independent loop nests that stream the same large array in the same order, so it is
read once instead of once per nest.

isl schedules statements with no dependence between them as separate components (a `set`
node), each in its own loops, whatever they read. bicg's two updates, `s[j] += r[i] * A[i][j]`
and `q[i] += A[i][j] * p[j]`, come out as two (i, j) nests over the same 32 MB matrix: memory
bound, each nest pays for reading A (LARGE, 1 thread: 0.83x gcc, which runs them fused).

`fuse_shared_streams(schedule, scop, *, min_bytes)` replaces a `set` node whose children are
each a band of the same depth, all reading one array of at least `min_bytes` at the same point
of their band's iteration space (the same element for the same loop values, once the loops of
each band are put in a suitable order: permutable bands may take any), by one band over
all of them (their partial schedules united; permutable and coincident where every one was)
above the set, the children's bands removed. Any interleaving of a set's children is legal
(no dependence joins them), so the result is too.

With `validity` (the dependences), a `sequence` node whose children are each a band of two
members, all reading one large array in the same slices along their outer member (atax's
`tmp[i] = A[i][:]·x` then `y += A[i][:]·tmp[i]`: row i of A at outer value i), gets those outer
members fused into one loop above it (each band keeps its inner member), when every dependence
still goes forward: row i is read from memory once and again from the cache. That fusion can
cost the first nest its parallel loop (atax's y carries a dependence along i); the nests are
memory bound, where halving the traffic pays more than a second core reading the array twice
(LARGE, 1 thread: atax 0.81x -> 1.05x gcc, 2 threads 1.16x -> 1.07x). Other trees come back
unchanged.
"""

from __future__ import annotations

from itertools import permutations

import islpy as isl

from polyflow.poly.isl_helpers import carries_dependence, maps_of

from .model import Scop
from .scheduler import check_schedule_legal

# Arrays smaller than this stay in the last-level cache between the nests: no gain in fusing.
MIN_STREAM_BYTES = 8 << 20
# Nests of at most this many loops are matched (trying every order of their loops), and sets
# of at most this many nests.
MAX_DEPTH = 3
MAX_NESTS = 4


def _band_below(filter_node: isl.ScheduleNode) -> isl.ScheduleNode | None:
    child = filter_node.child(0)
    return child if child.get_type() == isl.schedule_node_type.band else None


def _child_bands(node: isl.ScheduleNode) -> list[isl.ScheduleNode] | None:
    """The band under each child filter of `node`, when every child has one and there are at
    most `MAX_NESTS`; None otherwise."""
    found = [_band_below(node.child(pos)) for pos in range(node.n_children())]
    bands = [band for band in found if band is not None]
    return bands if len(bands) == len(found) and len(bands) <= MAX_NESTS else None


def _permuted(partial: isl.MultiUnionPwAff, order: tuple[int, ...]) -> isl.MultiUnionPwAff:
    out = partial
    for pos, member in enumerate(order):
        out = out.set_at(pos, partial.get_at(member))
    return out


def _streams(
    partial: isl.MultiUnionPwAff, domain: isl.UnionSet, reads: isl.UnionMap
) -> dict[str, isl.Map]:
    """Each array the statements of `domain` read → which element they read at each point of
    the loops of `partial` (only where that is a function of the loops' values)."""
    time = isl.UnionMap.from_multi_union_pw_aff(partial).intersect_domain(domain)
    out: dict[str, isl.Map] = {}
    for relation in maps_of(time.reverse().apply_range(reads.intersect_domain(domain))):
        name = relation.get_tuple_name(isl.dim_type.out)
        out[name] = out[name].union(relation) if name in out else relation
    return {name: m.coalesce() for name, m in out.items() if m.is_single_valued()}


def _large_arrays(scop: Scop, min_bytes: int) -> set[str]:
    large = set()
    for array, shape in scop.arrays.items():
        elements = 1
        for extent in shape:
            elements *= extent
        if all(extent >= 0 for extent in shape) and 8 * elements >= min_bytes:
            large.add(array)
    return large


def _matching_orders(
    bands: list[isl.ScheduleNode], reads: isl.UnionMap, large: set[str]
) -> list[tuple[int, ...]] | None:
    """For each band, an order of its members under which every band reads some large array at
    the same points as the first band does (the first keeps its order); None if there is none."""
    first = _streams(bands[0].band_get_partial_schedule(), bands[0].get_domain(), reads)
    wanted = {name: m for name, m in first.items() if name in large}
    if not wanted:
        return None
    depth = bands[0].band_n_member()
    orders: list[tuple[int, ...]] = [tuple(range(depth))]
    for band in bands[1:]:
        partial, domain = band.band_get_partial_schedule(), band.get_domain()
        for order in permutations(range(depth)):
            streams = _streams(_permuted(partial, order), domain, reads)
            if any(name in streams and streams[name].is_equal(m) for name, m in wanted.items()):
                orders.append(order)
                break
        else:
            return None
    return orders


def _fused(node: isl.ScheduleNode, scop: Scop, min_bytes: int) -> isl.ScheduleNode:
    """The `set` node `node` with its children's bands fused above it when the module docstring
    says so; the node at `node`'s position."""
    bands = _child_bands(node)
    if bands is None:
        return node
    depth = bands[0].band_n_member()
    if any(band.band_n_member() != depth for band in bands) or depth > MAX_DEPTH:
        return node
    large = _large_arrays(scop, min_bytes)
    orders = _matching_orders(bands, scop.accesses("read"), large) if large else None
    if orders is None:
        return node
    partial: isl.MultiUnionPwAff | None = None
    for band, order in zip(bands, orders, strict=True):
        mine = _permuted(band.band_get_partial_schedule(), order)
        partial = mine if partial is None else partial.union_add(mine)
    assert partial is not None
    permutable = all(band.band_get_permutable() for band in bands)
    coincident = [
        all(
            band.band_member_get_coincident(order[pos])
            for band, order in zip(bands, orders, strict=True)
        )
        for pos in range(depth)
    ]
    for pos in range(node.n_children()):
        node = node.child(pos).child(0).delete().parent().parent()
    fused = node.insert_partial_schedule(partial).band_set_permutable(int(permutable))
    for member, flag in enumerate(coincident):
        fused = fused.band_member_set_coincident(member, int(flag))
    return fused


def _slices(
    member: isl.UnionPwAff, domain: isl.UnionSet, reads: isl.UnionMap, large: set[str]
) -> dict[str, isl.Map]:
    """Each large array the statements of `domain` read → the elements they read at each value
    of the loop `member`."""
    time = isl.UnionMap.from_union_pw_aff(member).intersect_domain(domain)
    out: dict[str, isl.Map] = {}
    for relation in maps_of(time.reverse().apply_range(reads.intersect_domain(domain))):
        name = relation.get_tuple_name(isl.dim_type.out)
        if name in large:
            out[name] = out[name].union(relation) if name in out else relation
    return {name: m.coalesce() for name, m in out.items()}


def _outer_orders(
    bands: list[isl.ScheduleNode], reads: isl.UnionMap, large: set[str]
) -> list[tuple[int, ...]] | None:
    """For each two-member band, an order of its members under which its outer member reads
    some large array in the same slices as the first band's outer member; None if none."""
    first = bands[0].band_get_partial_schedule()
    wanted = _slices(first.get_at(0), bands[0].get_domain(), reads, large)
    if not wanted:
        return None
    orders: list[tuple[int, ...]] = [(0, 1)]
    for band in bands[1:]:
        partial, domain = band.band_get_partial_schedule(), band.get_domain()
        candidates = [(0, 1), (1, 0)] if band.band_get_permutable() else [(0, 1)]
        for order in candidates:
            slices = _slices(partial.get_at(order[0]), domain, reads, large)
            if any(name in slices and slices[name].is_equal(m) for name, m in wanted.items()):
                orders.append(order)
                break
        else:
            return None
    return orders


def _fused_outer(
    node: isl.ScheduleNode, scop: Scop, min_bytes: int, validity: isl.UnionMap
) -> isl.ScheduleNode:
    """The `sequence` node `node` with its children's outer loops fused above it when the
    module docstring says so and the result is legal; the node at `node`'s position."""
    bands = _child_bands(node)
    if bands is None or any(band.band_n_member() != 2 for band in bands):
        return node
    large = _large_arrays(scop, min_bytes)
    orders = _outer_orders(bands, scop.accesses("read"), large) if large else None
    if orders is None:
        return node
    original = node
    outer: isl.UnionPwAff | None = None
    for pos, order in enumerate(orders):
        band = node.child(pos).child(0)
        if order != (0, 1):  # a permutable band (`_outer_orders`): any order is legal
            partial = _permuted(band.band_get_partial_schedule(), order)
            band = band.delete().insert_partial_schedule(partial).band_set_permutable(1)
        member = band.band_get_partial_schedule().get_at(0)
        outer = member if outer is None else outer.union_add(member)
        node = band.band_split(1).delete().parent().parent()
    assert outer is not None
    fused = node.insert_partial_schedule(isl.MultiUnionPwAff.from_union_pw_aff(outer))
    if not check_schedule_legal(fused.get_schedule(), validity):
        return original
    parallel = not carries_dependence(fused, 0, validity)
    return fused.band_set_permutable(1).band_member_set_coincident(0, int(parallel))


def _walk(
    node: isl.ScheduleNode, scop: Scop, min_bytes: int, validity: isl.UnionMap | None
) -> isl.ScheduleNode:
    if node.get_type() == isl.schedule_node_type.set:
        node = _fused(node, scop, min_bytes)
    elif node.get_type() == isl.schedule_node_type.sequence and validity is not None:
        node = _fused_outer(node, scop, min_bytes, validity)
    for pos in range(node.n_children()):
        node = _walk(node.child(pos), scop, min_bytes, validity).parent()
    return node


def fuse_shared_streams(
    schedule: isl.Schedule,
    scop: Scop,
    *,
    min_bytes: int = MIN_STREAM_BYTES,
    validity: isl.UnionMap | None = None,
) -> isl.Schedule:
    """`schedule` with independent nests that read one large array in the same order fused,
    and with `validity`, consecutive nests' outer loops that read it in the same slices
    (module docstring)."""
    return _walk(schedule.get_root(), scop, min_bytes, validity).get_schedule()


__all__ = ["MIN_STREAM_BYTES", "fuse_shared_streams"]
