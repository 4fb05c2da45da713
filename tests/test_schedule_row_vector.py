"""Row-vector contractions (`sum[p] += A[s] * B[s][p]`: the stored element indexed by one loop):
the micro-kernels' blocks of one row (polyflow/schedule/micro_kernel.py) and the tiles sized
for them (schedule/tiling.py `_row_vector_roles`). doitgen's shape, under loops the sums do not
move with, gets contraction tiles and register sums; every program prints gcc -O2's digits
(odd sizes: partial tiles of columns and depth, columns fewer than a vector) on 1 and 2
threads, and with fused multiply-adds off, fractional data too: each element's sum keeps its
order."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from mlir import ir

import polyflow
from polyflow.ir.contexts import new_context
from polyflow.options import Options
from polyflow.schedule.micro_kernel import _innermost_loops as innermost_loops
from polyflow.schedule.micro_kernel import match_contraction

# doitgen with sizes from the command line (partial tiles of 64 columns and 128 deep), an
# extra row-vector nest whose sums are local scalars, and a plain matrix-vector product (its
# whole nest is the band: it keeps its own schedule).
PROGRAM = """#include <stdio.h>
#include <stdlib.h>
static void doitgen(int nr, int nq, int np, double A[nr][nq][np], double C4[np][np],
                    double sum[np]) {
  for (int r = 0; r < nr; r++)
    for (int q = 0; q < nq; q++) {
      for (int p = 0; p < np; p++) {
        sum[p] = 0.0;
        for (int s = 0; s < np; s++) sum[p] += A[r][q][s] * C4[s][p];
      }
      for (int p = 0; p < np; p++) A[r][q][p] = sum[p];
    }
}
static void mv(int n, int m, double y[m], double x[n], double B[n][m]) {
  for (int j = 0; j < m; j++) y[j] = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) y[j] += x[i] * B[i][j];
}
int main(int argc, char **argv) {
  int nr = atoi(argv[1]), nq = atoi(argv[2]), np = atoi(argv[3]);
  double (*A)[nq][np] = malloc(sizeof(double) * nr * nq * np);
  double (*C4)[np] = malloc(sizeof(double) * np * np);
  double *sum = malloc(sizeof(double) * np), *y = malloc(sizeof(double) * np);
  for (int r = 0; r < nr; r++)
    for (int q = 0; q < nq; q++)
      for (int p = 0; p < np; p++) A[r][q][p] = VALUE((r * q + p) % 11 - 5);
  for (int s = 0; s < np; s++)
    for (int p = 0; p < np; p++) C4[s][p] = VALUE((s * p + 3) % 7 - 3);
  doitgen(nr, nq, np, A, C4, sum);
  mv(np, np, y, sum, C4);
  double total = 0;
  for (int r = 0; r < nr; r++)
    for (int q = 0; q < nq; q++)
      for (int p = 0; p < np; p++) {
        total += A[r][q][p];
        if ((r * nq + q) * np + p < 400 || p == np - 1) printf("%.17g\\n", A[r][q][p]);
      }
  for (int p = 0; p < np; p++) printf("s %.17g y %.17g\\n", sum[p], y[p]);
  printf("total %.17g\\n", total);
  free(A); free(C4); free(sum); free(y);
  return 0;
}
"""

SIZES = [(3, 5, 150), (2, 3, 37), (2, 2, 5), (1, 1, 1), (0, 4, 9)]


def _build(tmp_path: Path, value: str, options: Options) -> tuple[Path, Path, polyflow.BuildReport]:
    src = tmp_path / "row_vector.c"
    src.write_text(f"#define VALUE(x) ({value})\n" + PROGRAM)
    ref = tmp_path / "ref"
    subprocess.run(["gcc", "-O2", str(src), "-o", str(ref), "-lm"], check=True)
    exe = tmp_path / "row_vector"
    built = polyflow.build_program(src, exe, options=options, cache=None)
    return ref, exe, built


def _run(exe: Path, sizes: tuple[int, int, int], threads: str) -> str:
    env = {"OMP_NUM_THREADS": threads, "PATH": "/usr/bin:/bin"}
    args = [str(n) for n in sizes]
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, check=True, env=env
    ).stdout


def _row_vector_remarks(built: polyflow.BuildReport) -> list[str]:
    return [
        r.function
        for r in built.report.remarks
        if r.kind == "micro-kernel" and "a row vector" in r.message
    ]


def test_doitgen_gets_row_vector_blocks_and_prints_gccs_digits(tmp_path: Path) -> None:
    # small integers: products and sums exact, so fused multiply-adds change no digit
    ref, exe, built = _build(tmp_path, "x", Options(opt_level=3, march="native"))
    assert "doitgen" in _row_vector_remarks(built)
    tiled = [r for r in built.report.remarks if r.kind == "tiled" and r.function == "doitgen"]
    assert tiled and all(r.data.get("contraction") for r in tiled), tiled
    for sizes in SIZES:
        expected = _run(ref, sizes, "1")
        assert _run(exe, sizes, "1") == expected, sizes
        assert _run(exe, sizes, "2") == expected, sizes


def test_row_vector_sums_keep_each_elements_order(tmp_path: Path) -> None:
    # fractional data, no fused multiply-adds: the same digits only if every sum runs over s
    # in the source order
    options = Options(opt_level=3, march="native", fp_contract="off")
    ref, exe, built = _build(tmp_path, "(x) * 0.37 + 0.011", options)
    assert "doitgen" in _row_vector_remarks(built)
    for sizes in SIZES[:3]:
        assert _run(exe, sizes, "2") == _run(ref, sizes, "1"), sizes


def test_a_matrix_vector_product_gets_no_row_vector_tiles(tmp_path: Path) -> None:
    # the whole nest is the band: the sums are not read again under outer loops, so its tiles
    # (if any) are the usual ones, not the contraction's
    _, _, built = _build(tmp_path, "x", Options(opt_level=3, march="native"))
    tiled = [r for r in built.report.remarks if r.kind == "tiled" and r.function == "mv"]
    assert not [r for r in tiled if r.data.get("contraction")], tiled


NEST = """
func.func @f(%x: memref<{n}xf64>, %a: memref<{d}xf64>, %b: memref<{d}x{n}xf64>) {{
  affine.for %s = 0 to {d} {{
    affine.for %p = 0 to {n} {{
      %0 = affine.load %x[%p] : memref<{n}xf64>
      %1 = affine.load %a[%s] : memref<{d}xf64>
      %2 = affine.load %b[%s, %p] : memref<{d}x{n}xf64>
      %3 = arith.mulf %1, %2 : f64
      %4 = arith.addf %0, %3 : f64
      affine.store %4, %x[%p] : memref<{n}xf64>
    }}
  }}
  return
}}
"""


@pytest.mark.parametrize(
    ("depth", "matched"), [(32, True), (256, True), (257, False), (2000, False)]
)
def test_row_vector_nests_are_matched_only_with_a_tiles_depth(depth: int, matched: bool) -> None:
    with new_context():
        module = ir.Module.parse(NEST.format(n=64, d=depth))
        fn = module.body.operations[0].operation
        (p_loop,) = innermost_loops(fn)
        found = match_contraction(p_loop, fn)
        if matched:
            assert not isinstance(found, str), found
            assert found.u is None and found.v == p_loop and found.reductions == [p_loop.parent]
        else:
            assert found == "a row vector's reduction is not a tile's (it would walk down columns)"


# The same contraction written with s outside p, in float, with the sums in a 2-D array's row
# (X[q % 2][p]): still a row vector under r and q.
VARIANT = """#include <stdio.h>
#include <stdlib.h>
static void doitgen(int nr, int nq, int np, float A[nr][nq][np], float C4[np][np],
                    float X[2][np]) {
  for (int r = 0; r < nr; r++)
    for (int q = 0; q < nq; q++) {
      for (int p = 0; p < np; p++) X[1][p] = 0.0f;
      for (int s = 0; s < np; s++)
        for (int p = 0; p < np; p++) X[1][p] += A[r][q][s] * C4[s][p];
      for (int p = 0; p < np; p++) A[r][q][p] = X[1][p];
    }
}
int main(int argc, char **argv) {
  int nr = atoi(argv[1]), nq = atoi(argv[2]), np = atoi(argv[3]);
  float (*A)[nq][np] = malloc(sizeof(float) * nr * nq * np);
  float (*C4)[np] = malloc(sizeof(float) * np * np);
  float (*X)[np] = malloc(sizeof(float) * 2 * np);
  for (int r = 0; r < nr; r++)
    for (int q = 0; q < nq; q++)
      for (int p = 0; p < np; p++) A[r][q][p] = ((r * q + p) % 11 - 5) * 0.25f;
  for (int s = 0; s < np; s++)
    for (int p = 0; p < np; p++) C4[s][p] = ((s * p + 3) % 7 - 3) * 0.5f;
  doitgen(nr, nq, np, A, C4, X);
  for (int r = 0; r < nr; r++)
    for (int q = 0; q < nq; q++)
      for (int p = 0; p < np; p += 3) printf("%.9g\\n", A[r][q][p]);
  for (int p = 0; p < np; p++) printf("x %.9g\\n", X[1][p]);
  free(A); free(C4); free(X);
  return 0;
}
"""


def test_a_row_vector_written_s_outside_p_in_float_prints_gccs_digits(tmp_path: Path) -> None:
    src = tmp_path / "variant.c"
    src.write_text(VARIANT)
    ref = tmp_path / "ref"
    subprocess.run(["gcc", "-O2", str(src), "-o", str(ref)], check=True)
    exe = tmp_path / "variant"
    options = Options(opt_level=3, march="native", fp_contract="off")
    built = polyflow.build_program(src, exe, options=options, cache=None)
    assert "doitgen" in _row_vector_remarks(built)
    for sizes in [(2, 3, 150), (2, 2, 70), (1, 2, 3)]:
        expected = _run(ref, sizes, "1")
        assert _run(exe, sizes, "1") == expected, sizes
        assert _run(exe, sizes, "2") == expected, sizes
