"""The results as a markdown table (with the notes and errors below it) and as JSON."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from bench_ad.row import TOLERANCE, Row

HEADER = (
    "kernel",
    "size",
    "polyflow primal ms",
    "polyflow grad ms",
    "overhead grad/primal",
    "JAX grad ms",
    "JAX / polyflow grad",
    "torch grad ms",
    "torch.compile grad ms",
    f"max rel err vs JAX (≤ {TOLERANCE:g})",
    "compile s: polyflow primal / grad, JAX grad",
    "polyflow grad: tape bytes",
    "atomics",
    "peak mem / (outputs + grads)",
    "status",
)


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    ms = seconds * 1e3
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


def _s(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds:.1f}"


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def _bytes(count: int | None, dynamic: int = 0) -> str:
    if count is None:
        return "—"
    size, unit = float(count), "B"
    for bigger in ("kB", "MB", "GB"):
        if size < 1000:
            break
        size, unit = size / 1000, bigger
    text = f"{count} B" if unit == "B" else f"{size:.3g} {unit}"
    return text + (f" + {dynamic} dynamic" if dynamic else "")


def compile_time(first: float | None, best: float | None) -> float | None:
    """polyflow's compile time: its first call minus a run."""
    return None if first is None or best is None else max(0.0, first - best)


def _status(row: Row) -> str:
    if row.grad_status != "ok":
        return row.grad_status
    if row.correct is False:
        return "**gradient mismatch**"
    return "ok" if row.correct else "ok (unchecked)"


def _error_cell(row: Row) -> str:
    if row.max_rel_error is None:
        return "—"
    return f"{row.max_rel_error:.1e} {'✓' if row.correct else '✗'}"


def _reference_cell(times: dict[str, float], key: str, failed: bool, missing: bool) -> str:
    if key in times:
        return _ms(times[key])
    return "n/a" if missing else "error" if failed else "—"


def _cells(row: Row) -> list[str]:
    jax_grad = row.jax.get("grad_s")
    speedup = jax_grad / row.grad_s if jax_grad and row.grad_s else None
    compiles = [
        compile_time(row.primal_first_s, row.primal_s),
        compile_time(row.grad_first_s, row.grad_s),
        row.jax.get("grad_compile_s"),
    ]
    torch_missing = row.torch_unavailable is not None
    return [
        row.kernel,
        row.size,
        _ms(row.primal_s),
        _ms(row.grad_s),
        _ratio(row.overhead),
        _reference_cell(row.jax, "grad_s", row.jax_error is not None, False),
        _ratio(speedup),
        _reference_cell(row.torch, "grad_s", row.torch_error is not None, torch_missing),
        _reference_cell(
            row.torch,
            "compiled_grad_s",
            row.torch_error is not None or row.torch_compile_error is not None,
            torch_missing,
        ),
        _error_cell(row),
        " / ".join(_s(c) for c in compiles),
        _bytes(row.tape_bytes, row.tape_dynamic),
        "—" if row.atomics is None else str(row.atomics),
        "—" if row.peak_ratio is None else f"{row.peak_ratio:.2f}",
        _status(row),
    ]


def markdown(rows: list[Row], meta: dict[str, Any]) -> str:
    lines = [
        f"# Reverse-mode AD benchmark — {meta['date']}, size {meta['size']}",
        "",
        f"CPU only, float64, best of {meta['repeat']} runs after a warm-up call; compile times "
        "apart (polyflow: first call minus a run; JAX: `jit(...).lower().compile()`). "
        "JAX: `jax.jit` of `jax.vjp`; PyTorch: eager autograd. Overhead = polyflow gradient / "
        "polyflow primal; JAX / polyflow grad > 1 means polyflow's gradient is faster.",
        "",
        "Tape bytes: the `memref.alloc`/`alloca`s of the gradient function after the `grad` "
        "stage (tapes, shadows of local arrays; sizes computed from the call's arguments, "
        "“dynamic”: allocations whose size could not be, not counted; buffers the scheduler "
        "adds later, such as packing tiles, not counted). Atomics: occurrences of `atomic` in "
        "the gradient function after `affine-opt` and `llvm-dialect`. Peak mem: one more, "
        "untimed gradient call, after the allocator returned its free pages (`malloc_trim`), "
        "with a thread sampling the resident set (`/proc/self/statm`) every 0.5 ms: (peak − "
        "resident set just before the call) / bytes of (the primal's outputs + the gradients "
        "returned); its resolution is a page (4 kB), so it says nothing at the small size.",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in rows]
    missing = sorted({row.torch_unavailable for row in rows if row.torch_unavailable})
    lines += [""] + [f"n/a: {why}." for why in missing] + [""]
    lines += _notes(rows) + _errors(rows) + ["## Environment", ""]
    lines += [f"- {key}: {value}" for key, value in meta["environment"].items()]
    return "\n".join(lines) + "\n"


def _notes(rows: list[Row]) -> list[str]:
    kernels_of: dict[str, list[str]] = {}
    for row in rows:
        kernels = kernels_of.setdefault(row.kernel, [])
        kernels += [note for note in row.notes if note not in kernels]
    if not any(kernels_of.values()):
        return []
    lines = ["## Notes", ""]
    for kernel, notes in kernels_of.items():
        lines += [f"- {kernel}: {note}" for note in notes]
    return [*lines, ""]


def _errors(rows: list[Row]) -> list[str]:
    found: list[str] = []
    for row in rows:
        where = f"{row.kernel} {row.size}"
        for what, error in (
            ("polyflow primal", row.primal_error),
            (f"polyflow gradient ({row.grad_status})", row.grad_error),
            ("JAX", row.jax_error),
            ("PyTorch", row.torch_error),
            ("torch.compile", row.torch_compile_error),
            ("tapes, atomics, peak memory", row.metrics_error),
        ):
            if error:
                found.append(f"- {where}, {what}: `{error.replace(chr(10), ' ⏎ ')[:600]}`")
        if row.torch_max_rel_error is not None and row.torch_max_rel_error > TOLERANCE:
            found.append(
                f"- {where}: PyTorch's gradient is off JAX's by {row.torch_max_rel_error:.1e}"
            )
    return ["## Errors and unavailable results", "", *found, ""] if found else []


def to_json(rows: list[Row], meta: dict[str, Any]) -> str:
    records = []
    for row in rows:
        record = asdict(row)
        record["overhead"] = row.overhead
        record["correct"] = row.correct
        record["peak_ratio"] = row.peak_ratio
        records.append(record)
    return json.dumps({**meta, "tolerance": TOLERANCE, "rows": records}, indent=1)
