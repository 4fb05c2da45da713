"""Raising: the frontend's `scf`/`memref` code → `affine`, function by function, never wrong code.

`raise_to_affine(module, options)` inlines calls to scalar helpers (inline_calls.py), then runs
`RAISE_PIPELINE` (polyflow's raising passes with upstream cleanups between them) on every
function of `module` that has a body, except the C-ABI entries (`__polyflow_*`, which have no
loops) and functions marked `polyflow.no_raise`.
Each function is raised on its own copy: when a pass fails or raises an exception, that function
keeps its frontend code, is marked `polyflow.not_affine = "<reason>"` and `raising_remarks`
warns about it; the other functions are raised as usual. See CONTRACT.md for what the passes do.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from mlir import ir
from mlir.passmanager import PassManager

from polyflow import passes
from polyflow.ir.functions import raisable_functions, scratch_module, source_names, swap_in
from polyflow.ir.names import NOT_AFFINE_ATTR, symbol_name
from polyflow.ir.remarks import remark_at
from polyflow.options import Options
from polyflow.report import Remark

from .alias_guard import guard_argument_aliasing
from .inline_calls import inline_scalar_calls
from .pointer_extents import size_pointer_arguments
from .report import RaiseReport

# The raising sequence, on each function. The cleanups first fold the frontend's constants and
# hoist the loop-invariant index casts of bounds, so that the passes see simple bounds; after
# mem2reg they clean the SSA values it made before scf→affine reads the bounds and subscripts.
RAISE_PIPELINE = ",".join(
    [
        "canonicalize",
        "cse",
        "loop-invariant-code-motion",
        "raise-mem2reg",
        "canonicalize",
        "cse",
        "loop-invariant-code-motion",
        "raise-scf-to-affine",
        "raise-delinearize",
        "raise-reductions",
        "canonicalize",
        "cse",
    ]
)


@dataclass(frozen=True)
class _Step:
    """One pipeline element, ready to run: its text and a pass manager holding it."""

    element: str
    pass_manager: PassManager


def _build_steps(elements: list[str]) -> list[_Step]:
    """One func.func pass manager per element, so that a failure names its pass."""
    return [_Step(e, passes.function_pass_manager(e)) for e in elements]


def _failure_reason(element: str, exc: Exception) -> str:
    if isinstance(exc, ir.MLIRError):
        details = "; ".join(str(d.message) for d in exc.error_diagnostics)
        what = details or "it signalled failure"
    else:
        what = f"{type(exc).__name__}: {exc}"
    return f"pass '{element}' failed: {what}"


def _raise_function(module: ir.Module, fn: ir.Operation, steps: list[_Step]) -> str | None:
    """Raise `fn` on a copy and swap the copy in; on failure leave `fn` as it is, return why."""
    scratch, copy = scratch_module(module, fn)  # `scratch` owns `copy`: kept alive until the end
    if NOT_AFFINE_ATTR in copy.attributes:  # from an earlier raising of the same module
        del copy.attributes[NOT_AFFINE_ATTR]
    for step in steps:
        try:
            step.pass_manager.run(copy)
        except Exception as exc:  # anything a pass does wrong leaves this function unraised
            return _failure_reason(step.element, exc)
    # Its callers (the C-ABI entry, other functions) must still match it.
    if swap_in(fn, copy) is None:
        return "the raising passes changed the function's type"
    del scratch
    return None


def raise_to_affine(
    module: ir.Module, options: Options, *, functions: Collection[str] | None = None
) -> ir.Module:
    """Raise every raisable function of `module` (or just those named in `functions`) to
    `affine` in place (see the module docstring); returns `module`. Does nothing unless
    `options.raising_enabled`.

    A function whose raising fails keeps its code and gets `polyflow.not_affine = "<reason>"`.
    """
    if not options.raising_enabled:
        return module
    with module.context, ir.Location.unknown():
        guard_argument_aliasing(module)
        names = source_names(module)
        targets = [
            fn
            for fn in raisable_functions(module)
            if functions is None or names.get(symbol_name(fn), symbol_name(fn)) in functions
        ]
        if not targets:
            return module
        inline_scalar_calls(module, targets)
        try:
            steps = _build_steps(passes.pipeline_elements(RAISE_PIPELINE))
        except Exception as exc:  # a pass that cannot be built: nothing is raised, and we say so
            why = f"the raising pipeline could not be built: {type(exc).__name__}: {exc}"
            for fn in targets:
                fn.attributes[NOT_AFFINE_ATTR] = ir.StringAttr.get(why)
            return module
        raised_names = frozenset(symbol_name(fn) for fn in targets)
        for fn in targets:
            try:
                reason = _raise_function(module, fn, steps)
            except Exception as exc:  # a bug of ours around the passes: same fallback
                reason = f"internal error while raising: {type(exc).__name__}: {exc}"
            if reason is not None:
                fn.attributes[NOT_AFFINE_ATTR] = ir.StringAttr.get(reason)
        if options.opt_level == 3 or options.target == "cuda":  # where stages use the extents
            size_pointer_arguments(module, options, functions=raised_names)
    return module


# After the `grad` stage: the adjoint sweep adds each contribution to memory where it is made
# (`Ā[i,k] += ...` in the innermost loop, a scalar's shadow in every iteration); the same
# promotion of loop-invariant updates to `iter_args` as raising's turns those into sums.
TIDY_GRADIENT_PIPELINE = ",".join(
    ["canonicalize", "cse", "loop-invariant-code-motion", "raise-reductions", "canonicalize", "cse"]
)


def tidy_gradients(module: ir.Module, names: Collection[str]) -> ir.Module:
    """Promote the memory updates at loop-invariant addresses of the functions `names` (the
    gradients the `grad` stage built) to loop-carried sums, in place; a function the passes
    fail on keeps its code (it is correct as it is)."""
    with module.context, ir.Location.unknown():
        targets = [fn for fn in raisable_functions(module) if symbol_name(fn) in names]
        if not targets:
            return module
        steps = _build_steps(passes.pipeline_elements(TIDY_GRADIENT_PIPELINE))
        for fn in targets:
            _raise_function(module, fn, steps)
    return module


def raising_remarks(module: ir.Module, *, enabled: bool = True) -> list[Remark]:
    """What raising made of `module`, for the compile report: a warning for every function
    whose raising failed, at its C position; then, per function, a remark for every loop
    (raised or not, and why) and every `if` or memory access left unraised (see report.py).
    `enabled`: whether raising ran at all."""
    return _failed_functions(module) + RaiseReport.from_module(module, enabled=enabled).remarks()


def raise_warnings(module: ir.Module) -> list[str]:
    """A warning for every function whose raising failed, at its C position."""
    return [r.text() for r in _failed_functions(module)]


def _failed_functions(module: ir.Module) -> list[Remark]:
    out: list[Remark] = []
    with module.context:
        names = source_names(module)
        for op in module.body.operations:
            operation = op.operation
            if operation.name != "func.func" or NOT_AFFINE_ATTR not in operation.attributes:
                continue
            reason = ir.StringAttr(operation.attributes[NOT_AFFINE_ATTR]).value
            symbol = symbol_name(operation)
            name = names.get(symbol, symbol)
            out.append(
                remark_at(
                    operation.location,
                    "raising",
                    "not-raised",
                    "warning",
                    f"function '{name}' is not raised to affine and stays unoptimized: {reason}",
                    {"reason": reason},
                    function=name,
                )
            )
    return out


