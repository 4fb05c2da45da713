"""Checkpointing's memory/time trade-off on a nonlinear time loop (C): the gradient of `steps`
sweeps of a nonlinear diffusion over `points` values, built with each `checkpoint_steps`
(0: a tape of every step; the default; fixed segment lengths), timed (best of `--repeat`) and
its peak resident memory measured over the inputs (bench_ad.memory); every gradient is checked
against the first one (relative difference ≤ 1e-12, else the exit status is 1).

``python -m bench_ad.checkpointing [--steps 1000] [--points 4096] [--repeat 5]``
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from bench_ad.memory import peak_extra_resident
from bench_ad.timing import best_of
from polyflow import compile_c

SOURCE = """
#include <math.h>
void evolve(double A[POINTS], double B[POINTS], const double k[POINTS]) {
  for (int t = 0; t < STEPS; t++) {
    for (int i = 1; i < POINTS - 1; i++)
      B[i] = A[i] + 0.1 * k[i] * tanh(A[i - 1] - 2.0 * A[i] + A[i + 1]);
    for (int i = 1; i < POINTS - 1; i++)
      A[i] = B[i] * (1.0 + 0.01 * sin(B[i]));
  }
}
"""


def _size(count: float) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count:.0f} B"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--points", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--segments", default="0,default,8,32,128", help="values of K")
    args = parser.parse_args(argv)
    source = SOURCE.replace("POINTS", str(args.points)).replace("STEPS", str(args.steps))
    rng = np.random.default_rng(0)
    inputs = [rng.uniform(0.5, 1.5, args.points) for _ in range(3)]
    seeds = [rng.standard_normal(args.points) for _ in range(2)]
    table = Table(title=f"gradient of {args.steps} steps over {args.points} points (float64)")
    for column in ("checkpoint_steps", "what the compiler did", "primal ms", "gradient ms",
                   "gradient / primal", "peak memory", "max rel. diff."):  # fmt: skip
        table.add_column(column, justify="left" if column.startswith("what") else "right")
    reference: list[np.ndarray] | None = None
    worst = 0.0
    for text in args.segments.split(","):
        steps = None if text == "default" else int(text)
        f = compile_c(source, "evolve", grad=True, options={"checkpoint_steps": steps})
        notes = [r.message for r in f.report.remarks if r.kind == "checkpoint"]

        def primal(f: Any = f) -> None:
            f(*(a.copy() for a in inputs))

        def gradient(f: Any = f) -> list[np.ndarray]:
            a, b, k = (x.copy() for x in inputs)
            shadows = [s.copy() for s in seeds] + [np.zeros(args.points)]
            f.grad(a, shadows[0], b, shadows[1], k, shadows[2])
            return shadows

        primal_time, _ = best_of(primal, args.repeat)
        gradient_time, _ = best_of(gradient, args.repeat)
        peak = peak_extra_resident(gradient)
        result = gradient()
        if reference is None:
            reference = result
        difference = max(
            float(np.max(np.abs(x - y) / np.maximum(np.abs(y), 1e-300)))
            for x, y in zip(result, reference, strict=True)
        )
        worst = max(worst, difference)
        table.add_row(
            text,
            notes[0].removeprefix("checkpointed: ") if notes else "tape of every step",
            f"{primal_time.best_s * 1e3:.2f}",
            f"{gradient_time.best_s * 1e3:.2f}",
            f"{gradient_time.best_s / primal_time.best_s:.2f}x",
            _size(peak[0]) if peak is not None else "n/a",
            f"{difference:.1e}",
        )
    Console(width=200).print(table)
    if worst > 1e-12:
        print(f"checkpointing changed the gradient (relative difference {worst:.1e})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
