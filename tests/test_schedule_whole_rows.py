"""Skewed bands of four loops (polyflow/schedule/tiling.py, `_leaves_rows_whole`,
`whole_row_tile`; scheduler.py `deep_skew_pays`): heat-3d's time loop is tiled with its two outer
space loops, and each tile point runs a whole row of the innermost one, once per statement.
Programs print gcc -O2's digits on 1 and 2 threads, at sizes that leave partial tiles, at a grid
smaller than one tile and with sizes known only at run time; the schedule is used only with the
default tile sizes, and the report says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from difftest import check_program_against_gcc, tiled_bands

import polyflow
from polyflow.options import Options
from polyflow.schedule.tiling import (
    MAX_WHOLE_ROW_TILE,
    MIN_WHOLE_ROW_TILE,
    WHOLE_ROW_TILE,
    whole_row_tile,
)
from polyflow.target import Caches

# heat-3d's time loop over a grid of run-time size n, shared by the programs below
HEAT_TIME_LOOP = """  for (int t = 1; t <= steps; t++) {
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        for (int k = 1; k < n - 1; k++)
          B[i][j][k] = 0.125 * (A[i + 1][j][k] - 2.0 * A[i][j][k] + A[i - 1][j][k])
                     + 0.125 * (A[i][j + 1][k] - 2.0 * A[i][j][k] + A[i][j - 1][k])
                     + 0.125 * (A[i][j][k + 1] - 2.0 * A[i][j][k] + A[i][j][k - 1]) + A[i][j][k];
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        for (int k = 1; k < n - 1; k++)
          A[i][j][k] = 0.125 * (B[i + 1][j][k] - 2.0 * B[i][j][k] + B[i - 1][j][k])
                     + 0.125 * (B[i][j + 1][k] - 2.0 * B[i][j][k] + B[i][j - 1][k])
                     + 0.125 * (B[i][j][k + 1] - 2.0 * B[i][j][k] + B[i][j][k - 1]) + B[i][j][k];
  }
"""

# 29^3 doubles, two arrays: 390 KiB, over the footprint below which stencils keep their order
HEAT_3D = """// polyflow: compiled=heat
#include <stdio.h>
#define N 29
static double A[N][N][N], B[N][N][N];
static void heat(int steps, int n) {
""" + HEAT_TIME_LOOP + """}
int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = 0; k < N; k++) A[i][j][k] = B[i][j][k] = (double)(i + 2 * j + (N - k)) * 10 / N;
  heat(STEPS, SIZE);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = (i + j) % 3; k < N; k += 3) printf("%.17g\\n", A[i][j][k]);
  return 0;
}
"""

# The same stencil on arrays whose sizes are known only at run time (the tile size then does
# not come from the rows' bytes), with a row length that is not a multiple of a vector.
HEAT_3D_VLA = """// polyflow: compiled=heat
#include <stdio.h>
#include <stdlib.h>
static void heat(int steps, int n, double A[n][n][n], double B[n][n][n]) {
""" + HEAT_TIME_LOOP + """}
int main(void) {
  int n = 27;
  double (*A)[n][n] = malloc(sizeof(double) * n * n * n);
  double (*B)[n][n] = malloc(sizeof(double) * n * n * n);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      for (int k = 0; k < n; k++) A[i][j][k] = B[i][j][k] = (double)((i * 7 + j * 3 + k) % 13);
  heat(19, n, A, B);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      for (int k = (i + j) % 3; k < n; k += 3) printf("%.17g\\n", A[i][j][k]);
  free(A);
  free(B);
  return 0;
}
"""

# One statement updating its array in place (3-D Gauss-Seidel, 280 KiB): the row is a recurrence
# along k, there is nothing to distribute, and the tiles still keep every dependence.
SEIDEL_3D = """// polyflow: compiled=seidel
#include <stdio.h>
#define N 33
static double A[N][N][N];
static void seidel(int steps) {
  for (int t = 0; t < steps; t++)
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        for (int k = 1; k < N - 1; k++)
          A[i][j][k] = (A[i - 1][j][k] + A[i + 1][j][k] + A[i][j - 1][k] + A[i][j + 1][k]
                        + A[i][j][k - 1] + A[i][j][k + 1] + A[i][j][k]) / 7.0;
}
int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = 0; k < N; k++) A[i][j][k] = (double)((i * 5 + j * 3 + k * 2) % 17);
  seidel(11);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = (i + 2 * j) % 3; k < N; k += 3) printf("%.17g\\n", A[i][j][k]);
  return 0;
}
"""

PROGRAMS = {
    "heat": HEAT_3D.replace("STEPS", "13").replace("SIZE", "N"),
    "heat_small": HEAT_3D.replace("STEPS", "5").replace("SIZE", "7"),
    "heat_vla": HEAT_3D_VLA,
    "seidel": SEIDEL_3D,
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_time_tiles_with_whole_rows_print_gccs_digits(
    tmp_path: Path, name: str, threads: int
) -> None:
    src = tmp_path / f"{name}.c"
    src.write_text(PROGRAMS[name])
    check_program_against_gcc(src, tmp_path / "run", Options(opt_level=3, threads=threads))


@pytest.mark.parametrize(
    ("name", "sizes"), [("heat", (MAX_WHOLE_ROW_TILE,) * 3), ("heat_vla", (WHOLE_ROW_TILE,) * 3)]
)
def test_the_report_names_the_tiles_and_the_whole_rows(
    tmp_path: Path, name: str, sizes: tuple[int, ...]
) -> None:
    src = tmp_path / f"{name}.c"
    src.write_text(PROGRAMS[name])
    built = polyflow.build_program(
        src, tmp_path / f"{name}.mlir", options=Options(opt_level=3), emit="affine-opt"
    )
    (band,) = [data for data in tiled_bands(built) if data.get("whole_rows")]
    assert tuple(band["sizes"]) == sizes  # type: ignore[call-overload]
    assert band["skewed"] and band["distributed"]
    messages = [r.message for r in built.report.select(kind="tiled")]
    assert any("time tiled, skewed, innermost loop untiled (whole rows)" in m for m in messages)


@pytest.mark.parametrize("block", [2, 3])
def test_the_wavefront_shares_out_single_tiles_along_its_parallel_loop(
    tmp_path: Path, block: int
) -> None:
    # Single tiles along the parallel loop (heat-3d LARGE ran faster on 2 threads so than in
    # blocks of 2; tiling.py says how it was measured); along the next loop, whose tiles run in
    # order inside each, blocks of `block` tiles as for every wavefront.
    src = tmp_path / "heat.c"
    src.write_text(PROGRAMS["heat"])
    out = tmp_path / "heat.schedule"
    options = Options(opt_level=3, wavefront_block=block)
    polyflow.build_program(src, out, options=options, emit="schedule")
    tree = out.read_text().split("# function heat")[1]
    size = MAX_WHOLE_ROW_TILE
    wave = f"S0[i0, i1, i2, i3] -> [(floor((i0)/{size}) + floor((2i0 + i1)/{size}))]"
    assert wave in tree
    assert f"(2i0 + i2 - (2i0 + i2) mod {size * block})" in tree


@pytest.mark.parametrize(
    ("options", "why"),
    [
        (Options(opt_level=3, tile_sizes=(4, 6, 5, 8)), "only tiled with its rows whole"),
        (Options(opt_level=3, tile=False), "only tiled with its rows whole"),
    ],
)
def test_a_four_deep_skewed_band_keeps_the_source_order_otherwise(
    tmp_path: Path, options: Options, why: str
) -> None:
    src = tmp_path / "heat.c"
    src.write_text(PROGRAMS["heat"])
    built = polyflow.build_program(src, tmp_path / "heat.mlir", options=options, emit="affine-opt")
    notes = built.notes
    assert any("skewed band of 4 loops does not pay off" in n and why in n for n in notes), notes
    assert not [data for data in tiled_bands(built) if data.get("skewed")]


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ((960, 2), 8),  # heat-3d at LARGE: 16 x 16 rows would fill the whole 512 KiB L2
        ((232, 2), MAX_WHOLE_ROW_TILE),
        ((64_000, 3), MIN_WHOLE_ROW_TILE),
        (None, WHOLE_ROW_TILE),
    ],
)
def test_whole_row_tiles_hold_their_rows_in_half_the_l2(
    row: tuple[int, int] | None, expected: int
) -> None:
    caches = Caches(l1_data=32 * 1024, l2=512 * 1024, line=64)
    assert whole_row_tile(row, caches) == expected
