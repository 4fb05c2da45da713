"""What raising to affine makes of each PolyBench kernel: fully affine or not, and why not.

    python -m bench_polybench.raise_survey [--size MINI] [--kernels gemm,lu] [--json out.json]

For each kernel, compiles its kernel function (`kernel_<name>`, see `kernel_function`) with
`-D<SIZE>_DATASET -I bench_polybench/harness`, raises it and prints a table: kernel, fully
affine?, loops raised / total, the reasons for anything not raised, and the raising time; then
how many kernels are fully affine and the longest raising time. `--json` also writes every
kernel's full report. Exit status 1 when a kernel could not be compiled at all.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench_polybench import HARNESS_DIR, KERNELS, KERNELS_DIR, SIZES, kernel_function
from bench_polybench.common import progress_display


@dataclass
class KernelSurvey:
    """What raising made of one kernel's function."""

    kernel: str
    function: str
    fully_affine: bool = False
    loops: int = 0
    loops_raised: int = 0
    reasons: list[str] = field(default_factory=list)
    seconds: float | None = None  # wall time of the raising
    cpu_seconds: float | None = None  # its CPU time (robust to a busy machine)
    error: str | None = None  # the kernel could not be compiled (or the compiler crashed)
    report: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "function": self.function,
            "fully_affine": self.fully_affine,
            "loops": self.loops,
            "loops_raised": self.loops_raised,
            "reasons": self.reasons,
            "ms": None if self.seconds is None else self.seconds * 1000,
            "cpu_ms": None if self.cpu_seconds is None else self.cpu_seconds * 1000,
            "error": self.error,
            "report": self.report,
        }


def survey_kernel(kernel: str, size: str) -> KernelSurvey:
    """Compile and raise one kernel's function; a compile error or a crash is recorded, not raised."""
    import polyflow

    function = kernel_function(kernel)
    row = KernelSurvey(kernel=kernel, function=function)
    options = polyflow.Options(defines=(f"{size}_DATASET",), include_dirs=(str(HARNESS_DIR),))
    try:
        report = polyflow.raise_report(
            KERNELS_DIR / f"{kernel}.c", functions=[function], options=options
        )
    except polyflow.CompileError as exc:
        row.error = str(exc)
        return row
    except Exception as exc:  # a crash of the compiler is a finding of the survey, with its reason
        row.error = f"polyflow crashed: {type(exc).__name__}: {exc}"
        return row
    row.report = report.to_dict()
    if function in report.skipped:
        row.error = f"not compiled by polyflow: {report.skipped[function]}"
        return row
    row.seconds, row.cpu_seconds = report.seconds, report.cpu_seconds
    try:
        fn = report.function(function)
    except KeyError:
        row.error = f"no function '{function}' in the compiled module"
        return row
    row.fully_affine = fn.fully_affine
    row.loops = len(fn.loops)
    row.loops_raised = fn.loops_raised
    row.reasons = fn.reasons
    return row


def _warm_up() -> None:
    """Raise a small loop once, so that the first kernel's time leaves out one-time costs
    (importing the passes, MLIR's first pass managers)."""
    import polyflow

    polyflow.raise_report("void f(int n, double *a) { for (int i = 0; i < n; i++) a[i] = 0; }\n")


def render(rows: list[KernelSurvey], size: str, console: Console) -> None:
    """The table of kernels, then the totals."""
    table = Table(title=f"Raising to affine, {size} dataset")
    table.add_column("kernel", style="bold")
    table.add_column("fully affine")
    table.add_column("loops raised", justify="right")
    table.add_column("not raised because", overflow="fold")
    table.add_column("ms", justify="right")
    table.add_column("CPU ms", justify="right")
    for row in rows:
        affine = (
            "[red]error[/]"
            if row.error
            else ("[green]yes[/]" if row.fully_affine else "[yellow]no[/]")
        )
        reasons = row.error or "; ".join(row.reasons)
        ms = "—" if row.seconds is None else f"{row.seconds * 1000:.1f}"
        cpu = "—" if row.cpu_seconds is None else f"{row.cpu_seconds * 1000:.1f}"
        table.add_row(
            row.kernel, affine, f"{row.loops_raised}/{row.loops}", escape(reasons), ms, cpu
        )
    console.print(table)
    totals = summary(rows)
    slowest = f" ({totals['max_kernel']})" if totals["max_kernel"] else ""
    console.print(
        f"fully affine: {totals['fully_affine']}/{totals['kernels']} kernels; "
        f"loops raised: {totals['loops_raised']}/{totals['loops']}; "
        f"max raising time: {totals['max_ms']:.1f} ms{slowest}, "
        f"max CPU time: {totals['max_cpu_ms']:.1f} ms ({totals['max_cpu_kernel']})"
    )


def summary(rows: list[KernelSurvey]) -> dict[str, Any]:
    """Totals over the kernels: how many fully affine, loops raised, the longest raising time."""
    timed = [r for r in rows if r.seconds is not None]
    slowest = max(timed, key=lambda r: r.seconds or 0.0, default=None)
    hungriest = max(timed, key=lambda r: r.cpu_seconds or 0.0, default=None)
    return {
        "kernels": len(rows),
        "fully_affine": sum(1 for r in rows if r.fully_affine),
        "loops": sum(r.loops for r in rows),
        "loops_raised": sum(r.loops_raised for r in rows),
        "errors": sum(1 for r in rows if r.error),
        "max_ms": (slowest.seconds or 0.0) * 1000 if slowest else 0.0,
        "max_kernel": slowest.kernel if slowest else None,
        "max_cpu_ms": (hungriest.cpu_seconds or 0.0) * 1000 if hungriest else 0.0,
        "max_cpu_kernel": hungriest.kernel if hungriest else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench_polybench.raise_survey", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--size", choices=SIZES, default="MINI", help="dataset (default MINI)")
    parser.add_argument("--kernels", help="comma-separated kernels (default: all 30)")
    parser.add_argument("--json", type=Path, help="also write the survey as JSON here")
    args = parser.parse_args(argv)
    kernels = [k for k in args.kernels.split(",") if k] if args.kernels else list(KERNELS)
    unknown = [k for k in kernels if k not in KERNELS]
    if unknown:
        parser.error(f"unknown kernel(s): {', '.join(unknown)}")

    console = Console()
    _warm_up()
    rows: list[KernelSurvey] = []
    with progress_display(console) as progress:
        task = progress.add_task("raising", total=len(kernels))
        for kernel in kernels:
            progress.update(task, description=f"raising {kernel}")
            rows.append(survey_kernel(kernel, args.size))
            progress.advance(task)
    render(rows, args.size, console)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "size": args.size,
                    "kernels": [r.to_dict() for r in rows],
                    "totals": summary(rows),
                },
                indent=2,
            )
        )
    return 1 if any(r.error for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
