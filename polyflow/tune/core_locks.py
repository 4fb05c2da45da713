"""Core locks and stopped compiles: how tuning jobs on one machine (of any tuner, local or
Dask) never time a kernel beside another timing or a compile. Standard library only: a job's
process loads this file before the compiler (`job_start.py`).

Timings never share a core: a run takes `cores` cores machine-wide (lock files in
`CORE_LOCK_DIR`, one per core, held with `flock` for the run), is pinned to them and runs that
many OpenMP threads. A kernel timed in this process (TC, `compile_c` functions) holds them
exclusively for the run. A C program holds them shared while it sets up (several programs'
set-ups overlap, but no timing runs beside them), and its timing shim takes them exclusively
at the first call of a tuned function, to the end of the run: on 2 cores, 2 workers then
keep both cores busy where one program's single-threaded set-up would leave one idle. Whoever
wants them exclusively first takes `GATE` exclusively, so that no new shared holder comes in
while it waits (shared takers pass through the gate shared).

Compiles take no lock: they overlap each other, set-ups and idle cores. But a compile beside a
timed kernel slows it (2mm on 2 cores: up to 2x, even at nice 19: the kernel's threads wait
for each other at every barrier), so a job that compiles registers its process group in
`COMPILING` (`compile_phase`), and whoever holds cores exclusively stops the registered groups
(SIGSTOP) until it lets them go (SIGCONT, `resume_compiles`, while it still holds them). A job
is registered from its start (loading the compiler) to its first timing, and again after its
last (its teardown). (Where timings take
fewer cores than the machine has, one ending lets the compiles go on beside another still
running.) Compiles also run at nice 19.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

CORE_LOCK_DIR = Path("/tmp/polyflow-tune-cores")
GATE = CORE_LOCK_DIR / "gate.lock"
COMPILING = CORE_LOCK_DIR / "compiling"  # a file per compiling job: its pgid, its start time


class HeldCores(list[int]):
    """The cores a timing holds (a list of core numbers), and the open lock files that hold
    them (a program given these takes them exclusively itself: `CProgram.run`)."""

    lock_fds: tuple[int, ...] = ()
    shared: bool = False
    stops_compiles: bool = True


def _open_lock(path: Path) -> int:
    """A descriptor of lock file `path` (made, for anyone, where missing)."""
    return os.open(path, os.O_CREAT | os.O_RDWR, 0o666)


@contextlib.contextmanager
def core_slots(count: int, *, shared: bool = False) -> Iterator[HeldCores]:
    """Hold `count` of this process's cores (at most all of them) for a timing, machine-wide,
    exclusively or `shared` (see the module docstring): wait until that many core locks can
    be had, take them, pin this process to those cores."""
    allowed = sorted(os.sched_getaffinity(0))
    count = max(1, min(count, len(allowed)))
    CORE_LOCK_DIR.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        CORE_LOCK_DIR.chmod(0o1777)
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    held: list[tuple[int, int]] = []
    gate = _open_lock(GATE)
    try:
        fcntl.flock(gate, mode)
        delay = 0.005
        while True:
            for core in allowed:
                fd = _open_lock(CORE_LOCK_DIR / f"core{core}.lock")
                try:
                    fcntl.flock(fd, mode | fcntl.LOCK_NB)
                except OSError:
                    os.close(fd)
                    continue
                held.append((core, fd))
                if len(held) == count:
                    break
            if len(held) == count:
                break
            for _, fd in held:  # all or nothing: two jobs holding half each would wait forever
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            held = []
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
    finally:
        fcntl.flock(gate, fcntl.LOCK_UN)
        os.close(gate)
    cores = HeldCores(core for core, _ in held)
    cores.lock_fds = tuple(fd for _, fd in held)
    cores.shared = shared
    # compiles stop for a timing on all the cores they could run on; beside one on fewer
    # cores, they run on the others
    cores.stops_compiles = count == len(allowed)
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)
    try:
        if not shared and cores.stops_compiles:
            pause_compiles()
        yield cores
    finally:
        os.sched_setaffinity(0, before)
        # The compiles stopped here or by the program (which held the cores exclusively), let
        # go while the cores are still held: once they are not, another timing may hold them
        # and have stopped the compiles again.
        resume_compiles()
        for _, fd in held:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def register_compiling(*, wait: bool = True) -> bool:
    """Register this process's group as compiling (see the module docstring), unless it is
    already or this process leads no session of its own (a test runner's, a shell's group is
    never stopped); then (`wait`) wait for a timing that began before. Whether it registered
    now."""
    pid = os.getpid()
    entry = COMPILING / str(pid)
    if os.getpgid(0) != pid or os.getsid(0) != pid or entry.exists():
        return False
    started = process_start_time(pid)
    if started is None:
        return False
    COMPILING.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        COMPILING.chmod(0o1777)
    partial = entry.with_name(f".{pid}")  # whole or absent for a timing that reads it
    partial.write_text(f"{started}\n")
    partial.replace(entry)
    if wait:
        _wait_for_timings()  # one that took its cores before this registered would not stop it
    return True


def unregister_compiling() -> None:
    """This process compiles no more: it is about to time (it must never be stopped then)."""
    (COMPILING / str(os.getpid())).unlink(missing_ok=True)


def _wait_for_timings() -> None:
    """Return when no core of this process is held exclusively (a kernel being timed)."""
    gate = _open_lock(GATE)
    try:
        fcntl.flock(gate, fcntl.LOCK_SH)
        for core in sorted(os.sched_getaffinity(0)):
            fd = _open_lock(CORE_LOCK_DIR / f"core{core}.lock")
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
            finally:
                os.close(fd)  # (closing releases it)
    finally:
        os.close(gate)


def process_start_time(pid: int) -> int | None:
    """When process `pid` started (clock ticks after boot, /proc/PID/stat's 22nd field): with
    the pid, it names one process even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces
    return int(fields[19])  # field 22; fields[0] is field 3


def _registered_compiles() -> list[int]:
    """The process groups registered as compiling that still exist (stale entries go)."""
    groups = []
    with contextlib.suppress(OSError):
        for entry in COMPILING.iterdir():
            try:
                pgid, started = int(entry.name), int(entry.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            if process_start_time(pgid) != started:
                with contextlib.suppress(OSError):
                    entry.unlink()
                continue
            if pgid != os.getpgid(0):
                groups.append(pgid)
    return groups


def _threads_running(pid: int) -> bool:
    """Whether a thread of process `pid` is neither stopped nor gone."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return False
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] not in "TtZX":
            return True
    return False


def wait_until_stopped(pid: int, limit: float = 0.1) -> None:
    """Wait (at most `limit` seconds) until every thread of process `pid` is stopped: SIGSTOP
    wakes one thread (a job's main thread, waiting, which may wait for a core) that then stops
    the others, while the compile thread runs on."""
    deadline = time.monotonic() + limit
    while _threads_running(pid) and time.monotonic() < deadline:
        time.sleep(0.0005)


def pause_compiles() -> None:
    """Stop every registered compile (SIGSTOP to its process group) while a kernel is timed,
    and return once their leaders are stopped."""
    stopped = []
    for pgid in _registered_compiles():
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGSTOP)
            stopped.append(pgid)
    for pgid in stopped:
        wait_until_stopped(pgid)


def resume_compiles() -> None:
    """Let every registered compile go on (SIGCONT; harmless to one that runs)."""
    for pgid in _registered_compiles():
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGCONT)
