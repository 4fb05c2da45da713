"""Software prefetches for walks that cross a page every iteration
(polyflow/lowering/page_prefetch.py): placed for a whole-extent walk down the columns of a large
array, ahead by `PREFETCH_ITERATIONS_AHEAD` iterations and clamped to the array, and nowhere
else; and a program whose column sweeps get them computes what gcc computes."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from mlir import ir

import polyflow
from polyflow.lowering.page_prefetch import (
    PREFETCH_ITERATIONS_AHEAD,
    prefetch_page_strided_accesses,
)

# adi's column sweep in a strip of rows: u read at two columns of row j (one cache line's span),
# v written at row j, both moving 8,000 bytes a step, and each step divides by the one before (a
# recurrence: LLVM keeps the loop scalar). w walks its row: no prefetch.
COLUMNS = """
func.func @columns(%u: memref<1000x1000xf64>, %v: memref<1000x1000xf64>,
                   %w: memref<1000x1000xf64>, %n: index, %first: f64) {
  affine.for %i = 1 to 999 step 8 {
    %last = affine.for %j = 1 to %n iter_args(%previous = %first) -> (f64) {
      %a = affine.load %u[%j, %i - 1] : memref<1000x1000xf64>
      %b = affine.load %u[%j, %i + 1] : memref<1000x1000xf64>
      %c = affine.load %w[%i, %j] : memref<1000x1000xf64>
      %s = arith.addf %a, %b : f64
      %d = arith.divf %s, %previous : f64
      %t = arith.addf %d, %c : f64
      affine.store %t, %v[%j, %i] : memref<1000x1000xf64>
      affine.yield %t : f64
    }
  }
  return
}
"""


def _prefetched(source: str) -> tuple[int, str]:
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(source)
        count = prefetch_page_strided_accesses(module)
        assert module.operation.verify()
        return count, str(module)


def test_a_column_walk_prefetches_its_rows_ahead() -> None:
    count, text = _prefetched(COLUMNS)
    prefetches = re.findall(r"memref\.prefetch %(\w+)\[.*\], (read|write)", text)
    # u's span (columns i - 1 .. i + 1) fits one line's worth of offsets: one prefetch from its
    # first offset, one from its last; v one; w (unit stride along j) none
    assert sorted(prefetches) == [("arg0", "read"), ("arg0", "read"), ("arg1", "write")]
    assert count == 3
    assert f"+ {PREFETCH_ITERATIONS_AHEAD}" in text or f"{PREFETCH_ITERATIONS_AHEAD})" in text
    # clamped into the array: no prefetched address past its last row
    assert text.count("arith.minsi") == text.count("arith.maxsi") >= 3


def test_accesses_far_apart_in_a_row_get_their_own_lines_only() -> None:
    far = COLUMNS.replace("%u[%j, %i + 1]", "%u[%j, %i + 900]")
    count, text = _prefetched(far)
    assert count == 3  # u's two accesses (not the 113 lines between them) and v's
    assert len(re.findall(r"memref\.prefetch %arg0", text)) == 2


@pytest.mark.parametrize(
    "source",
    [
        # a triangle's column: the bounds follow the loop around it
        COLUMNS.replace(
            "affine.for %j = 1 to %n", "affine.for %j = 1 to affine_map<(d0) -> (d0)>(%i)"
        ),
        # a tile's rows: known to be few
        COLUMNS.replace(
            "affine.for %j = 1 to %n",
            "affine.for %j = affine_map<()[s0] -> (s0)>()[%n] to "
            "affine_map<()[s0] -> (s0 + 16)>()[%n]",
        ),
        # a sum of the column (a reduction LLVM vectorizes, which a prefetch would prevent)
        COLUMNS.replace("%d = arith.divf %s, %previous", "%d = arith.addf %s, %previous"),
        # a short array: the walk moves less than a page a step
        COLUMNS.replace("1000x1000", "1000x100").replace("step 8", "step 1").replace("999", "99"),
    ],
    ids=["triangle", "tile", "reduction", "short-rows"],
)
def test_no_prefetch_where_the_data_is_near_or_in_the_cache(source: str) -> None:
    count, text = _prefetched(source)
    assert count == 0 and "memref.prefetch" not in text


SWEEP = r"""
#include <stdio.h>
#define N 700
static double u[N][N], v[N][N], p[N][N], q[N][N];
static void sweep(int n) {
  for (int i = 1; i < n - 1; i++) {
    p[i][0] = 0.0;
    q[i][0] = 1.0;
    for (int j = 1; j < n - 1; j++) {
      p[i][j] = -0.25 / (0.5 * p[i][j - 1] + 2.0);
      q[i][j] = (u[j][i - 1] + 0.5 * u[j][i] - u[j][i + 1] - q[i][j - 1]) / (0.5 * p[i][j - 1] + 2.0);
    }
    v[n - 1][i] = 1.0;
    for (int j = n - 2; j >= 1; j--)
      v[j][i] = p[i][j] * v[j + 1][i] + q[i][j];
  }
}
int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      u[i][j] = (double)((i * 7 + j * 3) % 17) / 17.0;
  sweep(N);
  for (int i = 0; i < N; i += 37)
    for (int j = 0; j < N; j += 41)
      printf("%.17g\n", v[i][j]);
  return 0;
}
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_a_column_sweep_with_prefetches_matches_gcc(tmp_path: Path, threads: int) -> None:
    source = tmp_path / "sweep.c"
    source.write_text(SWEEP)
    llvm = tmp_path / "sweep.ll"
    options = polyflow.Options(opt_level=3)
    polyflow.build_program(source, llvm, options=options, emit="llvm", cache=None)
    assert "llvm.prefetch" in llvm.read_text()  # the sweep's column walks got them
    built = polyflow.build_program(source, tmp_path / "pf", options=options, cache=None)
    assert built.compiled == ["sweep"], built.fallbacks
    subprocess.run(["gcc", "-O2", str(source), "-o", str(tmp_path / "ref")], check=True)
    env = {"OMP_NUM_THREADS": str(threads)}
    ours = subprocess.run([tmp_path / "pf"], capture_output=True, text=True, env=env, check=True)
    ref = subprocess.run([tmp_path / "ref"], capture_output=True, text=True, check=True)
    for got, want in zip(ours.stdout.split(), ref.stdout.split(), strict=True):
        assert float(got) == pytest.approx(float(want), rel=1e-12)
