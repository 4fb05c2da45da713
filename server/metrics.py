"""The service's metrics, kept and written by `prometheus_client` (GET /metrics): requests by
method, route template and status; cache hits and misses; compile latency; the worker pool."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.routing import Match, Router
from starlette.types import Scope

# Upper bounds of the compile-latency histogram, in seconds: cache hits fall in the first
# buckets, compiles of small kernels around 0.5-2 s, large ones up to the time limit.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    """What /metrics reports, in a registry of its own (one per app: tests start several)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "polyflow_requests",
            "HTTP requests by method, route template and status.",
            ["method", "path", "status"],
            registry=r,
        )
        self.cache_hits = Counter(
            "polyflow_cache_hits", "Compile requests answered from the cache.", registry=r
        )
        self.cache_misses = Counter(
            "polyflow_cache_misses", "Compile requests that needed a compile.", registry=r
        )
        self.latency = Histogram(
            "polyflow_compile_seconds",
            "Latency of successful compile requests.",
            ["cache"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge(
            "polyflow_queue_depth", "Compile jobs waiting for a worker.", registry=r
        )
        self.busy_workers = Gauge("polyflow_busy_workers", "Workers running a job.", registry=r)
        self.workers_replaced = Counter(
            "polyflow_workers_replaced",
            "Workers killed (time limit) or dead and replaced.",
            registry=r,
        )
        self._replaced_seen = 0

    def request(self, method: str, path: str, status: int) -> None:
        self.requests.labels(method, path, str(status)).inc()

    def render(self, *, queue_depth: int, busy_workers: int, replaced_workers: int) -> bytes:
        """The exposition text, the pool's state read now."""
        self.queue_depth.set(queue_depth)
        self.busy_workers.set(busy_workers)
        if replaced_workers > self._replaced_seen:
            self.workers_replaced.inc(replaced_workers - self._replaced_seen)
            self._replaced_seen = replaced_workers
        return generate_latest(self.registry)


def route_template(router: Router, scope: Scope) -> str:
    """The template of the route `scope` went to (`/v1/artifacts/{key}/{name}`, `/docs`): no
    key or file name in a label; `unmatched` for a path no route serves."""
    route = scope.get("route")
    if route is not None and hasattr(route, "path"):
        return str(route.path)
    for candidate in router.routes:  # routes Starlette serves itself (/docs, /openapi.json)
        match, _ = candidate.matches(scope)
        if match == Match.FULL and hasattr(candidate, "path"):
            return str(candidate.path)
    return "unmatched"


__all__ = ["CONTENT_TYPE", "Metrics", "route_template"]
