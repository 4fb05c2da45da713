"""PolyBench gemm, out = alpha·A·B + beta·C (PolyBench updates C in place; here the result is a
new output), differentiated with respect to A, B and C."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from bench_ad.case import Case, CaseSpec, Size, random_inputs
from bench_ad.kernels.tc_case import tc_case

SOURCE = """
def gemm(double(NI,NK) A, double(NK,NJ) B, double(NI,NJ) C, double alpha, double beta) -> (out) {
  out(i,j) +=! alpha * A(i,k) * B(k,j)
  out(i,j) = out(i,j) + beta * C(i,j)
}
"""

# (NI, NJ, NK): PolyBench's LARGE dataset for the full run
SIZES: dict[Size, list[tuple[int, int, int]]] = {
    "small": [(20, 25, 30)],
    "full": [(1000, 1100, 1200)],
}


def cases(size: Size) -> list[CaseSpec]:
    return [
        CaseSpec("gemm", f"NI={ni} NJ={nj} NK={nk}", partial(_build, ni, nj, nk))
        for ni, nj, nk in SIZES[size]
    ]


def _build(ni: int, nj: int, nk: int) -> Case:
    rng = np.random.default_rng(27)
    A, B, C, seed = random_inputs(rng, (ni, nk), (nk, nj), (ni, nj), (ni, nj))
    return tc_case(
        kernel="gemm",
        label=f"NI={ni} NJ={nj} NK={nk}",
        source=SOURCE,
        name="gemm",
        inputs={"A": A, "B": B, "C": C, "alpha": np.array(1.5), "beta": np.array(1.2)},
        wrt=("A", "B", "C"),
        seeds={"out": seed},
        reference=__name__,
    )


def jax_function() -> Callable[..., Any]:
    def gemm(A: Any, B: Any, C: Any, alpha: Any, beta: Any) -> tuple[Any, ...]:
        return (alpha * (A @ B) + beta * C,)

    return gemm


def torch_function() -> Callable[..., Any]:
    return jax_function()  # only operators: the same code runs on torch tensors
