"""MLIR contexts that survive `fork()`: every context polyflow makes comes from `new_context`.

A context with multithreading on owns an LLVM thread pool, whose threads a forked child does
not have. When the child dropped an inherited context (any object of an earlier compile that
held one), the pool's destructor waited forever for those threads: a child compiling a trivial
function under `--compile-timeout` hung until its deadline. So, just before any fork, every
live context polyflow made has its multithreading turned off (its pool joined and freed), and
turned back on after the fork in the parent (a context someone had turned off comes back on:
polyflow's own code turns contexts off only around its forks); the child has no pools to wait
for, and its contexts stay single-threaded.
"""

from __future__ import annotations

import os
import weakref

from mlir import ir

_LIVE: weakref.WeakSet[ir.Context] = weakref.WeakSet()
_PAUSED: list[weakref.ref[ir.Context]] = []


def new_context() -> ir.Context:
    """A new MLIR context (multithreading on), safe across `fork()`."""
    context = ir.Context()
    _LIVE.add(context)
    return context


def _pause_threads() -> None:
    for context in list(_LIVE):
        context.enable_multithreading(False)  # joins and frees its pool (none when off)
        _PAUSED.append(weakref.ref(context))


def _resume_threads() -> None:
    while _PAUSED:
        context = _PAUSED.pop()()
        if context is not None:
            context.enable_multithreading(True)


def _forget_paused() -> None:  # in the child: its contexts stay single-threaded
    _PAUSED.clear()


os.register_at_fork(
    before=_pause_threads, after_in_parent=_resume_threads, after_in_child=_forget_paused
)
