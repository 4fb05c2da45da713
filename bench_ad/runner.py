"""Measuring one case: polyflow in this process, then JAX and PyTorch in child processes on
the same arrays (one after the other: they share this machine's cores)."""

from __future__ import annotations

import gc
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from bench_ad.case import Case, CaseSpec, NotAvailable
from bench_ad.gradient_ir import allocated_bytes, count_atomics
from bench_ad.memory import peak_extra_resident
from bench_ad.reference import run_reference, write_case
from bench_ad.row import Row, max_relative_error
from bench_ad.timing import Timed, best_of
from polyflow import CompileError

_T = TypeVar("_T")


def _one_line(error: BaseException) -> str:
    """An error as a table cell: its type and the first line of its message."""
    text = str(error).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def _timed(fn: Callable[[], _T], repeat: int) -> tuple[Timed | None, _T | None, str, str | None]:
    """(timings, the result, status, error): a failure is a status and a message, never raised."""
    try:
        timed, result = best_of(fn, repeat)
    except NotAvailable as error:
        return None, None, "not available yet", str(error)
    except CompileError as error:
        return None, None, "compile error", str(error)
    except Exception as error:
        return None, None, "error", _one_line(error)
    return timed, result, "ok", None


def measure(
    spec: CaseSpec,
    *,
    repeat: int,
    directory: Path,
    timeout_s: float,
    step: Callable[[str], None],
) -> Row:
    """Runs `spec` in polyflow, JAX and PyTorch (the arrays pass through `directory`, removed
    after); `step(what)` reports progress."""
    row = Row(kernel=spec.kernel, size=spec.label)
    step("building inputs")
    try:
        case = spec.build()
    except Exception as error:
        row.primal_error = row.grad_error = _one_line(error)
        row.grad_status = "compile error" if isinstance(error, CompileError) else "error"
        return row
    step("polyflow primal")
    timed, outputs, _, row.primal_error = _timed(case.primal, repeat)
    if timed is not None:
        row.primal_first_s, row.primal_s = timed.first_s, timed.best_s
    output_bytes = None if timed is None else _nbytes(outputs)
    del outputs
    step("polyflow gradient")
    timed, grads, row.grad_status, row.grad_error = _timed(case.gradient, repeat)
    if timed is not None:
        row.grad_first_s, row.grad_s = timed.first_s, timed.best_s
        step("polyflow gradient: tapes, atomics, peak memory")
        try:
            _gradient_costs(row, case, output_bytes)
        except Exception as error:
            row.metrics_error = _one_line(error)
    row.notes = list(case.notes)
    write_case(case, directory, repeat)
    del case  # the children load their own copies; large inputs should not pile up
    gc.collect()
    step("JAX")
    jax = run_reference("jax", directory, timeout_s=timeout_s)
    row.jax, row.jax_error = jax.times, jax.error or jax.unavailable
    step("PyTorch")
    torch = run_reference("torch", directory, timeout_s=timeout_s)
    row.torch, row.torch_error, row.torch_unavailable = torch.times, torch.error, torch.unavailable
    row.torch_compile_error = torch.info.get("compiled_error")
    row.versions = {
        name: str(result.info["version"])
        for name, result in (("jax", jax), ("torch", torch))
        if "version" in result.info
    }
    if grads is not None and jax.grads is not None:
        row.max_rel_error = max_relative_error(list(grads), jax.grads)
    if torch.grads is not None and jax.grads is not None:
        row.torch_max_rel_error = max_relative_error(torch.grads, jax.grads)
    shutil.rmtree(directory, ignore_errors=True)
    return row


def _nbytes(value: object) -> int:
    """The bytes of the arrays in `value` (an array, or a tuple or list of them)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    return 0


def _gradient_costs(row: Row, case: Case, output_bytes: int | None) -> None:
    """The tapes and atomics of the compiled gradient (from its IR), and the peak of the extra
    resident memory of one more, untimed call (with the bytes it is compared to)."""
    ir = case.gradient_ir()
    if ir is not None:
        allocated = allocated_bytes(ir)
        if allocated is not None:
            row.tape_bytes, row.tape_dynamic = allocated
        row.atomics_by_stage = count_atomics(ir)
        if row.atomics_by_stage:
            row.atomics = sum(row.atomics_by_stage.values())
    case.release()
    measured = peak_extra_resident(case.gradient)
    if measured is not None:
        row.peak_extra_bytes, grads = measured
        if output_bytes is not None:
            row.result_bytes = output_bytes + _nbytes(grads)


def environment() -> dict[str, str]:
    """The machine and the versions the numbers come from."""
    import os
    import platform

    import polyflow

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "polyflow commit": _commit(),
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "polyflow": polyflow.__version__,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "(unset)"),
        "POLYFLOW_CACHE": os.environ.get("POLYFLOW_CACHE", "on"),
    }


def _commit() -> str:
    """The repository's HEAD, marked "+changes" when polyflow/ has uncommitted edits (the
    numbers then come from the working tree)."""
    import subprocess

    repo = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        changed = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--", "polyflow"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if changed else "")
