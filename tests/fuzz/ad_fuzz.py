"""Reverse-mode gradients of random affine programs against central differences:
``python tests/fuzz/ad_fuzz.py [--count N] [--seed S]``.

Each program of ``affine_gen.generate_program(seed)`` has kernels that ``main`` calls with
literal sizes and its arrays. Every kernel is compiled with ``compile_c(grad=True)`` and called
as ``main`` calls it, on random data (doubles in [-2, 2], ints in [-1024, 1023] as the
generator's invariant allows); its gradient must either agree with central differences of
``L = Σ seed·(final float arrays) + seed·result`` along 3 random directions (relative error
≤ 1e-6), or be refused with a CompileError (counted by reason). Anything else — a wrong
gradient, another exception — is a failure. The generator's programs have kinks (casts of
doubles to int, comparisons, fabs): a direction that crosses one within h shows as a
difference of O(1/h) and is retried once with other data, then reported.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import polyflow  # noqa: E402
from fuzz.affine_gen import generate_program  # noqa: E402
from polyflow import CompileError  # noqa: E402

_CALL = re.compile(r"(kernel_\d+)\(([^();]*)\)")
_ARRAY = re.compile(r"static (double|int|float|long) (\w+)((?:\[\d+\])+);")


def kernel_calls(
    source: str,
) -> tuple[dict[str, tuple[str, tuple[int, ...]]], list[tuple[str, list[str]]]]:
    """main's arrays (name -> element type, shape) and its kernel calls (name, argument texts)."""
    main = source[source.index("int main(void)") :]
    arrays = {
        name: (kind, tuple(int(d) for d in re.findall(r"\d+", dims)))
        for kind, name, dims in _ARRAY.findall(main)
    }
    calls = [
        (name, [a.strip() for a in args.split(",")] if args.strip() else [])
        for name, args in _CALL.findall(main)
    ]
    return arrays, calls


def check_kernel(
    source: str,
    name: str,
    args: list[str],
    arrays: dict[str, tuple[str, tuple[int, ...]]],
    rng: np.random.Generator,
    checkpoint_steps: int | None = None,
) -> str:
    """'ok', 'refused: <reason>', or 'FAILED: <why>'. `checkpoint_steps`: the option's value
    (small values checkpoint every loop that tapes)."""
    try:
        options = {"checkpoint_steps": checkpoint_steps}
        f = polyflow.compile_c(source, name, grad=True, options=options)
    except CompileError as exc:
        return "refused: " + _reason(exc.message)
    values: list[Any] = []
    for text in args:
        if text in arrays:
            kind, shape = arrays[text]
            if kind in ("double", "float"):
                values.append(rng.uniform(-2.0, 2.0, shape))
            else:
                values.append(
                    rng.integers(-1024, 1024, shape).astype(np.int32 if kind == "int" else np.int64)
                )
        else:
            values.append(int(text))
    mismatch = central_difference_mismatch(f, values, rng)
    return "ok" if mismatch is None else f"FAILED: {mismatch}"


def central_difference_mismatch(
    f: Any, args: list[Any], rng: np.random.Generator, *, skip_if_not_finite: bool = False
) -> str | None:
    """`f.grad` (a `compile_c(grad=True)` callable: each float array or scalar argument
    followed by its shadow, a float result's seed last) against central differences of
    L = Σ seed·(final float arrays) + seed·result along 3 random directions (relative error
    ≤ 1e-6), and the arrays `f.grad` leaves against `f`'s (its forward sweep is `f`); what
    differs, or None. `skip_if_not_finite`: None, unchecked, when the outputs
    on `args` are not finite (data outside the kernel's domain)."""
    active = [
        k for k, a in enumerate(args)
        if isinstance(a, float) or (isinstance(a, np.ndarray) and a.dtype.kind == "f")
    ]  # fmt: skip
    # file-scope arrays are state the kernels change: every call starts from the same
    initial = {name: array.copy() for name, array in f.globals.items()}

    def reset() -> None:
        for name, array in initial.items():
            f.globals[name][...] = array

    def run(inputs: list[Any]) -> tuple[list[Any], Any]:
        copies = [v.copy() if isinstance(v, np.ndarray) else v for v in inputs]
        reset()
        return copies, f(*copies)

    finals, result = run(args)
    if skip_if_not_finite and not all(
        np.all(np.isfinite(v)) for v in finals if isinstance(v, np.ndarray)
    ):
        return None
    seeds = {
        k: rng.standard_normal(args[k].shape) for k in active if isinstance(args[k], np.ndarray)
    }
    result_seed = 1.3 if isinstance(result, float) else None

    def objective(inputs: list[Any]) -> float:
        arrays, value = run(inputs)
        total = sum(float(np.sum(seeds[k] * arrays[k])) for k in seeds)
        return total + (result_seed * value if result_seed is not None else 0.0)

    call: list[Any] = []
    shadows: dict[int, np.ndarray] = {}
    for k, value in enumerate(args):
        call.append(value.copy() if isinstance(value, np.ndarray) else value)
        if k in active:
            shadows[k] = seeds[k].copy() if k in seeds else np.zeros(1)
            call.append(shadows[k])
    if result_seed is not None:
        call.append(result_seed)
    assert f.grad is not None
    reset()
    f.grad(*call)
    for k, value in enumerate(finals):
        if isinstance(value, np.ndarray):
            left = call[k + sum(1 for j in active if j < k)]
            if not np.allclose(left, value, rtol=1e-12, atol=0.0, equal_nan=True):
                return f"argument {k} after the gradient differs from after the function"
    h = 1e-6
    for _ in range(3):
        direction = {k: rng.standard_normal(np.shape(args[k])) for k in active}
        plus = [a + h * direction[k] if k in active else a for k, a in enumerate(args)]
        minus = [a - h * direction[k] if k in active else a for k, a in enumerate(args)]
        numeric = (objective(plus) - objective(minus)) / (2 * h)
        exact = sum(float(np.sum(shadows[k] * direction[k])) for k in active)
        if abs(exact - numeric) > 1e-6 * max(1.0, abs(numeric)):
            return f"gradient {exact!r}, central differences {numeric!r}"
    return None


def _reason(message: str) -> str:
    text = message.split(": ", 1)[-1]
    return re.sub(r"'[^']*'", "'…'", text)[:90]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--checkpoint-steps",
        type=int,
        default=None,
        help="the option's value: a small one checkpoints every loop that tapes",
    )
    args = parser.parse_args()
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    for seed in range(args.seed, args.seed + args.count):
        source = generate_program(seed)
        arrays, calls = kernel_calls(source)
        rng = np.random.default_rng(seed)
        for name, call in calls:
            steps = args.checkpoint_steps
            outcome = check_kernel(source, name, call, arrays, rng, steps)
            if outcome.startswith("FAILED"):  # a kink crossed within h? other data once
                other = np.random.default_rng(seed + 10**6)
                outcome = check_kernel(source, name, call, arrays, other, steps)
            if outcome.startswith("FAILED"):
                failures.append(f"seed {seed} {name}: {outcome}")
            outcomes["failed" if outcome.startswith("FAILED") else outcome] += 1
    for outcome, count in outcomes.most_common():
        print(f"{count:5d}  {outcome}")
    for failure in failures:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
