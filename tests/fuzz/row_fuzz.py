"""Random row sweeps through the register loops against gcc -O2:
``python tests/fuzz/row_fuzz.py [--count N] [--seed S]``.

Each program is one loop `for (k = lo; k < hi; k++) b[0][k] = ...` over the rows of `a`
(one to three of them), read at two to five offsets of `k` between -5 and 5, with small
integer weights, in double, float, int or long; some update `b[0][k]` in place (read at its own
element), some integer ones take a remainder (a body that may not run masked lanes). The
program calls it for every start offset within a vector and every length from empty to a few
vectors, then every seventh up to a row of 40-233 elements, and prints a weighted sum of the
row each time. Built at -O3 for this machine, sequential and without fused multiply-adds, so
each element must print gcc's digits: the register loop's vectors, its masked ends and the
scalar loops of short rows all run. Prints a line per failure and a summary (how many
programs took the register loop); exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from difftest import build_with_gcc, build_with_polyflow, compare_runs, run_program  # noqa: E402

from polyflow.options import Options  # noqa: E402

TYPES = {"double": "%.17g", "float": "%.9g", "int": "%d", "long": "%ld"}


def row_program(seed: int) -> str:
    """The C program of `seed` (module docstring)."""
    rng = random.Random(seed)
    type_ = rng.choice(sorted(TYPES))
    integer = type_ in ("int", "long")
    length = rng.choice([40, 97, 160, 233])
    rows = rng.randint(1, 3)
    terms = []
    for _ in range(rng.randint(2, 5)):
        row, offset, weight = rng.randint(0, rows - 1), rng.randint(-5, 5), rng.randint(1, 4)
        scale = f"{weight}" if integer else f"({type_}){weight}.5"
        terms.append(f"{scale} * a[{row}][k + {offset}]")
    expr = " + ".join(terms)
    if rng.random() < 0.3:
        expr = f"b[0][k] * {'3' if integer else '0.5'} + {expr}"
    if integer and rng.random() < 0.3:
        expr = f"({expr}) % 1009"
    lo = rng.randint(5, 12)
    return f"""#include <stdio.h>
#define M {length}
static {type_} A[4][M + 32], B[2][M + 32];
static void row(int lo, int hi, {type_} a[4][M + 32], {type_} b[2][M + 32]) {{
  for (int k = lo; k < hi; k++)
    b[0][k] = {expr};
}}
int main(void) {{
  for (int s = 0; s < 8; s++)
    for (int hi = {lo}; hi <= M; hi += (hi < {lo} + 40 ? 1 : 7)) {{
      for (int q = 0; q < 4; q++)
        for (int k = 0; k < M + 32; k++) A[q][k] = ({type_})((k * 7 + q * 3 + s) % 23);
      for (int q = 0; q < 2; q++)
        for (int k = 0; k < M + 32; k++) B[q][k] = ({type_})((k + q) % 5);
      row({lo} + s, hi, A, B);
      {type_} sum = 0;
      for (int k = 0; k < M + 32; k++) sum += B[0][k] * ({type_})(1 + k % 7);
      printf("%d %d {TYPES[type_]}\\n", s, hi, sum);
    }}
  return 0;
}}
"""


def check_row(seed: int, scratch: Path) -> tuple[list[str], bool]:
    """Failures of the program of `seed` against gcc, and whether its loop took the register
    loop (the build's `register-shifts` remark)."""
    source = scratch / f"row{seed}.c"
    source.write_text(row_program(seed))
    options = Options(opt_level=3, march="native", parallel=False, fp_contract="off")
    expected = run_program(build_with_gcc(source, scratch / f"row{seed}.gcc"))
    try:
        report = build_with_polyflow(source, scratch / f"row{seed}.pf", options)
    except Exception as exc:  # a crash of the compiler is a failure of the seed
        return [f"seed {seed}: polyflow failed: {type(exc).__name__}: {exc}"], False
    problems = compare_runs(expected, run_program(report.output))
    shifted = any(remark.kind == "register-shifts" for remark in report.report.remarks)
    return [f"seed {seed}: {problem}" for problem in problems], shifted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    failures: list[str] = []
    shifted = 0
    with tempfile.TemporaryDirectory(prefix="polyflow-row-fuzz-") as scratch:
        for seed in range(args.seed, args.seed + args.count):
            found, took = check_row(seed, Path(scratch))
            failures += found
            shifted += took
            for line in found:
                print(line[:2000])
    print(f"{args.count} programs ({shifted} through the register loop): {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
