"""Performance baseline: the programs of examples/baseline/, built with gcc -O3 and with polyflow.

    .venv/bin/python scripts/baseline_perf.py [--runs 5] [--json out.json] [--only gemm,syrk]
                                              [--gcc-only] [--dry-run] [--strict]

Every program times only its kernel call and prints `time: <seconds>` and `checksum: <value>`.
Each is built twice, with `gcc -O3` and with `polyflow.build_program` at default options (both
for generic x86-64), and the two executables run alternately `--runs` times. The report, a
Markdown table on stdout, gives the median times, the ratio polyflow/gcc (below 1: polyflow is
faster), whether the ratio lies within ±15%, whether the checksums agree, and which functions
polyflow compiled through MLIR. Progress goes to stderr.

Exit status: 1 if a build or a run failed or the checksums disagree (and, with --strict, if a
ratio lies outside the tolerance); 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

from bench_polybench.common import fmt, machine_info, parse_time, progress_display

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS_DIR = ROOT / "examples" / "baseline"
GCC_FLAGS = ("-O3",)
CHECKSUM_REL_TOL = 1e-6  # parallel reductions may reassociate floating-point sums
CHECKSUM_RE = re.compile(r"^checksum: (\S+)\s*$", re.MULTILINE)


class BenchError(Exception):
    """A build or a run failed; the message says which and why."""


@dataclass
class Side:
    """One build of one program (gcc or polyflow) and its measurements."""

    build_seconds: float = 0.0
    times: list[float] = field(default_factory=list)
    checksums: list[str] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.times)


@dataclass
class Result:
    """Everything measured for one program."""

    name: str
    gcc: Side = field(default_factory=Side)
    polyflow: Side | None = None
    compiled: list[str] = field(default_factory=list)
    fallbacks: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def ratio(self) -> float | None:
        if self.error or self.polyflow is None or not self.polyflow.times:
            return None
        return self.polyflow.median / self.gcc.median

    def within(self, tolerance: float) -> bool | None:
        ratio = self.ratio
        return None if ratio is None else abs(ratio - 1.0) <= tolerance

    @property
    def checksums_agree(self) -> bool | None:
        if self.polyflow is None or not self.gcc.checksums or not self.polyflow.checksums:
            return None
        reference = self.gcc.checksums[0]
        return all(
            _same_checksum(value, reference)
            for value in [*self.gcc.checksums, *self.polyflow.checksums]
        )


def _same_checksum(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return math.isclose(float(a), float(b), rel_tol=CHECKSUM_REL_TOL)
    except ValueError:
        return False


def build_gcc(source: Path, exe: Path) -> float:
    cmd = ["gcc", *GCC_FLAGS, str(source), "-o", str(exe), "-lm"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(cmd)} failed:\n{proc.stderr.strip()}")
    return time.perf_counter() - start


def build_polyflow(source: Path, exe: Path, result: Result) -> float:
    try:
        import polyflow

        build_program = polyflow.build_program
    except (AttributeError, ImportError) as exc:
        raise BenchError(f"polyflow.build_program is not available: {exc}") from exc
    start = time.perf_counter()
    try:
        report = build_program(source, exe, options=polyflow.Options())
    except polyflow.CompileError as exc:
        raise BenchError(exc.format()) from exc
    except Exception as exc:  # a crash in the compiler is reported, and the others still run
        raise BenchError(f"polyflow crashed: {type(exc).__name__}: {exc}") from exc
    result.compiled = list(report.compiled)
    result.fallbacks = dict(report.fallbacks)
    result.warnings = list(getattr(report, "warnings", []))
    return time.perf_counter() - start


def run_once(label: str, exe: Path, side: Side) -> None:
    proc = subprocess.run([str(exe)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BenchError(f"{label}: {exe.name} exited {proc.returncode}: {proc.stderr.strip()}")
    seconds = parse_time(proc.stdout)
    checksum = CHECKSUM_RE.search(proc.stdout)
    if seconds is None or checksum is None:
        raise BenchError(f"{label}: unexpected output: {proc.stdout.strip()!r}")
    side.times.append(seconds)
    side.checksums.append(checksum.group(1))


def measure(
    source: Path, workdir: Path, *, runs: int, gcc_only: bool, progress: Progress
) -> Result:
    name = source.stem
    result = Result(name)
    steps = (1 if gcc_only else 2) * (1 + runs)
    task = progress.add_task(name, total=steps)
    try:
        progress.update(task, description=f"{name}: gcc {' '.join(GCC_FLAGS)}")
        gcc_exe = workdir / f"{name}.gcc"
        result.gcc.build_seconds = build_gcc(source, gcc_exe)
        progress.advance(task)
        sides: list[tuple[str, Path, Side]] = [("gcc", gcc_exe, result.gcc)]
        if not gcc_only:
            progress.update(task, description=f"{name}: polyflow")
            result.polyflow = Side()
            poly_exe = workdir / f"{name}.polyflow"
            try:
                result.polyflow.build_seconds = build_polyflow(source, poly_exe, result)
                sides.append(("polyflow", poly_exe, result.polyflow))
            except BenchError as exc:  # still time gcc, for the table
                result.error = str(exc)
                progress.update(task, total=1 + 1 + runs)
            progress.advance(task)
        for i in range(runs):  # alternate the two executables, so drift hits both alike
            for label, exe, side in sides:
                progress.update(task, description=f"{name}: run {i + 1}/{runs} ({label})")
                run_once(label, exe, side)
                progress.advance(task)
        progress.update(task, description=f"{name}: {'[red]failed[/]' if result.error else 'done'}")
    except BenchError as exc:
        result.error = str(exc)
        progress.update(task, description=f"{name}: [red]failed[/]")
    return result


def _yes_no(value: bool | None, yes: str = "yes", no: str = "no") -> str:
    return "—" if value is None else (yes if value else no)


def markdown(results: list[Result], *, runs: int, tolerance: float) -> str:
    pct = f"±{tolerance * 100:.0f}%"
    lines = [
        f"Median of {runs} runs, kernel time only, seconds; gcc {' '.join(GCC_FLAGS)} vs polyflow "
        f"default options; ratio = polyflow / gcc (below 1: polyflow faster).",
        "",
        f"| program | gcc {' '.join(GCC_FLAGS)} | polyflow | polyflow/gcc | within {pct} "
        "| checksums | compiled by polyflow |",
        "|---|---:|---:|---:|---|---|---|",
    ]
    for r in results:
        ratio = r.ratio
        within = r.within(tolerance)
        if within is False and ratio is not None:
            within_text = "no (faster)" if ratio < 1.0 else "no (slower)"
        else:
            within_text = _yes_no(within)
        built = r.polyflow is not None and bool(r.polyflow.times)
        compiled = (", ".join(r.compiled) or "(none)") if built else "—"
        lines.append(
            f"| {r.name} | {fmt(r.gcc.median if r.gcc.times else None, '.4f')} "
            f"| {fmt(r.polyflow.median if r.polyflow and r.polyflow.times else None, '.4f')} "
            f"| {fmt(ratio, '.2f')} | {within_text} "
            f"| {_yes_no(r.checksums_agree, 'agree', '**differ**')} | {compiled} |"
        )
    notes = [f"- {r.name}: **error**: {r.error}" for r in results if r.error]
    for r in results:  # the compiler's own warnings say the most; else the bare fallbacks
        if r.warnings:
            notes += [f"- {r.name}: {warning}" for warning in r.warnings]
        else:
            notes += [
                f"- {r.name}: `{f}` left to the C compiler: {why}" for f, why in r.fallbacks.items()
            ]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="runs of each executable (default 5)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the results as JSON")
    parser.add_argument("--only", help="comma-separated program names (default: all)")
    parser.add_argument(
        "--tolerance", type=float, default=0.15, help="ratio tolerance (default 0.15)"
    )
    parser.add_argument("--gcc-only", action="store_true", help="build and time with gcc only")
    parser.add_argument("--dry-run", action="store_true", help="list what would run, run nothing")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a ratio is outside")
    parser.add_argument("--keep", type=Path, help="build in this directory and keep the programs")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    sources = sorted(PROGRAMS_DIR.glob("*.c"))
    if args.only:
        wanted = {name.strip() for name in args.only.split(",") if name.strip()}
        unknown = wanted - {s.stem for s in sources}
        if unknown:
            parser.error(f"unknown program(s): {', '.join(sorted(unknown))}")
        sources = [s for s in sources if s.stem in wanted]
    if not sources:
        parser.error(f"no programs in {PROGRAMS_DIR}")

    if args.dry_run:
        for source in sources:
            print(f"{source.stem}: gcc {' '.join(GCC_FLAGS)} {source.relative_to(ROOT)} -lm")
            if not args.gcc_only:
                print(f"{source.stem}: polyflow.build_program({source.relative_to(ROOT)})")
            print(f"{source.stem}: {args.runs} runs of each, alternating")
        return 0

    err = Console(stderr=True)
    with tempfile.TemporaryDirectory(prefix="polyflow-baseline-") as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        with progress_display(err) as bar:
            results = [
                measure(source, workdir, runs=args.runs, gcc_only=args.gcc_only, progress=bar)
                for source in sources
            ]

    print(markdown(results, runs=args.runs, tolerance=args.tolerance))
    if args.json:
        payload = {
            "runs": args.runs,
            "tolerance": args.tolerance,
            "gcc_flags": list(GCC_FLAGS),
            "machine": machine_info(),
            "results": [
                {
                    **asdict(r),
                    "gcc_median": r.gcc.median if r.gcc.times else None,
                    "polyflow_median": r.polyflow.median
                    if r.polyflow and r.polyflow.times
                    else None,
                    "ratio": r.ratio,
                    "within_tolerance": r.within(args.tolerance),
                    "checksums_agree": r.checksums_agree,
                }
                for r in results
            ],
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
        err.print(f"wrote {args.json}")

    failed = any(r.error or r.checksums_agree is False for r in results)
    outside = any(r.within(args.tolerance) is False for r in results)
    return 1 if failed or (args.strict and outside) else 0


if __name__ == "__main__":
    sys.exit(main())
