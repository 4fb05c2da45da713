"""The TC kernel library (polyflow/tc_library.py), each kernel run through polyflow.tc at -O3
on random inputs and compared with NumPy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import polyflow.tc as tc
from polyflow.options import Options
from polyflow.tc_library import LIBRARY

RNG = np.random.default_rng(7)
O3 = Options(opt_level=3)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def conv_reference(x: np.ndarray, w: np.ndarray, stride: int = 1) -> np.ndarray:
    n, _, h, wd = x.shape
    k, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, k, oh, ow), dtype=np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i : i + stride * oh : stride, j : j + stride * ow : stride]
            out += np.einsum("nchw,kc->nkhw", patch, w[:, :, i, j])
    return out


def moments(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    mean = x.mean(axis=axes)
    var = ((x - np.expand_dims(mean, axes)) ** 2).mean(axis=axes)
    return mean, var


def softmax_reference(x: np.ndarray) -> list[np.ndarray]:
    row_max = x.max(axis=1)
    e = np.exp(x - row_max[:, None])
    total = e.sum(axis=1)
    return [row_max, e, total, e / total[:, None]]


def batchnorm_reference(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    mean, var = moments(x, (0, 2, 3))
    shape = (1, -1, 1, 1)
    out = g.reshape(shape) * (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + 1e-5)
    return [mean, var, out + b.reshape(shape)]


def layernorm_reference(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    mean, var = moments(x, (1,))
    return [mean, var, g * (x - mean[:, None]) / np.sqrt(var[:, None] + 1e-5) + b]


def mlp_reference(x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> list[np.ndarray]:
    hidden = np.maximum(x @ w1.T + b1, 0)
    return [hidden, hidden @ w2.T + b2]


def group_conv_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.stack([conv_reference(x[:, g], w[g]) for g in range(x.shape[1])], axis=1)


def pool(x: np.ndarray, reduce: Callable[..., np.ndarray]) -> np.ndarray:
    n, c, h, w = x.shape
    blocks = x[:, :, : h // 2 * 2, : w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2)
    return reduce(blocks, axis=(3, 5))


# name -> (inputs, reference outputs)
CASES: dict[str, Callable[[], tuple[list[np.ndarray], list[np.ndarray]]]] = {
    "matmul": lambda: (ins := [rand(13, 17), rand(17, 11)], [ins[0] @ ins[1]]),
    "matmul_transposed": lambda: (ins := [rand(13, 17), rand(11, 17)], [ins[0] @ ins[1].T]),
    "batch_matmul": lambda: (ins := [rand(3, 5, 7), rand(3, 7, 4)], [ins[0] @ ins[1]]),
    "matvec": lambda: (ins := [rand(19, 23), rand(23)], [ins[0] @ ins[1]]),
    "fcrelu": lambda: (
        ins := [rand(6, 10), rand(8, 10), rand(8)],
        [np.maximum(ins[0] @ ins[1].T + ins[2], 0)],
    ),
    "mlp2": lambda: (
        ins := [rand(5, 12), rand(9, 12), rand(9), rand(4, 9), rand(4)],
        mlp_reference(*ins),
    ),
    "maxpool2x2": lambda: (ins := [rand(2, 3, 9, 8)], [pool(ins[0], np.max)]),
    "avgpool2x2": lambda: (ins := [rand(2, 3, 8, 7)], [pool(ins[0], np.mean)]),
    "conv2d": lambda: (ins := [rand(2, 3, 9, 10), rand(4, 3, 3, 2)], [conv_reference(*ins)]),
    "strided_conv2d": lambda: (
        ins := [rand(2, 3, 11, 12), rand(4, 3, 3, 3), rand(4)],
        [conv_reference(ins[0], ins[1], 2) + ins[2].reshape(1, -1, 1, 1)],
    ),
    "group_conv2d": lambda: (
        ins := [rand(2, 3, 2, 7, 6), rand(3, 4, 2, 3, 2)],
        [group_conv_reference(*ins)],
    ),
    "batchnorm": lambda: (ins := [rand(3, 4, 5, 6), rand(4), rand(4)], batchnorm_reference(*ins)),
    "softmax": lambda: (ins := [rand(7, 9)], softmax_reference(*ins)),
    "layernorm": lambda: (ins := [rand(6, 10), rand(10), rand(10)], layernorm_reference(*ins)),
    "embedding": lambda: (
        ins := [rand(10, 6), RNG.integers(0, 10, size=8).astype(np.int64)],
        [ins[0][ins[1]]],
    ),
    "kronecker2": lambda: (
        ins := [rand(4, 5), rand(3, 6), rand(5, 6)],
        [ins[2] @ ins[1].T, ins[0] @ ins[2] @ ins[1].T],
    ),
}


def test_every_library_kernel_has_a_case() -> None:
    assert sorted(CASES) == sorted(LIBRARY)
    assert len(LIBRARY) >= 15


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_library_kernel_matches_numpy(name: str) -> None:
    kernel = tc.define(LIBRARY[name], name, options=O3)
    inputs, expected = CASES[name]()
    result = kernel(*inputs)
    outputs = list(result) if isinstance(result, tuple) else [result]
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected, strict=True):
        assert got.shape == want.shape
        # float32 results, reductions possibly reordered by the parallelizer
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_library_kernel_on_the_gpu_agrees_with_numpy(name: str) -> None:
    """Each kernel built for CUDA, its PTX accepted by ptxas, and its kernels run on the CPU
    emulation (blocks and threads as loops) through the same host program a GPU call runs."""
    kernel = tc.define(LIBRARY[name], name, target="cuda")
    inputs, expected = CASES[name]()
    result = kernel.emulate(*inputs)
    outputs = list(result) if isinstance(result, tuple) else [result]
    for got, want in zip(outputs, expected, strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)
    kinds = {r.kind for r in kernel.report.remarks if r.stage == "gpu"}
    assert "ptxas-error" not in kinds, kernel.report.warnings
    said = [r.text() for r in kernel.report.remarks if r.stage == "gpu"]
    # every one maps to blocks x threads, the gather (embedding) too: its reads of a table
    # nothing writes do not keep its loops sequential
    assert "gpu-kernel" in kinds, said
