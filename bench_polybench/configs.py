"""The compiler configurations the suite compares, how each builds a kernel, and what it needs.

Every configuration builds one kernel file into an executable, with the harness on the include
path and the dataset selected by `-D<SIZE>_DATASET` (and `-lm`). A C compiler configuration is a
command line; a polyflow configuration is a `polyflow.Options`, built by `polyflow.build_program`
in a child process (`python -m bench_polybench.polyflow_build`), so that a crash or a hang of
the compiler is a recorded build failure and builds can run side by side.

A configuration whose tool is not on this machine is reported as `missing: <why>` by
`missing_reason()`, never silently dropped.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bench_polybench import HARNESS_DIR

SETUP_HINT = "bench_polybench/setup.sh installs clang-14 libpolly-14-dev libomp-14-dev"


@dataclass
class BuildResult:
    """One build: did it succeed, how long it took, what ran, and (polyflow) what it compiled."""

    ok: bool
    seconds: float
    command: str
    message: str = ""
    compiled: list[str] | None = None  # polyflow: the functions that went through MLIR
    fallbacks: dict[str, str] | None = None  # polyflow: the others, with the reason
    warnings: list[str] = field(default_factory=list)
    parallel_functions: list[str] | None = None  # polyflow: the functions that fork threads


@dataclass(frozen=True)
class Config:
    """One way of building and running a kernel.

    `cc` configurations run `cc_args + [source, -o, exe, harness flags]`, where `{threads}` in an
    argument is replaced by the thread count; `polyflow` configurations build with
    `polyflow.Options(opt_level=..., march=...)`. Parallel configurations run with
    OMP_NUM_THREADS=threads, the others with 1.
    """

    name: str
    description: str
    kind: Literal["cc", "polyflow"]
    cc_args: tuple[str, ...] = ()
    opt_level: int = 2
    march: str = "native"
    parallel: bool = False
    # The tiny program that checks that the tool works: its command (cc_args, formatted) must
    # compile, link and run it. Also a hint printed when it does not.
    hint: str = ""
    # A configuration whose program is often the same as this one's (see sharing.py): when it
    # is, for a kernel, this configuration's runs are not repeated but shared.
    twin: str | None = None
    # Only run kernels where GCC's auto-parallelizer parallelizes a loop of the kernel.
    only_if_gcc_parallelizes: bool = False
    # The floating-point contract: C's order (False), or -ffast-math (floats reassociated; the
    # configuration is compared with gcc -ffast-math and validated at a looser tolerance).
    fast_math: bool = False

    def threads(self, requested: int) -> int:
        return requested if self.parallel else 1

    def env(self, threads: int) -> dict[str, str]:
        """The environment a kernel built this way runs in."""
        return {**os.environ, "OMP_NUM_THREADS": str(self.threads(threads))}

    def command(self, source: Path, exe: Path, size: str, threads: int) -> list[str]:
        """The build command of a `cc` configuration."""
        args = [arg.format(threads=threads) for arg in self.cc_args]
        return [*args, str(source), "-o", str(exe), *harness_flags(size), "-lm"]

    def options(self, size: str) -> Any:
        """The `polyflow.Options` of a `polyflow` configuration."""
        import polyflow

        return polyflow.Options(
            opt_level=self.opt_level,
            march=self.march,
            include_dirs=(str(HARNESS_DIR),),
            defines=(f"{size}_DATASET",),
            fast_math=self.fast_math,
        )

    def describe(self, threads: int) -> str:
        """How this configuration builds and runs, in one line (for reports)."""
        if self.kind == "cc":
            build = " ".join(arg.format(threads=threads) for arg in self.cc_args)
        else:
            fast = ", fast_math=True" if self.fast_math else ""
            build = f'polyflow Options(opt_level={self.opt_level}, march="{self.march}"{fast})'
        return f"{build}; OMP_NUM_THREADS={self.threads(threads)}"

    def build(
        self, source: Path, exe: Path, size: str, threads: int, timeout: float
    ) -> BuildResult:
        """Build `source` into `exe`; failures (and timeouts) come back as a failed BuildResult."""
        if self.kind == "cc":
            cmd = self.command(source, exe, size, threads)
            return _run_build(cmd, shlex.join(cmd), timeout)
        options = self.options(size)
        cmd = [
            sys.executable,
            "-m",
            "bench_polybench.polyflow_build",
            str(source),
            str(exe),
            options.model_dump_json(),
        ]
        described = (
            f"polyflow.build_program({source.name}, Options(opt_level={self.opt_level}, "
            f'march="{self.march}", defines=("{size}_DATASET",)))'
        )
        result = _run_build(cmd, described, timeout)
        if not result.ok:
            return result
        try:
            report = json.loads(result.message)
        except json.JSONDecodeError:
            return BuildResult(False, result.seconds, described, "unreadable build report")
        return BuildResult(
            True,
            result.seconds,
            described,
            compiled=list(report["compiled"]),
            fallbacks=dict(report["fallbacks"]),
            warnings=list(report["warnings"]),
            parallel_functions=list(report.get("parallel_functions", [])),
        )


def harness_flags(size: str) -> list[str]:
    return [f"-I{HARNESS_DIR}", f"-D{size}_DATASET"]


def _run_build(cmd: list[str], described: str, timeout: float) -> BuildResult:
    """Run a build command; on success `message` is its stdout, on failure the reason."""
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return BuildResult(
            False, time.perf_counter() - start, described, f"build timed out after {timeout:g} s"
        )
    except OSError as exc:
        return BuildResult(False, time.perf_counter() - start, described, str(exc))
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        why = (proc.stderr.strip() or proc.stdout.strip() or "(no output)").splitlines()
        tail = "\n".join(why[-15:])
        return BuildResult(False, seconds, described, f"exit {proc.returncode}: {tail}")
    return BuildResult(True, seconds, described, proc.stdout)


REFERENCE = Config(
    "gcc-O2",
    "the reference for validation",
    "cc",
    ("gcc", "-O2"),
)

def _under_fast_math(config: Config, description: str) -> Config:
    """`config` under -ffast-math, named `<name>-fast` (its twin too): cc gets the flag after
    -march, polyflow `fast_math=True`."""
    args = config.cc_args
    if args:
        at = args.index("-march=native") + 1
        args = (*args[:at], "-ffast-math", *args[at:])
    twin = f"{config.twin}-fast" if config.twin else None
    return dataclasses.replace(
        config,
        name=f"{config.name}-fast",
        description=description,
        cc_args=args,
        twin=twin,
        fast_math=True,
    )


_STRICT = {
    c.name: c
    for c in (
        Config("gcc", "GCC, sequential", "cc", ("gcc", "-O3", "-march=native")),
        Config(
            "polly",
            "clang 14 with Polly's polyhedral optimizer, sequential",
            "cc",
            ("clang-14", "-O3", "-march=native", "-mllvm", "-polly"),
            hint=SETUP_HINT,
        ),
        Config(
            "polly-par",
            "clang 14 with Polly, parallel (OpenMP)",
            "cc",
            (
                "clang-14",
                "-O3",
                "-march=native",
                "-mllvm",
                "-polly",
                "-mllvm",
                "-polly-parallel",
                "-fopenmp",
            ),
            parallel=True,
            hint=SETUP_HINT,
            twin="polly",
        ),
        Config(
            "gcc-omp",
            "GCC's auto-parallelizer (libgomp)",
            "cc",
            ("gcc", "-O3", "-march=native", "-ftree-parallelize-loops={threads}"),
            parallel=True,
            only_if_gcc_parallelizes=True,
        ),
        Config(
            "polyflow-base",
            "polyflow at -O2: MLIR and LLVM only, no polyhedral stages",
            "polyflow",
            opt_level=2,
        ),
        Config("polyflow", "polyflow at -O3, one thread", "polyflow", opt_level=3),
        Config(
            "polyflow-par",
            "polyflow at -O3, parallel (OpenMP)",
            "polyflow",
            opt_level=3,
            parallel=True,
            twin="polyflow",
        ),
    )
}
# the same peers under -ffast-math: floating-point sums may be reordered
_FAST = [
    _under_fast_math(
        _STRICT["gcc"],
        "GCC with -ffast-math, sequential (the baseline of the fast-math configurations)",
    ),
    _under_fast_math(_STRICT["polly"], "clang 14 with Polly and -ffast-math, sequential"),
    _under_fast_math(
        _STRICT["polly-par"], "clang 14 with Polly and -ffast-math, parallel (OpenMP)"
    ),
    _under_fast_math(_STRICT["polyflow"], "polyflow at -O3 -ffast-math, one thread"),
    _under_fast_math(
        _STRICT["polyflow-par"],
        "polyflow at -O3 -ffast-math, parallel (OpenMP; float reductions too)",
    ),
]
CONFIGS: dict[str, Config] = {**_STRICT, **{c.name: c for c in _FAST}}

PROBE_SOURCE = """#include <math.h>
#include <stdio.h>
static double a[4096];
int main(void) {
  for (int i = 0; i < 4096; i++) a[i] = sqrt((double)i);
  double s = 0.0;
  for (int i = 0; i < 4096; i++) s += a[i];
  printf("%g\\n", s);
  return 0;
}
"""


@functools.cache
def missing_reason(name: str) -> str | None:
    """Why configuration `name` (or the reference) cannot run here, or None when it can."""
    config = REFERENCE if name == REFERENCE.name else CONFIGS[name]
    if config.kind == "polyflow":
        return _polyflow_missing()
    tool = config.cc_args[0]
    if shutil.which(tool) is None:
        return f"{tool} not found" + (f" ({config.hint})" if config.hint else "")
    with tempfile.TemporaryDirectory(prefix="polyflow-bench-probe-") as tmp:
        source, exe = Path(tmp) / "probe.c", Path(tmp) / "probe"
        source.write_text(PROBE_SOURCE)
        cmd = [arg.format(threads=2) for arg in config.cc_args]
        cmd += [str(source), "-o", str(exe), "-lm"]
        built = _run_build(cmd, shlex.join(cmd), 120)
        if not built.ok:
            first = _first_error(built.message)
            return f"`{shlex.join(config.cc_args)}` cannot build a test program: {first}" + (
                f" ({config.hint})" if config.hint else ""
            )
        try:
            ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"its test program does not run: {exc}"
        if ran.returncode != 0:
            return f"its test program exits {ran.returncode}: {ran.stderr.strip()[:200]}"
    return None


def _first_error(message: str) -> str:
    message = re.sub(r"^exit -?\d+: ", "", message)
    lines = [line for line in message.splitlines() if line.strip()]
    for line in lines:
        if "error" in line or "cannot find" in line:
            return line.strip()
    return lines[-1].strip() if lines else message


@functools.cache
def _polyflow_missing() -> str | None:
    cmd = [sys.executable, "-c", "import polyflow.drivers.build"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot import polyflow: {exc}"
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return f"cannot import polyflow: {lines[-1] if lines else proc.returncode}"
    return None


def compiler_versions() -> dict[str, list[str]]:
    """The version commands of every compiler the configurations use, for machine_info()."""
    return {
        "gcc": ["gcc", "--version"],
        "clang-14": ["clang-14", "--version"],
        "polyflow": [sys.executable, "-m", "bench_polybench.polyflow_build", "--version"],
    }
