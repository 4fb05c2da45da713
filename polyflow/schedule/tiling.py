"""Tiling of a schedule tree: the outermost permutable bands become tile loops around point loops,
and a permutable point band is reordered so its innermost loop walks memory contiguously; the
result executes the same statement instances under the same dependences (permutable bands only).

`tile_schedule(schedule, *, options, element_bytes=8, accesses=None, validity=None,
array_shapes=None)`:
    * a band is tiled when it is permutable and has at least two members: tiling one loop alone
      (strip-mining) creates no reuse, and vectorization and OpenMP chunking need no help from
      here. Not when a statement under it is guarded by a divisibility condition (its domain has
      existential variables): see `_has_divisibility_guards`. Only the outermost such band on
      each path is tiled; bands below it stay inside the point loops as they are.
    * with `array_shapes` (the arrays' static sizes) and default sizes, a band is tiled only when
      tiles bring reuse the cache does not already give (`_tiling_pays`: some access reuses data
      along an outer member with more than half the L2 touched in between, or the same
      cache line with more than the L1: the target's caches, polyflow/target.py), or, with
      `options.parallel`, when tiling keeps a parallel loop outermost that reordering for
      locality would move inwards (`_tiling_keeps_parallel_loop_outside`), or when it holds a
      contraction for the micro-kernels (below). Matrix-vector nests
      and floyd-warshall's (i, j) band touch a row or two between reuses, and run 1.5-2x faster
      untiled. Sizes the user gives are always applied.
    * sizes: `options.tile_sizes` per band member, outermost first, the last one repeating; None
      gives `default_tile_size(element_bytes)` for every member. A member whose values over the
      band's instances lie in a known small range gets a size covering the range (its tile loop
      runs once and disappears from the generated code); a band with only such members is not
      tiled. With micro-kernels on (and no sizes given), a band holding a rectangular
      contraction `X[u][v] += A[u][r]·B[r][v]` gets sizes by role instead (many rows, 64
      columns, 1 KiB of depth: `Options.contraction_tile_*`), column tiles outermost; so does
      a convolution `out[n][k][h][w] += in[n][c][h + i][w + j]·wt[k][c][i][j]` (rows k,
      columns w, depth c), whose other members (n, h) are left whole.
    * `options.point_distribution` and `validity` given: a skewed band of several statements
      (a time-tiled stencil's step) whose innermost member can run once per statement
      (`_distribution_order`) gets its point band's innermost member split off and copied under
      one filter per statement (`_distribute_innermost_point_loop`), so each statement's vector
      loop is a plain sweep; with default sizes, that member's tiles are long
      (`stencil_row_tile`: 256 for f64 with a 1 MiB L2).
    * `options.interleave` and `validity` given: a permutable band (tiled: its point band) whose
      innermost member is a recurrence's loop (it carries a dependence, no loop below it, no
      accumulator, unless a float sum in C's order in a point tile) runs rows of the member
      around it side by side in a new innermost loop,
      skewed where the rows depend on each other (`interleave_recurrence`): the core overlaps
      their chains. A skewed band so treated gets row tiles twice as long.
    * `options.tile_second_level`: the tile band is tiled again by `SECOND_LEVEL_FACTOR` tiles per
      dimension (L2/L3 blocking), giving outer tiles → tiles → points.
    * `accesses` (each statement's access relations, one single-valued map per access, row-major
      arrays): the innermost member of each permutable point band (or of an untiled permutable
      band) becomes the one along which the fewest accesses stride through memory, which usually
      makes it the loop LLVM vectorizes. Skewed bands are left in isl's order.
    * `options.tile` false: nothing is tiled; the point-loop reordering still applies.
    * `options.parallel`, `options.wavefront` and `validity` given: a skewed tile band of 3 or
      more loops none of which is parallel (time-tiled stencils, seidel-2d) becomes a wavefront
      (`_wavefront`): blocks of `options.wavefront_block` tiles along each dimension but the first
      (single tiles along the second where the band's rows are whole: 3-D stencils), or the
      second-level tiles, run along
      the anti-diagonals B0 + B1 of their first two dimensions, and the second one, which then
      carries no dependence, is marked `WAVEFRONT_COLUMNS_MARK` for codegen. With `options.diamond`,
      where the band's first space member has a mirror (`diamond.py`: jacobi-2d, fdtd-2d) and
      its rows are tiled (not whole), the wavefront runs diamond tiles instead, which start
      together along that member.
    * `accesses` and `validity` given: when a tiled point band's innermost member walks memory
      contiguously for statements below a sequence under it whose own loops stride
      (gramschmidt's column updates), that member moves below those loops, if every dependence
      still goes forward (`_sink_strided_member`).

Generated loops (what codegen sees): tile loops are scaled (the tile loop's value is the first
point's coordinate, stepping by the tile size) and point loops are not shifted (they run over the
original coordinates, from the tile loop's value to that plus the size minus one), so the affine
code needs no divisions.

`describe_schedule(schedule)` prints the tree as block-style YAML for `--emit=schedule`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from itertools import permutations
from math import isqrt
from typing import TYPE_CHECKING

import islpy as isl

from polyflow.ir.names import WAVEFRONT_COLUMNS_MARK
from polyflow.poly.budget import step_budget
from polyflow.poly.isl_helpers import carries_dependence, maps_of, sets_of
from polyflow.target import GENERIC_CACHES, Caches, target_of

from .diamond import diamond_wavefront, mirrored_space_member
from .index_split import split_index_sets
from .panels import split_dependence_sources
from .row_strips import STRIP_ROWS, is_row_strip, strip_rows_across_nests
from .scheduler import check_schedule_legal

if TYPE_CHECKING:
    from polyflow.options import Options

# A tile of a contraction or stencil nest touches about three 2-D array blocks of side T (gemm:
# C, A and B); T is the largest power of two with 3·T²·element_bytes ≤ L1, so f64 and f32 get 32
# (PPCG's and Pluto's default as well), 1- and 2-byte types 64.
ARRAYS_PER_TILE = 3
MIN_TILE_SIZE = 8
MAX_TILE_SIZE = 256
# Second-level tiles are this many first-level tiles per dimension: 4×32 = 128, so a 3-array
# working set of 3·128²·8 B = 384 KiB fits a 512 KiB–2 MiB L2.
SECOND_LEVEL_FACTOR = 4
# Data a band may touch between two uses of a datum and still find it in cache: half the L2 of
# one core (`REUSE_L2_SHARE`; the target's, polyflow/target.py), the rest left to the streams
# that have no reuse. A band that touches less between uses gains nothing from tiles, and loses the
# long stride-1 loops that vectorization and hardware prefetching need (mvt, atax, bicg: 2-4x).
# Reuse of a cache line by a strided walk (a column, one line and often one page per element)
# is held to the L1 size instead: untiled, adi's column sweep (232 KB between reuses, 1000
# pages) ran at half the tiled speed.
REUSE_L2_SHARE = 0.5
# Tiles of a contraction nest that the micro-kernels take (micro_kernel.py): the kernel keeps a
# 6-row block of X in registers across the whole depth of the tile, and packs the tile's B
# block (depth × columns) once per tile, for all its rows. So: many rows (the packing is paid
# once for all of them; a multiple of 6), 64 columns (four register blocks of f32, eight of
# f64; enough column tiles to share among threads), and 1 KiB of depth (256 f32, 128 f64: the
# accumulators are loaded and stored once per that many multiply-adds, and the packed block,
# 64 KiB, stays in L2). Measured at 2 threads: TC matmul 1024³ 30 -> 19 ms, mlp2 11 -> 6 ms;
# PolyBench LARGE (f64) 2mm 8.6x -> 11x gcc, 3mm 8.9x -> 13x; a depth of 2 KiB lost 25-30% on
# f64, rows and columns at half or double these sizes were within the noise. (The sizes are
# `Options.contraction_tile_rows`, `_columns` and `_depth_bytes`, for a tuner to vary.)


# The rows of a time-tiled stencil's tile may take this share of the L2 (`stencil_row_tile`),
# and no row tile is longer than the maximum, nor than the maximum bytes per MiB of L2 (at
# least that many bytes with a smaller L2).
STENCIL_L2_SHARE = 8
MAX_STENCIL_ROW_TILE = 512
MAX_STENCIL_ROW_BYTES = 2048
# A recurrence's innermost loop gets independent chains from this many rows of the loop
# around it (`interleave_recurrence`; untiled bands), and a time-tiled one from every row of a
# point tile, whose row tiles are made this factor longer than the others. Measured at LARGE
# on one core: seidel-2d with 32x64x32 tiles 4.8 s, 32x32x32 5.2 s, 32x128x32 5.1 s.
INTERLEAVED_ROWS = 16
INTERLEAVED_ROWS_FACTOR = 2
# A skewed band deeper than this (heat-3d's: time and three space loops) gets tiles in its
# outer members only; each tile point runs the rest whole, a row of the innermost array
# dimension that stays unit-stride, vectorized and unskewed by tile edges. heat-3d at LARGE on
# one core, over gcc -O3: source order 1.0-1.1x, all four members tiled (8x8x16x128) 1.3x and
# a 36 s compile, the rows whole 1.5-1.9x in 3 s.
MAX_TILED_SKEWED_MEMBERS = 3
# The tiles of such a band are cubes (see `whole_row_tile`): 8 for heat-3d at LARGE (rows of
# 960 B, 2 arrays, an L2 of 512 KiB), which ran 1.6x gcc on one thread and 2.3x on two, against
# 1.4x and 1.8-1.9x with 16x16x16 or 8x16x16 (a wavefront of larger tiles has too few blocks to
# share out); a time tile of 32 took 3.5 s. Without known row sizes: `WHOLE_ROW_TILE`.
# With a 2 MiB L2 (Sapphire Rapids) the L2 rule would give 16, but 8 is as fast on one thread
# and faster on two (the wavefront has about 3 tiles of 16 to share out, 6 of 8): heat-3d
# LARGE, alternating runs against 16 x 16 x 16, one thread 0.984x the time (median of 7
# per-run ratios; 16 x 8 x 16 0.99x, 8 x 16 x 16 1.0x), two threads 0.904x (median of 9; 16 x
# 8 x 8 0.99x, 8 x 8 x 16 0.93x). Hence the cap at 8.
WHOLE_ROW_TILE = 8
MAX_WHOLE_ROW_TILE = 8
MIN_WHOLE_ROW_TILE = 4
# Rows of an in-order float sum unrolled and jammed into its vector loop (see `jam_rows`).
# LARGE, 1 thread, over gcc: 8 rows bicg 2.0x, mvt 8.7x, gemver 2.5x; 4 rows 1.7-1.9x, 7.0-7.9x,
# 2.2x.
JAMMED_ROWS = 8


def _power_of_two_at_most(count: int) -> int:
    """The largest power of two not above `count`; 1 when `count` is below 1."""
    return 1 << (count.bit_length() - 1) if count > 0 else 1


def default_tile_size(element_bytes: int, caches: Caches = GENERIC_CACHES) -> int:
    """The tile size used for every band member when `options.tile_sizes` is None."""
    elements = caches.l1_data // (ARRAYS_PER_TILE * max(element_bytes, 1))
    side = isqrt(elements)
    power = _power_of_two_at_most(side)
    return max(MIN_TILE_SIZE, min(power, MAX_TILE_SIZE))


@dataclass(frozen=True)
class TiledBand:
    """A band `tile_schedule` tiled: its tile sizes (outermost member first), whether it got a
    second level of tiles or a wavefront, and whether its sizes are a contraction's."""

    sizes: tuple[int, ...]
    second_level: bool
    wavefront: bool
    contraction: bool
    # the innermost point loop runs once per statement (`_distribute_innermost_point_loop`)
    distributed: bool = False
    # the innermost point loop walks independent chains (`interleave_recurrence`)
    interleaved: bool = False
    # a skewed band: the time loop of a stencil tiled with the space loops
    skewed: bool = False
    # its members past `sizes` are not tiled: each point of the tiles runs them whole (rows)
    whole_rows: bool = False
    # the side of the diamond tiles its wavefront runs (they start together along the first
    # space loop, `diamond.py`), 0 for none
    diamond: int = 0
    # not a tiled band but strips of `sizes[0]` rows run through this many loop nests
    # (`row_strips.py`), 0 for none
    row_strips: int = 0

    def describe(self) -> str:
        if self.row_strips:
            return (
                f"rows in strips of {self.sizes[0]} through {self.row_strips} loop nests "
                "(rows unrolled and jammed)"
            )
        extras = [
            name
            for name, on in (
                ("time tiled, skewed", self.skewed),
                ("innermost loop untiled (whole rows)", self.whole_rows),
                ("two levels", self.second_level),
                ("wavefront", self.wavefront and not self.diamond),
                (f"diamond tiles {self.diamond} wide, concurrent start", bool(self.diamond)),
                ("contraction sizes", self.contraction),
                ("innermost loop per statement", self.distributed),
                ("recurrences interleaved", self.interleaved),
            )
            if on
        ]
        return (
            "tiled "
            + "x".join(map(str, self.sizes))
            + (f" ({', '.join(extras)})" if extras else "")
        )


def band_tile_sizes(n_member: int, *, options: Options, element_bytes: int = 8) -> tuple[int, ...]:
    """The tile size of each member of an `n_member`-deep band, outermost first."""
    if options.tile_sizes:
        given = options.tile_sizes
        if any(size <= 0 for size in given):
            raise ValueError(f"tile sizes must be positive, got {given}")
        return tuple(given[min(pos, len(given) - 1)] for pos in range(n_member))
    caches = target_of(options.march, options.mtune).caches
    return (default_tile_size(element_bytes, caches),) * n_member


def tile_schedule(
    schedule: isl.Schedule,
    *,
    options: Options,
    element_bytes: int = 8,
    accesses: Sequence[isl.Map] | None = None,
    validity: isl.UnionMap | None = None,
    array_shapes: Mapping[str, tuple[int, ...]] | None = None,
    tiled: list[TiledBand] | None = None,
    float_arrays: frozenset[str] = frozenset(),
) -> isl.Schedule:
    """`schedule` with its outermost permutable bands tiled (see the module docstring); with
    `validity` (the dependences), wavefronts where `options.wavefront` asks for them. Each band
    tiled is appended to `tiled`, for the compile report."""
    ctx = schedule.get_ctx()
    strides = _AccessStrides(accesses) if accesses else None
    if strides is not None:
        strides.float_sums = float_arrays
        strides.sums_in_c_order = not options.reassociation
    with _isl_tile_options(ctx):
        root = _tile_subtree(
            schedule.get_root(),
            options=options,
            element_bytes=element_bytes,
            strides=strides,
            validity=validity,
            shapes=array_shapes,
            tiled=tiled if tiled is not None else [],
        )
    return root.get_schedule()


def describe_schedule(schedule: isl.Schedule) -> str:
    """The schedule tree as block-style YAML (isl's own format, one key per line)."""
    printer = isl.Printer.to_str(schedule.get_ctx()).set_yaml_style(isl.yaml_style.BLOCK)
    return printer.print_schedule(schedule).get_str()


# ----- the walk


def _tile_subtree(
    node: isl.ScheduleNode,
    *,
    options: Options,
    element_bytes: int,
    strides: _AccessStrides | None,
    validity: isl.UnionMap | None,
    shapes: Mapping[str, tuple[int, ...]] | None,
    tiled: list[TiledBand],
) -> isl.ScheduleNode:
    """`node`'s subtree with its outermost tileable bands tiled (each appended to `tiled`);
    returns the node at `node`'s position in the new tree."""
    if (
        options.row_strips
        and validity is not None
        and node.get_type() == isl.schedule_node_type.sequence
    ):
        node, runs = strip_rows_across_nests(node, validity)
        for nests in runs:
            tiled.append(TiledBand((STRIP_ROWS,), False, False, False, row_strips=nests))
        # the runs' nests are done (a sequence's other children are tiled below, as usual)
        if runs and node.get_type() != isl.schedule_node_type.sequence:
            return node
    if _is_permutable_band(node):
        whole_rows = _leaves_rows_whole(node, options)
        tiled_members = MAX_TILED_SKEWED_MEMBERS if whole_rows else node.band_n_member()
        wanted = band_tile_sizes(tiled_members, options=options, element_bytes=element_bytes)
        if whole_rows:
            caches = target_of(options.march, options.mtune).caches
            side = whole_row_tile(_row_footprint(node, strides, shapes, element_bytes), caches)
            wanted = (side,) * tiled_members
        roles = (
            _contraction_roles(node, strides)
            if _wants_contraction_tiles(options) and not whole_rows
            else None
        )
        if roles is not None:
            wanted = _contraction_sizes(wanted, roles, element_bytes, options)
        # a time-tiled stencil whose statements get an innermost loop each: that loop is the
        # vector loop, and its tiles are made long (see `stencil_row_tile`)
        statements = (
            _distribution_order(node, validity)
            if options.point_distribution
            and validity is not None
            and _member_iterators(node) is None
            else None
        )
        # (whole rows: the untiled members are the rows, nothing to lengthen or interleave)
        if (
            statements is not None
            and not whole_rows
            and options.tile_sizes is None
            and len(wanted) >= 2
        ):
            caches = target_of(options.march, options.mtune).caches
            row = stencil_row_tile(wanted[-2], element_bytes, caches)
            wanted = (*wanted[:-1], max(wanted[-1], row))
        elif (
            statements is None
            and not whole_rows
            and options.interleave
            and options.tile_sizes is None
            and roles is None
            and len(wanted) >= 2
            and validity is not None
            and _member_iterators(node) is None
            and _interleavable(node, validity, strides)
        ):
            # a skewed recurrence (seidel-2d): the rows its chains come from, two tiles deep
            wanted = (*wanted[:-2], wanted[-2] * INTERLEAVED_ROWS_FACTOR, wanted[-1])
        sizes = _fitted_sizes(node, wanted)
        # Sizes the user gave are followed; the default ones only where they bring reuse, or
        # keep a parallel loop outermost that the locality order would move inwards. A
        # contraction always gets its tiles: the micro-kernels take its point band (a member
        # smaller than its tile is not tiled), and left untiled a small one whose data fits
        # the L2 (a 37x150x300 layer with a 2 MiB L2) became jammed in-order sums instead.
        pays = (
            options.tile_sizes is not None
            or roles is not None
            or _tiling_pays(
                node, strides, shapes, element_bytes, target_of(options.march, options.mtune).caches
            )
            or (options.parallel and _tiling_keeps_parallel_loop_outside(node, strides))
        )
        if options.tile and sizes is not None and pays and not _has_divisibility_guards(node):
            skewed = _member_iterators(node) is None
            wavefront = options.parallel and options.wavefront and skewed and validity is not None
            # diamonds where the first space member has a mirror (not with whole rows: the
            # cube of rows sized for the L2 would be twice as wide in the diamond's middle)
            mirror = (
                mirrored_space_member(node, validity)
                if wavefront
                and validity is not None
                and options.diamond
                and not whole_rows
                and not options.tile_second_level
                else None
            )
            band = TiledBand(
                sizes,
                options.tile_second_level,
                wavefront,
                roles is not None,
                skewed=skewed,
                whole_rows=whole_rows,
                diamond=sizes[1] * mirror.skew if mirror is not None else 0,
            )
            if whole_rows:
                node = node.band_split(MAX_TILED_SKEWED_MEMBERS)
            node = node.band_tile(_multi_val(node, sizes))
            if roles is not None:
                # Column tiles outermost: they are many (rows come in few large tiles), so the
                # parallel tile loop shares them out evenly.
                columns = roles[1]
                order = [columns] + [m for m in range(len(sizes)) if m != columns]
                node = _permute_band(node, order)
            if options.tile_second_level:
                outer = tuple(size * SECOND_LEVEL_FACTOR for size in sizes)
                node = node.band_tile(_multi_val(node, outer)).child(0)
            # node: the (first-level) tile band; its child is the point band.
            node = _reorder_for_locality(node.child(0), strides)
            node = _sink_strided_member(node, strides, validity)
            # checked again on the point band: its innermost member is the one distributed
            # (with whole rows it is the row band's, and the check on the whole band holds:
            # equal point values mean equal tile values)
            if statements is not None and validity is not None and not whole_rows:
                statements = _distribution_order(node, validity)
            if statements is not None and whole_rows:
                node = _distribute_innermost_point_loop(node.child(0), statements).parent()
                band = replace(band, distributed=True)
            elif statements is not None:
                node = _distribute_innermost_point_loop(node, statements)
                band = replace(band, distributed=True)
            elif options.interleave and validity is not None and roles is None and not whole_rows:
                if _interleavable(node, validity, strides, sums=True):
                    interleaved = interleave_recurrence(node, validity, rows=None)
                    if interleaved is not node:  # the same node: it would break a dependence
                        band = replace(band, interleaved=True)
                    node = interleaved
            tiled.append(band)
            node = node.parent()
            if options.tile_second_level:
                node = node.parent()
            if mirror is not None:
                node = diamond_wavefront(node, mirror, band.diamond)
            elif wavefront and validity is not None:
                node = _wavefront(
                    node,
                    sizes,
                    validity,
                    coarsen=not options.tile_second_level,
                    block=options.wavefront_block,
                    parallel_block=1 if whole_rows else options.wavefront_block,
                )
            elif options.parallel and validity is not None and not options.tile_second_level:
                node = split_dependence_sources(
                    node, validity, max_operations=step_budget("panels", options)
                )
            return node
        # Not worth tiling (or tiling is off): still put the contiguous loop innermost, cut
        # loops whose dependences meet at one iteration, then look for tileable bands further
        # down (a split band's pieces stay as they are).
        node = _reorder_for_locality(node, strides)
        if options.index_split and validity is not None:
            split = split_index_sets(
                node,
                validity,
                parallel=options.parallel,
                max_operations=step_budget("index splitting", options),
            )
            if split is not node:
                return split
        if (
            options.interleave
            and validity is not None
            and _interleavable(node, validity, strides, sums=False)
        ):
            return interleave_recurrence(node, validity, rows=INTERLEAVED_ROWS)
        if options.interleave and validity is not None and _jammable(node, strides):
            return jam_rows(node, validity, rows=JAMMED_ROWS)
    for pos in range(node.n_children()):
        if is_row_strip(node.child(pos)):
            continue
        node = _tile_subtree(
            node.child(pos),
            options=options,
            element_bytes=element_bytes,
            strides=strides,
            validity=validity,
            shapes=shapes,
            tiled=tiled,
        ).parent()
    return node


# A wavefront walks blocks of `Options.wavefront_block` tiles per dimension but the first, the
# time loop's (see `_wavefront`): with blocks of 2 time tiles as well, a wavefront of fdtd-2d at
# LARGE had half as many blocks to share out: 2 threads 0.48 -> 0.45 s (best of 5; medians 0.55
# -> 0.49), heat-3d 0.84-0.90 -> 0.70-0.89 s, jacobi-2d and one thread the same.
# Measured at LARGE on 2 threads: single tiles (1) cost fdtd-2d 2x on one thread; 2 keeps the
# sequential speed of fdtd-2d, jacobi-2d and seidel-2d and gains 1.2-1.7x on two threads; 4
# gains less.
# Where the rows are whole (3-D stencils: the tiles below the parallel loop run a plane of whole
# rows in order already), blocks are single tiles along the parallel loop: heat-3d LARGE, 2
# threads, alternating runs: best 0.85 s against 0.94 (median 0.91 against 0.98), four runs of
# 7-11 alike, one thread the same. A model of the wavefronts' share-out does not explain it
# (blocks of 2 balance better on paper, 1.81x against 1.69x): the measured choice.
# Wavefronts are only for skewed bands (stencils: cholesky's, lu's or gramschmidt's unskewed
# bands lost their parallel point loops to it) of at least 3 loops: a block of a 2-loop band
# (jacobi-1d) holds a few thousand points, less work than sharing it out costs (4x slower).
MIN_WAVEFRONT_DEPTH = 3


def _wavefront(
    node: isl.ScheduleNode,
    sizes: Sequence[int],
    validity: isl.UnionMap,
    *,
    coarsen: bool,
    block: int,
    parallel_block: int | None = None,
) -> isl.ScheduleNode:
    """A permutable tile band (of a skewed band, the caller checks) of at least
    `MIN_WAVEFRONT_DEPTH` members, every one of which carries a dependence, run as a wavefront:
    with `coarsen`, tiled again into blocks of `block` tiles per dimension but the first (of
    `sizes` points; `parallel_block` tiles along the second, the parallel one, where given),
    and the outer band's first member replaced by the sum of the block numbers
    along its first two, split after it, with `WAVEFRONT_COLUMNS_MARK` above the rest. Every dependence
    between blocks moves forward or stays in each member of a permutable band, so blocks with the same sum are
    independent: the second member carries no dependence any more (checked on `validity`).
    Blocks rather than tiles, because the tiles of one anti-diagonal lie far apart in memory:
    inside a block, neighbouring tiles still reuse each other's halo (wavefronts of single
    tiles made fdtd-2d 2x slower on one thread). Other bands come back unchanged."""
    n_member = node.band_n_member()
    if n_member < MIN_WAVEFRONT_DEPTH:
        return node  # too little work in a block to share out
    if not all(carries_dependence(node, m, validity) for m in range(n_member)):
        return node  # some tile loop is parallel already
    if coarsen:
        # The first (time) member is not coarsened: a wavefront holds at most one block per
        # step of it, and fewer blocks share out worse on few threads.
        along = block if parallel_block is None else parallel_block
        blocks = (sizes[0], sizes[1] * along, *(size * block for size in sizes[2:]))
        node = node.band_tile(_multi_val(node, blocks))
    else:
        blocks = tuple(size * SECOND_LEVEL_FACTOR for size in sizes)
    partial = node.band_get_partial_schedule()
    # The sum of the blocks' numbers, not of their first points' coordinates: the space blocks
    # are `block` tiles long and the time blocks one, so the coordinates' sum weighed a time
    # block half as much and put fewer blocks on each wavefront (heat-3d: 2.8 instead of 4.3).
    first, second = (
        partial.get_at(k).scale_down_val(isl.Val.int_from_si(node.get_ctx(), blocks[k]))
        for k in (0, 1)
    )
    diagonal = partial.set_at(0, first.add(second))
    wavefront = node.delete().insert_partial_schedule(diagonal).band_set_permutable(1)
    if carries_dependence(wavefront, 1, validity):  # cannot happen in a permutable band
        return wavefront.delete().insert_partial_schedule(partial).band_set_permutable(1)
    wavefront = wavefront.band_split(1)
    return wavefront.child(0).insert_mark(isl.Id(WAVEFRONT_COLUMNS_MARK)).parent()


def _distribution_order(node: isl.ScheduleNode, validity: isl.UnionMap) -> list[isl.Set] | None:
    """The statements of permutable band `node` in the order their innermost loops would run
    if `_distribute_innermost_point_loop` gave each its own (S0, S1, ...: the source's); None
    where the band has one member or one statement, or where a dependence goes from a later
    statement to an earlier one between instances at equal values of the outer members (the
    order that distribution would reverse). Tiling keeps this true of the point band: equal
    outer point values mean equal outer tile values too."""
    members = node.band_n_member()
    statements = sorted(sets_of(node.get_domain()), key=_statement_number)
    if members < 2 or len(statements) < 2:
        return None
    schedule = node.band_get_partial_schedule_union_map()
    outer = isl.UnionMap.empty(schedule.get_space())
    for piece in maps_of(schedule):
        outer = outer.union(
            isl.UnionMap.from_map(piece.project_out(isl.dim_type.out, members - 1, 1))
        )
    together = outer.apply_range(outer.reverse())  # instances at equal outer values
    within = validity.intersect(together)
    for later, second in enumerate(statements):
        for first in statements[:later]:
            backwards = within.intersect_domain(isl.UnionSet.from_set(second)).intersect_range(
                isl.UnionSet.from_set(first)
            )
            if not backwards.is_empty():
                return None
    return statements


def _statement_number(statement: isl.Set) -> tuple[int, str]:
    """A key that orders statements as the source does: S2 before S10 (by the number they end
    in, then by name)."""
    name = statement.get_tuple_name()
    digits = len(name) - len(name.rstrip("0123456789"))
    return (int(name[-digits:]) if digits else -1, name)


def _distribute_innermost_point_loop(
    node: isl.ScheduleNode, statements: Sequence[isl.Set]
) -> isl.ScheduleNode:
    """The point band `node` (of a tile band) with its innermost member run once per statement
    of `statements` (`_distribution_order`, which says when that is legal), in that order,
    under its outer members; the returned node stands at `node`'s position.

    Why: the statements of a time-tiled stencil's step share the innermost point loop, each
    at its own skew (jacobi-2d's second sweep runs one row and one column behind the first),
    and LLVM does not vectorize such a loop (it reads the other statement's stores one
    iteration back). One loop per statement is a plain sweep: jacobi-2d LARGE ran 1.45 s ->
    0.85 s on one core (gcc -O3: 1.57 s), fdtd-2d 1.35 -> 0.83 s."""
    filters = isl.UnionSetList.alloc(node.get_ctx(), len(statements))
    for statement in statements:
        filters = filters.add(isl.UnionSet.from_set(statement))
    # the innermost member in a band of its own, copied under one filter per statement
    members = node.band_n_member()
    if members == 1:
        return node.insert_sequence(filters)
    return node.band_split(members - 1).child(0).insert_sequence(filters).parent()


def _interleavable(
    node: isl.ScheduleNode,
    validity: isl.UnionMap,
    strides: _AccessStrides | None,
    *,
    sums: bool = False,
) -> bool:
    """Whether `interleave_recurrence` applies to permutable band `node`: at least two members,
    the innermost the only loop left below (no band under it) and carrying a dependence, and no
    statement with an access the innermost loop leaves in place. Except, with `sums` (a tile's
    point band), a float accumulator summed in C's order (`_AccessStrides.ordered_sums`: no
    vectorizer takes it) whose statement strides through no array along the innermost loop,
    from rows that carry no dependence: a reduction that may be reordered vectorizes instead."""
    members = node.band_n_member() if node.get_type() == isl.schedule_node_type.band else 0
    if members < 2 or not _is_permutable_band(node) or _has_band_below(node.child(0)):
        return False
    if not carries_dependence(node, members - 1, validity):
        return False
    iterators = _member_iterators(node)
    if iterators is not None and strides is None:
        return False  # no accesses to tell an accumulator by
    has_sum = False
    if iterators is not None and strides is not None:
        for statement, follows in iterators.items():
            innermost = follows[members - 1]
            if innermost is None:
                continue
            pairs = strides.of(statement)
            accesses = [(array, _reuse_along(function, innermost)) for array, function in pairs]
            for (array, reuse), (_, function) in zip(accesses, pairs, strict=True):
                if reuse != "temporal":
                    continue
                # a sum in C's order (the element read and written: an accumulator) is a
                # chain too, worth breaking up where the innermost loop walks its other
                # arrays contiguously (syrk's dot products of rows: 0.58 -> 0.36 s; lu's and
                # cholesky's column walks lost 2x)
                accumulator = _is_accumulator(pairs, array, function)
                if not (sums and accumulator and array in strides.ordered_sums):
                    return False
                if any(other == "none" for _, other in accesses):
                    return False
                has_sum = True
    # sums side by side only from independent rows (cholesky's rows, skewed, lost 1.8x)
    if has_sum and carries_dependence(node, members - 2, validity):
        return False
    return True


def _jammable(node: isl.ScheduleNode, strides: _AccessStrides | None) -> bool:
    """Whether `jam_rows` applies to band `node`: permutable, at least two plain members, the
    innermost the only loop left below, and some statement summing into a float accumulator
    along it (`_AccessStrides.float_sums`) while walking its other arrays contiguously or not
    at all (a vector loop, its additions in order or, under -ffast-math, not). Under
    -ffast-math too: the sum vectorizes either way, and the rows jammed share each load of what they read in common (LARGE,
    1 thread, -ffast-math: bicg 3.4 -> 2.2 ms, mvt 3.3 -> 2.3 ms, atax 5.3 -> 3.6 ms; gcc
    -ffast-math 2.7, 8.0, 3.3)."""
    members = node.band_n_member() if node.get_type() == isl.schedule_node_type.band else 0
    if members < 2 or not _is_permutable_band(node) or _has_band_below(node.child(0)):
        return False
    iterators = _member_iterators(node)
    if iterators is None or strides is None or not strides.float_sums:
        return False
    sums = 0
    for statement, follows in iterators.items():
        innermost = follows[members - 1]
        if innermost is None or innermost in follows[: members - 1]:
            continue  # runs once per row (trisolv's division by the diagonal)
        pairs = strides.of(statement)
        reuse = [_reuse_along(function, innermost) for _, function in pairs]
        if "none" in reuse:
            return False
        distinct = {(array, str(function)): (array, function) for array, function in pairs}
        for array, function in distinct.values():
            if _is_accumulator(pairs, array, function) and array in strides.float_sums:
                sums += _reuse_along(function, innermost) == "temporal"
    # one sum per row: gesummv's two (tmp[i] and y[i] from two matrices) ran 0.90x -> 0.78x gcc
    # jammed, as LLVM keeps eight in-order sums scalar
    return sums == 1


def jam_rows(node: isl.ScheduleNode, validity: isl.UnionMap, *, rows: int) -> isl.ScheduleNode:
    """Permutable band (..., b, c) run as (..., [b/rows], c) with `rows` values of b unrolled
    inside c (unroll and jam): each of those rows' sums in C's order is its own chain of
    additions, and the core overlaps them, while c stays the loop LLVM vectorizes. Only full
    strips of rows are jammed; the rows left over (past the last multiple of `rows`) run after
    them in the band as it was, so the jammed loop holds no guard. The returned node stands at
    `node`'s position; the band comes back unchanged where the result is not legal.

    Why: an in-order sum (bicg's `q[i] += A[i][j] * p[j]`) waits for each addition before the
    next; one row at a time runs at that latency (bicg LARGE, 1 thread: hand-jammed 4 rows
    2.2 ms, gcc -O3 4.3 ms)."""
    members = node.band_n_member()
    partial = node.band_get_partial_schedule()
    b = partial.get_at(members - 2)
    values = isl.UnionMap.from_union_pw_aff(b).intersect_domain(node.get_domain())
    taken = isl.Set.from_union_set(values.range())
    full = taken
    for k in range(rows):
        strip_row = isl.Map(f"{{ [b] -> [c] : c = b - (b mod {rows}) + {k} }}")
        full = full.intersect(taken.apply(strip_row.reverse()))
    jammed = values.intersect_range(isl.UnionSet.from_set(full)).domain()
    if jammed.is_empty():
        return node
    rest = node.get_domain().subtract(jammed)
    depth = node.get_tree_depth()
    band = node
    if not rest.is_empty():
        filters = isl.UnionSetList.alloc(node.get_ctx(), 2).add(jammed).add(rest)
        band = node.insert_sequence(filters).child(0).child(0)
    size = isl.Val.int_from_si(node.get_ctx(), rows)
    outer = partial.set_at(members - 2, b.scale_down_val(size).floor().scale_val(size))
    inner = partial.drop_dims(isl.dim_type.set, 0, members - 2).drop_dims(isl.dim_type.set, 1, 1)
    permutable = band.band_get_permutable()
    result = band.delete().insert_partial_schedule(inner)
    result = result.band_member_set_ast_loop_type(0, isl.ast_loop_type.unroll)
    result = result.insert_partial_schedule(outer).band_set_permutable(int(permutable))
    # the first iteration of c apart (a statement placed there, like a sum's zeroing, would
    # otherwise sit in the vector loop behind a guard)
    for member in range(members):
        result = result.band_member_set_ast_loop_type(member, isl.ast_loop_type.separate)
    if not check_schedule_legal(result.get_schedule(), validity):
        return node
    return result.ancestor(result.get_tree_depth() - depth)


def _is_accumulator(
    pairs: list[tuple[str, isl.MultiAff]], array: str, function: isl.MultiAff
) -> bool:
    """Whether the statement whose accesses are `pairs` reads and writes `array` at `function`
    (the same element at least twice among its accesses: a sum's accumulator)."""
    return sum(1 for other, f in pairs if other == array and f.plain_is_equal(function)) >= 2


def _has_band_below(node: isl.ScheduleNode) -> bool:
    if node.get_type() == isl.schedule_node_type.band:
        return True
    return any(_has_band_below(node.child(pos)) for pos in range(node.n_children()))


def interleave_recurrence(
    node: isl.ScheduleNode, validity: isl.UnionMap, *, rows: int | None
) -> isl.ScheduleNode:
    """Permutable band (..., b, c) whose innermost member c carries a dependence (a recurrence:
    each iteration waits for the one before) run as (..., [b/rows], c', b): the new innermost
    loop runs `rows` values of b (None: all of them, in a tile's point band) at one value of c',
    each a chain independent of the others, which the core overlaps. c' = c when b carries no
    dependence (adi's rows), else c + b (seidel-2d: row b+1 runs one step of c behind row b);
    every dependence keeps going forward because the band is permutable. The returned node
    stands at `node`'s position; the band comes back unchanged where the result is not legal.

    Why: a recurrence through a division or a chain of adds runs at the latency of that chain,
    a fifth or less of what the core can do (seidel-2d LARGE: 17.3 s -> 4.8 s on one core; gcc
    -O3, which runs the source order: 20 s)."""
    members = node.band_n_member()
    partial = node.band_get_partial_schedule()
    b, c = partial.get_at(members - 2), partial.get_at(members - 1)
    if carries_dependence(node, members - 2, validity):
        c = c.add(b)
    ctx = node.get_ctx()
    outer = partial.set_at(members - 1, c)
    if rows is None:
        outer = outer.drop_dims(isl.dim_type.set, members - 2, 1)
    else:
        size = isl.Val.int_from_si(ctx, rows)
        outer = outer.set_at(members - 2, b.scale_down_val(size).floor().scale_val(size))
    inner = partial.drop_dims(isl.dim_type.set, 0, members - 2).drop_dims(isl.dim_type.set, 1, 1)
    depth = node.get_tree_depth()
    permutable = node.band_get_permutable()
    result = node.delete().insert_partial_schedule(inner)
    result = result.insert_partial_schedule(outer).band_set_permutable(int(permutable))
    if not check_schedule_legal(result.get_schedule(), validity):
        return node
    return result.ancestor(result.get_tree_depth() - depth)


def stencil_row_tile(rows: int, element_bytes: int, caches: Caches = GENERIC_CACHES) -> int:
    """The tile size of a time-tiled stencil's innermost (vector) loop, when each statement
    runs it on its own: the largest power of two with `rows` rows of it in an eighth of the
    L2 (512 KiB, 32 rows of f64: 256), at least `MIN_TILE_SIZE`, at most `MAX_STENCIL_ROW_TILE`
    elements and `MAX_STENCIL_ROW_BYTES`. Cubic tiles (32) leave 4 AVX-512 vectors per row
    between the loop's entry and exit, and the skew cuts a row into pieces; at LARGE 256 made
    jacobi-2d 0.85 -> 0.61 s on one core (0.48 -> 0.34 s on two) and fdtd-2d 0.84 -> 0.52 s
    on a Zen 4 (1 MiB of L2), while 128 and 512 were 3-10% slower; on a Zen 3 (512 KiB),
    256 against 128: jacobi-2d 1.76x -> 2.07x gcc on one core, 2.7x -> 3.1x on two, fdtd-2d
    2.16x -> 2.32x and 3.3x -> 3.55x (512: as 256). With a 2 MiB L2 (Sapphire Rapids, AVX-512)
    rows of 4 KiB (512 f64) gained over 256 (best of 5-7, LARGE): jacobi-2d 0.69 -> 0.63 s on
    one core, 0.37 -> 0.33 s on two; fdtd-2d 0.51 -> 0.49 s and 0.29 -> 0.27 s."""
    elements = caches.l2 // (STENCIL_L2_SHARE * max(rows, 1) * max(element_bytes, 1))
    power = _power_of_two_at_most(elements)
    row_bytes = MAX_STENCIL_ROW_BYTES * max(1, caches.l2 // (1024 * 1024))
    longest = min(MAX_STENCIL_ROW_TILE, row_bytes // max(element_bytes, 1))
    return max(MIN_TILE_SIZE, min(power, longest))


def whole_row_tile(row_bytes: tuple[int, int] | None, caches: Caches = GENERIC_CACHES) -> int:
    """The tile size of each tiled member of a band whose rows stay whole
    (`_leaves_rows_whole`), given (bytes of a row, arrays) (`_row_footprint`; None: not known):
    the largest power of two S with S x S rows of every array in `REUSE_L2_SHARE` of the L2,
    so a time step's rows are still there at the next one, between `MIN_WHOLE_ROW_TILE` and
    `MAX_WHOLE_ROW_TILE`; `WHOLE_ROW_TILE` when the rows' size is not known."""
    if row_bytes is None:
        return WHOLE_ROW_TILE
    rows = int(caches.l2 * REUSE_L2_SHARE) // max(row_bytes[0] * row_bytes[1], 1)
    side = isqrt(rows)
    power = _power_of_two_at_most(side)
    return max(MIN_WHOLE_ROW_TILE, min(power, MAX_WHOLE_ROW_TILE))


def _row_footprint(
    node: isl.ScheduleNode,
    strides: _AccessStrides | None,
    shapes: Mapping[str, tuple[int, ...]] | None,
    element_bytes: int,
) -> tuple[int, int] | None:
    """(bytes of the longest row, number of arrays) of the arrays the statements under `node`
    access, a row being an array's last dimension; None when an array's size is not known."""
    if strides is None or shapes is None:
        return None
    arrays = {
        array
        for domain in sets_of(node.get_domain())
        for array, _ in strides.of(domain.get_tuple_name())
    }
    longest = 0
    for array in arrays:
        shape = shapes.get(array)
        if not shape or any(extent < 0 for extent in shape):
            return None
        longest = max(longest, shape[-1] * element_bytes)
    return (longest, len(arrays)) if arrays else None


def _leaves_rows_whole(node: isl.ScheduleNode, options: Options) -> bool:
    """Whether the permutable band `node` is a skewed band deeper than
    `MAX_TILED_SKEWED_MEMBERS` to be tiled with the default sizes, so that only its outer
    members get tiles."""
    return (
        options.tile_sizes is None
        and node.band_n_member() > MAX_TILED_SKEWED_MEMBERS
        and _member_iterators(node) is None
    )


def _is_permutable_band(node: isl.ScheduleNode) -> bool:
    return (
        node.get_type() == isl.schedule_node_type.band
        and node.band_n_member() >= 2
        and bool(node.band_get_permutable())
    )


def _has_divisibility_guards(node: isl.ScheduleNode) -> bool:
    """Whether a statement under the band runs only on some residues (`(i + j) % 7 == 0`).
    Tiled, such domains make isl's AST generation enumerate residue combinations for minutes
    (floyd-warshall's initialization); they are guard code that tiling does not speed up."""
    return any(
        piece.dim(isl.dim_type.div) > 0
        for domain in sets_of(node.get_domain())
        for piece in domain.get_basic_sets()
    )


def _fitted_sizes(node: isl.ScheduleNode, wanted: Sequence[int]) -> tuple[int, ...] | None:
    """The band's tile sizes (`wanted`), each member with a known range smaller than its size
    sized to cover it in one tile; None when every member has such a range (nothing to tile)."""
    sizes = list(wanted)
    points = _band_points(node)
    worth_tiling = False
    for pos, size in enumerate(sizes):
        low, high = _constant_range(points, pos)
        if low is not None and high is not None and low >= 0 and high - low < size:
            # Tiles start at multiples of the size: one that exceeds `high` puts all in tile 0.
            sizes[pos] = 1 << high.bit_length()
        else:
            worth_tiling = True
    return tuple(sizes) if worth_tiling else None


def _wants_contraction_tiles(options: Options) -> bool:
    """Whether contraction bands get the micro-kernels' tile sizes (see
    `Options.contraction_tile_rows`): not when the user gave sizes or asked for second-level
    tiles."""
    return (
        options.micro_kernels
        and options.schedule
        and options.tile_sizes is None
        and not options.tile_second_level
    )


def _contraction_sizes(
    sizes: Sequence[int], roles: ContractionRoles, element_bytes: int, options: Options
) -> tuple[int, ...]:
    """`sizes` with the contraction's members (`roles`: rows, columns, depth) sized for the
    micro-kernels (`options.contraction_tile_*`), and its other output members (a
    convolution's batch and image rows) left whole: the micro-kernel runs its register blocks
    inside their loops, which gain nothing from tiles (TC conv2d 8x64x56x56, one thread: tiles
    of 32 in every member 24 ms, none 19 ms; of image rows alone, within the noise)."""
    depth = max(options.contraction_tile_depth_bytes // max(element_bytes, 1), MIN_TILE_SIZE)
    wanted = list(sizes)
    rows, columns = options.contraction_tile_rows, options.contraction_tile_columns
    for size, member in zip((rows, columns, depth), roles[:3], strict=True):
        if member != NO_ROWS:
            wanted[member] = size
    for member in roles[3]:
        wanted[member] = WHOLE_MEMBER
    return tuple(wanted)


# A tile size no loop reaches: the member's tile loop runs once (and disappears from the code
# when its range is known, see `_fitted_sizes`).
WHOLE_MEMBER = 1 << 30

# The band members of a contraction: rows u, columns v, depth r, and the other members the
# stored element depends on (none for a matrix product; a convolution's n and h). u is
# `NO_ROWS` for a row vector (`sum[p] += A[s] * B[s][p]`: the micro-kernels' rowless blocks).
ContractionRoles = tuple[int, int, int, tuple[int, ...]]
NO_ROWS = -1


def _contraction_roles(
    node: isl.ScheduleNode, strides: _AccessStrides | None
) -> ContractionRoles | None:
    """The band members (rows u, columns v, depth r, others O) of a contraction statement under
    the band: it accesses X depending on exactly u, v and O (contiguous along v), A on u, r and
    some of O, B on r, v and some of O, and nothing else moving with the band's members; None
    when no statement is one. (A matrix product has no O; a convolution `out(n, k, h, w) +=
    in(n, c, h + kh, w + kw) * weight(k, c, kh, kw)` has u = k, v = w, r = c and O = {n, h}.)"""
    iterators = _member_iterators(node)
    if iterators is None or strides is None:
        return None
    domains = {domain.get_tuple_name(): domain for domain in sets_of(node.get_domain())}
    n_member = node.band_n_member()
    for statement, by_member in iterators.items():
        for u, v, r in permutations(range(n_member), 3):
            row, column, depth = by_member[u], by_member[v], by_member[r]
            if row is None or column is None or depth is None:
                continue
            if len({row, column, depth}) != 3:
                continue
            domain = domains.get(statement)
            if domain is None or not _rectangular(domain, (row, column, depth)):
                continue  # triangular nests (syrk, covariance): the micro-kernels refuse them
            band_its = {it for it in by_member if it is not None}
            accesses = [
                {it for it in band_its if _reuse_along(function, it) != "temporal"}
                for _array, function in strides.of(statement)
            ]
            # X's candidates: contiguous along v, moving with u and v but not r
            spatial = [
                _reuse_along(function, column) == "spatial"
                for _array, function in strides.of(statement)
            ]
            candidates = {
                frozenset(moving)
                for moving, along in zip(accesses, spatial, strict=True)
                if along and {row, column} <= moving and depth not in moving
            }
            for outputs in sorted(candidates, key=sorted):
                others = outputs - {row, column}
                if _contraction_fits(accesses, spatial, outputs, (row, column, depth), others):
                    members = tuple(m for m, it in enumerate(by_member) if it in others)
                    return u, v, r, members
    return _row_vector_roles(node, iterators, strides)


def _row_vector_roles(
    node: isl.ScheduleNode,
    iterators: Mapping[str, list[int | None]],
    strides: _AccessStrides,
) -> ContractionRoles | None:
    """(NO_ROWS, v, r, ()) for a two-member band over a row-vector contraction: X moves with v
    alone, contiguously, A with r alone, B with r and v, and the band runs again for each
    iteration of loops outside it that X does not move with (`sum[p] += A[r][q][s] * C4[s][p]`
    under doitgen's r and q loops: each run reads B's tile again, and a block of one row
    keeps the sums in registers across it); None otherwise. A band that is the whole nest (a
    matrix-vector product) keeps its own schedule (`jam_rows`)."""
    if node.band_n_member() != 2:
        return None
    domains = {domain.get_tuple_name(): domain for domain in sets_of(node.get_domain())}
    for statement, by_member in iterators.items():
        for v, r in permutations(range(2), 2):
            column, depth = by_member[v], by_member[r]
            if column is None or depth is None or column == depth:
                continue
            domain = domains.get(statement)
            if domain is None or not _rectangular(domain, (column, depth)):
                continue
            band_its = {it for it in by_member if it is not None}
            outside = set(range(domain.dim(isl.dim_type.set))) - band_its
            functions = [function for _array, function in strides.of(statement)]
            if not outside:
                continue
            moving = [
                {it for it in band_its if _reuse_along(function, it) != "temporal"}
                for function in functions
            ]
            spatial = [_reuse_along(function, column) == "spatial" for function in functions]
            found = {"X": False, "A": False, "B": False}
            fits = True
            for function, moves, along in zip(functions, moving, spatial, strict=True):
                if moves == {column} and along:
                    if any(_reuse_along(function, it) != "temporal" for it in outside):
                        fits = False
                    found["X"] = True
                elif moves == {depth}:
                    found["A"] = True
                elif moves == {column, depth}:
                    found["B"] = True
                elif moves:
                    fits = False
            if fits and all(found.values()):
                return NO_ROWS, v, r, ()
    return None


def _contraction_fits(
    accesses: Sequence[set[int]],
    spatial: Sequence[bool],
    outputs: frozenset[int],
    roles: tuple[int, int, int],
    others: frozenset[int],
) -> bool:
    """Whether `accesses` (the iterators each moves with) are X (moving with `outputs`,
    contiguous along the columns), A (rows, depth, some others), B (depth, columns, some
    others), each at least once, and scalars (a register sum moves with none)."""
    row, column, depth = roles
    found = {"X": False, "A": False, "B": False}
    for moving, along in zip(accesses, spatial, strict=True):
        if moving == outputs and along:
            found["X"] = True
        elif {row, depth} <= moving <= {row, depth} | others:
            found["A"] = True
        elif {depth, column} <= moving <= {depth, column} | others:
            found["B"] = True
        elif moving and moving != outputs:
            return False
    return all(found.values())


def _rectangular(domain: isl.Set, iterators: Sequence[int]) -> bool:
    """Whether no constraint of `domain` ties two of `iterators` together (each one's bounds
    are independent of the others')."""
    for piece in domain.get_basic_sets():
        for constraint in piece.get_constraints():
            tied = sum(
                not constraint.get_coefficient_val(isl.dim_type.set, it).is_zero()
                for it in iterators
            )
            if tied > 1:
                return False
    return True


def _band_points(node: isl.ScheduleNode) -> isl.Set | None:
    """The values the band's members take over the instances that reach it, as one set."""
    partial = node.band_get_partial_schedule_union_map().intersect_domain(node.get_domain())
    sets = sets_of(partial.range())
    return sets[0] if len(sets) == 1 else None


def _constant_range(points: isl.Set | None, pos: int) -> tuple[int | None, int | None]:
    if points is None or points.is_empty():
        return None, None
    low, high = points.dim_min_val(pos), points.dim_max_val(pos)
    if not (low.is_int() and high.is_int()):
        return None, None  # unbounded or bounded only by a parameter
    return int(low.to_python()), int(high.to_python())


def _multi_val(node: isl.ScheduleNode, sizes: Sequence[int]) -> isl.MultiVal:
    values = isl.MultiVal.zero(node.band_get_space())
    for pos, size in enumerate(sizes):
        values = values.set_val(pos, size)
    return values


@contextmanager
def _isl_tile_options(ctx: isl.Context) -> Iterator[None]:
    """Scaled tile loops and unshifted point loops (see the module docstring), restored after."""
    saved = (ctx.get_tile_scale_tile_loops(), ctx.get_tile_shift_point_loops())
    try:
        ctx.set_tile_scale_tile_loops(1)
        ctx.set_tile_shift_point_loops(0)
        yield
    finally:
        ctx.set_tile_scale_tile_loops(saved[0])
        ctx.set_tile_shift_point_loops(saved[1])


# ----- point-loop order


class _AccessStrides:
    """How each access moves through memory along each statement iterator.

    For an access `S[x] -> A[y]` and iterator `x_d`: "invariant" when no index depends on `x_d`,
    "contiguous" when only the last index does, with coefficient ±1 (row-major arrays), "strided"
    otherwise. Accesses that are not single affine functions are ignored.
    """

    def __init__(self, accesses: Sequence[isl.Map]) -> None:
        self._by_statement: dict[str, list[isl.MultiAff]] = {}
        # floating-point arrays (the sums row jamming looks for), and whether their sums keep
        # C's order (no -fassociative-math): see `ordered_sums`
        self.float_sums: frozenset[str] = frozenset()
        self.sums_in_c_order = True
        self._arrays: dict[str, list[str]] = {}
        for relation in accesses:
            function = _single_multi_aff(relation)
            if function is not None:
                name = relation.get_tuple_name(isl.dim_type.in_)
                self._by_statement.setdefault(name, []).append(function)
                self._arrays.setdefault(name, []).append(relation.get_tuple_name(isl.dim_type.out))

    @property
    def ordered_sums(self) -> frozenset[str]:
        """The floating-point arrays whose sums keep C's order: such an accumulator is a chain
        that no vectorizer takes, which interleaving may break up."""
        return self.float_sums if self.sums_in_c_order else frozenset()

    def of(self, statement: str) -> list[tuple[str, isl.MultiAff]]:
        """`statement`'s accesses as (array, index function) pairs."""
        return list(
            zip(self._arrays.get(statement, ()), self._by_statement.get(statement, ()), strict=True)
        )

    def cost(self, statement: str, iterator: int) -> tuple[int, int]:
        """(strided accesses, -contiguous accesses) of `statement` along `iterator`."""
        strided = contiguous = 0
        for function in self._by_statement.get(statement, ()):
            reuse = _reuse_along(function, iterator)
            contiguous += reuse == "spatial"
            strided += reuse == "none"
        return strided, -contiguous


def _reorder_for_locality(
    node: isl.ScheduleNode, strides: _AccessStrides | None
) -> isl.ScheduleNode:
    """A permutable band with its members reordered so the best one for locality is innermost
    (the others keep their order); unchanged when it already is, or when a member is not a plain
    iterator (skewed bands)."""
    order = _locality_order(node, strides)
    if order is None or order == list(range(len(order))):
        return node
    return _permute_band(node, order)


def _locality_order(node: isl.ScheduleNode, strides: _AccessStrides | None) -> list[int] | None:
    """The member order `_reorder_for_locality` gives the permutable band `node`; None when it
    leaves the band alone (no accesses, not permutable, skewed)."""
    if strides is None or not _is_permutable_band(node):
        return None
    iterators = _member_iterators(node)
    if iterators is None:
        return None
    n_member = node.band_n_member()
    costs = []
    for member in range(n_member):
        strided = contiguous = 0
        for statement, by_member in iterators.items():
            iterator = by_member[member]
            if iterator is not None:
                s, c = strides.cost(statement, iterator)
                strided, contiguous = strided + s, contiguous + c
        # Ties keep isl's order: the later member wins.
        costs.append((strided, contiguous, -member))
    best = min(range(n_member), key=lambda member: costs[member])
    return [member for member in range(n_member) if member != best] + [best]


def _tiling_pays(
    node: isl.ScheduleNode,
    strides: _AccessStrides | None,
    shapes: Mapping[str, tuple[int, ...]] | None,
    element_bytes: int,
    caches: Caches,
) -> bool:
    """Whether tiling the permutable band `node` brings reuse the cache does not give anyway:
    some access uses the same element again at the next value of an outer member, with more
    than `REUSE_L2_SHARE` of the L2 touched in between, or the same cache line, with more than
    the L1. True when that cannot be told (skewed bands, arrays of unknown size, no
    accesses)."""
    order = _locality_order(node, strides)
    iterators = _member_iterators(node)
    if order is None or iterators is None or strides is None or shapes is None:
        return True
    above = _iterators_above(node)
    for depth, member in enumerate(order[:-1]):
        reuse: set[str] = set()
        between = 0
        for statement, by_member in iterators.items():
            iterator = by_member[member]
            members = (by_member[outer] for outer in order[: depth + 1])
            fixed = above.get(statement, set()) | {it for it in members if it is not None}
            for array, function in strides.of(statement):
                shape = shapes.get(array)
                if shape is None or any(extent < 0 for extent in shape):
                    return True
                touched = _footprint(function, shape, fixed, element_bytes, caches.line)
                # An access that stays on one element while the inner loops run costs one
                # cache hit per outer iteration, whether or not it reuses anything.
                if iterator is not None and touched > element_bytes:
                    reuse.add(_reuse_along(function, iterator))
                between += touched
        if "temporal" in reuse and between > caches.l2 * REUSE_L2_SHARE:
            return True
        if "spatial" in reuse and between > caches.l1_data:
            return True
    return False


def _tiling_keeps_parallel_loop_outside(
    node: isl.ScheduleNode, strides: _AccessStrides | None
) -> bool:
    """Whether the permutable band `node`, nested in another loop, has a parallel outermost
    member that `_locality_order` would move inwards. Tiled, the parallel tile loop stays
    outermost and forks once per iteration of the enclosing loops; untiled, the parallel loop
    would fork once per iteration of a sequential member as well (doitgen: 2.00x on 2 threads
    tiled, 1.55x untiled)."""
    order = _locality_order(node, strides)
    if order is None or not node.band_member_get_coincident(0) or order[0] == 0:
        return False
    if node.band_member_get_coincident(order[0]):
        return False
    ancestor = node
    while ancestor.has_parent():
        ancestor = ancestor.parent()
        if ancestor.get_type() == isl.schedule_node_type.band:
            return True
    return False


def _iterators_above(node: isl.ScheduleNode) -> dict[str, set[int]]:
    """For each statement, the iterators the bands above `node` schedule (they keep their values
    while `node`'s subtree runs); iterators in skewed or otherwise combined members count too."""
    fixed: dict[str, set[int]] = {}
    while node.has_parent():
        node = node.parent()
        if node.get_type() != isl.schedule_node_type.band:
            continue
        for schedule in maps_of(node.band_get_partial_schedule_union_map()):
            function = _single_multi_aff(schedule)
            if function is None:
                continue
            used = fixed.setdefault(schedule.get_tuple_name(isl.dim_type.in_), set())
            for pos in range(function.dim(isl.dim_type.out)):
                aff = function.get_at(pos)
                used.update(
                    d
                    for d in range(function.dim(isl.dim_type.in_))
                    if not _coefficient(aff, d).is_zero()
                )
    return fixed


def _reuse_along(function: isl.MultiAff, iterator: int) -> str:
    """How consecutive values of `iterator` reuse the access's data: "temporal" (no index
    depends on it), "spatial" (only the last index does, with coefficient ±1: the same cache
    line), or "none"."""
    n_index = function.dim(isl.dim_type.out)
    moving = [
        pos for pos in range(n_index) if not _coefficient(function.get_at(pos), iterator).is_zero()
    ]
    if not moving:
        return "temporal"
    last = _coefficient(function.get_at(n_index - 1), iterator)
    return "spatial" if moving == [n_index - 1] and last.abs().is_one() else "none"


def _footprint(
    function: isl.MultiAff,
    shape: tuple[int, ...],
    fixed: set[int],
    element_bytes: int,
    line_bytes: int,
) -> int:
    """An upper bound on the bytes the access touches while the iterators in `fixed` keep their
    values: the whole extent of every index some other iterator moves, a cache line per element
    when the last index is not among them."""
    n_index = function.dim(isl.dim_type.out)
    n_iterator = function.dim(isl.dim_type.in_)
    moving = [
        pos
        for pos in range(n_index)
        if any(
            not _coefficient(function.get_at(pos), iterator).is_zero()
            for iterator in range(n_iterator)
            if iterator not in fixed
        )
    ]
    if not moving:
        return element_bytes
    elements = 1
    for pos in moving:
        elements *= shape[pos] if pos < len(shape) else 1
    return elements * (element_bytes if n_index - 1 in moving else line_bytes)


def _sink_strided_member(
    node: isl.ScheduleNode, strides: _AccessStrides | None, validity: isl.UnionMap | None
) -> isl.ScheduleNode:
    """A point band whose innermost member walks memory contiguously for statements below a
    sequence (or set) under it, while their own innermost loops stride, with that member moved
    below those loops (gramschmidt: `for j { for i A[i][j] }` becomes `for i { for j A[i][j] }`
    inside each tile); elsewhere under the sequence it goes right above what was below it. Kept
    only when every dependence still goes forward (checked on `validity`); returns the node at
    `node`'s position (the sequence when the band had one member)."""
    if strides is None or validity is None or not _is_permutable_band(node):
        return node
    if node.child(0).get_type() not in _BRANCHES:
        return node
    iterators = _member_iterators(node)
    if iterators is None:
        return node
    last = node.band_n_member() - 1
    # Statements for which the member only repeats an outer member's iterator (it is constant
    # inside the tile) gain nothing from moving it.
    moving: dict[str, int] = {}
    for statement, members in iterators.items():
        iterator = members[last]
        if iterator is not None and iterator not in members[:last]:
            moving[statement] = iterator
    if not _sinks_somewhere(node.child(0), moving, strides):
        return node
    member = node.band_get_partial_schedule().get_at(last)
    depth = node.get_tree_depth()
    branch = (node.band_split(last).child(0) if last > 0 else node).delete()
    branch = _insert_member(branch, member, moving, strides)
    if not check_schedule_legal(branch.get_schedule(), validity):
        return node
    return branch.ancestor(branch.get_tree_depth() - depth) if last > 0 else branch


_BRANCHES = (isl.schedule_node_type.sequence, isl.schedule_node_type.set)


def _sinks_somewhere(
    node: isl.ScheduleNode, moving: dict[str, int], strides: _AccessStrides
) -> bool:
    """Whether some single-loop band reached through sequences, sets and filters from `node`
    would gain from getting the moving member below it (see `_gains`)."""
    if node.get_type() in _BRANCHES:
        return any(
            _sinks_somewhere(node.child(pos).child(0), moving, strides)
            for pos in range(node.n_children())
        )
    return _gains(node, moving, strides)


def _gains(node: isl.ScheduleNode, moving: dict[str, int], strides: _AccessStrides) -> bool:
    """Whether `node` is a single-loop band along which some statement strides through memory
    more than it would along its `moving` iterator, which walks it contiguously."""
    if node.get_type() != isl.schedule_node_type.band or node.band_n_member() != 1:
        return False
    inner = _member_iterators(node)
    if inner is None:
        return False
    for statement, (own,) in inner.items():
        outer = moving.get(statement)
        if own is None or outer is None:
            continue
        own_strided, _ = strides.cost(statement, own)
        outer_strided, outer_contiguous = strides.cost(statement, outer)
        if outer_strided < own_strided and outer_contiguous < 0:
            return True
    return False


def _insert_member(
    node: isl.ScheduleNode,
    member: isl.UnionPwAff,
    moving: dict[str, int],
    strides: _AccessStrides,
) -> isl.ScheduleNode:
    """`member` inserted as a loop below every gaining band under `node` (see `_gains`) and
    above every other subtree below sequences and sets; returns the node at `node`'s position."""
    depth = node.get_tree_depth()
    if node.get_type() in _BRANCHES:
        for pos in range(node.n_children()):
            inner = _insert_member(node.child(pos).child(0), member, moving, strides)
            node = inner.ancestor(inner.get_tree_depth() - depth)
        return node
    if _gains(node, moving, strides):
        node = node.child(0)
    restricted = member.intersect_domain(node.get_domain())
    node = node.insert_partial_schedule(isl.MultiUnionPwAff.from_union_pw_aff(restricted))
    return node.ancestor(node.get_tree_depth() - depth)


def _member_iterators(node: isl.ScheduleNode) -> dict[str, list[int | None]] | None:
    """For each statement under the band, the iterator each member follows (None: a constant);
    None when some member is anything else (a skew, a scaled or combined iterator)."""
    result: dict[str, list[int | None]] = {}
    for schedule in maps_of(node.band_get_partial_schedule_union_map()):
        function = _single_multi_aff(schedule)
        if function is None:
            return None
        n_in = function.dim(isl.dim_type.in_)
        members: list[int | None] = []
        for pos in range(function.dim(isl.dim_type.out)):
            aff = function.get_at(pos)
            used = [d for d in range(n_in) if not _coefficient(aff, d).is_zero()]
            if not used:
                members.append(None)
            elif len(used) == 1 and _coefficient(aff, used[0]).is_one():
                members.append(used[0])
            else:
                return None
        result[schedule.get_tuple_name(isl.dim_type.in_)] = members
    return result


def _permute_band(node: isl.ScheduleNode, order: Sequence[int]) -> isl.ScheduleNode:
    """The band with member `order[k]` at position k; permutability and coincidence kept (in a
    permutable band both hold for each member whatever the order)."""
    partial = node.band_get_partial_schedule()
    coincident = [bool(node.band_member_get_coincident(pos)) for pos in range(len(order))]
    permuted = partial
    for pos, member in enumerate(order):
        permuted = permuted.set_at(pos, partial.get_at(member))
    node = node.delete().insert_partial_schedule(permuted)
    node = node.band_set_permutable(1)
    for pos, member in enumerate(order):
        node = node.band_member_set_coincident(pos, int(coincident[member]))
    return node


def _single_multi_aff(relation: isl.Map) -> isl.MultiAff | None:
    """`relation` as one affine function, or None (not single-valued, or different functions
    on different parts of its domain)."""
    if not relation.is_single_valued():
        return None
    pieces: list[isl.MultiAff] = []
    isl.PwMultiAff.from_map(relation).foreach_piece(
        lambda _domain, function: pieces.append(function)
    )
    if not pieces or any(not piece.plain_is_equal(pieces[0]) for piece in pieces[1:]):
        return None
    return pieces[0]


def _coefficient(aff: isl.Aff, iterator: int) -> isl.Val:
    """The coefficient of the `iterator`-th statement iterator in `aff`."""
    return aff.get_coefficient_val(isl.dim_type.in_, iterator)
