"""The service's counters, in Prometheus' text exposition format (GET /metrics)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

# Upper bounds of the compile-latency histogram, in seconds: cache hits fall in the first
# buckets, compiles of small kernels around 0.5-2 s, large ones up to the time limit.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0)


@dataclass
class Histogram:
    """Cumulative buckets, a sum and a count, as Prometheus histograms are."""

    bounds: tuple[float, ...] = LATENCY_BUCKETS
    counts: list[int] = field(default_factory=lambda: [0] * len(LATENCY_BUCKETS))
    total: float = 0.0
    count: int = 0

    def observe(self, seconds: float) -> None:
        for pos, bound in enumerate(self.bounds):
            if seconds <= bound:
                self.counts[pos] += 1
        self.total += seconds
        self.count += 1

    def lines(self, name: str, labels: str) -> list[str]:
        out = [
            f'{name}_bucket{{{labels}{"," if labels else ""}le="{bound}"}} {count}'
            for bound, count in zip(self.bounds, self.counts, strict=True)
        ]
        out.append(f'{name}_bucket{{{labels}{"," if labels else ""}le="+Inf"}} {self.count}')
        out.append(f"{name}_sum{{{labels}}} {self.total}")
        out.append(f"{name}_count{{{labels}}} {self.count}")
        return out


@dataclass
class Metrics:
    """What /metrics reports; the app updates it, one event loop thread at a time."""

    requests: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    cache_hits: int = 0
    cache_misses: int = 0
    latency: dict[str, Histogram] = field(
        default_factory=lambda: {"hit": Histogram(), "miss": Histogram()}
    )

    def render(self, *, queue_depth: int, busy_workers: int, replaced_workers: int) -> str:
        lines = [
            "# HELP polyflow_requests_total HTTP requests by method, path and status.",
            "# TYPE polyflow_requests_total counter",
        ]
        for (method, path, status), count in sorted(self.requests.items()):
            lines.append(
                f'polyflow_requests_total{{method="{method}",path="{path}",status="{status}"}} '
                f"{count}"
            )
        lines += [
            "# HELP polyflow_cache_hits_total Compile requests answered from the cache.",
            "# TYPE polyflow_cache_hits_total counter",
            f"polyflow_cache_hits_total {self.cache_hits}",
            "# HELP polyflow_cache_misses_total Compile requests that needed a compile.",
            "# TYPE polyflow_cache_misses_total counter",
            f"polyflow_cache_misses_total {self.cache_misses}",
            "# HELP polyflow_compile_seconds Latency of successful compile requests.",
            "# TYPE polyflow_compile_seconds histogram",
        ]
        for outcome, histogram in self.latency.items():
            lines += histogram.lines("polyflow_compile_seconds", f'cache="{outcome}"')
        lines += [
            "# HELP polyflow_queue_depth Compile jobs waiting for a worker.",
            "# TYPE polyflow_queue_depth gauge",
            f"polyflow_queue_depth {queue_depth}",
            "# HELP polyflow_busy_workers Workers running a job.",
            "# TYPE polyflow_busy_workers gauge",
            f"polyflow_busy_workers {busy_workers}",
            "# HELP polyflow_workers_replaced_total Workers killed (time limit) or dead and replaced.",
            "# TYPE polyflow_workers_replaced_total counter",
            f"polyflow_workers_replaced_total {replaced_workers}",
        ]
        return "\n".join(lines) + "\n"
