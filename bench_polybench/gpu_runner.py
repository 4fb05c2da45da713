"""The GPU benchmark's runner: replays polyflow's kernels on a GPU machine that has NumPy, CuPy and
PyTorch but not polyflow (built elsewhere by `scripts/bench_gpu.py build`), next to PyTorch eager
and `torch.compile`, and runs the PolyBench executables built for the GPU and the CPU.

    python gpu_runner.py BUNDLE [--repeat 5] [--only a,b] [--json results.json]

A bundle holds, per Tensor Comprehensions workload, the PTX of its kernels (one file per GPU
module) and its launch plan (`plan.json`: each launch's kernel, grid, block and arguments, a
pointer argument named by the buffer it points into; buffers are the inputs, then the outputs,
then scratch), and, per PolyBench kernel, three executables (gcc -O3, polyflow for the CPU,
polyflow for CUDA). This file needs only the standard library at import (the builder reads
`WORKLOADS` from it); NumPy, CuPy and PyTorch are imported when it runs.

Every polyflow result is checked against PyTorch eager before its time counts (a wrong result
is reported and its time is not). Times are medians over `--repeat` timed runs after a warm-up,
measured with CUDA events around all of a workload's launches.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Workload:
    """One TC benchmark: the definition, its inputs (name, shape, dtype; float inputs are
    standard normal, integer ones uniform in [0, high)), and a reference written against an
    array namespace (`xp`: numpy or torch) returning the outputs compared, by name."""

    source: str
    entry: str
    inputs: tuple[tuple[str, tuple[int, ...], str], ...]
    reference: Callable[..., dict[str, Any]]
    compare: tuple[str, ...]
    notes: str = ""
    small: tuple[tuple[int, ...], ...] = field(default=())  # input shapes for a quick check
    odd: tuple[tuple[int, ...], ...] = field(default=())  # larger odd shapes, checked on a GPU


def _einsum(xp: Any, spec: str, *arrays: Any) -> Any:
    return xp.einsum(spec, *arrays)


TMM = """
def tmm(float(M,K) A, float(N,K) B) -> (C) {
  C(m, n) +=! A(m, k) * B(n, k)
}
"""
TBMM = """
def tbmm(float(B,N,M) X, float(B,K,M) Y) -> (Z) {
  Z(b, n, k) +=! X(b, n, m) * Y(b, k, m)
}
"""
GROUP_CONV = """
def group_conv(float(N,G,C,H,W) I, float(G,F,C,KH,KW) W1) -> (O) {
  O(n, g, f, h, w) +=! I(n, g, c, h + kh, w + kw) * W1(g, f, c, kh, kw)
}
"""
GROUP_NORM = """
def group_norm(float(N,G,D,H,W) I, float(G,D) gamma, float(G,D) beta) -> (mean, var, O) {
  mean(n, g) +=! I(n, g, d, h, w) / (D * H * W)
  var(n, g) +=! (I(n, g, d, h, w) - mean(n, g)) * (I(n, g, d, h, w) - mean(n, g)) / (D * H * W)
  O(n, g, d, h, w) = gamma(g, d) * (I(n, g, d, h, w) - mean(n, g)) * rsqrt(var(n, g) + 1e-5) + beta(g, d)
}
"""
MOMENTS = """
def moments(float(N,K) I) -> (mean, var) {
  mean(n) +=! I(n, k) / K
  var(n) +=! (I(n, k) - mean(n)) * (I(n, k) - mean(n)) / K
}
"""
KRONECKER = """
def kronecker3(float(D0,N0) W0, float(D1,N1) W1, float(D2,N2) W2, float(M,N0,N1,N2) X)
    -> (XW2, XW1, Y) {
  XW2(m, n0, n1, d2) +=! X(m, n0, n1, n2) * W2(d2, n2)
  XW1(m, n0, d1, d2) +=! XW2(m, n0, n1, d2) * W1(d1, n1)
  Y(m, d0, d1, d2) +=! XW1(m, n0, d1, d2) * W0(d0, n0)
}
"""
MLP3 = """
def mlp3(float(B,I) in, float(O1,I) w1, float(O2,O1) w2, float(O3,O2) w3) -> (h1, h2, out) {
  h1(b, o) +=! in(b, i) * w1(o, i)
  h1(b, o) = fmax(h1(b, o), 0)
  h2(b, o) +=! h1(b, i) * w2(o, i)
  h2(b, o) = fmax(h2(b, o), 0)
  out(b, o) +=! h2(b, i) * w3(o, i)
  out(b, o) = fmax(out(b, o), 0)
}
"""
WAVENET = """
def wavenet(float(B,R,T) data, float(R,R,2) filter_w, float(R,R,2) gate_w, float(R,R) res_w)
    -> (filt, gate, act, out) {
  filt(b, c, t) +=! filter_w(c, r, k) * data(b, r, t + 2 * k)
  gate(b, c, t) +=! gate_w(c, r, k) * data(b, r, t + 2 * k)
  act(b, c, t) = tanh(filt(b, c, t)) / (1 + exp(-gate(b, c, t)))
  out(b, c, t) +=! res_w(c, r) * act(b, r, t)
  out(b, c, t) = out(b, c, t) + data(b, c, t)
}
"""


def _group_norm(xp: Any, x: Any, gamma: Any, beta: Any) -> dict[str, Any]:
    count = x.shape[2] * x.shape[3] * x.shape[4]
    mean = _einsum(xp, "ngdhw->ng", x) / count
    centered = x - mean[:, :, None, None, None]
    var = _einsum(xp, "ngdhw,ngdhw->ng", centered, centered) / count
    out = gamma[None, :, :, None, None] * centered / xp.sqrt(var + 1e-5)[:, :, None, None, None]
    return {"mean": mean, "var": var, "O": out + beta[None, :, :, None, None]}


def _moments(xp: Any, x: Any) -> dict[str, Any]:
    mean = _einsum(xp, "nk->n", x) / x.shape[1]
    centered = x - mean[:, None]
    return {"mean": mean, "var": _einsum(xp, "nk,nk->n", centered, centered) / x.shape[1]}


def _group_conv(xp: Any, x: Any, w: Any) -> dict[str, Any]:
    if getattr(xp, "__name__", "") == "torch":  # PyTorch's own grouped convolution (cuDNN)
        n, g, c, h, width = x.shape
        f, kh, kw = w.shape[1], w.shape[3], w.shape[4]
        out = xp.nn.functional.conv2d(
            x.reshape(n, g * c, h, width), w.reshape(g * f, c, kh, kw), groups=g
        )
        return {"O": out.reshape(n, g, f, h - kh + 1, width - kw + 1)}
    kh, kw = w.shape[3], w.shape[4]
    oh, ow = x.shape[3] - kh + 1, x.shape[4] - kw + 1
    out = 0
    for i in range(kh):
        for j in range(kw):
            out = out + _einsum(
                xp, "ngchw,gfc->ngfhw", x[:, :, :, i : i + oh, j : j + ow], w[:, :, :, i, j]
            )
    return {"O": out}


def _kronecker(xp: Any, w0: Any, w1: Any, w2: Any, x: Any) -> dict[str, Any]:
    xw2 = _einsum(xp, "mabc,dc->mabd", x, w2)
    xw1 = _einsum(xp, "mabd,eb->maed", xw2, w1)
    return {"Y": _einsum(xp, "maed,fa->mfed", xw1, w0)}


def _relu(xp: Any, x: Any) -> Any:
    return xp.maximum(x, x * 0)


def _mlp3(xp: Any, x: Any, w1: Any, w2: Any, w3: Any) -> dict[str, Any]:
    h1 = _relu(xp, x @ w1.T)
    h2 = _relu(xp, h1 @ w2.T)
    return {"out": _relu(xp, h2 @ w3.T)}


def _wavenet(xp: Any, data: Any, fw: Any, gw: Any, rw: Any) -> dict[str, Any]:
    t = data.shape[2] - 2
    taps = [data[:, :, 2 * k : 2 * k + t] for k in range(2)]
    filt = sum(_einsum(xp, "cr,brt->bct", fw[:, :, k], taps[k]) for k in range(2))
    gate = sum(_einsum(xp, "cr,brt->bct", gw[:, :, k], taps[k]) for k in range(2))
    act = xp.tanh(filt) / (1 + xp.exp(-gate))
    return {"out": _einsum(xp, "cr,brt->bct", rw, act) + data[:, :, :t]}


WORKLOADS: dict[str, Workload] = {
    **{
        f"tmm_{m}x{n}x{k}": Workload(
            TMM,
            "tmm",
            (("A", (m, k), "float32"), ("B", (n, k), "float32")),
            lambda xp, a, b: {"C": a @ b.T},
            ("C",),
            small=((33, 17), (29, 17)),
            odd=((1000, 1001), (999, 1001)) if k == 1024 and m == 1024 else (),
        )
        for m, n, k in ((128, 256, 32), (128, 1024, 1024), (1024, 1024, 1024))
    },
    "tbmm_500x26x72x26": Workload(
        TBMM,
        "tbmm",
        (("X", (500, 26, 72), "float32"), ("Y", (500, 26, 72), "float32")),
        lambda xp, x, y: {"Z": _einsum(xp, "bnm,bkm->bnk", x, y)},
        ("Z",),
        small=((3, 5, 7), (3, 4, 7)),
    ),
    **{
        f"group_conv_{n}x{g}x{c}x{f}x{h}": Workload(
            GROUP_CONV,
            "group_conv",
            (("I", (n, g, c, h, h), "float32"), ("W1", (g, f, c, 3, 3), "float32")),
            _group_conv,
            ("O",),
            small=((2, 3, 2, 7, 6), (3, 4, 2, 3, 3)),
        )
        for n, g, c, f, h in (
            (32, 32, 16, 16, 16),
            (32, 32, 32, 32, 9),
            (4, 32, 16, 16, 58),
            (8, 32, 32, 32, 30),
        )
    },
    "group_norm_32x32x4x56x56": Workload(
        GROUP_NORM,
        "group_norm",
        (
            ("I", (32, 32, 4, 56, 56), "float32"),
            ("gamma", (32, 4), "float32"),
            ("beta", (32, 4), "float32"),
        ),
        _group_norm,
        ("mean", "var", "O"),
        small=((2, 3, 2, 5, 4), (3, 2), (3, 2)),
    ),
    "moments_128x65536": Workload(
        MOMENTS,
        "moments",
        (("I", (128, 65536), "float32"),),
        _moments,
        ("mean", "var"),
        small=((7, 33),),
    ),
    "kronecker3_256x16": Workload(
        KRONECKER,
        "kronecker3",
        (
            ("W0", (16, 16), "float32"),
            ("W1", (16, 16), "float32"),
            ("W2", (16, 16), "float32"),
            ("X", (256, 16, 16, 16), "float32"),
        ),
        _kronecker,
        ("Y",),
        small=((3, 2), (4, 3), (5, 4), (6, 2, 3, 4)),
    ),
    "mlp3_128x1024": Workload(
        MLP3,
        "mlp3",
        (
            ("in", (128, 1024), "float32"),
            ("w1", (1024, 1024), "float32"),
            ("w2", (1024, 1024), "float32"),
            ("w3", (256, 1024), "float32"),
        ),
        _mlp3,
        ("out",),
        small=((5, 12), (9, 12), (7, 9), (4, 7)),
    ),
    "wavenet_32x64x4096": Workload(
        WAVENET,
        "wavenet",
        (
            ("data", (32, 64, 4098), "float32"),
            ("filter_w", (64, 64, 2), "float32"),
            ("gate_w", (64, 64, 2), "float32"),
            ("res_w", (64, 64), "float32"),
        ),
        _wavenet,
        ("out",),
        small=((2, 3, 9), (3, 3, 2), (3, 3, 2), (3, 3)),
    ),
}

# PolyBench kernels built as whole programs (bench_polybench/kernels, LARGE).
POLYBENCH = ("gemm", "2mm", "3mm", "syrk", "jacobi-2d", "fdtd-2d", "heat-3d", "correlation")


def inputs_for(workload: Workload, shapes: Any, seed: int) -> list[Any]:
    """The workload's inputs as NumPy arrays (float: standard normal, scaled so that sums stay
    of order one)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for (_name, _shape, dtype), shape in zip(workload.inputs, shapes, strict=True):
        out.append((rng.standard_normal(shape) * 0.5).astype(dtype))
    return out


# ----- running on the GPU


def _prepared_launches(
    plan: dict[str, Any], buffers: list[Any], modules: dict[str, Any]
) -> list[tuple[Any, tuple[int, ...], tuple[int, ...], tuple[Any, ...]]]:
    """Each launch of the plan as (kernel, grid, block, arguments), resolved once so that the
    timed runs pay only for the launches themselves."""
    import numpy as np

    kinds = {
        "ptr": np.uint64, "i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32,
        "i64": np.int64, "f32": np.float32, "f64": np.float64,
    }  # fmt: skip
    bases = [int(b.data.ptr) for b in buffers]
    prepared = []
    for launch in plan["launches"]:
        args = tuple(
            np.uint64(bases[a["buffer"]] + a["offset"])
            if a["kind"] == "ptr"
            else kinds[a["kind"]](a["value"])
            for a in launch["args"]
        )
        kernel = modules[launch["module"]].get_function(launch["kernel"])
        prepared.append((kernel, tuple(launch["grid"]), tuple(launch["block"]), args))
    return prepared


def _replay(plan: dict[str, Any], buffers: list[Any], modules: dict[str, Any], cupy: Any) -> None:
    for kernel, grid, block, args in _prepared_launches(plan, buffers, modules):
        kernel(grid, block, args)


def _time_gpu(fn: Callable[[], Any], repeat: int, cupy: Any) -> float:
    """Median seconds of `repeat` runs of `fn` after one warm-up, timed with CUDA events on the
    current stream."""
    fn()
    cupy.cuda.get_current_stream().synchronize()
    times = []
    for _ in range(repeat):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return statistics.median(times)


def _relative_error(got: Any, want: Any) -> float:
    import numpy as np

    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    scale = float(np.linalg.norm(want)) or 1.0
    return float(np.linalg.norm(got - want)) / scale


def run_tc(bundle: Path, entry: dict[str, Any], repeat: int) -> dict[str, Any]:
    """polyflow's kernels and PyTorch eager on one workload: outputs poisoned with NaN before
    the checked run (every element must be written), compared with PyTorch in float64; then
    both timed (polyflow also as one CUDA graph of its launches)."""
    import cupy  # type: ignore[import-not-found]
    import numpy as np
    import torch  # type: ignore[import-not-found]

    workload = WORKLOADS[entry["name"].split("@")[0]]
    shapes = [tuple(s) for s in entry.get("shapes") or [i[1] for i in workload.inputs]]
    host = inputs_for(workload, shapes, entry["seed"])
    inputs = [cupy.asarray(a) for a in host]
    outputs = [
        cupy.full(tuple(o["shape"]), np.nan, dtype=o["dtype"])
        if np.dtype(o["dtype"]).kind == "f"
        else cupy.zeros(tuple(o["shape"]), dtype=o["dtype"])
        for o in entry["outputs"]
    ]
    plan = json.loads((bundle / entry["plan"]).read_text())
    scratch = [cupy.zeros(max(1, n), dtype=cupy.uint8) for n in plan["scratch_bytes"]]
    modules = {
        name: cupy.RawModule(path=str(bundle / path))  # a PTX file (`code` is CUDA C++)
        for name, path in entry["ptx"].items()
    }
    launches = _prepared_launches(plan, [*inputs, *outputs, *scratch], modules)

    def polyflow_run() -> None:  # the kernels initialize what they reduce into (TC's +=!)
        for kernel, grid, block, args in launches:
            kernel(grid, block, args)

    polyflow_run()
    cupy.cuda.Device().synchronize()
    tensors = [torch.as_tensor(a, device="cuda") for a in host]
    exact = workload.reference(torch, *[t.double() for t in tensors])
    eager = lambda: workload.reference(torch, *tensors)  # noqa: E731
    expected = eager()
    names = [o["name"] for o in entry["outputs"]]
    problems = []
    result: dict[str, Any] = {"name": entry["name"], "launches": len(launches)}
    for name in workload.compare:
        got = cupy.asnumpy(outputs[names.index(name)])
        want = exact[name].detach().cpu().numpy()
        error = _relative_error(got, want)
        result[f"error_{name}"] = error
        result[f"eager_error_{name}"] = _relative_error(expected[name].detach().cpu().numpy(), want)
        if not np.allclose(got, want, rtol=2e-3, atol=2e-3) or not error < 1e-4:
            problems.append(
                f"{name}: relative error {error:.3g}, max |difference| "
                f"{np.nanmax(np.abs(got - want)) if not np.isnan(got).all() else 'nan'}"
            )
    result.update(correct=not problems, problems=problems)
    if entry.get("check_only"):
        return result
    result["polyflow_s"] = _time_gpu(polyflow_run, repeat, cupy) if not problems else None
    result["torch_eager_s"] = _time_gpu(eager, repeat, cupy)
    if not problems:
        try:
            stream = cupy.cuda.Stream(non_blocking=True)
            with stream:
                stream.begin_capture()
                polyflow_run()
                graph = stream.end_capture()
                result["polyflow_graph_s"] = _time_gpu(graph.launch, repeat, cupy)
        except Exception as exc:  # graphs are a bonus figure: say why, go on
            result["polyflow_graph_error"] = f"{type(exc).__name__}: {exc}"[:200]
    return result


def time_torch_compile(entry: dict[str, Any], repeat: int) -> dict[str, Any]:
    """`torch.compile` of the workload's PyTorch reference (compiled at the warm-up run)."""
    import cupy  # type: ignore[import-not-found]
    import torch  # type: ignore[import-not-found]

    workload = WORKLOADS[entry["name"]]
    host = inputs_for(workload, [i[1] for i in workload.inputs], entry["seed"])
    tensors = [torch.as_tensor(a, device="cuda") for a in host]
    torch._dynamo.reset()  # each workload compiled for its own static shapes
    compiled = torch.compile(lambda *t: workload.reference(torch, *t))
    began = time.perf_counter()
    seconds = _time_gpu(lambda: compiled(*tensors), repeat, cupy)
    return {"torch_compile_s": seconds, "torch_compile_build_s": time.perf_counter() - began}


EXE_TIMEOUT_S = 120


def _run_exe(path: Path, threads: int) -> tuple[float | None, str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    try:
        done = subprocess.run(
            [str(path)], capture_output=True, text=True, env=env, timeout=EXE_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {EXE_TIMEOUT_S} s"
    seconds = None
    for line in done.stderr.splitlines():
        if line.startswith("time: "):
            seconds = float(line.split()[1])
    return seconds, done.stdout, done.stderr if done.returncode else ""


def _sums(dump: str) -> list[float]:
    return [float(line.split()[1]) for line in dump.splitlines() if line.startswith("sum ")]


def run_polybench(bundle: Path, entry: dict[str, Any], repeat: int) -> dict[str, Any]:
    result: dict[str, Any] = {"name": entry["name"]}
    reference: list[float] | None = None
    for build in ("gcc", "polyflow_cpu", "polyflow_cuda"):
        path = bundle / entry[build]
        times, dump, error = [], "", ""
        for _ in range(repeat):
            seconds, dump, error = _run_exe(
                path, os.cpu_count() or 1 if build == "polyflow_cpu" else 1
            )
            if seconds is not None:
                times.append(seconds)
        sums = _sums(dump)
        if build == "gcc":
            reference = sums
        ok = (
            bool(sums)
            and reference is not None
            and all(
                abs(a - b) <= 1e-6 * max(1.0, abs(b)) for a, b in zip(sums, reference, strict=True)
            )
        )
        result[f"{build}_s"] = statistics.median(times) if times and ok else None
        if not ok:
            result[f"{build}_problem"] = error.strip()[:300] or "checksums differ from gcc's"
    return result


def _describe_device(results: dict[str, Any]) -> None:
    import cupy  # type: ignore[import-not-found]
    import torch  # type: ignore[import-not-found]

    # float32 everywhere, as polyflow computes: no TF32 in cuBLAS or cuDNN (cuDNN's default)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"]
    results["device"] = name.decode() if isinstance(name, bytes) else str(name)
    results["software"] = {
        "cupy": cupy.__version__,
        "torch": torch.__version__,
        "cuda_driver": cupy.cuda.runtime.driverGetVersion(),
        "torch_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "torch_cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "host_cpus": os.cpu_count(),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", default="")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--compile-budget", type=float, default=180.0,
        help="seconds torch.compile may take in all (compiling is slow); the rest is skipped",
    )  # fmt: skip
    parser.add_argument("--skip", default="", help="sections to skip: tc,compile,polybench")
    args = parser.parse_args(argv)
    manifest = json.loads((args.bundle / "manifest.json").read_text())
    wanted = set(filter(None, args.only.split(",")))
    skip = set(filter(None, args.skip.split(",")))
    results: dict[str, Any] = {
        "manifest": {k: manifest[k] for k in ("built", "gpu_arch", "polyflow")},
        "tc": [],
        "polybench": [],
    }
    try:
        _describe_device(results)
    except Exception as exc:
        print(f"gpu_runner: no usable GPU: {exc}", file=sys.stderr)
        return 1
    results["date"] = time.strftime("%Y-%m-%d %H:%M")

    def save() -> None:  # after every step: a run cut short still leaves its figures
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))

    entries = [e for e in manifest["tc"] if not wanted or e["name"].split("@")[0] in wanted]
    for entry in entries if "tc" not in skip else []:
        try:
            row = run_tc(args.bundle, entry, args.repeat)
        except Exception as exc:
            row = {
                "name": entry["name"],
                "correct": False,
                "problems": [f"{type(exc).__name__}: {exc}"[:300]],
            }
        results["tc"].append(row)
        print(
            f"{row['name']:36} {'ok' if row.get('correct') else 'WRONG ' + str(row.get('problems'))}"
            f"  polyflow {row.get('polyflow_s')}  eager {row.get('torch_eager_s')}",
            flush=True,
        )
        save()
    began = time.perf_counter()
    for row in results["tc"] if "compile" not in skip else []:
        entry = next(e for e in entries if e["name"] == row["name"])
        if entry.get("check_only"):
            continue
        if time.perf_counter() - began > args.compile_budget:
            row["torch_compile_error"] = "skipped: the torch.compile time budget was spent"
            continue
        try:
            row.update(time_torch_compile(entry, args.repeat))
        except Exception as exc:  # torch.compile may lack a backend there: say so, go on
            row["torch_compile_error"] = f"{type(exc).__name__}: {exc}"[:300]
        print(f"{row['name']:36} torch.compile {row.get('torch_compile_s')}", flush=True)
        save()
    for entry in manifest["polybench"] if "polybench" not in skip else []:
        if wanted and entry["name"] not in wanted:
            continue
        results["polybench"].append(run_polybench(args.bundle, entry, max(1, args.repeat // 2)))
        print(json.dumps(results["polybench"][-1]), flush=True)
        save()
    print(f"device: {results['device']}  {results['software']}")
    for row in results["tc"]:
        if row.get("polyflow_s") and row.get("torch_eager_s"):
            ratio = f"{row['torch_eager_s'] / row['polyflow_s']:.2f}x eager"
        elif row.get("correct"):
            ratio = "checked"
        else:
            ratio = "WRONG: " + "; ".join(row["problems"])
        print(
            f"{row['name']:36} polyflow {row.get('polyflow_s')}  eager {row.get('torch_eager_s')}"
            f"  compile {row.get('torch_compile_s')}  {ratio}"
        )
    for row in results["polybench"]:
        print(
            f"{row['name']:20} gcc {row.get('gcc_s')}  cpu {row.get('polyflow_cpu_s')}"
            f"  cuda {row.get('polyflow_cuda_s')}"
        )
    save()
    if not args.json:
        print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
