"""A 2-layer perceptron, y = tanh(X W1ᵀ + b1) W2ᵀ + b2, differentiated with respect to its
weights and biases (a training step's backward pass)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from bench_ad.case import Case, CaseSpec, Size, random_inputs
from bench_ad.kernels.tc_case import tc_case

SOURCE = """
def mlp(double(B,I) X, double(H,I) W1, double(H) b1, double(O,H) W2, double(O) b2) -> (h, a, y) {
  h(b,j) +=! X(b,i) * W1(j,i)
  a(b,j) = tanh(h(b,j) + b1(j))
  y(b,o) +=! a(b,j) * W2(o,j)
  y(b,o) = y(b,o) + b2(o)
}
"""

# (batch, inputs, hidden, outputs)
SIZES: dict[Size, list[tuple[int, int, int, int]]] = {
    "small": [(8, 16, 8, 4)],
    "full": [(256, 784, 256, 10), (256, 784, 512, 10), (256, 784, 1024, 10)],
}


def cases(size: Size) -> list[CaseSpec]:
    return [
        CaseSpec("mlp", f"B={b} I={i} H={h} O={o}", partial(_build, b, i, h, o))
        for b, i, h, o in SIZES[size]
    ]


def _build(batch: int, inputs: int, hidden: int, outputs: int) -> Case:
    rng = np.random.default_rng(27)
    X, W1, b1, W2, b2 = random_inputs(
        rng, (batch, inputs), (hidden, inputs), (hidden,), (outputs, hidden), (outputs,)
    )
    W1 /= np.sqrt(inputs)  # keeps tanh away from saturation, where its gradient vanishes
    W2 /= np.sqrt(hidden)
    (seed,) = random_inputs(rng, (batch, outputs))
    return tc_case(
        kernel="mlp",
        label=f"B={batch} I={inputs} H={hidden} O={outputs}",
        source=SOURCE,
        name="mlp",
        inputs={"X": X, "W1": W1, "b1": b1, "W2": W2, "b2": b2},
        wrt=("W1", "b1", "W2", "b2"),
        seeds={"y": seed},
        reference=__name__,
    )


def jax_function() -> Callable[..., Any]:
    import jax.numpy as jnp

    def mlp(X: Any, W1: Any, b1: Any, W2: Any, b2: Any) -> tuple[Any, ...]:
        return (jnp.tanh(X @ W1.T + b1) @ W2.T + b2,)

    return mlp


def torch_function() -> Callable[..., Any]:
    import torch

    def mlp(X: Any, W1: Any, b1: Any, W2: Any, b2: Any) -> tuple[Any, ...]:
        return (torch.tanh(X @ W1.T + b1) @ W2.T + b2,)

    return mlp
