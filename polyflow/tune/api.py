"""`fn.autotune(*example_inputs, budget="2m")` for the Python API's callables: a TC definition
(`polyflow.tc.define`) or a C function (`polyflow.compile_c`). The tuning runs on the example
inputs (each candidate's outputs checked against the default build's), is stored in the tuning
database, and the tuned callable comes back; later `define`s / `compile_c`s of the same kernel
(and for TC the same shapes) find the tuning there."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from polyflow.storage.tuning import TuningDB, apply_choices
from polyflow.tune.executors import DaskExecutor, Executor, LocalExecutor
from polyflow.tune.tasks import CFunction, TcKernel
from polyflow.tune.tuner import Progress, TuneResult, parse_duration, tune


def run_tuning(
    task: Any,
    *,
    budget: float | str | None,
    candidates: int | None,
    search: str,
    workers: int,
    dask: str | None,
    db: str | None,
    seed: int,
    progress: bool,
    name: str,
) -> TuneResult:
    """`tune(task)` with the API's arguments: a time budget unless only `candidates` is given,
    local workers or a Dask cluster, the given or the shared tuning database."""
    executor: Executor = DaskExecutor(dask) if dask else LocalExecutor(workers)
    seconds = parse_duration(budget) if budget is not None else None
    if seconds is None and candidates is None:
        seconds = 120.0
    try:
        return tune(
            task,
            search=search,
            budget=seconds,
            max_candidates=candidates,
            executor=executor,
            db=TuningDB(db),
            seed=seed,
            progress=_printer(name) if progress else None,
        )
    finally:
        executor.close()


def autotune_tc(fn: Any, args: tuple[Any, ...], **how: Any) -> Any:
    """Tune TC definition `fn` (a `TcFunction`) for arguments like `args`; the tuned
    `TcFunction` (its `last_tuning`: the `TuneResult`)."""
    if fn.options.target == "cuda":
        raise ValueError("autotune runs on the CPU for now: tune a CUDA kernel with target='cpu'")
    arrays = fn._arrays(args)
    task = TcKernel(
        fn.source,
        fn.name,
        fn.options.model_dump(exclude_unset=True),
        tuple((tuple(a.shape), a.dtype.name) for a in arrays),
        arrays=tuple(np.ascontiguousarray(a) for a in arrays),
    )
    result = run_tuning(task, name=fn.name, **how)
    tuned = type(fn)(
        fn.source,
        fn.file,
        fn.inferred,
        fn._callees,
        apply_choices(fn.options, result.best_choices).model_copy(update={"tuned": False}),
    )
    tuned.last_tuning = fn.last_tuning = result
    return tuned


def autotune_c(fn: Any, args: tuple[Any, ...], **how: Any) -> Any:
    """Tune C function `fn` (a `CompiledFunction` of `compile_c`) on arguments `args`; the
    tuned `CompiledFunction` (its `last_tuning`: the `TuneResult`)."""
    from polyflow.drivers.jit import compile_c

    text, filename, source_dir, options = fn.origin
    if options.target == "cuda":
        raise ValueError("autotune runs on the CPU for now")
    task = CFunction(
        text,
        filename,
        fn.name,
        options.model_dump(exclude_unset=True),
        tuple(np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a for a in args),
        source_dir=str(source_dir) if source_dir else None,
    )
    result = run_tuning(task, name=fn.name, **how)
    tuned_options = apply_choices(options, result.best_choices).model_copy(update={"tuned": False})
    tuned = compile_c(text, fn.name, options=tuned_options)
    tuned.last_tuning = fn.last_tuning = result
    return tuned


def _printer(name: str) -> Callable[[Progress], None]:
    """One line per candidate (`autotune(progress=True)`)."""

    def show(event: Progress) -> None:
        best = f"{event.best_seconds * 1e3:.3f} ms" if event.best_seconds else "-"
        print(f"autotune {name}: {event.tried} candidates, best {best}", flush=True)

    return show
