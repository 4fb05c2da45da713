"""Progress: a rich progress bar on a terminal where rich is importable, else one line per
step on stderr (what a log file of a background run shows)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol


class Progress(Protocol):
    def case(self, title: str) -> None: ...
    def step(self, what: str) -> None: ...
    def done(self, summary: str) -> None: ...


class _Plain:
    def __init__(self, total: int) -> None:
        self.total, self.count, self.title = total, 0, ""

    def case(self, title: str) -> None:
        self.count += 1
        self.title = title

    def step(self, what: str) -> None:
        print(f"[{self.count}/{self.total}] {self.title}: {what}", file=sys.stderr, flush=True)

    def done(self, summary: str) -> None:
        print(f"[{self.count}/{self.total}] {self.title}: {summary}", file=sys.stderr, flush=True)


class _Rich:
    def __init__(self, bar: Any, total: int) -> None:
        self.bar = bar
        self.task = bar.add_task("starting", total=total)
        self.title = ""

    def case(self, title: str) -> None:
        self.title = title

    def step(self, what: str) -> None:
        self.bar.update(self.task, description=f"{self.title}: {what}")

    def done(self, summary: str) -> None:
        self.bar.console.print(f"{self.title}: {summary}")
        self.bar.advance(self.task)


@contextmanager
def progress(total: int) -> Iterator[Progress]:
    if not sys.stderr.isatty():
        yield _Plain(total)
        return
    try:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
    except ImportError:
        yield _Plain(total)
        return
    columns = ("{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, transient=True, console=Console(stderr=True)) as bar:
        yield _Rich(bar, total)
