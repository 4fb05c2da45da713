"""The benchmark's kernels: each module has `cases(size) -> list[CaseSpec]` and the references
`jax_function(**args)` and `torch_function(**args)` (which import JAX or PyTorch when called,
in the child process only)."""

from __future__ import annotations

import importlib

from bench_ad.case import CaseSpec, Size

# name on the command line -> module of bench_ad.kernels, in the order the table lists them
KERNELS: dict[str, str] = {
    "gmm": "gmm",
    "lstm": "lstm",
    "mlp": "mlp",
    "trmv": "trmv",
    "conv2d": "conv2d",
    "gemm": "gemm",
    "2mm": "two_mm",
    "correlation": "correlation",
    "jacobi-2d": "jacobi_2d",
    "heat-3d": "heat_3d",
}


def cases(names: list[str], size: Size) -> list[CaseSpec]:
    """The cases of the kernels `names` at `size`, kernel by kernel."""
    found: list[CaseSpec] = []
    for name in names:
        module = importlib.import_module(f"bench_ad.kernels.{KERNELS[name]}")
        found += module.cases(size)
    return found
