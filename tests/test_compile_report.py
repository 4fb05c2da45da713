"""The compile report (polyflow/report.py): every stage's remarks with source positions, as one
versioned JSON object, kept by the cache, joined across worker processes, written by the CLI
and absent from the IR shown to users. Every program built here is also checked against gcc."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from difftest import check_program_against_gcc

from polyflow import Options, build_program
from polyflow.errors import SourcePosition
from polyflow.report import REPORT_VERSION, CompileReport, Remark
from polyflow.storage.cache import CompileCache

# Line numbers below are those of this text.
KERNELS_C = """\
#include <stdio.h>
#define N 200
static double C[N][N], A[N][N], B[N][N], x[N], y[N];
void gemm(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = 0; k < N; k++)
        C[i][j] += A[i][k] * B[k][j];
}
double dot(int n, double *u, double *v) {
  double s = 0;
  for (int i = 0; i < n; i++)
    s += u[i] * v[i];
  return s;
}
int walk(int n, int *next) {
  int p = 0, steps = 0;
  while (p >= 0 && p < n)
    p = next[p], steps++;
  return steps;
}
int main(void) {
  int next[8] = {3, -1, 0, 1, 0, 0, 0, 0};
  for (int i = 0; i < N; i++) {
    x[i] = i % 7;
    y[i] = (i % 5) * 0.5;
    for (int j = 0; j < N; j++) {
      A[i][j] = (i + j) % 9;
      B[i][j] = (i * j) % 4;
    }
  }
  gemm();
  printf("%.6f %.6f %d\\n", C[5][7] + C[N - 1][N - 2], dot(N, x, y), walk(8, next));
  return 0;
}
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "kernels.c"
    path.write_text(KERNELS_C)
    return path


def test_the_report_is_json_and_reads_back_the_same() -> None:
    report = CompileReport()
    report.add(
        Remark("raising", "not-raised", "warning", "why", "f", SourcePosition("a.c", 3, 5))
    )
    report.add(Remark("schedule", "tiled", "remark", "band tiled 32x32", "f", None, {"sizes": [32, 32]}))
    report.schedules["f"] = "domain: ..."
    record = json.loads(report.to_json())
    assert record["version"] == REPORT_VERSION
    again = CompileReport.from_dict(record)
    assert again == report
    assert report.warnings == ["a.c:3:5: warning: why"]
    assert report.select(kind="tiled")[0].data["sizes"] == [32, 32]
    with pytest.raises(ValueError, match="version"):
        CompileReport.from_dict({**record, "version": REPORT_VERSION + 1})


def test_a_warning_says_where_as_far_as_it_is_known() -> None:
    def text(position: SourcePosition | None) -> str:
        return Remark("build", "k", "warning", "msg", None, position).text()

    assert text(SourcePosition("a.c", 3, 5)) == "a.c:3:5: warning: msg"
    assert text(SourcePosition("a.c", 3, 0)) == "a.c:3: warning: msg"
    assert text(SourcePosition("a.c", 0, 0)) == "a.c: warning: msg"
    assert text(None) == "warning: msg"
    note = Remark("schedule", "source-order", "note", "scop 0: source order kept", "f")
    assert note.text() == "f: scop 0: source order kept"


def test_every_stage_says_what_it_did_at_its_source_line(kernels: Path, tmp_path: Path) -> None:
    # -fassociative-math: the dot product's float sum may then run in parallel
    options = Options(opt_level=3, associative_math=True)
    check_program_against_gcc(kernels, tmp_path, options)  # small integers: exact in any order
    report = build_program(kernels, tmp_path / "k", options=options, cache=None)
    said = report.report
    loops = {(r.function, r.position.line): r for r in said.select(kind="loop") if r.position}
    assert loops[("gemm", 5)].data["raised"] is True
    assert loops[("dot", 12)].data["reductions"] == ["add"]
    walk = loops[("walk", 18)]
    assert walk.data["raised"] is False and walk.data["construct"] == "while"
    assert walk.data["reason"] and walk.message.startswith("while loop not raised: ")
    (tiled,) = said.select(kind="tiled", function="gemm")
    assert tiled.position is not None and tiled.position.line == 5
    assert all(size > 0 for size in tiled.data["sizes"])  # type: ignore[union-attr]
    assert said.select(kind="rescheduled", function="gemm")
    (kernel,) = said.select(kind="micro-kernel", function="gemm")
    assert kernel.data["rows"] == Options().micro_kernel_rows
    parallel = said.select(kind="parallel-loop", function="dot")
    assert parallel and parallel[0].data["reductions"] == ["addf"]
    (reordered,) = said.select(kind="float-reduction", function="dot")
    assert reordered.severity == "warning" and reordered.position.line == 12  # type: ignore[union-attr]
    assert reordered.text() in report.warnings
    for remark in said.remarks:  # every remark of this file points into it
        assert remark.position is not None and remark.position.file == str(kernels), remark


def test_by_default_no_float_reduction_is_reordered(kernels: Path, tmp_path: Path) -> None:
    report = build_program(kernels, tmp_path / "k", options=Options(opt_level=3), cache=None)
    assert not report.report.select(kind="float-reduction") and not report.warnings
    assert not report.report.select(kind="parallel-loop", function="dot")


def test_the_cli_writes_the_report_and_prints_the_schedule_facts(
    kernels: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "polyflow", "build", str(kernels), "-O3", "-fassociative-math", "-o",
         str(tmp_path / "k"), "--report", "--report-json", str(out), "--no-cache"],
        capture_output=True,
        text=True,
        check=True,
    )
    record = json.loads(out.read_text())
    assert record["version"] == REPORT_VERSION
    assert {"loop", "tiled", "parallel-loop"} <= {r["kind"] for r in record["remarks"]}
    assert "gemm:" in proc.stderr and "band tiled" in proc.stderr
    assert "reorders a floating-point addf reduction" in proc.stderr


def test_a_cache_hit_replays_the_report(kernels: Path, tmp_path: Path) -> None:
    cache = CompileCache(tmp_path / "cache")
    options = Options(opt_level=3)
    first = build_program(kernels, tmp_path / "a", options=options, cache=cache)
    again = build_program(kernels, tmp_path / "b", options=options, cache=cache)
    assert not first.cached and again.cached
    assert again.report.remarks == first.report.remarks
    assert again.report.schedules == first.report.schedules


def test_the_ir_shown_to_users_carries_no_remarks(kernels: Path, tmp_path: Path) -> None:
    out = tmp_path / "k.mlir"
    report = build_program(
        kernels, out, options=Options(opt_level=3), emit="affine-opt", cache=None
    )
    assert report.report.select(kind="micro-kernel")
    assert "polyflow.remarks" not in out.read_text()


def test_workers_join_their_reports(tmp_path: Path) -> None:
    # enough work for several groups, so that the file is split over worker processes
    functions = "\n".join(
        f"void f{k}(int n, double a[300][300], double b[300][300]) {{\n"
        f"  for (int i = 1; i < n; i++)\n"
        f"    for (int j = 0; j < n; j++)\n"
        f"      a[i][j] = a[i - 1][j] * 0.5 + b[i][j] * {k + 1};\n}}"
        for k in range(24)
    )
    calls = " ".join(f"f{k}(300, a, b);" for k in range(24))
    source = tmp_path / "many.c"
    source.write_text(
        "#include <stdio.h>\n"
        + functions
        + "\nstatic double a[300][300], b[300][300];\n"
        + "int main(void) { for (int i = 0; i < 300; i++) for (int j = 0; j < 300; j++) "
        + "{ a[i][j] = (i + j) % 3; b[i][j] = (i * j) % 5; } "
        + calls
        + ' printf("%.6f\\n", a[299][17]); return 0; }\n'
    )
    check_program_against_gcc(source, tmp_path / "diff", Options(opt_level=3))
    report = build_program(source, tmp_path / "m", options=Options(opt_level=3), cache=None)
    assert any(stage.startswith("workers (") for stage in report.timings), report.timings
    loop_functions = {r.function for r in report.report.select(kind="loop")}
    assert {f"f{k}" for k in range(24)} <= loop_functions
    lines = {r.position.line for r in report.report.select(kind="loop", function="f23") if r.position}
    assert lines == {3 + 5 * 23, 4 + 5 * 23}  # f0 starts on line 2
