"""The ordered stages from frontend MLIR to native code; each stage's output can be kept and shown."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mlir import ir

from polyflow.backend.llvm_ir import optimize_llvm_ir, translate_to_llvm_ir
from polyflow.backend.lower import lower_to_llvm_dialect
from polyflow.options import Options

ModuleStage = tuple[str, Callable[[ir.Module, Options], ir.Module]]

# MLIR → MLIR stages after the frontend, in order. Raising and scheduling slot in before lowering.
MODULE_STAGES: list[ModuleStage] = [
    ("llvm-dialect", lambda module, options: lower_to_llvm_dialect(module)),
]
STAGE_NAMES = ["mlir", *(name for name, _ in MODULE_STAGES), "llvm"]


@dataclass
class PipelineResult:
    """What the pipeline produced: the final module, LLVM IR (if reached) and each kept stage's text."""

    module: ir.Module
    llvm_ir: str | None = None
    stages: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


def run_pipeline(
    module: ir.Module,
    options: Options,
    *,
    stop_after: str = "llvm",
    keep: frozenset[str] = frozenset(),
) -> PipelineResult:
    """Run the stages after the frontend on `module` (in place) up to and including `stop_after`."""
    if stop_after not in STAGE_NAMES:
        raise ValueError(f"unknown stage '{stop_after}' (known: {', '.join(STAGE_NAMES)})")
    result = PipelineResult(module)
    if "mlir" in keep:
        result.stages["mlir"] = str(module)
    if stop_after == "mlir":
        return result
    for name, stage in MODULE_STAGES:
        start = time.perf_counter()
        module = stage(module, options)
        result.timings[name] = time.perf_counter() - start
        result.module = module
        if name in keep:
            result.stages[name] = str(module)
        if name == stop_after:
            return result
    start = time.perf_counter()
    result.llvm_ir = optimize_llvm_ir(translate_to_llvm_ir(module), options)
    result.timings["llvm"] = time.perf_counter() - start
    if "llvm" in keep:
        result.stages["llvm"] = result.llvm_ir
    return result
