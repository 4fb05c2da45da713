"""A benchmark case from a C time-stepping stencil `void f(int tsteps, int n, double A[..],
double B[..])` that updates A and B in place.

The gradient uses `polyflow.compile_c(source, f, grad=f)`, whose callable's `.grad` takes
Enzyme's arguments: each float array followed by its shadow. The shadows hold the adjoints of
A's and B's final values on entry and those of their initial values on return. While that API
does not exist, the gradient raises `NotAvailable` (the primal is still measured)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import polyflow
from bench_ad.case import Case, NotAvailable
from bench_ad.gradient_ir import GradientIR

HERE = Path(__file__).resolve().parent


def _lazy(make: Callable[[], Any]) -> Callable[[], Any]:
    """`make()` on the first call, the same object after: compiles inside the timed first call."""
    made: list[Any] = []

    def get() -> Any:
        if not made:
            made.append(make())
        return made[0]

    return get


def _compile_gradient(source: str, entry: str) -> Any:
    if "grad" not in inspect.signature(polyflow.compile_c).parameters:
        raise NotAvailable("polyflow.compile_c has no grad= parameter yet")
    compiled = polyflow.compile_c(source, entry, grad=entry)
    if getattr(compiled, "grad", None) is None:
        raise NotAvailable(f"compile_c(..., grad='{entry}') returned no .grad")
    return compiled


def stencil_case(
    *,
    kernel: str,
    label: str,
    file: str,
    entry: str,
    tsteps: int,
    n: int,
    A: np.ndarray,
    B: np.ndarray,
    seeds: tuple[np.ndarray, np.ndarray],
    reference: str,
) -> Case:
    """`entry` of C file `file` (next to this module) on copies of A and B each call (the
    kernel overwrites them), differentiated with respect to both for the adjoints `seeds` of
    their final values."""
    source = (HERE / file).read_text()
    primal_fn = _lazy(lambda: polyflow.compile_c(source, entry))
    gradient_fn = _lazy(lambda: _compile_gradient(source, entry))

    def primal() -> tuple[np.ndarray, np.ndarray]:
        a, b = A.copy(), B.copy()
        primal_fn()(tsteps, n, a, b)
        return a, b

    def gradient() -> tuple[np.ndarray, np.ndarray]:
        a, b = A.copy(), B.copy()
        da, db = seeds[0].copy(), seeds[1].copy()
        gradient_fn().grad(tsteps, n, a, da, b, db)
        return da, db

    return Case(
        kernel=kernel,
        label=label,
        reference=reference,
        inputs=[A, B],
        wrt=(0, 1),
        seeds=list(seeds),
        primal=primal,
        gradient=gradient,
        reference_args={"tsteps": tsteps},
        notes=["C with a time loop; both timings include copying A, B (and the seeds)"],
        # `@f_grad` takes f's parameters first: the sizes of its tapes depend on tsteps and n
        gradient_ir=lambda: GradientIR(
            f"{entry}_grad", gradient_fn().stages, {"%arg0": tsteps, "%arg1": n}
        ),
    )
