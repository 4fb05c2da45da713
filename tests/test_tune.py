"""The autotuner: option space, searches, isolated candidates, the loop, and the users' ways in
(the CLI, `fn.autotune`, later builds reusing a tuning). Dask: test_tune_dask.py; the service:
test_server_tune.py; the database: test_tuning_db.py."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from polyflow import Options
from polyflow.storage.tuning import Tuning, TuningDB, c_tuning_key
from polyflow.tune.core_locks import COMPILING, core_slots, wait_until_stopped
from polyflow.tune.search import GeneticSearch, RandomSearch, TpeSearch
from polyflow.tune.space import OptionSpace, Parameter, option_space, tile_size_values
from polyflow.tune.tasks import CompileFacts, CProgram, compare_text
from polyflow.tune.tuner import parse_duration, tune
from polyflow.tune.worker import Job, Limits, run_isolated

ROOT = Path(__file__).resolve().parents[1]
POLYFLOW = [sys.executable, "-m", "polyflow"]

# a held-out-like program: a stencil sweep and a contraction, with its own main and output
PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#ifndef N
#define N 96
#endif
static void kernel(int n, double A[N][N], double B[N][N], double C[N][N]) {
  for (int i = 1; i < n - 1; i++)
    for (int j = 1; j < n - 1; j++)
      B[i][j] = 0.25 * (A[i-1][j] + A[i+1][j] + A[i][j-1] + A[i][j+1]);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      for (int k = 0; k < n; k++)
        C[i][j] += B[i][k] * A[k][j];
}
int main(void) {
  double (*A)[N] = malloc(sizeof(double) * N * N);
  double (*B)[N] = calloc(N * N, sizeof(double));
  double (*C)[N] = calloc(N * N, sizeof(double));
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) A[i][j] = ((i * 13 + j * 7) % 17) / 17.0;
  kernel(N, A, B, C);
  double s = 0.0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) s += C[i][j] * ((i + 2 * j) % 5 + 1);
  printf("%.15g %.15g\n", s, C[N / 2][N / 3]);
  free(A); free(B); free(C);
  return 0;
}
"""


def _program(**options: Any) -> CProgram:
    settings: dict[str, Any] = {"opt_level": 3, "defines": ("N=96",), **options}
    return CProgram(PROGRAM, "held_out.c", settings, timed=("kernel",))


def _scripted(*wanted: dict[str, Any]) -> Any:
    """A search that proposes the default, then a genome per dict of wanted values."""

    class Scripted:
        name = "scripted"

        def __init__(self, space: OptionSpace) -> None:
            self.genomes = [space.default_genome()]
            for values in wanted:
                genome = space.default_genome()
                for parameter in space.parameters:
                    if parameter.name in values:
                        genome[parameter.name] = parameter.values.index(values[parameter.name])
                self.genomes.append(genome)

        def ask(self) -> dict[str, int] | None:
            return self.genomes.pop(0) if self.genomes else None

        def tell(self, genome: dict[str, int], seconds: float | None) -> None:
            pass

    return Scripted


# ----- the option space


def test_the_space_follows_the_kernel() -> None:
    plain = option_space(Options(opt_level=3), CompileFacts({"tiled"}, depth=3, extents={100, 96}))
    names = [p.name for p in plain.parameters]
    assert names[:2] == ["tile", "tile_sizes_auto"]
    assert [n for n in names if n.startswith("tile_size_")] == ["tile_size_0", "tile_size_1", "tile_size_2"]
    assert "fusion" in names and "schedule_preset" in names and "split" in names
    assert not any(n.startswith("micro_kernel") for n in names)  # no contraction was seen
    assert "parallel_reductions" not in names  # C's order: float reductions stay sequential
    contraction = option_space(
        Options(opt_level=3, associative_math=True), CompileFacts({"micro-kernel"}, 3, {512})
    )
    names = [p.name for p in contraction.parameters]
    assert {"micro_kernel_rows", "micro_kernel_vectors", "contraction_tile_rows"} <= set(names)
    assert "parallel_reductions" in names
    # the first value of every parameter is the base options': genome 0 is the default build
    assert contraction.choices(contraction.default_genome()) == {}
    assert contraction.options(contraction.default_genome()) == Options(opt_level=3, associative_math=True)


def test_every_choice_of_the_space_is_kept_by_the_tuning_db() -> None:
    # a choice the DB drops would be tuned for and then silently not used by later builds
    from polyflow.storage.tuning import TUNABLE_FIELDS

    facts = CompileFacts({"micro-kernel", "wavefront", "tiled"}, 3, {64})
    for base in (Options(opt_level=3, associative_math=True), Options(opt_level=3, target="cuda")):
        space = option_space(base, facts)
        for parameter in space.parameters:
            for value in range(len(parameter.values)):
                genome = dict(space.default_genome(), **{parameter.name: value})
                assert set(space.choices(genome)) <= TUNABLE_FIELDS, parameter.name


def test_choices_are_canonical() -> None:
    space = option_space(Options(opt_level=3), CompileFacts({"wavefront"}, 2, {64}))
    genome = space.default_genome()

    def index(name: str, value: Any) -> int:
        return next(p.values.index(value) for p in space.parameters if p.name == name)

    sized = dict(genome, tile_sizes_auto=index("tile_sizes_auto", False))
    sized["tile_size_0"] = index("tile_size_0", 16)
    sized["tile_size_1"] = index("tile_size_1", 16)
    assert space.choices(sized) == {"tile_sizes": [16]}  # the last size repeats
    untiled = dict(sized, tile=index("tile", False))
    assert space.choices(untiled) == {"tile": False}  # tile sizes of an untiled build say nothing
    assert space.key_of(untiled) == space.key_of(dict(genome, tile=index("tile", False)))
    serial = dict(genome, parallel=index("parallel", False), wavefront=index("wavefront", False))
    assert space.choices(serial) == {"parallel": False}


def test_invalid_combinations_are_filtered() -> None:
    space = option_space(Options(opt_level=3), CompileFacts({"micro-kernel"}, 3, {256}))
    genome = space.default_genome()
    rows = next(p for p in space.parameters if p.name == "micro_kernel_rows")
    vectors = next(p for p in space.parameters if p.name == "micro_kernel_vectors")
    big = dict(genome, micro_kernel_rows=rows.values.index(12), micro_kernel_vectors=vectors.values.index(4))
    assert not space.valid(big)  # 12 x 4 accumulators do not fit 16 vector registers
    assert space.valid(dict(big, micro_kernels=1))  # no micro-kernel: its shape does not matter
    rng = random.Random(1)
    assert all(space.valid(space.random_genome(rng)) for _ in range(200))
    gpu = option_space(Options(opt_level=3, target="cuda"), CompileFacts(set(), 2, {512}))
    blocks = next(p for p in gpu.parameters if p.name == "block").values
    assert all(b is None or b[0] * b[1] <= 1024 for b in blocks)


def test_tile_sizes_include_divisors_of_the_extents() -> None:
    values = tile_size_values({1000, 96}, default=32)
    assert values[0] == 32
    assert {8, 16, 64, 128, 256} <= set(values)
    assert 25 in values or 40 in values  # a divisor of 1000 near a power of two
    assert 48 in values or 24 in values  # and of 96
    assert max(tile_size_values({20})[1:]) < 20  # no tile past the loop but the default


# ----- the searches, on a synthetic fitness (nothing compiled)


def _synthetic_space() -> OptionSpace:
    space = OptionSpace(Options(opt_level=3))
    space.parameters = [Parameter("tile_sizes_auto", (False,))]  # the sizes below count
    space.parameters += [Parameter(f"tile_size_{d}", (32, 8, 16, 64, 128)) for d in range(3)]
    space.parameters.append(Parameter("fusion", ("smart", "max", "min")))
    return space


def _seconds(space: OptionSpace, genome: dict[str, int]) -> float | None:
    """Fastest at tile sizes 64, 16, 128 and fusion 'min'; 'max' fails."""
    if space.value(genome, "fusion") == "max":
        return None
    best = {"tile_size_0": 64, "tile_size_1": 16, "tile_size_2": 128}
    misses = sum(space.value(genome, n) != v for n, v in best.items())
    return 1.0 + misses + (0.5 if space.value(genome, "fusion") == "smart" else 0.0)


@pytest.mark.parametrize("search", ["genetic", "random", "tpe"])
def test_each_search_starts_at_the_default_and_improves(search: str) -> None:
    space = _synthetic_space()
    maker = {"genetic": GeneticSearch, "random": RandomSearch, "tpe": TpeSearch}[search]
    searcher = maker(space, seed=3)
    first = searcher.ask()
    assert first == space.default_genome()
    searcher.tell(first, _seconds(space, first))
    best = _seconds(space, first)
    for _ in range(80):
        genome = searcher.ask()
        assert genome is not None
        seconds = _seconds(space, genome)
        searcher.tell(genome, seconds)
        if seconds is not None and (best is None or seconds < best):
            best = seconds
    assert best is not None and best <= 2.0  # found or neared the optimum (default: 4.5)


def test_the_genetic_search_keeps_its_elites_and_waits_for_its_generation() -> None:
    space = _synthetic_space()
    search = GeneticSearch(space, population=6, elites=2, seed=0)
    generation = [search.ask() for _ in range(6)]
    assert all(g is not None for g in generation)
    assert search.ask() is None  # the generation is still being measured
    for genome in generation:
        assert genome is not None
        search.tell(genome, _seconds(space, genome))
    ranked = sorted(
        (g for g in generation if g is not None and _seconds(space, g) is not None),
        key=lambda g: _seconds(space, g) or 0.0,
    )
    children = [search.ask() for _ in range(6)]
    assert search.generation == 1
    assert ranked[0] in children and ranked[1] in children


# ----- candidates in isolated processes


def test_a_crash_a_hang_and_a_wrong_output_cost_one_candidate_each(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tune_faults import CrashingCompiler, HangingBuild, WrongOutput

    monkeypatch.setenv("PYTHONPATH", f"{ROOT}:{ROOT / 'tests'}")
    base = _program()
    settings = (base.source, base.filename, base.options)
    crash = tune(
        CrashingCompiler(*settings, timed=("kernel",)), search=_scripted({"tile": False}),
        max_candidates=1, budget=None, repeats=1, db=None,
    )
    assert [c.result.status for c in crash.candidates] == ["failed"]
    assert "died" in crash.candidates[0].result.message and "SIGABRT" in crash.candidates[0].result.message
    wrong = tune(
        WrongOutput(*settings, timed=("kernel",)), search=_scripted({"split": False}),
        max_candidates=1, budget=None, repeats=1, db=None,
    )
    assert [c.result.status for c in wrong.candidates] == ["wrong"]
    assert wrong.best_choices == {}  # never kept
    start = time.perf_counter()
    hang = tune(
        HangingBuild(*settings, timed=("kernel",)), search=_scripted({"schedule_preset": "isl"}),
        max_candidates=1, budget=None, repeats=1, db=None, candidate_timeout=12.0,
    )
    assert [c.result.status for c in hang.candidates] == ["timeout"]
    assert time.perf_counter() - start < 90


def test_a_job_past_its_memory_limit_fails_cleanly(tmp_path: Path) -> None:
    hungry = PROGRAM.replace(
        "kernel(N, A, B, C);",
        "kernel(N, A, B, C); { char *big = malloc(3L << 30); for (long i = 0; i < (3L << 30); i += 4096) big[i] = 1; s = big[4096]; }",
    ).replace("double s = 0.0;", "").replace("int main(void) {", "int main(void) { double s = 0.0;")
    task = CProgram(hungry, "hungry.c", {"opt_level": 2, "defines": ("N=32",)}, timed=("kernel",))
    result = run_isolated(Job(task, {}, repeats=1, limits=Limits(memory_bytes=512 << 20, clean_env=True), timeout=120))
    assert result.status == "failed" and "run failed" in result.message


def _hold_cores(count: int, log: Any) -> None:
    for _ in range(3):
        with core_slots(count) as cores:
            log.put((os.getpid(), tuple(cores), time.monotonic(), "in"))
            time.sleep(0.05)
            log.put((os.getpid(), tuple(cores), time.monotonic(), "out"))


def test_timings_never_share_a_core() -> None:
    log: Any = multiprocessing.get_context("fork").Queue()
    workers = [multiprocessing.get_context("fork").Process(target=_hold_cores, args=(1, log)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    events = []
    while not log.empty():
        events.append(log.get())
    assert len(events) == 4 * 3 * 2
    holding: dict[int, int] = {}
    for pid, cores, _, what in sorted(events, key=lambda e: e[2]):
        for core in cores:
            if what == "in":
                assert core not in holding, f"core {core} held by {holding.get(core)} and {pid}"
                holding[core] = pid
            else:
                del holding[core]


# A program that marks (in $MARK_LOG) its set-up, before the tuned function's first call, and
# its timed part, after it: the part its timing shim holds the cores exclusively.
MARKED = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double A[64];
static void kernel(int n) {
  for (int i = 0; i < n; i++) A[i] = A[i] * 2 + 1;
}
static void mark(const char *what) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  char line[128];
  int len = snprintf(line, sizeof line, "%d %s %.6f\n", (int)getpid(), what,
                     (double)ts.tv_sec + ts.tv_nsec * 1e-9);
  int fd = open(getenv("MARK_LOG"), O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (write(fd, line, (size_t)len) != len) abort();
  close(fd);
}
int main(void) {
  mark("setup-start");
  usleep(400000);
  mark("setup-end");
  kernel(64);
  mark("timed-start");
  usleep(150000);
  mark("timed-end");
  printf("%g\n", A[3]);
  return 0;
}
"""


def _run_marked(built: Any, task: CProgram, runs: int) -> None:
    for _ in range(runs):
        with core_slots(2, shared=True) as cores:
            task.run(built, cores, 30)


def test_programs_set_up_side_by_side_but_time_alone(tmp_path: Path) -> None:
    # Each program holds the cores shared while it sets up and exclusively from the first
    # call of the tuned function (its timing shim): no program's set-up or timed part runs
    # while another's timed part does, and set-ups started together overlap.
    task = CProgram(MARKED, "marked.c", {"opt_level": 3}, timed=("kernel",))
    built = task.build(Options(opt_level=3), tmp_path)
    log = tmp_path / "marks.log"
    os.environ["MARK_LOG"] = str(log)
    try:
        context = multiprocessing.get_context("fork")
        runners = [context.Process(target=_run_marked, args=(built, task, 2)) for _ in range(3)]
        for runner in runners:
            runner.start()
        for runner in runners:
            runner.join(60)
            assert runner.exitcode == 0
    finally:
        del os.environ["MARK_LOG"]
    spans: dict[tuple[str, str], list[float]] = {}
    for line in log.read_text().splitlines():
        pid, what, at = line.split()
        spans.setdefault((pid, what.split("-")[0]), []).append(float(at))
    assert len(spans) == 3 * 2 * 2  # 6 runs, a set-up and a timed part each
    timed = [(pid, at) for (pid, kind), at in spans.items() if kind == "timed"]
    for pid, (start, end) in timed:
        for (other, kind), (o_start, o_end) in spans.items():
            if other != pid:
                assert o_end <= start or o_start >= end, f"{other}'s {kind} ran in {pid}'s timing"
    setups = sorted(at for (_, kind), at in spans.items() if kind == "setup")
    assert any(b[0] < a[1] for a, b in itertools.pairwise(setups)), setups


# A compile, as a job process runs one: in a session of its own, through `compile_phase`, here
# writing the time every 5 ms for a while.
FAKE_COMPILE = """
import sys, time
from polyflow.tune.worker import compile_phase

def work():
    # seconds of its own running: a stop (while a kernel is timed) does not use them up, so it
    # still runs after the last timing however long the timings take on a loaded machine
    left, last = float(sys.argv[2]), time.monotonic()
    with open(sys.argv[1], "a") as log:
        while left > 0:
            log.write(f"{time.monotonic():.6f}\\n")
            log.flush()
            time.sleep(0.005)
            now = time.monotonic()
            left -= min(now - last, 0.05)
            last = now

compile_phase(work)
"""


def test_a_compile_stops_while_a_kernel_is_timed(tmp_path: Path) -> None:
    # A compile beside a timed kernel slows it (2x for 2mm on 2 cores): the timing stops the
    # compiles registered while it holds its cores, and lets them go on after.
    task = CProgram(MARKED, "marked.c", {"opt_level": 3}, timed=("kernel",))
    built = task.build(Options(opt_level=3), tmp_path)
    marks, ticks = tmp_path / "marks.log", tmp_path / "compile.log"
    compiler = subprocess.Popen(
        [sys.executable, "-c", FAKE_COMPILE, str(ticks), "4"], start_new_session=True
    )
    os.environ["MARK_LOG"] = str(marks)
    try:
        time.sleep(0.3)
        _run_marked(built, task, 3)
    finally:
        del os.environ["MARK_LOG"]
        assert compiler.wait(30) == 0  # not left stopped
    times = [float(t) for t in ticks.read_text().split()]
    spans: dict[str, list[float]] = {}
    for line in marks.read_text().splitlines():
        pid, what, at = line.split()
        spans.setdefault(pid + what.split("-")[0], []).append(float(at))
    timed = [at for key, at in spans.items() if key.endswith("timed")]
    assert len(timed) == 3
    for start, end in timed:
        assert not [t for t in times if start < t < end], "the compile ran beside a timing"
    assert any(t > timed[-1][1] for t in times)  # and went on after it
    assert sum(start < t < end for t in times for start, end in spans.values()) > 0  # set-ups


SPINNING_THREAD = """
import os, threading
def spin():
    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    while True:
        pass
thread = threading.Thread(target=spin)
thread.start()
thread.join()
"""


def _states(pid: int) -> list[str]:
    stats = [(task / "stat").read_text() for task in Path(f"/proc/{pid}/task").iterdir()]
    return [stat[stat.rindex(")") + 2] for stat in stats]


def test_a_stopped_compile_has_stopped_every_thread_when_the_stop_returns() -> None:
    # SIGSTOP wakes one thread, which then stops the others: a compile thread ran on for up
    # to 9 ms on a loaded machine (and into a timing, in CI) before the wait.
    child = subprocess.Popen([sys.executable, "-c", SPINNING_THREAD], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while len(_states(child.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        for _ in range(20):
            os.killpg(child.pid, signal.SIGSTOP)
            wait_until_stopped(child.pid, limit=5.0)
            assert set(_states(child.pid)) == {"T"}
            os.killpg(child.pid, signal.SIGCONT)
            time.sleep(0.005)
    finally:
        child.kill()
        child.wait()


def test_a_candidate_clearly_slower_than_the_best_keeps_its_one_time() -> None:
    task = _program()
    reference = run_isolated(Job(task, {}, repeats=2, cores=1))
    assert reference.status == "ok" and len(reference.times) == 2
    common = {"reference": reference.output, "repeats": 3, "cores": 1}
    slow = run_isolated(Job(task, {"tile": False}, repeat_below=1e-9, **common))
    assert slow.status == "ok" and len(slow.times) == 1 and slow.seconds == slow.times[0]
    contender = run_isolated(Job(task, {"tile": False}, repeat_below=60.0, prune_above=60.0, **common))
    assert contender.status == "ok" and len(contender.times) == 3


def test_compiles_run_niced_and_their_errors_reach_the_job() -> None:
    from polyflow.tune.worker import compile_phase

    def nice_here() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    before = nice_here()
    assert compile_phase(nice_here) == 19
    # what the compile starts (cc, llc) inherits it
    assert compile_phase(lambda: int(subprocess.check_output(["nice"], text=True))) == 19
    assert nice_here() == before  # the timings run at the job's own priority
    with pytest.raises(ZeroDivisionError):
        compile_phase(lambda: 1 // 0)
    # this process leads no session of its own: a timing must never stop its group (pytest's)
    assert not (COMPILING / str(os.getpid())).exists()
    assert compile_phase(lambda: (COMPILING / str(os.getpid())).exists()) is False


def test_outputs_are_compared_word_by_word_with_a_tolerance() -> None:
    assert compare_text("sum 1.0000000000001 x", "sum 1.0 x", 1e-9) is None
    assert "word 2" in (compare_text("sum 1.001 x", "sum 1.0 x", 1e-9) or "")
    assert "word 3" in (compare_text("a b c", "a b d", 1e-9) or "")
    assert "words" in (compare_text("a b", "a b c", 1e-9) or "")
    assert compare_text("nan 3", "nan 3", 1e-9) is None


def test_durations() -> None:
    assert parse_duration("90s") == 90 and parse_duration("10m") == 600 and parse_duration(2) == 2
    assert parse_duration("1.5h") == 5400
    with pytest.raises(ValueError, match="duration"):
        parse_duration("soon")


# ----- the users' ways in


def _gcc_output(source: Path, tmp_path: Path, *defines: str) -> str:
    exe = tmp_path / "gcc.out"
    subprocess.run(["gcc", "-O2", *[f"-D{d}" for d in defines], str(source), "-o", str(exe), "-lm"], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


def test_tune_on_the_command_line_then_builds_reuse_it(tmp_path: Path) -> None:
    source = tmp_path / "held_out.c"
    source.write_text(PROGRAM)
    db = tmp_path / "tunings.sqlite3"
    env = {**os.environ, "POLYFLOW_TUNING_DB": str(db)}
    tuned = subprocess.run(
        [*POLYFLOW, "tune", str(source), "--functions", "kernel", "-D", "N=96", "--candidates", "5",
         "--search", "random", "--workers", "2", "--seed", "4", "--json", str(tmp_path / "t.json"),
         "--plot", str(tmp_path / "conv.png")],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert tuned.returncode == 0, tuned.stderr
    assert "tuned options" in tuned.stderr and "speedup" in tuned.stderr
    assert (tmp_path / "conv.png").read_bytes()[:4] == b"\x89PNG"
    described = json.loads((tmp_path / "t.json").read_text())
    assert len(described["candidates"]) == 5 and described["stored"]
    assert all(c["status"] in ("ok", "pruned", "wrong", "failed", "timeout") for c in described["candidates"])
    stored = TuningDB(db).get(c_tuning_key(PROGRAM, functions=("kernel",), defines=("N=96",)))
    assert stored is not None and stored.choices == described["best_choices"]
    assert len(TuningDB(db).candidates(stored.key)) == 5

    expected = _gcc_output(source, tmp_path, "N=96")
    for flags, says in ((["--functions", "kernel"], True), (["--functions", "kernel", "--no-tuned"], False)):
        exe = tmp_path / "built"
        built = subprocess.run(
            [*POLYFLOW, "build", str(source), "-D", "N=96", *flags, "-o", str(exe), "--report"],
            capture_output=True, text=True, env=env, timeout=300,
        )
        assert built.returncode == 0, built.stderr
        assert ("using tuned options" in built.stderr) == says, built.stderr
        ran = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
        assert compare_text(ran, expected, 1e-9) is None, (ran, expected)


def test_a_build_uses_the_tuned_choices_and_caches_them_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from polyflow.drivers.build import build_program

    db = tmp_path / "tunings.sqlite3"
    monkeypatch.setenv("POLYFLOW_TUNING_DB", str(db))
    source = tmp_path / "held_out.c"
    source.write_text(PROGRAM)
    key = c_tuning_key(PROGRAM, functions=None, defines=("N=96",))
    TuningDB(db).put(
        Tuning(key.digest, key.scope, key.entry, key.describe(), {"tile_sizes": [8, 4], "fusion": "min"},
               2e-3, 1e-3, "genetic", 12, 30.0)
    )
    options = Options(opt_level=3, defines=("N=96",))
    report = build_program(source, tmp_path / "tuned", options=options, cache=None, raise_report=False)
    assert report.tuned == {"tile_sizes": [8, 4], "fusion": "min"}
    assert any("using tuned options (fusion=min, tile_sizes=8,4)" in n for n in report.notes)
    assert any("8x4" in r.message for r in report.report.remarks if r.kind == "tiled")
    ran = subprocess.run([str(tmp_path / "tuned")], capture_output=True, text=True, check=True).stdout
    assert compare_text(ran, _gcc_output(source, tmp_path, "N=96"), 1e-9) is None
    plain = build_program(source, tmp_path / "plain", options=options.model_copy(update={"tuned": False}), cache=None)
    assert plain.tuned is None and not any("tuned" in n for n in plain.notes)
    at_o2 = build_program(source, tmp_path / "o2", options=Options(opt_level=2, defines=("N=96",)), cache=None)
    assert at_o2.tuned is None  # the choices are the polyhedral stage's


def test_polyflow_cc_uses_a_tuning_only_when_asked() -> None:
    from polyflow.cli import cc_options
    from polyflow.drivers.cc import parse_cc_args

    assert not cc_options(parse_cc_args(["-O3", "-c", "a.c"]).polyflow_args).tuned
    assert cc_options(parse_cc_args(["-O3", "--use-tuned", "-c", "a.c"]).polyflow_args).tuned


def test_a_program_without_main_is_refused_with_the_reason(tmp_path: Path) -> None:
    source = tmp_path / "lib.c"
    source.write_text("void f(int n, double *a) { for (int i = 0; i < n; i++) a[i] *= 2; }\n")
    done = subprocess.run([*POLYFLOW, "tune", str(source), "--candidates", "2"], capture_output=True, text=True)
    assert done.returncode == 2 and "no main()" in done.stderr


def test_tc_autotune_returns_a_tuned_callable_that_later_defines_reuse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from polyflow import tc

    db = tmp_path / "tunings.sqlite3"
    monkeypatch.setenv("POLYFLOW_TUNING_DB", str(db))
    source = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(i,j) +=! A(i,k) * B(k,j) }"
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((48, 40)).astype(np.float32), rng.standard_normal((40, 56)).astype(np.float32)
    fn = tc.define(source)
    tuned = fn.autotune(a, b, candidates=4, search="random", seed=2)
    result = tuned.last_tuning
    assert result is not None and len(result.candidates) == 4
    np.testing.assert_allclose(tuned(a, b), a @ b, rtol=1e-4, atol=1e-4)
    again = tc.define(source)
    np.testing.assert_allclose(again(a, b), a @ b, rtol=1e-4, atol=1e-4)
    assert any("using tuned options" in n for n in again.report.notes)
    other_shape = again(a[:20], b)
    np.testing.assert_allclose(other_shape, a[:20] @ b, rtol=1e-4, atol=1e-4)
    assert not any("using tuned options" in n for n in again.report.notes)  # tuned for 48x40 only
    untuned = tc.define(source, options={"tuned": False})
    untuned(a, b)
    assert not any("using tuned options" in n for n in untuned.report.notes)


def test_tc_on_the_command_line_and_the_database_moves_as_json(tmp_path: Path) -> None:
    kernel = tmp_path / "k.tc"
    kernel.write_text("def scale(float(M,N) A) -> (B) { B(i,j) = 2 * A(i,j) + 1 }\n")
    db = tmp_path / "a.sqlite3"
    done = subprocess.run(
        [*POLYFLOW, "tune", str(kernel), "--sizes", "M=64,N=80", "--candidates", "3", "--search", "tpe",
         "--db", str(db), "--plot", str(tmp_path / "p.png")],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    exported = tmp_path / "t.json"
    subprocess.run([*POLYFLOW, "tune", "--db", str(db), "--export", str(exported)], check=True, capture_output=True)
    data = json.loads(exported.read_text())
    assert len(data["tunings"]) == 1 and data["tunings"][0]["entry"] == "scale"
    other = tmp_path / "b.sqlite3"
    subprocess.run([*POLYFLOW, "tune", "--db", str(other), "--import", str(exported)], check=True, capture_output=True)
    listed = subprocess.run([*POLYFLOW, "tune", "--db", str(other), "--list"], capture_output=True, text=True, check=True)
    assert "scale" in listed.stdout
    missing = subprocess.run([*POLYFLOW, "tune", str(kernel), "--candidates", "2"], capture_output=True, text=True)
    assert missing.returncode == 2 and "--sizes" in missing.stderr


def test_a_c_function_autotunes_on_example_arguments_and_later_compiles_reuse_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import polyflow

    monkeypatch.setenv("POLYFLOW_TUNING_DB", str(tmp_path / "tunings.sqlite3"))
    source = """
    void blur(int n, int m, double a[n][m], double b[n][m]) {
      for (int i = 1; i < n - 1; i++)
        for (int j = 1; j < m - 1; j++)
          b[i][j] = (a[i-1][j] + a[i+1][j] + a[i][j-1] + a[i][j+1] + a[i][j]) / 5.0;
    }
    """
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((120, 130)), np.zeros((120, 130))
    fn = polyflow.compile_c(source, "blur", options={"opt_level": 3})
    tuned = fn.autotune(120, 130, a, b, candidates=4, search="random", seed=5)
    assert tuned.last_tuning is not None and len(tuned.last_tuning.candidates) == 4
    expected = np.zeros_like(b)
    expected[1:-1, 1:-1] = (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[1:-1, 1:-1]) / 5.0
    tuned(120, 130, a, b)
    np.testing.assert_allclose(b, expected, rtol=1e-12)
    again = polyflow.compile_c(source, "blur", options={"opt_level": 3})
    assert any("using tuned options" in n for n in again.notes)
    assert not any("tuned" in n for n in polyflow.compile_c(source, "blur", options={"opt_level": 3, "tuned": False}).notes)


def test_cuda_options_are_tuned_by_compile_time_where_there_is_no_gpu() -> None:
    from polyflow.tune.tasks import TcKernel

    source = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(i,j) +=! A(i,k) * B(k,j) }"
    task = TcKernel(source, "mm", {"opt_level": 3, "target": "cuda"}, (((128, 64), "float32"), ((64, 96), "float32")))
    result = tune(task, max_candidates=3, budget=None, compile_only=True, search="random", seed=1)
    names = {p.name for p in result.space.parameters}
    gpu = {"block", "grid", "shared_memory", "gpu_register_tile", "unroll"}
    assert gpu <= names and "tile_sizes_auto" not in names
    assert [c.result.status for c in result.candidates] == ["ok"] * 3  # each built its PTX
    assert all(set(c.choices) <= gpu for c in result.candidates)


def test_words_that_vary_between_the_default_runs_are_not_compared() -> None:
    timed = PROGRAM.replace(
        'printf("%.15g %.15g\\n", s, C[N / 2][N / 3]);',
        'struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);\n'
        '  printf("%.15g took %ld ns %.15g\\n", s, ts.tv_nsec, C[N / 2][N / 3]);',
    ).replace("#include <stdlib.h>", "#include <stdlib.h>\n#include <time.h>")
    assert "took" in timed
    task = CProgram(timed, "timed.c", {"opt_level": 3, "defines": ("N=48",)}, timed=("kernel",))
    default = run_isolated(Job(task, {}, repeats=3))
    assert default.status == "ok", default.message
    assert default.output["ignore"] == [2]  # the nanoseconds
    candidate = run_isolated(Job(task, {"fusion": "min"}, repeats=1, reference=default.output))
    assert candidate.status == "ok", candidate.message
    wrong = dict(default.output, text=default.output["text"].replace(" ns ", " ms "))
    assert run_isolated(Job(task, {"fusion": "min"}, repeats=1, reference=wrong)).status == "wrong"


def test_the_first_generation_explores_the_defaults_neighbours() -> None:
    space = option_space(Options(opt_level=3), CompileFacts({"tiled"}, 2, {64}))
    neighbours = space.neighbours(space.default_genome())
    assert neighbours and all(len(space.choices(g)) == 1 for g in neighbours)
    assert len({space.key_of(g) for g in neighbours}) == len(neighbours)
    search = GeneticSearch(space, population=10, seed=0)
    first = [search.ask() for _ in range(10)]
    assert first[0] == space.default_genome()
    assert sum(1 for g in first[1:] if g is not None and len(space.choices(g)) == 1) >= 4


def test_a_build_that_uses_no_tuning_makes_no_key() -> None:
    from polyflow.storage.tuning import with_tuning

    def never() -> Any:
        raise AssertionError("the key was made")

    for options in (Options(opt_level=2), Options(opt_level=3, tuned=False)):
        assert with_tuning(options, never) == (options, None)
