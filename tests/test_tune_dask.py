"""Tuning on a real Dask cluster (polyflow/tune/executors.py `DaskExecutor`): a scheduler and two
workers started as processes of their own, as `polyflow tune --dask tcp://...` meets them, and a
`LocalCluster` handed over as a client. Nothing is mocked: the candidates are built, run and
checked by `worker.run_isolated` in job processes of the Dask workers.

The workers run with `--no-nanny`: each `dask worker` process we start is the worker itself, so its
pid is the parent pid that `JobResult.worker` names, and a SIGKILL of it is a worker gone for good (a
nanny would start a new one). The nanny's case (worker processes started by a nanny, daemonic)
is the `LocalCluster` test's."""

from __future__ import annotations

import contextlib
import json
import math
import operator
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from distributed import Client, LocalCluster

import polyflow
from polyflow.tune.executors import DaskExecutor
from polyflow.tune.space import apply
from polyflow.tune.tasks import CProgram
from polyflow.tune.tuner import TuneError, TuneResult, tune
from polyflow.tune.worker import STATUSES

DASK = Path(sys.executable).parent / "dask"
N = 160

# A Jacobi-like stencil, a few sweeps: a loop nest that tiles, fuses and parallelizes, and runs in
# well under a millisecond at N = 160 (a candidate costs its compile, ~1-2 s, not its runs). The
# program prints floats and an integer, both checked against gcc's build.
PROGRAM = r"""
#include <stdio.h>
#ifndef N
#define N 64
#endif
static double A[N][N], B[N][N];

void kernel(int n, double a[N][N], double b[N][N]) {
  for (int t = 0; t < 4; t++) {
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        b[i][j] = 0.2 * (a[i][j] + a[i - 1][j] + a[i + 1][j] + a[i][j - 1] + a[i][j + 1]);
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        a[i][j] = b[i][j];
  }
}

int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      A[i][j] = (double)((i * 7 + j * 3) % 11) / 11.0;
      B[i][j] = 0.0;
    }
  kernel(N, A, B);
  double s = 0.0;
  long above = 0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      s += A[i][j] * (1.0 + (i % 5));
      above += A[i][j] > 0.45;
    }
  printf("%.12e %.12e %.12e %ld\n", s, A[N / 2][N / 3], A[7][N - 2], above);
  return 0;
}
"""


def stencil_task() -> CProgram:
    return CProgram(PROGRAM, "stencil.c", {"opt_level": 3, "defines": (f"N={N}",)}, timed=("kernel",))


# ----- a cluster of processes


@dataclass
class Cluster:
    """A scheduler and two `--no-nanny` workers, each its own process group; `pids`: each
    worker's address to its pid (which is the `dask worker` process we started)."""

    address: str
    client: Client
    scheduler: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]]
    pids: dict[str, int]
    directory: Path
    logs: list[Path] = field(default_factory=list)


def _start(command: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,  # a process group of its own, killed as one at the end
        )


def _tails(logs: list[Path]) -> str:
    return "\n".join(
        f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:]) for p in logs if p.exists()
    )


def _kill_all(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGKILL each process's group, and every process below them (by pid: job processes run in
    sessions of their own, out of their worker's group)."""
    below: list[psutil.Process] = []
    for process in processes:
        with contextlib.suppress(psutil.Error):
            below += psutil.Process(process.pid).children(recursive=True)
    for process in processes:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    for child in below:
        with contextlib.suppress(psutil.Error):
            child.kill()
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=15)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """`dask scheduler` on a free port of 127.0.0.1 (port 0, read back from its scheduler file: no
    race for the port), no dashboard; two `dask worker ADDRESS --nthreads 1 --nworkers 1
    --no-nanny` with local directories of their own; torn down whatever the test did."""
    env = {**os.environ, "DASK_TEMPORARY_DIRECTORY": str(tmp_path)}
    processes: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []
    client: Client | None = None
    try:
        scheduler_file = tmp_path / "scheduler.json"
        logs.append(tmp_path / "scheduler.log")
        scheduler = _start(
            [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(scheduler_file), "--idle-timeout", "600s"],
            logs[-1], env,
        )
        processes.append(scheduler)
        address = ""
        deadline = time.monotonic() + 60
        while not address:
            assert scheduler.poll() is None, f"the scheduler exited:\n{_tails(logs)}"
            assert time.monotonic() < deadline, f"no scheduler file after 60 s:\n{_tails(logs)}"
            with contextlib.suppress(OSError, ValueError, KeyError):
                address = json.loads(scheduler_file.read_text())["address"]
            time.sleep(0.05)
        assert re.fullmatch(r"tcp://127\.0\.0\.1:\d+", address), address
        workers = []
        for index in range(2):
            logs.append(tmp_path / f"worker{index}.log")
            workers.append(
                _start(
                    [str(DASK), "worker", address, "--nthreads", "1", "--nworkers", "1", "--no-nanny",
                     "--no-dashboard", "--host", "127.0.0.1", "--name", f"worker{index}",
                     "--local-directory", str(tmp_path / f"worker{index}"),
                     "--death-timeout", "60s"],  # gone by itself should its scheduler go
                    logs[-1], env,
                )
            )
            processes.append(workers[-1])
        client = Client(address, timeout=30, set_as_default=False)
        try:
            client.wait_for_workers(2, timeout=90)
        except TimeoutError:
            pytest.fail(f"the two workers did not join in 90 s:\n{_tails(logs)}")
        pids: dict[str, int] = client.run(os.getpid)
        assert sorted(pids.values()) == sorted(w.pid for w in workers)  # no nanny between
        yield Cluster(address, client, scheduler, workers, pids, tmp_path, logs)
    finally:
        if client is not None:
            client.close()
        _kill_all(processes)


# ----- checks


def ran_on(result: TuneResult) -> set[int]:
    """The pids of the processes that started the candidates' job processes (the Dask workers)."""
    pids = set()
    for candidate in result.candidates:
        if candidate.result.worker:
            host, _, pid = candidate.result.worker.rpartition(":")
            assert host, candidate.result.worker
            pids.add(int(pid))
    return pids


def same_numbers(got: str, want: str) -> None:
    """Word by word: integers exactly, floats within 1e-9 relative."""
    a, b = got.split(), want.split()
    assert len(a) == len(b), (got, want)
    for x, y in zip(a, b, strict=True):
        if re.fullmatch(r"[-+]?\d+", y):
            assert x == y, (got, want)
        else:
            assert math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=1e-300), (got, want)


def gcc_output(tmp: Path) -> str:
    source = tmp / "stencil.c"
    source.write_text(PROGRAM)
    exe = tmp / "stencil-gcc"
    subprocess.run(["gcc", "-O2", f"-DN={N}", str(source), "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


def polyflow_output(tmp: Path, options: Any, name: str) -> str:
    source = tmp / "stencil.c"
    source.write_text(PROGRAM)
    exe = tmp / name
    polyflow.build_program(source, exe, options=options, cache=None)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True, timeout=60).stdout


def _jobs(workers: Any) -> list[psutil.Process]:
    """The job processes (`worker.run_isolated`'s) that these worker pids run now."""
    found = []
    for pid in workers:
        try:
            children = psutil.Process(pid).children()
        except psutil.NoSuchProcess:  # the worker killed
            continue
        for child in children:
            with contextlib.suppress(psutil.Error):
                if "job_start.py" in " ".join(child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE:
                    found.append(child)
    return found


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def check_accounted(result: TuneResult, count: int) -> None:
    assert len(result.candidates) == count, result.counts()
    assert all(c.result.status in STATUSES for c in result.candidates), result.counts()
    assert sum(result.counts().values()) == count


# ----- tests


def test_tuning_on_two_workers(cluster: Cluster, tmp_path: Path) -> None:
    """A short random search through `DaskExecutor("tcp://...")` runs its candidates on both
    workers, and what it found computes what gcc's build computes."""
    executor = DaskExecutor(cluster.address)
    assert executor.slots == 2
    assert "2 workers" in executor.description
    try:
        result = tune(
            stencil_task(), search="random", max_candidates=6, budget=None, executor=executor,
            cores=1, repeats=2,
        )
    finally:
        executor.close()
    assert executor._client.status == "closed"  # it opened that client: it closes it
    assert cluster.client.status == "running"

    check_accounted(result, 6)
    assert result.default.status == "ok" and result.default.worker
    assert ran_on(result) == set(cluster.pids.values()), [c.result.worker for c in result.candidates]
    good = [c for c in result.candidates if c.result.status == "ok"]
    assert good, [(c.result.status, c.result.message) for c in result.candidates]
    assert result.default_seconds and result.best_seconds

    # the best the search found, and what the tuning kept (the defaults where the best did not
    # hold up when measured again), against gcc -O2
    fastest = min(good, key=lambda c: c.result.seconds or math.inf)
    assert fastest.choices, "the default build is not a candidate"
    if result.best_choices:
        assert any(c.choices == result.best_choices and c.result.status == "ok" for c in result.candidates)
    reference = gcc_output(tmp_path)
    same_numbers(polyflow_output(tmp_path, apply(result.space.base, fastest.choices), "fastest"), reference)
    if result.best_choices != fastest.choices:
        same_numbers(polyflow_output(tmp_path, result.best_options, "best"), reference)
    # the default's output, which the tuner checked every candidate against (the text, with
    # the words that varied between the default's own runs: none here)
    default = result.default.output
    if isinstance(default, dict):
        assert not default["ignore"], default
        default = default["text"]
    same_numbers(str(default), reference)


@pytest.mark.parametrize("allowed_failures", [3, 0], ids=["rerun", "scheduler-gives-up"])
def test_worker_killed_during_tuning(cluster: Cluster, allowed_failures: int) -> None:
    """A worker SIGKILLed while it runs a candidate: the tuning goes on with the other and
    accounts for every candidate. With the scheduler's default `allowed-failures` (3) the job is
    run again on the other worker; with 0 the scheduler gives it up (`KilledWorker`), which is a
    failed candidate, not an exception. The job process the dead worker started ends too, its
    scratch directory removed (no orphan runs on, unwatched, nor leaves its files)."""
    client = cluster.client
    client.run_on_scheduler(lambda dask_scheduler: setattr(dask_scheduler, "allowed_failures", allowed_failures))
    assert client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.allowed_failures) == allowed_failures
    executor = DaskExecutor(client)
    killed: dict[str, Any] = {}
    one_done, tuned = threading.Event(), threading.Event()

    def kill_a_busy_worker() -> None:
        """Once a candidate has finished, SIGKILL the first worker seen starting a job process
        (polled every 10 ms: the job is in its compile, which takes longer, not about to end)."""
        try:
            one_done.wait(300)
            seen = {p.pid for p in _jobs(cluster.pids.values())}
            while not tuned.is_set():
                for pid in cluster.pids.values():
                    jobs = [p for p in _jobs([pid]) if p.pid not in seen]
                    if jobs:
                        killed.update(
                            pid=pid, jobs=jobs,
                            scratch=[Path(a).parent for p in jobs for a in p.cmdline() if a.endswith("job.pickle")],
                        )
                        os.kill(pid, signal.SIGKILL)
                        return
                time.sleep(0.01)
        except BaseException as exc:
            killed["error"] = exc

    killer = threading.Thread(target=kill_a_busy_worker, daemon=True)
    killer.start()
    try:
        result = tune(
            stencil_task(), search="random", max_candidates=6, budget=None, executor=executor,
            cores=1, repeats=2, remeasure=False, progress=lambda _: one_done.set(),
        )
    finally:
        tuned.set()
        one_done.set()
        killer.join(30)
        executor.close()
    assert client.status == "running"  # not its client: left open
    assert "error" not in killed, killed["error"]
    assert "pid" in killed, "no job process was seen starting after the first candidate"

    check_accounted(result, 6)
    survivor = next(pid for pid in cluster.pids.values() if pid != killed["pid"])
    assert result.candidates[-1].result.worker.endswith(f":{survivor}")
    lost = [c for c in result.candidates if c.result.message.startswith("Dask:")]
    if allowed_failures:
        assert not lost, [c.result.message for c in lost]
        assert not [c for c in result.candidates if c.result.status == "failed"], result.counts()
    else:
        assert len(lost) == 1 and lost[0].result.status == "failed", [c.result.message for c in result.candidates]
        assert "KilledWorker" in lost[0].result.message

    # the slots follow the cluster: the tuner counted them again as it went
    assert executor.slots == 1
    assert executor.refresh_slots() == 1
    assert len(client.nthreads()) == 1

    # the dead worker's job process did not run on as an orphan
    _, alive = psutil.wait_procs(killed["jobs"], timeout=5)
    assert not [p for p in alive if _running(p)], [p.pid for p in alive]
    for scratch in killed["scratch"]:
        assert scratch.name.startswith("polyflow-tune-"), scratch
        assert not scratch.exists(), f"the orphaned job left {scratch}"


def test_local_cluster_client(tmp_path: Path) -> None:
    """A `LocalCluster` (worker processes under nannies) given as a `distributed.Client`: the
    tuning runs on its workers, and the executor leaves the client open."""
    with (
        LocalCluster(
            processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None,
            host="127.0.0.1", local_directory=str(tmp_path / "dask"),
        ) as local,
        Client(local, set_as_default=False) as client,
    ):
        client.wait_for_workers(2, timeout=60)
        pids = set(client.run(os.getpid).values())
        assert os.getpid() not in pids and len(pids) == 2
        executor = DaskExecutor(client)
        assert executor.slots == 2
        try:
            result = tune(
                stencil_task(), search="random", max_candidates=5, budget=None, executor=executor,
                cores=1, repeats=2, remeasure=False,
            )
        finally:
            executor.close()
        assert client.status == "running"
        assert client.submit(operator.add, 1, 2).result() == 3  # still of use
        check_accounted(result, 5)
        assert ran_on(result) <= pids and ran_on(result), [c.result.worker for c in result.candidates]
        assert not [c for c in result.candidates if c.result.status == "failed"], result.counts()


def test_a_cluster_without_workers_fails_the_tuning_instead_of_waiting(tmp_path: Path) -> None:
    """A scheduler with no worker (all of them died, none started): the jobs fail after
    `no_workers_timeout` and the tuning ends with the reason, rather than wait forever."""
    with (
        LocalCluster(
            processes=True, n_workers=0, dashboard_address=None, host="127.0.0.1",
            local_directory=str(tmp_path / "dask"),
        ) as local,
        Client(local, set_as_default=False) as client,
    ):
        executor = DaskExecutor(client, no_workers_timeout=2.0)
        start = time.monotonic()
        try:
            with pytest.raises(TuneError, match="no Dask worker for"):
                tune(stencil_task(), max_candidates=3, budget=None, executor=executor, remeasure=False)
        finally:
            executor.close()
        assert time.monotonic() - start < 30
