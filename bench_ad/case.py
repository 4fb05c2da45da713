"""What one benchmark row measures: a kernel at one size, as polyflow runs it and as the JAX and
PyTorch references (in a child process) see it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from bench_ad.gradient_ir import GradientIR

Size = Literal["small", "full"]


class NotAvailable(Exception):
    """polyflow lacks the API a kernel needs (yet): the row says so instead of failing."""


@dataclass
class Case:
    """One kernel at one size.

    `inputs` are the reference function's positional arguments (0-d arrays for scalars), `wrt`
    the positions differentiated, `seeds` one adjoint per reference output. `primal` and
    `gradient` run polyflow on the same inputs; `gradient` returns the adjoints in `wrt` order.
    `reference` names the module whose `jax_function(**reference_args)` and
    `torch_function(**reference_args)` build the reference (imported in the child only).
    `gradient_ir()`, after `gradient` ran, gives the compiled gradient's function and stages.
    """

    kernel: str
    label: str
    reference: str
    inputs: list[np.ndarray]
    wrt: tuple[int, ...]
    seeds: list[np.ndarray]
    primal: Callable[[], object]
    gradient: Callable[[], Sequence[np.ndarray]]
    reference_args: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    gradient_ir: Callable[[], GradientIR | None] = lambda: None
    # frees what the gradient keeps between calls (polyflow.tc's buffers), so that the peak
    # memory of a call is measured over the inputs alone
    release: Callable[[], None] = lambda: None


@dataclass(frozen=True)
class CaseSpec:
    """A case not built yet: building allocates its inputs, so the runner builds one at a time."""

    kernel: str
    label: str
    build: Callable[[], Case]


def random_inputs(rng: np.random.Generator, *shapes: tuple[int, ...]) -> list[np.ndarray]:
    """Standard-normal float64 arrays, C-contiguous, one per shape."""
    return [np.ascontiguousarray(rng.standard_normal(shape)) for shape in shapes]


def adjoints(result: object) -> tuple[np.ndarray, ...]:
    """A gradient call's result (one array or a tuple) as a tuple."""
    if isinstance(result, tuple):
        return result
    assert isinstance(result, np.ndarray)
    return (result,)
