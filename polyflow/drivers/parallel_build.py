"""A file's functions compiled in parallel: the module is cut into groups of functions, each
group goes through the pipeline, `opt` and `llc` in a forked worker process, and the objects are
joined into one (`cc -r`).

Functions that refer to each other (calls, wrappers and what they wrap) stay in one group, so
every private symbol is defined in the object that uses it; a worker copies its group's
functions into a module of their own. Forking after the frontend costs nothing to set up (no
interpreter start, no re-parse) and each worker only touches its own functions, so the work
grows with the file, not faster, and the machine's cores share it: there are a few groups per
core, and a worker that is done takes the next group.
"""

from __future__ import annotations

import base64
import functools
import json
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from mlir import ir

from polyflow import forked
from polyflow.ir.functions import referenced_symbols
from polyflow.ir.names import symbol_name
from polyflow.lowering.llvm_ir import compile_llvm_ir_to_object
from polyflow.options import Options
from polyflow.pipeline import run_pipeline
from polyflow.report import CompileReport
from polyflow.target import host_cores

# A group of functions with fewer operations than this is not worth a process of its own (a
# fork, a second `opt` and `llc`, and joining the objects cost ~40 ms): two 50-line loop nests are
# ~400 operations each (their isl work runs on both cores then), a one-loop function ~30.
MIN_GROUP_OPS = 150
# Groups per worker process: more, smaller groups even out what sizes do not predict (a worker
# that finishes early takes the next one), at ~0.1 s each (a fork, a module copy, starting `opt`
# and `llc`); so a group beyond one per worker must hold at least BALANCE_GROUP_OPS operations
# (~100 small loop functions, ~3 s of work). 200 small functions: 2 groups, 3.2 s (8 groups:
# 4.0 s); 2,000: 8 groups, where 2 left one worker idle for 8 s.
GROUPS_PER_WORKER = 4
BALANCE_GROUP_OPS = 5000


@dataclass
class GroupResult:
    """What the workers built, joined: one object and what the pipeline said (each worker's
    compile report, joined; its timings summed over the workers)."""

    data: bytes
    llvm_ir: list[str] = field(default_factory=list)
    report: CompileReport = field(default_factory=CompileReport)
    cacheable: bool = True


def worker_count() -> int:
    """The cores this process may use (the target's, `polyflow.target.host_cores`)."""
    return host_cores()


def function_groups(
    module: ir.Module,
    workers: int,
    min_group_ops: int = MIN_GROUP_OPS,
    balance_group_ops: int = BALANCE_GROUP_OPS,
) -> list[list[str]] | None:
    """The module's defined functions in groups for `workers` processes, the largest group
    first: runs of neighbouring functions of about equal size (counted in operations), one per
    worker, or up to `GROUPS_PER_WORKER` per worker where each has `balance_group_ops`
    operations, functions that refer to each other in one group. None when the module holds
    anything but functions at its top level (a global defined in two objects would clash),
    for one worker, or when fewer than two groups would have `min_group_ops` operations of
    work each."""
    defined: dict[str, ir.Operation] = {}
    for op in module.body.operations:
        operation = op.operation
        if operation.name != "func.func":
            return None
        if len(operation.regions[0].blocks) > 0:
            defined[symbol_name(operation)] = operation
    if len(defined) < 2 or workers < 2:
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
    components: dict[str, list[str]] = {}  # in the order of their first function
    for name in defined:
        components.setdefault(root(name), []).append(name)
    total = sum(sizes.values())
    balancing = total // max(balance_group_ops, 1)
    count = min(
        max(workers, min(balancing, workers * GROUPS_PER_WORKER)),
        len(components),
        total // max(min_group_ops, 1),
    )
    if count < 2:
        return None
    # Neighbours, not the sizes sorted: functions of equal size can differ in work several
    # times over (an OpenMP reduction against a copy loop), and a file's neighbouring functions
    # mix its kinds of work; workers take the groups as they free up, which evens out the rest.
    # Each component goes to the group its middle falls in, counted in operations from the
    # file's start: equal shares, whatever the sizes (two kernels of 400 and 500 operations go
    # to two groups).
    groups: list[list[str]] = [[] for _ in range(count)]
    loads = [0] * count
    done = 0
    for component in components.values():
        size = sum(sizes[n] for n in component)
        k = min(count - 1, int((done + size / 2) * count / total))
        groups[k] += component
        loads[k] += size
        done += size
    groups = [g for g in groups if g]
    loads = [load for load in loads if load]
    while len(groups) > 1 and min(loads) < min_group_ops:
        least = loads.index(min(loads))
        last = len(groups) - 1
        merge_left = least == last or (least > 0 and loads[least - 1] < loads[least + 1])
        low, high = (least - 1, least) if merge_left else (least, least + 1)
        groups[low : high + 1] = [groups[low] + groups[high]]
        loads[low : high + 1] = [loads[low] + loads[high]]
    if len(groups) < 2:
        return None
    order = sorted(range(len(groups)), key=lambda k: -loads[k])
    return [groups[k] for k in order]


def _op_count(op: ir.Operation) -> int:
    count = 0

    def visit(_inner: ir.Operation) -> ir.WalkResult:
        nonlocal count
        count += 1
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return count


def _group_module(module: ir.Module, names: set[str]) -> ir.Module:
    """A module of `module`'s functions named in `names` and its declarations, in order.
    Groups are closed under references, so nothing in it refers to a function left out; it is
    the size of its group, and whatever walks the module per function costs that much, not
    the file's size."""
    group = ir.Module.create(loc=module.operation.location)
    for attribute in module.operation.attributes:
        group.operation.attributes[attribute.name] = attribute.attr
    with ir.InsertionPoint(group.body):
        for op in module.body.operations:
            operation = op.operation
            if symbol_name(operation) in names or len(operation.regions[0].blocks) == 0:
                operation.clone()
    return group


def _build_group(module: ir.Module, names: list[str], options: Options) -> bytes:
    """In the worker: the group's object and what the pipeline said, as JSON."""
    start = time.perf_counter()
    with module.context:
        group = _group_module(module, set(names))
    kept = time.perf_counter() - start
    result = run_pipeline(group, options, stop_after="llvm")
    llvm_ir = result.llvm_ir or ""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="polyflow-group-") as tmp:
        data = compile_llvm_ir_to_object(llvm_ir, Path(tmp) / "group.o", options).read_bytes()
    report = result.report
    report.timings = {"group": kept, **report.timings, "llc": time.perf_counter() - start}
    return json.dumps(
        {
            "object": base64.b64encode(data).decode(),
            "llvm_ir": llvm_ir,
            "report": report.to_dict(),
            "cacheable": result.cacheable,
        }
    ).encode()


def build_groups(
    module: ir.Module, groups: list[list[str]], options: Options, workers: int
) -> GroupResult:
    """Compile each group of `module`'s functions in a forked worker, `workers` at a time, and
    join the objects; RuntimeError (naming the group) when a worker fails."""
    # A forked child has none of the parent's threads: MLIR must not hand work to its pool.
    module.context.enable_multithreading(False)
    try:
        outputs = forked.run_pool(
            [functools.partial(_build_group, module, names, options) for names in groups],
            workers,
        )
    finally:
        module.context.enable_multithreading(True)
    results = []
    for output, names in zip(outputs, groups, strict=True):
        if output is None:
            raise RuntimeError(f"the process compiling {', '.join(names[:3])}... failed")
        results.append(json.loads(output))
    return _join(results, options)


def _join(results: list[dict[str, object]], options: Options) -> GroupResult:
    joined = GroupResult(b"")
    for result in results:
        joined.llvm_ir.append(str(result["llvm_ir"]))
        joined.report.extend(CompileReport.from_dict(result["report"]))  # type: ignore[arg-type]
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


__all__ = [
    "BALANCE_GROUP_OPS",
    "GROUPS_PER_WORKER",
    "MIN_GROUP_OPS",
    "GroupResult",
    "build_groups",
    "function_groups",
    "worker_count",
]
