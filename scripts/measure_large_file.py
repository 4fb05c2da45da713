"""Compile time and peak memory of one large C file, polyflow against gcc:
``python scripts/measure_large_file.py [--functions 2000 | --initializer KIB] [--opt 3]``.

The file is ``tests/fuzz/many_functions.py``'s: N small loop functions and a main calling them,
or (``--initializer``) a constant table of that many KiB of C read by one loop function.
Each compiler runs as a command of its own, timed (`--repeat N`: the median of N runs); one more
run samples its process tree's memory every 0.2 s (proportional set size, so pages forked
workers share are counted once) and reports the peak.
Both executables run and must print the same.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def _pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _run(cmd: list[str], sample: bool) -> tuple[float, int]:
    """(seconds, peak MiB of the process tree; 0 unless `sample`) of running `cmd`."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = 0
    while proc.poll() is None:
        if sample:
            peak = max(peak, sum(_pss_kib(p) for p in _tree(proc.pid)))
        time.sleep(0.2 if sample else 0.01)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr.read() if proc.stderr else ''}")
    return seconds, peak // 1024


def measure(cmd: list[str], repeat: int) -> tuple[float, int]:
    """(median seconds of `repeat` plain runs, peak MiB of one more, sampled run) of `cmd`.
    Time and memory come from separate runs: reading a large process's `smaps_rollup` takes
    ~50 ms, every 0.2 s, and that load would land on the cores a parallel build uses."""
    seconds = statistics.median(_run(cmd, sample=False)[0] for _ in range(repeat))
    return seconds, _run(cmd, sample=True)[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", type=int, default=2000)
    parser.add_argument("--initializer", type=int, metavar="KIB", help="a table this large")
    parser.add_argument("--opt", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1, help="timed runs each (the median)")
    args = parser.parse_args()
    from fuzz.many_functions import generate_large_initializer, generate_many_functions

    with tempfile.TemporaryDirectory(prefix="polyflow-large-") as tmp:
        source = Path(tmp) / "many.c"
        source.write_text(
            generate_large_initializer(args.initializer)
            if args.initializer
            else generate_many_functions(args.functions)
        )
        size = source.stat().st_size // 1024
        gcc = measure(["gcc", "-O2", "-o", f"{tmp}/gcc", str(source)], args.repeat)
        polyflow = measure(
            [
                sys.executable,
                "-m",
                "polyflow",
                "build",
                str(source),
                "-o",
                f"{tmp}/pf",
                f"-O{args.opt}",
                "--no-cache",
            ],
            args.repeat,
        )
        same = subprocess.run([f"{tmp}/gcc"], capture_output=True, text=True).stdout == (
            subprocess.run([f"{tmp}/pf"], capture_output=True, text=True).stdout
        )
    what = "a constant table" if args.initializer else f"{args.functions} functions"
    print(f"{what}, {size} KiB of C")
    print("| compiler | seconds | peak MiB (all processes) |")
    print("|---|---|---|")
    print(f"| gcc -O2 | {gcc[0]:.1f} | {gcc[1]} |")
    print(f"| polyflow -O{args.opt} | {polyflow[0]:.1f} | {polyflow[1]} |")
    print(f"polyflow / gcc: {polyflow[0] / gcc[0]:.2f}x; outputs {'agree' if same else 'DIFFER'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
