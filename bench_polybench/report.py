"""The reports of a run: `<date>-<size>.json` (raw), `.md` (tables) and `.png` (speedup chart).

Speedups are over gcc under the same floating-point contract: C's order (`gcc`, gcc -O3
-march=native) or -ffast-math (`gcc-fast`); gcc's median time divided by the configuration's,
so above 1 is faster than gcc. The geometric mean of a configuration is taken over the kernels
where both it and its gcc built, ran and validated.

Paired speedups (`paired_speedup`) divide gcc's time by the configuration's within each round
(a round runs each configuration of a kernel once, one after the other, seconds apart) and take
the median over the rounds: where the machine slows down for minutes (other tenants), both
runs of a round slow down alike, and their ratio keeps what a ratio of medians mixes in.
Best-of speedups (`best_speedup`) divide gcc's fastest run by the configuration's: other
tenants only ever slow a run down, so the fastest is the least disturbed. All three are
reported; the main table's are ratios of medians. Two threads against one (`thread_scaling`):
each parallel configuration's fastest run against its one-thread twin's (`polyflow-par` against
`polyflow`), the check that more threads never make a kernel slower.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path

from bench_polybench.common import fmt
from bench_polybench.results import FAILED, Cell, Suite

BASELINE = "gcc"
FAST_BASELINE = "gcc-fast"


def baseline_of(suite: Suite, config: str) -> str:
    """The gcc configuration `config` is compared with: the one of its floating-point contract."""
    return FAST_BASELINE if suite.is_fast(config) else BASELINE


STATUS_TEXT = {
    "missing": "missing",
    "build-failed": "**build failed**",
    "run-failed": "**run failed**",
    "timeout": "**timeout**",
    "invalid": "**invalid**",
    "unvalidated": "**unvalidated**",
    "not-relevant": "n/a",
}


def speedup(suite: Suite, kernel: str, config: str, *, validated: bool = True) -> float | None:
    """gcc's median time over `config`'s for `kernel` (gcc under `config`'s floating-point
    contract; None without both; with `validated`, only where both validated)."""
    base, cell = suite.cell(kernel, baseline_of(suite, config)), suite.cell(kernel, config)
    if base is None or cell is None:
        return None
    if validated and not (base.ok and cell.ok):
        return None
    b, c = base.median, cell.median
    if b is None or c is None or b <= 0 or c <= 0:
        return None
    return b / c


def _validated(suite: Suite, kernel: str, reference: str, config: str) -> tuple[Cell, Cell] | None:
    """The cells of `kernel` under `reference` and `config`, where both validated."""
    base, cell = suite.cell(kernel, reference), suite.cell(kernel, config)
    if base is None or cell is None or not (base.ok and cell.ok):
        return None
    return base, cell


def _fastest_ratio(pair: tuple[Cell, Cell] | None) -> float | None:
    """The first cell's fastest run over the second's; None without runs of both."""
    if pair is None:
        return None
    slow = [t for t in pair[0].times if t > 0]
    fast = [t for t in pair[1].times if t > 0]
    return min(slow) / min(fast) if slow and fast else None


def paired_speedup(suite: Suite, kernel: str, config: str) -> float | None:
    """The median over the rounds of gcc's time over `config`'s in the same round (gcc under
    `config`'s contract), where both validated; None without a round of both."""
    pair = _validated(suite, kernel, baseline_of(suite, config), config)
    if pair is None:
        return None
    base, cell = pair
    ratios = [b / c for b, c in zip(base.times, cell.times, strict=False) if b > 0 and c > 0]
    return statistics.median(ratios) if ratios else None


def best_speedup(suite: Suite, kernel: str, config: str) -> float | None:
    """gcc's fastest run over `config`'s (gcc under `config`'s contract), where both
    validated; None without runs of both."""
    return _fastest_ratio(_validated(suite, kernel, baseline_of(suite, config), config))


def geomean_best_speedups(suite: Suite) -> dict[str, tuple[float | None, int]]:
    """Per configuration: the geometric mean of the best-of speedups, and over how many kernels."""
    return _geomeans_per_config(suite, best_speedup)


def one_thread_twin(suite: Suite, config: str) -> str | None:
    """The configuration `config` runs on one thread (`polly-par-fast` -> `polly-fast`), None
    when `config` is not a parallel one or its twin is not in the run."""
    if "-par" not in config:
        return None
    twin = config.replace("-par", "", 1)
    return twin if twin in suite.config_names else None


def thread_scaling(suite: Suite, kernel: str, config: str) -> float | None:
    """The fastest run of `config`'s one-thread twin over `config`'s own fastest (above 1: more
    threads are faster), where both validated; None for a configuration without a twin."""
    twin = one_thread_twin(suite, config)
    if twin is None:
        return None
    return _fastest_ratio(_validated(suite, kernel, twin, config))


# More threads may cost this much (best of the runs) before the report flags a kernel.
THREAD_SLOWDOWN_TOLERANCE = 0.05


def geomean_paired_speedups(suite: Suite) -> dict[str, tuple[float | None, int]]:
    """Per configuration: the geometric mean of the paired speedups, and over how many kernels."""
    return _geomeans_per_config(suite, paired_speedup)


def geomean(values: list[float]) -> float | None:
    """The geometric mean of positive values, None for none."""
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def geomean_speedups(suite: Suite) -> dict[str, tuple[float | None, int]]:
    """Per configuration: the geometric mean speedup over gcc, and over how many kernels."""
    return _geomeans_per_config(suite, speedup)


def _geomeans_per_config(
    suite: Suite, per_kernel: Callable[[Suite, str, str], float | None]
) -> dict[str, tuple[float | None, int]]:
    """Per configuration: the geometric mean of `per_kernel(suite, kernel, config)` over the
    kernels where it has a value, and over how many."""
    result: dict[str, tuple[float | None, int]] = {}
    for config in suite.config_names:
        values = [v for k in suite.kernels if (v := per_kernel(suite, k, config)) is not None]
        result[config] = (geomean(values), len(values))
    return result


def _err(value: float | None) -> str:
    if value is None:
        return "—"
    if value == 0.0:
        return "exact"
    return "inf" if math.isinf(value) else f"{value:.1e}"


def cell_text(suite: Suite, cell: Cell | None) -> str:
    """A table cell: `median s · speedup× · validation (max error)`, or why there is none."""
    if cell is None:
        return "—"
    if cell.status in ("missing", "build-failed", "not-relevant") or not cell.times:
        return STATUS_TEXT.get(cell.status, cell.status)
    parts = [f"{cell.median:.4g} s"]
    s = speedup(suite, cell.kernel, cell.config, validated=False)
    if s is not None:
        parts.append(f"{s:.2f}×" if s >= 0.1 else f"{s:.2g}×")
    if cell.ok:
        parts.append(f"ok ({_err(cell.max_rel_err)})")
    else:
        status = STATUS_TEXT.get(cell.status, cell.status)
        parts.append(f"{status} ({_err(cell.max_rel_err)})" if cell.status == "invalid" else status)
    if cell.same_as is not None:
        parts.append(f"= {cell.same_as}")
    return " · ".join(parts)


def _one_line(message: str, limit: int = 400) -> str:
    text = " / ".join(line.strip() for line in message.strip().splitlines() if line.strip())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _limit_text(suite: Suite) -> str:
    if suite.slowdown_limit > 0:
        return f"{suite.slowdown_limit:g}x the reference's time (at most {suite.timeout:g} s)"
    return f"{suite.timeout:g} s"


def markdown(suite: Suite) -> str:
    """The Markdown report: configurations, the kernel × configuration table, geometric means,
    failures, what was not run, and polyflow's fallbacks."""
    m = suite.machine
    compilers = m.get("compilers") or {}
    versions = "; ".join(f"{k}: {v}" for k, v in compilers.items() if v)
    lines = [
        f"# PolyBench-style suite: {suite.size} dataset",
        "",
        f"Run {suite.started}, {len(suite.kernels)} kernels, median of {suite.repeat} run(s) "
        f"each, {suite.threads} thread(s) for the parallel configurations; every output checked "
        f"against gcc -O2 at relative tolerance {suite.rtol:g}; runs stopped after "
        f"{_limit_text(suite)}; run took {suite.seconds:.0f} s ({suite.seconds / 60:.0f} min).",
        "",
        f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores. {versions}",
        "",
        "## Configurations",
        "",
        "| configuration | build; run | what |",
        "|---|---|---|",
    ]
    for info in suite.configs:
        what = info.description if info.missing is None else f"**missing**: {info.missing}"
        lines.append(f"| {info.name} | `{info.build}` | {what} |")
    lines += [
        "",
        "## Results",
        "",
        "Each cell: median kernel time · speedup over gcc under the same contract (above 1: faster) · validation "
        "(the largest relative error seen). `= X`: the same code as configuration X, so not run "
        'again (its runs are shown; see "Shared runs"); n/a: not relevant (see "Not run").',
        "",
        "| kernel | " + " | ".join(suite.config_names) + " |",
        "|---|" + "---:|" * len(suite.configs),
    ]
    for kernel in suite.kernels:
        row = [cell_text(suite, suite.cell(kernel, c)) for c in suite.config_names]
        lines.append(f"| {kernel} | " + " | ".join(row) + " |")

    lines += [
        "",
        "## Geometric mean speedup over gcc",
        "",
        "Each configuration against gcc under the same floating-point contract: C's order "
        "(against `gcc`, gcc -O3 -march=native) or -ffast-math (`*-fast`, against `gcc-fast`, "
        "validated at relative tolerance "
        f"{suite.rtol_fast:g}). Over the kernels where both validated (gcc-omp: where relevant).",
        "",
        "| configuration | contract | geomean speedup | kernels |",
        "|---|---|---:|---:|",
    ]
    for config, (value, count) in geomean_speedups(suite).items():
        contract = "-ffast-math" if suite.is_fast(config) else "C order"
        lines.append(f"| {config} | {contract} | {fmt(value, '.3f')} | {count} |")

    lines += _speedup_table(
        suite,
        "Paired speedups over gcc",
        "gcc's time over the configuration's in the same round (one run of each configuration "
        "of a kernel, one after the other), the median over the rounds: robust to the machine "
        "slowing down for minutes, which moves both runs of a round alike. Only where both "
        "validated.",
        paired_speedup,
        geomean_paired_speedups(suite),
    )
    lines += _speedup_table(
        suite,
        "Best-of speedups over gcc",
        "gcc's fastest run over the configuration's: other tenants only ever slow a run down, so "
        "the fastest of each is the least disturbed. Only where both validated.",
        best_speedup,
        geomean_best_speedups(suite),
    )

    parallel = [c for c in suite.config_names if one_thread_twin(suite, c) is not None]
    if parallel:
        limit = 1 - THREAD_SLOWDOWN_TOLERANCE
        lines += [
            "",
            "## Two threads against one",
            "",
            f"Each parallel configuration's fastest run against its one-thread twin's: above 1, "
            f"the threads pay; **bold**: slower with {suite.threads} threads than with one by "
            f"more than {THREAD_SLOWDOWN_TOLERANCE:.0%}.",
            "",
            "| kernel | "
            + " | ".join(f"{c} / {one_thread_twin(suite, c)}" for c in parallel)
            + " |",
            "|---|" + "---:|" * len(parallel),
        ]
        for kernel in suite.kernels:
            cells = []
            for config in parallel:
                value = thread_scaling(suite, kernel, config)
                text = fmt(value, ".2f")
                cells.append(f"**{text}**" if value is not None and value < limit else text)
            lines.append(f"| {kernel} | " + " | ".join(cells) + " |")

    failures = suite.failures()
    lines += ["", "## Failures", ""]
    if not failures:
        lines.append("None.")
    for cell in failures:
        lines.append(f"- {cell.kernel} × {cell.config}: {cell.status}: {_one_line(cell.message)}")

    shared = [
        f"- {c.kernel} × {c.config}: {_one_line(c.message)}" for c in suite.cells if c.same_as
    ]
    if shared:
        lines += ["", "## Shared runs", "", *shared]

    not_run = [
        f"- configuration {i.name}: missing: {i.missing}" for i in suite.configs if i.missing
    ]
    not_run += [f"- kernel {k}: {why}" for k, why in suite.missing_kernels.items()]
    not_run += [
        f"- {c.kernel} × {c.config}: {_one_line(c.message)}"
        for c in suite.cells
        if c.status == "not-relevant"
    ]
    if not_run:
        lines += ["", "## Not run", "", *not_run]

    fallbacks = [
        f"- {c.kernel} × {c.config}: `{name}` left to the C compiler: {_one_line(why, 200)}"
        for c in suite.cells
        if c.fallbacks
        for name, why in c.fallbacks.items()
    ]
    if fallbacks:
        lines += ["", "## polyflow: functions not compiled through MLIR", "", *fallbacks]
    return "\n".join(lines) + "\n"


def _speedup_table(
    suite: Suite,
    heading: str,
    what: str,
    per_kernel: Callable[[Suite, str, str], float | None],
    means: dict[str, tuple[float | None, int]],
) -> list[str]:
    """A Markdown section: `per_kernel` of each kernel and configuration but gcc's, then the
    geometric means."""
    compared = [c for c in suite.config_names if c not in (BASELINE, FAST_BASELINE)]
    lines = [
        "",
        f"## {heading}",
        "",
        what,
        "",
        "| kernel | " + " | ".join(compared) + " |",
        "|---|" + "---:|" * len(compared),
    ]
    for kernel in suite.kernels:
        row = [fmt(per_kernel(suite, kernel, c), ".2f") for c in compared]
        lines.append(f"| {kernel} | " + " | ".join(row) + " |")
    lines.append("| geomean | " + " | ".join(fmt(means[c][0], ".3f") for c in compared) + " |")
    return lines


def write_json(suite: Suite, path: Path) -> None:
    data = suite.to_json()
    data["speedups"] = {
        config: {k: speedup(suite, k, config, validated=False) for k in suite.kernels}
        for config in suite.config_names
    }
    data["geomean_speedups"] = {
        config: {"geomean": value, "kernels": count}
        for config, (value, count) in geomean_speedups(suite).items()
    }
    for key, per_kernel, means in (
        ("paired_speedups", paired_speedup, geomean_paired_speedups(suite)),
        ("best_speedups", best_speedup, geomean_best_speedups(suite)),
    ):
        data[key] = {
            config: {k: per_kernel(suite, k, config) for k in suite.kernels}
            for config in suite.config_names
        }
        data[f"geomean_{key}"] = {
            config: {"geomean": value, "kernels": count} for config, (value, count) in means.items()
        }
    data["thread_scaling"] = {
        config: {k: thread_scaling(suite, k, config) for k in suite.kernels}
        for config in suite.config_names
        if one_thread_twin(suite, config) is not None
    }
    path.write_text(json.dumps(data, indent=2) + "\n")


def write_png(suite: Suite, path: Path) -> None:
    """Grouped bars, one group per kernel (and the geometric mean), one bar per configuration
    other than gcc: the speedup over gcc on a log scale. Only validated results are drawn; a red
    cross at 1 marks a configuration that failed there (or whose gcc baseline did)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator

    configs = [
        i.name
        for i in suite.configs
        if i.name not in (BASELINE, FAST_BASELINE) and i.missing is None
    ]
    groups = [*suite.kernels, "geomean"]
    means = geomean_speedups(suite)
    width = 0.8 / max(1, len(configs))
    fig, ax = plt.subplots(figsize=(max(8.0, 0.22 * len(groups) * max(2, len(configs))), 5.0))
    drawn = False
    failed_x: list[float] = []
    for i, config in enumerate(configs):
        xs: list[float] = []
        ys: list[float] = []
        for g, kernel in enumerate(groups):
            x = g - 0.4 + width * (i + 0.5)
            s = means[config][0] if kernel == "geomean" else speedup(suite, kernel, config)
            if s is not None:
                xs.append(x)
                ys.append(s)
            elif kernel != "geomean":
                cell = suite.cell(kernel, config)
                base = suite.cell(kernel, baseline_of(suite, config))
                if (cell is not None and cell.status in FAILED) or (
                    base is not None and base.status in FAILED
                ):
                    failed_x.append(x)
        if ys:
            ax.bar(xs, ys, width=width, label=config, color=plt.get_cmap("tab10")(i % 10))
            drawn = True
    if failed_x:
        ax.scatter(
            failed_x, [1.0] * len(failed_x), marker="x", color="red", zorder=3, label="failed"
        )
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}×"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: ""))
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=60, ha="right")
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.set_ylabel("speedup over gcc -O3 (log scale)")
    ax.set_title(
        f"PolyBench-style suite, {suite.size} dataset "
        f"({suite.threads} threads for the parallel configurations)"
    )
    ax.grid(axis="y", which="major", alpha=0.3)
    if drawn or failed_x:
        ax.legend(ncols=min(len(configs) + 1, 7), fontsize="small", loc="upper left")
    if not drawn:
        ax.text(0.5, 0.5, "no validated speedups to draw", transform=ax.transAxes, ha="center")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def report_stem(suite: Suite) -> str:
    """`<date>-<size>` (size in lower case, e.g. `2026-11-22-large`), the date being the run's start."""
    return f"{suite.started[:10]}-{suite.size.lower()}"


def write_reports(suite: Suite, out: Path) -> list[Path]:
    """Write the JSON, Markdown and PNG reports into `out`; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    stem = report_stem(suite)
    json_path, md_path, png_path = (out / f"{stem}.{ext}" for ext in ("json", "md", "png"))
    write_json(suite, json_path)
    md_path.write_text(markdown(suite))
    write_png(suite, png_path)
    return [json_path, md_path, png_path]
