"""Helpers shared by the benchmark runners: `python -m bench_polybench` and scripts/baseline_perf.py.

Parsing the `time: <seconds>` line that every benchmark program prints, the progress display,
number formatting for tables, and a description of the machine and its compilers.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

TIME_RE = re.compile(r"^time: ([0-9.eE+-]+)\s*$", re.MULTILINE)


def parse_time(text: str) -> float | None:
    """The seconds of the first `time: <seconds>` line of a program's output, or None."""
    match = TIME_RE.search(text)
    if match is None:
        return None
    try:
        return float(match.group(1))
    except ValueError:
        return None


def progress_display(console: Console) -> Progress:
    """A rich progress display: spinner, description, bar, count and elapsed time."""
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", style="bold"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
    )


def fmt(value: float | None, spec: str) -> str:
    """`value` formatted with `spec`, or an em dash when there is none."""
    return "—" if value is None else format(value, spec)


def tool_version(*cmd: str) -> str | None:
    """The first line of `cmd` (e.g. `gcc --version`), or None when it cannot run."""
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (proc.stdout or proc.stderr).strip().splitlines()
    return lines[0].strip() if proc.returncode == 0 and lines else None


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (platform.processor() elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine_info(compilers: dict[str, list[str]] | None = None) -> dict[str, object]:
    """CPU model, core count, OS, Python, OMP_NUM_THREADS, and the version of each compiler.

    `compilers` maps a name to the command that prints its version (default: gcc only).
    """
    compilers = compilers if compilers is not None else {"gcc": ["gcc", "--version"]}
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "compilers": {name: tool_version(*cmd) for name, cmd in compilers.items()},
    }
