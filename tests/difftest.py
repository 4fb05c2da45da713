"""Differential testing of whole C programs: polyflow against gcc.

A program is built twice, by ``gcc -O2`` (the oracle) and by ``polyflow.build_program``; both
executables run, and their stdout and exit status must be identical. A program may start with
header lines that the checks read::

    // polyflow: compiled=f,g      functions that must go through MLIR
    // polyflow: fallback=h        functions that must be left to the C compiler
    // polyflow: args=3 7          command-line arguments for both runs

Used by ``test_differential.py`` (the hand-written corpus in ``tests/programs/``) and by the
random-program tests.
"""

from __future__ import annotations

import difflib
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from polyflow import Options

if TYPE_CHECKING:
    from polyflow.drivers.build import BuildReport

ORACLE_CC = "gcc"
ORACLE_FLAGS: tuple[str, ...] = ("-O2",)
RUN_TIMEOUT_S = 20.0
DIFF_LINES = 40
HEADER_PREFIX = "// polyflow:"
HEADER_KEYS = frozenset({"compiled", "fallback", "args"})


@dataclass(frozen=True)
class ProgramHeader:
    """What a program's ``// polyflow:`` header lines require of a build and a run."""

    compiled: tuple[str, ...] = ()
    fallback: tuple[str, ...] = ()
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunResult:
    """The observable behaviour of one run of an executable."""

    stdout: str
    stderr: str
    returncode: int | None  # None: killed after the timeout

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def _names(value: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in value.split(",") if name.strip())


def read_header(path: Path) -> ProgramHeader:
    """Parse the consecutive ``// polyflow: key=value`` lines at the top of `path`."""
    fields: dict[str, tuple[str, ...]] = {}
    for line in path.read_text().splitlines():
        if not line.startswith(HEADER_PREFIX):
            break
        key, sep, value = line[len(HEADER_PREFIX) :].strip().partition("=")
        key = key.strip()
        if not sep or key not in HEADER_KEYS:
            raise ValueError(f"{path}: malformed header line {line!r}")
        if key in fields:
            raise ValueError(f"{path}: header key {key!r} given twice")
        fields[key] = tuple(value.split()) if key == "args" else _names(value)
    return ProgramHeader(**fields)


def build_with_gcc(
    source: Path,
    output: Path,
    *,
    cc: str = ORACLE_CC,
    flags: tuple[str, ...] = ORACLE_FLAGS,
) -> Path:
    """Build the oracle executable; a failure here is a broken test program, not a polyflow bug."""
    cmd = [cc, *flags, "-o", str(output), str(source), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"oracle build failed: {' '.join(cmd)}\n{proc.stderr}")
    return output


def build_with_polyflow(source: Path, output: Path, options: Options) -> BuildReport:
    """Build `source` with polyflow, in process; CompileError propagates to the caller."""
    from polyflow.drivers.build import build_program

    return build_program(source, output, options=options)


def run_program(
    exe: Path, args: tuple[str, ...] = (), *, timeout: float = RUN_TIMEOUT_S
) -> RunResult:
    """Run `exe` with `args` and capture what it prints and how it exits."""
    try:
        proc = subprocess.run(
            [str(exe), *args], capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        return RunResult(out, err, None)
    return RunResult(proc.stdout, proc.stderr, proc.returncode)


def output_diff(
    expected: str,
    actual: str,
    *,
    expected_name: str = "gcc",
    actual_name: str = "polyflow",
    limit: int = DIFF_LINES,
) -> str:
    """A unified diff of two outputs, cut to its first `limit` lines."""
    lines = list(
        difflib.unified_diff(
            expected.splitlines(),
            actual.splitlines(),
            fromfile=expected_name,
            tofile=actual_name,
            lineterm="",
        )
    )
    if len(lines) > limit:
        lines = [*lines[:limit], f"... ({len(lines) - limit} more diff lines)"]
    return "\n".join(lines)


def compare_runs(expected: RunResult, actual: RunResult) -> list[str]:
    """Differences in behaviour between an oracle run and a polyflow run (empty: identical)."""
    problems: list[str] = []
    if actual.timed_out:
        problems.append(f"the polyflow executable ran past {RUN_TIMEOUT_S:g} s")
    elif actual.returncode != expected.returncode:
        problems.append(
            f"exit status {actual.returncode}, gcc's was {expected.returncode}; "
            f"polyflow stderr: {actual.stderr.strip()[:2000]!r}"
        )
    if actual.stdout != expected.stdout:
        problems.append("stdout differs:\n" + output_diff(expected.stdout, actual.stdout))
    return problems


def compare_report(header: ProgramHeader, report: BuildReport) -> list[str]:
    """Functions the header requires to be compiled (or left to gcc) that the build did not."""
    problems: list[str] = []
    for name in header.compiled:
        if name not in report.compiled:
            reason = report.fallbacks.get(name, "not reported at all")
            problems.append(f"function '{name}' must go through MLIR but did not: {reason}")
    for name in header.fallback:
        if name not in report.fallbacks:
            where = "was compiled through MLIR" if name in report.compiled else "is not reported"
            problems.append(f"function '{name}' must be left to the C compiler but {where}")
    return problems


def check_program_against_gcc(path: Path, workdir: Path, options: Options) -> None:
    """Build `path` with gcc and with polyflow under `options`, run both, fail on any difference.

    Checks, in one assertion that lists every problem found: same exit status, identical
    stdout (a unified diff of the first lines on mismatch), every ``compiled=`` function in
    ``report.compiled`` and every ``fallback=`` function in ``report.fallbacks``.
    """
    header = read_header(path)
    workdir.mkdir(parents=True, exist_ok=True)
    oracle = build_with_gcc(path, workdir / f"{path.stem}.gcc")
    expected = run_program(oracle, header.args)
    if expected.timed_out or expected.returncode != 0:
        raise RuntimeError(
            f"{path.name}: the gcc build itself fails (status {expected.returncode}); fix the program"
        )
    report = build_with_polyflow(path, workdir / f"{path.stem}.polyflow", options)
    actual = run_program(report.output, header.args)
    problems = compare_runs(expected, actual) + compare_report(header, report)
    assert not problems, f"{path.name} (opt_level={options.opt_level}):\n" + "\n".join(problems)


def tiled_bands(report: BuildReport) -> list[dict[str, object]]:
    """The data of each band a build's scheduler tiled (its `tiled` remarks), in order."""
    return [dict(r.data) for r in report.report.select(kind="tiled")]
