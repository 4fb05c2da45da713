"""A file's functions compiled in parallel: the module is cut into groups of functions, each
group goes through the pipeline, `opt` and `llc` in a forked worker process, and the objects are
joined into one (`cc -r`).

Functions that refer to each other (calls, wrappers and what they wrap) stay in one group, so
every private symbol is defined in the object that uses it; the other functions of the module
become declarations in a group's copy. Forking after the frontend costs nothing to set up (no
interpreter start, no re-parse) and each worker only touches its own functions, so time grows
with the largest group, not with the file, and the machine's cores share the work.
"""

from __future__ import annotations

import base64
import functools
import importlib
import json
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlir import ir

from polyflow import forked
from polyflow.backend.llvm_ir import compile_llvm_ir_to_object
from polyflow.options import Options
from polyflow.pipeline import run_pipeline

# A group of functions with fewer operations than this is not worth a process of its own (a
# fork, a second `opt` and `llc`, and joining the objects cost ~40 ms): two 50-line loop nests are
# ~400 operations each (their isl work runs on both cores then), a one-loop function ~30.
MIN_GROUP_OPS = 150


@dataclass
class GroupResult:
    """What the workers built, joined: one object and what the pipeline said."""

    data: bytes
    llvm_ir: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    schedules: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    cacheable: bool = True


def worker_count() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _raising() -> Any:
    # `raise` is a Python keyword: the package is loaded by name
    return importlib.import_module("polyflow.raise")


def _name(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def function_groups(
    module: ir.Module, count: int, min_group_ops: int = MIN_GROUP_OPS
) -> list[list[str]] | None:
    """The module's defined functions in at most `count` groups of about equal size (counted in
    operations), functions that refer to each other in one group; None when the module holds
    anything but functions at its top level (a global defined in two objects would clash), or
    when fewer than two groups would each have `min_group_ops` operations of work."""
    referenced_symbols = _raising().referenced_symbols
    defined: dict[str, ir.Operation] = {}
    for op in module.body.operations:
        operation = op.operation
        if operation.name != "func.func":
            return None
        if len(operation.regions[0].blocks) > 0:
            defined[_name(operation)] = operation
    if len(defined) < 2 or count < 2:
        return None
    parent = {name: name for name in defined}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    sizes: dict[str, int] = {}
    for name, operation in defined.items():
        for other in referenced_symbols(operation) & defined.keys():
            parent[root(other)] = root(name)
        sizes[name] = _op_count(operation)  # a rough measure of work
    components: dict[str, list[str]] = {}
    for name in defined:
        components.setdefault(root(name), []).append(name)
    groups: list[list[str]] = [[] for _ in range(min(count, len(components)))]
    load = [0] * len(groups)
    by_size = sorted(components.values(), key=lambda c: -sum(sizes[n] for n in c))
    for component in by_size:  # the largest first, each to the least loaded group
        k = load.index(min(load))
        groups[k] += component
        load[k] += sum(sizes[n] for n in component)
    if len(groups) < 2 or min(load) < min_group_ops:
        return None
    return [sorted(group) for group in groups if group]


def _op_count(op: ir.Operation) -> int:
    count = 0

    def visit(_inner: ir.Operation) -> ir.WalkResult:
        nonlocal count
        count += 1
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return count


def _keep_only(module: ir.Module, names: set[str]) -> None:
    """Turn every defined function not in `names` into a declaration (in place)."""
    for op in list(module.body.operations):
        operation = op.operation
        if _name(operation) in names or len(operation.regions[0].blocks) == 0:
            continue
        with ir.InsertionPoint(operation):
            _raising().declaration_of(operation)
        operation.erase()


def _build_group(module: ir.Module, names: list[str], options: Options) -> bytes:
    """In the worker: the group's object and what the pipeline said, as JSON."""
    start = time.perf_counter()
    _keep_only(module, set(names))
    kept = time.perf_counter() - start
    result = run_pipeline(module, options, stop_after="llvm")
    llvm_ir = result.llvm_ir or ""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="polyflow-group-") as tmp:
        data = compile_llvm_ir_to_object(llvm_ir, Path(tmp) / "group.o", options).read_bytes()
    timings = {"group": kept, **result.timings, "llc": time.perf_counter() - start}
    return json.dumps(
        {
            "object": base64.b64encode(data).decode(),
            "llvm_ir": llvm_ir,
            "warnings": result.warnings,
            "notes": result.notes,
            "schedules": result.schedules,
            "timings": timings,
            "cacheable": result.cacheable,
        }
    ).encode()


def build_groups(module: ir.Module, groups: list[list[str]], options: Options) -> GroupResult:
    """Compile each group of `module`'s functions in a forked worker, all at once, and join the
    objects; RuntimeError (naming the group) when a worker fails."""
    # A forked child has none of the parent's threads: MLIR must not hand work to its pool.
    module.context.enable_multithreading(False)
    try:
        children = [
            forked.fork_work(functools.partial(_build_group, module, names, options))
            for names in groups
        ]
        outputs = forked.collect(children)
    finally:
        module.context.enable_multithreading(True)
    results = []
    for child, names in zip(children, groups, strict=True):
        output = outputs[child]
        if output is None:
            raise RuntimeError(f"the process compiling {', '.join(names[:3])}... failed")
        results.append(json.loads(output))
    return _join(results, options)


def _join(results: list[dict[str, object]], options: Options) -> GroupResult:
    joined = GroupResult(b"")
    for result in results:
        joined.llvm_ir.append(str(result["llvm_ir"]))
        joined.warnings += list(result["warnings"])  # type: ignore[call-overload]
        joined.notes += list(result["notes"])  # type: ignore[call-overload]
        joined.schedules.update(dict(result["schedules"]))  # type: ignore[call-overload]
        for stage, seconds in dict(result["timings"]).items():  # type: ignore[call-overload]
            joined.timings[stage] = joined.timings.get(stage, 0.0) + float(seconds)
        joined.cacheable = joined.cacheable and bool(result["cacheable"])
    with tempfile.TemporaryDirectory(prefix="polyflow-join-") as tmp:
        paths = []
        for k, result in enumerate(results):
            path = Path(tmp) / f"group{k}.o"
            path.write_bytes(base64.b64decode(str(result["object"])))
            paths.append(str(path))
        out = Path(tmp) / "kernels.o"
        proc = subprocess.run(
            [options.cc, "-r", "-o", str(out), *paths], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise RuntimeError(f"joining the objects failed: {proc.stderr.strip()[:2000]}")
        joined.data = out.read_bytes()
    return joined


__all__ = ["MIN_GROUP_OPS", "GroupResult", "build_groups", "function_groups", "worker_count"]
