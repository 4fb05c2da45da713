"""How a tuning is shown: the table of the tuned options, a summary, and the convergence plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from polyflow.tune.tuner import TuneResult


def _shown(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if value is None:
        return "auto"
    return str(value).lower() if isinstance(value, bool) else str(value)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f} ms"


def options_table(result: TuneResult) -> Table:
    """The options the tuning chose, next to the defaults'."""
    table = Table(title="tuned options", title_justify="left")
    table.add_column("option")
    table.add_column("default")
    table.add_column("tuned", style="bold green")
    base = result.space.base
    if not result.best_choices:
        table.add_row("(none)", "", "the defaults were fastest")
    for name, value in sorted(result.best_choices.items()):
        table.add_row(f"--{name.replace('_', '-')}", _shown(getattr(base, name)), _shown(value))
    return table


def summary_table(result: TuneResult) -> Table:
    """Times, speedup and what became of the candidates."""
    table = Table(show_header=False, title="tuning", title_justify="left")
    table.add_column("what")
    table.add_column("value")
    table.add_row("kernel", f"{result.key.language}: {result.key.entry or '(every function)'}")
    table.add_row("search", f"{result.search} on {result.executor}")
    table.add_row("space", f"{len(result.space)} parameters, {result.space.size():,} combinations")
    counts = ", ".join(f"{n} {status}" for status, n in sorted(result.counts().items()))
    table.add_row("candidates", f"{len(result.candidates)} ({counts or 'none'})")
    table.add_row("default", _ms(result.default_seconds))
    table.add_row("tuned", _ms(result.best_seconds))
    speedup = result.speedup
    again = " (measured again, alternating with the default)" if result.remeasured else ""
    table.add_row("speedup", ("-" if speedup is None else f"{speedup:.2f}x") + again)
    table.add_row("tuning time", f"{result.seconds:.1f} s")
    return table


def wrong_candidates(result: TuneResult) -> list[str]:
    """One line per candidate discarded for output that differs from the default build's."""
    return [
        f"{_choices_text(c.choices)}: {c.result.message}"
        for c in result.candidates
        if c.result.status == "wrong"
    ]


def _choices_text(choices: dict[str, Any]) -> str:
    return " ".join(f"--{k.replace('_', '-')}={_shown(v)}" for k, v in sorted(choices.items())) or "(defaults)"


def convergence_plot(result: TuneResult, path: Path | str, title: str = "") -> Path:
    """A PNG: each candidate's time when it finished (failed ones marked at the top), the best
    so far as a step line, and the default's time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    figure, axes = plt.subplots(figsize=(7.5, 4.2), dpi=120)
    ok = [(c.finished, c.result.seconds * 1e3) for c in result.candidates if c.result.status == "ok" and c.result.seconds]
    pruned = [
        (c.finished, c.result.seconds * 1e3)
        for c in result.candidates
        if c.result.status == "pruned" and c.result.seconds
    ]
    if ok:
        axes.scatter([x for x, _ in ok], [y for _, y in ok], s=14, alpha=0.6, label="candidate")
    if pruned:
        axes.scatter(
            [x for x, _ in pruned], [y for _, y in pruned], s=14, marker="x", alpha=0.5,
            label="pruned (first run)",
        )
    top = max([y for _, y in ok + pruned] + [(result.default_seconds or 0) * 1e3], default=1.0)
    failed = [c.finished for c in result.candidates if c.result.status in ("wrong", "failed", "timeout")]
    if failed:
        axes.scatter(failed, [top] * len(failed), s=18, marker="v", color="red", label="failed / wrong")
    if result.history:
        xs = [x for x, _ in result.history] + [max([result.seconds] + [x for x, _ in result.history])]
        ys = [y * 1e3 for _, y in result.history]
        ys.append(ys[-1])
        axes.step(xs, ys, where="post", color="black", label="best so far")
    if result.default_seconds:
        axes.axhline(result.default_seconds * 1e3, color="gray", linestyle="--", label="default")
    axes.set_yscale("log")
    axes.set_xlabel("tuning time (s)")
    axes.set_ylabel("kernel time (ms)")
    speed = f", {result.speedup:.2f}x" if result.speedup else ""
    axes.set_title(title or f"{result.search} search{speed}")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path


def result_json(result: TuneResult) -> dict[str, Any]:
    """The tuning as JSON-ready data: key, choices, times, every candidate."""
    return {
        "key": result.key.digest,
        "kernel": result.key.describe(),
        "search": result.search,
        "executor": result.executor,
        "space": result.space.describe(),
        "best_choices": result.best_choices,
        "default_seconds": result.default_seconds,
        "best_seconds": result.best_seconds,
        "speedup": result.speedup,
        "remeasured": result.remeasured,
        "tuning_seconds": result.seconds,
        "stored": result.stored,
        "candidates": [
            {
                "choices": c.choices,
                "status": c.result.status,
                "seconds": c.result.seconds,
                "compile_seconds": c.result.compile_seconds,
                "message": c.result.message,
                "finished": c.finished,
                "worker": c.result.worker,
            }
            for c in result.candidates
        ],
        "history": result.history,
    }
