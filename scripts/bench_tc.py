"""Tensor Comprehensions on the CPU: polyflow's kernels next to NumPy (and PyTorch where
installed), in one run.

    .venv/bin/python scripts/bench_tc.py [--repeat 5] [--threads 2] [--only matmul,conv2d,mlp]
                                         [--json out.json]

Workloads (float32): matmul 1024x1024x1024; conv2d N=8, C=K=64, 56x56, 3x3 (valid, NCHW); a
2-layer MLP (batch 128, 1024 -> 1024 -> 1024, bias and ReLU after the first layer). Each
polyflow kernel comes from polyflow/tc_library.py, is compiled once (not timed) at
`Options(opt_level=3, march="native")`, checked against NumPy, then timed; the NumPy reference
uses its BLAS (`@`, and an im2col matrix product for the convolution). Every time is the median
of `--repeat` runs after one warm-up. The table (stdout) gives the times and the ratio
polyflow / peer (below 1: polyflow is faster). `--threads` sets OMP_NUM_THREADS for polyflow and
the BLAS thread count (through threadpoolctl when installed, else the environment).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _set_threads(threads: int) -> None:
    # Before NumPy loads its BLAS: the environment is read once.
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)


# Each runtime's idle worker threads spin for a while after a parallel call (libiomp5's
# KMP_BLOCKTIME is 200 ms, OpenBLAS's and libgomp's are similar) and take a core from whatever
# runs next: timed right after a NumPy call, a polyflow kernel on 2 threads ran at half speed.
QUIET_SECONDS = 1.0


def median_time(fn: Callable[[], Any], repeat: int) -> float:
    time.sleep(QUIET_SECONDS)  # let the previous library's threads go to sleep
    fn()  # warm-up (and first-touch of outputs)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def workloads(rng: Any) -> dict[str, dict[str, Any]]:
    import numpy as np

    def rand(*shape: int) -> Any:
        return rng.standard_normal(shape).astype(np.float32)

    def conv_numpy(x: Any, w: Any) -> Any:
        kh, kw = w.shape[2:]
        windows = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
        # (n, c, oh, ow, kh, kw) x (k, c, kh, kw) -> (n, k, oh, ow)
        return np.einsum("nchwij,kcij->nkhw", windows, w, optimize=True)

    def mlp_numpy(x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> tuple[Any, Any]:
        hidden = np.maximum(x @ w1.T + b1, 0)
        return hidden, hidden @ w2.T + b2

    return {
        "matmul": {
            "args": [rand(1024, 1024), rand(1024, 1024)],
            "numpy": lambda a, b: a @ b,
            "torch": lambda t, a, b: a @ b,
            "flops": 2 * 1024**3,
        },
        "conv2d": {
            "args": [rand(8, 64, 58, 58), rand(64, 64, 3, 3)],
            "numpy": conv_numpy,
            "torch": lambda t, x, w: t.nn.functional.conv2d(x, w),
            "flops": 2 * 8 * 64 * 56 * 56 * 64 * 9,
        },
        "mlp2": {
            "args": [rand(128, 1024), rand(1024, 1024), rand(1024), rand(1024, 1024), rand(1024)],
            "numpy": mlp_numpy,
            "torch": lambda t, x, w1, b1, w2, b2: (
                h := t.relu(x @ w1.T + b1),
                h @ w2.T + b2,
            ),
            "flops": 2 * 2 * 128 * 1024 * 1024,
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--only", help="comma-separated workloads (matmul, conv2d, mlp2)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    _set_threads(args.threads)

    import numpy as np
    from rich.console import Console
    from rich.table import Table

    sys.path.insert(0, ROOT)
    import polyflow.tc as tc
    from polyflow.options import Options
    from polyflow.tc_library import LIBRARY

    try:
        import torch

        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None

    console = Console(stderr=True)
    rng = np.random.default_rng(0)
    options = Options(opt_level=3, march="native")
    chosen = workloads(rng)
    if args.only:
        chosen = {k: v for k, v in chosen.items() if k in args.only.split(",")}
    results: list[dict[str, Any]] = []
    for name, work in chosen.items():
        console.print(f"[bold]{name}[/]: compiling")
        start = time.perf_counter()
        kernel = tc.define(LIBRARY[name], name, options=options)
        inputs = work["args"]
        got = kernel(*inputs)
        compile_seconds = time.perf_counter() - start
        want = work["numpy"](*inputs)
        got_list = list(got) if isinstance(got, tuple) else [got]
        want_list = list(want) if isinstance(want, tuple) else [want]
        error = max(
            float(np.max(np.abs(g - w)) / (np.max(np.abs(w)) + 1e-30))
            for g, w in zip(got_list, want_list, strict=True)
        )
        outputs = got_list
        console.print(f"  compiled in {compile_seconds:.1f} s; max relative error {error:.1e}")
        row: dict[str, Any] = {"workload": name, "compile_seconds": compile_seconds,
                               "max_rel_error": error}  # fmt: skip
        out = tuple(outputs) if len(outputs) > 1 else outputs[0]
        row["polyflow"] = median_time(lambda k=kernel, i=inputs, o=out: k(*i, out=o), args.repeat)
        row["numpy"] = median_time(lambda w=work, i=inputs: w["numpy"](*i), args.repeat)
        if torch is not None:
            tensors = [torch.from_numpy(a) for a in inputs]
            with torch.no_grad():
                row["torch"] = median_time(
                    lambda w=work, t=tensors: w["torch"](torch, *t), args.repeat
                )
        row["gflops_polyflow"] = work["flops"] / row["polyflow"] / 1e9
        results.append(row)

    table = Table(title=f"TC on the CPU, {args.threads} thread(s), median of {args.repeat}")
    for column in ("workload", "polyflow", "numpy", "polyflow / numpy", "torch",
                   "polyflow / torch", "GFLOP/s"):  # fmt: skip
        table.add_column(column, justify="left" if column == "workload" else "right")
    for row in results:
        torch_time = row.get("torch")
        table.add_row(
            row["workload"],
            f"{row['polyflow'] * 1e3:.1f} ms",
            f"{row['numpy'] * 1e3:.1f} ms",
            f"{row['polyflow'] / row['numpy']:.2f}",
            "not installed" if torch_time is None else f"{torch_time * 1e3:.1f} ms",
            "" if torch_time is None else f"{row['polyflow'] / torch_time:.2f}",
            f"{row['gflops_polyflow']:.1f}",
        )
    Console().print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "repeat": args.repeat, "results": results}, f,
                      indent=2)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
