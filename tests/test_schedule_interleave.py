"""`Options.interleave` (polyflow/schedule/tiling.py, `interleave_recurrence`): where a band's
innermost loop is a recurrence (each iteration waits for the one before), rows of the loop
around it run side by side in a new innermost loop, skewed where they depend on each other.
Programs print gcc -O2's digits with it on and off, on 1 and 2 threads, at sizes that are not
multiples of a tile or of the rows interleaved, and smaller than one; reductions (an
accumulator the innermost loop keeps in place) are left alone."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from difftest import check_program_against_gcc, tiled_bands

import polyflow
from polyflow.options import Options

# Gauss-Seidel: every point reads its left neighbour's new value (a chain along j) and the row
# above's new values: rows are skewed against each other to run side by side. 203² doubles are
# just over the footprint below which a skewed band keeps its source order (256 KiB).
SEIDEL_2D = """// polyflow: compiled=seidel
#include <stdio.h>
#define N 203
static double A[N][N];
static void seidel(int steps, int n) {
  for (int t = 0; t < steps; t++)
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        A[i][j] = (A[i - 1][j - 1] + A[i - 1][j] + A[i - 1][j + 1] + A[i][j - 1] + A[i][j]
                   + A[i][j + 1] + A[i + 1][j - 1] + A[i + 1][j] + A[i + 1][j + 1]) / 9.0;
}
int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) A[i][j] = ((double)i * (j + 2) + 2) / N;
  seidel(STEPS, SIZE);
  for (int i = 0; i < N; i++)
    for (int j = i % 3; j < N; j += 3) printf("%.17g\\n", A[i][j]);
  return 0;
}
"""

# adi's column solve: each row i a forward recurrence along j (through a division) and a
# backward one; rows are independent.
ROW_SOLVES = """// polyflow: compiled=solve
#include <stdio.h>
#define N 103
static double p[N][N], q[N][N], u[N][N], v[N][N];
static void solve(int steps, int n) {
  for (int t = 0; t < steps; t++) {
    for (int i = 1; i < n - 1; i++) {
      p[i][0] = 0.0;
      q[i][0] = 1.0;
      for (int j = 1; j < n - 1; j++) {
        p[i][j] = -0.3 / (0.7 * p[i][j - 1] + 1.9);
        q[i][j] = (u[j][i - 1] - 0.2 * u[j][i] + u[j][i + 1] - 0.7 * q[i][j - 1])
                  / (0.7 * p[i][j - 1] + 1.9);
      }
      v[n - 1][i] = 1.0;
      for (int j = n - 2; j >= 1; j--) v[j][i] = p[i][j] * v[j + 1][i] + q[i][j];
    }
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++) u[i][j] = 0.5 * (v[i][j] + v[j][i]);
  }
}
int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) u[i][j] = (double)(i + N - j) / N;
  solve(STEPS, SIZE);
  for (int i = 0; i < N; i++)
    for (int j = i % 3; j < N; j += 3) printf("%.17g %.17g\\n", u[i][j], v[i][j]);
  return 0;
}
"""

# A reduction in the innermost loop: x[i] stays in place along j. Not a chain to interleave
# (it vectorizes where it may be reordered).
ROW_SUMS = """// polyflow: compiled=sums
#include <stdio.h>
#define N 301
static double A[N][N], x[N], y[N];
static void sums(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) x[i] = x[i] + A[i][j] * y[j];
}
int main(void) {
  for (int i = 0; i < N; i++) {
    y[i] = (double)(i % 7) / 3.0;
    for (int j = 0; j < N; j++) A[i][j] = (double)((i * j) % 11) / 5.0;
  }
  sums();
  for (int i = 0; i < N; i++) printf("%.17g\\n", x[i]);
  return 0;
}
"""


# syrk: C[i][j] sums a dot product of rows i and j of A in C's order along k, a chain per
# element; the rows j are independent, so their chains run side by side in a point tile.
SYRK = """// polyflow: compiled=syrk
#include <stdio.h>
#define N 400
#define M 300
static double A[N][M], C[N][N];
static void syrk(int n, int m) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j <= i; j++)
      for (int k = 0; k < m; k++) C[i][j] += 1.5 * A[i][k] * A[j][k];
}
int main(void) {
  for (int i = 0; i < N; i++) {
    for (int k = 0; k < M; k++) A[i][k] = (double)((i * k + 1) % 17) / 7.0;
    for (int j = 0; j < N; j++) C[i][j] = (double)((i + j) % 5);
  }
  syrk(SIZE, M);
  for (int i = 0; i < N; i++)
    for (int j = i % 4; j < N; j += 4) printf("%.17g\\n", C[i][j]);
  return 0;
}
"""



@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    ("name", "program", "tiles"),
    [
        ("seidel_odd_tiles", SEIDEL_2D.replace("STEPS", "7").replace("SIZE", "N"), (5, 7, 9)),
        ("seidel_default", SEIDEL_2D.replace("STEPS", "9").replace("SIZE", "N"), None),
        ("seidel_small", SEIDEL_2D.replace("STEPS", "5").replace("SIZE", "20"), None),
        ("solves_odd", ROW_SOLVES.replace("STEPS", "3").replace("SIZE", "N"), None),
        ("solves_small", ROW_SOLVES.replace("STEPS", "2").replace("SIZE", "11"), None),
        ("solves_tiled", ROW_SOLVES.replace("STEPS", "3").replace("SIZE", "N"), (5, 7)),
        ("syrk", SYRK.replace("SIZE", "N"), None),
        ("syrk_odd_tiles", SYRK.replace("SIZE", "N"), (5, 7, 9)),
        ("syrk_small", SYRK.replace("SIZE", "13"), None),
    ],
)
def test_interleaved_recurrences_print_gccs_digits(
    tmp_path: Path, name: str, program: str, tiles: tuple[int, ...] | None, threads: int
) -> None:
    src = tmp_path / f"{name}.c"
    src.write_text(program)
    for interleave in (True, False):
        options = Options(opt_level=3, threads=threads, tile_sizes=tiles, interleave=interleave)
        check_program_against_gcc(src, tmp_path / f"run-{interleave}", options)


def test_the_report_says_a_tiled_recurrence_was_interleaved(tmp_path: Path) -> None:
    src = tmp_path / "seidel.c"
    src.write_text(SEIDEL_2D.replace("STEPS", "7").replace("SIZE", "N"))
    bands = {}
    for interleave in (True, False):
        built = polyflow.build_program(
            src,
            tmp_path / f"seidel-{interleave}.mlir",
            options=Options(opt_level=3, interleave=interleave),
            emit="affine-opt",
        )
        (bands[interleave],) = tiled_bands(built)
        messages = [r.message for r in built.report.select(kind="tiled")]
        assert any("recurrences interleaved" in m for m in messages) is interleave
    assert bands[True]["interleaved"] is True and bands[False]["interleaved"] is False
    assert bands[True]["skewed"] is True  # time tiled: the report says so
    # the rows whose chains run side by side: two tiles' worth
    assert bands[True]["sizes"] == [32, 64, 32] and bands[False]["sizes"] == [32, 32, 32]


def _schedule_text(src: Path, out: Path, **options: object) -> str:
    polyflow.build_program(src, out, options=Options(opt_level=3, **options), emit="schedule")  # type: ignore[arg-type]
    return out.read_text()


def test_row_solves_are_interleaved(tmp_path: Path) -> None:
    """isl fuses the forward and backward solves into one tiled band; its point band runs the
    tile's rows innermost."""
    src = tmp_path / "solve.c"
    src.write_text(ROW_SOLVES.replace("STEPS", "3").replace("SIZE", "N"))
    on = _schedule_text(src, tmp_path / "on.txt")
    off = _schedule_text(src, tmp_path / "off.txt", interleave=False)
    assert on != off
    built = polyflow.build_program(
        src, tmp_path / "solve.mlir", options=Options(opt_level=3), emit="affine-opt"
    )
    assert any(band["interleaved"] for band in tiled_bands(built))


def test_an_untiled_recurrence_interleaves_a_strip_of_rows() -> None:
    """A band that is not tiled gets its rows strip-mined by `INTERLEAVED_ROWS`, the strip's
    rows innermost; a band with a loop below it, or whose innermost loop carries nothing, is
    left alone."""
    import islpy as isl

    from polyflow.schedule.tiling import INTERLEAVED_ROWS, interleave_recurrence

    ctx = isl.Context()
    domain = isl.UnionSet.read_from_str(ctx, "{ S[i, j] : 0 <= i < 37 and 1 <= j < 50 }")
    recurrence = isl.UnionMap.read_from_str(ctx, "{ S[i, j] -> S[i, j + 1] : 0 <= i < 37 and 1 <= j < 49 }")
    schedule = isl.Schedule.from_domain(domain)
    band = schedule.get_root().child(0).insert_partial_schedule(
        isl.MultiUnionPwAff.read_from_str(ctx, "[{ S[i, j] -> [(i)] }, { S[i, j] -> [(j)] }]")
    ).band_set_permutable(1)
    result = interleave_recurrence(band, recurrence, rows=INTERLEAVED_ROWS)
    outer = result.band_get_partial_schedule_union_map().intersect_domain(domain)
    inner = result.child(0).band_get_partial_schedule_union_map().intersect_domain(domain)
    assert outer.is_equal(isl.UnionMap.read_from_str(
        ctx, f"{{ S[i, j] -> [i - (i mod {INTERLEAVED_ROWS}), j] }}"
    ).intersect_domain(domain))
    assert inner.is_equal(isl.UnionMap.read_from_str(ctx, "{ S[i, j] -> [i] }").intersect_domain(domain))
    # rows that depend on each other (a chain along i as well) are skewed: j + i
    both = recurrence.union(isl.UnionMap.read_from_str(ctx, "{ S[i, j] -> S[i + 1, j] : 0 <= i < 36 and 1 <= j < 50 }"))
    skewed = interleave_recurrence(band, both, rows=INTERLEAVED_ROWS)
    assert skewed.band_get_partial_schedule_union_map().intersect_domain(domain).is_equal(isl.UnionMap.read_from_str(
        ctx, f"{{ S[i, j] -> [i - (i mod {INTERLEAVED_ROWS}), j + i] }}"
    ).intersect_domain(domain))


def test_sums_in_c_order_get_rows_jammed_instead_of_interleaved(tmp_path: Path) -> None:
    """A float sum along the innermost loop is not interleaved (rows innermost would stride
    through A): 8 of its rows are unrolled and jammed into the vector loop, whose in-order sums
    then run side by side; with -ffast-math too (LLVM reorders each sum, and the rows share
    their loads of y); with --no-interleave nothing changes."""
    src = tmp_path / "sums.c"
    src.write_text(ROW_SUMS)
    on = _schedule_text(src, tmp_path / "on.txt")
    off = _schedule_text(src, tmp_path / "off.txt", interleave=False)
    fast = _schedule_text(src, tmp_path / "fast.txt", fast_math=True)
    assert "unroll[0]" in on and "unroll" not in off and "unroll[0]" in fast
    assert "i0 - (i0) mod 8" in on and "i0 - (i0) mod 8" in fast  # strips of JAMMED_ROWS rows
    for threads in (1, 2):
        check_program_against_gcc(src, tmp_path / f"run{threads}", Options(opt_level=3, threads=threads))
    # -ffast-math: the same sums, reordered, to a reassociating build's tolerance
    ref, exe = tmp_path / "ref", tmp_path / "fast"
    subprocess.run(["gcc", "-O2", str(src), "-o", str(ref)], check=True)
    polyflow.build_program(src, exe, options=Options(opt_level=3, fast_math=True), cache=None)
    want = subprocess.run([ref], capture_output=True, text=True, check=True).stdout.split()
    got = subprocess.run([exe], capture_output=True, text=True, check=True).stdout.split()
    assert len(got) == len(want) == 301
    for g, w in zip(got, want, strict=True):
        assert float(g) == pytest.approx(float(w), rel=1e-12)


# bicg: a sum in C's order along j (q[i]) next to an update along i (s[j]), at run-time sizes:
# the rows past the last multiple of 8 run after the jammed strips, unjammed.
BICG = """// polyflow: compiled=bicg
#include <stdio.h>
#define N 203
#define M 157
static double A[N][M], s[M], q[N], p[M], r[N];
static void bicg(int n, int m) {
  for (int j = 0; j < m; j++) s[j] = 0.0;
  for (int i = 0; i < n; i++) {
    q[i] = 0.0;
    for (int j = 0; j < m; j++) {
      s[j] = s[j] + r[i] * A[i][j];
      q[i] = q[i] + A[i][j] * p[j];
    }
  }
}
int main(void) {
  for (int i = 0; i < N; i++) {
    r[i] = (double)(i % 9) / 4.0;
    for (int j = 0; j < M; j++) A[i][j] = (double)((i * (j + 1)) % 13) / 3.0;
  }
  for (int j = 0; j < M; j++) p[j] = (double)(j % 5) / 7.0;
  bicg(ROWS, COLUMNS);
  for (int i = 0; i < N; i++) printf("%.17g\\n", q[i]);
  for (int j = 0; j < M; j++) printf("%.17g\\n", s[j]);
  return 0;
}
"""

# gesummv: two sums in C's order per row; LLVM keeps eight of them jammed scalar, slower
# than one row's two vectorized in order, so the rows are left as they are.
TWO_SUMS = """// polyflow: compiled=two
#include <stdio.h>
#define N 301
static double A[N][N], B[N][N], x[N], y[N], t[N];
static void two(int n) {
  for (int i = 0; i < n; i++) {
    t[i] = 0.0;
    y[i] = 0.0;
    for (int j = 0; j < n; j++) {
      t[i] = A[i][j] * x[j] + t[i];
      y[i] = B[i][j] * x[j] + y[i];
    }
    y[i] = 1.5 * t[i] + 0.5 * y[i];
  }
}
int main(void) {
  for (int i = 0; i < N; i++) {
    x[i] = (double)(i % 7) / 3.0;
    for (int j = 0; j < N; j++) {
      A[i][j] = (double)((i * j) % 11) / 5.0;
      B[i][j] = (double)((i + j) % 13) / 7.0;
    }
  }
  two(N);
  for (int i = 0; i < N; i++) printf("%.17g\\n", y[i]);
  return 0;
}
"""


# trisolv: row i's sum reads x[j] of every row before it, finished by the division; jammed,
# row i + 1 waits for row i's division only at its last term.
TRISOLV = """// polyflow: compiled=trisolv
#include <stdio.h>
#define N 237
static double L[N][N], x[N], b[N];
static void trisolv(int n) {
  for (int i = 0; i < n; i++) {
    x[i] = b[i];
    for (int j = 0; j < i; j++)
      x[i] -= L[i][j] * x[j];
    x[i] = x[i] / L[i][i];
  }
}
int main(void) {
  for (int i = 0; i < N; i++) {
    b[i] = (double)(i % 11) - 4.0;
    for (int j = 0; j <= i; j++) L[i][j] = (double)(i + N - j + 1) * 2 / N;
  }
  trisolv(SIZE);
  for (int i = 0; i < N; i++) printf("%.17g\\n", x[i]);
  return 0;
}
"""


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("size", ["N", "9", "3"])
def test_a_triangular_solve_is_jammed_and_prints_gccs_digits(
    tmp_path: Path, size: str, threads: int
) -> None:
    src = tmp_path / "trisolv.c"
    src.write_text(TRISOLV.replace("SIZE", size))
    assert "unroll[0]" in _schedule_text(src, tmp_path / "on.txt")
    check_program_against_gcc(src, tmp_path / "run", Options(opt_level=3, threads=threads))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    ("rows", "columns"), [("N", "M"), ("200", "M"), ("5", "M"), ("8", "1"), ("17", "0")]
)
def test_jammed_rows_print_gccs_digits(tmp_path: Path, rows: str, columns: str, threads: int) -> None:
    src = tmp_path / "bicg.c"
    src.write_text(BICG.replace("ROWS", rows).replace("COLUMNS", columns))
    assert "unroll[0]" in _schedule_text(src, tmp_path / "on.txt")
    check_program_against_gcc(src, tmp_path / "run", Options(opt_level=3, threads=threads))


def test_rows_with_two_sums_are_not_jammed(tmp_path: Path) -> None:
    src = tmp_path / "two.c"
    src.write_text(TWO_SUMS)
    assert "unroll" not in _schedule_text(src, tmp_path / "on.txt")
    check_program_against_gcc(src, tmp_path / "run", Options(opt_level=3))


def test_sums_in_c_order_are_interleaved_only_without_reassociation(tmp_path: Path) -> None:
    """A float sum kept in C's order is a chain no vectorizer takes: its rows are interleaved.
    With -ffast-math LLVM vectorizes it instead, and the band is left as it was."""
    src = tmp_path / "syrk.c"
    src.write_text(SYRK.replace("SIZE", "N"))
    interleaved = {}
    for fast in (False, True):
        built = polyflow.build_program(
            src,
            tmp_path / f"syrk-{fast}.mlir",
            options=Options(opt_level=3, fast_math=fast),
            emit="affine-opt",
        )
        interleaved[fast] = any(band["interleaved"] for band in tiled_bands(built))
    assert interleaved == {False: True, True: False}

