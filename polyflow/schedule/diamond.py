"""Diamond tiles for time-tiled stencils: tiles that start concurrently along a space loop.

A time-tiled stencil's skewed band (t, s·t + i, s·t + j, ...) tiled in parallelograms has no
parallel tile loop; `tiling._wavefront` runs its tiles along the anti-diagonals of (t, i), and a
wavefront holds only the few tiles whose time tile and space tile add up to its number: few at
its start and end, unequal in between (jacobi-2d at LARGE kept 2 threads busy 85% of the time).
Diamond tiles cut the (t, i) plane along s·t + i and its mirror s·t - i instead: every diamond of
one time band starts together, so a wavefront holds one tile per diamond across the whole row
of them (Pluto's concurrent-start tiling).

`mirrored_space_member(node, validity)`: member 1 of a permutable band with the sign of its space
iterator flipped, per statement, with constants solved so that every dependence still goes
forward along it; None where that is impossible (seidel-2d's in-place update reads the same time
step's neighbour) or the band is not of that form.

`diamond_wavefront(node, mirror, side)`: the tile band `node` (isl `band_tile`'s, scaled
tile loops) replaced by the diamonds' wavefront: (A + B, A, the other members' tiles), with
A = ⌊h1 / side⌋·side and B the same of the mirror, split after the first member with
`WAVEFRONT_MARK` above the rest, so codegen makes the A loop parallel. The point band below is
untouched: inside a diamond the points run in the band's own order.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polyflow.ir.names import WAVEFRONT_MARK
from polyflow.poly.isl_helpers import maps_of


@dataclass(frozen=True)
class Mirror:
    """Member 1's mirror (one affine function per statement), the band's skew (how many units
    member 1 moves per unit of member 0: 2 for jacobi-2d's two half steps, 1 for fdtd-2d) and
    the band's members as they were before tiling (the diamonds cut member 1)."""

    member: isl.UnionPwAff
    skew: int
    band: isl.MultiUnionPwAff


def mirrored_space_member(node: isl.ScheduleNode, validity: isl.UnionMap) -> Mirror | None:
    """The mirror of permutable band `node`'s member 1 (see the module docstring), checked
    against every dependence of `validity` between instances under `node` that its outer loops
    do not separate; None where there is none."""
    if node.band_n_member() < 3:
        return None
    band = node.band_get_partial_schedule()
    time, space = band.get_at(0), band.get_at(1)
    pieces: list[isl.PwAff] = []
    space.foreach_pw_aff(pieces.append)
    flipped: dict[str, tuple[isl.Set, isl.Aff]] = {}
    skew = 1
    for piece in pieces:
        reflected = _reflect(piece, time.extract_pw_aff(piece.get_space()))
        if reflected is None:
            return None
        name, domain, aff, factor = reflected
        flipped[name] = (domain, aff)
        skew = max(skew, factor)
    instances = node.get_domain()
    dependences = validity.intersect_domain(instances).intersect_range(instances)
    offsets = _forward_offsets({n: aff for n, (_, aff) in flipped.items()}, dependences)
    if offsets is None:
        return None
    mirror: isl.UnionPwAff | None = None
    for name, (domain, aff) in flipped.items():
        shifted = aff.set_constant_val(isl.Val.int_from_si(aff.get_ctx(), offsets[name]))
        part = isl.UnionPwAff.from_pw_aff(isl.PwAff.from_aff(shifted).intersect_domain(domain))
        mirror = part if mirror is None else mirror.union_add(part)
    if mirror is None:
        return None
    # the proof that counts: every dependence the outer loops leave goes forward along it
    time_of = node.get_prefix_schedule_union_map().flat_range_product(
        isl.UnionMap.from_union_pw_aff(mirror)
    )
    if not dependences.is_subset(time_of.lex_le_union_map(time_of)):
        return None
    return Mirror(mirror, skew, band)


def _reflect(space: isl.PwAff, time: isl.PwAff) -> tuple[str, isl.Set, isl.Aff, int] | None:
    """One statement's member 1 (`space`) without its constant and with its one iterator that
    member 0 (`time`) does not use negated, with the statement's name, domain and skew; None
    unless both are single affine pieces and exactly one such iterator (or none) exists."""
    name = space.get_space().get_tuple_name(isl.dim_type.in_)
    space_pieces, time_pieces = space.get_pieces(), time.get_pieces()
    if name is None or len(space_pieces) != 1 or len(time_pieces) != 1:
        return None
    domain, aff = space_pieces[0]
    time_aff = time_pieces[0][1]
    reflected = aff.set_constant_val(isl.Val.zero(aff.get_ctx()))
    negated, skew = 0, 1
    for dim in range(aff.dim(isl.dim_type.in_)):
        coefficient = aff.get_coefficient_val(isl.dim_type.in_, dim)
        along_time = time_aff.get_coefficient_val(isl.dim_type.in_, dim)
        if coefficient.is_zero():
            continue
        if along_time.is_zero():
            reflected = reflected.set_coefficient_val(isl.dim_type.in_, dim, coefficient.neg())
            negated += 1
        else:
            ratio = coefficient.div(along_time).abs().ceil()
            skew = max(skew, int(ratio.to_python()))
    if negated > 1:
        return None
    return name, domain, reflected, skew


def _forward_offsets(affs: dict[str, isl.Aff], dependences: isl.UnionMap) -> dict[str, int] | None:
    """A constant per statement such that `affs` plus it never decreases along a dependence:
    each dependence S -> T asks c_T - c_S >= -min(aff_T(target) - aff_S(source)), a system of
    difference constraints, solved by longest paths (Bellman-Ford); None where a minimum is
    unbounded or the constraints contradict each other (a cycle that gains)."""
    needs: list[tuple[str, str, int]] = []
    for dependence in maps_of(dependences):
        source = dependence.get_tuple_name(isl.dim_type.in_)
        target = dependence.get_tuple_name(isl.dim_type.out)
        if source not in affs or target not in affs:
            return None
        gaps = (
            dependence.apply_domain(isl.Map.from_aff(affs[source]))
            .apply_range(isl.Map.from_aff(affs[target]))
            .deltas()
            .project_out_all_params()
        )
        if gaps.is_empty():
            continue
        first = gaps.lexmin()
        if not first.is_singleton():
            return None  # unbounded below
        value = first.sample_point().get_coordinate_val(isl.dim_type.set, 0)
        if not value.is_int():
            return None
        needs.append((source, target, int(value.to_python())))
    offsets = dict.fromkeys(affs, 0)
    for _ in range(len(affs) + 1):
        changed = False
        for source, target, lowest in needs:
            if offsets[target] < offsets[source] - lowest:
                offsets[target] = offsets[source] - lowest
                changed = True
        if not changed:
            return offsets
    return None


def diamond_wavefront(node: isl.ScheduleNode, mirror: Mirror, side: int) -> isl.ScheduleNode:
    """Tile band `node` (of `mirror.band`, tiled by `band_tile`) as diamonds of `side` along
    member 1 and its mirror, run as a wavefront (see the module docstring); the returned node
    stands at `node`'s position."""
    ctx = node.get_ctx()
    size = isl.Val.int_from_si(ctx, side)

    def tiles(values: isl.UnionPwAff) -> isl.UnionPwAff:
        return values.scale_down_val(size).floor().scale_val(size)

    along, across = tiles(mirror.band.get_at(1)), tiles(mirror.member)
    tile = node.band_get_partial_schedule()
    diamonds = tile.set_at(0, along.add(across)).set_at(1, along)
    node = node.delete().insert_partial_schedule(diamonds).band_set_permutable(1)
    node = node.band_split(1)
    return node.child(0).insert_mark(isl.Id(WAVEFRONT_MARK)).parent()
