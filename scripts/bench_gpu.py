"""The GPU benchmark, built here and run on a GPU machine (which has CuPy and PyTorch but not
polyflow's MLIR toolchain):

    .venv/bin/python scripts/bench_gpu.py build BUNDLE [--only a,b] [--gpu-arch sm_90]
    python bench_polybench/gpu_runner.py BUNDLE --json results.json     # on the GPU machine
    .venv/bin/python scripts/bench_gpu.py report results.json           # table + plot
    .venv/bin/python scripts/bench_gpu.py check [--only a,b]            # here, no GPU

`build` compiles each Tensor Comprehensions workload of `bench_polybench/gpu_runner.py`
(`WORKLOADS`: transposed matmul in 3 sizes, batched matmul, grouped convolution in 4 shapes,
group normalization, moments, a Kronecker product, an MLP, a WaveNet-like cell) for CUDA and
writes the PTX of its kernels and its launch plan (the launches the host program makes for these
sizes, recorded by running it with `RecordingLauncher`), and builds the PolyBench kernels
(`POLYBENCH`, LARGE) three ways: gcc -O3, polyflow for the CPU (OpenMP, its runtime linked in)
and polyflow for CUDA (arrays copied in and out by the program), all for `-march=x86-64-v3`.
`check` builds the same workloads at small sizes and replays their launch plans on the CPU
emulation of the kernels against the NumPy reference: the path the GPU runner takes, minus the
GPU. `report` writes `bench_polybench/results/<date>-gpu.{md,png}`: polyflow against PyTorch eager
and `torch.compile` (TC), and polyflow's GPU build against gcc and its CPU build (PolyBench),
with the geomeans the GPU issue asks for.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_polybench.gpu_runner import POLYBENCH, WORKLOADS, Workload, inputs_for  # noqa: E402

MARCH = "x86-64-v3"  # AVX2: what the GPU machines' host CPUs all have


def _tc_kernel(workload: Workload, shapes: list[tuple[int, ...]], arch: str) -> Any:
    import numpy as np

    import polyflow.tc as tc

    # -fassociative-math and -ffp-contract=fast: PyTorch and cuBLAS reorder sums (tree
    # reductions over threads) and fuse multiplies and adds too
    options = {"gpu_arch": arch, "associative_math": True, "fp_contract": "fast"}
    fn = tc.define(workload.source, workload.entry, target="cuda", options=options)
    probes = [
        np.empty(shape, dtype=dtype)
        for (_n, _s, dtype), shape in zip(workload.inputs, shapes, strict=True)
    ]
    return fn, fn._gpu_compiled(tuple(probes))


def _plan(compiled: Any, buffers: int) -> dict[str, Any]:
    from polyflow.drivers.gpu_launch import RecordingLauncher

    recorder = RecordingLauncher(buffers)
    compiled.host.run(
        compiled.entry, [recorder.buffer_address(k) for k in range(buffers)], recorder
    )
    return recorder.plan()


def _outputs(fn: Any, compiled: Any) -> list[dict[str, Any]]:
    from polyflow.tc import NUMPY_DTYPES

    return [
        {
            "name": t.name,
            "shape": list(compiled.specialized.shapes[t.name]),
            "dtype": str(__import__("numpy").dtype(NUMPY_DTYPES[t.element])),
        }
        for t in fn.definition.outputs
    ]


def _bundle_workload(
    bundle: Path, label: str, workload: Workload, shapes: Any, arch: str
) -> dict[str, Any]:
    """Writes one workload's PTX and launch plan for `shapes` (its own sizes when None) under
    `bundle/label` and returns its manifest entry."""
    fn, compiled = _tc_kernel(workload, list(shapes or [i[1] for i in workload.inputs]), arch)
    outputs = _outputs(fn, compiled)
    plan = _plan(compiled, len(workload.inputs) + len(outputs))
    folder = label.replace("@", "-")
    directory = bundle / folder
    directory.mkdir(exist_ok=True)
    ptx = {}
    for module, text in compiled.ptx.items():
        (directory / f"{module}.ptx").write_text(text)
        ptx[module] = f"{folder}/{module}.ptx"
    (directory / "plan.json").write_text(json.dumps(plan))
    said = [r.text() for r in compiled.report.remarks if r.stage == "gpu"]
    print(f"{label}: {len(plan['launches'])} launches, {len(ptx)} kernels", file=sys.stderr)
    entry: dict[str, Any] = {
        "name": label,
        "seed": 1,
        "plan": f"{folder}/plan.json",
        "ptx": ptx,
        "outputs": outputs,
        "report": said,
    }
    if shapes is not None:
        entry.update(shapes=[list(s) for s in shapes], check_only=True)
    return entry


def build(bundle: Path, only: set[str], arch: str) -> None:
    import polyflow

    bundle.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {
        "built": time.strftime("%Y-%m-%d %H:%M"),
        "gpu_arch": arch,
        "polyflow": polyflow.__version__,
        "tc": [],
        "polybench": [],
    }
    for name, workload in WORKLOADS.items():
        if only and name not in only:
            continue
        variants: list[tuple[str, Any]] = [(name, None)]
        # odd sizes, checked on the GPU but not timed: guards and partial tiles on the hardware
        if workload.small:
            variants.append((f"{name}@small", workload.small))
        if workload.odd:
            variants.append((f"{name}@odd", workload.odd))
        for label, shapes in variants:
            manifest["tc"].append(_bundle_workload(bundle, label, workload, shapes, arch))
    harness = ROOT / "bench_polybench" / "harness"
    for kernel in POLYBENCH:
        if only and kernel not in only:
            continue
        source = ROOT / "bench_polybench" / "kernels" / f"{kernel}.c"
        directory = bundle / "polybench"
        directory.mkdir(exist_ok=True)
        entry = {"name": kernel}
        flags = ("LARGE_DATASET",)
        gcc = directory / f"{kernel}.gcc"
        subprocess.run(
            [
                "gcc",
                "-O3",
                f"-march={MARCH}",
                "-DLARGE_DATASET",
                f"-I{harness}",
                str(source),
                "-o",
                str(gcc),
                "-lm",
            ],
            check=True,
        )
        entry["gcc"] = f"polybench/{gcc.name}"
        for build_name, target in (("polyflow_cpu", "cpu"), ("polyflow_cuda", "cuda")):
            exe = directory / f"{kernel}.{build_name}"
            options = polyflow.Options(
                opt_level=3,
                target=target,
                march=MARCH,
                defines=flags,
                include_dirs=(str(harness),),
                gpu_arch=arch,
            )
            polyflow.build_program(source, exe, options=options)
            entry[build_name] = f"polybench/{exe.name}"
        manifest["polybench"].append(entry)
        print(f"{kernel}: built", file=sys.stderr)
    runner = ROOT / "bench_polybench" / "gpu_runner.py"
    shutil.copy(runner, bundle / "gpu_runner.py")
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=1))
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    print(
        f"bundle {bundle}: {size / 2**20:.1f} MiB; run: python {bundle}/gpu_runner.py {bundle}",
        file=sys.stderr,
    )


def check(only: set[str]) -> int:
    """Each workload at small sizes: plan recorded, replayed on the CPU emulation, compared with
    the NumPy reference. Returns the number of failures."""
    import numpy as np

    from polyflow.drivers.gpu_launch import CpuLauncher, replay_on_cpu

    failures = 0
    for name, workload in WORKLOADS.items():
        if (only and name not in only) or not workload.small:
            continue
        shapes = list(workload.small)
        fn, compiled = _tc_kernel(workload, shapes, "sm_90")
        outputs = _outputs(fn, compiled)
        plan = _plan(compiled, len(workload.inputs) + len(outputs))
        inputs = inputs_for(workload, shapes, 1)
        results = [np.zeros(o["shape"], dtype=o["dtype"]) for o in outputs]
        replay_on_cpu(plan, [*inputs, *results], CpuLauncher(compiled.stages["gpu"]))
        expected = workload.reference(np, *inputs)
        names = [o["name"] for o in outputs]
        bad = [
            n
            for n in workload.compare
            if not np.allclose(results[names.index(n)], expected[n], rtol=1e-4, atol=1e-5)
        ]
        failures += bool(bad)
        print(
            f"{name}: {'WRONG ' + ', '.join(bad) if bad else 'ok'} ({len(plan['launches'])} launches)"
        )
    return failures


def _geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def report(results_path: Path, out_dir: Path = ROOT / "bench_polybench" / "results") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = json.loads(results_path.read_text())
    device = results.get("device", "GPU")
    lines = [
        f"# GPU benchmark, {results.get('date', '')}, {device}",
        "",
        f"Built {results['manifest']['built']} for {results['manifest']['gpu_arch']} "
        f"(polyflow {results['manifest']['polyflow']}, TC kernels with -fassociative-math "
        "-ffp-contract=fast, as PyTorch reorders sums and fuses multiply-adds too); run by "
        "bench_polybench/gpu_runner.py.",
        "Speed-up = peer time / polyflow time (above 1: polyflow is faster).",
        "",
        "| workload | polyflow (ms) | PyTorch eager (ms) | torch.compile (ms) | vs eager | vs compile |",
        "|---|---|---|---|---|---|",
    ]
    eager_ratios = []
    names, ratios = [], []
    checks = [row for row in results["tc"] if "@" in row["name"]]
    for row in [row for row in results["tc"] if "@" not in row["name"]]:
        ours = row.get("polyflow_s")
        eager, compiled = row.get("torch_eager_s"), row.get("torch_compile_s")
        r_eager = eager / ours if ours and eager else None
        r_compile = compiled / ours if ours and compiled else None
        if r_eager:
            eager_ratios.append(r_eager)
            names.append(row["name"])
            ratios.append(r_eager)
        fmt = lambda v: f"{v * 1e3:.3f}" if v else "—"  # noqa: E731
        rat = lambda v: f"{v:.2f}x" if v else "—"  # noqa: E731
        status = "" if row.get("correct", True) else " (WRONG: " + "; ".join(row["problems"]) + ")"
        lines.append(
            f"| {row['name']}{status} | {fmt(ours)} | {fmt(eager)} | {fmt(compiled)} | {rat(r_eager)} | {rat(r_compile)} |"
        )
    mean = _geomean(eager_ratios)
    lines += ["", f"Geomean vs PyTorch eager: {mean:.2f}x (goal: 1.2x)" if mean else "", ""]
    wrong = [f"{row['name']} ({'; '.join(row['problems'])})" for row in checks if not row["correct"]]
    lines += [
        f"Odd-size checks on the GPU (not timed): {len(checks) - len(wrong)} of {len(checks)} "
        "agree with PyTorch in float64" + (": wrong: " + ", ".join(wrong) if wrong else "."),
        "",
    ]
    lines += [
        "| PolyBench LARGE | gcc -O3 (s) | polyflow CPU (s) | polyflow CUDA (s) | CUDA vs gcc | CUDA vs CPU |",
        "|---|---|---|---|---|---|",
    ]
    for row in results["polybench"]:
        g, c, u = row.get("gcc_s"), row.get("polyflow_cpu_s"), row.get("polyflow_cuda_s")
        lines.append(
            f"| {row['name']} | {g or '—'} | {c or '—'} | {u or '—'} | "
            f"{f'{g / u:.2f}x' if g and u else '—'} | {f'{c / u:.2f}x' if c and u else '—'} |"
        )
    stem = out_dir / f"{results.get('date', 'undated')[:10]}-gpu"
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    if names:
        fig, ax = plt.subplots(figsize=(9, 4))
        ax.barh(names, ratios)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xlabel(f"speed-up over PyTorch eager ({device})")
        fig.tight_layout()
        fig.savefig(stem.with_suffix(".png"), dpi=120)
    print("\n".join(lines))
    return stem.with_suffix(".md")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("bundle", type=Path)
    b.add_argument("--only", default="")
    b.add_argument("--gpu-arch", default="sm_90")
    c = sub.add_parser("check")
    c.add_argument("--only", default="")
    r = sub.add_parser("report")
    r.add_argument("results", type=Path)
    args = parser.parse_args(argv)
    if args.command == "build":
        build(args.bundle, set(filter(None, args.only.split(","))), args.gpu_arch)
        return 0
    if args.command == "check":
        return 1 if check(set(filter(None, args.only.split(",")))) else 0
    report(args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
