"""Best-of-N wall-clock timing with the first call (compilation included) kept apart."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

_T = TypeVar("_T")


@dataclass(frozen=True)
class Timed:
    first_s: float  # the first call: compilation, caches warming, and one run
    best_s: float  # the fastest of the calls after it


def best_of(fn: Callable[[], _T], repeat: int) -> tuple[Timed, _T]:
    """Times `fn()` once as a warm-up, then `repeat` more times; returns the timings and the
    last call's result."""
    start = time.perf_counter()
    result = fn()
    first = time.perf_counter() - start
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return Timed(first, best), result
