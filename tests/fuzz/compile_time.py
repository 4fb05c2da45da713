"""Compile time and correctness of polyflow over the harder random programs (and the benchmark
kernels): ``python tests/fuzz/compile_time.py [--count N] [--seed S] [--jobs J] [--kernels]``.

Each generated program (``hard_gen.py``) is built by ``gcc -O2`` and by polyflow (``-O3`` by
default) in a process of its own, under a generous wall-clock limit (``--limit``, 60 s); polyflow's
build time is measured inside that process (``build_program``, interpreter start excluded). Both
executables run (polyflow's with ``OMP_NUM_THREADS=2``) and must print the same. With
``--kernels`` the 30 PolyBench kernels are built too (LARGE, ``--emit=affine-opt``: compile time
only). With ``--gpu-emulate`` the programs are built for ``--target=cuda`` and their kernels run
on the CPU emulation. Builds run one at a time by default (`--jobs 1`): a build may use both cores itself (two
large functions are scheduled in two processes), and its time is the time it takes alone on the
machine. Prints a table of p50/p95/max build times, how many scops fell back under an isl budget,
and every failure with its seed; ``--json`` keeps the records. Exit status 1 on any failure.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
KERNELS = ROOT / "bench_polybench" / "kernels"
HARNESS = ROOT / "bench_polybench" / "harness"

# Run in the child process: build one file with polyflow, print the seconds and the notes.
_CHILD = """
import json, sys, time
import polyflow
source, output, opt, emit, target, *flags = sys.argv[1:]
options = polyflow.Options(opt_level=int(opt), include_dirs=tuple(flags[:1]),
                           defines=tuple(flags[1:]), target=target,
                           gpu_emulate=target == "cuda")
start = time.perf_counter()
report = polyflow.build_program(source, output, options=options, emit=emit, cache=None)
print(json.dumps({"seconds": time.perf_counter() - start, "notes": report.notes,
                  "warnings": report.warnings, "compiled": list(report.compiled)}))
"""


def _polyflow_build(
    source: Path,
    output: Path,
    *,
    opt: int,
    emit: str,
    limit: float,
    flags: list[str],
    target: str = "cpu",
) -> dict[str, object]:
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, str(source), str(output), str(opt), emit, target, *flags],
            capture_output=True,
            text=True,
            timeout=limit,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "seconds": limit, "wall": time.perf_counter() - start}
    if proc.returncode != 0:
        return {"status": "crash", "error": proc.stderr[-2000:], "seconds": 0.0}
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    record["status"] = "ok"
    record["wall"] = time.perf_counter() - start
    return record


def _run(exe: Path, threads: int) -> tuple[int, str]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    proc = subprocess.run(
        [str(exe)], capture_output=True, text=True, timeout=60, check=False, env=env
    )
    return proc.returncode, proc.stdout


def check_seed(
    seed: int, *, opt: int, limit: float, workdir: Path, target: str = "cpu"
) -> dict[str, object]:
    """Build and run the hard program of `seed` both ways; a record of what happened."""
    sys.path.insert(0, str(HERE))
    from hard_gen import generate_hard_program

    source = workdir / f"hard_{seed}.c"
    source.write_text(generate_hard_program(seed))
    gcc_exe = workdir / f"hard_{seed}.gcc"
    subprocess.run(
        ["gcc", "-O2", "-w", "-o", str(gcc_exe), str(source), "-lm"], check=True
    )
    record = _polyflow_build(
        source,
        workdir / f"hard_{seed}.pf",
        opt=opt,
        emit="exe",
        limit=limit,
        flags=[],
        target=target,
    )
    record["name"] = f"seed {seed}"
    if record["status"] != "ok":
        return record
    expected = _run(gcc_exe, 1)
    actual = _run(workdir / f"hard_{seed}.pf", 2)
    if actual != expected:
        at_o0 = workdir / f"hard_{seed}.gcc0"
        subprocess.run(["gcc", "-O0", "-w", "-o", str(at_o0), str(source), "-lm"], check=True)
        # gcc -O2 miscompiles the odd program (tests/test_random_programs.py): -O0 decides
        record["status"] = "ok" if _run(at_o0, 1) == actual else "wrong output"
    for path in workdir.glob(f"hard_{seed}.*"):
        path.unlink()
    return record


def check_kernel(name: str, *, limit: float, workdir: Path) -> dict[str, object]:
    record = _polyflow_build(
        KERNELS / f"{name}.c",
        workdir / f"{name}.mlir",
        opt=3,
        emit="affine-opt",
        limit=limit,
        flags=[str(HARNESS), "LARGE_DATASET"],
    )
    record["name"] = name
    return record


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def summarize(label: str, records: list[dict[str, object]]) -> str:
    seconds = [float(r["seconds"]) for r in records]  # type: ignore[arg-type]
    fell_back = sum(
        1 for r in records for n in r.get("notes", []) if "isl budget" in n  # type: ignore[attr-defined]
    )
    failed = [r for r in records if r["status"] != "ok"]
    return (
        f"| {label} | {len(records)} | {statistics.median(seconds):.2f} | "
        f"{_percentile(seconds, 0.95):.2f} | {max(seconds):.2f} | {fell_back} | {len(failed)} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--jobs", type=int, default=1, help="builds at once (1: each timed alone on the machine)"
    )
    parser.add_argument("--opt", type=int, default=3)
    parser.add_argument("--limit", type=float, default=60.0, help="seconds per build")
    parser.add_argument("--kernels", action="store_true", help="also the PolyBench kernels")
    parser.add_argument(
        "--gpu-emulate",
        action="store_true",
        help="build for --target=cuda and run the kernels on the CPU emulation",
    )
    parser.add_argument("--json", type=Path, help="write every record here")
    args = parser.parse_args(argv)

    from rich.progress import Progress

    seeds = range(args.seed, args.seed + args.count)
    records: list[dict[str, object]] = []
    kernel_records: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="polyflow-ctime-") as tmp, Progress() as progress:
        workdir = Path(tmp)
        task = progress.add_task("hard programs", total=len(seeds))
        with ThreadPoolExecutor(args.jobs) as pool:
            futures = [
                pool.submit(
                    check_seed,
                    s,
                    opt=args.opt,
                    limit=args.limit,
                    workdir=workdir,
                    target="cuda" if args.gpu_emulate else "cpu",
                )
                for s in seeds
            ]
            for future in futures:
                records.append(future.result())
                progress.advance(task)
        if args.kernels:
            names = sorted(p.stem for p in KERNELS.glob("*.c"))
            task = progress.add_task("benchmark kernels", total=len(names))
            for name in names:  # one at a time: their times are reported one by one
                kernel_records.append(check_kernel(name, limit=args.limit, workdir=workdir))
                progress.advance(task)
    print("| corpus | builds | p50 s | p95 s | max s | scops past an isl budget | failures |")
    print("|---|---|---|---|---|---|---|")
    label = f"hard programs, -O{args.opt}" + (", cuda emulated" if args.gpu_emulate else "")
    print(summarize(label, records))
    if kernel_records:
        print(summarize("PolyBench kernels, LARGE, -O3", kernel_records))
        slow = sorted(kernel_records, key=lambda r: -float(r["seconds"]))[:5]  # type: ignore[arg-type]
        print("slowest kernels: " + ", ".join(f"{r['name']} {r['seconds']:.1f} s" for r in slow))
    failures = [r for r in records + kernel_records if r["status"] != "ok"]
    for r in failures:
        print(f"FAIL {r['name']}: {r['status']} {r.get('error', '')}")
    if args.json:
        args.json.write_text(json.dumps({"programs": records, "kernels": kernel_records}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
