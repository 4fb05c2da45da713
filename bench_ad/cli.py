"""`python -m bench_ad`: measure the chosen kernels, print the table, write the results."""

from __future__ import annotations

import argparse
import datetime
import os
import tempfile
from pathlib import Path
from typing import Any, cast

from bench_ad.case import Size
from bench_ad.kernels import KERNELS, cases
from bench_ad.plot import plot
from bench_ad.progress import progress
from bench_ad.report import markdown, to_json
from bench_ad.row import Row
from bench_ad.runner import environment, measure

RESULTS = Path(__file__).resolve().parent / "results"


def _kernel_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in KERNELS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown kernel(s) {', '.join(unknown)} (known: {', '.join(KERNELS)})"
        )
    return names


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench_ad",
        description="Reverse-mode AD benchmark: polyflow vs JAX and PyTorch, CPU, float64.",
    )
    parser.add_argument(
        "--kernels", type=_kernel_list, default=list(KERNELS),
        help=f"comma-separated, from: {', '.join(KERNELS)} (default: all)",
    )  # fmt: skip
    parser.add_argument(
        "--size", choices=("small", "full"), default="full",
        help="small: tiny sizes, a smoke run of about a minute; full: the benchmark",
    )  # fmt: skip
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per measurement")
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory of the results")
    parser.add_argument(
        "--timeout", type=float, default=600.0,
        help="seconds a JAX or PyTorch child may run per case",
    )  # fmt: skip
    parser.add_argument(
        "--use-cache", action="store_true",
        help="let polyflow use its compile cache (compile times then show cache hits)",
    )  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.repeat < 1:
        _parser().error("--repeat must be at least 1")
    if not args.use_cache:
        # compile times are part of the results: a cache hit would hide them
        os.environ["POLYFLOW_CACHE"] = "off"
    size = cast(Size, args.size)
    specs = cases(args.kernels, size)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench_ad-") as workdir, progress(len(specs)) as bar:
        for index, spec in enumerate(specs):
            bar.case(f"{spec.kernel} {spec.label}")
            row = measure(
                spec,
                repeat=args.repeat,
                directory=Path(workdir) / f"case{index}",
                timeout_s=args.timeout,
                step=bar.step,
            )
            rows.append(row)
            bar.done(_summary(row))
    now = datetime.datetime.now()
    meta: dict[str, Any] = {
        "date": now.strftime("%Y-%m-%d %H:%M"),
        "size": size,
        "repeat": args.repeat,
        "kernels": args.kernels,
        "environment": {**environment(), **_versions(rows)},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"{now:%Y-%m-%d}-{size}"
    table = markdown(rows, meta)
    stem.with_suffix(".md").write_text(table)
    stem.with_suffix(".json").write_text(to_json(rows, meta))
    why_not = plot(rows, stem.with_suffix(".png"), f"reverse-mode AD, CPU float64 ({size})")
    print(table)
    print(why_not or f"wrote {stem}.md, .json, .png")
    return 0


def _versions(rows: list[Row]) -> dict[str, str]:
    found: dict[str, str] = {}
    for row in rows:
        found |= row.versions
    return found


def _summary(row: Row) -> str:
    def ms(value: float | None) -> str:
        return "—" if value is None else f"{value * 1e3:.3g} ms"

    err = "—" if row.max_rel_error is None else f"{row.max_rel_error:.1e}"
    return (
        f"primal {ms(row.primal_s)}, grad {ms(row.grad_s)} ({row.grad_status}), "
        f"JAX grad {ms(row.jax.get('grad_s'))}, rel err {err}"
    )
