"""Build every kernel with every configuration, run them, validate them against gcc -O2.

    python -m bench_polybench [--size MINI|SMALL|MEDIUM|LARGE|EXTRALARGE] [--kernels a,b]
                              [--configs gcc,polyflow,...] [--threads N] [--repeat 5]
                              [--out DIR] [--timeout S] [--slowdown-limit 5] [--rtol 1e-6]
                              [--rtol-fast 1e-4]
                              [--jobs 2] [--resume CHECKPOINT]

Builds run side by side (`--jobs`, default 2); runs are sequential, so that they time alone:
each kernel's configurations run in turn, `--repeat` rounds, and the median time is reported.
A configuration whose program is provably the same code as its twin's for a kernel (polly-par
and polly, polyflow-par and polyflow) shares the twin's runs, and gcc-omp runs only where GCC
parallelizes a loop of the kernel (see sharing.py).
Every run's dump is compared with the reference's (gcc -O2, built and run once per kernel).
Results go to `<out>/<date>-<size>.{json,md,png}` (see report.py); the Markdown table is also
printed. After each kernel the results so far are saved to `<out>/<size>.partial.json`;
`--resume` continues such a run (same size, threads, repeat and configurations) from the
first kernel it had not finished, so an interrupted LARGE run loses one kernel at most. Exit status 1 when a build, a run or a validation failed (a configuration whose tool
is missing is reported, not a failure), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, TaskID

from bench_polybench import KERNELS, KERNELS_DIR, RESULTS_DIR, SIZES
from bench_polybench.common import machine_info, parse_time, progress_display
from bench_polybench.configs import (
    CONFIGS,
    REFERENCE,
    BuildResult,
    Config,
    compiler_versions,
    missing_reason,
)
from bench_polybench.dump import validate
from bench_polybench.report import markdown, write_reports
from bench_polybench.results import Cell, ConfigInfo, Suite
from bench_polybench.sharing import not_relevant_reason, shared_reason


@dataclass
class RunOutcome:
    """One execution of a kernel program."""

    seconds: float | None
    stdout: str
    error: str | None = None  # why it failed
    timed_out: bool = False


def run_program(exe: Path, env: dict[str, str], timeout: float) -> RunOutcome:
    """Run `exe` once; the time comes from its `time:` line on stderr."""
    try:
        proc = subprocess.run(
            [str(exe)],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            cwd=exe.parent,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return RunOutcome(None, "", f"timed out after {timeout:g} s", timed_out=True)
    except OSError as exc:
        return RunOutcome(None, "", f"cannot run {exe.name}: {exc}")
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-10:]) or "(no output on stderr)"
        return RunOutcome(None, proc.stdout, f"exit {proc.returncode}: {tail}")
    seconds = parse_time(proc.stderr)
    if seconds is None:
        return RunOutcome(None, proc.stdout, "no 'time: <seconds>' line on stderr")
    return RunOutcome(seconds, proc.stdout)


def _apply_build(cell: Cell, built: BuildResult) -> None:
    cell.build_command = built.command
    cell.build_seconds = built.seconds
    cell.compiled, cell.fallbacks, cell.warnings = built.compiled, built.fallbacks, built.warnings
    cell.parallel_functions = built.parallel_functions
    if not built.ok:
        cell.status, cell.message = "build-failed", built.message


def run_suite(
    *,
    size: str,
    kernels: Sequence[str],
    configs: Sequence[str],
    threads: int,
    repeat: int,
    rtol: float = 1e-6,
    rtol_fast: float = 1e-4,
    timeout: float = 600.0,
    slowdown_limit: float = 0.0,
    build_timeout: float = 600.0,
    jobs: int = 2,
    kernels_dir: Path = KERNELS_DIR,
    build_dir: Path | None = None,
    console: Console | None = None,
    checkpoint: Path | None = None,
    resume: Suite | None = None,
) -> Suite:
    """Build, run and validate `kernels` with `configs`; the result of every kernel × config.

    With `checkpoint`, the suite so far is written there as JSON after every kernel; `resume`
    is such a saved suite, whose completed kernels are kept and not run again.
    """
    start = time.perf_counter()
    console = console or Console(stderr=True)
    suite = Suite(
        size=size,
        threads=threads,
        repeat=repeat,
        rtol=rtol,
        rtol_fast=rtol_fast,
        timeout=timeout,
        slowdown_limit=slowdown_limit,
        started=datetime.now().isoformat(timespec="seconds"),
    )
    done: set[str] = set()
    if resume is not None:
        _check_resumable(resume, suite, configs)
        suite.started, suite.seconds = resume.started, resume.seconds
        done = set(resume.completed)
    sources: dict[str, Path] = {}
    for kernel in kernels:
        source = kernels_dir / f"{kernel}.c"
        if source.is_file():
            sources[kernel] = source
            suite.kernels.append(kernel)
        else:
            suite.missing_kernels[kernel] = f"no kernel file {source}"

    with console.status("checking the compilers"):
        available: list[Config] = []
        for name in configs:
            config = CONFIGS[name]
            why = missing_reason(name)
            suite.configs.append(
                ConfigInfo(
                    name,
                    config.description,
                    config.describe(threads),
                    threads,
                    why,
                    fast_math=config.fast_math,
                )
            )
            if why is None:
                available.append(config)
        reference_missing = missing_reason(REFERENCE.name)
        suite.machine = machine_info(compiler_versions())

    for kernel in suite.kernels:
        if kernel in done and resume is not None:
            suite.reference[kernel] = resume.reference[kernel]
            suite.cells.extend(c for c in resume.cells if c.kernel == kernel)
            suite.completed.append(kernel)
            continue
        suite.reference[kernel] = Cell(kernel, REFERENCE.name)
        for info in suite.configs:
            cell = Cell(kernel, info.name)
            if info.missing is not None:
                cell.status, cell.message = "missing", info.missing
            suite.cells.append(cell)
    todo = {k: v for k, v in sources.items() if k not in done}
    earlier = suite.seconds

    def save() -> None:
        suite.seconds = earlier + time.perf_counter() - start
        if checkpoint is not None:
            checkpoint.parent.mkdir(parents=True, exist_ok=True)
            tmp_path = checkpoint.with_suffix(".tmp")
            tmp_path.write_text(json.dumps(suite.to_json(), indent=1))
            tmp_path.replace(checkpoint)

    with tempfile.TemporaryDirectory(prefix="polyflow-bench-") as tmp:
        workdir = build_dir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        with progress_display(console) as bar:
            built = _build_all(
                suite, todo, available, reference_missing, workdir, build_timeout, jobs, bar
            )
            _skip_redundant_runs(suite, todo, available, built, workdir, jobs, bar)
            _run_all(suite, list(todo), available, workdir, bar, save)
    save()
    return suite


def _check_resumable(saved: Suite, fresh: Suite, configs: Sequence[str]) -> None:
    """A run can only be continued with the parameters it started with."""
    ours = (fresh.size, fresh.threads, fresh.repeat, list(configs))
    theirs = (saved.size, saved.threads, saved.repeat, saved.config_names)
    if ours != theirs:
        raise ValueError(
            "--resume: the saved run used size, threads, repeat, configurations = "
            f"{theirs}, this one {ours}"
        )


def _exe(workdir: Path, size: str, kernel: str, config: str) -> Path:
    return workdir / f"{kernel}.{size}.{config}"


def _build_all(
    suite: Suite,
    sources: dict[str, Path],
    available: list[Config],
    reference_missing: str | None,
    workdir: Path,
    timeout: float,
    jobs: int,
    bar: Progress,
) -> dict[tuple[str, str], BuildResult]:
    """Build every kernel with the reference and every configuration; the results by
    (kernel, configuration)."""
    work: list[tuple[Cell, Config]] = []
    for kernel in sources:
        ref = suite.reference[kernel]
        if reference_missing is not None:
            ref.status, ref.message = "build-failed", f"missing: {reference_missing}"
        else:
            work.append((ref, REFERENCE))
        for config in available:
            cell = suite.cell(kernel, config.name)
            assert cell is not None
            work.append((cell, config))
    task = bar.add_task("building", total=len(work))

    def build(item: tuple[Cell, Config]) -> tuple[Cell, BuildResult]:
        cell, config = item
        exe = _exe(workdir, suite.size, cell.kernel, config.name)
        return cell, config.build(sources[cell.kernel], exe, suite.size, suite.threads, timeout)

    results: dict[tuple[str, str], BuildResult] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for future in as_completed([pool.submit(build, item) for item in work]):
            cell, built = future.result()
            _apply_build(cell, built)
            results[cell.kernel, cell.config] = built
            status = "" if built.ok else " [red]failed[/]"
            bar.update(task, description=f"built {cell.kernel} ({cell.config}){status}")
            bar.advance(task)
    bar.update(task, description="building: done")
    return results


def _skip_redundant_runs(
    suite: Suite,
    sources: dict[str, Path],
    available: list[Config],
    built: dict[tuple[str, str], BuildResult],
    workdir: Path,
    jobs: int,
    bar: Progress,
) -> None:
    """Mark the cells whose runs would measure a program another configuration measures
    (`same_as`), and gcc-omp's where it parallelizes nothing of the kernel (see sharing.py)."""
    names = {config.name: config for config in available}
    work: list[tuple[Cell, Config]] = []
    for kernel in sources:
        for config in available:
            cell = suite.cell(kernel, config.name)
            assert cell is not None
            if cell.ok and (config.twin in names or config.only_if_gcc_parallelizes):
                work.append((cell, config))
    if not work:
        return
    task = bar.add_task("comparing programs", total=len(work))

    def judge(item: tuple[Cell, Config]) -> tuple[Cell, str | None, str]:
        """The cell, the configuration whose runs it shares (None: it runs, or is not
        relevant when the reason is not empty) and the reason."""
        cell, config = item
        source = sources[cell.kernel]
        if config.only_if_gcc_parallelizes:
            why = not_relevant_reason(config, source, suite.size, suite.threads)
            if why is not None:
                return cell, None, why
        twin = names.get(config.twin or "")
        mine = built.get((cell.kernel, config.name))
        theirs = built.get((cell.kernel, twin.name)) if twin is not None else None
        if twin is None or mine is None or theirs is None:
            return cell, None, ""
        exe, twin_exe = (
            _exe(workdir, suite.size, cell.kernel, c) for c in (config.name, twin.name)
        )
        why = shared_reason(
            config, twin, mine, theirs, source, exe, twin_exe, suite.size, suite.threads
        )
        return (cell, twin.name, why) if why is not None else (cell, None, "")

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for future in as_completed([pool.submit(judge, item) for item in work]):
            cell, twin_name, why = future.result()
            if twin_name is not None:
                cell.same_as, cell.message = twin_name, why
            elif why:
                cell.status, cell.message = "not-relevant", why
            bar.advance(task)
    bar.update(task, description="comparing programs: done")


def _run_all(
    suite: Suite,
    kernels: list[str],
    available: list[Config],
    workdir: Path,
    bar: Progress,
    save: Callable[[], None],
) -> None:
    cells: dict[str, list[tuple[Cell, Config]]] = {}
    for kernel in kernels:
        cells[kernel] = []
        for config in available:
            cell = suite.cell(kernel, config.name)
            assert cell is not None
            if cell.status == "ok" and cell.same_as is None:
                cells[kernel].append((cell, config))
    total = sum(1 + suite.repeat * len(v) for v in cells.values())
    task: TaskID = bar.add_task("running", total=total)
    for kernel in kernels:
        ref = suite.reference[kernel]
        reference_dump: str | None = None
        bar.update(task, description=f"running {kernel} (reference {REFERENCE.name})")
        if ref.status == "ok":
            outcome = run_program(
                _exe(workdir, suite.size, kernel, REFERENCE.name),
                REFERENCE.env(suite.threads),
                suite.timeout,
            )
            _record(ref, outcome)
            if ref.status == "ok":
                reference_dump = outcome.stdout
        bar.advance(task)
        limit = run_timeout(suite, ref.median if ref.status == "ok" else None)
        live = list(cells[kernel])
        for round_ in range(suite.repeat):
            for cell, config in list(live):
                bar.update(
                    task,
                    description=f"running {kernel} ({config.name}) {round_ + 1}/{suite.repeat}",
                )
                outcome = run_program(
                    _exe(workdir, suite.size, kernel, config.name), config.env(suite.threads), limit
                )
                if outcome.timed_out and limit < suite.timeout:
                    outcome.error = (
                        f"timed out after {limit:.0f} s ({suite.slowdown_limit:g}x the "
                        f"reference's {ref.median:.3g} s)"
                    )
                _record(cell, outcome)
                if outcome.error is not None:  # no more rounds for it
                    live.remove((cell, config))
                    bar.advance(task, suite.repeat - round_)
                    continue
                rtol = suite.rtol_fast if config.fast_math else suite.rtol
                _check(cell, outcome.stdout, reference_dump, ref, rtol)
                bar.advance(task)
        _copy_shared_runs(suite, kernel)
        suite.completed.append(kernel)
        save()
    bar.update(task, description="running: done")


def _copy_shared_runs(suite: Suite, kernel: str) -> None:
    """Give each cell that shares another configuration's runs those runs' results."""
    for cell in suite.cells:
        if cell.kernel != kernel or cell.same_as is None or cell.status != "ok":
            continue
        twin = suite.cell(kernel, cell.same_as)
        assert twin is not None
        cell.times, cell.max_rel_err = list(twin.times), twin.max_rel_err
        if twin.status != "ok":
            cell.status = twin.status
            cell.message = f"as {twin.config} (same code): {twin.message}"


# A run is never cut shorter than this, however fast the reference was.
MIN_RUN_TIMEOUT = 30.0


def run_timeout(suite: Suite, reference_seconds: float | None) -> float:
    """The time limit of one run of a kernel: `suite.timeout`, or less with a slowdown limit:
    that many times the reference's time (a configuration 10x slower than gcc -O2 has made its
    point; waiting the full limit for it three times is most of a LARGE run)."""
    if suite.slowdown_limit <= 0 or reference_seconds is None:
        return suite.timeout
    return min(suite.timeout, max(MIN_RUN_TIMEOUT, suite.slowdown_limit * reference_seconds))


def _record(cell: Cell, outcome: RunOutcome) -> None:
    if outcome.error is not None:
        cell.status = "timeout" if outcome.timed_out else "run-failed"
        cell.message = outcome.error
    elif outcome.seconds is not None:
        cell.times.append(outcome.seconds)


def _check(cell: Cell, dump: str, reference_dump: str | None, ref: Cell, rtol: float) -> None:
    """Validate one run's dump; the cell keeps the worst error and the first failure's reason."""
    if reference_dump is None:
        if cell.status == "ok":
            cell.status = "unvalidated"
            cell.message = f"the reference ({REFERENCE.name}) failed: {ref.status}"
        return
    verdict = validate(reference_dump, dump, rtol)
    cell.max_rel_err = max(cell.max_rel_err or 0.0, verdict.max_rel_err)
    if not verdict.ok and cell.status == "ok":
        cell.status, cell.message = "invalid", verdict.message


def _csv(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench_polybench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--size", default="LARGE", type=str.upper, choices=SIZES)
    parser.add_argument("--kernels", help="comma-separated kernel names (default: all 30)")
    parser.add_argument(
        "--configs",
        help=f"comma-separated configurations (default: all: {','.join(CONFIGS)})",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="threads of the parallel configurations (default: the core count)",
    )
    parser.add_argument("--repeat", type=int, default=5, help="runs of each program (default 5)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="where reports go")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run (600)")
    parser.add_argument(
        "--slowdown-limit",
        type=float,
        default=5.0,
        help="stop a run at this many times the gcc -O2 reference's time (at least "
        f"{MIN_RUN_TIMEOUT:g} s; 0: only --timeout; default 5)",
    )
    parser.add_argument(
        "--build-timeout", type=float, default=600.0, help="seconds per build (600)"
    )
    parser.add_argument("--rtol", type=float, default=1e-6, help="validation tolerance (1e-6)")
    parser.add_argument(
        "--rtol-fast",
        type=float,
        default=1e-4,
        help="validation tolerance of the -ffast-math configurations (1e-4)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="builds run side by side (2)")
    parser.add_argument(
        "--kernels-dir", type=Path, default=KERNELS_DIR, help="directory of the kernel files"
    )
    parser.add_argument("--keep", type=Path, help="build in this directory and keep the programs")
    parser.add_argument(
        "--list-configs",
        action="store_true",
        help="list the configurations and whether each is here",
    )
    parser.add_argument(
        "--from-json", type=Path, help="only rewrite the reports of an earlier run's JSON"
    )
    parser.add_argument(
        "--resume",
        type=Path,
        help="continue the run saved in this checkpoint (<out>/<size>.partial.json)",
    )
    args = parser.parse_args(argv)
    args.kernel_list = _csv(args.kernels) if args.kernels else list(KERNELS)
    unknown = [k for k in args.kernel_list if k not in KERNELS]
    if unknown:
        parser.error(f"unknown kernel(s): {', '.join(unknown)} (known: {', '.join(KERNELS)})")
    args.config_list = _csv(args.configs) if args.configs else list(CONFIGS)
    unknown = [c for c in args.config_list if c not in CONFIGS]
    if unknown:
        parser.error(
            f"unknown configuration(s): {', '.join(unknown)} (known: {', '.join(CONFIGS)})"
        )
    for name in ("threads", "repeat", "jobs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.timeout <= 0 or args.build_timeout <= 0 or args.rtol < 0 or args.slowdown_limit < 0:
        parser.error(
            "--timeout and --build-timeout must be positive, --rtol and --slowdown-limit "
            "not negative"
        )
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console(stderr=True)
    if args.list_configs:
        for name, config in CONFIGS.items():
            why = missing_reason(name)
            state = "available" if why is None else f"missing: {why}"
            print(
                f"{name:14} {config.describe(args.threads)}\n{'':14} {config.description}; {state}"
            )
        return 0
    if args.from_json:
        suite = Suite.from_json(json.loads(args.from_json.read_text()))
    else:
        resume = Suite.from_json(json.loads(args.resume.read_text())) if args.resume else None
        checkpoint = args.out / f"{args.size.lower()}.partial.json"
        try:
            suite = run_suite(
                size=args.size,
                kernels=args.kernel_list,
                configs=args.config_list,
                threads=args.threads,
                repeat=args.repeat,
                rtol=args.rtol,
                rtol_fast=args.rtol_fast,
                timeout=args.timeout,
                slowdown_limit=args.slowdown_limit,
                build_timeout=args.build_timeout,
                jobs=args.jobs,
                kernels_dir=args.kernels_dir,
                build_dir=args.keep,
                console=console,
                checkpoint=checkpoint,
                resume=resume,
            )
        except ValueError as exc:
            console.print(f"[red]error:[/] {exc}")
            return 2
        checkpoint.unlink(missing_ok=True)
    paths = write_reports(suite, args.out)
    print(markdown(suite))
    for path in paths:
        console.print(f"wrote {path}")
    return 1 if suite.failures() else 0


if __name__ == "__main__":
    sys.exit(main())
