"""A pool of compile worker processes, each job under a wall-clock limit and a memory limit.

Each worker is a process of its own (spawned: no state shared with the event loop) that reads a
job from its pipe, runs `jobs.run_job`, and writes the outcome back. A job that passes its time
limit gets its worker killed (`JobTimeout`); a worker that dies mid-job (a crash, the memory
limit, a SIGKILL) raises `WorkerDied`; either way a fresh worker takes the dead one's place and
the pool keeps serving. Waiting jobs beyond `max_queue` are refused at once (`QueueFull`).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.connection
import resource
from dataclasses import dataclass
from typing import Any


class JobTimeout(Exception):
    """The job ran past its time limit; its worker was killed."""


class WorkerDied(Exception):
    """The worker running the job exited before answering."""


class QueueFull(Exception):
    """More jobs wait than the queue holds."""


def _serve(conn: multiprocessing.connection.Connection, memory_bytes: int | None) -> None:
    """A worker's life: answer jobs from `conn` until it closes."""
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    from server.jobs import run_job  # loads polyflow (and MLIR on first use) in the worker

    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        try:
            outcome = run_job(request)
        except MemoryError:
            outcome = {"error": {"status": 500, "message": "the compile ran out of memory"}}
        except Exception as exc:  # a compiler bug: say so, keep the traceback out of the answer
            outcome = {"error": {"status": 500, "message": f"internal compiler error: {exc!r}"}}
        conn.send(outcome)


@dataclass
class _Worker:
    process: Any  # multiprocessing.Process (spawn context)
    conn: multiprocessing.connection.Connection

    @property
    def pid(self) -> int:
        return int(self.process.pid or 0)


class WorkerPool:
    """`size` worker processes; `await pool.run(request, timeout)` runs one job on an idle one."""

    def __init__(self, size: int, *, max_queue: int, memory_bytes: int | None = None) -> None:
        self.size = size
        self.max_queue = max_queue
        self.memory_bytes = memory_bytes
        self._context = multiprocessing.get_context("spawn")
        self._idle: asyncio.Queue[_Worker] | None = None
        self._all: list[_Worker] = []
        self.waiting = 0
        self.busy: dict[int, float] = {}  # pid -> start time, for /v1/healthz and the tests
        self.replaced = 0
        self.jobs = 0  # jobs sent to a worker

    def start(self) -> None:
        self._idle = asyncio.Queue()
        for _ in range(self.size):
            self._idle.put_nowait(self._spawn())

    def _spawn(self) -> _Worker:
        parent, child = self._context.Pipe()
        process = self._context.Process(
            target=_serve, args=(child, self.memory_bytes), daemon=True, name="polyflow-worker"
        )
        process.start()
        child.close()
        worker = _Worker(process, parent)
        self._all.append(worker)
        return worker

    def _replace(self, worker: _Worker) -> _Worker:
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join(timeout=5)
        worker.conn.close()
        self._all.remove(worker)
        self.replaced += 1
        return self._spawn()

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
        try:
            self.jobs += 1
            worker.conn.send(request)
            ready = await loop.run_in_executor(None, worker.conn.poll, timeout)
            if not ready:
                worker = self._replace(worker)
                raise JobTimeout
            try:
                outcome: dict[str, Any] = worker.conn.recv()
            except (EOFError, OSError) as exc:
                worker = self._replace(worker)
                raise WorkerDied from exc
            return outcome
        except (BrokenPipeError, ConnectionResetError) as exc:
            worker = self._replace(worker)
            raise WorkerDied from exc
        finally:
            self.busy.pop(pid, None)
            self._idle.put_nowait(worker)

    def close(self) -> None:
        for worker in self._all:
            worker.conn.close()
            if worker.process.is_alive():
                worker.process.kill()
            worker.process.join(timeout=5)
        self._all.clear()
