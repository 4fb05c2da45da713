"""The ordered stages from frontend MLIR to native code; each stage's output can be kept and shown."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from mlir import ir

from polyflow import autodiff as _autodiff
from polyflow import gpu_map as _gpu_mapping
from polyflow import raising as _raising
from polyflow import schedule as _scheduling
from polyflow.errors import SourcePosition
from polyflow.gpu_map.emulate import emulate_kernels
from polyflow.ir.locations import source_position
from polyflow.ir.names import CABI_PREFIX, gradient_name
from polyflow.ir.remarks import attach_remarks, take_remarks
from polyflow.lowering.llvm_dialect import lower_to_llvm_dialect
from polyflow.lowering.llvm_ir import (
    VectorizedLoop,
    optimize_llvm_ir,
    translate_to_llvm_ir,
    with_compile_directory,
)
from polyflow.lowering.ptx import gpu_resource_remarks, kernels_to_ptx, outline_kernels
from polyflow.options import Options, grad_spec
from polyflow.report import CompileReport, Remark, ReportViews
from polyflow.target import target_of
from polyflow.toolchain import openmp_library_dir

ModuleStage = tuple[str, Callable[[ir.Module, Options], ir.Module]]


def _stage_options(options: Options) -> Options:
    """The options the `affine-opt` stage runs with: for the GPU no CPU tiling; no OpenMP loops
    without an OpenMP runtime to link them with (the intel-openmp wheel)."""
    if options.target == "cuda":
        # the GPU mapping strip-mines the parallel loops into blocks and threads itself; cache
        # tiles, wavefronts and vector micro-kernels are CPU schedules
        return options.model_copy(
            update={"tile": False, "wavefront": False, "micro_kernels": False}
        )
    if options.parallel and openmp_library_dir() is None:
        return options.model_copy(update={"parallel": False})
    return options


def _optimize_affine(module: ir.Module, options: Options) -> ir.Module:
    return _scheduling.schedule_module(module, _stage_options(options))


def _map_to_gpu(module: ir.Module, options: Options) -> ir.Module:
    """The `gpu` stage (target "cuda"): kernels mapped and outlined into `gpu.func`s."""
    _gpu_mapping.map_module(module, options, whole=options.gpu_device_arrays)
    return outline_kernels(module)


def _lower_to_llvm(module: ir.Module, options: Options) -> ir.Module:
    gpu_host = False
    if options.target == "cuda" and options.gpu_emulate:  # the kernels run on this CPU
        emulate_kernels(module)
    elif options.target == "cuda":  # PTX embedded, launched through the CUDA runtime
        made = kernels_to_ptx(module, options)
        with module.context:  # the functions become llvm.func: the module keeps these
            attach_remarks(module.operation, gpu_resource_remarks(made, options))
        gpu_host = bool(made.ptx)
    target = target_of(options.march, options.mtune)
    return lower_to_llvm_dialect(
        module,
        threads=options.threads,
        fast_math=options.fast_math,
        line_tables=options.debug_info,
        gpu_host=gpu_host,
        vector_bytes=(
            target.vector_bits // 8
            if options.align_vector_loops and options.opt_level >= 2
            else None
        ),
        min_parallel_work=options.min_parallel_work if options.parallel else None,
        vector_bits=(
            target.vector_bits if target.vector_bits > 256 and options.opt_level >= 2 else None
        ),
        contract=options.fp_contract == "fast" and options.opt_level >= 2,
    )


def _differentiate(module: ir.Module, options: Options) -> ir.Module:
    """The `grad` stage: the gradients' bodies (polyflow.autodiff), their memory updates at
    loop-invariant addresses then made loop-carried sums (as raising does)."""
    _autodiff.differentiate_module(module, options)
    names = {gradient_name(grad_spec(spec)[0]) for spec in options.grad or ()}
    return _raising.tidy_gradients(module, names)


# MLIR → MLIR stages after the frontend, in order: raising, reverse-mode differentiation (only
# with `Options.grad`), the polyhedral stage (rescheduling
# and parallelization, -O3 only), for target "cuda" the GPU mapping, lowering (for "cuda": the
# kernels to PTX embedded in the host code, or with gpu_emulate to CPU loops).
MODULE_STAGES: list[ModuleStage] = [
    ("affine", lambda module, options: _raising.raise_to_affine(module, options)),
    ("grad", _differentiate),
    ("affine-opt", _optimize_affine),
    ("gpu", _map_to_gpu),
    ("llvm-dialect", _lower_to_llvm),
]
STAGE_NAMES = ["mlir", *(name for name, _ in MODULE_STAGES), "llvm"]


def module_stages(options: Options) -> list[ModuleStage]:
    """The MLIR stages `options` runs: `grad` only with functions to differentiate, `gpu` only
    for target "cuda"."""
    return [
        (name, stage)
        for name, stage in MODULE_STAGES
        if (name != "gpu" or options.target == "cuda") and (name != "grad" or options.grad)
    ]


def check_stages(options: Options, stop_after: str) -> None:
    """Refuse (ValueError) a stop the build does not have: `gpu` without "cuda", `grad`
    without functions to differentiate."""
    if options.target != "cuda" and stop_after == "gpu":
        raise ValueError("the 'gpu' stage exists for target 'cuda' only")
    if not options.grad and stop_after == "grad":
        raise ValueError("the 'grad' stage exists only when a gradient is asked for")


def stage_text(module: ir.Module, options: Options) -> str:
    """A stage's IR as text for people; with `options.debug_locations`, each op's source
    location (`loc("k.c":3:5)`), which maps the IR back to source lines."""
    return module.operation.get_asm(enable_debug_info=options.debug_locations)


@dataclass
class PipelineResult(ReportViews):
    """What the pipeline produced: the final module, LLVM IR (if reached), each kept stage's text
    and the compile report (polyflow.report): what each stage said (a function left unraised,
    and why; each loop raised or not; what the polyhedral stage skipped, tiled, ran in parallel,
    which loops reorder float reductions), the isl schedule trees, each stage's time."""

    module: ir.Module
    llvm_ir: str | None = None
    stages: dict[str, str] = field(default_factory=dict)
    report: CompileReport = field(default_factory=CompileReport)
    cached: bool = False  # lowered by an earlier compile, read from the compile cache
    # False when a function ran past `Options.compile_timeout`: the result depends on the
    # machine's speed, so no cache may keep it
    cacheable: bool = True


def run_pipeline(
    module: ir.Module,
    options: Options,
    *,
    stop_after: str = "llvm",
    keep: frozenset[str] = frozenset(),
    after_stage: Callable[[str, ir.Module], None] | None = None,
) -> PipelineResult:
    """Run the stages after the frontend on `module` (in place) up to and including `stop_after`.

    After each stage, what it said goes into the result's report (and out of the IR, before a
    kept stage's text is taken). `after_stage(name, module)` is called after each MLIR stage,
    for callers that read the IR there.
    """
    if stop_after not in STAGE_NAMES:
        raise ValueError(f"unknown stage '{stop_after}' (known: {', '.join(STAGE_NAMES)})")
    check_stages(options, stop_after)
    result = PipelineResult(module)
    report = result.report
    if "mlir" in keep:
        result.stages["mlir"] = stage_text(module, options)
    if stop_after == "mlir":
        return result
    for name, stage in module_stages(options):
        start = time.perf_counter()
        module = stage(module, options)
        report.timings[name] = time.perf_counter() - start
        result.module = module
        if name == "affine":
            report.remarks += _raising.raising_remarks(module, enabled=options.raising_enabled)
        elif name == "affine-opt" and _scheduling.scheduling_enabled(options):
            report.remarks += _scheduling.schedule_remarks(module)
            if options.parallel and not _stage_options(options).parallel:
                report.add(
                    Remark(
                        "schedule",
                        "no-openmp-runtime",
                        "warning",
                        "no OpenMP runtime (libiomp5 from the intel-openmp package) was "
                        "found: loops stay sequential",
                    )
                )
            report.schedules.update(_scheduling.schedule_trees(module))
            for step, seconds in _scheduling.step_times().items():
                report.timings[f"affine-opt/{step}"] = seconds
            result.cacheable = not _scheduling.past_deadline()
        report.remarks += take_remarks(module)  # whatever else a stage left on a function
        if name in keep:
            result.stages[name] = stage_text(module, options)
        if after_stage is not None:
            after_stage(name, module)
        if name == stop_after:
            return result
    start = time.perf_counter()
    llvm_ir = translate_to_llvm_ir(module)
    if options.debug_info:
        llvm_ir = with_compile_directory(llvm_ir, os.getcwd())
    vectorized: list[VectorizedLoop] = []
    result.llvm_ir = optimize_llvm_ir(llvm_ir, options, vectorized)
    report.remarks += vector_loop_remarks(vectorized, function_positions(module))
    report.timings["llvm"] = time.perf_counter() - start
    if "llvm" in keep:
        result.stages["llvm"] = result.llvm_ir
    return result


def _source_function(symbol: str) -> str:
    """The C function a compiled symbol belongs to: its C-ABI wrapper, its raised and
    fallback copies (`f.affine`, `f.scf`) and their OpenMP bodies (`f.affine..omp_par`)."""
    return symbol.removeprefix(CABI_PREFIX).split(".", 1)[0]


def function_positions(module: ir.Module) -> dict[str, SourcePosition]:
    """The C position of each function of `module` (by `_source_function`), where its
    location has one."""
    found: dict[str, SourcePosition] = {}
    with module.context:
        for op in module.body.operations:
            fn = op.operation
            if "sym_name" not in fn.attributes:
                continue
            name = _source_function(ir.StringAttr(fn.attributes["sym_name"]).value)
            position = source_position(fn.location)
            if position is not None and position.line > 0:
                found.setdefault(name, position)
    return found


def vector_loop_remarks(
    loops: list[VectorizedLoop], positions: Mapping[str, SourcePosition] | None = None
) -> list[Remark]:
    """One remark per C function with the loops LLVM vectorized in it (the function's OpenMP
    bodies and interface wrapper count as the function), at the function's position in
    `positions`: how many at each vector width and interleave count, and where, when the IR
    had line tables (-g)."""
    by_function: dict[str, list[VectorizedLoop]] = {}
    for loop in loops:
        name = _source_function(loop.function)
        by_function.setdefault(name, []).append(loop)
    out: list[Remark] = []
    for name, found in by_function.items():
        shapes: dict[tuple[int, int], list[VectorizedLoop]] = {}
        for loop in found:
            shapes.setdefault((loop.width, loop.interleave), []).append(loop)
        parts = []
        for (width, count), same in sorted(shapes.items(), reverse=True):
            part = f"width {width}{f' unrolled x{count}' if count > 1 else ''}: "
            part += f"{len(same)} loop{'s' if len(same) != 1 else ''}"
            lines = sorted({(loop.line, loop.column) for loop in same if loop.line > 0})
            if lines:
                part += f" (at {', '.join(f'{line}:{column}' for line, column in lines)})"
            parts.append(part)
        out.append(
            Remark(
                "lowering",
                "vectorized",
                "remark",
                "loops vectorized by LLVM, " + "; ".join(parts),
                name,
                (positions or {}).get(name),
                data={
                    "loops": [
                        {
                            "width": loop.width,
                            "interleave": loop.interleave,
                            "line": loop.line,
                            "column": loop.column,
                        }
                        for loop in found
                    ]
                },
            )
        )
    return out
