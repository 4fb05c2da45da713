"""Validate the random program generator: ``check_ub.py SEED_FROM SEED_TO [--jobs N] [--keep DIR]
[--hard]`` (``--hard``: the generator of hard_gen.py).

For every seed in [SEED_FROM, SEED_TO) the generated program must
- compile with gcc and run cleanly under UBSan + ASan (``-fno-sanitize-recover=all``),
- print the same output at ``gcc -O0`` and ``gcc -O2`` (and under the sanitizers),
- print no ``nan``/``inf``, stay under 80 lines, and run in under 50 ms at -O2.
Failing programs are kept (``--keep``, default /tmp/polyflow-fuzz-ub) and listed; exit status 1 if any.
A program that is sanitizer-clean but differs between -O0 and -O2 may be a gcc bug rather than UB:
seed 1929 is one (gcc 12.2 -O2, tree-pre + ivopts, drops the stores of a triangular nest whose outer
loop starts at -1); the differential test then falls back to ``gcc -O0`` as its oracle.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from affine_gen import generate_program
from hard_gen import generate_hard_program

SAN_FLAGS = [
    "-O1",
    "-g",
    "-fsanitize=undefined,address,float-divide-by-zero,float-cast-overflow",
    "-fno-sanitize-recover=all",
]
WARN_FLAGS = [
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
    "-Wno-unused-variable",
    "-Wno-unused-but-set-variable",
]


def _build_run(
    src: Path, exe: Path, flags: list[str], env: dict[str, str]
) -> tuple[str, str, float]:
    """(output, problem or '', run seconds)."""
    cc = subprocess.run(
        ["gcc", *flags, str(src), "-o", str(exe), "-lm"], capture_output=True, text=True
    )
    if cc.returncode != 0 or cc.stderr:
        return "", f"compile {' '.join(flags)}:\n{cc.stderr}", 0.0
    t0 = time.perf_counter()
    try:
        r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=20, env=env)
    except subprocess.TimeoutExpired:
        return "", f"timeout {' '.join(flags)}", 20.0
    dt = time.perf_counter() - t0
    if r.returncode != 0 or r.stderr:
        return r.stdout, f"run {' '.join(flags)} rc={r.returncode}:\n{r.stderr[-3000:]}", dt
    return r.stdout, "", dt


def check_seed(seed: int, keep: Path, *, hard: bool = False) -> tuple[int, str, float]:
    src_text = generate_hard_program(seed) if hard else generate_program(seed)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0", UBSAN_OPTIONS="print_stacktrace=1")
    with tempfile.TemporaryDirectory(prefix=f"fz{seed}_") as td:
        d = Path(td)
        src = d / f"fuzz_{seed}.c"
        src.write_text(src_text)
        problems: list[str] = []
        nlines = src_text.count("\n")
        if nlines >= 80 and not hard:  # the hard programs are longer, on purpose
            problems.append(f"{nlines} lines")
        # the hard programs mix signedness and compare iterators with each other on purpose
        warnings = ["-w"] if hard else WARN_FLAGS
        out_san, p, _ = _build_run(src, d / "san", SAN_FLAGS + warnings, env)
        if p:
            problems.append(p)
        out0, p0, _ = _build_run(src, d / "o0", ["-O0"], env)
        out2, p2, dt = _build_run(src, d / "o2", ["-O2"], env)
        problems += [x for x in (p0, p2) if x]
        if not (p0 or p2) and out0 != out2:
            problems.append(f"-O0 and -O2 differ:\n{out0}\n---\n{out2}")
        if not (p or p2) and out_san != out2:
            problems.append("sanitized and -O2 outputs differ")
        low = out2.lower()
        if "nan" in low or "inf" in low:
            problems.append("nan/inf in output")
        if dt > 0.05:
            problems.append(f"slow: {dt * 1000:.0f} ms at -O2")
        if problems:
            keep.mkdir(parents=True, exist_ok=True)
            (keep / src.name).write_text(src_text)
        return seed, "\n".join(problems), dt


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("seed_from", type=int)
    ap.add_argument("seed_to", type=int)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--keep", type=Path, default=Path(tempfile.gettempdir()) / "polyflow-fuzz-ub")
    ap.add_argument("--hard", action="store_true", help="the programs of hard_gen.py")
    args = ap.parse_args()
    bad = 0
    times: list[float] = []
    with ThreadPoolExecutor(args.jobs) as ex:
        for seed, problem, dt in ex.map(
            lambda s: check_seed(s, args.keep, hard=args.hard), range(args.seed_from, args.seed_to)
        ):
            times.append(dt)
            if problem:
                bad += 1
                print(f"seed {seed}: {problem}\n", flush=True)
    n = args.seed_to - args.seed_from
    print(
        f"{n - bad}/{n} seeds clean; max -O2 run time {max(times, default=0) * 1000:.1f} ms; failing programs in {args.keep}"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
