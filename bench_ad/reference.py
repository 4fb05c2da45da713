"""The parent's side of the JAX and PyTorch references: write a case's arrays to a directory,
run `bench_ad.reference_child` on it in a fresh interpreter, read back times and gradients."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench_ad.case import Case

REPO = Path(__file__).resolve().parent.parent


@dataclass
class ReferenceResult:
    """What one framework's child reported: times (seconds) by name, the gradients in `wrt`
    order, or why there are none (`unavailable`: not installed; `error`: it failed)."""

    times: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    grads: list[np.ndarray] | None = None
    unavailable: str | None = None
    error: str | None = None


def write_case(case: Case, directory: Path, repeat: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    spec = {
        "module": case.reference,
        "args": case.reference_args,
        "wrt": list(case.wrt),
        "repeat": repeat,
        "inputs": len(case.inputs),
        "seeds": len(case.seeds),
    }
    (directory / "spec.json").write_text(json.dumps(spec))
    for k, array in enumerate(case.inputs):
        np.save(directory / f"input{k}.npy", array)
    for k, array in enumerate(case.seeds):
        np.save(directory / f"seed{k}.npy", array)


def run_reference(framework: str, directory: Path, *, timeout_s: float) -> ReferenceResult:
    """Runs the child for `framework` ("jax" or "torch") on the case written to `directory`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["JAX_PLATFORMS"] = "cpu"  # the benchmark compares CPU code, even where a GPU is present
    command = [sys.executable, "-m", "bench_ad.reference_child", framework, str(directory)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return ReferenceResult(error=f"timed out after {timeout_s:.0f} s")
    report = directory / f"{framework}.json"
    if not report.exists():
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return ReferenceResult(error=f"child exited with {done.returncode}: {' | '.join(tail)}")
    data: dict[str, Any] = json.loads(report.read_text())
    result = ReferenceResult(
        unavailable=data.pop("unavailable", None), error=data.pop("error", None)
    )
    result.times = {k: v for k, v in data.items() if k.endswith("_s")}
    result.info = {k: v for k, v in data.items() if not k.endswith("_s")}
    files = sorted(directory.glob(f"{framework}-grad*.npy"), key=_grad_index)
    if files and result.error is None:
        result.grads = [np.load(f) for f in files]
    return result


def _grad_index(path: Path) -> int:
    return int(path.stem.rsplit("grad", 1)[1])
