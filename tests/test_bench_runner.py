"""bench_polybench's runner on made-up kernels: how build failures, crashes, timeouts and missing
files are recorded, which runs are shared or skipped (sharing.py), and the command line's
checks."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from bench_polybench import runner, sharing
from bench_polybench.configs import CONFIGS
from bench_polybench.report import markdown, write_json
from bench_polybench.results import Suite

GOOD = r"""#include "bench.h"
#ifdef MINI_DATASET
#define N 40000  /* more than min_parallel_work: the kernel forks */
#else
#define N 1000
#endif
static void kernel_k(int n, DATA_TYPE A[N]) { for (int i = 0; i < n; i++) A[i] = A[i] * 2.0 + i; }
int main(void) {
  DATA_TYPE *A = BENCH_ALLOC(DATA_TYPE, N);
  bench_timer_start();
  kernel_k(N, A);
  bench_timer_stop();
  bench_timer_print();
  bench_dump("A", A, N);
  free(A);
  return 0;
}
"""


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    kernels = tmp_path_factory.mktemp("kernels")
    (kernels / "gemm.c").write_text(GOOD)
    (kernels / "atax.c").write_text(GOOD.replace("A[i] * 2.0", "A[i] * undeclared"))
    (kernels / "bicg.c").write_text(GOOD.replace("free(A);", "free(A); return 3;"))
    (kernels / "mvt.c").write_text(GOOD.replace("bench_timer_stop();", "while (A[0] == A[0]) {}"))
    (kernels / "syrk.c").write_text(GOOD.replace("bench_timer_print();", ""))
    return runner.run_suite(
        size="MINI",
        kernels=["gemm", "atax", "bicg", "mvt", "syrk", "lu"],
        configs=["gcc", "gcc-omp"],
        threads=2,
        repeat=2,
        timeout=1.0,
        kernels_dir=kernels,
        console=Console(file=io.StringIO()),
    )


def test_a_good_kernel_runs_repeat_times_and_validates(suite: Suite) -> None:
    cell = suite.cell("gemm", "gcc")
    assert cell is not None and cell.status == "ok", cell
    assert len(cell.times) == 2 and cell.max_rel_err == 0.0
    assert cell.build_command.startswith("gcc -O3 -march=native ")
    assert "-DMINI_DATASET" in cell.build_command and cell.build_command.endswith("-lm")
    omp = suite.cell("gemm", "gcc-omp")
    assert omp is not None and "-ftree-parallelize-loops=2" in omp.build_command
    assert suite.reference["gemm"].status == "ok"


def test_failures_are_recorded_with_their_reason(suite: Suite) -> None:
    for config in ("gcc", "gcc-omp"):
        atax, bicg = suite.cell("atax", config), suite.cell("bicg", config)
        mvt, syrk = suite.cell("mvt", config), suite.cell("syrk", config)
        assert atax is not None and atax.status == "build-failed" and "undeclared" in atax.message
        assert (
            bicg is not None and bicg.status == "run-failed" and bicg.message.startswith("exit 3")
        )
        assert bicg.times == []  # no second run after a failure
        assert mvt is not None and mvt.status == "timeout" and "1 s" in mvt.message
        assert syrk is not None and syrk.status == "run-failed" and "time:" in syrk.message
    assert suite.reference["atax"].status == "build-failed"
    assert suite.missing_kernels.keys() == {"lu"} and "lu.c" in suite.missing_kernels["lu"]
    assert {(c.kernel, c.config) for c in suite.failures()} >= {("atax", "gcc"), ("mvt", "gcc")}


def test_the_command_line_checks_its_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--kernels", "gemm,nope"], ["--configs", "icc"], ["--repeat", "0"]):
        with pytest.raises(SystemExit) as exc:
            runner.parse_args(argv)
        assert exc.value.code == 2
    assert "unknown kernel(s): nope" in capsys.readouterr().err
    args = runner.parse_args(["--size", "mini", "--kernels", "gemm, lu", "--configs", "gcc"])
    assert (
        args.size == "MINI" and args.kernel_list == ["gemm", "lu"] and args.config_list == ["gcc"]
    )


def test_main_rewrites_reports_from_json(suite: Suite, tmp_path: Path) -> None:
    write_json(suite, tmp_path / "run.json")
    assert json.loads((tmp_path / "run.json").read_text())["size"] == "MINI"
    code = runner.main(["--from-json", str(tmp_path / "run.json"), "--out", str(tmp_path / "o")])
    assert code == 1  # the run had failures
    assert sorted(p.suffix for p in (tmp_path / "o").iterdir()) == [".json", ".md", ".png"]


def test_an_interrupted_run_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    for name in ("gemm", "syrk"):
        (kernels / f"{name}.c").write_text(GOOD)
    common = dict(
        size="MINI",
        kernels=["gemm", "syrk"],
        configs=["gcc"],
        threads=1,
        repeat=1,
        kernels_dir=kernels,
        console=Console(file=io.StringIO()),
    )
    checkpoint = tmp_path / "mini.partial.json"
    first = runner.run_suite(**common, checkpoint=checkpoint)  # type: ignore[arg-type]
    assert first.completed == ["gemm", "syrk"]
    saved = json.loads(checkpoint.read_text())
    assert saved["completed"] == ["gemm", "syrk"]
    # As if the run had stopped after gemm: syrk runs again, gemm's result is kept as it was.
    saved["completed"] = ["gemm"]
    saved["cells"][0]["times"] = [123.0]
    (kernels / "gemm.c").write_text("this would not build")
    resumed = runner.run_suite(**common, resume=Suite.from_json(saved))  # type: ignore[arg-type]
    gemm, syrk = resumed.cell("gemm", "gcc"), resumed.cell("syrk", "gcc")
    assert gemm is not None and gemm.status == "ok" and gemm.times == [123.0]
    assert syrk is not None and syrk.status == "ok" and len(syrk.times) == 1
    assert resumed.completed == ["gemm", "syrk"]
    with pytest.raises(ValueError, match="repeat"):
        runner.run_suite(**{**common, "repeat": 2}, resume=Suite.from_json(saved))  # type: ignore[arg-type]


def test_the_run_time_limit_follows_the_reference() -> None:
    suite = Suite(size="LARGE", threads=2, repeat=3, rtol=1e-6, timeout=600.0, started="")
    assert runner.run_timeout(suite, 40.0) == 600.0  # no slowdown limit: the absolute one
    suite.slowdown_limit = 10.0
    assert runner.run_timeout(suite, 40.0) == 400.0
    assert runner.run_timeout(suite, 0.5) == runner.MIN_RUN_TIMEOUT
    assert runner.run_timeout(suite, 100.0) == 600.0
    assert runner.run_timeout(suite, None) == 600.0  # the reference failed
    args = runner.parse_args([])
    assert args.slowdown_limit == 5.0
    with pytest.raises(SystemExit):
        runner.parse_args(["--slowdown-limit", "-1"])


# A recurrence: nothing to parallelize, for GCC or for polyflow.
SEQUENTIAL = GOOD.replace("A[i] = A[i] * 2.0 + i;", "A[i] = (i ? A[i - 1] : 0.0) * 0.5 + i;")


def test_kernel_function_finds_the_definition_and_its_lines() -> None:
    lines = GOOD.splitlines()
    found = sharing.kernel_function(GOOD)
    assert found is not None and found[0] == "kernel_k"
    assert lines[found[1] - 1].startswith("static void kernel_k(") and found[1] == found[2]
    text = "void kernel_a(int n);\n\nstatic void kernel_a(int n)\n{\n  { n++; }\n}\nint x;\n"
    assert sharing.kernel_function(text) == ("kernel_a", 3, 6)
    assert sharing.kernel_function("int main(void) { return 0; }") is None


def test_gcc_omp_runs_only_where_gcc_parallelizes_the_kernel(suite: Suite, tmp_path: Path) -> None:
    omp = CONFIGS["gcc-omp"]
    parallel, sequential = tmp_path / "p.c", tmp_path / "s.c"
    parallel.write_text(GOOD)
    sequential.write_text(SEQUENTIAL)
    assert sharing.not_relevant_reason(omp, parallel, "MINI", 2) is None
    why = sharing.not_relevant_reason(omp, sequential, "MINI", 2)
    assert why is not None and "no loop of kernel_k" in why
    gemm = suite.cell("gemm", "gcc-omp")  # the fixture's good kernel is parallel: it ran
    assert gemm is not None and gemm.status == "ok" and len(gemm.times) == 2


@pytest.fixture(scope="module")
def shared_suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    kernels = tmp_path_factory.mktemp("kernels")
    (kernels / "gemm.c").write_text(GOOD)
    (kernels / "trisolv.c").write_text(SEQUENTIAL)
    return runner.run_suite(
        size="MINI",
        kernels=["gemm", "trisolv"],
        configs=["gcc", "gcc-omp", "polyflow", "polyflow-par"],
        threads=2,
        repeat=3,
        kernels_dir=kernels,
        console=Console(file=io.StringIO()),
    )


def test_polyflow_par_shares_the_runs_of_a_kernel_that_starts_no_threads(
    shared_suite: Suite,
) -> None:
    seq, par = (
        shared_suite.cell("trisolv", "polyflow"),
        shared_suite.cell("trisolv", "polyflow-par"),
    )
    assert seq is not None and par is not None and seq.status == par.status == "ok"
    assert par.same_as == "polyflow" and "kernel_k starts no threads" in par.message
    assert len(seq.times) == 3 and par.times == seq.times
    assert par.max_rel_err == seq.max_rel_err and par.parallel_functions is not None
    omp = shared_suite.cell("trisolv", "gcc-omp")
    assert omp is not None and omp.status == "not-relevant" and omp.times == []
    # The parallel kernel forks: its parallel configuration runs on its own.
    seq, par = shared_suite.cell("gemm", "polyflow"), shared_suite.cell("gemm", "polyflow-par")
    assert seq is not None and par is not None and par.status == "ok" and par.same_as is None
    assert par.parallel_functions == ["kernel_k"] and len(par.times) == 3
    assert not shared_suite.failures()
    text = markdown(shared_suite)
    assert "## Shared runs" in text and "trisolv × polyflow-par: same executable" in text
    assert "trisolv × gcc-omp: GCC's auto-parallelizer parallelizes no loop" in text
    assert "· = polyflow |" in text and "| n/a |" in text
