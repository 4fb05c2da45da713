"""Band order for the GPU: in every permutable band, the coincident (parallel) members first, so
that the loops the GPU mapping turns into blocks and threads are the outermost ones and nest
perfectly (gemm's band (i, k, j) becomes (i, j, k): i and j map to the grid, k runs in each
thread). Reordering the members of a permutable band keeps the schedule legal.

The isl side only (no MLIR); used by the polyhedral stage for `target="cuda"`, where it runs
instead of tiling for caches (the mapping strip-mines the parallel loops into blocks itself).
"""

from __future__ import annotations

import islpy as isl

from .tiling import _permute_band


def coincident_first(schedule: isl.Schedule) -> isl.Schedule:
    """`schedule` with the members of each permutable band reordered: coincident members first,
    each group in its original order. Bands that are not permutable are left alone."""

    def reorder(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if node.get_type() != isl.schedule_node_type.band:
            return node
        members = node.band_n_member()
        if members < 2 or not node.band_get_permutable():
            return node
        flags = [bool(node.band_member_get_coincident(pos)) for pos in range(members)]
        order = [pos for pos in range(members) if flags[pos]]
        order += [pos for pos in range(members) if not flags[pos]]
        if order == list(range(members)):
            return node
        return _permute_band(node, order)

    return schedule.map_schedule_node_bottom_up(reorder)
