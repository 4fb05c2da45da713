"""PolyBench jacobi-2d (C, bench_ad/kernels/jacobi_2d.c), differentiated with respect to the
initial A and B for adjoints of their final values."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from bench_ad.case import Case, CaseSpec, Size, random_inputs
from bench_ad.kernels.c_case import stencil_case

# (time steps, n): PolyBench's MEDIUM dataset for the full run (JAX keeps every step's arrays
# for the reverse sweep: LARGE's 500 steps of 1300² would take 13 GB)
SIZES: dict[Size, list[tuple[int, int]]] = {"small": [(4, 12)], "full": [(100, 250)]}


def cases(size: Size) -> list[CaseSpec]:
    return [CaseSpec("jacobi-2d", f"T={t} N={n}", partial(_build, t, n)) for t, n in SIZES[size]]


def _build(tsteps: int, n: int) -> Case:
    rng = np.random.default_rng(27)
    A, B, seed_a, seed_b = random_inputs(rng, (n, n), (n, n), (n, n), (n, n))
    return stencil_case(
        kernel="jacobi-2d",
        label=f"T={tsteps} N={n}",
        file="jacobi_2d.c",
        entry="jacobi_2d",
        tsteps=tsteps,
        n=n,
        A=A,
        B=B,
        seeds=(seed_a, seed_b),
        reference=__name__,
    )


def _average(X: Any) -> Any:
    """The 5-point average of X's interior points."""
    return 0.2 * (X[1:-1, 1:-1] + X[1:-1, :-2] + X[1:-1, 2:] + X[2:, 1:-1] + X[:-2, 1:-1])


def jax_function(tsteps: int) -> Callable[..., Any]:
    import jax

    def step(carry: tuple[Any, Any], _: Any) -> tuple[tuple[Any, Any], None]:
        A, B = carry
        B = B.at[1:-1, 1:-1].set(_average(A))
        A = A.at[1:-1, 1:-1].set(_average(B))
        return (A, B), None

    def jacobi_2d(A: Any, B: Any) -> tuple[Any, ...]:
        final, _ = jax.lax.scan(step, (A, B), None, length=tsteps)
        return final

    return jacobi_2d


def torch_function(tsteps: int) -> Callable[..., Any]:
    def jacobi_2d(A: Any, B: Any) -> tuple[Any, ...]:
        A, B = A.clone(), B.clone()
        for _ in range(tsteps):
            B[1:-1, 1:-1] = _average(A)
            A[1:-1, 1:-1] = _average(B)
        return A, B

    return jacobi_2d
