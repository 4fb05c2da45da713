"""Triangular matrix–vector product y = L x, L lower triangular (BLAS trmv).

TC has no triangular domains (a `where` range may not use another index), so the sum runs over
the whole square with the upper triangle cut by the index condition `j <= i`; the gradient with
respect to L is then zero above the diagonal, as it is for the triangular product."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from bench_ad.case import Case, CaseSpec, Size, random_inputs
from bench_ad.kernels.tc_case import tc_case

SOURCE = """
def trmv(double(N,N) L, double(N) x) -> (y) {
  y(i) +=! j <= i ? L(i,j) * x(j) : 0.0
}
"""

SIZES: dict[Size, list[int]] = {"small": [33], "full": [1024, 2048, 4096]}


def cases(size: Size) -> list[CaseSpec]:
    return [CaseSpec("trmv", f"N={n}", partial(_build, n)) for n in SIZES[size]]


def _build(n: int) -> Case:
    rng = np.random.default_rng(27)
    L, x, seed = random_inputs(rng, (n, n), (n,), (n,))
    L = np.tril(L)
    return tc_case(
        kernel="trmv",
        label=f"N={n}",
        source=SOURCE,
        name="trmv",
        inputs={"L": L, "x": x},
        wrt=("L", "x"),
        seeds={"y": seed},
        reference=__name__,
        notes=["triangle as `j <= i ? ... : 0.0` over the square (TC has no triangular domain)"],
    )


def jax_function() -> Callable[..., Any]:
    import jax.numpy as jnp

    def trmv(L: Any, x: Any) -> tuple[Any, ...]:
        return (jnp.tril(L) @ x,)

    return trmv


def torch_function() -> Callable[..., Any]:
    import torch

    def trmv(L: Any, x: Any) -> tuple[Any, ...]:
        return (torch.tril(L) @ x,)

    return trmv
