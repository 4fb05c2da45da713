"""polyflow's PolyBench-style benchmark suite: 30 kernels, their runner and their reports.

    python -m bench_polybench --size MINI --configs gcc,polyflow --repeat 1

`kernels/<name>.c` are the kernel programs (each includes `harness/bench.h`, times its kernel
call and dumps its output arrays), `configs.py` says how each compiler configuration builds
them, `runner.py` builds, runs and validates, `report.py` writes the JSON, Markdown and PNG.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
ROOT = PACKAGE_DIR.parent
HARNESS_DIR = PACKAGE_DIR / "harness"
KERNELS_DIR = PACKAGE_DIR / "kernels"
RESULTS_DIR = PACKAGE_DIR / "results"

# The 30 kernels of PolyBench/C 4.2, in the suite's order (by category).
KERNELS: tuple[str, ...] = (
    # data mining
    "correlation",
    "covariance",
    # BLAS
    "gemm",
    "gemver",
    "gesummv",
    "symm",
    "syr2k",
    "syrk",
    "trmm",
    # linear-algebra kernels
    "2mm",
    "3mm",
    "atax",
    "bicg",
    "doitgen",
    "mvt",
    # linear-algebra solvers
    "cholesky",
    "durbin",
    "gramschmidt",
    "lu",
    "ludcmp",
    "trisolv",
    # medley
    "deriche",
    "floyd-warshall",
    "nussinov",
    # stencils
    "adi",
    "fdtd-2d",
    "heat-3d",
    "jacobi-1d",
    "jacobi-2d",
    "seidel-2d",
)

SIZES: tuple[str, ...] = ("MINI", "SMALL", "MEDIUM", "LARGE", "EXTRALARGE")


def kernel_function(kernel: str) -> str:
    """The C function that holds a kernel's loop nest: `kernel_floyd_warshall` for floyd-warshall."""
    return "kernel_" + kernel.replace("-", "_")
