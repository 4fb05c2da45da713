"""The polyhedral stage: affine functions → rescheduled, tiled, parallel affine functions, never
wrong code.

`schedule_module(module, options)` runs, at `-O3` (`scheduling_enabled`), on every function the
raising stage works on (not the C-ABI entries `__polyflow_*`, not functions marked
`polyflow.no_raise`, not those whose raising failed), each on its own copy:

1. rescheduling (`options.schedule`): statement splitting (`schedule-split-statements`, with
   `options.split`) → `extract_scops` (model.py) → per scop `compute_dependences`
   (dependences.py) → `schedule_scop` (scheduler.py) → with smart fusion, `fuse_shared_streams`
   (stream_fusion.py: independent nests reading one large array in the same order share
   loops) → `tile_schedule` (tiling.py; it honours
   `options.tile`, and splits the index sets of bands it leaves untiled, index_split.py) →
   `check_schedule_legal` on the final schedule → `generate` (codegen.py) →
   cleanups (raise-mem2reg, raise-reductions, canonicalize, cse);
2. parallelization (`options.parallel`): `schedule-parallelize` (parallelize.py);
3. micro-kernels (`options.micro_kernels`, with rescheduling): `schedule-micro-kernels`
   (micro_kernel.py: contraction nests → register-blocked vector code for the target's
   register width, `polyflow.target`).

A scop that cannot be scheduled keeps its code (with a note). When rescheduling a function fails
anywhere else, the function keeps its raised code, is marked `polyflow.not_scheduled = "<reason>"`
and `schedule_remarks` warns about it; when parallelization fails, the function keeps its
rescheduled, sequential code with the same mark, and when the micro-kernels fail, the
function keeps the code of the steps before, with the same mark. The isl schedule trees of each function go to
its `polyflow.schedule` attribute (`schedule_trees`, `--emit=schedule`). What the stage says
goes to the compile report (`schedule_remarks`): the functions not scheduled (warnings), what a
step skipped and which loops reorder float reductions (notes), and the scops rescheduled, the
bands tiled, the loops run in parallel and the micro-kernels (remarks), each at its source
position.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

import islpy as isl
from mlir import ir
from mlir.passmanager import PassManager

from polyflow import forked, passes
from polyflow.ir.functions import raisable_functions, scratch_module, source_names, swap_in
from polyflow.ir.locations import position_text
from polyflow.ir.names import NOT_AFFINE_ATTR, NOT_SCHEDULED_ATTR, SCHEDULE_ATTR, symbol_name
from polyflow.ir.remarks import attach_remarks, remark_at, take_remarks
from polyflow.options import Options
from polyflow.poly import isl_helpers as ih
from polyflow.poly.budget import BudgetExhausted, isl_budget, step_budget
from polyflow.report import Json, Remark
from polyflow.target import target_of

from .codegen import CodegenError, generate
from .dependences import (
    MAX_QUANTIFIED_COEFFICIENT,
    Dependences,
    compute_dependences,
    largest_quantified_coefficient,
)
from .gpu_order import coincident_first
from .model import Scop, ScopRegion, extract_scops
from .scheduler import (
    DEEP_SKEWED_BAND,
    MAX_SKEWED_BAND,
    MIN_SKEWED_FOOTPRINT,
    ScheduleError,
    check_schedule_legal,
    data_footprint,
    deep_skew_pays,
    deepest_skewed_band,
    schedule_scop,
)
from .stream_fusion import fuse_shared_streams
from .tiling import TiledBand, describe_schedule, tile_schedule

# After code generation: scratchpads back to SSA values, reductions marked again (the
# parallelizer reads the marks), scratchpad state nothing reads dropped (a loop carrying it
# cannot run in parallel), the generated bounds and subscripts folded.
CLEANUP_PIPELINE = "raise-mem2reg,raise-reductions,schedule-dead-scalars,canonicalize,cse"


class _StepFailed(Exception):
    """A step that changes the IR failed: the function must be restored."""


class ScheduleNotes(list[str]):
    """What rescheduling one function says: its notes as text (a list, as tests and the text
    report read them) and as remarks at the position of the scop they are about (`at`), with
    the facts (`fact`) beside them."""

    def __init__(self) -> None:
        super().__init__()
        self.at: ir.Location | None = None
        self.remarks: list[Remark] = []

    def append(self, text: str) -> None:
        super().append(text)
        self.remarks.append(remark_at(self.at, "schedule", _note_kind(text), "note", text))

    def fact(self, kind: str, message: str, data: dict[str, Json] | None = None) -> None:
        self.remarks.append(remark_at(self.at, "schedule", kind, "remark", message, data))


def _note_kind(text: str) -> str:
    if "source order kept" in text:
        return "source-order"
    if "untiled" in text or "not tiled" in text:
        return "untiled"
    if "without fusion" in text:
        return "unfused"
    return "schedule-note"


class StepTimes:
    """Seconds spent in each step of the stage (`--time` shows them under `affine-opt`)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        # functions whose processing ran past `Options.compile_timeout` (their result depends on
        # the machine's speed, so the compile must not be cached)
        self.past_deadline: list[str] = []
        # inside `recording_dependences()`: each function's scops (by symbol), as
        # `_dependence_record` writes them; None: not recording (the strings cost time)
        self.dependences: dict[str, list[dict[str, Json]]] | None = None

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start


# The steps of the latest `schedule_module` call (compile work runs one module at a time per
# process: the service's workers and the CLI alike).
timer = StepTimes()


# at most this many dependence relations are recorded per scop (`left_out` counts the others)
MAX_RECORDED_DEPENDENCES = 500


@contextmanager
def recording_dependences() -> Iterator[dict[str, list[dict[str, Json]]]]:
    """Within it, the `schedule_module` calls of this process record the dependences isl
    computed for each scop (the explorer shows them): the dict yielded maps each function's
    symbol to its scops' records, each `{"scop", "statements": {name: [line, column]},
    "dependences": [{"kind": "flow"|"anti"|"output", "relation", "source", "sink",
    "source_line", "sink_line"}], "left_out"}`, as the latest scheduling of it left them."""
    recorded: dict[str, list[dict[str, Json]]] = {}
    timer.dependences = recorded
    try:
        yield recorded
    finally:
        timer.dependences = None


def _dependence_record(scop: Scop, deps: Dependences, index: int) -> dict[str, Json]:
    """One scop's dependences as strings, one per pair of statements and kind (RAW: flow,
    WAR: anti, WAW: output), with the source lines of their statements."""
    lines = {s.name: s.line or None for s in scop.statements}
    out: list[Json] = []
    left_out = 0
    for kind, relation in (("flow", deps.raw), ("anti", deps.war), ("output", deps.waw)):
        for piece in ih.maps_of(relation):
            if len(out) >= MAX_RECORDED_DEPENDENCES:
                left_out += 1
                continue
            source = piece.get_tuple_name(isl.dim_type.in_)
            sink = piece.get_tuple_name(isl.dim_type.out)
            out.append(
                {
                    "kind": kind,
                    "relation": piece.to_str(),
                    "source": source,
                    "sink": sink,
                    "source_line": lines.get(source),
                    "sink_line": lines.get(sink),
                }
            )
    return {
        "scop": index,
        "statements": {s.name: [s.line, s.column] for s in scop.statements},
        "dependences": out,
        "left_out": left_out,
    }


def past_deadline() -> list[str]:
    """The functions of the latest `schedule_module` call that ran past
    `Options.compile_timeout` and kept their raised code."""
    return list(timer.past_deadline)


def step_times() -> dict[str, float]:
    """Seconds per step (statement splitting, model, dependences, scheduling, tiling, ast,
    cleanup, parallelize, micro-kernels) of the latest `schedule_module` call."""
    return dict(timer.seconds)


def scheduling_enabled(options: Options) -> bool:
    """Whether the `affine-opt` stage does anything: `-O3` with rescheduling or
    parallelization on (and raising, which makes the affine code the stage works on)."""
    return (
        options.opt_level == 3
        and (options.schedule or options.parallel)
        and options.raising_enabled
    )


def schedulable_functions(module: ir.Module) -> Iterator[ir.Operation]:
    """The functions the stage works on: those raising works on, minus those it left unraised."""
    for fn in raisable_functions(module):
        if NOT_AFFINE_ATTR not in fn.attributes:
            yield fn


# The pass managers of the current `schedule_module` run, by pipeline element: building one
# costs more than running it on a small function (canonicalize collects every dialect's
# patterns: 0.5 ms against 0.15 ms), and a file may have thousands of functions. Kept for one
# run only: a pass manager holds its context alive.
_managers: dict[str, PassManager] | None = None


def _pass_manager(element: str) -> PassManager:
    if _managers is None:
        return passes.function_pass_manager(element)
    if element not in _managers:
        _managers[element] = passes.function_pass_manager(element)
    return _managers[element]


def _run_pipeline(fn: ir.Operation, pipeline: str) -> None:
    """Run a pipeline (polyflow and upstream passes) on one function; a failure raises
    `_StepFailed` naming the pass."""
    for element in passes.pipeline_elements(pipeline):
        try:
            _pass_manager(element).run(fn)
        except Exception as exc:
            raise _StepFailed(f"pass '{element}' failed: {_describe(exc)}") from exc


def _describe(exc: Exception) -> str:
    if isinstance(exc, ir.MLIRError):
        details = "; ".join(str(d.message) for d in exc.error_diagnostics)
        return details or "it signalled failure"
    return f"{type(exc).__name__}: {exc}"


def _access_relations(scop: Scop) -> list[isl.Map]:
    return [access.relation for stmt in scop.statements for access in stmt.accesses]


def reschedule_function(
    fn: ir.Operation, options: Options, notes: ScheduleNotes, *, expand_scalars: bool = True
) -> list[str]:
    """Reschedule the scops of function `fn` in place (steps 1 of the module docstring); returns
    the schedule tree of each scop it generated code for. A scop that cannot be scheduled is
    left as it is, with a note; a failure that may have changed the IR raises.
    `expand_scalars`: see model.find_scops."""
    if options.split:
        with timer.step("statement splitting"):
            _run_pipeline(fn, "schedule-split-statements")
    trees: list[str] = []
    recorded = None
    if timer.dependences is not None:  # a second try (without expansion) starts afresh
        recorded = timer.dependences[symbol_name(fn)] = []
    try:
        with timer.step("model"):
            found = extract_scops(fn, expand_scalars=expand_scalars)
    except Exception as exc:
        # it may have demoted values to scratchpads before failing: restore the function
        raise _StepFailed(f"extract_scops failed: {_describe(exc)}") from exc
    for index, (scop, region) in enumerate(found):
        where = f"scop {index}"
        located = f"{where} at {position_text(region.ops[0].location)}"
        notes.at = region.ops[0].location
        tiles: list[TiledBand] = []
        try:
            with timer.step("dependences"):
                deps = _dependences(scop, options, notes, located)
            if deps is None:
                continue
            if recorded is not None:
                try:
                    recorded.append(_dependence_record(scop, deps, index))
                except Exception as exc:  # what is shown must never change what is compiled
                    recorded.append({"scop": index, "error": _describe(exc)})
            with timer.step("scheduling"):
                schedule = _new_schedule(scop, deps, options, notes, located)
            if schedule is None:
                continue
            # (schedule_scop checked isl's schedule; reordering it for the GPU needs a check)
            if options.target == "cuda":
                schedule = coincident_first(schedule)
                if not check_schedule_legal(schedule, deps.validity):
                    notes.append(
                        f"{where}: the schedule violates a dependence; source order kept"
                    )
                    continue
            skew_depth = deepest_skewed_band(schedule)
            if skew_depth > MAX_SKEWED_BAND:
                notes.append(
                    f"{where}: source order kept: a skewed band deeper than "
                    f"{MAX_SKEWED_BAND} loops does not pay off"
                )
                continue
            deep_skew_loses = deep_skew_pays(options) if skew_depth >= DEEP_SKEWED_BAND else None
            if deep_skew_loses is not None:
                notes.append(
                    f"{where}: source order kept: a skewed band of {skew_depth} loops does not "
                    f"pay off here: {deep_skew_loses}"
                )
                continue
            footprint = data_footprint(scop) if skew_depth else None
            if footprint is not None and footprint <= MIN_SKEWED_FOOTPRINT:
                notes.append(
                    f"{where}: source order kept: a skewed band does not pay off on "
                    f"{footprint} bytes of data, which stay in cache anyway"
                )
                continue
            if options.target == "cuda":  # the GPU mapping makes blocks of the parallel band
                tiled = schedule
            else:
                with timer.step("tiling"):
                    tiled = _fused_and_tiled(
                        scop, region, schedule, deps, options, notes, located, tiles
                    )
        except Exception as exc:  # nothing is changed yet: this scop keeps its code
            notes.append(f"{where}: source order kept: {_describe(exc)}")
            continue
        # The AST of a tiled schedule can outgrow its budget where the untiled one's does not.
        candidates = [tiled, schedule] if tiled is not schedule else [schedule]
        generated = None
        for attempt, candidate in enumerate(candidates):
            try:
                with timer.step("ast"):
                    generate(
                        region,
                        scop,
                        candidate,
                        deps.validity,
                        budget_base=options.isl_max_operations,
                    )
                generated = candidate
                break
            except CodegenError as exc:
                # codegen's own refusal leaves the region as it was: only this scop keeps its code
                spent = isinstance(exc.__cause__, BudgetExhausted)
                if spent and attempt + 1 < len(candidates):
                    notes.append(f"{located}: {_describe(exc)}; generated untiled")
                    continue
                notes.append(f"{where}: source order kept: {_describe(exc)}")
                break
            except Exception as exc:
                raise _StepFailed(f"code generation failed for {where}: {_describe(exc)}") from exc
        if generated is None:
            continue
        schedule = generated
        trees.append(f"# {where}\n{describe_schedule(schedule).rstrip()}")
        notes.fact(
            "rescheduled",
            f"{where} rescheduled ({len(scop.statements)} statement"
            f"{'s' if len(scop.statements) != 1 else ''})",
            {"scop": index, "statements": len(scop.statements)},
        )
        if generated is tiled and tiled is not candidates[-1]:
            for band in tiles:
                notes.fact(
                    "tiled",
                    f"{where}: band {band.describe()}",
                    {
                        "scop": index,
                        "sizes": list(band.sizes),
                        "second_level": band.second_level,
                        "wavefront": band.wavefront,
                        "contraction": band.contraction,
                        "distributed": band.distributed,
                        "interleaved": band.interleaved,
                        "skewed": band.skewed,
                        "whole_rows": band.whole_rows,
                        "diamond": band.diamond,
                        "row_strips": band.row_strips,
                    },
                )
    with timer.step("cleanup"):
        _run_pipeline(fn, CLEANUP_PIPELINE)
    return trees


def _dependences(scop: Scop, options: Options, notes: list[str], where: str) -> Dependences | None:
    """The scop's dependences; None (with a note) where isl's budget for them runs out, or
    where they are beyond what isl's scheduler handles in bounded time
    (`MAX_QUANTIFIED_COEFFICIENT`).

    Then the scop keeps its code, and its loops are parallelized by MLIR's per-loop dependence
    analysis alone (`schedule-parallelize`, which runs whatever happens here). isl's scheduler
    is not tried with coarser, memory-based dependences: its time is not bounded by the
    operation count (isl counts only part of its work), and on the inputs whose dataflow runs out
    it ran for minutes with them."""
    try:
        deps = compute_dependences(scop, max_operations=step_budget("dependences", options))
    except BudgetExhausted as exc:
        notes.append(
            f"{where}: source order kept: {exc}; its loops are parallelized by MLIR's "
            "dependence analysis only"
        )
        return None
    coefficient = largest_quantified_coefficient(deps.validity)
    if coefficient > MAX_QUANTIFIED_COEFFICIENT:
        notes.append(
            f"{where}: source order kept: its dependences hold modulo conditions with "
            f"coefficients up to {coefficient:,} (over {MAX_QUANTIFIED_COEFFICIENT:,}), which "
            "isl's scheduler cannot handle in bounded time (coupled subscripts of a linearized "
            "array, not split into dimensions); its loops are parallelized by MLIR's "
            "dependence analysis only"
        )
        return None
    return deps


def _new_schedule(
    scop: Scop, deps: Dependences, options: Options, notes: list[str], where: str
) -> isl.Schedule | None:
    """isl's schedule for the scop; where its budget runs out, a second try that fuses nothing
    (each strongly connected component alone: a smaller problem each); None (with a note) when
    that runs out too or isl finds nothing."""
    budget = step_budget("scheduling", options)
    try:
        return schedule_scop(scop, deps, options=options, max_operations=budget)
    except BudgetExhausted as exc:
        if options.fusion == "min":
            notes.append(f"{where}: source order kept: {exc}")
            return None
        first = str(exc)
    unfused = options.model_copy(update={"fusion": "min"})
    try:
        schedule = schedule_scop(scop, deps, options=unfused, max_operations=budget)
    except ScheduleError as exc:
        notes.append(f"{where}: source order kept: {first}, and unfused: {exc}")
        return None
    notes.append(f"{where}: {first}; scheduled without fusion")
    return schedule


def _fused_and_tiled(
    scop: Scop,
    region: ScopRegion,
    schedule: isl.Schedule,
    deps: Dependences,
    options: Options,
    notes: list[str],
    where: str,
    tiles: list[TiledBand],
) -> isl.Schedule:
    """`schedule` with smart fusion's shared streams and tiling (module docstring), under the
    tiling budget; untiled (with a note) when that runs out or tiling is illegal. The bands
    tiled go to `tiles` (cleared when the tiling is not kept)."""
    try:
        with isl_budget(schedule.get_ctx(), "tiling", step_budget("tiling", options)):
            if options.fusion == "smart":
                fused = fuse_shared_streams(schedule, scop, validity=deps.validity)
                if check_schedule_legal(fused, deps.validity):
                    schedule = fused
                else:  # a set's children are independent: a bug, say so
                    notes.append(f"{where}: fusing nests that share an array broke a dependence")
            tiled = tile_schedule(
                schedule,
                options=options,
                accesses=_access_relations(scop),
                validity=deps.validity,
                array_shapes=scop.arrays,
                element_bytes=_element_bytes(region),
                tiled=tiles,
                float_arrays=_float_arrays(region),
            )
            if check_schedule_legal(tiled, deps.validity):
                return tiled
    except BudgetExhausted as exc:
        tiles.clear()
        notes.append(f"{where}: {exc}; not tiled")
        return schedule
    tiles.clear()
    # tiling permutable bands is legal by construction: a bug, say so
    notes.append(f"{where}: the tiled schedule violates a dependence; untiled")
    return schedule


def _float_arrays(region: ScopRegion) -> frozenset[str]:
    """The scop's arrays of floating-point elements."""
    return frozenset(
        name
        for name, array in region.arrays.items()
        if isinstance(ir.MemRefType(array.type).element_type, ir.FloatType)
    )


def _element_bytes(region: ScopRegion) -> int:
    """The size of the widest element among the scop's arrays (8 when none is known)."""
    widths = []
    for array in region.arrays.values():
        element = ir.MemRefType(array.type).element_type
        if isinstance(element, ir.FloatType | ir.IntegerType):
            widths.append(max(element.width // 8, 1))
    return max(widths, default=8)


def _process_function(module: ir.Module, fn: ir.Operation, options: Options) -> None:
    """Both steps of the module docstring on `fn`, each on a copy, swapped in on success."""
    for attr in (NOT_SCHEDULED_ATTR, SCHEDULE_ATTR):  # from an earlier run
        if attr in fn.attributes:
            del fn.attributes[attr]
    notes = ScheduleNotes()
    failure: str | None = None
    trees: list[str] = []
    if options.schedule:
        # Expanded scratchpads first; where anything fails with them, once more without.
        for expand in (True, False):
            scratch, copy = scratch_module(module, fn)
            notes = ScheduleNotes()
            try:
                trees = reschedule_function(copy, options, notes, expand_scalars=expand)
                swapped = swap_in(fn, copy)
                if swapped is None:
                    failure = "rescheduling changed the function's type"
                else:
                    fn = swapped
                    failure = None
                    break
            except Exception as exc:  # anything a step does wrong leaves the raised code
                reason = exc if isinstance(exc, _StepFailed) else _describe(exc)
                failure = f"rescheduling failed: {reason}"
                trees = []
            finally:
                del scratch
    # before the steps below copy the function: they keep what it carries
    attach_remarks(fn, notes.remarks)
    if options.parallel:
        scratch, copy = scratch_module(module, fn)
        element = (
            f"schedule-parallelize{{parallel_reductions={str(options.parallel_reductions).lower()}"
            f" reassociate={str(options.reassociation).lower()}"
            f" min_trip={options.min_parallel_trip} min_work={options.min_parallel_work}}}"
        )
        if options.target == "cuda":  # the GPU mapping chooses among all parallel loops
            element = "schedule-mark-parallel"
        try:
            with timer.step("parallelize"):
                _run_pipeline(copy, element)
            swapped = swap_in(fn, copy)
            if swapped is None:
                failure = failure or "parallelization changed the function's type"
            else:
                fn = swapped
        except Exception as exc:
            reason = exc if isinstance(exc, _StepFailed) else _describe(exc)
            failure = f"{failure + '; ' if failure else ''}parallelization failed: {reason}"
        del scratch
    if options.micro_kernels and options.schedule and options.target != "cuda":
        scratch, copy = scratch_module(module, fn)
        contract = str(options.fp_contract == "fast").lower()
        bits = target_of(options.march, options.mtune).vector_bits
        # AVX and AVX-512 read and write masked vectors natively; SSE would scalarize them
        masked = str(bits >= 256).lower()
        transposed = {"on": "true", "off": "false"}.get(options.micro_kernel_transposed, "auto")
        element = (
            f"schedule-micro-kernels{{contract={contract} vector_bits={bits} "
            f"rows={options.micro_kernel_rows} vectors={options.micro_kernel_vectors} "
            f"masked_tails={masked} transposed={transposed}}}"
        )
        try:
            with timer.step("micro-kernels"):
                _run_pipeline(copy, f"{element},canonicalize,cse")
            swapped = swap_in(fn, copy)
            if swapped is not None:
                fn = swapped
        except Exception as exc:
            reason = exc if isinstance(exc, _StepFailed) else _describe(exc)
            failure = f"{failure + '; ' if failure else ''}micro-kernels failed: {reason}"
        del scratch
    unroll = options.unroll or 1
    if unroll > 1 and options.schedule and options.target != "cuda":
        fn, problem = _unroll_innermost(module, fn, unroll)
        if problem:
            failure = f"{failure + '; ' if failure else ''}{problem}"
    if failure is not None:
        fn.attributes[NOT_SCHEDULED_ATTR] = ir.StringAttr.get(failure)
    if trees:
        fn.attributes[SCHEDULE_ATTR] = ir.StringAttr.get("\n".join(trees))


def _unroll_innermost(
    module: ir.Module, fn: ir.Operation, factor: int
) -> tuple[ir.Operation, str | None]:
    """`fn` with each innermost `affine.for` (one with no loop of any dialect inside: a tile
    loop around a micro-kernel's `scf` loops is not one) unrolled `factor` times (the same
    iterations in the same order, so always legal; the trips left over run in a loop after),
    said in a remark; or `fn` unchanged and why not."""
    scratch, copy = scratch_module(module, fn)
    try:
        marked = _mark_innermost_loops(copy)
        if not marked:
            return fn, None
        with timer.step("unroll"):
            innermost = _unroll_marked(scratch, copy, factor, marked)
        if not innermost:
            return fn, None
        swapped = swap_in(fn, copy)
        if swapped is None:
            return fn, "unrolling changed the function's type"
    except Exception as exc:
        reason = exc if isinstance(exc, _StepFailed) else _describe(exc)
        return fn, f"unrolling failed: {reason}"
    finally:
        del scratch
    message = f"{innermost} innermost loop(s) unrolled {factor} times"
    attach_remarks(
        swapped,
        [
            remark_at(
                swapped.location,
                "schedule",
                "unrolled",
                "remark",
                message,
                {"factor": factor, "loops": innermost},
            )
        ],
    )
    return swapped, None


_UNROLL_MARK = "polyflow.unroll"  # a unit attribute (what the transform script matches)
_UNROLL_STEP = "polyflow.unroll_step"  # the loop's step before
_UNROLL_ID = "polyflow.unroll_id"  # which marked loop (a leftover loop is a copy: the same id)
_LOOPS = frozenset({"affine.for", "affine.parallel", "scf.for", "scf.parallel", "scf.while"})


def _mark_innermost_loops(fn: ir.Operation) -> int:
    """Mark each `affine.for` of `fn` with no loop of any dialect inside it (and note its
    step, which unrolling multiplies); their number."""
    marked = 0

    def has_loop_inside(op: ir.Operation) -> bool:
        found = False

        def visit(inner: ir.Operation) -> ir.WalkResult:
            nonlocal found
            if inner != op and inner.name in _LOOPS:
                found = True
                return ir.WalkResult.INTERRUPT
            return ir.WalkResult.ADVANCE

        op.walk(visit)
        return found

    def mark(op: ir.Operation) -> ir.WalkResult:
        nonlocal marked
        if op.name == "affine.for" and not has_loop_inside(op):
            op.attributes[_UNROLL_MARK] = ir.UnitAttr.get()
            op.attributes[_UNROLL_STEP] = op.attributes["step"]
            op.attributes[_UNROLL_ID] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), marked)
            marked += 1
        return ir.WalkResult.ADVANCE

    fn.walk(mark)
    return marked


def _unroll_marked(scratch: ir.Module, fn: ir.Operation, factor: int, marked: int) -> int:
    """Unroll the loops `_mark_innermost_loops` marked in `fn` (inside `scratch`) `factor`
    times, through the transform dialect (MLIR's affine-loop-unroll takes every `affine.for`
    with no `affine.for` inside, tile loops around `scf` loops too), drop the marks, and
    return how many were unrolled (a loop whose leftover trips have no affine bound, e.g. a
    partial tile bounded by a `min`, stays as it is, as MLIR's pass leaves it)."""
    # parsed inside a module that allows named sequences (the op verifies its parent), then
    # moved into `scratch`, which must allow them too while the interpreter runs
    holder = ir.Module.parse(
        "module attributes {transform.with_named_sequence} {\n"
        "transform.named_sequence @__transform_main(%root: !transform.any_op "
        "{transform.readonly}) {\n"
        f"  %loops = transform.structured.match attributes{{{_UNROLL_MARK}}} in %root "
        ": (!transform.any_op) -> !transform.any_op\n"
        "  transform.foreach %loops : !transform.any_op {\n"
        "  ^bb0(%loop: !transform.any_op):\n"
        "    transform.sequence %loop : !transform.any_op failures(suppress) {\n"
        "    ^bb1(%one: !transform.any_op):\n"
        f"      transform.loop.unroll %one {{factor = {factor}}} : !transform.any_op\n"
        "    }\n  }\n"
        "  transform.yield\n}\n}"
    )
    sequence = holder.body.operations[0].operation
    scratch.operation.attributes["transform.with_named_sequence"] = ir.UnitAttr.get()
    scratch.body.append(sequence)
    try:
        PassManager.parse("builtin.module(transform-interpreter)").run(scratch.operation)
    except Exception as exc:
        raise _StepFailed(f"transform.loop.unroll failed: {_describe(exc)}") from exc
    finally:
        sequence.erase()
        del scratch.operation.attributes["transform.with_named_sequence"]

    seen: set[int] = set()  # the marked loops still there (or their leftover loops)
    stepped: set[int] = set()  # those of them whose step grew

    def unmark(op: ir.Operation) -> ir.WalkResult:
        if _UNROLL_MARK in op.attributes:
            loop = ir.IntegerAttr(op.attributes[_UNROLL_ID]).value
            seen.add(loop)
            if op.attributes[_UNROLL_STEP] != op.attributes["step"]:
                stepped.add(loop)
            for name in (_UNROLL_MARK, _UNROLL_STEP, _UNROLL_ID):
                del op.attributes[name]
        return ir.WalkResult.ADVANCE

    fn.walk(unmark)
    # a loop of no more trips than the factor is unrolled whole: gone, with its marks
    return len(stepped) + marked - len(seen)


def _process_within(module: ir.Module, fn: ir.Operation, options: Options, seconds: float) -> None:
    """`_process_function` on `fn` in a forked child process that may take `seconds`; its
    result (the function, printed with locations) replaces `fn`. A child past the deadline
    is killed and `fn` keeps its raised code, marked not scheduled.

    The last resort where isl's operation counts bound the time too loosely (its scheduler
    counts only part of its work): isl cannot be interrupted from Python (islpy keeps the GIL), so
    the work runs where it can be killed."""
    name = symbol_name(fn)

    def work() -> bytes:
        timer.seconds.clear()  # the child reports its own steps only
        _process_function(module, fn, options)
        # the function (swapped for a new op) with what it refers to: small, and verifies
        done, _copy = scratch_module(module, ir.SymbolTable(module.operation)[name])
        recorded = None if timer.dependences is None else timer.dependences.get(name)
        return json.dumps(
            {
                "module": done.operation.get_asm(enable_debug_info=True),
                "times": timer.seconds,
                "dependences": recorded,
            }
        ).encode()

    # the child has none of this process's threads (schedule_module turns this back on)
    module.context.enable_multithreading(False)
    deadline = time.monotonic() + seconds
    child = forked.fork_work(work)
    data = forked.collect([child], deadline)[child]
    if data is None:
        late = time.monotonic() >= deadline
        if late:
            timer.past_deadline.append(name)
        fn.attributes[NOT_SCHEDULED_ATTR] = ir.StringAttr.get(
            f"the polyhedral stage ran past --compile-timeout ({seconds:g} s)"
            if late
            else "the process optimizing it failed"
        )
        return
    result = json.loads(data)
    for step, spent in result["times"].items():
        timer.seconds[step] = timer.seconds.get(step, 0.0) + spent
    if timer.dependences is not None and result.get("dependences") is not None:
        timer.dependences[name] = result["dependences"]
    done = ir.Module.parse(result["module"], context=module.context)
    for op in done.body.operations:
        if op.operation.name == "func.func" and symbol_name(op.operation) == name:
            op.operation.clone(ip=ir.InsertionPoint(fn))
            fn.erase()
            return


def schedule_module(module: ir.Module, options: Options) -> ir.Module:
    """Reschedule and parallelize every schedulable function of `module` in place (see the
    module docstring); returns `module`. Does nothing unless `scheduling_enabled(options)`."""
    timer.seconds.clear()
    timer.past_deadline.clear()
    if not scheduling_enabled(options):
        return module
    forking = options.compile_timeout is not None and hasattr(os, "fork")
    global _managers
    _managers = {}
    try:
        with module.context, ir.Location.unknown():
            _schedule_functions(module, options, forking)
    finally:
        _managers = None
    return module


def _schedule_functions(module: ir.Module, options: Options, forking: bool) -> None:
    for fn in list(schedulable_functions(module)):
        try:
            if forking:
                assert options.compile_timeout is not None
                _process_within(module, fn, options, options.compile_timeout)
            else:
                _process_function(module, fn, options)
        except Exception as exc:  # a bug of ours around the steps: say so, keep going
            fn.attributes[NOT_SCHEDULED_ATTR] = ir.StringAttr.get(
                f"internal error while scheduling: {type(exc).__name__}: {exc}"
            )
    if forking:
        module.context.enable_multithreading(True)


def _functions_with(
    module: ir.Module, attr: str, names: dict[str, str] | None = None
) -> Iterator[tuple[str, ir.Operation]]:
    """(C name, function) of each function carrying `attr` (`names`: the module's
    `source_names`, where the caller has them)."""
    names = source_names(module) if names is None else names
    for op in module.body.operations:
        operation = op.operation
        if operation.name == "func.func" and attr in operation.attributes:
            name = symbol_name(operation)
            yield names.get(name, name), operation


def schedule_remarks(module: ir.Module) -> list[Remark]:
    """What the stage said, for the compile report: a warning for every function whose
    rescheduling or parallelization failed; what the steps attached to each function (notes on
    what they skipped, the scops rescheduled, the bands tiled, the micro-kernels); then, per
    function, a note for each loop that reorders floating-point reductions
    (`parallel_reductions`) and a remark for each loop run in parallel."""
    from .parallelize import float_reductions, parallel_loops  # only read once parallel code exists

    out: list[Remark] = []
    with module.context:
        names = source_names(module)  # once: a file may have thousands of functions
        for name, fn in _functions_with(module, NOT_SCHEDULED_ATTR, names):
            reason = ir.StringAttr(fn.attributes[NOT_SCHEDULED_ATTR]).value
            out.append(
                remark_at(
                    fn.location,
                    "schedule",
                    "not-scheduled",
                    "warning",
                    f"function '{name}' is not fully optimized: {reason}",
                    {"reason": reason},
                    function=name,
                )
            )
        out += take_remarks(module, names)
        for op in module.body.operations:
            fn = op.operation
            if fn.name != "func.func":
                continue
            symbol = symbol_name(fn)
            name = names.get(symbol, symbol)
            for loc, kind in float_reductions(fn):
                out.append(
                    remark_at(
                        loc,
                        "schedule",
                        "float-reduction",
                        "warning",
                        f"this loop of '{name}' reorders a floating-point {kind} reduction "
                        "(-fassociative-math: the result may differ from C's order in the last "
                        "bits, the same for every run and thread count)",
                        {"reduction": kind},
                        function=name,
                    )
                )
            for loc, kinds in parallel_loops(fn):
                with_reductions = f" with reductions {', '.join(kinds)}" if kinds else ""
                out.append(
                    remark_at(
                        loc,
                        "schedule",
                        "parallel-loop",
                        "remark",
                        f"loop runs in parallel (OpenMP){with_reductions}",
                        {"reductions": list(kinds)},
                        function=name,
                    )
                )
    return out


def schedule_trees(module: ir.Module) -> dict[str, str]:
    """The isl schedule tree(s) recorded for each function (by C name), for `--emit=schedule`."""
    with module.context:
        return {
            name: ir.StringAttr(fn.attributes[SCHEDULE_ATTR]).value
            for name, fn in _functions_with(module, SCHEDULE_ATTR)
        }


__all__ = [
    "NOT_SCHEDULED_ATTR",
    "SCHEDULE_ATTR",
    "ScheduleNotes",
    "recording_dependences",
    "reschedule_function",
    "schedulable_functions",
    "schedule_module",
    "schedule_remarks",
    "schedule_trees",
    "scheduling_enabled",
    "step_times",
]
