"""Diamond tiles (polyflow/schedule/diamond.py): a time-tiled stencil whose first space loop has
a mirror (jacobi-2d's two half steps, fdtd-2d's three statements) runs diamonds that start
together along it. Programs print gcc -O2's digits on 1 and 2 threads, with partial tiles, with a
grid smaller than one tile and with sizes known only at run time; the mirror's constants keep
every dependence forward; seidel-2d's in-place update has no mirror and keeps its wavefront."""

from __future__ import annotations

from pathlib import Path

import islpy as isl
import pytest
from difftest import check_program_against_gcc, tiled_bands
from test_schedule_point_distribution import JACOBI_2D  # 203 x 203: tiled by default

import polyflow
from polyflow.options import Options
from polyflow.schedule.diamond import mirrored_space_member

# fdtd-2d with run-time sizes (variable-length arrays) that are not multiples of a tile
FDTD_2D = """// polyflow: compiled=fdtd
#include <stdio.h>
#include <stdlib.h>
static void fdtd(int tmax, int nx, int ny, double ex[nx][ny], double ey[nx][ny],
                 double hz[nx][ny], double fict[tmax]) {
  for (int t = 0; t < tmax; t++) {
    for (int j = 0; j < ny; j++)
      ey[0][j] = fict[t];
    for (int i = 1; i < nx; i++)
      for (int j = 0; j < ny; j++)
        ey[i][j] = ey[i][j] - 0.5 * (hz[i][j] - hz[i - 1][j]);
    for (int i = 0; i < nx; i++)
      for (int j = 1; j < ny; j++)
        ex[i][j] = ex[i][j] - 0.5 * (hz[i][j] - hz[i][j - 1]);
    for (int i = 0; i < nx - 1; i++)
      for (int j = 0; j < ny - 1; j++)
        hz[i][j] = hz[i][j] - 0.7 * (ex[i][j + 1] - ex[i][j] + ey[i + 1][j] - ey[i][j]);
  }
}
int main(void) {
  int tmax = 41, nx = 131, ny = 149;
  double (*ex)[ny] = malloc(sizeof(double) * nx * ny);
  double (*ey)[ny] = malloc(sizeof(double) * nx * ny);
  double (*hz)[ny] = malloc(sizeof(double) * nx * ny);
  double *fict = malloc(sizeof(double) * tmax);
  for (int t = 0; t < tmax; t++) fict[t] = (double)t;
  for (int i = 0; i < nx; i++)
    for (int j = 0; j < ny; j++) {
      ex[i][j] = (double)(i * (j + 1)) / nx;
      ey[i][j] = (double)(i * (j + 2)) / ny;
      hz[i][j] = (double)(i * (j + 3)) / nx;
    }
  fdtd(tmax, nx, ny, ex, ey, hz, fict);
  for (int i = 0; i < nx; i++)
    for (int j = i % 4; j < ny; j += 4) printf("%.17g %.17g %.17g\\n", ex[i][j], ey[i][j], hz[i][j]);
  free(ex);
  free(ey);
  free(hz);
  free(fict);
  return 0;
}
"""

# Gauss-Seidel in place: each point reads its neighbours of the same sweep, so the mirror of
# 2t + i would run backwards along i; the band keeps its parallelogram tiles and wavefront.
SEIDEL_2D = """// polyflow: compiled=seidel
#include <stdio.h>
#define N 230
static double A[N][N];
static void seidel(int steps) {
  for (int t = 0; t < steps; t++)
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        A[i][j] = (A[i - 1][j - 1] + A[i - 1][j] + A[i - 1][j + 1] + A[i][j - 1] + A[i][j]
                   + A[i][j + 1] + A[i + 1][j - 1] + A[i + 1][j] + A[i + 1][j + 1]) / 9.0;
}
int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) A[i][j] = (double)((i * 3 + j * 7) % 17);
  seidel(9);
  for (int i = 0; i < N; i++)
    for (int j = i % 5; j < N; j += 5) printf("%.17g\\n", A[i][j]);
  return 0;
}
"""

PROGRAMS = {
    "jacobi": JACOBI_2D.replace("STEPS", "45").replace("SIZE", "N"),
    "jacobi_small": JACOBI_2D.replace("STEPS", "3").replace("SIZE", "9"),
    "fdtd": FDTD_2D,
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_diamond_tiles_print_gccs_digits(tmp_path: Path, name: str, threads: int) -> None:
    src = tmp_path / f"{name}.c"
    src.write_text(PROGRAMS[name])
    check_program_against_gcc(src, tmp_path / "run", Options(opt_level=3, threads=threads))


def _bands(
    tmp_path: Path, source: str, options: Options
) -> tuple[list[dict[str, object]], list[str]]:
    src = tmp_path / "stencil.c"
    src.write_text(source)
    built = polyflow.build_program(
        src, tmp_path / "stencil.mlir", options=options, emit="affine-opt"
    )
    return tiled_bands(built), [r.message for r in built.report.select(kind="tiled")]


@pytest.mark.parametrize(("name", "side"), [("jacobi", 64), ("fdtd", 32)])
def test_the_report_gives_the_diamonds_width(tmp_path: Path, name: str, side: int) -> None:
    # jacobi-2d's skew is 2 (two half steps per time step): diamonds 2 x 32 wide span 32 steps
    bands, messages = _bands(tmp_path, PROGRAMS[name], Options(opt_level=3))
    (band,) = [data for data in bands if data.get("skewed")]
    assert band["diamond"] == side and band["wavefront"]
    assert any(f"diamond tiles {side} wide, concurrent start" in m for m in messages), messages


@pytest.mark.parametrize(
    ("source", "options"),
    [
        (SEIDEL_2D, Options(opt_level=3)),  # no mirror
        (PROGRAMS["jacobi"], Options(opt_level=3, diamond=False)),
        (PROGRAMS["jacobi"], Options(opt_level=3, tile_second_level=True)),
        (PROGRAMS["jacobi"], Options(opt_level=3, parallel=False)),  # no wavefront at all
    ],
)
def test_other_bands_keep_parallelogram_tiles(
    tmp_path: Path, source: str, options: Options
) -> None:
    bands, messages = _bands(tmp_path, source, options)
    skewed = [data for data in bands if data.get("skewed")]
    assert skewed and not any(data["diamond"] for data in skewed), messages
    assert not any("diamond" in m for m in messages)


def test_seidel_2d_prints_gccs_digits_with_its_wavefront(tmp_path: Path) -> None:
    src = tmp_path / "seidel.c"
    src.write_text(SEIDEL_2D)
    check_program_against_gcc(src, tmp_path / "run", Options(opt_level=3, threads=2))


def _band(domain: str, band: str) -> isl.ScheduleNode:
    """A permutable band `band` (isl's text) over the instances `domain`."""
    ctx = isl.Context()
    instances = isl.UnionSet.read_from_str(ctx, domain)
    members = isl.MultiUnionPwAff.read_from_str(ctx, band)
    root = isl.Schedule.from_domain(instances).get_root().child(0)
    return root.insert_partial_schedule(members).band_set_permutable(1)


JACOBI_DOMAIN = (
    "[T, N] -> { S0[t, i, j] : 0 <= t < T and 0 < i < N - 1 and 0 < j < N - 1; "
    "S1[t, i, j] : 0 <= t < T and 0 < i < N - 1 and 0 < j < N - 1 }"
)
JACOBI_BAND = (
    "[T, N] -> [{ S0[t, i, j] -> [(t)]; S1[t, i, j] -> [(t)] }, "
    "{ S0[t, i, j] -> [(2t + i)]; S1[t, i, j] -> [(1 + 2t + i)] }, "
    "{ S0[t, i, j] -> [(2t + j)]; S1[t, i, j] -> [(1 + 2t + j)] }]"
)

# S0 reads A's neighbours and writes B, S1 the other way round: each depends on the other's
# neighbouring instances, S0 -> S1 in the same step and S1 -> S0 in the next
NEIGHBOURS = (
    "-1 <= i' - i <= 1 and -1 <= j' - j <= 1 and -1 <= i' - i + j' - j <= 1 and "
    "-1 <= i' - i - j' + j <= 1"
)
INSIDE = "0 < i < N - 1 and 0 < j < N - 1 and 0 < i' < N - 1 and 0 < j' < N - 1"
JACOBI_DEPENDENCES = (
    f"[T, N] -> {{ S0[t, i, j] -> S1[t, i', j'] : {NEIGHBOURS} and {INSIDE} and 0 <= t < T; "
    f"S1[t, i, j] -> S0[t + 1, i', j'] : {NEIGHBOURS} and {INSIDE} and 0 <= t < T - 1 }}"
)


def test_the_mirror_keeps_every_dependence_forward() -> None:
    band = _band(JACOBI_DOMAIN, JACOBI_BAND)
    validity = isl.UnionMap.read_from_str(band.get_ctx(), JACOBI_DEPENDENCES)
    mirror = mirrored_space_member(band, validity)
    assert mirror is not None and mirror.skew == 2
    expected = isl.UnionPwAff.read_from_str(
        band.get_ctx(), "[T, N] -> { S0[t, i, j] -> [(2t - i)]; S1[t, i, j] -> [(1 + 2t - i)] }"
    )
    domain = band.get_domain()

    def as_map(values: isl.UnionPwAff) -> isl.UnionMap:
        return isl.UnionMap.from_union_pw_aff(values).intersect_domain(domain)

    assert as_map(mirror.member).is_equal(as_map(expected))


def test_a_dependence_within_a_step_along_i_has_no_mirror() -> None:
    # one statement reading its left neighbour of the same step: 2t - i would run backwards
    band = _band(
        "[T, N] -> { S[t, i, j] : 0 <= t < T and 0 < i < N and 0 < j < N }",
        "[T, N] -> [{ S[t, i, j] -> [(t)] }, { S[t, i, j] -> [(t + i)] }, "
        "{ S[t, i, j] -> [(t + j)] }]",
    )
    validity = isl.UnionMap.read_from_str(
        band.get_ctx(),
        "[T, N] -> { S[t, i, j] -> S[t, i + 1, j] : 0 <= t < T and 0 < i < N - 1 and 0 < j < N;"
        " S[t, i, j] -> S[t + 1, i, j] : 0 <= t < T - 1 and 0 < i < N and 0 < j < N }",
    )
    assert mirrored_space_member(band, validity) is None
