"""Random contraction nests through the micro-kernels against gcc -O2:
``python tests/fuzz/contraction_fuzz.py [--count N] [--seed S]``.

Each program is one nest `O[...] += A[...] * B[...]` (or `O = O + A * B * c`, or a sum over
a sliding tap `B[..][x + t]`): its output indexed by one loop (a row vector), two or three in
a random order of subscripts, one reduction loop (and maybe the tap), the loops nested in a
random order, the extents small and odd (1 to 40, so that edge rows, masked columns and
padded panels all run), float or double. It is built three ways — micro-kernels
untransposed, transposed, and as `auto` chooses — without fused multiply-adds, so each output
element's sum must print gcc's digits exactly (the micro-kernels keep every element's order of
the reductions); odd seeds without parallel loops. Prints a line per failure and a summary;
exits 1 on any.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path
from typing import Literal

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from difftest import check_program_against_gcc  # noqa: E402

import polyflow  # noqa: E402
from polyflow.options import Options  # noqa: E402

EXTENTS = (1, 3, 5, 8, 13, 17, 20, 33, 40)
MODES: tuple[Literal["off", "on", "auto"], ...] = ("off", "on", "auto")


def generate_contraction(seed: int) -> str:
    """A whole C program (see the module docstring) that prints every output element."""
    rng = random.Random(seed)
    element = rng.choice(["float", "double"])
    taps = rng.choice([1, 1, 3])
    extent = {v: rng.choice(EXTENTS) for v in "ijlk"}
    extent["t"] = taps
    outputs = rng.sample(["i", "j", "l"], rng.choice([2, 3]))
    # a quarter of the programs keep one output loop: a row vector (`O[j] += A[k] * B[k][j]`,
    # or A read along j: no block). Drawn apart, so that the other seeds' programs stay those
    # of the generator without row vectors.
    if random.Random(seed * 7919 + 5).random() < 0.25:
        outputs = outputs[-1:]
    slides = outputs[-1]  # the tap slides along the output's last subscript's loop
    loops = [*outputs, "k", *(["t"] if taps > 1 else [])]
    rng.shuffle(loops)

    def declared(names: list[str], padded: bool) -> str:
        grow = {slides: taps - 1} if padded else {}
        return "".join(f"[{extent[v] + grow.get(v, 0)}]" for v in names)

    a_names, b_names = [outputs[0], "k"], ["k", *outputs[1:]]
    if len(outputs) == 1 and rng.random() < 0.5:
        a_names, b_names = ["k"], ["k", *outputs]
    out = "".join(f"[{v}]" for v in outputs)
    a = "".join(f"[{v}]" for v in a_names)
    b = "".join(f"[{v}{' + t' if v == slides and taps > 1 else ''}]" for v in b_names)
    body = rng.choice([f"O{out} += A{a} * B{b};", f"O{out} = O{out} + A{a} * B{b} * 0.5;"])
    nest = "".join(
        f"{'  ' * (depth + 1)}for (int {v} = 0; {v} < {extent[v]}; {v}++)\n"
        for depth, v in enumerate(loops)
    )
    nest += f"{'  ' * (len(loops) + 1)}{body}\n"

    def fill(name: str) -> str:
        # small integers and quarters: products exact, sums rounding in their order
        return (
            f"  {{ {element} *p = ({element} *){name};\n"
            f"    for (int q = 0; q < (int)(sizeof {name} / sizeof *p); q++)\n"
            f"      p[q] = (q * 7 % 11) - 5 + (q % 3) * 0.25 + (q % 5) * 1e-3; }}\n"
        )

    return f"""#include <stdio.h>
static {element} O{declared(outputs, False)}, A{declared(a_names, False)}, B{declared(b_names, True)};
static void kernel(void) {{
{nest}}}
int main(void) {{
{fill("O")}{fill("A")}{fill("B")}  kernel();
  {{ {element} *p = ({element} *)O;
    for (int q = 0; q < (int)(sizeof O / sizeof *p); q++) printf("%.17g\\n", (double)p[q]); }}
  return 0;
}}
"""


def check_contraction(seed: int, workdir: Path) -> tuple[list[str], int]:
    """Failures of program `seed` (one text each) and how many of its builds were transposed
    micro-kernels."""
    source = workdir / f"contraction_{seed}.c"
    source.write_text(generate_contraction(seed))
    failures: list[str] = []
    transposed = 0
    # odd seeds run sequentially: a nest too small to share out keeps its loops for the blocks
    # (in parallel, its innermost loop may be the parallel one, and no micro-kernel applies)
    parallel = seed % 2 == 0
    for mode in MODES:
        options = Options(
            opt_level=3,
            march="native",
            fp_contract="off",
            micro_kernel_transposed=mode,
            parallel=parallel,
        )
        built = polyflow.build_program(
            source, workdir / f"{seed}_{mode}.mlir", options=options, emit="affine-opt"
        )
        transposed += any(
            r.data.get("transposed") for r in built.report.remarks if r.kind == "micro-kernel"
        )
        try:
            check_program_against_gcc(source, workdir / f"{seed}_{mode}", options)
        except AssertionError as exc:
            failures.append(f"seed {seed}, micro_kernel_transposed={mode}: {exc}")
    return failures, transposed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    failures: list[str] = []
    transposed = 0
    with tempfile.TemporaryDirectory(prefix="polyflow-contraction-fuzz-") as scratch:
        for seed in range(args.seed, args.seed + args.count):
            found, count = check_contraction(seed, Path(scratch))
            failures += found
            transposed += count
            for line in found:
                print(line[:2000])
    print(
        f"{args.count} programs, {args.count * len(MODES)} builds ({transposed} with transposed "
        f"micro-kernels): {len(failures)} failed"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
