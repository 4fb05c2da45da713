"""Runs the suite can skip: programs another configuration already measures, and gcc-omp where
GCC's auto-parallelizer does nothing to the kernel.

A LARGE run spends most of its hour running programs. Two configurations share a kernel's
measurement (the second is not run; its cell takes the first one's times) only when the code its
timed region runs is provably the same:

- C compilers (polly-par and its twin polly): the assembly of the whole program (`-S`) is the
  same line for line, once the `.file` and `.ident` lines (file name, compiler banner) are
  dropped. Then the program starts no threads either, so the thread count cannot matter.
- polyflow (polyflow-par and its twin polyflow, built with the same options): the executables
  are the same byte for byte, and the kernel function starts no OpenMP threads (the build report
  lists the functions that do), so the timed region runs the same instructions on one thread.

gcc-omp is run where relevant: where GCC's auto-parallelizer parallelizes a loop of the kernel
function (its `-fopt-info-loop-optimized` report names a line of it). Elsewhere its kernel is
sequential GCC code, and the cell says "not relevant" rather than timing gcc again.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from bench_polybench.configs import BuildResult, Config

_KERNEL_DEF = re.compile(r"^[ \t]*(?:static\s+)?(?:inline\s+)?void\s+(kernel_\w+)\s*\(", re.M)


def kernel_function(text: str) -> tuple[str, int, int] | None:
    """The kernel function of a kernel file: its name and its first and last lines (1-based),
    or None when the file has no `void kernel_*(` definition (declarations are skipped)."""
    for match in _KERNEL_DEF.finditer(text):
        body = _body_end(text, match.end())
        if body is not None:
            first = text.count("\n", 0, match.start()) + 1
            return match.group(1), first, text.count("\n", 0, body) + 1
    return None


def _body_end(text: str, start: int) -> int | None:
    """Where the function whose parameter list opens before `start` ends (its closing brace),
    or None when it is only declared."""
    depth, in_body = 0, False
    for offset in range(start, len(text)):
        char = text[offset]
        if char == ";" and not in_body:
            return None
        if char == "{":
            depth, in_body = depth + 1, True
        elif char == "}" and in_body:
            depth -= 1
            if depth == 0:
                return offset
    return None


# Seconds one of the extra compilations here may take.
COMPILE_TIMEOUT = 300.0


def _compile(
    config: Config, source: Path, output: Path, size: str, threads: int, extra: list[str]
) -> subprocess.CompletedProcess[str] | None:
    """`config`'s build command for `source`, not linked (`extra` says how far it goes: `-S`,
    `-c`...) and with `extra` flags; None when it fails or cannot run."""
    cmd = [arg for arg in config.command(source, output, size, threads) if arg != "-lm"] + extra
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc if proc.returncode == 0 else None


def normalized_assembly(config: Config, source: Path, size: str, threads: int) -> str | None:
    """The assembly `config` (a C compiler) makes of `source`, without the lines that name the
    file or the compiler; None when it cannot be produced."""
    with tempfile.TemporaryDirectory(prefix="polyflow-bench-asm-") as tmp:
        asm = Path(tmp) / "kernel.s"
        if _compile(config, source, asm, size, threads, ["-S"]) is None or not asm.is_file():
            return None
        lines = asm.read_text().splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith((".file", ".ident")))


def shared_reason(
    config: Config,
    twin: Config,
    built: BuildResult,
    twin_built: BuildResult,
    source: Path,
    exe: Path,
    twin_exe: Path,
    size: str,
    threads: int,
) -> str | None:
    """Why `config`'s runs of the kernel in `source` would measure the same code as `twin`'s
    (so they are shared), or None when they might not."""
    if not (built.ok and twin_built.ok) or config.kind != twin.kind:
        return None
    if config.kind == "cc":
        mine = normalized_assembly(config, source, size, threads)
        theirs = normalized_assembly(twin, source, size, threads)
        if mine is None or mine != theirs:
            return None
        return f"same assembly as {twin.name} (-S, without .file/.ident): runs shared"
    found = kernel_function(source.read_text())
    if found is None or built.parallel_functions is None:
        return None
    name = found[0]
    if name in built.parallel_functions or not _same_bytes(exe, twin_exe):
        return None
    return f"same executable as {twin.name}, and {name} starts no threads: runs shared"


def _same_bytes(a: Path, b: Path) -> bool:
    try:
        return a.read_bytes() == b.read_bytes()
    except OSError:
        return False


_PARALLELIZED = re.compile(r":(\d+):\d+: optimized: parallelizing (?:outer|inner) loop")


def gcc_parallelized_lines(
    config: Config, source: Path, size: str, threads: int
) -> list[int] | None:
    """The source lines of the loops GCC's auto-parallelizer parallelizes in `source`, built as
    `config` builds it; None when GCC cannot say."""
    with tempfile.TemporaryDirectory(prefix="polyflow-bench-parloops-") as tmp:
        flags = ["-c", "-fopt-info-loop-optimized"]
        proc = _compile(config, source, Path(tmp) / "kernel.o", size, threads, flags)
    if proc is None:
        return None
    return [int(m.group(1)) for m in _PARALLELIZED.finditer(proc.stderr)]


def not_relevant_reason(config: Config, source: Path, size: str, threads: int) -> str | None:
    """Why `config` (GCC's auto-parallelizer) is not relevant to this kernel: the reason when it
    parallelizes no loop of the kernel function, None when it does (or cannot tell)."""
    found = kernel_function(source.read_text())
    lines = gcc_parallelized_lines(config, source, size, threads)
    if found is None or lines is None:
        return None
    name, first, last = found
    if any(first <= line <= last for line in lines):
        return None
    return f"GCC's auto-parallelizer parallelizes no loop of {name}: not run"
