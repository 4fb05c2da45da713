"""PolyBench correlation: the correlation matrix of M variables over N observations, with
PolyBench's guard that a near-zero standard deviation counts as 1, differentiated with respect
to the data.

PolyBench fills only the upper triangle and sets the diagonal to 1; TC computes the whole
symmetric matrix (its diagonal is 1 up to rounding), and so does the reference."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from bench_ad.case import Case, CaseSpec, Size, random_inputs
from bench_ad.kernels.tc_case import tc_case

EPS = 0.1  # PolyBench's threshold under which a standard deviation is taken as 1

SOURCE = f"""
def correlation(double(N,M) data, double float_n) -> (mean, var, stddev, normed, corr) {{
  mean(j) +=! data(i,j) / float_n
  var(j) +=! (data(i,j) - mean(j)) * (data(i,j) - mean(j)) / float_n
  stddev(j) = sqrt(var(j)) <= {EPS} ? 1.0 : sqrt(var(j))
  normed(i,j) = (data(i,j) - mean(j)) / (sqrt(float_n) * stddev(j))
  corr(i,j) +=! normed(k,i) * normed(k,j)
}}
"""

# (M variables, N observations): PolyBench's LARGE dataset for the full run
SIZES: dict[Size, list[tuple[int, int]]] = {"small": [(12, 14)], "full": [(1200, 1400)]}


def cases(size: Size) -> list[CaseSpec]:
    return [CaseSpec("correlation", f"M={m} N={n}", partial(_build, m, n)) for m, n in SIZES[size]]


def _build(m: int, n: int) -> Case:
    rng = np.random.default_rng(27)
    data, seed = random_inputs(rng, (n, m), (m, m))
    return tc_case(
        kernel="correlation",
        label=f"M={m} N={n}",
        source=SOURCE,
        name="correlation",
        inputs={"data": data, "float_n": np.array(float(n))},
        wrt=("data",),
        seeds={"corr": seed},
        reference=__name__,
        notes=["full symmetric matrix, diagonal computed (PolyBench: upper triangle, diag = 1)"],
    )


def jax_function() -> Callable[..., Any]:
    import jax.numpy as jnp

    def correlation(data: Any, float_n: Any) -> tuple[Any, ...]:
        mean = jnp.sum(data, axis=0) / float_n
        var = jnp.sum((data - mean) ** 2, axis=0) / float_n
        stddev = jnp.where(jnp.sqrt(var) <= EPS, 1.0, jnp.sqrt(var))
        normed = (data - mean) / (jnp.sqrt(float_n) * stddev)
        return (normed.T @ normed,)

    return correlation


def torch_function() -> Callable[..., Any]:
    import torch

    def correlation(data: Any, float_n: Any) -> tuple[Any, ...]:
        mean = torch.sum(data, dim=0) / float_n
        var = torch.sum((data - mean) ** 2, dim=0) / float_n
        stddev = torch.where(torch.sqrt(var) <= EPS, torch.ones_like(var), torch.sqrt(var))
        normed = (data - mean) / (torch.sqrt(float_n) * stddev)
        return (normed.T @ normed,)

    return correlation
