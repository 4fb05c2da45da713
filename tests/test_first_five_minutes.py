"""What a newcomer meets first: `polyflow --version`, `--help`, `polyflow build` optimizing by
default, and `polyflow explain`'s table of what happened to each loop nest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from polyflow.cli import main

EXAMPLE = """#include <stdio.h>
#define N 512
static double A[N][N], B[N][N], C[N][N];
void gemm(int n, double C[N][N], double A[N][N], double B[N][N]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      for (int k = 0; k < n; k++)
        C[i][j] += A[i][k] * B[k][j];
}
double dot(int n, double *x, double *y) {
  double s = 0;
  for (int i = 0; i < n; i++) s += x[i] * y[i];
  return s;
}
void chase(int n, int *next, double *v) {
  int i = 0;
  while (i >= 0 && i < n) { v[i] *= 2; i = next[i]; }
}
int pick(int n, int *a) {
  int c = 0;
  for (int i = 0; i < n; i++) switch (a[i]) { case 1: c++; break; default: break; }
  return c;
}
int main(void) {
  for (int i = 0; i < N; i++) for (int j = 0; j < N; j++) { A[i][j] = i - j; B[i][j] = i + j; }
  gemm(N, C, A, B);
  printf("%.1f %.1f\\n", C[3][5], dot(N, A[0], B[1]));
  return 0;
}
"""


@pytest.fixture
def example(tmp_path: Path) -> Path:
    path = tmp_path / "example.c"
    path.write_text(EXAMPLE)
    return path


def _polyflow(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "polyflow", *args], capture_output=True, text=True, check=False
    )


def test_version_names_the_compilers_it_uses() -> None:
    done = _polyflow("--version")
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[0].startswith("polyflow ")
    for word in ("MLIR", "LLVM version", "islpy", "C compiler"):
        assert any(word in line for line in lines), (word, lines)


def test_help_lists_every_subcommand_and_groups_the_build_flags() -> None:
    top = _polyflow("--help").stdout
    for command in ("build", "cc", "explain", "tc", "serve", "config"):
        assert f"    {command} " in top, command
    build = _polyflow("build", "--help").stdout
    groups = [
        "common options:",
        "scheduling: the polyhedral stage (-O3):",
        "debugging and reports:",
    ]
    at = [build.index(g) for g in groups]
    assert at == sorted(at)
    assert "The default is -O3" in build
    # flags in their group: -O with the common ones, --tile-sizes with scheduling, --emit last
    body = build[build.index("options:") :]  # past the usage line
    assert (
        at[0]
        < build.index("-O LEVEL", at[0])
        < at[1]
        < body.index("--tile-sizes") + (len(build) - len(body))
        < at[2]
    )
    assert build.index("--emit", at[0]) > at[2]


def test_build_schedules_by_default(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", str(example), "--emit=schedule", "--no-cache"]) == 0
    assert "# function gemm" in capsys.readouterr().out  # the polyhedral stage ran
    assert main(["build", str(example), "-O2", "--emit=schedule", "--no-cache"]) == 0
    assert "rescheduling runs at -O3 only" in capsys.readouterr().out


def test_explain_has_a_row_per_loop_nest(example: Path) -> None:
    done = _polyflow("explain", str(example), "--json")
    assert done.returncode == 0, done.stderr
    rows = {r["function"]: r for r in json.loads(done.stdout)}
    assert set(rows) == {"gemm", "dot", "chase", "pick", "main"}
    gemm = rows["gemm"]
    assert (gemm["first_line"], gemm["last_line"]) == (5, 8)
    assert gemm["raised"] == gemm["scheduled"] == "yes"
    assert "x" in gemm["tiled"] and gemm["parallel"].startswith("yes")
    assert rows["dot"]["parallel"] == "no: reduction" and "-ffast-math" in rows["dot"]["why"]
    assert rows["chase"]["raised"] == "no" and "data-dependent exit" in rows["chase"]["why"]
    assert rows["pick"]["raised"] == "no" and "switch" in rows["pick"]["why"]
    assert "main()" in rows["main"]["why"]
    table = _polyflow("explain", str(example)).stdout
    assert "what polyflow did with each loop nest" in table and "gemm" in table
    assert "micro-kernel" in table


def test_explain_follows_included_templates_like_cc(tmp_path: Path) -> None:
    """GSL defines its functions in `*_source.c` files that a unit includes once per type:
    those are rows too, named by their file; `do { ... } while (0)` (a macro's wrapper) is no
    loop; calls to other units' functions are allowed, as `polyflow cc -c` allows them; a loop
    that runs once is folded, and says so."""
    (tmp_path / "scale_source.c").write_text(
        "int FN(double *x, unsigned long n, double a) {\n"
        '  if (n == 0) do { report_error("empty"); return 1; } while (0);\n'
        "  for (unsigned long i = 0; i < n; i++)\n"
        "    x[i] *= a;\n"
        "  for (unsigned long k = 0; k < 1; k++)\n"
        "    x[k] += 1;\n"
        "  return 0;\n"
        "}\n"
    )
    unit = tmp_path / "scale.c"
    unit.write_text(
        "void report_error(const char *why);\n"
        '#define FN scale_double\n#include "scale_source.c"\n#undef FN\n'
        '#define FN scale_twice\n#include "scale_source.c"\n#undef FN\n'
    )
    done = _polyflow("explain", str(unit), "-O3", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert {r["function"] for r in rows} == {"scale_double", "scale_twice"}
    assert len(rows) == 4 and all(r["file"].endswith("scale_source.c") for r in rows)
    by_line = {(r["function"], r["first_line"]): r for r in rows}
    assert by_line["scale_double", 3]["raised"] == "yes"
    assert by_line["scale_double", 5]["raised"] == "folded"
    table = _polyflow("explain", str(unit), "-O3").stdout
    assert "scale_source.c:3-4" in table
