"""PolyBench heat-3d (C, bench_ad/kernels/heat_3d.c), differentiated with respect to the
initial A and B for adjoints of their final values."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from bench_ad.case import Case, CaseSpec, Size, random_inputs
from bench_ad.kernels.c_case import stencil_case

# (time steps, n): PolyBench's MEDIUM dataset for the full run
SIZES: dict[Size, list[tuple[int, int]]] = {"small": [(3, 8)], "full": [(100, 40)]}


def cases(size: Size) -> list[CaseSpec]:
    return [CaseSpec("heat-3d", f"T={t} N={n}", partial(_build, t, n)) for t, n in SIZES[size]]


def _build(tsteps: int, n: int) -> Case:
    rng = np.random.default_rng(27)
    shape = (n, n, n)
    A, B, seed_a, seed_b = random_inputs(rng, shape, shape, shape, shape)
    return stencil_case(
        kernel="heat-3d",
        label=f"T={tsteps} N={n}",
        file="heat_3d.c",
        entry="heat_3d",
        tsteps=tsteps,
        n=n,
        A=A,
        B=B,
        seeds=(seed_a, seed_b),
        reference=__name__,
    )


def _heat(X: Any) -> Any:
    """One explicit heat step on X's interior points (as the C source orders the terms)."""
    c = X[1:-1, 1:-1, 1:-1]
    return (
        0.125 * (X[2:, 1:-1, 1:-1] - 2.0 * c + X[:-2, 1:-1, 1:-1])
        + 0.125 * (X[1:-1, 2:, 1:-1] - 2.0 * c + X[1:-1, :-2, 1:-1])
        + 0.125 * (X[1:-1, 1:-1, 2:] - 2.0 * c + X[1:-1, 1:-1, :-2])
        + c
    )


def jax_function(tsteps: int) -> Callable[..., Any]:
    import jax

    def step(carry: tuple[Any, Any], _: Any) -> tuple[tuple[Any, Any], None]:
        A, B = carry
        B = B.at[1:-1, 1:-1, 1:-1].set(_heat(A))
        A = A.at[1:-1, 1:-1, 1:-1].set(_heat(B))
        return (A, B), None

    def heat_3d(A: Any, B: Any) -> tuple[Any, ...]:
        final, _ = jax.lax.scan(step, (A, B), None, length=tsteps)
        return final

    return heat_3d


def torch_function(tsteps: int) -> Callable[..., Any]:
    def heat_3d(A: Any, B: Any) -> tuple[Any, ...]:
        A, B = A.clone(), B.clone()
        for _ in range(tsteps):
            B[1:-1, 1:-1, 1:-1] = _heat(A)
            A[1:-1, 1:-1, 1:-1] = _heat(B)
        return A, B

    return heat_3d
