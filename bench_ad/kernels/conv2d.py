"""2-D convolution with bias, NCHW input, FCKhKw filters, stride 1, no padding ("valid"),
differentiated with respect to the input, the filters and the bias."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from bench_ad.case import Case, CaseSpec, Size, random_inputs
from bench_ad.kernels.tc_case import tc_case

SOURCE = """
def conv2d(double(N,C,H,W) I, double(F,C,KH,KW) Wt, double(F) bias) -> (O) {
  O(n,f,h,w) +=! I(n,c,h+kh,w+kw) * Wt(f,c,kh,kw)
  O(n,f,h,w) = O(n,f,h,w) + bias(f)
}
"""

# (N, C, H=W, F, kernel)
SIZES: dict[Size, list[tuple[int, int, int, int, int]]] = {
    "small": [(2, 3, 8, 4, 3)],
    "full": [(8, 64, 56, 64, 3)],
}


def cases(size: Size) -> list[CaseSpec]:
    return [CaseSpec("conv2d", _label(*shape), partial(_build, *shape)) for shape in SIZES[size]]


def _label(n: int, c: int, hw: int, f: int, k: int) -> str:
    return f"N={n} C={c} H=W={hw} F={f} {k}x{k}"


def _build(n: int, c: int, hw: int, f: int, k: int) -> Case:
    rng = np.random.default_rng(27)
    images, filters, bias = random_inputs(rng, (n, c, hw, hw), (f, c, k, k), (f,))
    out = hw - k + 1
    (seed,) = random_inputs(rng, (n, f, out, out))
    return tc_case(
        kernel="conv2d",
        label=_label(n, c, hw, f, k),
        source=SOURCE,
        name="conv2d",
        inputs={"I": images, "Wt": filters, "bias": bias},
        wrt=("I", "Wt", "bias"),
        seeds={"O": seed},
        reference=__name__,
    )


def jax_function() -> Callable[..., Any]:
    from jax import lax

    def conv2d(images: Any, filters: Any, bias: Any) -> tuple[Any, ...]:
        out = lax.conv_general_dilated(
            images, filters, (1, 1), "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW")
        )
        return (out + bias[None, :, None, None],)

    return conv2d


def torch_function() -> Callable[..., Any]:
    import torch.nn.functional as F

    def conv2d(images: Any, filters: Any, bias: Any) -> tuple[Any, ...]:
        return (F.conv2d(images, filters, bias),)

    return conv2d
