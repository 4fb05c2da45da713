"""What is tuned: a kernel that a worker can build with some options, run, time and check.

A task is plain data (it travels to worker processes and Dask workers by pickle) with the
steps a worker runs (`polyflow/tune/worker.py`): `build(options, scratch)` compiles a candidate,
`run(built, cores, timeout)` runs it once and returns its time and output, `reference_of(outputs,
rtol)` makes the reference of the default build's runs, and `compare(output, reference, rtol)`
says how a candidate's output differs from it (None: it does not). Three kinds:

* `CProgram`: a C file with `main`, built as `polyflow build` builds it. The time is the time
  spent in the tuned functions, measured by a shim linked around their compiled entries
  (`-Wl,--wrap`), so that the program's set-up and output do not dilute it; the output is what
  the program prints on stdout, compared number by number, except the words that differed
  between the default build's own runs (a time it prints).
* `CFunction`: a C function as `compile_c` compiles it, called on example arguments
  (`CompiledFunction.autotune`); the output is the arrays after the call and its result.
* `TcKernel`: a TC definition and its arguments (given arrays, or shapes and dtypes from which
  the worker makes seeded random ones); the time is the best of calls of the compiled kernel,
  the output its result arrays.
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from polyflow.errors import CompileError
from polyflow.options import Options

# What a worker's build returns: the candidate ready to run, and facts about its compile.
Built = Any


@dataclass
class Measured:
    """One run of a built candidate: its time in seconds and its output."""

    seconds: float
    output: Any


class RunFailed(Exception):
    """A candidate's run crashed, exited non-zero or timed out (the message says which)."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


@dataclass
class CompileFacts:
    """What the default build's compile said that shapes the option space: the kinds of
    remarks of the polyhedral stage (micro-kernel, tiled, parallel, wavefront, ...), the
    depth of the deepest loop nest and the constant loop extents."""

    remark_kinds: set[str] = field(default_factory=set)
    depth: int = 0
    extents: set[int] = field(default_factory=set)


# ----- C programs

# The shim's clock, and its taking of the cores: the job holds them shared while the program
# sets up (polyflow/tune/worker.py) and passes the lock files' descriptors; at the first call
# of a tuned function the program takes them exclusively (through the gate, so that no new
# shared holder comes in while it waits), keeps them to its end, and stops the compiles
# registered in the worker's COMPILING directory (the job lets them go on when it ends).
_TIMING_SHIM_HEAD = """#define _GNU_SOURCE /* flock, kill, getpgrp under any -std= */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>
static double polyflow_tune_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static unsigned long long polyflow_tune_started(long pid) {
  char path[64], text[2048];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  char *p = strrchr(text, ')');
  if (!p) return 0;
  p += 2;
  for (int field = 3; *p && field < 22; p++)
    if (*p == ' ') field++;
  return strtoull(p, NULL, 10);
}
/* A stopped group's threads take a moment to stop: the signal wakes one thread (a job's
   waiting main thread, which may wait for a core) that then stops the others, while its
   compile thread runs on. Wait (at most 0.1 s) until every thread of the leader is stopped. */
static void polyflow_tune_wait_stopped(long pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/task", pid);
  for (int attempt = 0; attempt < 200; attempt++) {
    DIR *d = opendir(path);
    if (!d) return;
    int running = 0;
    struct dirent *e;
    while (!running && (e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      char stat_path[128], text[1024];
      snprintf(stat_path, sizeof stat_path, "%s/%s/stat", path, e->d_name);
      FILE *f = fopen(stat_path, "r");
      if (!f) continue;
      size_t n = fread(text, 1, sizeof text - 1, f);
      fclose(f);
      text[n] = 0;
      char *p = strrchr(text, ')');
      if (p && p[1] == ' ' && p[2] != 'T' && p[2] != 't' && p[2] != 'Z' && p[2] != 'X') running = 1;
    }
    closedir(d);
    if (!running) return;
    usleep(500);
  }
}
static void polyflow_tune_stop_compiles(void) {
  const char *dir = getenv("POLYFLOW_TUNE_COMPILING");
  DIR *d = dir ? opendir(dir) : NULL;
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char *end, path[4096];
    long pgid = strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end || pgid <= 1 || pgid == (long)getpgrp()) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    unsigned long long started = 0;
    int read = fscanf(f, "%llu", &started);
    fclose(f);
    if (read == 1 && started && polyflow_tune_started(pgid) == started &&
        kill(-(pid_t)pgid, SIGSTOP) == 0)
      polyflow_tune_wait_stopped(pgid);
  }
  closedir(d);
}
static int polyflow_tune_exclusive;
static void polyflow_tune_take_cores(void) {
  if (__atomic_exchange_n(&polyflow_tune_exclusive, 1, __ATOMIC_ACQ_REL)) return;
  const char *fds = getenv("POLYFLOW_TUNE_LOCK_FDS");
  const char *gate_path = getenv("POLYFLOW_TUNE_GATE");
  if (!fds || !*fds || !gate_path) return;
  int list[1024], n = 0;
  for (const char *p = fds; *p && n < 1024;) {
    char *end;
    long fd = strtol(p, &end, 10);
    if (end == p) break;
    list[n++] = (int)fd;
    p = *end == ',' ? end + 1 : end;
  }
  for (int i = 0; i < n; i++) flock(list[i], LOCK_UN);
  int gate = open(gate_path, O_RDWR | O_CREAT, 0666);
  if (gate >= 0) while (flock(gate, LOCK_EX) != 0 && errno == EINTR) {}
  for (int i = 0; i < n; i++) while (flock(list[i], LOCK_EX) != 0 && errno == EINTR) {}
  polyflow_tune_stop_compiles();
  if (gate >= 0) { flock(gate, LOCK_UN); close(gate); }
}
"""


@dataclass
class CProgram:
    """A C program to tune: its text and file name, the base options (the build's own: -O3,
    defines, ...; `functions` as `polyflow build --functions`), the functions whose time is the
    fitness (None: every function compiled through MLIR), and its command-line arguments."""

    source: str
    filename: str
    options: dict[str, Any]
    timed: tuple[str, ...] | None = None
    args: tuple[str, ...] = ()
    source_dir: str | None = None

    kind = "c"
    # its timing shim takes the cores exclusively when the timed part starts (worker.py)
    takes_cores_itself = True

    @property
    def entry(self) -> str:
        return ",".join(self.timed or ())

    def base_options(self) -> Options:
        return Options(**self.options)

    def build(self, options: Options, scratch: Path) -> Built:
        """Build the program with `options` in `scratch`, its tuned functions wrapped by the
        timing shim; (executable, compile seconds, facts)."""
        from polyflow.drivers.build import build_program
        from polyflow.drivers.c_splice import prototype
        from polyflow.drivers.sources import c_module

        include = list(options.include_dirs)
        if self.source_dir and Path(self.source_dir).is_dir():
            include.append(self.source_dir)  # the program's own headers
        options = options.model_copy(update={"include_dirs": tuple(include)})
        source = scratch / Path(self.filename).name
        if source.suffix != ".c":
            source = source.with_suffix(".c")
        source.write_text(self.source)
        start = time.perf_counter()
        cmod = c_module(self.source, str(source), options, scratch, only=options.functions)
        timed = list(self.timed) if self.timed else sorted(cmod.functions)
        missing = [name for name in timed if name not in cmod.functions]
        if missing:
            why = "; ".join(
                f"{name}: {cmod.why_skipped(name)[1]}" if name in cmod.skipped else f"{name}: not defined"
                for name in missing
            )
            raise CompileError(f"cannot tune what polyflow does not compile ({why})", file=self.filename)
        shim = scratch / "polyflow_tune_timer.c"
        lines = [_TIMING_SHIM_HEAD]
        wraps = []
        for index, name in enumerate(timed):
            fn = cmod.functions[name]
            declared = prototype(fn, cmod.globals).removeprefix("extern ").rstrip(";")
            entry = declared.split("(", 1)[0].split()[-1]  # __polyflow_<name>
            params = declared.split("(", 1)[1].rsplit(")", 1)[0]
            ret = declared.split("(", 1)[0].rsplit(entry, 1)[0].strip()
            names = [] if params.strip() == "void" else [f"a{i}" for i in range(params.count(",") + 1)]
            typed = ", ".join(
                f"{p.strip()} {n}" for p, n in zip(params.split(","), names, strict=False)
            ) or "void"
            call = f"__real_{entry}({', '.join(names)})"
            take = "if (!polyflow_tune_exclusive) polyflow_tune_take_cores(); "
            body = take + (
                f"double t0 = polyflow_tune_now(); {call}; "
                if ret == "void"
                else f"double t0 = polyflow_tune_now(); {ret} r = {call}; "
            )
            body += f"polyflow_tune_seconds[{index}] += polyflow_tune_now() - t0; "
            body += f"polyflow_tune_calls[{index}] += 1;"
            body += "" if ret == "void" else " return r;"
            lines.append(f"{ret} __real_{entry}({params});")
            lines.append(f"{ret} __wrap_{entry}({typed}) {{ {body} }}")
            wraps.append(f"-Wl,--wrap={entry}")
        count = max(len(timed), 1)
        lines.insert(1, f"static double polyflow_tune_seconds[{count}];\nstatic long polyflow_tune_calls[{count}];")
        names_c = ", ".join(f'"{n}"' for n in timed) or '""'
        lines.append(
            "__attribute__((destructor)) static void polyflow_tune_report(void) {\n"
            f'  static const char *names[] = {{{names_c}}};\n'
            '  const char *path = getenv("POLYFLOW_TUNE_TIMES");\n'
            "  FILE *out = path ? fopen(path, \"w\") : NULL;\n"
            "  if (!out) return;\n"
            f"  for (int i = 0; i < {len(timed)}; i++)\n"
            '    fprintf(out, "%s %.9f %ld\\n", names[i], polyflow_tune_seconds[i], polyflow_tune_calls[i]);\n'
            "  fclose(out);\n}\n"
        )
        shim.write_text("\n".join(lines))
        exe = scratch / "candidate"
        report = build_program(
            source, exe, options=options, cache=None, link_flags=[str(shim), *wraps]
        )
        seconds = time.perf_counter() - start
        not_compiled = [name for name in timed if name not in report.compiled]
        if not_compiled:
            reasons = "; ".join(f"{n}: {report.fallbacks.get(n, 'not compiled')}" for n in not_compiled)
            raise CompileError(f"polyflow left to cc what is tuned ({reasons})", file=self.filename)
        return exe, seconds, schedule_facts(report.report.remarks), tuple(timed)

    def facts(self, built: Built, options: Options) -> CompileFacts:
        """The loop nests of the functions tuned, as raised to affine with `options`."""
        from polyflow.drivers.compile import compile_module
        from polyflow.drivers.sources import c_module

        exe, _, kinds, timed = built
        cmod = c_module(self.source, self.filename, options, exe.parent, only=timed)
        with cmod.context:
            raised = compile_module(cmod.module, options, produce="ir", stop_after="affine")
            assert raised.module is not None
            depth, extents = loop_facts(raised.module)
        return CompileFacts(set(kinds), depth, extents)

    def run(self, built: Built, cores: list[int], timeout: float) -> Measured:
        """Run the program once on `cores`; its time in the tuned functions and its stdout."""
        exe, _, _, timed = built
        times = exe.parent / "times.txt"
        times.unlink(missing_ok=True)
        env = {**os.environ, "POLYFLOW_TUNE_TIMES": str(times), "OMP_NUM_THREADS": str(len(cores))}
        lock_fds: tuple[int, ...] = getattr(cores, "lock_fds", ())
        if lock_fds and getattr(cores, "shared", False):
            from polyflow.tune.core_locks import COMPILING, GATE

            env["POLYFLOW_TUNE_LOCK_FDS"] = ",".join(map(str, lock_fds))
            env["POLYFLOW_TUNE_GATE"] = str(GATE)
            if getattr(cores, "stops_compiles", True):
                env["POLYFLOW_TUNE_COMPILING"] = str(COMPILING)
        else:
            lock_fds = ()
        try:
            proc = subprocess.run(
                [str(exe), *self.args],
                capture_output=True,
                text=True,
                env=env,
                cwd=exe.parent,
                pass_fds=lock_fds,
                timeout=timeout,  # pinned to `cores`: the job process is (core_slots)
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise RunFailed(f"ran past {timeout:.3g} s", timed_out=True) from None
        if proc.returncode != 0:
            tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
            how = (
                f"killed by signal {-proc.returncode} ({signal.Signals(-proc.returncode).name})"
                if proc.returncode < 0
                else f"exit status {proc.returncode}"
            )
            raise RunFailed(f"{how}: {tail}" if tail else how)
        try:
            rows = [line.split() for line in times.read_text().splitlines()]
        except OSError:
            raise RunFailed("the program did not report the tuned functions' times") from None
        seconds = {name: float(s) for name, s, _ in rows}
        calls = {name: int(c) for name, _, c in rows}
        if not any(calls.get(name, 0) for name in timed):
            raise RunFailed(f"the program never called {', '.join(timed)}")
        return Measured(sum(seconds.values()), proc.stdout)

    def reference_of(self, outputs: list[Any], rtol: float) -> dict[str, Any]:
        """The default build's output as candidates are checked against it: its text, and the
        words that differed between its own runs (a time the program prints), not compared."""
        first = str(outputs[0]).split()
        varying: set[int] = set()
        for other in outputs[1:]:
            words = str(other).split()
            if len(words) != len(first):
                raise ValueError(f"{len(words)} words in one run, {len(first)} in another")
            varying |= {i for i, (a, b) in enumerate(zip(first, words, strict=True)) if a != b}
        return {"text": str(outputs[0]), "ignore": sorted(varying)}

    def compare(self, output: Any, reference: Any, rtol: float) -> str | None:
        return compare_text(str(output), reference["text"], rtol, ignore=set(reference["ignore"]))


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)", re.I)


def compare_text(
    output: str, reference: str, rtol: float, ignore: set[int] | frozenset[int] = frozenset()
) -> str | None:
    """How `output` differs from `reference`: their words equal, numbers within `rtol`
    (relative, against the larger magnitude; an absolute floor of rtol for values near 0),
    except the words numbered in `ignore`."""
    got, want = output.split(), reference.split()
    if len(got) != len(want):
        return f"the output has {len(got)} words, the default build's {len(want)}"
    for index, (a, b) in enumerate(zip(got, want, strict=True)):
        if a == b or index in ignore:
            continue
        if _NUMBER.fullmatch(a) and _NUMBER.fullmatch(b):
            x, y = float(a), float(b)
            if math.isnan(x) and math.isnan(y):
                continue
            if abs(x - y) <= rtol * max(abs(x), abs(y), 1.0):
                continue
        return f"word {index + 1} of the output is {a}, the default build's {b}"
    return None


# ----- C functions called from Python


@dataclass
class CFunction:
    """A C function as `polyflow.compile_c` compiles it, tuned on example arguments (arrays and
    scalars): the time of a call, the output the arrays it changed and its result."""

    source: str
    filename: str
    entry: str
    options: dict[str, Any]
    arguments: tuple[Any, ...]
    source_dir: str | None = None

    kind = "c"

    @property
    def timed(self) -> tuple[str, ...]:
        return (self.entry,)

    def base_options(self) -> Options:
        return Options(**self.options)

    def build(self, options: Options, scratch: Path) -> Built:
        from polyflow.drivers.jit import compile_c

        start = time.perf_counter()
        path = Path(self.source_dir or scratch) / Path(self.filename).name
        fn = (
            compile_c(path=path, entry=self.entry, options=options)
            if self.source_dir and path.is_file()
            else compile_c(self.source, self.entry, options=options)
        )
        seconds = time.perf_counter() - start
        return fn, seconds, schedule_facts(fn.report.remarks), (self.entry,)

    def facts(self, built: Built, options: Options) -> CompileFacts:
        from mlir import ir

        from polyflow.ir.contexts import new_context

        fn, _, kinds, _ = built
        with new_context():
            depth, extents = loop_facts(ir.Module.parse(fn.mlir("affine")))
        return CompileFacts(set(kinds), depth, extents)

    def run(self, built: Built, cores: list[int], timeout: float) -> Measured:
        fn = built[0]
        arguments = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in self.arguments]
        start = time.perf_counter()
        result = fn(*arguments)
        seconds = time.perf_counter() - start
        if seconds > timeout:
            raise RunFailed(f"ran past {timeout:.3g} s", timed_out=True)
        arrays = [a for a in arguments if isinstance(a, np.ndarray)]
        if result is not None:
            arrays.append(np.asarray(result, dtype=np.float64).reshape(1))
        return Measured(seconds, arrays)

    def reference_of(self, outputs: list[Any], rtol: float) -> Any:
        return same_outputs(outputs, rtol)

    def compare(self, output: Any, reference: Any, rtol: float) -> str | None:
        return compare_arrays(output, reference, rtol)


# ----- TC kernels


@dataclass
class TcKernel:
    """A TC definition to tune with its arguments: `arrays` given (fn.autotune's example
    inputs), or `shapes` and dtypes from which the worker makes seeded random arrays."""

    source: str
    name: str
    options: dict[str, Any]
    shapes: tuple[tuple[tuple[int, ...], str], ...]
    arrays: tuple[np.ndarray, ...] | None = None
    seed: int = 0

    kind = "tc"

    @property
    def entry(self) -> str:
        return self.name

    def base_options(self) -> Options:
        return Options(**self.options)

    def inputs(self) -> list[np.ndarray]:
        if self.arrays is not None:
            return [np.array(a, copy=True) for a in self.arrays]
        rng = np.random.default_rng(self.seed)
        made = []
        for shape, dtype in self.shapes:
            kind = np.dtype(dtype)
            if kind.kind == "f":
                made.append(rng.standard_normal(shape).astype(kind))
            else:  # index tensors of gathers: small values, in range of the smallest extent
                made.append(rng.integers(0, 2, shape).astype(kind))
        return made

    def build(self, options: Options, scratch: Path) -> Built:
        from polyflow import tc

        start = time.perf_counter()
        fn = tc.define(self.source, self.name, options=options)
        arrays = self.inputs()
        fn.mlir("mlir", *arrays)  # compiles for these shapes
        seconds = time.perf_counter() - start
        return (fn, arrays), seconds, schedule_facts(fn.report.remarks), (self.name,)

    def facts(self, built: Built, options: Options) -> CompileFacts:
        """The loop nests of the kernel after raising (its `affine` stage)."""
        from mlir import ir

        from polyflow.ir.contexts import new_context

        (fn, arrays), _, kinds, _ = built
        with new_context():
            depth, extents = loop_facts(ir.Module.parse(fn.mlir("affine", *arrays)))
        return CompileFacts(set(kinds), depth, extents)

    def run(self, built: Built, cores: list[int], timeout: float) -> Measured:
        (fn, arrays), _, _, _ = built
        if fn.options.target == "cuda":
            return self._run_on_gpu(fn, arrays, timeout)
        # an untimed call first (the OpenMP threads start, the outputs are paged in), then
        # calls into those outputs, as a program calls a kernel in a loop
        result = fn(*arrays)
        outputs = list(result) if isinstance(result, tuple | list) else [result]
        start = time.perf_counter()
        fn(*arrays, out=outputs if len(outputs) > 1 else outputs[0])
        seconds = time.perf_counter() - start
        if seconds > timeout:
            raise RunFailed(f"ran past {timeout:.3g} s", timed_out=True)
        return Measured(seconds, [np.asarray(o).copy() for o in outputs])

    @staticmethod
    def _run_on_gpu(fn: Any, arrays: list[np.ndarray], timeout: float) -> Measured:
        """One timed launch on the GPU (after an untimed one that sets the launch up), the
        outputs copied back."""
        try:
            import cupy  # type: ignore[import-not-found]
        except ImportError:
            raise RunFailed("a CUDA candidate runs through CuPy: pip install 'polyflow[gpu]'") from None
        device = [cupy.asarray(a) for a in arrays]
        fn(*device)
        cupy.cuda.Device().synchronize()
        start = time.perf_counter()
        result = fn(*device)
        cupy.cuda.Device().synchronize()
        seconds = time.perf_counter() - start
        if seconds > timeout:
            raise RunFailed(f"ran past {timeout:.3g} s", timed_out=True)
        outputs = result if isinstance(result, tuple | list) else (result,)
        return Measured(seconds, [cupy.asnumpy(o) for o in outputs])

    def reference_of(self, outputs: list[Any], rtol: float) -> Any:
        return same_outputs(outputs, rtol)

    def compare(self, output: Any, reference: Any, rtol: float) -> str | None:
        return compare_arrays(output, reference, rtol)


def same_outputs(outputs: list[Any], rtol: float) -> Any:
    """The first of the default build's outputs, which its other runs must equal."""
    for other in outputs[1:]:
        differs = compare_arrays(other, outputs[0], rtol)
        if differs is not None:
            raise ValueError(differs)
    return outputs[0]


def compare_arrays(output: Any, reference: Any, rtol: float) -> str | None:
    """How arrays `output` differ from `reference`: shapes, then values within `rtol` of the
    reference's largest magnitude (1e-5 at least for float32, whose sums err by ~1e-7 a term);
    integers exactly."""
    if len(output) != len(reference):
        return f"{len(output)} outputs, the default build's {len(reference)}"
    for index, (got, want) in enumerate(zip(output, reference, strict=True)):
        if got.shape != want.shape:
            return f"output {index} has shape {got.shape}, the default build's {want.shape}"
        if got.dtype.kind in "iub":
            if not np.array_equal(got, want):
                return f"output {index} differs (integers, compared exactly)"
            continue
        tolerance = max(rtol, 1e-5 if got.dtype == np.float32 else rtol)
        scale = max(float(np.max(np.abs(want), initial=0.0)), 1.0)
        worst = float(np.max(np.abs(got.astype(np.float64) - want), initial=0.0))
        if not worst <= tolerance * scale:  # NaN differs too
            return f"output {index} differs by up to {worst:.3g} (scale {scale:.3g})"
    return None


def schedule_facts(remarks: Any) -> set[str]:
    """The kinds of the polyhedral stage's remarks, with 'wavefront' where a band was tiled
    as wavefronts."""
    kinds = {r.kind for r in remarks if r.stage == "schedule"}
    if any(r.kind == "tiled" and (r.data or {}).get("wavefront") for r in remarks):
        kinds.add("wavefront")
    return kinds


def loop_facts(module: Any) -> tuple[int, set[int]]:
    """The depth of the deepest loop nest of `module` (scf.for / affine.for) and the constant
    trip counts of its loops."""
    deepest = 0
    extents: set[int] = set()

    def visit(operation: Any, depth: int) -> None:
        nonlocal deepest
        name = operation.name
        inner = depth
        if name in ("scf.for", "affine.for"):
            inner = depth + 1
            deepest = max(deepest, inner)
            trip = _constant_trip(operation)
            if trip is not None and trip > 1:
                extents.add(trip)
        for region in operation.regions:
            for block in region.blocks:
                for op in block.operations:
                    visit(op.operation, inner)

    visit(module.operation, 0)
    return deepest, extents


def _constant_trip(operation: Any) -> int | None:
    try:
        if operation.name == "affine.for":
            attrs = operation.attributes
            lower = attrs["lowerBoundMap"].value if "lowerBoundMap" in attrs else None
            upper = attrs["upperBoundMap"].value if "upperBoundMap" in attrs else None
            if lower is None or upper is None or lower.n_inputs or upper.n_inputs:
                return None
            if len(lower.results) != 1 or len(upper.results) != 1:
                return None
            low = int(str(lower.results[0]))
            high = int(str(upper.results[0]))
            return high - low
        lower_op = operation.operands[0].owner
        upper_op = operation.operands[1].owner
        if getattr(lower_op, "name", "") == "arith.constant" and getattr(upper_op, "name", "") == "arith.constant":
            low = int(str(lower_op.attributes["value"]).split(":")[0])
            high = int(str(upper_op.attributes["value"]).split(":")[0])
            return high - low
    except (ValueError, IndexError, KeyError, AttributeError):
        return None
    return None
