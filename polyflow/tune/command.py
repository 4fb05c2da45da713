"""`polyflow tune`: tune a C program's kernels or a TC definition from the command line.

    polyflow tune prog.c --functions kernel -D N=2000 --budget 10m [--search genetic|random|tpe]
                  [--workers 2 | --dask tcp://host:8786] [--db URL] [--plot conv.png]
    polyflow tune kernels.tc --name mm --sizes M=512,N=512,K=512 --budget 2m
    polyflow tune --export tunings.json | --import tunings.json | --list [--db URL]

A C file must be a whole program (with `main`): each candidate is built as `polyflow build`
builds it and run, its output checked against the default build's; the time is that of the
tuned functions (`--functions`, else every function polyflow compiles). A TC definition runs on
seeded random arrays of the sizes given. A live progress bar shows the candidates, the best
time and the speedup over the default; then a table of the tuned options, a summary and a
convergence plot (PNG). The result goes to the tuning database, where `polyflow build`,
`compile_c`, `polyflow.tc.define` and the service find it for the same kernel and inputs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from polyflow.options import Options
from polyflow.storage.tuning import TuningDB
from polyflow.tune.executors import DaskExecutor, Executor, LocalExecutor
from polyflow.tune.report import (
    convergence_plot,
    options_table,
    result_json,
    summary_table,
    wrong_candidates,
)
from polyflow.tune.search import SEARCHES
from polyflow.tune.tasks import CProgram, TcKernel
from polyflow.tune.tuner import Progress as TuneProgress
from polyflow.tune.tuner import TuneError, TuneResult, parse_duration, tune


def _error(message: str) -> None:
    print(message, file=sys.stderr)  # one line, as the shell shows it: not wrapped by rich


def add_tune_arguments(parser: argparse.ArgumentParser) -> None:
    """The tuner's own flags (the build options come from the options model)."""
    tuning = parser.add_argument_group("tuning")
    tuning.add_argument(
        "--budget",
        help="how long to tune: seconds, or 90s, 10m, 1h (default: 2m, or no limit with --candidates)",
    )
    tuning.add_argument(
        "--candidates", type=int, metavar="N", help="stop after N candidates (also --budget)"
    )
    tuning.add_argument(
        "--search", choices=SEARCHES, default="genetic",
        help="genetic (as Tensor Comprehensions), random, or tpe (Optuna's model-based search) "
        "(default: genetic)",
    )
    tuning.add_argument(
        "--workers", type=int, default=1, metavar="N",
        help="local worker processes building and running candidates at once (default: 1; "
        "timings still take their cores one at a time)",
    )
    tuning.add_argument(
        "--dask", metavar="ADDRESS",
        help="run the candidates on the Dask cluster whose scheduler is at ADDRESS "
        "(tcp://host:8786) instead of local processes",
    )
    tuning.add_argument(
        "--db", metavar="URL",
        help="the tuning database: a path, sqlite:///path or postgresql://... "
        "(default: POLYFLOW_TUNING_DB, else tuning.sqlite3 next to the compile cache)",
    )
    tuning.add_argument("--repeats", type=int, default=3, metavar="N", help="runs per candidate, best taken (default: 3)")
    tuning.add_argument("--seed", type=int, default=0, help="the search's random seed (default: 0)")
    tuning.add_argument("--plot", metavar="PNG", help="where to write the convergence plot (default: SOURCE-tuning.png)")
    tuning.add_argument("--json", dest="json_path", metavar="PATH", help="write the tuning (every candidate) as JSON")
    tuning.add_argument("--args", default="", metavar="'ARG ...'", help="the C program's command-line arguments")
    tuning.add_argument("--name", help="TC: the definition to tune (default: the only one)")
    tuning.add_argument("--sizes", default="", metavar="NAME=N,...", help="TC: the sizes of the signature (M=512,K=256)")
    tuning.add_argument(
        "--compile-only", action="store_true",
        help="fitness is the compile time, nothing runs (to measure how busy the workers are)",
    )
    tuning.add_argument("--no-store", dest="store", action="store_false", help="do not write the result to the database")
    tuning.add_argument("--export", metavar="JSON", help="write every tuning of the database to JSON, and stop")
    tuning.add_argument("--import", dest="import_path", metavar="JSON", help="read tunings from JSON into the database, and stop")
    tuning.add_argument("--list", action="store_true", help="list the database's tunings, and stop")


def run_tune_command(args: argparse.Namespace, options: Options, tc_options: Options) -> int:
    """Run `polyflow tune` with parsed `args` and the build options the flags ask for (C:
    `options`; TC: `tc_options`)."""
    console = Console(stderr=True)
    db = TuningDB(args.db) if args.store or args.export or args.import_path or args.list else None
    if args.export or args.import_path or args.list:
        assert db is not None
        return _database_command(args, db, console)
    if not args.source:
        _error("polyflow tune: error: name a C or TC file to tune (or --export/--import/--list)")
        return 2
    path = Path(args.source)
    try:
        text = path.read_text()
    except OSError as exc:
        _error(f"polyflow tune: error: cannot read {path}: {exc.strerror}")
        return 1
    task = _tc_task(text, path, args, tc_options) if path.suffix == ".tc" else _c_task(text, path, args, options)
    if isinstance(task, int):
        return task
    budget = parse_duration(args.budget) if args.budget else None if args.candidates else 120.0
    executor: Executor = DaskExecutor(args.dask) if args.dask else LocalExecutor(args.workers)
    console.print(f"tuning {path} with a {args.search} search on {executor.description}")
    try:
        with _progress_bar(console, budget) as (_, show):
            result = tune(
                task,
                search=args.search,
                budget=budget,
                max_candidates=args.candidates,
                executor=executor,
                db=db,
                repeats=args.repeats,
                seed=args.seed,
                progress=show,
                compile_only=args.compile_only,
            )
    except TuneError as exc:
        _error(f"polyflow tune: error: {exc}")
        return 1
    finally:
        executor.close()
    _print_result(result, console, path, args)
    return 0


def _c_task(text: str, path: Path, args: argparse.Namespace, options: Options) -> CProgram | int:
    import re

    if not re.search(r"\bmain\s*\(", text):
        _error(
            f"polyflow tune: error: {path} has no main(): the tuner runs the program to time "
            "its kernels and check their output (write a main that calls them on real inputs)"
        )
        return 2
    return CProgram(
        text,
        str(path),
        options.model_dump(exclude_unset=True),
        timed=options.functions,
        args=tuple(args.args.split()),
        source_dir=str(path.resolve().parent),
    )


def _tc_task(text: str, path: Path, args: argparse.Namespace, options: Options) -> TcKernel | int:
    from polyflow import tc

    fn = tc.define(text, args.name, options=options, file=str(path))
    sizes: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in args.sizes.split(","))):
        name, _, value = part.partition("=")
        try:
            sizes[name.strip()] = int(value)
        except ValueError:
            _error(f"polyflow tune: error: --sizes: expected NAME=integer, got '{part}'")
            return 2
    missing = [s for s in fn.definition.size_names if s not in sizes]
    if missing:
        _error(f"polyflow tune: error: give the sizes {', '.join(missing)} with --sizes")
        return 2
    shapes = tuple(
        (
            tuple(sizes[d] if isinstance(d, str) else int(d) for d in t.dims or ()),
            tc.NUMPY_DTYPES[t.element].__name__,
        )
        for t in fn.definition.inputs
    )
    return TcKernel(text, fn.name, options.model_dump(exclude_unset=True), shapes)


def _progress_bar(console: Console, budget: float | None) -> Any:
    """A live bar: elapsed of the budget, candidates, best time, speedup over the default."""
    import contextlib

    @contextlib.contextmanager
    def bar() -> Any:
        with Progress(
            TextColumn("[bold]tuning"),
            BarColumn(),
            TextColumn("{task.fields[candidates]} candidates"),
            TextColumn("best {task.fields[best]}"),
            TextColumn("{task.fields[speedup]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        ) as progress:
            task = progress.add_task("tune", total=budget or None, candidates=0, best="-", speedup="")

            def show(event: TuneProgress) -> None:
                speedup = (
                    f"{event.default_seconds / event.best_seconds:.2f}x the default"
                    if event.best_seconds and event.default_seconds
                    else ""
                )
                progress.update(
                    task,
                    completed=min(event.elapsed, budget) if budget else event.tried,
                    candidates=event.tried,
                    best="-" if event.best_seconds is None else f"{event.best_seconds * 1e3:.3f} ms",
                    speedup=speedup,
                )

            yield progress, show

    return bar()


def _print_result(result: TuneResult, console: Console, path: Path, args: argparse.Namespace) -> None:
    console.print(summary_table(result))
    console.print(options_table(result))
    for line in wrong_candidates(result)[:10]:
        console.print(f"[red]discarded (output differs from the default build's):[/red] {line}")
    plot = Path(args.plot) if args.plot else path.with_name(path.stem + "-tuning.png")
    convergence_plot(result, plot, title=f"{path.name}: {result.search} search")
    console.print(f"convergence plot: {plot}")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(result_json(result), indent=1, default=str) + "\n")
    if result.stored:
        console.print(
            "stored in the tuning database: builds of this kernel with the same inputs and "
            "options use it (their --report says so; --no-tuned ignores it)"
        )


def _database_command(args: argparse.Namespace, db: TuningDB, console: Console) -> int:
    if args.import_path:
        count = db.import_json(json.loads(Path(args.import_path).read_text()))
        console.print(f"imported {count} tunings into {db.url}")
    if args.export:
        data = db.export_json()
        text = json.dumps(data, indent=1) + "\n"
        if args.export == "-":
            sys.stdout.write(text)
        else:
            Path(args.export).write_text(text)
        console.print(f"exported {len(data['tunings'])} tunings from {db.url}")
    if args.list:
        from rich.table import Table

        table = Table(title=f"tunings in {db.url}")
        for column in ("kernel", "entry", "inputs", "speedup", "choices", "search"):
            table.add_column(column)
        for tuning in db.all():
            described = tuning.description
            speedup = f"{tuning.speedup:.2f}x" if tuning.speedup else "-"
            table.add_row(
                f"{described.get('language')} {str(described.get('source_hash', ''))[:10]}",
                tuning.entry or "(all)",
                " ".join(described.get("inputs", [])),
                speedup,
                json.dumps(tuning.choices, sort_keys=True),
                tuning.search,
            )
        Console().print(table)
    return 0


__all__ = ["add_tune_arguments", "run_tune_command"]
