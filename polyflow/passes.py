"""The registry of polyflow's own MLIR passes, by pipeline name, for `polyflow-opt` and the stages.

A pass is a frozen dataclass with a `name` and `__call__(self, op, pass_)` (see STYLE.md); it is
imported only when used, so that listing passes costs nothing.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from typing import Any

from mlir import ir
from mlir.passmanager import PassManager

# name → "module:class"
PASSES: dict[str, str] = {
    "raise-mem2reg": "polyflow.raising.mem2reg:Mem2Reg",
    "raise-scf-to-affine": "polyflow.raising.scf_to_affine:RaiseScfToAffine",
    "raise-delinearize": "polyflow.raising.delinearize:RaiseDelinearize",
    "raise-reductions": "polyflow.raising.reductions:RaiseReductions",
    "schedule-split-statements": "polyflow.schedule.split:SplitStatements",
    "schedule-demote-to-memory": "polyflow.schedule.scratch:DemoteToMemory",
    "schedule-dead-scalars": "polyflow.schedule.dead_scalars:ScheduleDeadScalars",
    "schedule-parallelize": "polyflow.schedule.parallelize:ScheduleParallelize",
    "schedule-mark-parallel": "polyflow.schedule.parallelize:ScheduleMarkParallel",
    "schedule-micro-kernels": "polyflow.schedule.micro_kernel:ScheduleMicroKernels",
    "lower-deterministic-float-reductions": (
        "polyflow.lowering.float_reductions:DeterministicFloatReductions"
    ),
}

_ELEMENT = re.compile(r"\s*([A-Za-z0-9_.\-]+)\s*(\{[^}]*\})?\s*(?:,|$)")


def make_pass(name: str, options: dict[str, str] | None = None) -> Any:
    """An instance of the polyflow pass `name`, its fields set from `options` (text values)."""
    module_name, class_name = PASSES[name].split(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"pass '{name}' is not available: {exc}") from exc
    kwargs: dict[str, Any] = {}
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key, text in (options or {}).items():
        if key not in fields or key == "name":
            known = ", ".join(f for f in fields if f != "name") or "none"
            raise ValueError(f"pass '{name}' has no option '{key}' (options: {known})")
        default = getattr(cls(), key)
        if isinstance(default, bool):
            if text not in ("true", "false", "1", "0"):
                raise ValueError(f"pass '{name}': option '{key}' takes true or false, not '{text}'")
            kwargs[key] = text in ("true", "1")
        elif isinstance(default, int):
            kwargs[key] = int(text)
        else:
            kwargs[key] = text
    return cls(**kwargs)


def _parse_options(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    pairs = [p.strip() for p in text.strip("{}").split() if p.strip()]
    out: dict[str, str] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        out[key] = value or "true"
    return out


def pipeline_elements(pipeline: str) -> list[str]:
    """The elements of a comma-separated pipeline text, options (`{...}`) attached."""
    out: list[str] = []
    pos, text = 0, pipeline.strip()
    while pos < len(text):
        match = _ELEMENT.match(text, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"cannot parse the pipeline at: {text[pos:]!r}")
        out.append(match.group(1) + (match.group(2) or ""))
        pos = match.end()
    return out


def function_pass_manager(element: str) -> PassManager:
    """A `func.func` pass manager running one pipeline element: a polyflow pass by name (with
    `{key=value ...}` options) or any upstream MLIR pass.

    One pass manager per element, run on each function: the bindings cannot nest a Python pass
    in a module pass manager (LLVM aborts), but a Python pass added to a func.func pass manager
    receives the function, and a failure then names its pass.
    """
    name, _, opts = element.partition("{")
    pm = PassManager("func.func")
    if name in PASSES:
        instance = make_pass(name, _parse_options(opts and "{" + opts))
        pm.add(instance, instance.name)
    else:
        pm.add(element)
    return pm


def run_on_functions(module: ir.Module, pipeline: str) -> None:
    """Run `pipeline` on every function of `module` that has a body, element by element."""
    managers = [function_pass_manager(e) for e in pipeline_elements(pipeline)]
    functions = [
        op.operation
        for op in module.body.operations
        if op.operation.name == "func.func" and len(op.operation.regions[0].blocks) > 0
    ]
    for pm in managers:
        for fn in functions:
            pm.run(fn)
