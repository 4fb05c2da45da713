"""Where candidates run: local worker processes, or the workers of a Dask cluster.

An executor takes jobs (`worker.Job`) and returns futures of their results; `slots` says how
many it runs at once, so the tuner keeps that many in flight. Each job runs in a process of its
own (`worker.run_isolated`) wherever it runs, so a crash or a hang costs one candidate; timings
take their cores machine-wide (`worker.core_slots`), so workers on one machine never time two
candidates on one core.

* `LocalExecutor(workers)`: threads that each start one job process at a time (the default,
  embedded in `polyflow tune`, `fn.autotune` and the service).
* `DaskExecutor(address)`: the jobs are Dask tasks on a `distributed` cluster (`dask
  scheduler` and `dask worker` processes on any machines that see the same polyflow); a
  worker that dies takes its running job with it and the scheduler runs that job again on
  another worker (or, after `allowed-failures` deaths under it, gives it up: a failed
  candidate).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from polyflow.tune.worker import Job, JobResult, run_isolated


class Executor(Protocol):
    slots: int
    description: str

    def submit(self, job: Job) -> concurrent.futures.Future[JobResult]: ...

    def close(self) -> None: ...


class LocalExecutor:
    """Jobs in local processes, `workers` at a time."""

    def __init__(self, workers: int = 1, run: Callable[[Job], JobResult] = run_isolated) -> None:
        self.slots = max(1, workers)
        self.description = f"{self.slots} local worker process{'es' if self.slots > 1 else ''}"
        self._pool = concurrent.futures.ThreadPoolExecutor(self.slots, thread_name_prefix="tune")
        self._run = run

    def submit(self, job: Job) -> concurrent.futures.Future[JobResult]:
        return self._pool.submit(self._run, job)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class DaskExecutor:
    """Jobs as tasks of the Dask cluster at `address` (`tcp://host:8786`; the executor opens a
    client, and closes it), or of a given `distributed.Client` (the caller's: left open); as
    many in flight as the cluster has worker threads, at least `min_slots` (`refresh_slots`
    counts them again: the tuner does as it goes, workers join and leave).

    A worker that dies takes the job it ran with it (its job process ends with it, see
    `worker.main`): the scheduler runs the job again on another worker, until the job has seen
    more workers die under it than the scheduler's `allowed-failures` (Dask's
    `distributed.scheduler.allowed-failures`, 3), when it gives the job up (`KilledWorker`). A
    job given up, cancelled (the client closed, the scheduler lost) or whose task raised is a
    failed candidate, never an exception; `retries`: how many times a task that raised (not a
    candidate's failure: `run_isolated` reports those) is run again. While the cluster has had
    no worker for `no_workers_timeout` seconds, its jobs fail ("no Dask worker"), rather than
    wait for one forever (a tuning of N candidates without a time budget would)."""

    def __init__(
        self,
        address: str | Any,
        *,
        retries: int = 3,
        min_slots: int = 1,
        no_workers_timeout: float = 120.0,
    ) -> None:
        try:
            import distributed
        except ImportError as exc:
            raise RuntimeError(
                "tuning on a Dask cluster needs dask and distributed: pip install 'polyflow[fleet]'"
            ) from exc
        if isinstance(address, str):
            self._client = distributed.Client(address, timeout=30, set_as_default=False)
            self._own_client = True
        else:
            self._client, self._own_client = address, False
        self.retries = retries
        self.min_slots = max(1, min_slots)
        self.no_workers_timeout = no_workers_timeout
        # the tasks submitted and not finished, with the futures their results go to
        self._pending: dict[Any, concurrent.futures.Future[JobResult]] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._watchdog: threading.Thread | None = None
        nthreads = self._client.nthreads()
        threads = sum(nthreads.values())
        self.slots = max(self.min_slots, threads)
        self.description = (
            f"Dask cluster {self._client.scheduler.address} ({len(nthreads)} workers, {threads} threads)"
        )

    def submit(self, job: Job) -> concurrent.futures.Future[JobResult]:
        done: concurrent.futures.Future[JobResult] = concurrent.futures.Future()
        # pure=False: the same candidate submitted twice (a re-measure) runs twice
        task = self._client.submit(run_isolated, job, pure=False, retries=self.retries)
        with self._lock:
            self._pending[task] = done
            if self._watchdog is None:
                self._watchdog = threading.Thread(
                    target=self._watch_workers, name="tune-dask-watchdog", daemon=True
                )
                self._watchdog.start()

        def finished(task: Any) -> None:  # in Dask's callback thread
            with self._lock:
                self._pending.pop(task, None)
            try:
                result = task.result()
            except BaseException as exc:  # KilledWorker, CancelledError, the task's own error
                result = JobResult("failed", message=f"Dask: {type(exc).__name__}: {exc}")
            with contextlib.suppress(concurrent.futures.InvalidStateError):  # cancelled by its caller
                done.set_result(result)

        task.add_done_callback(finished)
        return done

    def _watch_workers(self) -> None:
        """Fail the pending jobs while the cluster has had no worker for `no_workers_timeout`."""
        since: float | None = None
        while not self._closed.wait(min(2.0, self.no_workers_timeout / 4)):
            if self._client.status in ("closing", "closed"):
                return  # its owner closed the client without closing this executor
            try:
                workers = len(self._client.nthreads())
            except Exception:  # the scheduler unreachable: as good as no worker
                workers = 0
            if workers:
                since = None
                continue
            since = since if since is not None else time.monotonic()
            waited = time.monotonic() - since
            if waited < self.no_workers_timeout:
                continue
            with self._lock:
                stranded = list(self._pending.items())
                self._pending.clear()
            message = f"no Dask worker for {waited:.0f} s: the job was not run"
            # the reason first: cancelling runs the task's done callback, which would
            # otherwise report a bare "cancelled" before this could say why
            for _task, done in stranded:
                with contextlib.suppress(concurrent.futures.InvalidStateError):
                    done.set_result(JobResult("failed", message=message))
            for task, _done in stranded:
                with contextlib.suppress(Exception):
                    task.cancel()

    def refresh_slots(self) -> int:
        """The cluster's worker threads now (at least `min_slots`); the count so far while the
        scheduler cannot be reached."""
        try:
            threads = sum(self._client.nthreads().values())
        except (OSError, TimeoutError):  # CommClosedError is an OSError
            return self.slots
        self.slots = max(self.min_slots, threads)
        return self.slots

    def close(self) -> None:
        """Cancel the jobs still queued or running (nobody waits for them), and close the
        client where this executor opened it."""
        self._closed.set()
        with self._lock:
            pending = list(self._pending)
        if pending:
            with contextlib.suppress(Exception):
                self._client.cancel(pending)
        if self._own_client:
            self._client.close()
