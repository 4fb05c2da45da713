"""Smoke test of the benchmark suite: every kernel at MINI with gcc and polyflow, once.

Asserts that each kernel builds, runs and validates against gcc -O2 with both configurations,
and that polyflow compiled its `kernel_*` function through MLIR; no timing is asserted. One
test runs the whole suite (about a minute on 2 cores), so that pytest-xdist does not run it twice.
"""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from bench_polybench import KERNELS, KERNELS_DIR, kernel_function
from bench_polybench.report import write_reports
from bench_polybench.runner import run_suite


def test_all_30_kernel_files_exist() -> None:
    missing = [k for k in KERNELS if not (KERNELS_DIR / f"{k}.c").is_file()]
    assert not missing, f"no kernel file for: {', '.join(missing)}"


def test_suite_at_mini_builds_runs_and_validates(tmp_path: Path) -> None:
    kernels = [k for k in KERNELS if (KERNELS_DIR / f"{k}.c").is_file()]
    assert kernels, f"no kernel files in {KERNELS_DIR}"
    suite = run_suite(
        size="MINI",
        kernels=kernels,
        configs=["gcc", "polyflow"],
        threads=2,
        repeat=1,
        timeout=120.0,
        build_timeout=300.0,
        jobs=2,
        console=Console(file=io.StringIO()),
    )
    assert [c.name for c in suite.configs if c.missing] == [], suite.configs

    problems = [
        f"{c.kernel} × {c.config}: {c.status}: {c.message}"
        for c in [*suite.reference.values(), *suite.cells]
        if not c.ok
    ]
    assert not problems, "\n".join(problems)
    for cell in suite.cells:
        assert len(cell.times) == 1 and cell.max_rel_err is not None
        if cell.config == "polyflow":
            assert cell.compiled is not None and kernel_function(cell.kernel) in cell.compiled, (
                f"polyflow did not compile {kernel_function(cell.kernel)}: {cell.fallbacks}"
            )

    paths = write_reports(suite, tmp_path / "results")
    assert all(p.stat().st_size > 0 for p in paths)
