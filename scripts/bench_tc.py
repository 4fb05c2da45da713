"""Tensor Comprehensions on the CPU: polyflow's kernels next to NumPy (and PyTorch where
installed), in one run.

    .venv/bin/python scripts/bench_tc.py [--repeat 5] [--threads 2] [--only matmul,conv2d,mlp]
                                         [--json out.json]
    .venv/bin/python scripts/bench_tc.py --target cuda [--bundle DIR] [--only tmm_512,...]

With `--target cuda` it is the GPU benchmark of scripts/bench_gpu.py (the TC set against
PyTorch eager and torch.compile, and PolyBench on the GPU): the bundle of PTX, launch plans and
programs is built here; where this machine has a CUDA device (CuPy sees one) it is run and
reported at once, otherwise the two commands that run it on a GPU machine are printed.

Workloads (float32): matmul 1024x1024x1024; conv2d N=8, C=K=64, 56x56, 3x3 (valid, NCHW); a
2-layer MLP (batch 128, 1024 -> 1024 -> 1024, bias and ReLU after the first layer). Each
polyflow kernel comes from polyflow/tc_library.py, is compiled once (not timed) at
`Options(opt_level=3, march="native")`, checked against NumPy, then timed; the NumPy reference
uses its BLAS (`@`, and an im2col matrix product for the convolution). Every time is the median
over `--repeat` rounds; in each round every library runs in a fresh process of its own (warmed
up, then timed a few calls; see `timed_calls` and `worker_times`). The table (stdout) gives the
times and the ratio polyflow / peer (below 1: polyflow is faster). `--threads` sets OMP_NUM_THREADS for polyflow and
the BLAS thread count (through threadpoolctl when installed, else the environment).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _set_threads(threads: int) -> None:
    # Before NumPy loads its BLAS: the environment is read once.
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)


# Each library runs in a process of its own: in one process, each runtime's idle worker
# threads spin after a parallel call (libiomp5's KMP_BLOCKTIME is 200 ms, OpenBLAS's and
# libgomp's similar) and take a core from the next library (a polyflow kernel on 2 threads
# timed right after a NumPy call ran at half speed), and even with pauses between them, mlp2
# ran 4.8 ms alone and 5.9 ms beside PyTorch. A worker runs untimed for `WARM_SECONDS`
# (threads awake, clocks up, outputs touched), then times `CALLS_PER_TURN` calls; the rounds
# alternate the libraries, so that a slow spell of this shared machine falls on all alike.
WARM_SECONDS = 0.2
CALLS_PER_TURN = 3
LIBRARIES = ("polyflow", "numpy", "torch")


def timed_calls(fn: Callable[[], Any]) -> list[float]:
    """`CALLS_PER_TURN` timings of `fn`, after `WARM_SECONDS` of untimed calls."""
    warm_until = time.perf_counter() + WARM_SECONDS
    fn()
    while time.perf_counter() < warm_until:
        fn()
    times = []
    for _call in range(CALLS_PER_TURN):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def run_worker(library: str, name: str, threads: int) -> list[float]:
    """In this process: `library`'s version of workload `name`, timed (see `timed_calls`)."""
    import numpy as np

    work = workloads(np.random.default_rng(0))[name]
    inputs = work["args"]
    if library == "polyflow":
        sys.path.insert(0, ROOT)
        import polyflow.tc as tc
        from polyflow.options import Options
        from polyflow.tc_library import LIBRARY

        kernel = tc.define(LIBRARY[name], name, options=Options(opt_level=3, march="native"))
        got = kernel(*inputs)
        return timed_calls(lambda: kernel(*inputs, out=got))
    if library == "numpy":
        return timed_calls(lambda: work["numpy"](*inputs))
    import torch

    torch.set_num_threads(threads)
    tensors = [torch.from_numpy(a) for a in inputs]
    return timed_calls(lambda: _no_grad(torch, work["torch"], tensors))


def worker_times(library: str, name: str, threads: int) -> list[float]:
    """`run_worker` in a fresh process."""
    command = [sys.executable, os.path.abspath(__file__), "--worker", library, "--only", name,
               "--threads", str(threads)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return [float(value) for value in done.stdout.split()]


def _no_grad(torch: Any, fn: Callable[..., Any], tensors: list[Any]) -> Any:
    with torch.no_grad():
        return fn(torch, *tensors)


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


def _cuda_device_present() -> bool:
    try:
        import cupy  # type: ignore[import-not-found]

        return int(cupy.cuda.runtime.getDeviceCount()) > 0
    except Exception:  # no CuPy, no driver, no device: all mean the same here
        return False


def _run_on_gpu(bundle: str, only: str, gpu_arch: str, json_path: str | None) -> int:
    """The GPU benchmark (scripts/bench_gpu.py): build the bundle; run and report it here when
    there is a CUDA device, else say how to run it where there is one."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import bench_gpu

    build = ["build", bundle, "--gpu-arch", gpu_arch] + (["--only", only] if only else [])
    if bench_gpu.main(build) != 0:
        return 1
    results = json_path or os.path.join(bundle, "results.json")
    runner = os.path.join(bundle, "gpu_runner.py")
    if not _cuda_device_present():
        print(
            "no CUDA device here: copy the bundle to a GPU machine (NumPy, CuPy, PyTorch) and run\n"
            f"  python {runner} {bundle} --json results.json\n"
            "then, back here:\n"
            f"  .venv/bin/python scripts/bench_gpu.py report results.json"
        )
        return 0
    done = subprocess.run([sys.executable, runner, bundle, "--json", results])
    if done.returncode != 0:
        return done.returncode
    return bench_gpu.main(["report", results])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--only", help="comma-separated workloads (matmul, conv2d, mlp2)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--worker", choices=LIBRARIES, help=argparse.SUPPRESS)
    parser.add_argument("--target", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--bundle", default="gpu-bundle", help="--target cuda: where to build")
    parser.add_argument("--gpu-arch", default="sm_90", help="--target cuda: the PTX's arch")
    args = parser.parse_args(argv)
    if args.target == "cuda":
        return _run_on_gpu(args.bundle, args.only or "", args.gpu_arch, args.json)
    _set_threads(args.threads)
    if args.worker:
        print(" ".join(str(t) for t in run_worker(args.worker, args.only, args.threads)))
        return 0

    import numpy as np
    from rich.console import Console
    from rich.progress import track
    from rich.table import Table

    sys.path.insert(0, ROOT)
    import polyflow.tc as tc
    from polyflow.options import Options
    from polyflow.tc_library import LIBRARY

    have_torch = importlib.util.find_spec("torch") is not None
    libraries = [lib for lib in LIBRARIES if have_torch or lib != "torch"]

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
        console.print(f"  compiled in {compile_seconds:.1f} s; max relative error {error:.1e}")
        row: dict[str, Any] = {"workload": name, "compile_seconds": compile_seconds,
                               "max_rel_error": error}  # fmt: skip
        samples: dict[str, list[float]] = {lib: [] for lib in libraries}
        for _round in track(range(args.repeat), description=f"  timing {name}", console=console):
            for lib in libraries:
                samples[lib] += worker_times(lib, name, args.threads)
        row.update({lib: statistics.median(times) for lib, times in samples.items()})
        row["gflops_polyflow"] = work["flops"] / row["polyflow"] / 1e9
        results.append(row)

    table = Table(title=f"TC on the CPU, {args.threads} thread(s), median of {args.repeat} rounds")
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
