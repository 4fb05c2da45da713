"""A benchmark case from a Tensor Comprehensions definition: polyflow runs the definition, the
reference module computes the same outputs in JAX or PyTorch."""

from __future__ import annotations

from typing import Any

import numpy as np

import polyflow.tc as tc
from bench_ad.case import Case, adjoints
from bench_ad.gradient_ir import GradientIR


class TracedGradient:
    """`fn.grad(wrt)` that keeps the stages of the gradient it compiled (`ir`, after a call)."""

    def __init__(self, fn: tc.TcFunction, wrt: tuple[str, ...]) -> None:
        self.fn, self.gradient = fn, fn.grad(wrt)
        self.ir: GradientIR | None = None

    def __call__(self, *args: Any, seed: Any) -> Any:
        result = self.gradient(*args, seed=seed)
        if self.ir is None and self.gradient.compiled is not None:  # what the call ran
            self.ir = GradientIR(f"{self.fn.name}_grad", self.gradient.compiled.stages)
        return result


def tc_case(
    *,
    kernel: str,
    label: str,
    source: str,
    name: str,
    inputs: dict[str, np.ndarray],
    wrt: tuple[str, ...],
    seeds: dict[str, np.ndarray],
    reference: str,
    reference_args: dict[str, Any] | None = None,
    notes: list[str] | None = None,
    primal_name: str | None = None,
) -> Case:
    """Definition `name` of `source` on `inputs` (in signature order; 0-d arrays for scalars),
    differentiated with respect to `wrt` for the adjoints `seeds` of the outputs they name (the
    other outputs, intermediates the reference does not return, get none). `primal_name`: a
    different definition of `source` to time as the primal (one the gradient cannot use)."""
    fn = tc.define(source, name)
    primal_fn = fn if primal_name is None else tc.define(source, primal_name)
    args = list(inputs.values())
    output_names = [t.name for t in fn.definition.outputs]
    unknown = sorted(set(seeds) - set(output_names))
    if unknown:
        raise ValueError(f"{name} has no output {', '.join(unknown)}")
    seed_list = [seeds.get(output) for output in output_names]
    gradient = TracedGradient(fn, wrt)

    def run_gradient() -> tuple[np.ndarray, ...]:
        return adjoints(gradient(*args, seed=seed_list))

    names = list(inputs)
    return Case(
        kernel=kernel,
        label=label,
        reference=reference,
        inputs=[np.asarray(a) for a in args],
        wrt=tuple(names.index(w) for w in wrt),
        seeds=list(seeds.values()),
        primal=lambda: primal_fn(*args),
        gradient=run_gradient,
        reference_args=reference_args or {},
        notes=notes or [],
        gradient_ir=lambda: gradient.ir,
        release=gradient.gradient.release_buffers,
    )
