"""Wavefronts of tile columns run as pipelines (lowering/wavefront_pipeline.py): the IR of a
small wavefront, which builds get it, and programs that print gcc -O2's digits on 1 to 4
threads (more threads than cores too: the waits give up the core)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from difftest import build_with_gcc
from mlir import ir
from mlir.passmanager import PassManager

import polyflow
from polyflow import Options
from polyflow.lowering.wavefront_pipeline import (
    pipeline_wavefront_columns,
    wavefront_column_marks,
)

# Steps w, columns of 4: column I exists at steps max(0, I/4 - 5) .. I/4 (a band of blocks
# skewed as tiling._wavefront makes them); each block adds its column's left neighbour.
WAVEFRONT = """
func.func @f(%a: memref<64xf64>) {
  affine.for %w = 0 to 11 {
    affine.parallel (%i) = (max(0, %w * 4 - 20)) to (min(%w * 4 + 4, 24)) step (4) {
      %x = affine.load %a[%i + 4] : memref<64xf64>
      %y = affine.load %a[%i] : memref<64xf64>
      %z = arith.addf %x, %y : f64
      affine.store %z, %a[%i + 4] : memref<64xf64>
    } {polyflow.wavefront_columns}
  }
  return
}
"""


def _pipelined(text: str) -> tuple[int, str]:
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        marks = wavefront_column_marks(module)
        PassManager.parse("builtin.module(lower-affine)").run(module.operation)
        count = pipeline_wavefront_columns(module, marks)
        assert module.operation.verify()
        return count, str(module)


def test_the_steps_loop_becomes_one_parallel_loop_over_columns() -> None:
    count, text = _pipelined(WAVEFRONT)
    assert count == 1
    body = text.split("func.func @f")[1]
    # the columns' range first (a loop over the steps), one counter per column, then the
    # parallel loop over columns with the steps inside it: no parallel loop inside a loop
    assert body.index("memref.alloc") < body.index("scf.parallel")
    assert body.count("scf.parallel") == 1
    parallel = body[body.index("scf.parallel") :]
    assert "scf.for" in parallel and "scf.while" in parallel
    assert parallel.count("memref.atomic_rmw assign") == 2  # after each block, at the end
    assert parallel.count("memref.atomic_rmw addi") == 2  # the two waits
    assert "func.call @sched_yield" in parallel
    assert "memref.dealloc" in body
    assert "polyflow.in_order" in parallel  # for hand_out_columns_in_order


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        (" {polyflow.wavefront_columns}", "", "not a wavefront's columns"),
        ("max(0, %w * 4 - 20)", "max(0, %w * 4 - 18)", "a step's columns off the grid"),
    ],
)
def test_other_parallel_loops_stay(old: str, new: str, why: str) -> None:
    count, text = _pipelined(WAVEFRONT.replace(old, new))
    assert count == 0, why
    assert "atomic_rmw" not in text


# 3-D heat equation (PolyBench's heat-3d, two arrays), big enough for a wavefront of whole-row
# tiles, with partial tiles at the edges
HEAT = """#include <stdio.h>
#define N 29
static double A[N][N][N], B[N][N][N];
static void heat(int steps) {
  for (int t = 1; t <= steps; t++) {
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        for (int k = 1; k < N - 1; k++)
          B[i][j][k] = 0.125 * (A[i + 1][j][k] - 2.0 * A[i][j][k] + A[i - 1][j][k])
                     + 0.125 * (A[i][j + 1][k] - 2.0 * A[i][j][k] + A[i][j - 1][k])
                     + 0.125 * (A[i][j][k + 1] - 2.0 * A[i][j][k] + A[i][j][k - 1]) + A[i][j][k];
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        for (int k = 1; k < N - 1; k++)
          A[i][j][k] = 0.125 * (B[i + 1][j][k] - 2.0 * B[i][j][k] + B[i - 1][j][k])
                     + 0.125 * (B[i][j + 1][k] - 2.0 * B[i][j][k] + B[i][j - 1][k])
                     + 0.125 * (B[i][j][k + 1] - 2.0 * B[i][j][k] + B[i][j][k - 1]) + B[i][j][k];
  }
}
int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = 0; k < N; k++) A[i][j][k] = B[i][j][k] = (double)(i + 2 * j + (N - k)) * 10 / N;
  heat(17);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = (i + j) % 3; k < N; k += 3) printf("%.17g\\n", A[i][j][k]);
  return 0;
}
"""

# Gauss-Seidel in place (PolyBench's seidel-2d): time-tiled, skewed, a wavefront of tiles
# (720 KB: at 180 KB it keeps its order, in cache anyway)
SEIDEL = """#include <stdio.h>
#define N 300
static double A[N][N];
static void seidel(int steps) {
  for (int t = 0; t < steps; t++)
    for (int i = 1; i <= N - 2; i++)
      for (int j = 1; j <= N - 2; j++)
        A[i][j] = (A[i - 1][j - 1] + A[i - 1][j] + A[i - 1][j + 1] + A[i][j - 1] + A[i][j] +
                   A[i][j + 1] + A[i + 1][j - 1] + A[i + 1][j] + A[i + 1][j + 1]) / 9.0;
}
int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) A[i][j] = ((double)i * (j + 2) + 2) / N;
  seidel(37);
  for (int i = 0; i < N; i++)
    for (int j = (2 * i) % 5; j < N; j += 5) printf("%.17g\\n", A[i][j]);
  return 0;
}
"""


@pytest.mark.parametrize("name", ["heat", "seidel"])
def test_pipelined_wavefronts_print_gccs_digits_on_any_number_of_threads(
    tmp_path: Path, name: str
) -> None:
    src = tmp_path / f"{name}.c"
    src.write_text({"heat": HEAT, "seidel": SEIDEL}[name])
    lowered = tmp_path / f"{name}.mlir"
    options = Options(opt_level=3)  # threads: as many as OMP_NUM_THREADS says
    built = polyflow.build_program(src, lowered, options=options, emit="llvm-dialect", cache=None)
    said = [r.message for r in built.report.select(kind="pipelined")]
    assert len(said) == 1 and "wavefront runs as a pipeline" in said[0]
    text = lowered.read_text()
    assert "llvm.atomicrmw" in text
    # columns handed out in order: libomp steals under a nonmonotonic schedule
    assert "omp.wsloop schedule(dynamic, monotonic)" in text
    exe = tmp_path / name
    polyflow.build_program(src, exe, options=options, cache=None)
    want = subprocess.run(
        [build_with_gcc(src, tmp_path / f"{name}.gcc")], capture_output=True, text=True, check=True
    ).stdout
    for threads in (1, 2, 3, 4):
        for _ in range(3 if threads == 2 else 1):  # a race shows up some runs, not all
            got = subprocess.run(
                [exe],
                capture_output=True,
                text=True,
                check=True,
                timeout=120,
                env={**os.environ, "OMP_NUM_THREADS": str(threads)},
            ).stdout
            assert got == want, f"{name} on {threads} threads"


def test_one_thread_builds_and_diamonds_keep_their_steps(tmp_path: Path) -> None:
    src = tmp_path / "heat.c"
    src.write_text(HEAT)
    one = tmp_path / "one.mlir"
    polyflow.build_program(src, one, options=Options(opt_level=3, threads=1), emit="llvm-dialect")
    assert "atomicrmw" not in one.read_text()
    # jacobi-2d's diamond tiles depend on both neighbours of the step before: no pipeline
    jacobi = tmp_path / "jacobi.c"
    jacobi.write_text(
        """#include <stdio.h>
#define N 400
static double A[N][N], B[N][N];
static void jacobi(int steps) {
  for (int t = 0; t < steps; t++) {
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        B[i][j] = 0.2 * (A[i][j] + A[i][j - 1] + A[i][j + 1] + A[i + 1][j] + A[i - 1][j]);
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        A[i][j] = 0.2 * (B[i][j] + B[i][j - 1] + B[i][j + 1] + B[i + 1][j] + B[i - 1][j]);
  }
}
int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) A[i][j] = B[i][j] = ((double)i * (j + 2) + 2) / N;
  jacobi(20);
  printf("%.17g\\n", A[N / 2][N / 3]);
  return 0;
}
"""
    )
    diamond = tmp_path / "jacobi.mlir"
    built = polyflow.build_program(
        jacobi, diamond, options=Options(opt_level=3), emit="llvm-dialect"
    )
    assert any("diamond" in r.message for r in built.report.select(kind="tiled"))
    assert "atomicrmw" not in diamond.read_text()
