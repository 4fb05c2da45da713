"""The bar plot of the results: per case, polyflow's primal and gradient times next to JAX's
and PyTorch's gradient times, on a log scale."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bench_ad.row import Row

SERIES: tuple[tuple[str, Callable[[Row], float | None]], ...] = (
    ("polyflow primal", lambda row: row.primal_s),
    ("polyflow grad", lambda row: row.grad_s),
    ("JAX grad", lambda row: row.jax.get("grad_s")),
    ("torch grad", lambda row: row.torch.get("grad_s")),
    ("torch.compile grad", lambda row: row.torch.get("compiled_grad_s")),
)


def plot(rows: list[Row], path: Path, title: str) -> str | None:
    """Writes the PNG; returns why not when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display: write files only
        import matplotlib.pyplot as plt
    except ImportError as error:
        return f"no plot: matplotlib is not importable ({error})"
    series = [(name, [get(row) for row in rows]) for name, get in SERIES]
    series = [(name, values) for name, values in series if any(v is not None for v in values)]
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(8.0, 0.7 * len(rows) + 2), 5.5))
    for k, (name, values) in enumerate(series):
        xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(rows))]
        heights = [v * 1e3 if v is not None else float("nan") for v in values]  # nan: no bar
        ax.bar(xs, heights, width, label=name)
    ax.set_yscale("log")
    ax.set_ylabel("time, ms (log scale; best of N)")
    ax.set_xticks(range(len(rows)))
    labels = [f"{row.kernel} {row.size}" for row in rows]
    ax.set_xticklabels(labels, rotation=60, ha="right", rotation_mode="anchor", fontsize=7)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None
