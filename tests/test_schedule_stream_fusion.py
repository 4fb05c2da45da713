"""Fusing independent nests that read one large array in the same order
(polyflow/schedule/stream_fusion.py): bicg's two updates share one pass over A."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import islpy as isl
import pytest
from test_schedule_scheduler import compute_deps, make_scop

import polyflow
from polyflow.options import Options
from polyflow.poly import isl_helpers as ih
from polyflow.schedule.model import Scop
from polyflow.schedule.scheduler import check_schedule_legal, schedule_scop
from polyflow.schedule.stream_fusion import fuse_shared_streams
from polyflow.schedule.tiling import describe_schedule
from polyflow.toolchain import openmp_library_dir

BIG = {"A": (2100, 1900), "B": (2100, 1900), "s": (1900,), "q": (2100,), "p": (1900,), "r": (2100,)}


def with_arrays(scop: Scop, arrays: dict[str, tuple[int, ...]]) -> Scop:
    return dataclasses.replace(scop, arrays=arrays)


def bicg(matrix_2: str = "A[i, j]") -> Scop:
    # for i: for j: { s[j] += r[i] * A[i][j];  q[i] += A[i][j] * p[j] }  (zeroing left out)
    return make_scop(
        "N, M",
        "N >= 1 and M >= 1",
        [
            ("S0", "[i, j] : 0 <= i < N and 0 <= j < M", "[i, j] -> [0, i, 0, j, 0]",
             ["[i, j] -> s[j]", "[i, j] -> r[i]", "[i, j] -> A[i, j]"], ["[i, j] -> s[j]"]),
            ("S1", "[i, j] : 0 <= i < N and 0 <= j < M", "[i, j] -> [0, i, 0, j, 1]",
             ["[i, j] -> q[i]", f"[i, j] -> {matrix_2}", "[i, j] -> p[j]"], ["[i, j] -> q[i]"]),
        ],
    )  # fmt: skip


def mvt() -> Scop:
    # for i: for j: x1[i] += A[i][j] * y1[j];  for i: for j: x2[i] += A[j][i] * y2[j]
    return make_scop(
        "N",
        "N >= 1",
        [
            ("S0", "[i, j] : 0 <= i, j < N", "[i, j] -> [0, i, 0, j, 0]",
             ["[i, j] -> x1[i]", "[i, j] -> A[i, j]", "[i, j] -> y1[j]"], ["[i, j] -> x1[i]"]),
            ("S1", "[i, j] : 0 <= i, j < N", "[i, j] -> [1, i, 0, j, 0]",
             ["[i, j] -> x2[i]", "[i, j] -> A[j, i]", "[i, j] -> y2[j]"], ["[i, j] -> x2[i]"]),
        ],
    )  # fmt: skip


def scheduled(scop: Scop) -> tuple[isl.Schedule, isl.UnionMap]:
    deps = compute_deps(scop)
    return schedule_scop(scop, deps, options=Options()), deps.validity


def top_band_statements(schedule: isl.Schedule) -> set[str]:
    node = schedule.get_root().child(0)
    if node.get_type() != isl.schedule_node_type.band:
        return set()
    return {piece.get_tuple_name() for piece in ih.sets_of(node.get_domain())}


@pytest.mark.parametrize("kernel", [bicg, mvt])
def test_nests_streaming_one_large_array_share_a_band(kernel: object) -> None:
    scop = with_arrays(kernel(), {**BIG, "A": (2000, 2000)})  # type: ignore[operator]
    schedule, validity = scheduled(scop)
    assert "set" in describe_schedule(schedule)
    assert top_band_statements(schedule) != {"S0", "S1"}  # isl keeps them apart
    fused = fuse_shared_streams(schedule, scop)
    assert top_band_statements(fused) == {"S0", "S1"}
    assert check_schedule_legal(fused, validity)
    assert fused.get_domain().is_equal(schedule.get_domain())


def test_the_same_array_at_different_points_is_not_fused() -> None:
    # the second nest reads A[i][0]: no order of its loops reads what the first reads
    scop = with_arrays(bicg("A[i, 0]"), BIG)
    schedule, _ = scheduled(scop)
    assert fuse_shared_streams(schedule, scop).plain_is_equal(schedule)


def test_different_arrays_are_not_fused() -> None:
    scop = with_arrays(bicg("B[i, j]"), BIG)
    schedule, _ = scheduled(scop)
    assert fuse_shared_streams(schedule, scop).plain_is_equal(schedule)


def test_arrays_that_stay_in_cache_are_not_fused() -> None:
    scop = with_arrays(bicg(), {**BIG, "A": (100, 100)})
    schedule, _ = scheduled(scop)
    assert fuse_shared_streams(schedule, scop).plain_is_equal(schedule)
    fused = fuse_shared_streams(schedule, scop, min_bytes=8 * 100 * 100)
    assert top_band_statements(fused) == {"S0", "S1"}


BICG_C = """#include <stdio.h>
#define N 1100
#define M 1000
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
    r[i] = (i % 9) * 0.5;
    for (int j = 0; j < M; j++) A[i][j] = ((i + 3 * j) % 13) * 0.25;
  }
  for (int j = 0; j < M; j++) p[j] = (j % 5) * 0.125;
  bicg(N, M);
  for (int i = 0; i < N; i += 97) printf("%.17g\\n", q[i]);
  for (int j = 0; j < M; j += 89) printf("%.17g\\n", s[j]);
  return 0;
}
"""


def fused_build_prints_gccs_digits(tmp_path: Path, name: str, source: str) -> str:
    """Build `source` (function `name`) at -O3 with no reduction reordered (bit-exact), check
    it prints gcc -O2's digits on 1 and 2 threads, and return its schedule tree."""
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    exe = tmp_path / name
    options = Options(opt_level=3, parallel_reductions=False)
    report = polyflow.build_program(src, exe, options=options)
    gcc = tmp_path / f"{name}.gcc"
    subprocess.run(["gcc", "-O2", str(src), "-o", str(gcc)], check=True)
    expected = subprocess.run([str(gcc)], capture_output=True, text=True, check=True).stdout
    for threads in ("1", "2"):
        env = {"OMP_NUM_THREADS": threads, "PATH": "/usr/bin:/bin"}
        got = subprocess.run([str(exe)], capture_output=True, text=True, check=True, env=env)
        assert got.stdout == expected
    return report.schedules[name]


@pytest.mark.skipif(openmp_library_dir() is None, reason="libiomp5 is not installed")
def test_bicg_fused_matches_gcc(tmp_path: Path) -> None:
    tree = fused_build_prints_gccs_digits(tmp_path, "bicg", BICG_C)
    assert tree.index("schedule:") < tree.index("set:")  # one band above both nests


def atax(tmp_read: str = "tmp[i]", second_loop: int = 0) -> Scop:
    # for i: { for j: tmp[i] += A[i][j] * x[j];  for j: y[j] += A[i][j] * <tmp_read> }
    # (second_loop 1: the second nest in an i loop of its own, after the first)
    limit = "N - 1" if "i + 1" in tmp_read else "N"
    return make_scop(
        "N, M",
        "N >= 2 and M >= 1",
        [
            ("S0", "[i, j] : 0 <= i < N and 0 <= j < M", "[i, j] -> [0, i, 0, j, 0]",
             ["[i, j] -> tmp[i]", "[i, j] -> A[i, j]", "[i, j] -> x[j]"], ["[i, j] -> tmp[i]"]),
            ("S1", f"[i, j] : 0 <= i < {limit} and 0 <= j < M",
             f"[i, j] -> [{second_loop}, i, {1 - second_loop}, j, 0]",
             ["[i, j] -> y[j]", "[i, j] -> A[i, j]", f"[i, j] -> {tmp_read}"], ["[i, j] -> y[j]"]),
        ],
    )  # fmt: skip


ATAX_ARRAYS = {"A": (1900, 2100), "x": (2100,), "y": (2100,), "tmp": (1900,)}


def top_band_members(schedule: isl.Schedule) -> int:
    node = schedule.get_root().child(0)
    return node.band_n_member() if node.get_type() == isl.schedule_node_type.band else 0


def test_consecutive_nests_reading_the_same_rows_share_their_outer_loop() -> None:
    scop = with_arrays(atax(), ATAX_ARRAYS)
    schedule, validity = scheduled(scop)
    assert top_band_statements(schedule) != {"S0", "S1"}  # isl puts them in a sequence
    # without the dependences nothing may be fused across a sequence
    assert fuse_shared_streams(schedule, scop).plain_is_equal(schedule)
    fused = fuse_shared_streams(schedule, scop, validity=validity)
    assert top_band_statements(fused) == {"S0", "S1"}
    assert top_band_members(fused) == 1  # the outer loop only: S1 needs all of tmp[i]
    assert "sequence" in describe_schedule(fused)
    assert check_schedule_legal(fused, validity)
    assert fused.get_domain().is_equal(schedule.get_domain())


def test_outer_loops_are_not_fused_when_a_dependence_would_go_backward() -> None:
    # the second nest, in a loop of its own, reads tmp[i + 1]: row i + 1 of the first nest must
    # be done before row i of the second, so one loop over both would break the dependence
    scop = with_arrays(atax("tmp[i + 1]", second_loop=1), ATAX_ARRAYS)
    schedule, validity = scheduled(scop)
    assert top_band_statements(schedule) != {"S0", "S1"}
    assert fuse_shared_streams(schedule, scop, validity=validity).plain_is_equal(schedule)


def test_outer_loops_of_nests_whose_arrays_stay_in_cache_are_not_fused() -> None:
    scop = with_arrays(atax(), {**ATAX_ARRAYS, "A": (100, 100)})
    schedule, validity = scheduled(scop)
    assert fuse_shared_streams(schedule, scop, validity=validity).plain_is_equal(schedule)


ATAX_C = """#include <stdio.h>
#define M 1900
#define N 2100
static double A[M][N], x[N], y[N], tmp[M];
static void atax(int m, int n) {
  for (int j = 0; j < n; j++) y[j] = 0.0;
  for (int i = 0; i < m; i++) {
    tmp[i] = 0.0;
    for (int j = 0; j < n; j++) tmp[i] = tmp[i] + A[i][j] * x[j];
    for (int j = 0; j < n; j++) y[j] = y[j] + A[i][j] * tmp[i];
  }
}
int main(void) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) A[i][j] = ((i + 7 * j) % 11) * 0.125 - 0.5;
  for (int j = 0; j < N; j++) x[j] = (j % 7) * 0.25;
  atax(M, N);
  for (int j = 0; j < N; j += 83) printf("%.17g\\n", y[j]);
  for (int i = 0; i < M; i += 97) printf("%.17g\\n", tmp[i]);
  return 0;
}
"""


@pytest.mark.skipif(openmp_library_dir() is None, reason="libiomp5 is not installed")
def test_atax_with_its_outer_loops_fused_matches_gcc(tmp_path: Path) -> None:
    tree = fused_build_prints_gccs_digits(tmp_path, "atax", ATAX_C)
    assert tree.index("schedule:") < tree.index("sequence:")  # one loop above both nests
