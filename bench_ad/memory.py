"""The peak resident memory of one call over that held just before it: a thread samples
/proc/self/statm (resident pages × page size) every `INTERVAL_S` while the call runs."""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")
INTERVAL_S = 0.0005
STATM = "/proc/self/statm"
PAGE = os.sysconf("SC_PAGE_SIZE")


def _resident(fd: int) -> int:
    return int(os.pread(fd, 128, 0).split()[1]) * PAGE


def _release_free_memory() -> None:
    """Hands the allocator's free pages back to the system (glibc's malloc_trim), so that what
    the call allocates counts even where it reuses memory freed by earlier calls."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def peak_extra_resident(fn: Callable[[], _T]) -> tuple[int, _T] | None:
    """(the peak resident bytes during `fn()` minus those just before it, `fn()`'s result), or
    None where /proc/self/statm does not exist (not Linux)."""
    if not os.path.exists(STATM):
        return None
    _release_free_memory()
    fd = os.open(STATM, os.O_RDONLY)
    ready, stop = threading.Event(), threading.Event()
    peak = [0]

    def sample() -> None:
        ready.set()
        while not stop.wait(INTERVAL_S):
            peak[0] = max(peak[0], _resident(fd))

    switch = sys.getswitchinterval()
    sys.setswitchinterval(INTERVAL_S)  # the sampler gets the GIL back from Python code too
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        ready.wait()
        before = _resident(fd)
        result = fn()
        after = _resident(fd)
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(switch)
        os.close(fd)
    return max(0, peak[0] - before, after - before), result
