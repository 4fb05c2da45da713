"""One candidate's evaluation, in a process of its own: build, run, check, time.

`run_isolated(job)` runs `python job_start.py JOB RESULT` (then this module) in a fresh scratch
directory, in its own session, under the job's time limit and `Limits` (CPU time, memory,
file size; with `clean_env`, none of the caller's environment but PATH): a candidate that
crashes the compiler, crashes when run, or hangs costs that candidate only. Both executors
(local processes, Dask workers) call it.

Timings hold their cores and stop the compiles beside them: `core_locks.py`.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from polyflow.tune.core_locks import (
    core_slots,
    register_compiling,
    unregister_compiling,
)

T = TypeVar("T")

JOB_START = Path(__file__).resolve().with_name("job_start.py")  # a job process's first code

# what a job's result says of its candidate
STATUSES = ("ok", "wrong", "pruned", "failed", "timeout")


@dataclass(frozen=True)
class Limits:
    """Resource limits of a job's process (None: the system's): CPU seconds, address space
    bytes, bytes a file may reach; `clean_env`: start with PATH, LANG and the scratch
    directory as HOME and TMPDIR, nothing else of the caller's environment (its secrets)."""

    cpu_seconds: int | None = None
    memory_bytes: int | None = None
    file_bytes: int | None = None
    clean_env: bool = False


@dataclass
class Job:
    """One candidate to evaluate: the task, the options fields it sets (`choices`), how to
    time it (`repeats` runs, best taken; `cores` cores each; a run past `run_timeout` fails),
    the default build's output to check it against (None: this is the default build, whose
    output is the reference), `prune_above` (stop after one run slower than this: "pruned"),
    `repeat_below` (run again only after a first run faster than this, once more after one
    within twice this: a candidate clearly slower than the best keeps its time), and
    `compile_only` (the fitness is the compile time: no run)."""

    task: Any
    choices: dict[str, Any]
    repeats: int = 3
    cores: int = 1
    run_timeout: float = 60.0
    timeout: float = 600.0
    reference: Any = None
    rtol: float = 1e-9
    prune_above: float | None = None
    repeat_below: float | None = None
    compile_only: bool = False
    want_facts: bool = False
    compare_with: dict[str, Any] | None = None  # re-measure against these choices, alternating
    limits: Limits = field(default_factory=Limits)


@dataclass
class JobResult:
    """What a job found: `status` (STATUSES), the best time of the runs (`seconds`) and every
    run's (`times`), the compile time, why it failed or differs (`message`), the output (the
    default build's only), what the default build's compile showed (`facts`), and for a
    re-measure the time of the choices compared with (`baseline_seconds`)."""

    status: str
    seconds: float | None = None
    times: list[float] = field(default_factory=list)
    compile_seconds: float | None = None
    message: str = ""
    output: Any = None
    facts: Any = None
    baseline_seconds: float | None = None
    worker: str = ""


def run_job(job: Job, scratch: Path) -> JobResult:
    """Evaluate `job` in this process (see `Job`)."""
    from polyflow.errors import CompileError
    from polyflow.tune.space import apply

    task = job.task
    options = apply(task.base_options(), job.choices).model_copy(update={"tuned": False})
    try:
        built = compile_phase(lambda: task.build(options, scratch / "candidate"))
    except CompileError as exc:
        return JobResult("failed", message=f"compile error: {exc}")
    except Exception as exc:  # a compiler bug: this candidate fails, the tuning goes on
        return JobResult("failed", message=f"compiler error: {_last_line(exc)}")
    compile_seconds = built[1]
    result = JobResult("ok", compile_seconds=compile_seconds)
    if job.want_facts:
        try:
            result.facts = compile_phase(lambda: task.facts(built, options))
        except Exception as exc:
            result.message = f"no loop facts: {_last_line(exc)}"
    if job.compile_only:
        result.seconds = compile_seconds
        result.times = [compile_seconds]
        return result
    baseline = None
    if job.compare_with is not None:
        base_options = apply(task.base_options(), job.compare_with).model_copy(update={"tuned": False})
        try:
            baseline = compile_phase(lambda: task.build(base_options, scratch / "baseline"))
        except Exception as exc:
            return JobResult("failed", message=f"the baseline did not build: {_last_line(exc)}")
    # A program takes its cores exclusively itself, when its timed part starts (CProgram)
    shared = bool(getattr(task, "takes_cores_itself", False))
    unregister_compiling()

    # A build that runs one thread is timed on one core: the others stay free for compiles
    # (which a timing on every core stops). A re-measure keeps the cores of both builds.
    count = job.cores
    if baseline is None and (not options.parallel or options.threads == 1):
        count = 1

    def run(candidate: Any) -> Any:
        with core_slots(count, shared=shared) as cores:
            return task.run(candidate, cores, job.run_timeout)

    try:
        return _timed(job, task, built, baseline, run, result)
    finally:
        # what is left (the result written, the compiler's teardown: a tenth of a second on a
        # core) is stopped by another job's timing again (not waiting for one that runs: the
        # result would wait with it)
        register_compiling(wait=False)


def _timed(
    job: Job,
    task: Any,
    built: Any,
    baseline: Any,
    run: Callable[[Any], Any],
    result: JobResult,
) -> JobResult:
    """The runs of `job`'s build (and of its baseline), checked and timed into `result`."""
    from polyflow.tune.tasks import RunFailed

    compile_seconds = result.compile_seconds
    try:
        first = run(built)
        if job.reference is not None:
            differs = task.compare(first.output, job.reference, job.rtol)
            if differs is not None:
                return JobResult("wrong", first.seconds, [first.seconds], compile_seconds, differs)
        outputs = [first.output]
        result.times = [first.seconds]
        if job.prune_above is not None and first.seconds > job.prune_above:
            result.status, result.seconds = "pruned", first.seconds
            result.message = f"first run {first.seconds:.4g} s > {job.prune_above:.4g} s"
            return result
        baselines: list[float] = []
        again_runs = job.repeats - 1 if baseline is None else job.repeats
        if job.repeat_below is not None and first.seconds > job.repeat_below:
            # no contender, unless its one run was unlucky: one more within twice the line
            again_runs = min(again_runs, 1) if first.seconds <= 2 * job.repeat_below else 0
        for _ in range(again_runs):
            if baseline is not None:
                baselines.append(run(baseline).seconds)
            again = run(built)
            result.times.append(again.seconds)
            if job.reference is None:
                outputs.append(again.output)
    except RunFailed as exc:
        return JobResult(
            "timeout" if exc.timed_out else "failed",
            compile_seconds=compile_seconds,
            message=f"run failed: {exc}",
        )
    if job.reference is None:  # the default build: its runs make the reference
        try:
            result.output = task.reference_of(outputs, job.rtol)
        except ValueError as exc:
            return JobResult(
                "failed",
                message=f"the output varies from run to run ({exc}): the tuner cannot check "
                "candidates against it",
            )
    result.seconds = min(result.times)
    result.baseline_seconds = min(baselines) if baselines else None
    return result


def compile_phase(work: Callable[[], T]) -> T:
    """`work()` (a compile) in a thread of nice 19, as what it starts (cc, llc), with this job's
    process group registered in `COMPILING` while it runs (when this process leads its own
    session, as `run_isolated` starts jobs): a timing on these cores stops it meanwhile."""
    outcome: dict[str, Any] = {}

    def niced() -> None:
        with contextlib.suppress(OSError):  # Linux: the nice value is the thread's
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        try:
            outcome["value"] = work()
        except BaseException as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    registered = register_compiling()
    try:
        thread = threading.Thread(target=niced, name="polyflow-tune-compile")
        thread.start()
        thread.join()
    finally:
        if registered:
            unregister_compiling()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]


def _last_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"


def run_isolated(job: Job) -> JobResult:
    """Evaluate `job` in a child process (see the module docstring); never raises for what
    the candidate does."""
    scratch = Path(tempfile.mkdtemp(prefix="polyflow-tune-"))
    started = time.perf_counter()
    try:
        job_path, result_path = scratch / "job.pickle", scratch / "result.pickle"
        job_path.write_bytes(pickle.dumps(job))
        env = _environment(job, scratch)
        process = subprocess.Popen(
            [sys.executable, str(JOB_START), str(job_path), str(result_path), str(os.getpid())],
            cwd=scratch,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # a timeout kills the job and every process it started
        )
        try:
            _, stderr = process.communicate(timeout=job.timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return JobResult("timeout", message=f"the candidate ran past {job.timeout:.3g} s")
        if result_path.exists():
            result: JobResult = pickle.loads(result_path.read_bytes())
            return result
        how = (
            f"killed by signal {-process.returncode} ({signal.Signals(-process.returncode).name})"
            if process.returncode < 0
            else f"exit status {process.returncode}"
        )
        tail = stderr.decode(errors="replace").strip().splitlines()[-3:]
        return JobResult(
            "failed",
            message=f"the worker process died ({how}) after "
            f"{time.perf_counter() - started:.1f} s" + (f": {' | '.join(tail)}" if tail else ""),
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _environment(job: Job, scratch: Path) -> dict[str, str]:
    if job.limits.clean_env:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(scratch),
        }
    else:
        env = dict(os.environ)
    env["TMPDIR"] = str(scratch)
    env["POLYFLOW_CACHE"] = "off"  # candidates are built once: keep them out of the cache
    env["OMP_NUM_THREADS"] = str(max(1, job.cores))
    return env


def _limit(limits: Limits) -> None:
    """The job's resource limits on this process and what it starts; the memory limit counts
    from the size of this process once the compiler is loaded (its libraries are mapped)."""
    import polyflow.drivers.build
    import polyflow.tc  # noqa: F401

    for which, value in (
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_FSIZE, limits.file_bytes),
    ):
        if value is not None:
            resource.setrlimit(which, (value, value))
    if limits.memory_bytes is not None:
        loaded = _address_space_bytes()
        resource.setrlimit(resource.RLIMIT_AS, (loaded + limits.memory_bytes,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crashing candidate writes no core file


def _address_space_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _end_with_parent(parent: int, scratch: Path) -> None:
    """Where `parent` (the process of `run_isolated`: a Dask worker, a tuner) dies before this
    job ends, nobody waits for the job nor keeps its time limit any more: remove its scratch
    directory and kill its process group (this process, as `run_isolated` made it a session
    leader, and what it started), rather than let it run on unwatched."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        shutil.rmtree(scratch, ignore_errors=True)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="polyflow-tune-parent", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    """`python -m polyflow.tune.worker JOB RESULT [PARENT]` (or job_start.py, which registers
    the job as a compile first): evaluate the pickled job, pickle the result; end early where
    the process PARENT dies (`_end_with_parent`)."""
    args = argv if argv is not None else sys.argv[1:]
    job_path, result_path = args[:2]
    # from its start to its first timing, the job is a compile that timings stop
    register_compiling()
    if len(args) > 2:
        _end_with_parent(int(args[2]), Path(job_path).parent)
    job: Job = pickle.loads(Path(job_path).read_bytes())
    _limit(job.limits)
    scratch = Path(job_path).parent
    (scratch / "candidate").mkdir(exist_ok=True)
    (scratch / "baseline").mkdir(exist_ok=True)
    try:
        result = run_job(job, scratch)
    except MemoryError:
        result = JobResult("failed", message="out of memory (the job's memory limit)")
    except Exception:
        result = JobResult("failed", message="worker error: " + traceback.format_exc(limit=-3))
    import socket

    result.worker = socket.gethostname() + f":{os.getppid()}"
    if len(args) > 2 and os.getppid() != int(args[2]):
        # the parent died while the job ran, before the watch saw it: nobody reads the result
        shutil.rmtree(scratch, ignore_errors=True)
        return 0
    tmp = Path(result_path).with_suffix(".tmp")
    tmp.write_bytes(pickle.dumps(result))
    tmp.replace(result_path)
    return 0


if __name__ == "__main__":
    # as polyflow.tune.worker, not __main__: the result's classes must unpickle in the caller
    from polyflow.tune import worker

    raise SystemExit(worker.main())
