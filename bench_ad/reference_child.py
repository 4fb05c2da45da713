"""The child process that runs a case in JAX or PyTorch:
`python -m bench_ad.reference_child jax|torch DIR`.

DIR holds `spec.json` (the reference module and its arguments, the differentiated positions,
the repeat count), `input<k>.npy` and `seed<k>.npy`. The child writes `<framework>.json` (times,
versions, errors) and `<framework>-grad<k>.npy`. Only this process imports JAX or PyTorch: the
process that calls polyflow must not hold their threads when polyflow forks.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench_ad.timing import Timed, best_of


def _load(directory: Path) -> tuple[dict[str, Any], list[np.ndarray], list[np.ndarray]]:
    spec = json.loads((directory / "spec.json").read_text())
    inputs = [np.load(directory / f"input{k}.npy") for k in range(spec["inputs"])]
    seeds = [np.load(directory / f"seed{k}.npy") for k in range(spec["seeds"])]
    return spec, inputs, seeds


def _times(prefix: str, timed: Timed) -> dict[str, float]:
    return {f"{prefix}_first_s": timed.first_s, f"{prefix}_s": timed.best_s}


def run_jax(directory: Path) -> dict[str, Any]:
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    spec, inputs, seeds = _load(directory)
    f = importlib.import_module(spec["module"]).jax_function(**spec["args"])
    wrt: list[int] = spec["wrt"]
    xs = [jnp.asarray(x) for x in inputs]
    ss = tuple(jnp.asarray(s) for s in seeds)

    def gradient(xs: list[Any], seeds: tuple[Any, ...]) -> Any:
        def of_wrt(*active: Any) -> Any:
            full = list(xs)
            for position, value in zip(wrt, active, strict=True):
                full[position] = value
            return tuple(f(*full))

        _, pullback = jax.vjp(of_wrt, *[xs[k] for k in wrt])
        return pullback(seeds)

    result: dict[str, Any] = {"version": jax.__version__, "devices": str(jax.devices())}
    # compile apart (jit's lower + compile), so that the first call below is a plain run
    start = time.perf_counter()
    primal = jax.jit(lambda xs: f(*xs)).lower(xs).compile()
    result["primal_compile_s"] = time.perf_counter() - start
    start = time.perf_counter()
    grad = jax.jit(gradient).lower(xs, ss).compile()
    result["grad_compile_s"] = time.perf_counter() - start
    repeat = spec["repeat"]
    timed, _ = best_of(lambda: jax.block_until_ready(primal(xs)), repeat)
    result |= _times("primal", timed)
    timed, grads = best_of(lambda: jax.block_until_ready(grad(xs, ss)), repeat)
    result |= _times("grad", timed)
    _save_grads(directory, "jax", [np.asarray(g) for g in grads])
    return result


def run_torch(directory: Path) -> dict[str, Any]:
    import torch

    spec, inputs, seeds = _load(directory)
    module = importlib.import_module(spec["module"])
    f = module.torch_function(**spec["args"])
    wrt: list[int] = spec["wrt"]
    xs = [torch.from_numpy(x) for x in inputs]
    for k in wrt:
        xs[k].requires_grad_(True)
    ss = [torch.from_numpy(s) for s in seeds]
    repeat = spec["repeat"]

    def gradient_of(fn: Callable[..., Any]) -> Callable[[], list[np.ndarray]]:
        def run() -> list[np.ndarray]:
            outputs = list(fn(*xs))
            grads = torch.autograd.grad(outputs, [xs[k] for k in wrt], ss, allow_unused=True)
            return [
                np.zeros(inputs[k].shape) if g is None else g.detach().numpy()
                for k, g in zip(wrt, grads, strict=True)
            ]

        return run

    result: dict[str, Any] = {"version": torch.__version__, "threads": torch.get_num_threads()}
    with torch.no_grad():
        timed, _ = best_of(lambda: f(*xs), repeat)
    result |= _times("primal", timed)
    timed, grads = best_of(gradient_of(f), repeat)
    result |= _times("grad", timed)
    _save_grads(directory, "torch", grads)
    try:  # optional: needs a working inductor toolchain
        timed, _ = best_of(gradient_of(torch.compile(f)), repeat)
        result |= _times("compiled_grad", timed)
    except Exception as error:
        result["compiled_error"] = f"{type(error).__name__}: {error}".splitlines()[0]
    return result


def _save_grads(directory: Path, framework: str, grads: list[np.ndarray]) -> None:
    for k, g in enumerate(grads):
        np.save(directory / f"{framework}-grad{k}.npy", g)


RUNNERS = {"jax": run_jax, "torch": run_torch}


def main(argv: list[str]) -> int:
    framework, directory = argv[0], Path(argv[1])
    try:
        if importlib.util.find_spec(framework) is None:
            result = {"unavailable": f"{framework} is not installed"}
        else:
            result = RUNNERS[framework](directory)
    except Exception as error:
        traceback.print_exc()
        result = {"error": f"{type(error).__name__}: {error}"}
    (directory / f"{framework}.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
