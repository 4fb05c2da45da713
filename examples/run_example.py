"""Build examples/matmul_stencil.c with polyflow and with gcc, run both, compare the times.

    .venv/bin/python examples/run_example.py [--runs 3] [--gcc-only] [--keep DIR]

Both builds target this machine (`-march=native`); each executable runs `--runs` times, the
checksums of every run must agree, and a table shows the median kernel times, the speedup of
each configuration over gcc, and which functions polyflow compiled through MLIR.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

SOURCE = Path(__file__).resolve().parent / "matmul_stencil.c"
GCC_FLAGS = ("-O3", "-march=native")
REL_TOL = 1e-6  # checksums may differ by floating-point reassociation only
TIME_RE = re.compile(r"^time (\w+): ([0-9.eE+-]+)\s*$", re.MULTILINE)
CHECKSUM_RE = re.compile(r"^checksum: (\S+)\s*$", re.MULTILINE)


@dataclass
class Config:
    """One way of building the example, and what its runs measured."""

    name: str
    exe: Path
    build_seconds: float = 0.0
    compiled: list[str] | None = None  # None: not built by polyflow
    fallbacks: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    kernel_times: list[dict[str, float]] = field(default_factory=list)
    checksums: list[float] = field(default_factory=list)

    def median(self, kernel: str | None = None) -> float:
        """Median over runs of one kernel's time, or of the sum of all kernel times."""
        if kernel is None:
            return statistics.median(sum(run.values()) for run in self.kernel_times)
        return statistics.median(run[kernel] for run in self.kernel_times)


class ExampleError(Exception):
    """A build, a run or a check failed; the message says which and why."""


def build_gcc(exe: Path) -> Config:
    cmd = ["gcc", *GCC_FLAGS, str(SOURCE), "-o", str(exe), "-lm"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ExampleError(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    return Config(f"gcc {' '.join(GCC_FLAGS)}", exe, build_seconds=time.perf_counter() - start)


def build_polyflow(exe: Path) -> Config:
    try:
        import polyflow
    except ImportError as exc:
        raise ExampleError(f"{exc}: install it with scripts/setup.sh (`make run` does)") from exc
    try:
        build_program = polyflow.build_program
    except (AttributeError, ImportError) as exc:
        raise ExampleError(
            f"polyflow.build_program is not available ({exc}); use --gcc-only meanwhile"
        ) from exc
    start = time.perf_counter()
    try:
        options = polyflow.Options(opt_level=3, march="native")  # what the example is for
        report = build_program(SOURCE, exe, options=options)
    except polyflow.CompileError as exc:
        raise ExampleError(exc.format()) from exc
    return Config(
        "polyflow -O3 -march=native",
        exe,
        build_seconds=time.perf_counter() - start,
        compiled=list(report.compiled),
        fallbacks=dict(report.fallbacks),
        warnings=list(getattr(report, "warnings", [])),
    )


def run_once(config: Config) -> None:
    proc = subprocess.run([str(config.exe)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ExampleError(f"{config.name}: {config.exe} exited {proc.returncode}:\n{proc.stderr}")
    times = {name: float(value) for name, value in TIME_RE.findall(proc.stdout)}
    checksum = CHECKSUM_RE.search(proc.stdout)
    if not times or checksum is None:
        raise ExampleError(f"{config.name}: unexpected output:\n{proc.stdout}")
    config.kernel_times.append(times)
    config.checksums.append(float(checksum.group(1)))


def check_checksums(configs: list[Config]) -> float:
    reference = configs[0].checksums[0]
    for config in configs:
        for value in config.checksums:
            if not math.isclose(value, reference, rel_tol=REL_TOL):
                raise ExampleError(
                    f"checksum mismatch: {config.name} printed {value!r}, "
                    f"{configs[0].name} printed {reference!r}"
                )
    return reference


def report_table(configs: list[Config], runs: int) -> Table:
    kernels = list(configs[0].kernel_times[0])
    gcc_total = configs[0].median()
    table = Table(title=f"{SOURCE.name}: median of {runs} runs (seconds)")
    table.add_column("configuration")
    table.add_column("build", justify="right")
    for kernel in kernels:
        table.add_column(kernel, justify="right")
    table.add_column("total", justify="right", style="bold")
    table.add_column("speedup vs gcc", justify="right")
    table.add_column("compiled by polyflow")
    for config in configs:
        total = config.median()
        compiled = "—" if config.compiled is None else (", ".join(config.compiled) or "(none)")
        table.add_row(
            config.name,
            f"{config.build_seconds:.2f}",
            *(f"{config.median(k):.4f}" for k in kernels),
            f"{total:.4f}",
            f"{gcc_total / total:.2f}x",
            compiled,
        )
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="runs of each executable (default 3)")
    parser.add_argument(
        "--gcc-only", action="store_true", help="skip polyflow (check the gcc side alone)"
    )
    parser.add_argument(
        "--keep", type=Path, help="build in this directory and keep the executables"
    )
    args = parser.parse_args(argv)
    # Piped output gets a wide table rather than rich's default 80 columns.
    console = Console(width=None if sys.stdout.isatty() else 160)
    err = Console(stderr=True)

    with tempfile.TemporaryDirectory(prefix="polyflow-example-") as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        builders = [("gcc", build_gcc, workdir / "matmul_stencil.gcc")]
        if not args.gcc_only:
            builders.append(("polyflow", build_polyflow, workdir / "matmul_stencil.polyflow"))
        configs: list[Config] = []
        columns = (
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TimeElapsedColumn(),
        )
        try:
            with Progress(*columns, console=err) as progress:
                task = progress.add_task("building", total=len(builders) * (1 + args.runs))
                for label, build, exe in builders:
                    progress.update(task, description=f"building with {label}")
                    configs.append(build(exe))
                    progress.advance(task)
                for config in configs:
                    for i in range(args.runs):
                        progress.update(
                            task, description=f"running {config.name} ({i + 1}/{args.runs})"
                        )
                        run_once(config)
                        progress.advance(task)
            checksum = check_checksums(configs)
        except ExampleError as exc:
            err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            return 1

    console.print(report_table(configs, args.runs))
    console.print(f"checksums agree (relative tolerance {REL_TOL:g}): {checksum:.12e}")
    for config in configs:
        for warning in config.warnings:
            console.print(f"[yellow]{warning}[/]", highlight=False, soft_wrap=True)
        if not config.warnings:
            for function, reason in config.fallbacks.items():
                console.print(f"[yellow]note:[/] {function} was left to the C compiler: {reason}")
    console.print(
        "your own code, the same way: [bold]polyflow build -O3 -march=native file.c -o prog[/]"
        " (a project: [bold]make CC=polyflow-cc CFLAGS='-O3 -march=native'[/];"
        " what happened to each loop: [bold]polyflow explain file.c[/])",
        highlight=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
