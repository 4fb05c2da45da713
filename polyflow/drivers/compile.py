"""The one compile entry: a frontend module and options in; an object file, code to load in this
process, or a stage's IR out; through the compile cache.

Every user reaches it: `polyflow build` (objects), `compile_c` and `polyflow.tc` (code for the
JIT), the service's workers (objects and stage text). A new target or stage plugs in here once:
the cache key, the record kept in the cache, the replay of what the compile said on a hit and the
split of large modules over worker processes are the same for all of them.
"""

from __future__ import annotations

import base64
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from mlir import ir

from polyflow.drivers.objects import openmp_functions, uses_openmp
from polyflow.drivers.parallel_build import build_groups, function_groups, worker_count
from polyflow.errors import CompileError
from polyflow.lowering.llvm_ir import compile_llvm_ir_to_object
from polyflow.lowering.ptx import gpu_resource_remarks, kernels_to_ptx
from polyflow.options import Options
from polyflow.pipeline import PipelineResult, run_pipeline
from polyflow.report import CompileReport, ReportViews
from polyflow.storage.cache import CompileCache, default_cache, module_key

# What a compile produces:
#   object  the object file of the module's functions (and whether it forks OpenMP threads)
#   jit     the module lowered to the LLVM dialect, for an ExecutionEngine in this process
#   ir      the module after the stage `stop_after` (never cached: it is read to see a stage)
#   ptx     for target "cuda": the PTX of the kernels, and the host module after the `gpu` stage
Product = Literal["object", "jit", "ir", "ptx"]

# The targets code can be compiled for; `Options.target` names one.
AVAILABLE_TARGETS = frozenset({"cpu", "cuda"})

# The stages a JIT compile keeps, for `CompiledFunction.mlir(stage)` and `TcFunction.mlir`.
JIT_STAGES = frozenset({"mlir", "affine", "grad", "affine-opt", "llvm-dialect"})
# ... and a PTX compile (the `gpu` stage is what the Python launcher runs).
GPU_STAGES = frozenset({"mlir", "affine", "affine-opt", "gpu"})


@dataclass
class Compiled(ReportViews):
    """What a compile produced and said: the final module (for `jit`, the lowered module; for a
    cache hit, parsed from the cache), the object's bytes (`object`), whether that code calls
    the OpenMP runtime and which C functions fork threads, each kept stage's text, the compile
    report (what each stage said, the schedule trees, the time of each step; replayed from the
    cache on a hit), and whether it came from the cache."""

    module: ir.Module | None = None
    object: bytes = b""
    openmp: bool = False
    parallel_functions: list[str] = field(default_factory=list)
    llvm_ir: str | None = None
    stages: dict[str, str] = field(default_factory=dict)
    report: CompileReport = field(default_factory=CompileReport)
    cached: bool = False
    # False when a function ran past `Options.compile_timeout`: the result depends on the
    # machine's speed, so no cache may keep it
    cacheable: bool = True
    # `ptx`: the PTX of each GPU module (one kernel each) and what ptxas said it uses
    ptx: dict[str, str] = field(default_factory=dict)
    gpu_resources: dict[str, dict[str, int]] = field(default_factory=dict)
    # `object`: whether the code launches GPU kernels (link drivers/cuda_runtime.c)
    cuda: bool = False


def check_target(options: Options, filename: str = "<input>") -> None:
    """Refuse, with a CompileError, a target this build cannot compile for."""
    if options.target not in AVAILABLE_TARGETS:
        raise CompileError(
            f"target '{options.target}' is not available in this build yet "
            f"(available: {', '.join(sorted(AVAILABLE_TARGETS))})",
            file=filename,
        )


def compile_module(
    module: ir.Module,
    options: Options,
    *,
    produce: Product = "object",
    stop_after: str = "llvm",
    keep: frozenset[str] = frozenset(),
    cache: CompileCache | Literal["default"] | None = "default",
    after_stage: Callable[[str, ir.Module], None] | None = None,
    workers: int | None = None,
) -> Compiled:
    """Compile `module` (frontend MLIR, in place; run inside its context) into `produce`.

    `cache` ("default": the shared compile cache, off with `POLYFLOW_CACHE=off`; None: none)
    holds results by the module's bytecode (with locations), the options, `produce`, `keep` and
    the compiler's versions. `keep` names stages whose text the result carries (`jit` always
    keeps `JIT_STAGES`); `after_stage(name, module)` is called after each MLIR stage (the
    raising report reads the IR there) and turns the cache off. A module of many functions is
    compiled into an object by up to `workers` processes (None: one per core this process may
    use; 1: in this process) when neither asks for the IR in between.
    """
    check_target(options)
    kernels_only = options.target == "cuda" and not options.gpu_emulate
    if produce == "ptx" and not kernels_only:
        raise ValueError("produce='ptx' needs target 'cuda' without gpu_emulate")
    if kernels_only and produce == "jit":
        raise ValueError("a CUDA build runs from Python through produce='ptx' (CudaFunction)")
    if produce == "ir":
        return _from_pipeline(
            run_pipeline(module, options, stop_after=stop_after, keep=keep, after_stage=after_stage)
        )
    if produce == "jit":
        keep = keep | JIT_STAGES
    if produce == "ptx":
        keep = keep | GPU_STAGES
    if cache == "default":
        cache = default_cache()
    if after_stage is not None:
        cache = None  # the caller reads the IR as it is compiled: it must be compiled
    key = None
    if cache is not None:
        start = time.perf_counter()
        kind = f"{options.target}-{produce}" + (f"+{','.join(sorted(keep))}" if keep else "")
        key = module_key(module, options, kind)
        stored = cache.get_json(key)
        replayed = _from_record(stored, produce) if stored is not None else None
        if replayed is not None:
            replayed.timings["cache"] = time.perf_counter() - start
            return replayed
    if produce == "jit":
        compiled = _from_pipeline(
            run_pipeline(
                module, options, stop_after="llvm-dialect", keep=keep, after_stage=after_stage
            )
        )
    elif produce == "ptx":
        compiled = _ptx(module, options, keep, after_stage)
    else:
        compiled = _object(module, options, keep, after_stage, workers or worker_count())
    if cache is not None and key is not None and compiled.cacheable:
        cache.put_json(key, _record(compiled, produce))
    return compiled


def _object(
    module: ir.Module,
    options: Options,
    keep: frozenset[str],
    after_stage: Callable[[str, ir.Module], None] | None,
    workers: int,
) -> Compiled:
    groups = function_groups(module, workers) if after_stage is None and not keep else None
    if groups is not None:
        # many functions: groups of them through the pipeline and llc in parallel processes
        start = time.perf_counter()
        built = build_groups(module, groups, options, workers)
        processes = min(workers, len(groups))
        forking = [text for text in built.llvm_ir if uses_openmp(text)]
        # each stage's time is summed over the workers; this one is the wall time
        built.report.timings[f"workers ({processes}, {len(groups)} groups, wall)"] = (
            time.perf_counter() - start
        )
        return Compiled(
            module=module,
            object=built.data,
            openmp=bool(forking),
            parallel_functions=sorted({n for text in forking for n in openmp_functions(text)}),
            report=built.report,
            cacheable=built.cacheable,
            cuda=any("@mgpuModuleLoad" in text for text in built.llvm_ir),
        )
    compiled = _from_pipeline(
        run_pipeline(module, options, stop_after="llvm", keep=keep, after_stage=after_stage)
    )
    llvm_ir = compiled.llvm_ir or ""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="polyflow-obj-") as tmp:
        compiled.object = compile_llvm_ir_to_object(
            llvm_ir, Path(tmp) / "kernels.o", options
        ).read_bytes()
    compiled.timings["llc"] = time.perf_counter() - start
    compiled.openmp = uses_openmp(llvm_ir)
    compiled.parallel_functions = openmp_functions(llvm_ir) if compiled.openmp else []
    compiled.cuda = "@mgpuModuleLoad" in llvm_ir
    return compiled


def _ptx(
    module: ir.Module,
    options: Options,
    keep: frozenset[str],
    after_stage: Callable[[str, ir.Module], None] | None,
) -> Compiled:
    """Kernels to PTX: the pipeline to the `gpu` stage (kept), then `lowering.ptx`; what ptxas
    says of each kernel joins the report."""
    compiled = _from_pipeline(
        run_pipeline(
            module, options, stop_after="gpu", keep=keep, after_stage=after_stage
        )
    )
    assert compiled.module is not None
    start = time.perf_counter()
    made = kernels_to_ptx(compiled.module, options)
    compiled.timings["ptx"] = time.perf_counter() - start
    compiled.ptx = made.ptx
    compiled.stages["ptx"] = made.text()
    compiled.gpu_resources = {name: asdict(r) for name, r in made.resources.items()}
    compiled.report.remarks += gpu_resource_remarks(made, options)
    return compiled


def _from_pipeline(result: PipelineResult) -> Compiled:
    return Compiled(
        module=result.module,
        llvm_ir=result.llvm_ir,
        stages=result.stages,
        report=result.report,
        cacheable=result.cacheable,
    )


def _record(compiled: Compiled, produce: Product) -> dict[str, object]:
    """What the cache keeps of a compile: enough to replay it without compiling."""
    said = compiled.report.to_dict()
    said["timings"] = {}  # a hit takes no time to compile: its own timings say so
    record: dict[str, object] = {"stages": compiled.stages, "report": said}
    if produce == "ptx":
        record["ptx"] = compiled.ptx
        record["gpu_resources"] = compiled.gpu_resources
    if produce == "object":
        record["object"] = base64.b64encode(compiled.object).decode()
        record["openmp"] = compiled.openmp
        record["parallel_functions"] = compiled.parallel_functions
        record["cuda"] = compiled.cuda
    return record


def _from_record(stored: dict[str, object], produce: Product) -> Compiled | None:
    """The compile a cache record replays; None for a record this version cannot read."""
    try:
        report = CompileReport.from_dict(stored["report"])  # type: ignore[arg-type]
    except (KeyError, ValueError, TypeError):
        return None  # written by an older polyflow: compile again
    stages = dict(stored["stages"])  # type: ignore[call-overload]
    compiled = Compiled(stages=stages, report=report, cached=True)
    if produce == "jit":
        compiled.module = ir.Module.parse(stages["llvm-dialect"])
    elif produce == "ptx":
        compiled.module = ir.Module.parse(stages["gpu"])
        compiled.ptx = dict(stored["ptx"])  # type: ignore[call-overload]
        compiled.gpu_resources = dict(stored["gpu_resources"])  # type: ignore[call-overload]
    else:
        compiled.object = base64.b64decode(str(stored["object"]))
        compiled.openmp = bool(stored["openmp"])
        compiled.cuda = bool(stored.get("cuda", False))
        compiled.parallel_functions = list(stored["parallel_functions"])  # type: ignore[call-overload]
    return compiled
