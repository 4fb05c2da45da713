"""PolyBench 2mm, D = alpha·A·B·C + beta·D0 (two chained products), differentiated with respect
to A, B, C and D0."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from bench_ad.case import Case, CaseSpec, Size, random_inputs
from bench_ad.kernels.tc_case import tc_case

SOURCE = """
def two_mm(double(NI,NK) A, double(NK,NJ) B, double(NJ,NL) C, double(NI,NL) D0,
           double alpha, double beta) -> (tmp, D) {
  tmp(i,j) +=! alpha * A(i,k) * B(k,j)
  D(i,l) +=! tmp(i,j) * C(j,l)
  D(i,l) = D(i,l) + beta * D0(i,l)
}
"""

# (NI, NJ, NK, NL): PolyBench's LARGE dataset for the full run
SIZES: dict[Size, list[tuple[int, int, int, int]]] = {
    "small": [(16, 18, 22, 24)],
    "full": [(800, 900, 1100, 1200)],
}


def cases(size: Size) -> list[CaseSpec]:
    return [CaseSpec("2mm", _label(*shape), partial(_build, *shape)) for shape in SIZES[size]]


def _label(ni: int, nj: int, nk: int, nl: int) -> str:
    return f"NI={ni} NJ={nj} NK={nk} NL={nl}"


def _build(ni: int, nj: int, nk: int, nl: int) -> Case:
    rng = np.random.default_rng(27)
    A, B, C, D0, seed = random_inputs(rng, (ni, nk), (nk, nj), (nj, nl), (ni, nl), (ni, nl))
    return tc_case(
        kernel="2mm",
        label=_label(ni, nj, nk, nl),
        source=SOURCE,
        name="two_mm",
        inputs={"A": A, "B": B, "C": C, "D0": D0, "alpha": np.array(1.5), "beta": np.array(1.2)},
        wrt=("A", "B", "C", "D0"),
        seeds={"D": seed},
        reference=__name__,
    )


def jax_function() -> Callable[..., Any]:
    def two_mm(A: Any, B: Any, C: Any, D0: Any, alpha: Any, beta: Any) -> tuple[Any, ...]:
        return ((alpha * (A @ B)) @ C + beta * D0,)

    return two_mm


def torch_function() -> Callable[..., Any]:
    return jax_function()  # only operators: the same code runs on torch tensors
