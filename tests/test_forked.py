"""Forked children and MLIR contexts (polyflow/ir/contexts.py): a child that drops a context it
inherited, whose thread pool had threads in the parent, must not wait for threads it does not
have. Before contexts were paused around forks, such a child hung until its deadline: under
`--compile-timeout`, trivial functions were reported as running past it."""

from __future__ import annotations

import gc
import time

from mlir import ir
from mlir.passmanager import PassManager

from polyflow import forked
from polyflow.ir.contexts import new_context

FUNCTIONS = "\n".join(
    f"func.func @f{k}(%a: i32) -> i32 {{ %0 = arith.addi %a, %a : i32 return %0 : i32 }}"
    for k in range(64)
)


def _busy_context() -> ir.Context:
    """A context whose thread pool ran work (function passes over many functions)."""
    context = new_context()
    with context:
        module = ir.Module.parse(FUNCTIONS)
        PassManager.parse("builtin.module(func.func(canonicalize,cse))").run(module.operation)
    return context


def test_a_child_may_drop_contexts_it_inherited() -> None:
    held = [_busy_context()]

    def work() -> bytes:
        held.clear()  # the last reference: the context is destroyed in the child
        gc.collect()
        return b"done"

    child = forked.fork_work(work)
    start = time.monotonic()
    assert forked.collect([child], time.monotonic() + 30)[child] == b"done"
    assert time.monotonic() - start < 30
    # and the parent's context works as before, threads and all
    with held[0]:
        module = ir.Module.parse(FUNCTIONS)
        PassManager.parse("builtin.module(func.func(canonicalize))").run(module.operation)
    assert held[0].get_num_threads() >= 1
