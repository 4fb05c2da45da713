"""The autotuning benchmark: tuned against default -O3, on PolyBench LARGE kernels and the TC CPU
set (against PyTorch CPU), and how tuning scales over Dask workers, in one run.

    .venv/bin/python scripts/bench_tune.py [--budget 3m] [--kernels gemm,2mm,...] [--tc matmul,...]
                                           [--workers 2] [--skip-scaling] [--out DIR]

1. PolyBench (`bench_polybench/kernels`, LARGE): each kernel program is tuned (`polyflow.tune`,
   genetic search, `--budget` each, `--workers` local worker processes) for the time of its
   kernel function; the tuner measures the three fastest again against the default at the
   end, each in one job (runs alternating), and the best ratio is reported, with the tuning
   time.
2. TC on the CPU (float32): matmul, mlp2 and conv2d at several shapes from
   `polyflow/tc_library.py`, tuned on random inputs; then polyflow's default build, polyflow's
   tuned build (found in the tuning database as any later `tc.define` finds it) and PyTorch
   (`torch.nn.functional.conv2d`, `@`) are timed in fresh processes, rounds alternating
   (scripts/bench_tc.py's discipline), median of `--repeat` rounds.
3. Scaling: one random search (same seed, so the same candidates) of `--scaling-candidates`
   candidates on a Dask cluster of 1 and of 2 worker processes: wall time and best found; then
   compile-only fitness (nothing timed) on clusters of 1, 2, 4 and 8 workers: candidates per
   second, which shows whether the scheduler keeps the workers busy.

Timing discipline: a candidate's runs hold their cores machine-wide (no two timings share a
core), best of `--tune-repeats` runs each. Results go to `<out>/<date>-tune[-TAG].{md,json,png}`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

POLYBENCH = (
    "gemm", "2mm", "syr2k", "correlation", "doitgen", "lu", "cholesky", "jacobi-2d", "fdtd-2d",
    "heat-3d", "seidel-2d", "floyd-warshall",
)  # fmt: skip

# (name in the report, TC library definition, input shapes)
TC_WORKLOADS: dict[str, tuple[str, list[tuple[int, ...]]]] = {
    "matmul 1024": ("matmul", [(1024, 1024), (1024, 1024)]),
    "matmul 256x2048x512": ("matmul", [(256, 512), (512, 2048)]),
    "mlp2 128x1024": ("mlp2", [(128, 1024), (1024, 1024), (1024,), (1024, 1024), (1024,)]),
    "conv2d 8x64x56x56": ("conv2d", [(8, 64, 58, 58), (64, 64, 3, 3)]),
    "conv2d 1x128x28x28": ("conv2d", [(1, 128, 30, 30), (128, 128, 3, 3)]),
    "conv2d 32x32x32x32": ("conv2d", [(32, 32, 34, 34), (32, 32, 3, 3)]),
}


def _tc_source(definition: str) -> str:
    from polyflow.tc_library import LIBRARY

    return LIBRARY[definition]


# Kernels whose LARGE runs take seconds get a longer budget (a candidate is a compile and
# three runs): at 3 minutes seidel-2d (12 s a run) saw 4 candidates
MINIMUM_BUDGET = {"seidel-2d": 600.0, "floyd-warshall": 420.0, "jacobi-2d": 300.0, "heat-3d": 300.0}


def tune_polybench(kernel: str, budget: float, workers: int, repeats: int, db: Any) -> dict[str, Any]:
    from polyflow.tune.executors import LocalExecutor
    from polyflow.tune.tasks import CProgram
    from polyflow.tune.tuner import TuneError, tune

    source = ROOT / "bench_polybench" / "kernels" / f"{kernel}.c"
    options = {
        "opt_level": 3,
        "march": "native",
        "defines": ("LARGE_DATASET",),
        "include_dirs": (str(ROOT / "bench_polybench" / "harness"),),
    }
    task = CProgram(
        source.read_text(), source.name, options, timed=(f"kernel_{kernel.replace('-', '_')}",),
        source_dir=str(source.parent),
    )
    executor = LocalExecutor(workers)
    try:
        result = tune(
            task, budget=max(budget, MINIMUM_BUDGET.get(kernel, 0.0)), executor=executor, db=db,
            repeats=repeats,
        )
    except TuneError as exc:
        return {"kernel": kernel, "error": str(exc)}
    finally:
        executor.close()
    return _summary(kernel, result)


def _summary(name: str, result: Any) -> dict[str, Any]:
    return {
        "kernel": name,
        "default_seconds": result.default_seconds,
        "tuned_seconds": result.best_seconds,
        "speedup": result.speedup,
        "choices": result.best_choices,
        "candidates": len(result.candidates),
        "statuses": result.counts(),
        "tuning_seconds": result.seconds,
        "remeasured": result.remeasured,
        "history": result.history,
    }


def tune_tc(name: str, budget: float, workers: int, repeats: int, db: Any) -> dict[str, Any]:
    from polyflow.tune.executors import LocalExecutor
    from polyflow.tune.tasks import TcKernel
    from polyflow.tune.tuner import tune

    definition, shapes = TC_WORKLOADS[name]
    task = TcKernel(
        _tc_source(definition), definition, {"opt_level": 3, "march": "native"},
        tuple((shape, "float32") for shape in shapes),
    )
    executor = LocalExecutor(workers)
    try:
        result = tune(task, budget=budget, executor=executor, db=db, repeats=repeats)
    finally:
        executor.close()
    return _summary(name, result)


# ----- TC timings against PyTorch, each library in a fresh process


def run_worker(library: str, name: str, threads: int) -> list[float]:
    """In this process: workload `name` by `library` (polyflow-default, polyflow-tuned, torch),
    timed as scripts/bench_tc.py times (warm-up, then a few calls)."""
    import numpy as np
    from bench_tc import timed_calls

    definition, shapes = TC_WORKLOADS[name]
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
    if library.startswith("polyflow"):
        import polyflow.tc as tc
        from polyflow.options import Options

        options = Options(opt_level=3, march="native", tuned=library == "polyflow-tuned")
        kernel = tc.define(_tc_source(definition), definition, options=options)
        got = kernel(*inputs)
        if library == "polyflow-tuned" and not any("using tuned options" in n for n in kernel.report.notes):
            print("warning: no tuning found for", name, file=sys.stderr)
        return timed_calls(lambda: kernel(*inputs, out=got))
    import torch

    torch.set_num_threads(threads)
    x = [torch.from_numpy(a) for a in inputs]
    if definition == "conv2d":
        def call() -> Any:
            return torch.nn.functional.conv2d(x[0], x[1])
    elif definition == "matmul":
        def call() -> Any:
            return x[0] @ x[1]
    else:
        def call() -> Any:
            hidden = torch.relu(x[0] @ x[1].T + x[2])
            return hidden @ x[3].T + x[4]

    with torch.no_grad():
        return timed_calls(call)


def tc_against_torch(names: list[str], threads: int, repeat: int, db_path: str) -> dict[str, dict[str, float]]:
    libraries = ["polyflow-default", "polyflow-tuned", "torch"]
    times: dict[str, dict[str, list[float]]] = {n: {lib: [] for lib in libraries} for n in names}
    env = {**os.environ, "POLYFLOW_TUNING_DB": db_path, "OMP_NUM_THREADS": str(threads)}
    for _ in range(repeat):
        for name in names:
            for library in libraries:
                done = subprocess.run(
                    [sys.executable, __file__, "--worker", library, "--worker-name", name, "--threads", str(threads)],
                    capture_output=True, text=True, check=True, env=env,
                )
                times[name][library].append(min(float(v) for v in done.stdout.split()))
    return {n: {lib: statistics.median(ts) for lib, ts in per.items()} for n, per in times.items()}


# ----- scaling over Dask workers


def scaling(kernel: str, candidates: int, db_dir: Path) -> dict[str, Any]:
    from distributed import Client, LocalCluster

    from polyflow.tune.executors import DaskExecutor
    from polyflow.tune.tasks import CProgram
    from polyflow.tune.tuner import tune

    source = ROOT / "bench_polybench" / "kernels" / f"{kernel}.c"
    task = CProgram(
        source.read_text(), source.name,
        {"opt_level": 3, "march": "native", "defines": ("LARGE_DATASET",),
         "include_dirs": (str(ROOT / "bench_polybench" / "harness"),)},
        timed=(f"kernel_{kernel.replace('-', '_')}",), source_dir=str(source.parent),
    )
    out: dict[str, Any] = {"kernel": f"{kernel} (LARGE)", "candidates": candidates, "timed": {}, "compile_only": {}}
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, Client(cluster) as client:
            start = time.perf_counter()
            result = tune(task, search="random", seed=7, budget=None, max_candidates=candidates,
                          executor=DaskExecutor(client), db=None, remeasure=False)
            out["timed"][workers] = {
                "wall_seconds": time.perf_counter() - start,
                "best_seconds": result.best_seconds,
                "best_choices": result.best_choices,
                # every candidate's time, to tell whether both runs found the same best
                "times": {json.dumps(c.choices, sort_keys=True): c.result.seconds for c in result.candidates},
                # when each candidate's result came back (seconds since the tuning started)
                "finished": {json.dumps(c.choices, sort_keys=True): c.finished for c in result.candidates},
            }
    for workers in (1, 2, 4, 8):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, Client(cluster) as client:
            start = time.perf_counter()
            result = tune(task, search="random", seed=7, budget=None, max_candidates=candidates,
                          executor=DaskExecutor(client), db=None, compile_only=True)
            wall = time.perf_counter() - start
            out["compile_only"][workers] = {
                "wall_seconds": wall, "candidates_per_second": len(result.candidates) / wall,
            }
    return out


# ----- the report


def _fmt(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.2f} ms" if seconds < 1 else f"{seconds:.3f} s"


def report(data: dict[str, Any]) -> str:
    lines = [
        "# Autotuning: tuned against default -O3", "",
        f"Run {data['started']}, {data['machine']}; budget {data['budget']:.0f} s per kernel"
        + (f" ({data['tc_budget']:.0f} s per TC workload)" if data.get("tc_budget", data["budget"]) != data["budget"] else "")
        + ", "
        f"{data['workers']} local worker processes, genetic search; every candidate checked "
        "against the default build's output; the three fastest measured again against the "
        "default at the end, each in one job, runs alternating (the best ratio is reported).", "",
    ]
    if data["polybench"]:
        lines += [
            "## PolyBench LARGE (kernel function time)", "",
            "| kernel | default | tuned | speedup | candidates | tuning time | tuned options |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
    speedups = []
    for row in data["polybench"]:
        if "error" in row:
            lines.append(f"| {row['kernel']} | error: {row['error'][:80]} | | | | | |")
            continue
        speedups.append(row["speedup"] or 1.0)
        choices = ", ".join(f"{k}={v}" for k, v in sorted(row["choices"].items())) or "(defaults)"
        lines.append(
            f"| {row['kernel']} | {_fmt(row['default_seconds'])} | {_fmt(row['tuned_seconds'])} | "
            f"{(row['speedup'] or 1.0):.2f}x | {row['candidates']} | {row['tuning_seconds']:.0f} s | {choices} |"
        )
    if speedups:
        lines += ["", f"Geometric mean speedup of the tuned builds: **{statistics.geometric_mean(speedups):.2f}x**"]
    if data.get("tc"):
        lines += [
            "", "## TC on the CPU (float32) against PyTorch", "",
            f"Median of {data['repeat']} rounds, {data['threads']} threads; ratio below 1: polyflow faster.", "",
            "| workload | polyflow default | polyflow tuned | PyTorch | tuned / default | tuned / PyTorch | tuning time | tuned options |",
            "|---|---:|---:|---:|---:|---:|---:|---|",
        ]
        for name, row in data["tc"].items():
            t = data["tc_times"].get(name, {})
            d, tuned, torch = t.get("polyflow-default"), t.get("polyflow-tuned"), t.get("torch")
            choices = ", ".join(f"{k}={v}" for k, v in sorted(row["choices"].items())) or "(defaults)"
            lines.append(
                f"| {name} | {_fmt(d)} | {_fmt(tuned)} | {_fmt(torch)} | "
                f"{(tuned / d if d and tuned else float('nan')):.2f} | {(tuned / torch if torch and tuned else float('nan')):.2f} | "
                f"{row['tuning_seconds']:.0f} s | {choices} |"
            )
    if data.get("scaling"):
        s = data["scaling"]
        one, two = s["timed"][1], s["timed"][2]
        lines += [
            "", f"## Scaling over Dask workers ({s['kernel']}, random search, {s['candidates']} candidates)", "",
            "| workers | wall time | best found |", "|---:|---:|---:|",
            f"| 1 | {one['wall_seconds']:.1f} s | {_fmt(one['best_seconds'])} |",
            f"| 2 | {two['wall_seconds']:.1f} s | {_fmt(two['best_seconds'])} |",
            "", f"2 workers / 1 worker wall time: **{two['wall_seconds'] / one['wall_seconds']:.2f}**; "
            f"same best choices: {one['best_choices'] == two['best_choices']}"
            + _rank_note(one, two) + _time_to_best(one, two), "",
            "Compile-only fitness (nothing timed):", "",
            "| workers | wall time | candidates per second |", "|---:|---:|---:|",
        ]
        for workers, row in s["compile_only"].items():
            lines.append(f"| {workers} | {row['wall_seconds']:.1f} s | {row['candidates_per_second']:.2f} |")
    return "\n".join(lines) + "\n"


def _rank_note(one: dict[str, Any], two: dict[str, Any]) -> str:
    """Where each run's best ranks in the other run's times (timing noise can swap near ties)."""
    notes = []
    for name, mine, other in (("1 worker", one, two), ("2 workers", two, one)):
        key = json.dumps(mine["best_choices"], sort_keys=True)
        times = sorted(t for t in other.get("times", {}).values() if t)
        theirs = other.get("times", {}).get(key)
        if theirs and times:
            rank = times.index(theirs) + 1
            notes.append(f"the best of {name} ranks {rank} of {len(times)} in the other run, "
                         f"{theirs / times[0]:.3f}x its best")
    return ("; " + "; ".join(notes)) if notes else ""


def _time_to_best(one: dict[str, Any], two: dict[str, Any]) -> str:
    """When each run had the 1-worker run's best candidate back (the same candidates come in
    the same order), and the ratio of the two."""
    key = json.dumps(one["best_choices"], sort_keys=True)
    first, second = one.get("finished", {}).get(key), two.get("finished", {}).get(key)
    if not first or not second:
        return ""
    return (f"; the best candidate came back after {first:.1f} s with 1 worker, {second:.1f} s "
            f"with 2: **{second / first:.2f}**")


def plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), dpi=110)
    rows = [r for r in data["polybench"] if "error" not in r]
    left.barh([r["kernel"] for r in rows], [r["speedup"] or 1.0 for r in rows], color="tab:green")
    left.axvline(1.0, color="gray", linestyle="--")
    left.set_xlabel("tuned / default speed")
    left.set_title("PolyBench LARGE: tuned vs default -O3")
    for row in rows:
        history = row["history"]
        if history and history[0][1]:
            # against the default as the search measured it (the first point): the final
            # ratio of the table comes from the re-measure, at another moment
            xs = [x for x, _ in history]
            ys = [history[0][1] / y for _, y in history]
            right.step(xs, ys, where="post", label=row["kernel"])
    right.set_xlabel("tuning time (s)")
    right.set_ylabel("speed of the best so far / the default's (as searched)")
    right.set_title("convergence")
    right.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", default="3m")
    parser.add_argument("--kernels", default=",".join(POLYBENCH))
    parser.add_argument("--tc", default=",".join(TC_WORKLOADS))
    parser.add_argument("--tc-budget", default=None, help="per TC workload (default: --budget)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tune-repeats", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5, help="TC timing rounds")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--scaling-kernel", default="2mm")
    parser.add_argument("--scaling-candidates", type=int, default=24)
    parser.add_argument("--out", default=str(ROOT / "bench_polybench" / "results"))
    parser.add_argument("--tag", default="", help="added to the report's file names")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--worker-name", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(" ".join(str(t) for t in run_worker(args.worker, args.worker_name, args.threads)))
        return 0
    from rich.console import Console

    from polyflow.storage.tuning import TuningDB, machine_identity
    from polyflow.tune.tuner import parse_duration

    console = Console(stderr=True)
    budget = parse_duration(args.budget)
    scratch = Path(tempfile.mkdtemp(prefix="polyflow-bench-tune-"))
    db_path = str(scratch / "tunings.sqlite3")
    db = TuningDB(db_path)
    identity = machine_identity()
    data: dict[str, Any] = {
        "started": datetime.now().isoformat(timespec="seconds"),
        "machine": f"{identity['cpu']}, {identity['cores']} cores",
        "budget": budget, "workers": args.workers, "repeat": args.repeat, "threads": args.threads,
        "polybench": [], "tc": {}, "tc_times": {},
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"{datetime.now():%Y-%m-%d}-tune{'-' + args.tag if args.tag else ''}"

    def save() -> None:
        stem.with_suffix(".json").write_text(json.dumps(data, indent=1, default=str) + "\n")
        stem.with_suffix(".md").write_text(report(data))

    for kernel in filter(None, args.kernels.split(",")):
        console.print(f"[bold]tuning {kernel}[/bold] ({budget:.0f} s)")
        row = tune_polybench(kernel, budget, args.workers, args.tune_repeats, db)
        console.print(f"  {row.get('speedup') or row.get('error')}")
        data["polybench"].append(row)
        save()
    names = [n for n in args.tc.split(",") if n]
    tc_budget = parse_duration(args.tc_budget) if args.tc_budget else budget
    data["tc_budget"] = tc_budget
    for name in names:
        console.print(f"[bold]tuning TC {name}[/bold] ({tc_budget:.0f} s)")
        data["tc"][name] = tune_tc(name, tc_budget, args.workers, args.tune_repeats, db)
        save()
    if names:
        console.print("timing TC against PyTorch")
        data["tc_times"] = tc_against_torch(names, args.threads, args.repeat, db_path)
        save()
    if not args.skip_scaling:
        console.print("scaling over Dask workers")
        data["scaling"] = scaling(args.scaling_kernel, args.scaling_candidates, scratch)
        save()
    if data["polybench"]:
        plot(data, stem.with_suffix(".png"))
    print(report(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
