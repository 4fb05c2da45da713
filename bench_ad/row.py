"""One row of the results: a kernel at one size, as polyflow, JAX and PyTorch ran it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

TOLERANCE = 1e-9  # polyflow's gradient must match JAX's to this relative error (float64)


@dataclass
class Row:
    kernel: str
    size: str
    # polyflow: best times, first calls (compile included), or why there are none
    primal_s: float | None = None
    primal_first_s: float | None = None
    grad_s: float | None = None
    grad_first_s: float | None = None
    primal_error: str | None = None
    grad_error: str | None = None
    grad_status: str = "ok"  # ok | compile error | error | not available yet
    # JAX (jit of vjp) and PyTorch (eager autograd; torch.compile)
    jax: dict[str, float] = field(default_factory=dict)
    jax_error: str | None = None
    torch: dict[str, float] = field(default_factory=dict)
    torch_error: str | None = None
    torch_unavailable: str | None = None  # why PyTorch did not run at all (not installed)
    torch_compile_error: str | None = None
    # correctness: max |polyflow − JAX| / max |JAX| over the differentiated inputs
    max_rel_error: float | None = None
    torch_max_rel_error: float | None = None
    # polyflow's gradient: the bytes of the arrays it allocates itself (static shapes; how many
    # more have dynamic ones), its atomics (by stage), the peak of its extra resident memory in
    # one call and the bytes of the primal outputs and returned gradients (the ratio's unit)
    tape_bytes: int | None = None
    tape_dynamic: int = 0
    atomics: int | None = None
    atomics_by_stage: dict[str, int] = field(default_factory=dict)
    peak_extra_bytes: int | None = None
    result_bytes: int | None = None
    metrics_error: str | None = None
    notes: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)  # of the references that ran

    @property
    def overhead(self) -> float | None:
        if self.grad_s is None or not self.primal_s:
            return None
        return self.grad_s / self.primal_s

    @property
    def peak_ratio(self) -> float | None:
        if self.peak_extra_bytes is None or not self.result_bytes:
            return None
        return self.peak_extra_bytes / self.result_bytes

    @property
    def correct(self) -> bool | None:
        return None if self.max_rel_error is None else self.max_rel_error <= TOLERANCE


def max_relative_error(got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> float:
    """The largest over the pairs of max |got − want| / max |want| (normwise: elementwise
    relative errors blow up where a gradient entry is 0 in exact arithmetic)."""
    if len(got) != len(want):
        return float("inf")
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        if np.shape(g) != np.shape(w):
            return float("inf")
        scale = float(np.max(np.abs(w), initial=0.0)) or 1.0
        worst = max(worst, float(np.max(np.abs(np.asarray(g) - w), initial=0.0)) / scale)
    return worst
