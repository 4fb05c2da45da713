"""Expanded scratchpads (polyflow/schedule/scratch.py, `_Scratch.expanded_home`): a value a loop
carries gets one element per iteration of the loop around it, so a recurrence down each column
can run row by row; checked against gcc, and the retry without expansion when it fails."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

import polyflow
import polyflow.schedule as scheduling
from polyflow.options import Options
from polyflow.toolchain import openmp_library_dir

# deriche's column passes: a recurrence down each column (i), from the top and from the bottom
COLUMNS_C = """#include <stdio.h>
#define W 300
#define H 200
static double x[W][H], y1[W][H], y2[W][H];
static void columns(int w, int h) {
  for (int j = 0; j < h; j++) {
    double tm1 = 0.0, ym1 = 0.0, ym2 = 0.0;
    for (int i = 0; i < w; i++) {
      y1[i][j] = 0.5 * x[i][j] + 0.25 * tm1 + 0.125 * ym1 - 0.0625 * ym2;
      tm1 = x[i][j];
      ym2 = ym1;
      ym1 = y1[i][j];
    }
  }
  for (int j = 0; j < h; j++) {
    double tp1 = 0.0, yp1 = 0.0;
    for (int i = w - 1; i >= 0; i--) {
      y2[i][j] = 0.75 * tp1 + 0.125 * yp1;
      tp1 = x[i][j];
      yp1 = y2[i][j];
    }
  }
}
int main(void) {
  for (int i = 0; i < W; i++)
    for (int j = 0; j < H; j++) x[i][j] = ((i * 7 + j * 3) % 17) * 0.125;
  columns(W, H);
  for (int i = 0; i < W; i += 13)
    for (int j = 0; j < H; j += 11) printf("%.17g %.17g\\n", y1[i][j], y2[i][j]);
  return 0;
}
"""


def gcc_output(src: Path, tmp_path: Path) -> str:
    exe = tmp_path / "ref"
    subprocess.run(["gcc", "-O2", str(src), "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


def run_threads(exe: Path) -> list[str]:
    outputs = []
    for threads in ("1", "2"):
        env = {"OMP_NUM_THREADS": threads, "PATH": "/usr/bin:/bin"}
        got = subprocess.run([str(exe)], capture_output=True, text=True, check=True, env=env)
        outputs.append(got.stdout)
    return outputs


@pytest.mark.skipif(openmp_library_dir() is None, reason="libiomp5 is not installed")
def test_column_recurrences_run_row_by_row_and_match_gcc(tmp_path: Path) -> None:
    src = tmp_path / "columns.c"
    src.write_text(COLUMNS_C)
    options = Options(opt_level=3)
    affine = tmp_path / "columns.mlir"
    polyflow.build_program(src, affine, options=options, emit="affine-opt")
    text = affine.read_text()
    body = text[text.index("@columns.affine") :]
    # each carried value has one element per column, on the heap, freed after the nests
    assert body.count("memref.alloc(") == 5 and body.count("memref.dealloc") == 5
    # and the columns now go innermost: a loop with no loop inside stores along a row, y[i][j]
    innermost_row_store = (
        r"affine\.for (%arg\d+) = [^\n]*\n(?:(?!affine\.for)[^\n]*\n)*?"
        r"[^\n]*affine\.store [^\n]*\[%arg\d+, \1\] : memref<300x200xf64>"
    )
    assert re.search(innermost_row_store, body)
    exe = tmp_path / "columns"
    report = polyflow.build_program(src, exe, options=options)
    assert not report.warnings
    assert run_threads(exe) == [gcc_output(src, tmp_path)] * 2


def test_without_expansion_the_scratchpads_are_scalars(tmp_path: Path) -> None:
    src = tmp_path / "columns.c"
    src.write_text(COLUMNS_C)
    affine = tmp_path / "columns.mlir"
    calls: list[bool] = []
    original = scheduling.reschedule_function

    def failing_with_expansion(*args: object, expand_scalars: bool = True) -> list[str]:
        # a failure anywhere after expanding: the function is scheduled again without
        calls.append(expand_scalars)
        if expand_scalars:
            raise RuntimeError("simulated failure")
        return original(*args, expand_scalars=expand_scalars)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scheduling, "reschedule_function", failing_with_expansion)
        report = polyflow.build_program(
            src, affine, options=Options(opt_level=3), emit="affine-opt"
        )
    assert calls == [True, False]
    assert not report.warnings  # the retry succeeded: nothing to warn about
    text = affine.read_text()
    body = text[text.index("@columns.affine") :]
    assert "memref.alloc(" not in body and "polyflow.not_scheduled" not in body


TRIANGLE_C = """
void tri(int n, double A[40][40], double L[40][40]) {
  for (int k = 0; k < n; k++)
    for (int j = 0; j < k; j++) {
      double s = A[k][j];
      for (int i = 0; i < j; i++) s -= L[k][i] * L[j][i];
      L[k][j] = s / L[j][j];
    }
}
"""


def test_an_outer_loop_bounded_by_an_inner_iterator_keeps_a_scalar() -> None:
    # the trip count of j is k, known only inside the region: no allocation before it can
    # be sized, so s keeps one 0-d scratchpad (ludcmp's and cholesky's nests)
    from test_schedule_model import Raised, only_scop

    raised = Raised(TRIANGLE_C, mini=False)
    scop, region = only_scop(raised, "tri")
    scratch = [name for name, shape in scop.arrays.items() if shape == ()]
    assert scratch and region.arrays[scratch[0]].owner.operation.name == "memref.alloca"
    assert all(shape != (-1,) for shape in scop.arrays.values())
