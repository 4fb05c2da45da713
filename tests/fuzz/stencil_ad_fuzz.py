"""Reverse-mode gradients of random stencils in time loops against central differences:
``python tests/fuzz/stencil_ad_fuzz.py [--count N] [--seed S]``.

Each program is `for t: B = sweep(A); A = sweep(B)` over a 1-, 2- or 3-D box with random
margins, each sweep a sum of 2 to 6 terms at random offsets within the margins (some squared,
some under `sin`). Their adjoints are the gathers of `polyflow/autodiff/gather.py`: each is
compiled at -O2 or -O3 and checked at box sizes 2, 3, 5 and 7 (boxes smaller than the offsets
spread take the tested path, larger ones the peeled one) with 0 to 3 steps.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import polyflow  # noqa: E402
from fuzz.ad_fuzz import central_difference_mismatch  # noqa: E402
from polyflow import CompileError  # noqa: E402

_INDICES = "ijk"


def stencil_program(seed: int) -> tuple[str, int, int]:
    """(C source of `f(T, n, A, B)`, its dimensions, the -O level to compile it at)."""
    rng = random.Random(seed)
    dims = rng.choice([1, 2, 3])
    low = [rng.choice([1, 2]) for _ in range(dims)]
    high = [rng.choice([1, 2]) for _ in range(dims)]

    def sweep(target: str, source: str) -> str:
        terms = []
        for _ in range(rng.randint(2, 6)):
            offsets = [rng.randint(-low[d], high[d]) for d in range(dims)]
            at = "".join(
                f"[{_INDICES[d]}{'+' if o >= 0 else '-'}{abs(o)}]" for d, o in enumerate(offsets)
            )
            weight = round(rng.uniform(-0.5, 0.5), 3)
            kind = rng.random()
            if kind < 0.15:
                terms.append(f"{weight} * {source}{at} * {source}{at}")
            elif kind < 0.25:
                terms.append(f"{weight} * sin({source}{at})")
            else:
                terms.append(f"{weight} * {source}{at}")
        loops = "".join(
            f"for (int {_INDICES[d]} = {low[d]}; {_INDICES[d]} < n - {high[d]}; {_INDICES[d]}++) "
            for d in range(dims)
        )
        element = "".join(f"[{_INDICES[d]}]" for d in range(dims))
        return f"    {loops}{target}{element} = {' + '.join(terms)};\n"

    shape = "][".join(["n"] * dims)
    source = (
        "#include <math.h>\n"
        f"void f(int T, int n, double A[{shape}], double B[{shape}]) {{\n"
        "  for (int t = 0; t < T; t++) {\n"
        f"{sweep('B', 'A')}{sweep('A', 'B')}"
        "  }\n}\n"
    )
    return source, dims, rng.choice([2, 3])


def check_stencil(seed: int) -> str:
    """'ok', 'refused: <reason>', or 'FAILED: <why>' for the program of `seed`."""
    source, dims, level = stencil_program(seed)
    try:
        f = polyflow.compile_c(source, "f", grad=True, options={"opt_level": level})
    except CompileError as exc:
        return "refused: " + exc.message
    for n in (2, 3, 5, 7):
        rng = np.random.default_rng(seed * 10 + n)
        steps = int(rng.integers(0, 4))
        args = [steps, n, rng.uniform(0.5, 1.5, (n,) * dims), rng.uniform(0.5, 1.5, (n,) * dims)]
        mismatch = central_difference_mismatch(f, args, rng)
        if mismatch is not None:
            return f"FAILED: n={n}, T={steps}: {mismatch}\n{source}"
    return "ok"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    failed = 0
    for seed in range(args.seed, args.seed + args.count):
        result = check_stencil(seed)
        if not result.startswith(("ok", "refused")):
            failed += 1
            print(f"seed {seed}: {result}")
    print(f"{args.count} stencils, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
