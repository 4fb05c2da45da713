"""What a benchmark run produces: one Cell per kernel and configuration, gathered in a Suite.

Kept free of the runner and of the report writers, so that both (and the tests, which
fabricate results) share one model, and a Suite goes to JSON and back unchanged.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

Status = Literal[
    "ok",  # built, ran every time, validated
    "missing",  # the configuration's tool is not on this machine
    "build-failed",
    "run-failed",  # a non-zero exit, or no `time:` line
    "timeout",
    "invalid",  # the dump differs from the reference's beyond the tolerance
    "unvalidated",  # ran, but the reference (gcc -O2) failed, so nothing to compare with
    "not-relevant",  # not run: the configuration does nothing to this kernel (sharing.py)
]

FAILED: frozenset[str] = frozenset(
    {"build-failed", "run-failed", "timeout", "invalid", "unvalidated"}
)


@dataclass
class Cell:
    """One kernel built and run with one configuration (or with the reference)."""

    kernel: str
    config: str
    status: Status = "ok"
    message: str = ""  # why, when the status is not ok, or why the runs are shared
    build_command: str = ""
    build_seconds: float | None = None
    times: list[float] = field(default_factory=list)  # every run, in order
    max_rel_err: float | None = None  # the largest validation error over the runs
    compiled: list[str] | None = None  # polyflow: functions compiled through MLIR
    fallbacks: dict[str, str] | None = None  # polyflow: functions left to the C compiler, why
    warnings: list[str] = field(default_factory=list)
    parallel_functions: list[str] | None = None  # polyflow: the functions that fork threads
    # Not run: the times are those of this configuration, whose program is the same code.
    same_as: str | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class ConfigInfo:
    """A configuration as run: its name, what it is, how it built, and why it is missing."""

    name: str
    description: str
    build: str
    threads: int
    missing: str | None = None
    # built under -ffast-math (the reassociating contract): compared with gcc -ffast-math and
    # validated at `Suite.rtol_fast`
    fast_math: bool = False


@dataclass
class Suite:
    """A whole run: parameters, machine, configurations, and every cell."""

    size: str
    threads: int
    repeat: int
    rtol: float
    timeout: float
    started: str  # ISO 8601, local time
    slowdown_limit: float = 0.0  # runs stop at this many times the reference's time (0: off)
    rtol_fast: float = 1e-4  # the validation tolerance of -ffast-math configurations
    seconds: float = 0.0  # wall time of the whole run
    machine: dict[str, Any] = field(default_factory=dict)
    configs: list[ConfigInfo] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)  # the kernels that were run
    missing_kernels: dict[str, str] = field(default_factory=dict)  # requested, no file: why
    reference: dict[str, Cell] = field(default_factory=dict)  # gcc -O2, per kernel
    cells: list[Cell] = field(default_factory=list)
    completed: list[str] = field(default_factory=list)  # kernels whose every run is recorded

    def cell(self, kernel: str, config: str) -> Cell | None:
        for c in self.cells:
            if c.kernel == kernel and c.config == config:
                return c
        return None

    def is_fast(self, config: str) -> bool:
        """Whether configuration `config` was built under -ffast-math."""
        return any(c.name == config and c.fast_math for c in self.configs)

    @property
    def config_names(self) -> list[str]:
        return [c.name for c in self.configs]

    def failures(self) -> list[Cell]:
        """Every failed cell, the reference's included (missing configurations are not failures)."""
        return [c for c in [*self.reference.values(), *self.cells] if c.status in FAILED]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for cell_data, cell in zip(data["cells"], self.cells, strict=True):
            cell_data["median"] = cell.median
        for name, cell in self.reference.items():
            data["reference"][name]["median"] = cell.median
        finite: dict[str, Any] = _finite(data)
        return finite

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Suite:
        """The Suite that to_json() wrote (derived keys, like medians, are ignored)."""
        cell_keys = {f.name for f in fields(Cell)}
        suite_keys = {f.name for f in fields(cls)} - {"configs", "reference", "cells"}
        data = {"completed": list(data.get("kernels", [])), **data}  # runs before checkpoints

        def cell(d: dict[str, Any]) -> Cell:
            d = {k: v for k, v in d.items() if k in cell_keys}
            if d.get("max_rel_err") == "inf":
                d["max_rel_err"] = math.inf
            return Cell(**d)

        return cls(
            **{k: v for k, v in data.items() if k in suite_keys},
            configs=[ConfigInfo(**c) for c in data.get("configs", [])],
            reference={k: cell(v) for k, v in data.get("reference", {}).items()},
            cells=[cell(c) for c in data.get("cells", [])],
        )


def _finite(value: Any) -> Any:
    """JSON has no infinity: write it as the string "inf"."""
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
