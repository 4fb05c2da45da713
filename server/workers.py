"""A pool of compile worker processes, each job under a wall-clock limit and a memory limit.

Each worker is a process of its own (spawned: no state shared with the event loop) that loads
the compiler, then reads a job from its pipe, runs `jobs.run_job`, and writes the outcome back.
A job that passes its time limit gets its worker killed (`JobTimeout`); a worker that dies
mid-job (a crash, a SIGKILL) raises `WorkerDied` saying how it ended. The memory limit is
RLIMIT_AS at the loaded worker's size plus `memory_bytes` (all threads allocating from one heap,
so that the limit sees the job's memory): a job past it gets a MemoryError or a library's
allocation error (answered as 500) or, in C++ code, an abort (`WorkerDied`). Either way, and
after an internal compiler error, a fresh worker takes the place of the old one and the pool
keeps serving. Waiting jobs beyond `max_queue` are refused at once (`QueueFull`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import multiprocessing
import multiprocessing.connection
import resource
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

READY = "ready"  # what a worker sends once it has loaded the compiler
STARTUP_SECONDS = 300.0
_M_ARENA_MAX = -8  # mallopt's parameter number in glibc's malloc.h


class JobTimeout(Exception):
    """The job ran past its time limit; its worker was killed."""


class WorkerDied(Exception):
    """The worker running the job exited before answering."""


class QueueFull(Exception):
    """More jobs wait than the queue holds."""


def _serve(conn: multiprocessing.connection.Connection, memory_bytes: int | None) -> None:
    """A worker's life: load the compiler, then answer jobs from `conn` until it closes. Each job
    may grow the worker's address space by `memory_bytes` over its size once loaded."""
    from server.jobs import run_job, warm_up

    if memory_bytes:
        _one_malloc_arena()
    warm_up()  # imports and first-use set-up, so the limit counts the job, not the libraries
    if memory_bytes:
        _give_back_free_heap()
        limit = _address_space_bytes() + memory_bytes
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    conn.send(READY)
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        outcome: dict[str, Any] | None = None
        try:
            outcome = run_job(request)
        except MemoryError:
            pass  # answered below, once the traceback's frames (and their memory) are gone
        except Exception as exc:  # a compiler bug: say so, keep the traceback out of the answer
            if memory_bytes is None or not _ran_out_of_memory(exc):
                outcome = {
                    "error": {"status": 500, "message": f"internal compiler error: {exc!r}"},
                    "retire": True,  # the failed compile may have left isl or MLIR half-built
                }
        if outcome is None:
            mib = (memory_bytes or 0) >> 20
            outcome = {
                "error": {"status": 500, "message": f"the compile ran out of memory ({mib} MiB)"},
                "retire": True,  # what was half-built may hold on to memory: start afresh
            }
        conn.send(outcome)


def _ran_out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` is how a library reports a failed allocation (a process it could not
    start, isl's or MLIR's own error) rather than a compiler bug."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOMEM:
        return True
    return "out of memory" in str(exc).lower() or "allocate memory" in str(exc).lower()


def _one_malloc_arena() -> None:
    """Make every thread allocate from glibc's main heap: a thread's own arena reserves 64 MiB
    of address space up front, room that a job would use without RLIMIT_AS ever seeing it."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(_M_ARENA_MAX, 1)


def _give_back_free_heap() -> None:
    """Return the heap the warm-up freed, so that it does not count as room for the first job."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _address_space_bytes() -> int:
    """This process's virtual memory size (what RLIMIT_AS limits), from /proc."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


@dataclass
class _Worker:
    process: Any  # multiprocessing.Process (spawn context)
    conn: multiprocessing.connection.Connection

    @property
    def pid(self) -> int:
        return int(self.process.pid or 0)


class WorkerPool:
    """`size` worker processes; `await pool.run(request, timeout)` runs one job on an idle one.
    A worker joins the idle ones once it has loaded the compiler, so no job's time limit counts
    a worker's start."""

    def __init__(self, size: int, *, max_queue: int, memory_bytes: int | None = None) -> None:
        self.size = size
        self.max_queue = max_queue
        self.memory_bytes = memory_bytes
        self._context = multiprocessing.get_context("spawn")
        self._idle: asyncio.Queue[_Worker] | None = None
        self._all: list[_Worker] = []
        self._starting: set[asyncio.Future[None]] = set()
        self.waiting = 0
        self.busy: dict[int, float] = {}  # pid -> start time, for /v1/healthz and the tests
        self.replaced = 0
        self.jobs = 0  # jobs sent to a worker

    def start(self) -> None:
        self._idle = asyncio.Queue()
        for _ in range(self.size):
            self._launch()

    def _launch(self) -> None:
        """Start a worker; it joins the idle ones when it says it is ready."""
        parent, child = self._context.Pipe()
        process = self._context.Process(
            target=_serve, args=(child, self.memory_bytes), daemon=True, name="polyflow-worker"
        )
        process.start()
        child.close()
        worker = _Worker(process, parent)
        self._all.append(worker)
        task = asyncio.ensure_future(self._when_ready(worker))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _when_ready(self, worker: _Worker) -> None:
        assert self._idle is not None
        loop = asyncio.get_running_loop()
        try:
            ready = await loop.run_in_executor(None, worker.conn.poll, STARTUP_SECONDS)
            hello = worker.conn.recv() if ready else None
        except (EOFError, OSError):
            hello = None
        if hello == READY:
            self._idle.put_nowait(worker)
            return
        # it could not load the compiler (its error went to stderr): try again, not in a loop
        self._discard(worker)
        await asyncio.sleep(1.0)
        self._launch()

    def _discard(self, worker: _Worker) -> None:
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join(timeout=5)
        worker.conn.close()
        self._all.remove(worker)

    def _replace(self, worker: _Worker) -> None:
        self._discard(worker)
        self.replaced += 1
        self._launch()

    def _cause_of_death(self, worker: _Worker) -> str:
        """How `worker`, which stopped answering, ended (for the error the request gets)."""
        worker.process.join(timeout=5)
        code = worker.process.exitcode
        if code is None:
            return "it stopped answering"
        if code < 0:
            how = f"it was killed by {signal.Signals(-code).name}"
        else:
            how = f"it exited with status {code}"
        if self.memory_bytes and code not in (-signal.SIGKILL, -signal.SIGTERM):
            how += f"; a compile past the memory limit ({self.memory_bytes >> 20} MiB) ends so"
        return how

    @property
    def pids(self) -> list[int]:
        return [worker.pid for worker in self._all]

    async def run(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """The outcome of `request` (see `jobs.run_job`); raises `QueueFull`, `JobTimeout`
        or `WorkerDied`."""
        assert self._idle is not None, "start() the pool first"
        if self._idle.empty() and self.waiting >= self.max_queue:
            raise QueueFull
        self.waiting += 1
        try:
            worker = await self._idle.get()
        finally:
            self.waiting -= 1
        loop = asyncio.get_running_loop()
        pid = worker.pid
        self.busy[pid] = loop.time()
        keep = False  # whether the worker goes back to the idle ones
        try:
            self.jobs += 1
            worker.conn.send(request)
            ready = await loop.run_in_executor(None, worker.conn.poll, timeout)
            if not ready:
                raise JobTimeout
            try:
                outcome: dict[str, Any] = worker.conn.recv()
            except (EOFError, OSError) as exc:
                raise WorkerDied(self._cause_of_death(worker)) from exc
            keep = not outcome.pop("retire", False)
            return outcome
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise WorkerDied(self._cause_of_death(worker)) from exc
        finally:
            self.busy.pop(pid, None)
            if keep:
                self._idle.put_nowait(worker)
            else:
                self._replace(worker)

    def close(self) -> None:
        for task in self._starting:
            task.cancel()
        for worker in self._all:
            # kill before closing our end: a thread polling it (a start) then wakes on EOF
            if worker.process.is_alive():
                worker.process.kill()
            worker.process.join(timeout=5)
            worker.conn.close()
        self._all.clear()
