"""POST /v1/run: a submitted kernel built by polyflow and timed against a baseline, in the
tuner's sandbox (a process of its own in a scratch directory, clean environment, CPU, memory
and file limits: `polyflow.tune.worker.run_isolated`, as tunings run; only with `--allow-run`).

* C (`CRun`): a whole program with `main`, built by polyflow (-O3 and the request's options;
  -march=native unless they say otherwise) and by `gcc -O3 -march=native`; each executable
  runs `runs` times, alternating, and its time is the wall time of its run as the job process
  measures it (the program's start to its exit, not its build); their stdouts are compared
  number by number (`outputs_match`), words that differ between runs of one build (a time the
  program prints) aside.
* TC (`TcRun`): the definition compiled for `sizes`, called on seeded random inputs of its
  signature's dtypes (the tuner's `TcKernel.inputs`), against NumPy: `np.einsum` where a
  statement is a product of plain accesses, else each statement evaluated by broadcasting over
  its index ranges (`numpy_reference`); the outputs compared with `np.allclose`.

The tasks follow the tuner's task protocol (`build`, `run`, `reference_of`; see
polyflow/tune/tasks.py) so that `polyflow.tune.worker.run_job` builds them, holds the cores
while they are timed, and keeps every run's measure.
"""

from __future__ import annotations

import math
import os
import signal
import string
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from polyflow.errors import CompileError
from polyflow.options import Options

GCC_FLAGS = ("-O3", "-march=native")
BASELINE_C = "gcc " + " ".join(GCC_FLAGS)
# most iteration points one NumPy statement evaluates at once (the rest in slices of its
# first index): 2^24 float64 temporaries are 128 MiB
MAX_POINTS = 1 << 24
OUTPUT_LIMIT = 1 << 20  # bytes of a program's stdout kept for the comparison


class RunRefused(Exception):
    """The request cannot run (no main, a TC the NumPy reference cannot evaluate, ...)."""


@dataclass
class RunOutcome:
    """What /v1/run answers (times in milliseconds)."""

    polyflow_ms: float
    baseline: str
    baseline_ms: float | None
    speedup: float | None
    outputs_match: bool | None
    runs: int
    note: str


# ----- C programs


@dataclass
class CRun:
    """A C program with `main`, built by polyflow with `options` and by gcc (GCC_FLAGS)."""

    source: str
    options: dict[str, Any]
    filename: str = "program.c"

    kind = "c"

    def base_options(self) -> Options:
        return Options(**self.options)

    def build(self, options: Options, scratch: Path) -> tuple[tuple[Path, Path], float]:
        """(the polyflow and gcc executables, the build seconds); CompileError where either
        build fails."""
        from polyflow.drivers.build import build_program

        start = time.perf_counter()
        source = scratch / self.filename
        source.write_text(self.source)
        exe = scratch / "polyflow.exe"
        build_program(source, exe, options=options, cache=None)
        baseline = scratch / "gcc.exe"
        built = subprocess.run(
            ["gcc", *GCC_FLAGS, "-o", str(baseline), str(source), "-lm"],
            capture_output=True,
            text=True,
            cwd=scratch,
        )
        if built.returncode != 0:
            tail = " | ".join(built.stderr.strip().splitlines()[-3:])
            raise CompileError(f"{BASELINE_C} could not build the program: {tail}", file="<input>")
        return (exe, baseline), time.perf_counter() - start

    def run(self, built: Any, cores: list[int], timeout: float) -> Any:
        """One run of each executable (polyflow's first): polyflow's time and both outputs."""
        from polyflow.tune.tasks import Measured

        exe, baseline = built[0]
        threads = str(max(1, len(cores)))
        seconds, output = _run_program(exe, timeout, threads)
        baseline_seconds, baseline_output = _run_program(baseline, timeout, threads)
        return Measured(
            seconds,
            {"output": output, "baseline_seconds": baseline_seconds, "baseline": baseline_output},
        )

    def reference_of(self, outputs: list[Any], rtol: float) -> dict[str, Any]:
        """The baseline's best time, and whether the outputs agree: word by word, numbers
        within `rtol`, words that differ between runs of one build set aside."""
        from polyflow.tune.tasks import compare_text

        ours = [str(o["output"]) for o in outputs]
        theirs = [str(o["baseline"]) for o in outputs]
        varying = _varying_words(ours) | _varying_words(theirs)
        differs = compare_text(ours[0], theirs[0], rtol, ignore=varying)
        if differs is not None:
            differs = differs.replace("the default build's", "gcc's")
        return {
            "baseline_seconds": min(float(o["baseline_seconds"]) for o in outputs),
            "match": differs is None,
            "message": differs,
        }


def _run_program(exe: Path, timeout: float, threads: str) -> tuple[float, str]:
    """(the wall time of one run of `exe`, its stdout); RunFailed where it crashes, exits
    non-zero or runs past `timeout`."""
    from polyflow.tune.tasks import RunFailed

    env = {**os.environ, "OMP_NUM_THREADS": threads}
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [str(exe)], capture_output=True, env=env, cwd=exe.parent, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        raise RunFailed(f"{exe.stem} ran past {timeout:g} s", timed_out=True) from None
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        how = (
            f"was killed by signal {signal.Signals(-done.returncode).name}"
            if done.returncode < 0
            else f"exited with status {done.returncode}"
        )
        tail = " | ".join(done.stderr.decode(errors="replace").strip().splitlines()[-3:])
        raise RunFailed(f"the {exe.stem} build {how}" + (f": {tail}" if tail else ""))
    return seconds, done.stdout[:OUTPUT_LIMIT].decode(errors="replace")


def _varying_words(outputs: Sequence[str]) -> set[int]:
    first = outputs[0].split()
    varying: set[int] = set()
    for other in outputs[1:]:
        words = other.split()
        varying |= {i for i, (a, b) in enumerate(zip(first, words, strict=False)) if a != b}
    return varying


# ----- TC definitions


@dataclass
class TcRun:
    """A TC definition on seeded random inputs of `shapes` (shape, NumPy dtype name), against
    NumPy (`numpy_reference`)."""

    source: str
    name: str
    options: dict[str, Any]
    sizes: dict[str, int]
    shapes: tuple[tuple[tuple[int, ...], str], ...]
    seed: int = 0

    kind = "tc"

    def base_options(self) -> Options:
        return Options(**self.options)

    def build(self, options: Options, scratch: Path) -> tuple[Any, float]:
        """((the compiled function, its inputs, the NumPy reference), the build seconds)."""
        from polyflow import tc
        from polyflow.tune.tasks import TcKernel

        start = time.perf_counter()
        fn = tc.define(self.source, self.name, options=options)
        arrays = TcKernel(self.source, self.name, {}, self.shapes, seed=self.seed).inputs()
        fn(*arrays)  # compiles for these shapes
        reference = numpy_reference(fn, self.sizes)
        return (fn, arrays, reference), time.perf_counter() - start

    def run(self, built: Any, cores: list[int], timeout: float) -> Any:
        """One timed call of polyflow's kernel (after an untimed one, into its outputs) and one
        of the NumPy reference (after an untimed one); whether their outputs agree."""
        from polyflow.tune.tasks import Measured, RunFailed

        fn, arrays, reference = built[0]
        result = fn(*arrays)
        outputs = list(result) if isinstance(result, tuple | list) else [result]
        start = time.perf_counter()
        fn(*arrays, out=outputs if len(outputs) > 1 else outputs[0])
        seconds = time.perf_counter() - start
        reference(*arrays)  # as polyflow's: an untimed call first (BLAS starts its threads)
        start = time.perf_counter()
        wanted = reference(*arrays)
        baseline_seconds = time.perf_counter() - start
        if max(seconds, baseline_seconds) > timeout:
            raise RunFailed(f"a call ran past {timeout:g} s", timed_out=True)
        differs = _compare(outputs, wanted)
        return Measured(seconds, {"baseline_seconds": baseline_seconds, "message": differs})

    def reference_of(self, outputs: list[Any], rtol: float) -> dict[str, Any]:
        messages = [o["message"] for o in outputs if o["message"] is not None]
        return {
            "baseline_seconds": min(float(o["baseline_seconds"]) for o in outputs),
            "match": not messages,
            "message": messages[0] if messages else None,
        }


def _compare(got: Sequence[np.ndarray], wanted: Sequence[np.ndarray]) -> str | None:
    """How polyflow's outputs differ from NumPy's (np.allclose, tolerances by dtype)."""
    for index, (a, b) in enumerate(zip(got, wanted, strict=True)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return f"output {index} has shape {a.shape}, NumPy's {b.shape}"
        if a.dtype.kind in "iub":
            if not np.array_equal(a, b):
                return f"output {index} differs from NumPy's (integers, compared exactly)"
            continue
        rtol = 1e-3 if a.dtype.itemsize <= 4 else 1e-9
        scale = max(float(np.max(np.abs(b), initial=0.0)), 1.0)
        if not np.allclose(a, b, rtol=rtol, atol=rtol * scale, equal_nan=True):
            worst = float(np.max(np.abs(a.astype(np.float64) - b), initial=0.0))
            return f"output {index} differs from NumPy's by up to {worst:.3g}"
    return None


# ----- NumPy's evaluation of a TC definition

_FLOAT_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "cbrt": np.cbrt, "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "fabs": np.abs, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
    "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "floor": np.floor,
    "ceil": np.ceil, "round": lambda x: np.copysign(np.floor(np.abs(x) + 0.5), x),
    "trunc": np.trunc, "fmax": np.fmax, "fmin": np.fmin, "pow": np.power,
    "atan2": np.arctan2, "fmod": np.fmod, "copysign": np.copysign,
    "fma": lambda a, b, c: a * b + c,
    "min": np.minimum, "max": np.maximum, "abs": np.abs,
}  # fmt: skip
_REDUCE = {"+=": np.add, "*=": np.multiply, "max=": np.maximum, "min=": np.minimum}


def numpy_reference(fn: Any, sizes: Mapping[str, int]) -> Callable[..., list[np.ndarray]]:
    """A NumPy function computing TC definition `fn`'s outputs from its inputs (for `sizes`);
    RunRefused for what it cannot evaluate (a call of another definition, an unknown
    builtin)."""
    from polyflow.frontend.tc.checks import CheckedComprehension
    from polyflow.frontend.tc.ranges import specialize
    from polyflow.tc import NUMPY_DTYPES

    specialized = specialize(fn.inferred, sizes, source=fn.source, file=fn.file)
    definition = fn.definition
    for statement in definition.statements:
        if not isinstance(statement, CheckedComprehension):
            raise RunRefused("the NumPy reference does not evaluate calls of other definitions")
    dtypes = {name: np.dtype(NUMPY_DTYPES[t.element]) for name, t in definition.tensors.items()}

    def reference(*arrays: np.ndarray) -> list[np.ndarray]:
        tensors: dict[str, Any] = {
            p.name: a for p, a in zip(definition.source.params, arrays, strict=True)
        }
        for output in definition.outputs:
            shape = specialized.shapes[output.name]
            tensors[output.name] = np.zeros(shape, dtype=dtypes[output.name])
        for statement, ranges in zip(definition.statements, specialized.ranges, strict=True):
            _statement(statement, ranges, tensors, dtypes)
        return [tensors[output.name] for output in definition.outputs]

    return reference


def _statement(
    statement: Any,
    ranges: Mapping[str, tuple[int, int]],
    tensors: dict[str, Any],
    dtypes: Mapping[str, np.dtype[Any]],
) -> None:
    """Run one comprehension on `tensors` (its output among them), by einsum or broadcasting,
    in slices of its first index where its iteration space is large."""
    source = statement.source
    out = tensors[source.tensor]
    lhs = list(statement.indices)
    if len(set(lhs)) != len(lhs):
        raise RunRefused("the NumPy reference does not evaluate a repeated left-hand index")
    if any(high <= low for low, high in ranges.values()):
        if source.init and source.op in _REDUCE:
            region = tuple(slice(*ranges[i]) for i in lhs)
            out[region] = _identity(source.op, out.dtype)
        return
    einsum = _einsum(statement, ranges, tensors)
    if einsum is not None:
        _store(out, source, lhs, ranges, einsum, ())
        return
    points = math.prod(high - low for low, high in ranges.values())
    slices = [dict(ranges)]
    if lhs and points > MAX_POINTS:
        low, high = ranges[lhs[0]]
        step = max(1, (high - low) * MAX_POINTS // points)
        slices = [
            {**ranges, lhs[0]: (start, min(start + step, high))} for start in range(low, high, step)
        ]
    for part in slices:
        axes = list(part)
        grids = {
            index: np.arange(*part[index]).reshape([-1 if a == index else 1 for a in axes])
            for index in axes
        }
        element = dtypes[source.tensor]
        value = _evaluate(source.rhs, grids, tensors, statement.types, element)
        value = np.broadcast_to(value, [part[a][1] - part[a][0] for a in axes])
        reduced = tuple(range(len(lhs), len(axes)))
        _store(out, source, lhs, part, value, reduced)


def _identity(op: str, dtype: np.dtype[Any]) -> Any:
    if op == "+=":
        return 0
    if op == "*=":
        return 1
    big = np.inf if dtype.kind == "f" else np.iinfo(dtype).max
    return -big if op == "max=" else big


def _store(
    out: np.ndarray,
    source: Any,
    lhs: list[str],
    ranges: Mapping[str, tuple[int, int]],
    value: Any,
    reduced: tuple[int, ...],
) -> None:
    region = tuple(slice(*ranges[i]) for i in lhs)
    if source.op == "=":
        out[region] = value
        return
    combine = _REDUCE[source.op]
    if reduced:
        value = combine.reduce(value, axis=reduced)
    if source.init:
        out[region] = value
    else:
        out[region] = combine(out[region], value)


def _einsum(statement: Any, ranges: Mapping[str, tuple[int, int]], tensors: Mapping[str, Any]) -> Any:
    """`np.einsum` of a statement `out(i..) +=(!) A(..) * B(..) * ...` (or `=` without
    reduction indices) whose every subscript is an index over its tensor's whole dimension;
    None for any other statement."""
    from polyflow.frontend.tc import syntax as ast

    source = statement.source
    if source.op not in ("+=", "=") or (source.op == "=" and statement.reduction_indices):
        return None
    factors: list[Any] = []

    def flatten(expr: Any) -> bool:
        if isinstance(expr, ast.Binary) and expr.op == "*":
            return flatten(expr.left) and flatten(expr.right)
        factors.append(expr)
        return True

    flatten(source.rhs)
    letters: dict[str, str] = {}
    operands: list[Any] = []
    specs: list[str] = []
    scale: float = 1.0
    for factor in factors:
        if isinstance(factor, ast.Number):
            scale *= factor.value
            continue
        if not isinstance(factor, ast.Apply) or factor.name not in tensors:
            return None
        tensor = tensors[factor.name]
        if len(factor.args) != np.ndim(tensor) or not factor.args:
            return None
        spec = ""
        for dim, arg in enumerate(factor.args):
            if not isinstance(arg, ast.Name) or arg.name not in ranges:
                return None
            if ranges[arg.name] != (0, np.shape(tensor)[dim]):
                return None
            if arg.name not in letters:
                if len(letters) == len(string.ascii_letters):
                    return None
                letters[arg.name] = string.ascii_letters[len(letters)]
            spec += letters[arg.name]
        operands.append(tensor)
        specs.append(spec)
    out = tensors[source.tensor]
    lhs = list(statement.indices)
    if not operands or any(i not in letters for i in lhs):
        return None
    if any(ranges[i] != (0, out.shape[d]) for d, i in enumerate(lhs)):
        return None
    value = np.einsum(f"{','.join(specs)}->{''.join(letters[i] for i in lhs)}", *operands, optimize=True)
    return value * scale if scale != 1.0 else value


def _evaluate(
    expr: Any,
    grids: Mapping[str, np.ndarray],
    tensors: Mapping[str, Any],
    types: Mapping[Any, str],
    element: np.dtype[Any],
) -> Any:
    """An expression of a statement over its index grids (arrays broadcast along one axis
    per index)."""
    from polyflow.frontend.tc import syntax as ast

    def ev(e: Any) -> Any:
        if isinstance(e, ast.Number):
            if e.is_float:
                return element.type(e.value) if element.kind == "f" else float(e.value)
            return int(e.value)
        if isinstance(e, ast.Name):
            if e.name in grids:
                return grids[e.name]
            return tensors[e.name][()]  # a scalar argument
        if isinstance(e, ast.DimSize):
            return int(np.shape(tensors[e.tensor])[e.dim])
        if isinstance(e, ast.Apply):
            if e.name in tensors:
                tensor = tensors[e.name]
                if not e.args:
                    return tensor[()]
                return tensor[tuple(np.asarray(ev(a)).astype(np.intp) for a in e.args)]
            function = _FLOAT_FUNCTIONS.get(e.name)
            if function is None:
                raise RunRefused(f"the NumPy reference does not know builtin '{e.name}'")
            args = [ev(a) for a in e.args]
            if e.name not in ("min", "max", "abs"):
                args = [
                    a.astype(np.float32) if np.asarray(a).dtype.kind in "iub" else a for a in map(np.asarray, args)
                ]
            return function(*args)
        if isinstance(e, ast.Unary):
            value = ev(e.operand)
            return np.logical_not(value) if e.op == "!" else -value
        if isinstance(e, ast.Ternary):
            return np.where(ev(e.cond), ev(e.then), ev(e.otherwise))
        if isinstance(e, ast.Binary):
            a, b = ev(e.left), ev(e.right)
            integer = str(types.get(e, "f")).startswith(("i", "u"))
            if e.op == "/" and integer:
                return np.trunc(np.true_divide(a, b)).astype(np.int64)
            if e.op == "%":
                return np.fmod(a, b)
            operations: dict[str, Callable[[Any, Any], Any]] = {
                "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
                "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
                "==": np.equal, "!=": np.not_equal, "&&": np.logical_and, "||": np.logical_or,
            }  # fmt: skip
            return operations[e.op](a, b)
        raise RunRefused(f"the NumPy reference does not evaluate {type(e).__name__}")

    return ev(expr)


# ----- the job


def run_request(
    language: str,
    source: str,
    entry: str | None,
    options: dict[str, Any],
    sizes: Mapping[str, int] | None,
    *,
    limits: Any,
    runs: int = 3,
    run_seconds: float = 10.0,
    build_seconds: float = 300.0,
) -> RunOutcome:
    """Build and time a /v1/run request in the sandbox (blocking: call it from a thread);
    RunRefused (a 422), CompileError (a 422 with its position) or TimeoutError (a 504)."""
    from polyflow.tune.worker import Job, run_isolated

    from .tuning import tc_signature

    threads = options.get("threads") or len(os.sched_getaffinity(0))
    task: CRun | TcRun
    if language == "c":
        task = CRun(source, options)
        baseline = BASELINE_C
    else:
        name, shapes = tc_signature(source, entry, sizes)
        task = TcRun(source, name, options, dict(sizes or {}), shapes)
        baseline = "numpy"
    job = Job(
        task,
        {},
        repeats=runs,
        cores=threads,
        run_timeout=run_seconds,
        timeout=build_seconds + 2 * runs * run_seconds,
        limits=limits,
        rtol=1e-6,
    )
    result = run_isolated(job)
    if result.status == "timeout":
        raise TimeoutError(result.message)
    if result.status != "ok" or result.seconds is None or result.output is None:
        message = result.message or "the run failed"
        if "timed_out" in message or "ran past" in message:
            raise TimeoutError(message)
        raise RunRefused(message.removeprefix("run failed: "))
    found = result.output
    ours = result.seconds * 1e3
    theirs = float(found["baseline_seconds"]) * 1e3
    notes = []
    if language == "c":
        notes.append(
            f"wall time of each program's whole run, best of {runs}, polyflow with "
            f"{threads} OpenMP thread(s) at most; gcc's build is sequential"
        )
    else:
        notes.append(
            f"one call of each, best of {runs} (polyflow into its outputs after a first call); "
            f"seeded random inputs"
        )
    if found.get("message"):
        notes.append(f"outputs differ: {found['message']}")
    return RunOutcome(
        polyflow_ms=ours,
        baseline=baseline,
        baseline_ms=theirs,
        speedup=theirs / ours if ours > 0 else None,
        outputs_match=bool(found["match"]),
        runs=runs,
        note="; ".join(notes),
    )


__all__ = ["BASELINE_C", "CRun", "RunOutcome", "RunRefused", "TcRun", "numpy_reference", "run_request"]
