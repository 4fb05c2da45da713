"""A new schedule for a Scop, computed by isl's scheduler under a named preset and fusion policy;
a schedule is only ever returned after it is proven to respect every dependence.

The isl side only (no MLIR): `schedule_scop(scop, deps, *, options)` builds
`isl.ScheduleConstraints` from the statement domains and the dependences (validity = RAW ∪ WAR ∪
WAW, proximity = RAW plus read-after-read pairs under `fusion="max"`, coincidence = validity), sets
the isl context's `schedule_*` options for the preset (`scheduler_settings`) for the duration of
the call only, and runs `compute_schedule` under an operation budget. The scop's context (what is
known of the parameters) goes to the scheduler, and the returned tree's domain is restricted to
it, which tells the legality check (and the AST build) what the schedule assumes. Anything isl
cannot do (an isl error, the budget spent) or a result that `check_schedule_legal` rejects raises
`ScheduleError`; `schedule_or_original` turns that into the source order with the reason.

Options read (polyflow.options.Options):
    schedule_preset: "pluto", "isl" or "feautrier" (see `scheduler_settings`).
    fusion: "max", "min" or "smart" (see `scheduler_settings`).

The isl context carries the options, so two threads must not schedule on one context at once;
compile work runs in worker processes, one scop at a time, so this never happens there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Protocol

import islpy as isl

from polyflow.poly.budget import BudgetExhausted, isl_budget, step_budget
from polyflow.poly.isl_helpers import flow, maps_of, padded_schedule, schedule_tree

if TYPE_CHECKING:
    from polyflow.options import Options

    # Types only: model.py also holds the MLIR side, which the isl side never loads.
    from .model import Scop

# isl counts elementary operations (roughly one per microsecond here: PolyBench's 2mm, four
# statements, takes ~19 000). The default (poly/budget.py: five million) bounds a scheduling run to a
# few seconds; a scop that needs more is left in source order rather than stalling the compile.
# A count, not a clock, so the same input always gets the same answer (compile results are
# cached by their inputs).
DEFAULT_MAX_OPERATIONS = step_budget("scheduling")


class ScheduleError(Exception):
    """isl found no schedule, ran out of its operation budget, or produced an illegal one."""


class SchedulingBudgetExhausted(BudgetExhausted, ScheduleError):
    """isl's scheduler ran out of its operation budget (both a `ScheduleError`, for callers
    that only keep the source order, and a `BudgetExhausted`, for those that fall back)."""


# ----- what the scheduler reads of the dependences (dependences.py has the real ones)


class DependencesLike(Protocol):
    """What the scheduler reads of `Dependences` (CONTRACT.md), as statement-instance maps."""

    @property
    def validity(self) -> isl.UnionMap: ...
    @property
    def proximity(self) -> isl.UnionMap: ...
    @property
    def coincidence(self) -> isl.UnionMap: ...


# ----- presets


@dataclass(frozen=True)
class SchedulerSettings:
    """The isl `schedule_*` context options one run uses, plus what goes into proximity.

    Every field is set explicitly on each run, so a result never depends on what an earlier run
    left in the context. Field names are isl's option names without the `schedule_` prefix.
    """

    algorithm: int  # isl.schedule_algorithm.ISL or .FEAUTRIER
    maximize_band_depth: bool
    maximize_coincidence: bool
    outer_coincidence: bool
    treat_coalescing: bool
    whole_component: bool
    serialize_sccs: bool
    separate_components: bool = True
    carry_self_first: bool = True
    split_scaled: bool = True
    # Not an isl option: add read-after-read pairs (input reuse) to the proximity constraints.
    input_reuse: bool = False


def scheduler_settings(options: Options) -> SchedulerSettings:
    """The isl scheduler settings for `options.schedule_preset` and `options.fusion`.

    Presets (the algorithm's knobs):
        pluto: PPCG's choices for a CPU target: maximal band depth (long permutable bands to tile),
            maximal coincidence (parallel dimensions first), no outer-coincidence requirement
            (PPCG asks for it only on GPU targets, where the outer band must map to blocks),
            coalescing treated.
        isl: isl's own defaults (no band-depth or coincidence maximization).
        feautrier: isl with Feautrier's algorithm (carry as many dependences as early as possible;
            minimal latency rather than tileability).

    Fusion (how statements are grouped into shared loops; applies to every preset):
        max: `whole_component=1`, `serialize_sccs=0`: a whole connected component is scheduled at
            once, so every statement that can share loops does, even at the cost of parallelism;
            read-after-read pairs join proximity so statements that only read the same data fuse.
        min: `serialize_sccs=1`: each strongly connected component gets its own loop nest.
        smart: `whole_component=0`, `serialize_sccs=0`, proximity = RAW only: isl's clustering
            merges two clusters only along proximity (producer → consumer) edges, and only when
            the merged band loses no depth or coincidence, as PPCG does by default.
    """
    preset = options.schedule_preset
    fusion = options.fusion
    pluto = preset == "pluto"
    return SchedulerSettings(
        algorithm=(
            isl.schedule_algorithm.FEAUTRIER
            if preset == "feautrier"
            else isl.schedule_algorithm.ISL
        ),
        maximize_band_depth=pluto,
        maximize_coincidence=pluto,
        outer_coincidence=options.target == "cuda",
        treat_coalescing=True,
        whole_component=fusion == "max",
        serialize_sccs=fusion == "min",
        input_reuse=fusion == "max",
    )


_ISL_OPTION_FIELDS = tuple(f.name for f in fields(SchedulerSettings) if f.name != "input_reuse")


@contextmanager
def isl_scheduler_options(
    ctx: isl.Context, settings: SchedulerSettings, *, max_operations: int
) -> Iterator[None]:
    """Set the scheduler options and operation budget on `ctx`; restore what was there after."""
    saved = {name: getattr(ctx, f"get_schedule_{name}")() for name in _ISL_OPTION_FIELDS}
    try:
        for name in _ISL_OPTION_FIELDS:
            getattr(ctx, f"set_schedule_{name}")(int(getattr(settings, name)))
        with isl_budget(ctx, "scheduling", max_operations):
            yield
    except BudgetExhausted as spent:
        raise SchedulingBudgetExhausted("scheduling", max_operations) from spent.__cause__
    finally:
        for name, value in saved.items():
            getattr(ctx, f"set_schedule_{name}")(value)


# ----- scheduling


def schedule_scop(
    scop: Scop,
    deps: DependencesLike,
    *,
    options: Options,
    max_operations: int = DEFAULT_MAX_OPERATIONS,
) -> isl.Schedule:
    """A legal new schedule tree for `scop` under `options`, or `ScheduleError` saying why not
    (`BudgetExhausted`, a `ScheduleError`, when isl needs more than `max_operations` operations;
    0: unbounded). The result is checked with `check_schedule_legal` against `deps.validity`
    before it is returned.
    """
    settings = scheduler_settings(options)
    domain = scop.domain
    try:
        proximity = deps.proximity
        if settings.input_reuse:
            proximity = proximity.union(input_reuse(scop))
        constraints = (
            isl.ScheduleConstraints.on_domain(domain)
            .set_context(scop.context)
            .set_validity(deps.validity)
            .set_proximity(proximity)
            .set_coincidence(deps.coincidence)
        )
        with isl_scheduler_options(domain.get_ctx(), settings, max_operations=max_operations):
            schedule = constraints.compute_schedule()
            schedule = _with_context(schedule, scop.context)
            legal = check_schedule_legal(schedule, deps.validity)
    except isl.Error as error:
        raise ScheduleError(f"isl scheduler failed: {_isl_message(error)}") from error
    if not legal:
        raise ScheduleError("isl's schedule violates a dependence")
    return schedule


def _with_context(schedule: isl.Schedule, context: isl.Set) -> isl.Schedule:
    """`schedule` over the instances that exist where the scop's context holds: isl's scheduler
    uses the context (a dependence that only exists for parameter values the context excludes
    need not be respected), so the legality check must see it too. (A context node would say
    the same, but isl's AST build rejects one at the top of the tree.)"""
    if context.plain_is_universe():
        return schedule
    return schedule.intersect_domain(schedule.get_domain().intersect_params(context))


@dataclass(frozen=True)
class ScheduleOutcome:
    """The schedule to generate code from; `reason` says why it is the source order, if it is."""

    schedule: isl.Schedule
    rescheduled: bool
    reason: str = ""


def schedule_or_original(
    scop: Scop,
    deps: DependencesLike,
    *,
    options: Options,
    max_operations: int = DEFAULT_MAX_OPERATIONS,
) -> ScheduleOutcome:
    """`schedule_scop`'s result, or the source order (`original_schedule`) with the reason."""
    try:
        schedule = schedule_scop(scop, deps, options=options, max_operations=max_operations)
    except ScheduleError as error:
        return ScheduleOutcome(original_schedule(scop), rescheduled=False, reason=str(error))
    return ScheduleOutcome(schedule, rescheduled=True)


def original_schedule(scop: Scop) -> isl.Schedule:
    """The source order as a schedule tree (sequences and one-member bands, like the loops)."""
    domain = scop.domain
    tree = schedule_tree(domain, scop.initial_schedule.intersect_domain(domain))
    return _with_context(tree, scop.context)


# ----- profitability

# A skewed band (time tiling of a stencil) with more members than this is not used. The 3-deep
# skewed bands of fdtd-2d, seidel-2d and jacobi-2d pay off tiled whole; a 4-deep one (heat-3d)
# only with its rows left whole (`MAX_TILED_SKEWED_MEMBERS`, see tiling.py): untiled, or tiled
# in all four members, it ran up to 5x slower than its source order at LARGE size.
MAX_SKEWED_BAND = 4
# A skewed band this deep is used only on a CPU, tiled with the default sizes (see
# `deep_skew_pays`).
DEEP_SKEWED_BAND = 4
# Nor is any skewed band when every array the scop touches has a known size and together they
# fit in this many bytes (counted at 8 per element, the widest scalar): time tiling buys locality
# that such data has anyway, and costs the vectorization of the source order (jacobi-1d at LARGE,
# two arrays of 16 KiB, ran at 0.45x gcc skewed and tiled).
MIN_SKEWED_FOOTPRINT = 256 * 1024


def deep_skew_pays(options: Options) -> str | None:
    """Why a skewed band of `DEEP_SKEWED_BAND` members does not pay off under `options`, or
    None when it does: on a CPU, tiled with the default sizes (its rows whole). heat-3d at
    LARGE, over gcc -O3: source order 1.0-1.1x on 1 thread, 2.15-2.65x on 2 (its parallel
    sweeps stream both arrays on both cores); time-tiled 1.5-1.6x on 1, 2.1-2.3x on 2 (a
    wavefront of its tiles). One build runs on any number of threads, so the tiles are kept
    on several threads too."""
    if not options.tile or options.tile_sizes is not None:
        return "it pays off only tiled with its rows whole (the default tile sizes)"
    if options.target != "cpu":
        return "it is time-tiled for CPUs only"
    return None


def data_footprint(scop: Scop) -> int | None:
    """The bytes of all arrays `scop` accesses, at 8 per element; None when one's size is not
    known."""
    total = 0
    for shape in scop.arrays.values():
        if any(extent < 0 for extent in shape):
            return None
        elements = 1
        for extent in shape:
            elements *= extent
        total += 8 * elements
    return total


def deepest_skewed_band(schedule: isl.Schedule) -> int:
    """The member count of the largest band of `schedule` in which some statement's schedule
    combines two or more loop iterators (skewing); 0 when nothing is skewed."""
    return _deepest_skewed(schedule.get_root())


def _deepest_skewed(node: isl.ScheduleNode) -> int:
    here = 0
    if node.get_type() == isl.schedule_node_type.band and _is_skewed(node):
        here = node.band_n_member()
    below = [_deepest_skewed(node.child(k)) for k in range(node.n_children())]
    return max([here, *below])


def _is_skewed(band: isl.ScheduleNode) -> bool:
    partial = band.band_get_partial_schedule()
    pieces: list[isl.Aff] = []
    for member in range(band.band_n_member()):
        functions: list[isl.PwAff] = []
        partial.get_at(member).foreach_pw_aff(functions.append)
        for function in functions:
            function.foreach_piece(lambda _set, aff: pieces.append(aff))
    return any(_iterators_used(aff) >= 2 for aff in pieces)


def _iterators_used(aff: isl.Aff) -> int:
    return sum(
        1
        for k in range(aff.dim(isl.dim_type.in_))
        if not aff.get_coefficient_val(isl.dim_type.in_, k).is_zero()
    )


# ----- legality


def check_schedule_legal(
    schedule: isl.Schedule, validity: isl.UnionMap, *, context: isl.Set | None = None
) -> bool:
    """Whether every dependence in `validity` goes lexicographically forward under `schedule`.

    Only parameter values for which the schedule runs some instance count (`schedule_scop`
    restricts its domain to the scop's context), and of those only the ones `context` allows.
    A dependence on an instance the schedule does not run makes it illegal.
    """
    domain = schedule.get_domain()
    validity = validity.intersect_params(domain.params())
    if context is not None:
        validity = validity.intersect_params(context)
    if validity.is_empty():
        return True
    if not validity.domain().union(validity.range()).is_subset(domain):
        return False
    time = padded_schedule(schedule.get_map())
    # { source time -> sink time } for every dependence, all in the one padded time space.
    dependence_times = validity.apply_domain(time).apply_range(time)
    forward = isl.UnionMap.from_map(isl.Map.lex_lt(_time_space(time)))
    return bool(dependence_times.is_subset(forward))


def _time_space(time: isl.UnionMap) -> isl.Space:
    """The (one, anonymous) time space of a padded schedule map."""
    maps = maps_of(time)
    width = maps[0].dim(isl.dim_type.out) if maps else 0
    return isl.Space.set_alloc(time.get_ctx(), 0, width)


# ----- input reuse


def input_reuse(scop: Scop) -> isl.UnionMap:
    """Read-after-read pairs: each read instance → the next read of the same element.

    Only the nearest earlier read in source order is paired (a later read "kills" older ones), so
    the relation stays as small as RAW dependences are.
    """
    reads = scop.accesses("read")
    if reads.is_empty():
        return reads
    order = padded_schedule(scop.initial_schedule.intersect_domain(scop.domain))
    pairs, _ = flow(reads, order, must_source=reads)
    return pairs


# ----- small named isl operations


def _isl_message(error: isl.Error) -> str:
    # islpy's message is "call to isl_X failed: <reason> in <file>:<line>"; keep the reason.
    text = str(error)
    reason = text.split(" failed: ", 1)[-1]
    return reason.rsplit(" in /", 1)[0]
