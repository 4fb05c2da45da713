"""bench_polybench's report writers on fabricated results: speedups, geometric means, Markdown
shape, the JSON round trip and the chart."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench_polybench.report import (
    best_speedup,
    geomean,
    geomean_best_speedups,
    geomean_paired_speedups,
    geomean_speedups,
    markdown,
    paired_speedup,
    report_stem,
    speedup,
    thread_scaling,
    write_reports,
)
from bench_polybench.results import Cell, ConfigInfo, Suite


def fabricated() -> Suite:
    """gcc, polyflow and polly (missing) on four kernels.

    polyflow: 2x faster on a, 2x slower on b, 4x faster on c; invalid on d (timed but not counted).
    """
    suite = Suite(
        size="MINI",
        threads=2,
        repeat=3,
        rtol=1e-6,
        timeout=60.0,
        started="2026-01-02T03:04:05",
        seconds=12.0,
        machine={"cpu": "Test CPU", "cores": 2, "compilers": {"gcc": "gcc 12"}},
        configs=[
            ConfigInfo("gcc", "GCC", "gcc -O3", 2),
            ConfigInfo("polyflow", "polyflow -O3", "polyflow O3", 2),
            ConfigInfo("polly", "Polly", "clang-14 -mllvm -polly", 2, missing="clang-14 not found"),
        ],
        kernels=["a", "b", "c", "d"],
        missing_kernels={"e": "no kernel file kernels/e.c"},
    )
    gcc_times = {"a": [1.0, 3.0, 2.0], "b": [1.0, 1.0, 1.0], "c": [4.0, 4.0, 4.0], "d": [1.0] * 3}
    poly_times = {"a": [1.0, 1.0, 0.5], "b": [2.0, 2.0, 2.0], "c": [1.0, 1.0, 1.0], "d": [0.1] * 3}
    for kernel in suite.kernels:
        suite.reference[kernel] = Cell(kernel, "gcc-O2", times=[1.0], max_rel_err=0.0)
        suite.cells.append(Cell(kernel, "gcc", times=gcc_times[kernel], max_rel_err=0.0))
        poly = Cell(
            kernel,
            "polyflow",
            times=poly_times[kernel],
            max_rel_err=1e-16,
            compiled=["init_array", f"kernel_{kernel}"],
            fallbacks={},
        )
        suite.cells.append(poly)
        suite.cells.append(Cell(kernel, "polly", status="missing", message="clang-14 not found"))
    d = suite.cell("d", "polyflow")
    assert d is not None
    d.status, d.max_rel_err = "invalid", 0.5
    d.message = "A[3]: 1.5 vs reference 1.0 (relative error 0.333 > 1e-06)"
    c = suite.cell("c", "polyflow")
    assert c is not None
    c.fallbacks = {"helper": "it calls printf"}
    return suite


def test_median_and_speedup() -> None:
    suite = fabricated()
    a = suite.cell("a", "gcc")
    assert a is not None and a.median == 2.0
    assert speedup(suite, "a", "polyflow") == pytest.approx(2.0)
    assert speedup(suite, "b", "polyflow") == pytest.approx(0.5)
    assert speedup(suite, "d", "polyflow") is None  # invalid: not a speedup that counts
    assert speedup(suite, "d", "polyflow", validated=False) == pytest.approx(10.0)
    assert speedup(suite, "a", "polly") is None
    assert speedup(suite, "a", "gcc") == 1.0


def test_paired_speedups_divide_within_each_round() -> None:
    suite = fabricated()
    # a: gcc 1, 3, 2 against 1, 1, 0.5 -> ratios 1, 3, 4: median 3 (medians' ratio: 2)
    assert paired_speedup(suite, "a", "polyflow") == pytest.approx(3.0)
    assert speedup(suite, "a", "polyflow") == pytest.approx(2.0)
    # a slow round slows both alike: the ratio of the round is kept, the medians' is not
    a_gcc, a_poly = suite.cell("a", "gcc"), suite.cell("a", "polyflow")
    assert a_gcc is not None and a_poly is not None
    a_gcc.times, a_poly.times = [1.0, 1.0, 3.0, 3.0, 3.0], [0.5, 0.5, 1.5, 1.5, 1.5]
    assert paired_speedup(suite, "a", "polyflow") == pytest.approx(2.0)
    assert speedup(suite, "a", "polyflow") == pytest.approx(2.0)
    # polyflow 2x faster in each round, but its median run fell in a slow stretch, gcc's not
    a_gcc.times, a_poly.times = [1.0, 1.0, 1.0, 3.0, 3.0], [0.5, 1.5, 1.5, 1.5, 1.5]
    assert speedup(suite, "a", "polyflow") == pytest.approx(1.0 / 1.5)
    assert paired_speedup(suite, "a", "polyflow") == pytest.approx(2.0)
    assert paired_speedup(suite, "d", "polyflow") is None  # invalid
    assert paired_speedup(suite, "a", "polly") is None  # missing
    value, count = geomean_paired_speedups(suite)["polyflow"]
    assert count == 3 and value == pytest.approx((2.0 * 0.5 * 4.0) ** (1 / 3))
    text = markdown(suite)
    rows = table_rows(text, "## Paired speedups over gcc")
    assert rows[0] == ["kernel", "polyflow", "polly"]
    assert rows[2] == ["a", "2.00", "—"] and rows[-1][0] == "geomean"


def test_best_of_speedups_divide_the_fastest_runs() -> None:
    suite = fabricated()
    # a: gcc's fastest 1.0 against polyflow's 0.5; c: 4.0 against 1.0
    assert best_speedup(suite, "a", "polyflow") == pytest.approx(2.0)
    assert best_speedup(suite, "c", "polyflow") == pytest.approx(4.0)
    assert best_speedup(suite, "d", "polyflow") is None  # invalid
    assert best_speedup(suite, "a", "polly") is None  # missing
    value, count = geomean_best_speedups(suite)["polyflow"]
    assert count == 3 and value == pytest.approx((2.0 * 0.5 * 4.0) ** (1 / 3))
    rows = table_rows(markdown(suite), "## Best-of speedups over gcc")
    assert rows[2] == ["a", "2.00", "—"] and rows[-1][0] == "geomean"


def test_two_threads_against_one_flags_a_slowdown() -> None:
    suite = fabricated()
    suite.configs.append(ConfigInfo("polyflow-par", "polyflow, 2 threads", "polyflow O3", 2))
    par_times = {"a": [0.3, 0.25, 0.4], "b": [2.5, 2.2, 2.4], "c": [1.04, 1.2, 1.1], "d": [0.1] * 3}
    for kernel in suite.kernels:
        suite.cells.append(Cell(kernel, "polyflow-par", times=par_times[kernel], max_rel_err=0.0))
    # best of each: a 0.5 / 0.25, b 2.0 / 2.2 (10% slower), c 1.0 / 1.04 (within 5%)
    assert thread_scaling(suite, "a", "polyflow-par") == pytest.approx(2.0)
    assert thread_scaling(suite, "b", "polyflow-par") == pytest.approx(2.0 / 2.2)
    assert thread_scaling(suite, "a", "polyflow") is None  # no twin: not a parallel one
    rows = table_rows(markdown(suite), "## Two threads against one")
    assert rows[0] == ["kernel", "polyflow-par / polyflow"]
    by_kernel = {row[0]: row[1] for row in rows[2:]}
    assert by_kernel["a"] == "2.00" and by_kernel["b"] == "**0.91**" and by_kernel["c"] == "0.96"
    assert by_kernel["d"] == "—"  # polyflow's run of d is invalid


def test_fast_math_configurations_are_compared_with_gcc_fast_math() -> None:
    suite = fabricated()
    suite.configs += [
        ConfigInfo("gcc-fast", "GCC -ffast-math", "gcc -O3 -ffast-math", 2, fast_math=True),
        ConfigInfo("polyflow-fast", "polyflow -ffast-math", "polyflow", 2, fast_math=True),
    ]
    for kernel in suite.kernels:
        suite.cells.append(Cell(kernel, "gcc-fast", times=[0.5] * 3, max_rel_err=1e-9))
        suite.cells.append(Cell(kernel, "polyflow-fast", times=[0.25] * 3, max_rel_err=1e-9))
    # against gcc -ffast-math (0.5 s), not gcc (1-4 s)
    assert speedup(suite, "b", "polyflow-fast") == pytest.approx(2.0)
    assert speedup(suite, "b", "gcc-fast") == pytest.approx(1.0)
    assert speedup(suite, "b", "polyflow") == pytest.approx(0.5)
    text = markdown(suite)
    means = table_rows(text, "## Geometric mean speedup over gcc")
    assert ["polyflow-fast", "-ffast-math", "2.000", "4"] in means
    assert "validated at relative tolerance 0.0001" in text


def test_geomean_math() -> None:
    assert geomean([]) is None
    assert geomean([2.0, 0.5]) == pytest.approx(1.0)
    assert geomean([4.0, 1.0]) == pytest.approx(2.0)
    assert geomean([2.0, 0.5, 4.0]) == pytest.approx(4.0 ** (1 / 3))
    means = geomean_speedups(fabricated())
    # over a, b, c (d is invalid for polyflow): (2 * 0.5 * 4) ** (1/3)
    assert means["polyflow"][0] == pytest.approx(4.0 ** (1 / 3)) and means["polyflow"][1] == 3
    assert means["gcc"][0] == pytest.approx(1.0) and means["gcc"][1] == 4
    assert means["polly"] == (None, 0)


def test_geomean_counts_only_kernels_where_gcc_validated_too() -> None:
    suite = fabricated()
    gcc_b = suite.cell("b", "gcc")
    assert gcc_b is not None
    gcc_b.status = "run-failed"
    value, count = geomean_speedups(suite)["polyflow"]
    assert count == 2 and value == pytest.approx(math.sqrt(2.0 * 4.0))


def table_rows(text: str, heading: str) -> list[list[str]]:
    """The rows of the first Markdown table after `heading`, split into cells."""
    lines = text.split(heading, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_markdown_shape() -> None:
    text = markdown(fabricated())
    assert text.startswith("# PolyBench-style suite: MINI dataset\n")
    rows = table_rows(text, "## Results")
    assert rows[0] == ["kernel", "gcc", "polyflow", "polly"]
    assert rows[1] == ["---", "---:", "---:", "---:"]
    assert [r[0] for r in rows[2:]] == ["a", "b", "c", "d"]
    assert all(len(r) == 4 for r in rows)
    a = dict(zip(rows[0], rows[2], strict=True))
    assert a["gcc"] == "2 s · 1.00× · ok (exact)"
    assert a["polyflow"] == "1 s · 2.00× · ok (1.0e-16)"
    assert a["polly"] == "missing"
    d = dict(zip(rows[0], rows[5], strict=True))
    assert d["polyflow"] == "0.1 s · 10.00× · **invalid** (5.0e-01)"

    means = table_rows(text, "## Geometric mean speedup over gcc")
    assert means[0] == ["configuration", "contract", "geomean speedup", "kernels"]
    assert means[2:] == [
        ["gcc", "C order", "1.000", "4"],
        ["polyflow", "C order", "1.587", "3"],
        ["polly", "C order", "—", "0"],
    ]

    failures = text.split("## Failures", 1)[1].split("##", 1)[0]
    assert "- d × polyflow: invalid: A[3]: 1.5 vs reference 1.0" in failures
    assert failures.count("\n- ") == 1
    not_run = text.split("## Not run", 1)[1]
    assert "- configuration polly: missing: clang-14 not found" in not_run
    assert "- kernel e: no kernel file kernels/e.c" in not_run
    assert "- c × polyflow: `helper` left to the C compiler: it calls printf" in text


def test_markdown_without_failures_says_so() -> None:
    suite = fabricated()
    suite.cells = [c for c in suite.cells if c.kernel != "d"]
    suite.kernels.remove("d")
    assert "## Failures\n\nNone.\n" in markdown(suite)


def test_write_reports(tmp_path: Path) -> None:
    suite = fabricated()
    paths = write_reports(suite, tmp_path / "out")
    assert report_stem(suite) == "2026-01-02-mini"
    assert [p.name for p in paths] == [f"2026-01-02-mini.{ext}" for ext in ("json", "md", "png")]
    data = json.loads(paths[0].read_text())
    assert data["machine"]["cpu"] == "Test CPU"
    assert data["cells"][0]["times"] == [1.0, 3.0, 2.0] and data["cells"][0]["median"] == 2.0
    assert data["geomean_speedups"]["polyflow"]["kernels"] == 3
    assert data["speedups"]["polyflow"]["d"] == pytest.approx(10.0)
    assert Suite.from_json(data) == suite  # the raw data is complete: reports can be rewritten
    assert paths[1].read_text() == markdown(suite)
    assert paths[2].read_bytes().startswith(b"\x89PNG")


def test_infinite_errors_survive_json() -> None:
    suite = fabricated()
    d = suite.cell("d", "polyflow")
    assert d is not None
    d.max_rel_err = math.inf
    data = json.loads(json.dumps(suite.to_json()))
    assert Suite.from_json(data).cell("d", "polyflow") == d
