"""Work done in forked child processes, for what must be killable (isl cannot be interrupted from
Python: islpy keeps the GIL) or should use the machine's other cores without re-importing and
re-parsing anything.

`fork_work(work)` runs `work()` in a child and returns it at once; `collect(children, deadline)`
gathers what each child's `work()` returned (bytes), or None for a child that failed or was
still running at `deadline` (it is killed then). `run_pool(works, processes)` runs many works,
a few children at a time, each next one starting as soon as a child ends. A child never
returns into the caller's code: it leaves with `os._exit`, so nothing of the parent (buffers,
atexit handlers) runs twice.

Callers that hold an MLIR context turn its multithreading off before forking: a child has none
of the parent's threads, and MLIR must not hand work to the pool they made.
"""

from __future__ import annotations

import os
import selectors
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Child:
    pid: int
    fd: int  # the read end of the pipe the child writes its result to


def fork_work(work: Callable[[], bytes]) -> Child:
    """Start `work()` in a forked child process."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        status = 1
        try:
            os.close(read_end)
            payload = work()
            with os.fdopen(write_end, "wb") as out:
                out.write(payload)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    return Child(pid, read_end)


def collect(children: list[Child], deadline: float | None = None) -> dict[Child, bytes | None]:
    """What each child returned; None for one that failed, or that had not finished at
    `deadline` (a `time.monotonic()` value; None: wait for all), which is killed. Every child
    is reaped."""
    parts: dict[int, list[bytes]] = {child.fd: [] for child in children}
    done: dict[int, bytes] = {}
    with selectors.DefaultSelector() as selector:
        for child in children:
            selector.register(child.fd, selectors.EVENT_READ)
        while len(done) < len(children):
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            events = selector.select(left)
            if not events and left is not None:
                break
            for key, _ in events:
                fd = int(key.fd)
                chunk = os.read(fd, 1 << 20)
                if chunk:
                    parts[fd].append(chunk)
                else:
                    selector.unregister(fd)
                    done[fd] = b"".join(parts[fd])
    out: dict[Child, bytes | None] = {}
    for child in children:
        if child.fd not in done:
            os.kill(child.pid, signal.SIGKILL)
        os.close(child.fd)
        _, status = os.waitpid(child.pid, 0)
        ok = child.fd in done and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        out[child] = done[child.fd] if ok else None
    return out


def run_pool(works: list[Callable[[], bytes]], processes: int) -> list[bytes | None]:
    """What each `work()` returned, run in forked children, at most `processes` at a time, in
    the order of `works` (None for one that failed). A child that ends early takes the next
    work at once, so unequal works still keep every process busy."""
    results: list[bytes | None] = [None] * len(works)
    running: dict[int, tuple[int, Child]] = {}  # fd → (index of its work, child)
    parts: dict[int, list[bytes]] = {}
    pending = iter(enumerate(works))
    with selectors.DefaultSelector() as selector:

        def start_next() -> None:
            for index, work in pending:
                child = fork_work(work)
                running[child.fd] = (index, child)
                parts[child.fd] = []
                selector.register(child.fd, selectors.EVENT_READ)
                return

        try:
            for _ in range(max(processes, 1)):
                start_next()
            while running:
                for key, _ in selector.select():
                    fd = int(key.fd)
                    chunk = os.read(fd, 1 << 20)
                    if chunk:
                        parts[fd].append(chunk)
                        continue
                    selector.unregister(fd)
                    index, child = running.pop(fd)
                    os.close(fd)
                    _, status = os.waitpid(child.pid, 0)
                    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
                        results[index] = b"".join(parts[fd])
                    del parts[fd]
                    start_next()
        finally:  # an exception here (KeyboardInterrupt): no child outlives the pool
            for _, child in running.values():
                os.kill(child.pid, signal.SIGKILL)
                os.close(child.fd)
                os.waitpid(child.pid, 0)
    return results


__all__ = ["Child", "collect", "fork_work", "run_pool"]
