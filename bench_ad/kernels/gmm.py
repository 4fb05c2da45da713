"""ADBench's Gaussian mixture model objective, differentiated with respect to all parameters.

For n points x_i of dimension d and K components with weights alphas, means mu_k and inverse
covariance factors Q_k (lower triangular, diagonal exp(q_k)):

    sum_i logsumexp_k(alpha_k + sum(q_k) - ½‖Q_k (x_i − mu_k)‖²) − n·logsumexp(alphas)
      + ½ Σ_k (‖exp(q_k)‖² + ‖L_k‖²) + constant

with the Wishart prior at gamma = 1, m = 0 (its constant folded into `constant`, with the
−n·d·½·log 2π of the normal densities). ADBench packs q_k and the strictly lower part L_k of
Q_k into one vector `icf`; TC has no triangular domains, so L_k is a dense d×d input, zero on
and above the diagonal, and its gradient is computed (and compared) on the whole square.

Both logsumexps subtract their max (`max=!`). Where polyflow cannot differentiate a max
reduction, the gradient runs a second definition that takes the maxes as inputs, computed first
by a primal-only definition: the value and the gradient do not depend on the shift.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

import polyflow.tc as tc
from bench_ad.case import Case, CaseSpec, Size, adjoints, random_inputs
from bench_ad.kernels.tc_case import TracedGradient, tc_case
from polyflow import CompileError

# the objective up to its two maxes: shared by the three definitions below
_BODY = """
  sumq(k) +=! qlog(k,a)
  xc(i,k,a) = x(i,a) - means(k,a)
  qx(i,k,a) = exp(qlog(k,a)) * xc(i,k,a)
  qx(i,k,a) += Lt(k,a,b) * xc(i,k,b)
  sq(i,k) +=! qx(i,k,a) * qx(i,k,a)
  main(i,k) = alphas(k) + sumq(k) - 0.5 * sq(i,k)
"""
_MAXES = """
  mx(i) max=! main(i,k)
  amx() max=! alphas(k)
"""
_REST = """
  se(i) +=! exp(main(i,k) - mx(i))
  ase() +=! exp(alphas(k) - amx())
  prior() +=! 0.5 * exp(2.0 * qlog(k,a))
  prior() += 0.5 * Lt(k,a,b) * Lt(k,a,b)
  obj() +=! log(se(i)) + mx(i)
  obj() = obj() - N * (log(ase()) + amx()) + prior() + constant
"""
_PARAMS = "double(N,D) x, double(K) alphas, double(K,D) means, double(K,D) qlog, double(K,D,D) Lt"
_TEMPS = "sumq, xc, qx, sq, main"
SOURCE = f"""
def gmm({_PARAMS}, double constant) -> ({_TEMPS}, mx, amx, se, ase, prior, obj) {{
{_BODY}{_MAXES}{_REST}}}

def gmm_maxes({_PARAMS}) -> ({_TEMPS}, mx, amx) {{
{_BODY}{_MAXES}}}

def gmm_shifted({_PARAMS}, double constant, double(N) mx, double amx)
    -> ({_TEMPS}, se, ase, prior, obj) {{
{_BODY}{_REST}}}
"""
WRT = ("alphas", "means", "qlog", "Lt")

# (d, K) of D0..D5; n points
SIZES: dict[Size, tuple[int, list[tuple[int, int]]]] = {
    "small": (10, [(2, 3), (4, 5)]),
    "full": (1000, [(2, 5), (10, 10), (20, 25), (32, 50), (64, 100), (64, 200)]),
}


def cases(size: Size) -> list[CaseSpec]:
    n, shapes = SIZES[size]
    return [
        CaseSpec("gmm", f"D{k} d={d} K={K} n={n}", partial(_build, f"D{k}", n, d, K))
        for k, (d, K) in enumerate(shapes)
    ]


def constant(n: int, d: int, k: int) -> float:
    """The objective's constant: the normal densities' −n·d·½·log 2π and −K times the Wishart
    normalizer at gamma = 1, m = 0 (p = d, n_w = d + 1 degrees of freedom)."""
    dof = d + 1
    log_multigamma = d * (d - 1) / 4 * math.log(math.pi) + sum(
        math.lgamma(0.5 * dof + (1 - j) / 2) for j in range(1, d + 1)
    )
    wishart = dof * d * (-0.5 * math.log(2.0)) - log_multigamma
    return -n * d * 0.5 * math.log(2 * math.pi) - k * wishart


def _build(name: str, n: int, d: int, k: int) -> Case:
    rng = np.random.default_rng(27)
    x, alphas, means, qlog, lower = random_inputs(rng, (n, d), (k,), (k, d), (k, d), (k, d, d))
    qlog *= 0.1  # keeps the precisions near 1, as ADBench's data does
    lower = np.ascontiguousarray(np.tril(0.1 * lower, -1))
    inputs = {
        "x": x, "alphas": alphas, "means": means, "qlog": qlog, "Lt": lower,
        "constant": np.array(constant(n, d, k)),
    }  # fmt: skip
    seed = np.array(1.0)
    case = tc_case(
        kernel="gmm",
        label=f"{name} d={d} K={k} n={n}",
        source=SOURCE,
        name="gmm",
        inputs=inputs,
        wrt=WRT,
        seeds={"obj": seed},
        reference=__name__,
        notes=["Q_k as exp(q_k) on the diagonal plus a dense strictly-lower d×d input"],
    )
    direct_ir = case.gradient_ir
    fallback, traced = _shifted_gradient(inputs, seed)
    case.gradient = _with_fallback(case, fallback)
    case.gradient_ir = lambda: traced.ir or direct_ir()
    direct_release = case.release

    def release() -> None:
        direct_release()
        traced.gradient.release_buffers()

    case.release = release
    return case


def _shifted_gradient(
    inputs: dict[str, np.ndarray], seed: np.ndarray
) -> tuple[Callable[[], tuple[np.ndarray, ...]], TracedGradient]:
    """The gradient through `gmm_shifted`, its maxes computed first by `gmm_maxes` (and
    `gmm_shifted`'s gradient, whose `ir` is set once it ran)."""
    maxes = tc.define(SOURCE, "gmm_maxes")
    shifted = TracedGradient(tc.define(SOURCE, "gmm_shifted"), WRT)
    params = [inputs[name] for name in ("x", "alphas", "means", "qlog", "Lt")]

    def run() -> tuple[np.ndarray, ...]:
        *_, mx, amx = maxes(*params)
        seeds = [None] * 8 + [seed]  # sumq..main, se, ase, prior: no adjoint; obj: 1
        return adjoints(shifted(*params, inputs["constant"], mx, amx, seed=seeds))

    return run, shifted


def _with_fallback(
    case: Case, fallback: Callable[[], tuple[np.ndarray, ...]]
) -> Callable[[], Sequence[np.ndarray]]:
    """`case.gradient`, or `fallback` from the first call on if the direct one does not compile
    (the reason goes into the case's notes)."""
    direct = case.gradient
    chosen: list[Callable[[], Sequence[np.ndarray]]] = []

    def run() -> Sequence[np.ndarray]:
        if chosen:
            return chosen[0]()
        try:
            result = direct()
            chosen.append(direct)
        except CompileError as error:
            case.notes.append(f"max=! not differentiated ({error}); shifted logsumexp used")
            result = fallback()
            chosen.append(fallback)
        return result

    return run


def jax_function() -> Callable[..., Any]:
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp

    def gmm(
        x: Any, alphas: Any, means: Any, qlog: Any, lower: Any, constant: Any
    ) -> tuple[Any, ...]:
        xc = x[:, None, :] - means[None, :, :]
        qx = jnp.exp(qlog)[None] * xc + jnp.einsum("kab,ikb->ika", lower, xc)
        main = alphas + jnp.sum(qlog, axis=1) - 0.5 * jnp.sum(qx * qx, axis=2)
        prior = 0.5 * jnp.sum(jnp.exp(2.0 * qlog)) + 0.5 * jnp.sum(lower * lower)
        n = x.shape[0]
        value = jnp.sum(logsumexp(main, axis=1)) - n * logsumexp(alphas) + prior + constant
        return (value,)

    return gmm


def torch_function() -> Callable[..., Any]:
    import torch

    def gmm(
        x: Any, alphas: Any, means: Any, qlog: Any, lower: Any, constant: Any
    ) -> tuple[Any, ...]:
        xc = x[:, None, :] - means[None, :, :]
        qx = torch.exp(qlog)[None] * xc + torch.einsum("kab,ikb->ika", lower, xc)
        main = alphas + torch.sum(qlog, dim=1) - 0.5 * torch.sum(qx * qx, dim=2)
        prior = 0.5 * torch.sum(torch.exp(2.0 * qlog)) + 0.5 * torch.sum(lower * lower)
        n = x.shape[0]
        value = (
            torch.sum(torch.logsumexp(main, dim=1))
            - n * torch.logsumexp(alphas, dim=0)
            + prior
            + constant
        )
        return (value,)

    return gmm
