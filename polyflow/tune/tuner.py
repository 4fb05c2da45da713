"""The tuning loop: the default build first, then candidates from a search, until the budget ends.

1. The default build (the task's own options) is built, run and timed; its output is the
   reference every candidate is checked against, and what its compile showed (loop depth and
   extents, micro-kernels, wavefronts) makes the option space (`space.option_space`).
2. The search proposes genomes; each new build (canonically distinct choices) runs as a job on
   the executor, as many at once as it has slots. A candidate whose output differs from the
   reference is discarded and reported ("wrong"), never kept; one whose first run takes more
   than `prune_factor` times the best so far is not run again ("pruned"), one whose first
   run takes more than `repeat_factor` times the best keeps that time (it is no contender: the
   runs that would not change that go to other candidates); crashes, compile errors and
   timeouts cost that candidate only.
3. When the budget (seconds, or candidates) is spent, the three fastest are each measured
   again against the default in one job, runs alternating; the best of those ratios is the
   result: where none is faster then, the defaults stay (no choices are stored).
4. The result goes to the tuning database under the task's key, with every candidate tried.
"""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from polyflow.options import Options
from polyflow.storage.tuning import (
    CandidateRecord,
    Tuning,
    TuningDB,
    TuningKey,
    c_tuning_key_of,
    tc_tuning_key,
)
from polyflow.target import host_cores
from polyflow.tune.executors import Executor, LocalExecutor
from polyflow.tune.search import Search, make_search
from polyflow.tune.space import Genome, OptionSpace, option_space
from polyflow.tune.worker import Job, JobResult, Limits

# The tolerances candidates are checked with: C's order kept (no reassociation), a candidate
# differs from the default at most by fused multiply-adds formed differently; with
# reassociation, sums are reordered.
RTOL = 1e-9
RTOL_REASSOCIATED = 1e-4


class TuneError(Exception):
    """The tuning cannot start: the default build fails, or its output varies."""


@dataclass
class Candidate:
    """One candidate tried: its choices, what its job said, and when it finished."""

    choices: dict[str, Any]
    result: JobResult
    finished: float  # seconds since the tuning started


@dataclass
class TuneResult:
    """What a tuning found (see the module docstring): the best choices (empty: the defaults),
    the re-measured default and best times, every candidate, and how the best time went down
    (`history`: (seconds since start, best so far))."""

    key: TuningKey
    search: str
    executor: str
    space: OptionSpace
    default: JobResult
    best_choices: dict[str, Any]
    default_seconds: float | None
    best_seconds: float | None
    candidates: list[Candidate] = field(default_factory=list)
    history: list[tuple[float, float]] = field(default_factory=list)
    seconds: float = 0.0
    stored: bool = False
    remeasured: bool = False

    @property
    def speedup(self) -> float | None:
        if not self.default_seconds or not self.best_seconds:
            return None
        return self.default_seconds / self.best_seconds

    @property
    def best_options(self) -> Options:
        from polyflow.tune.space import apply

        return apply(self.space.base, self.best_choices)

    def counts(self) -> dict[str, int]:
        counted: dict[str, int] = {}
        for candidate in self.candidates:
            counted[candidate.result.status] = counted.get(candidate.result.status, 0) + 1
        return counted


@dataclass
class Progress:
    """What the progress callback is told after each candidate."""

    tried: int
    in_flight: int
    best_seconds: float | None
    default_seconds: float | None
    elapsed: float
    budget: float | None
    last: Candidate | None = None


def parse_duration(text: float | str) -> float:
    """Seconds of a budget: a number, or a number with s, m or h ("90s", "10m", "1.5h")."""
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        spelled = text.strip().lower()
        scale = {"s": 1.0, "m": 60.0, "h": 3600.0}.get(spelled[-1:], None)
        try:
            seconds = float(spelled[:-1] if scale else spelled) * (scale or 1.0)
        except ValueError:
            raise ValueError(f"not a duration: '{text}' (say 90s, 10m or 1h)") from None
    if not seconds > 0:
        raise ValueError(f"a budget must be positive, not {text}")
    return seconds


def task_key(task: Any) -> TuningKey:
    """The tuning database's key of `task` (a `CProgram`, `CFunction` or `TcKernel`)."""
    options = task.base_options()
    if task.kind == "c":
        return c_tuning_key_of(task.source, options)
    return tc_tuning_key(
        task.source,
        task.name,
        task.shapes,
        target=options.target,
        reassociation=options.reassociation,
    )


def tune(
    task: Any,
    *,
    search: str | Callable[[OptionSpace], Search] = "genetic",
    budget: float | None = 120.0,
    max_candidates: int | None = None,
    executor: Executor | None = None,
    db: TuningDB | None = None,
    repeats: int = 3,
    cores: int | None = None,
    prune_factor: float = 10.0,
    repeat_factor: float = 1.5,
    compile_only: bool = False,
    limits: Limits | None = None,
    seed: int = 0,
    progress: Callable[[Progress], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    candidate_timeout: float = 600.0,
    remeasure: bool = True,
) -> TuneResult:
    """Tune `task` (see the module docstring) for `budget` seconds (None: no time limit) or
    `max_candidates` candidates, whichever ends first, with `search` ("genetic", "random",
    "tpe", or a function making a `Search` of the option space) on `executor` (default: one local worker process); store the result
    in `db` unless it is None. Each timing runs on `cores` cores (default: all of this host's)."""
    start = time.perf_counter()
    if budget is None and max_candidates is None:
        raise ValueError("give a time budget or a number of candidates")
    own_executor = executor is None
    executor = executor or LocalExecutor(1)
    limits = limits or Limits()
    base = task.base_options()
    cores = cores or base.threads or host_cores()
    rtol = RTOL_REASSOCIATED if base.reassociation else RTOL
    key = task_key(task)

    def remaining() -> float | None:
        return None if budget is None else budget - (time.perf_counter() - start)

    def job(choices: dict[str, Any], **more: Any) -> Job:
        left = remaining()
        timeout = candidate_timeout if left is None else max(5.0, min(candidate_timeout, left + 5.0))
        return Job(
            task,
            choices,
            repeats=more.pop("repeats", repeats),
            cores=cores,
            rtol=rtol,
            timeout=more.pop("timeout", timeout),
            compile_only=compile_only,
            limits=limits,
            **more,
        )

    try:
        default = executor.submit(job({}, want_facts=True, timeout=candidate_timeout)).result()
        if default.status != "ok":
            raise TuneError(f"the default build cannot be tuned: {default.status}: {default.message}")
        if default.facts is None:
            raise TuneError(f"the default build's loops could not be read: {default.message}")
        space = option_space(base, default.facts)
        searcher = make_search(search, space, seed=seed) if isinstance(search, str) else search(space)
        result = TuneResult(
            key=key,
            search=searcher.name,
            executor=executor.description,
            space=space,
            default=default,
            best_choices={},
            default_seconds=default.seconds,
            best_seconds=default.seconds,
        )
        result.history.append((time.perf_counter() - start, default.seconds or 0.0))
        _search_loop(
            result, searcher, executor, job, start, remaining, max_candidates,
            (prune_factor, repeat_factor), progress, cancelled, compile_only,
        )
        if remeasure and result.best_choices and not compile_only and not _stopped(cancelled):
            _remeasure(result, executor, job, repeats)
    finally:
        if own_executor:
            executor.close()
    result.seconds = time.perf_counter() - start
    if db is not None and not compile_only:
        _store(result, db)
    return result


def _stopped(cancelled: Callable[[], bool] | None) -> bool:
    return cancelled is not None and cancelled()


def _search_loop(
    result: TuneResult,
    searcher: Search,
    executor: Executor,
    job: Callable[..., Job],
    start: float,
    remaining: Callable[[], float | None],
    max_candidates: int | None,
    factors: tuple[float, float],
    progress: Callable[[Progress], None] | None,
    cancelled: Callable[[], bool] | None,
    compile_only: bool,
) -> None:
    space = result.space
    measured: dict[str, float | None] = {space.key_of(space.default_genome()): result.default_seconds}
    in_flight: dict[concurrent.futures.Future[JobResult], tuple[str, dict[str, Any]]] = {}
    waiting: dict[str, list[Genome]] = {}  # genomes of a build in flight, told when it ends
    best = result.default_seconds
    exhausted = 0
    # an executor whose slots change as it runs (a Dask cluster's workers join and leave):
    # counted again between candidates, at most once a second
    refresh_slots = getattr(executor, "refresh_slots", None)
    refreshed = time.perf_counter()

    def out_of_budget() -> bool:
        left = remaining()
        tried = len(result.candidates)
        return (
            (left is not None and left <= 0)
            or (max_candidates is not None and tried + len(in_flight) >= max_candidates)
            or _stopped(cancelled)
        )

    while True:
        if refresh_slots is not None and time.perf_counter() - refreshed >= 1.0:
            refresh_slots()
            refreshed = time.perf_counter()
        # keep every slot busy with a build not measured yet
        while not out_of_budget() and len(in_flight) < executor.slots and exhausted < 200:
            genome = searcher.ask()
            if genome is None:
                break
            name = space.key_of(genome)
            if name in measured:
                searcher.tell(genome, measured[name])
                exhausted += 1  # a space smaller than the budget: stop asking at some point
                continue
            if name in waiting:
                waiting[name].append(genome)
                exhausted += 1
                continue
            exhausted = 0
            choices = space.choices(genome)
            prune_factor, repeat_factor = factors
            prune = None if best is None or compile_only else best * prune_factor
            repeat_below = None if best is None or compile_only else best * repeat_factor
            # a run past the pruning line is stopped there: on a kernel of seconds, a bad
            # candidate would otherwise take minutes of the budget to be pruned
            run_timeout = 600.0 if best is None else max(2.0, best * prune_factor * 1.2)
            future = executor.submit(
                job(
                    choices,
                    reference=result.default.output,
                    prune_above=prune,
                    repeat_below=repeat_below,
                    run_timeout=run_timeout,
                )
            )
            in_flight[future] = (name, choices)
            waiting[name] = [genome]
        if not in_flight:
            return
        left = remaining()
        done, _ = concurrent.futures.wait(
            in_flight, timeout=None if left is None else max(left, 0) + 30.0,
            return_when=concurrent.futures.FIRST_COMPLETED,
        )
        if not done:  # the jobs' own time limits should have ended them: give up on them
            return
        for future in done:
            name, choices = in_flight.pop(future)
            outcome = future.result()
            candidate = Candidate(choices, outcome, time.perf_counter() - start)
            result.candidates.append(candidate)
            seconds = outcome.seconds if outcome.status in ("ok", "pruned") else None
            measured[name] = seconds
            for genome in waiting.pop(name, []):
                searcher.tell(genome, seconds)
            if outcome.status == "ok" and seconds is not None and (best is None or seconds < best):
                best = seconds
                result.best_seconds = seconds
                result.best_choices = choices
                result.history.append((candidate.finished, seconds))
            if progress is not None:
                elapsed, left = time.perf_counter() - start, remaining()
                progress(
                    Progress(
                        tried=len(result.candidates),
                        in_flight=len(in_flight),
                        best_seconds=best,
                        default_seconds=result.default_seconds,
                        elapsed=elapsed,
                        budget=None if left is None else elapsed + left,
                        last=candidate,
                    )
                )


# how many of the fastest candidates are measured again against the default at the end: the
# tuning's timings were taken at different moments of a shared machine, and the fastest of
# them may owe its place to a quiet moment
REMEASURED = 3


def _remeasure(result: TuneResult, executor: Executor, job: Callable[..., Job], repeats: int) -> None:
    """The fastest candidates, each against the default in one job, runs alternating; the one
    with the best ratio wins, and the defaults stay where none is faster than the default in
    its job. The jobs run side by side on the executor's slots."""
    ranked: list[Candidate] = sorted(
        (c for c in result.candidates if c.result.status == "ok" and c.result.seconds),
        key=lambda c: c.result.seconds or 0.0,
    )
    finalists: list[dict[str, Any]] = []
    for candidate in ranked:
        if candidate.choices and candidate.choices not in finalists:
            finalists.append(candidate.choices)
        if len(finalists) == REMEASURED:
            break
    futures = [
        (
            choices,
            executor.submit(
                job(
                    choices,
                    reference=result.default.output,
                    compare_with={},
                    repeats=max(repeats, 5),
                    timeout=600.0,
                )
            ),
        )
        for choices in finalists
    ]
    best: tuple[float, dict[str, Any], JobResult] | None = None
    for choices, future in futures:
        checked = future.result()
        if checked.status != "ok" or not checked.seconds or not checked.baseline_seconds:
            continue
        ratio = checked.baseline_seconds / checked.seconds
        if best is None or ratio > best[0]:
            best = (ratio, choices, checked)
    if best is None:
        return  # keep the tuning's own times
    ratio, choices, checked = best
    result.remeasured = True
    result.default_seconds = checked.baseline_seconds
    if ratio > 1.0:
        result.best_choices, result.best_seconds = choices, checked.seconds
    else:
        result.best_choices, result.best_seconds = {}, checked.baseline_seconds


def _store(result: TuneResult, db: TuningDB) -> None:
    db.put(
        Tuning(
            key=result.key.digest,
            scope=result.key.scope,
            entry=result.key.entry,
            description=result.key.describe(),
            choices=result.best_choices,
            default_seconds=result.default_seconds,
            best_seconds=result.best_seconds,
            search=result.search,
            candidates=len(result.candidates),
            tuning_seconds=result.seconds,
        )
    )
    run = uuid.uuid4().hex[:12]
    db.add_candidates(
        result.key,
        run,
        [
            CandidateRecord(
                c.choices, c.result.status, c.result.seconds, c.result.compile_seconds,
                c.result.message,
            )
            for c in result.candidates
        ],
    )
    result.stored = True
