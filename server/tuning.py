"""Tuning jobs of the service (POST /v1/tune): polyflow's autotuner on a submitted kernel, one
tuning at a time on a thread of its own, its candidates in sandboxed processes.

A tuning runs the submitted code (a C program's `main`, a TC kernel on random inputs), so the
service takes tunings only when started with `--allow-run`. Each candidate is built and run by
`polyflow.tune.worker.run_isolated`: a fresh process in its own session and scratch directory
(its cwd, HOME and TMPDIR, removed afterwards), with a clean environment (PATH and LANG only: no
secret of the service's environment reaches it) and resource limits (`Limits`: CPU seconds,
address space over the loaded worker's size, file size); the C program it runs inherits them.

`TuneManager` keeps the jobs: a queue of at most `max_queue` waiting, the one running, and the
last `keep_finished` finished ones, each with its progress (candidates tried, best and default
times, speedup, elapsed) and, when done, the result (`polyflow.tune.report.result_json`). A
result goes to the service's tuning database, where the service's compiles of the same kernel
(same source, entry, defines or TC shapes, target, reassociation) find it. Cancelling stops the
search (the tuner's `cancelled` callback) and kills the candidate processes running, so a
cancelled tuning ends within moments; a cancelled tuning stores nothing.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import queue
import signal
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polyflow.errors import CompileError
from polyflow.options import Options
from polyflow.storage.tuning import Tuning, TuningDB, TuningKey, c_tuning_key, tc_tuning_key

log = logging.getLogger("polyflow.serve")

STATUSES = ("queued", "running", "done", "failed", "cancelled")
# what the tuner's candidate processes run (`python .../polyflow/tune/job_start.py JOB ...`)
_CANDIDATE_SCRIPT = b"/polyflow/tune/job_start.py"


class TuneQueueFull(Exception):
    """More tunings wait than the queue holds."""


Shapes = tuple[tuple[tuple[int, ...], str], ...]


def tc_signature(
    source: str, entry: str | None, sizes: Mapping[str, int] | None
) -> tuple[str, Shapes]:
    """(the definition's name, the shape and NumPy dtype name of each input) of the TC
    definition `entry` (None: the only one) for the sizes of its symbolic dimensions; a
    CompileError where the TC is wrong, names no definition, or a size is missing."""
    from polyflow import tc

    try:
        fn = tc.define(source, entry)
    except ValueError as exc:  # no such definition, or several and no entry
        raise CompileError(str(exc), file="<tc>") from None
    given = sizes or {}
    missing = [name for name in fn.size_names if name not in given]
    if missing:
        raise CompileError(
            f"a TC tuning or compile needs the size of every symbolic dimension: give 'sizes' "
            f"for {', '.join(missing)}",
            file="<tc>",
        )
    shapes = tuple(
        (
            tuple(given[d] if isinstance(d, str) else int(d) for d in t.dims or ()),
            tc.NUMPY_DTYPES[t.element].__name__,
        )
        for t in fn.definition.inputs
    )
    return fn.name, shapes


def c_key(source: str, entry: str | None, options: Mapping[str, Any]) -> TuningKey:
    """The tuning key of a C compile or tuning: the functions compiled are `options.functions`,
    else the request's entry (a tuning of `entry` builds only those through polyflow)."""
    functions = options.get("functions") or (entry.split(",") if entry else None)
    return c_tuning_key(
        source,
        functions=functions,
        defines=options.get("defines") or (),
        target=options.get("target", "cpu"),
        reassociation=_reassociation(options),
    )


def _reassociation(options: Mapping[str, Any]) -> bool:
    """`Options.reassociation` of options given as JSON (-ffast-math or -fassociative-math)."""
    return bool(options.get("fast_math") or options.get("associative_math"))


def tc_key(source: str, name: str, shapes: Shapes, options: Mapping[str, Any]) -> TuningKey:
    return tc_tuning_key(
        source,
        name,
        shapes,
        target=options.get("target", "cpu"),
        reassociation=_reassociation(options),
    )


def compile_tuning(
    request: Mapping[str, Any], options: Mapping[str, Any], url: str
) -> Tuning | None:
    """The tuning a compile of `request` (a /v1/compile body) with `options` (validated, as JSON)
    uses: as a build would (`with_tuning`: `tuned` set, -O3, a tuning stored for the kernel's
    key), looked up in the database at `url`; None where there is none or it cannot be read. CPU
    only (the service tunes on the CPU; a CUDA key would load CuPy into the service). A TC
    compile needs its `sizes` (the key holds the input shapes); a TC gradient is compiled with
    the options as given, as `polyflow.tc` does."""
    from polyflow.storage.tuning import tuned_choices

    if not options.get("tuned", True) or int(options.get("opt_level", 0)) < 3:
        return None
    if options.get("target", "cpu") != "cpu":
        return None
    try:
        if request["language"] == "c":
            key = c_key(request["source"], request.get("entry"), options)
        else:
            if options.get("grad") or not request.get("sizes"):
                return None
            name, shapes = tc_signature(request["source"], request.get("entry"), request["sizes"])
            key = tc_key(request["source"], name, shapes, options)
    except Exception:  # a TC error, a missing size: the worker says what is wrong with it
        return None
    return tuned_choices(key, url=url)


@dataclass
class TuneJob:
    """One tuning the service was asked for, and what became of it."""

    id: str
    task: Any  # a polyflow.tune.tasks.CProgram or TcKernel
    language: str
    entry: str | None
    search: str
    budget: float
    max_candidates: int | None
    created: float = field(default_factory=time.time)
    status: str = "queued"
    started: float | None = None  # perf_counter
    finished: float | None = None  # perf_counter
    tried: int = 0
    in_flight: int = 0
    best_seconds: float | None = None
    default_seconds: float | None = None
    message: str | None = None
    result: dict[str, Any] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)

    @property
    def elapsed(self) -> float:
        if self.started is None:
            return 0.0
        return (self.finished or time.perf_counter()) - self.started

    def view(self, position: int | None = None) -> dict[str, Any]:
        speedup = (
            self.default_seconds / self.best_seconds
            if self.default_seconds and self.best_seconds
            else None
        )
        out: dict[str, Any] = {
            "id": self.id,
            "status": self.status,
            "language": self.language,
            "entry": self.entry,
            "search": self.search,
            "budget_seconds": self.budget,
            "max_candidates": self.max_candidates,
            "created": self.created,
            "cancel_requested": self.cancel.is_set(),
            "progress": {
                "candidates": self.tried,
                "in_flight": self.in_flight,
                "best_seconds": self.best_seconds,
                "default_seconds": self.default_seconds,
                "speedup": speedup,
                "elapsed": round(self.elapsed, 3),
            },
            "message": self.message,
            "result": self.result,
        }
        if position is not None:
            out["queue_position"] = position
        return out


class _StoreUnlessCancelled(TuningDB):
    """The service's tuning database, where a tuning cancelled before it is stored stores
    nothing (its best was not measured again against the default)."""

    def __init__(self, url: str, cancel: threading.Event) -> None:
        super().__init__(url)
        self._cancel = cancel
        self.stored = False

    def put(self, tuning: Tuning) -> None:
        if self._cancel.is_set():
            return
        self.stored = True
        super().put(tuning)

    def add_candidates(self, key: TuningKey | str, run: str, records: Sequence[Any]) -> None:
        if self.stored:
            super().add_candidates(key, run, records)


class TuneManager:
    """The service's tunings (see the module docstring); `start()` / `close()` with the app."""

    def __init__(
        self,
        *,
        db_url: str,
        limits: Any,  # polyflow.tune.worker.Limits
        max_queue: int = 4,
        workers: int = 1,
        keep_finished: int = 100,
    ) -> None:
        self.db_url = db_url
        self.limits = limits
        self.max_queue = max_queue
        self.workers = workers
        self.keep_finished = keep_finished
        self._jobs: OrderedDict[str, TuneJob] = OrderedDict()
        self._waiting: queue.Queue[TuneJob | None] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.running: TuneJob | None = None
        self.done = 0  # tunings finished, whatever their end

    # ----- the API's side

    def submit(
        self,
        task: Any,
        *,
        language: str,
        entry: str | None,
        search: str,
        budget: float,
        max_candidates: int | None,
    ) -> dict[str, Any]:
        """Queue a tuning of `task`; its view. Raises TuneQueueFull."""
        with self._lock:
            if self.queued >= self.max_queue:
                raise TuneQueueFull
            job = TuneJob(uuid.uuid4().hex, task, language, entry, search, budget, max_candidates)
            self._jobs[job.id] = job
            self._forget_old()
            self._waiting.put(job)
            return job.view(self._position(job))

    def view(self, job_id: str) -> dict[str, Any] | None:
        with self._lock:
            job = self._jobs.get(job_id)
            return None if job is None else job.view(self._position(job))

    def cancel(self, job_id: str) -> dict[str, Any] | None:
        """Cancel a queued or running tuning (a finished one stays as it ended); its view."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return None
            if job.status == "queued":
                job.cancel.set()
                job.status = "cancelled"
                job.message = "cancelled before it started"
            elif job.status == "running":
                job.cancel.set()
                job.message = "cancelled; the candidates running are being stopped"
        if job.status == "running":
            _kill_candidates()
        return self.view(job_id)

    @property
    def queued(self) -> int:
        return sum(1 for job in self._jobs.values() if job.status == "queued")

    def _position(self, job: TuneJob) -> int | None:
        if job.status != "queued":
            return None
        ahead = itertools.takewhile(lambda other: other is not job, self._jobs.values())
        return sum(1 for other in ahead if other.status == "queued")

    def _forget_old(self) -> None:
        finished = [j for j in self._jobs.values() if j.status in ("done", "failed", "cancelled")]
        for job in finished[: max(0, len(finished) - self.keep_finished)]:
            del self._jobs[job.id]

    # ----- the tuning thread

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="polyflow-tune", daemon=True)
        self._thread.start()

    def close(self, wait: float = 10.0) -> None:
        """Cancel every tuning, stop the candidates running, and end the tuning thread."""
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            job.cancel.set()
        _kill_candidates()
        self._waiting.put(None)
        if self._thread is not None:
            self._thread.join(timeout=wait)

    def _serve(self) -> None:
        while True:
            job = self._waiting.get()
            if job is None:
                return
            with self._lock:
                if job.status != "queued":  # cancelled while it waited
                    continue
                job.status = "running"
                job.started = time.perf_counter()
                self.running = job
            try:
                self._run(job)
            except Exception as exc:  # a bug of the tuner or the service: this tuning fails
                log.exception("tuning %s failed", job.id)
                self._finish(job, "failed", f"internal error: {exc!r}")
            finally:
                self.running = None

    def _run(self, job: TuneJob) -> None:
        from polyflow.tune.executors import LocalExecutor
        from polyflow.tune.report import result_json
        from polyflow.tune.tuner import Progress, TuneError, tune
        from polyflow.tune.worker import Job, JobResult, run_isolated

        def run(candidate: Job) -> JobResult:
            if job.cancel.is_set():  # queued behind the cancelled one: do not start it
                return JobResult("failed", message="the tuning was cancelled")
            return run_isolated(candidate)

        def progress(event: Progress) -> None:
            with self._lock:
                job.tried = event.tried
                job.in_flight = event.in_flight
                job.best_seconds = event.best_seconds
                job.default_seconds = event.default_seconds

        db = _StoreUnlessCancelled(self.db_url, job.cancel)
        executor = LocalExecutor(self.workers, run=run)
        try:
            result = tune(
                job.task,
                search=job.search,
                budget=job.budget,
                max_candidates=job.max_candidates,
                executor=executor,
                db=db,
                limits=self.limits,
                progress=progress,
                cancelled=job.cancel.is_set,
                candidate_timeout=job.budget + 60.0,
            )
        except TuneError as exc:
            if job.cancel.is_set():
                self._finish(job, "cancelled", "cancelled while the default build ran")
            else:
                self._finish(job, "failed", str(exc))
            return
        finally:
            executor.close()
        shown = json.loads(json.dumps(result_json(result), default=str))
        shown["stored"] = db.stored
        shown["counts"] = result.counts()
        with self._lock:
            job.tried = len(result.candidates)
            job.in_flight = 0
            job.best_seconds = result.best_seconds
            job.default_seconds = result.default_seconds
        if db.stored:
            self._finish(job, "done", None, shown)
        else:
            self._finish(job, "cancelled", "cancelled: the tuning stored nothing", shown)

    def _finish(
        self, job: TuneJob, status: str, message: str | None, result: dict[str, Any] | None = None
    ) -> None:
        with self._lock:
            job.status = status
            job.message = message
            job.result = result
            job.finished = time.perf_counter()
            job.in_flight = 0
            self.done += 1
        log.info(json.dumps({"tuning": job.id, "status": status, "seconds": round(job.elapsed, 2)}))


def _kill_candidates() -> None:
    """Kill the tuner's candidate processes that run now (each with what it started: it leads a
    session and process group of its own). Only this process's children running
    `polyflow/tune/job_start.py` are candidates, and one tuning runs at a time, so they are the
    running tuning's; `run_isolated` then finds them dead and cleans their scratch up."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])  # after "pid (comm) state"
            if parent != me:
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue  # it ended meanwhile
        if any(arg.endswith(_CANDIDATE_SCRIPT) for arg in argv):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int(entry.name), signal.SIGKILL)


def task_options(given: Mapping[str, Any]) -> dict[str, Any]:
    """The options of a tuning's task from the request's validated options: -O3 unless the
    request says otherwise (the tuned choices are the polyhedral stage's)."""
    return Options(**{"opt_level": 3, **given, "target": "cpu"}).model_dump(mode="json")


__all__ = [
    "STATUSES",
    "TuneJob",
    "TuneManager",
    "TuneQueueFull",
    "c_key",
    "compile_tuning",
    "task_options",
    "tc_key",
    "tc_signature",
]
