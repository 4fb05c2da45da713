"""Row strips across loop nests (polyflow/schedule/row_strips.py): consecutive nests whose
dependences stay within a row run 8 rows at a time through all of them, the rows unrolled and
jammed. adi's two sweeps (each a forward and a backward recurrence per row) print gcc -O2's
digits on 1 and 2 threads, with rows left over past the last strip and with fewer rows than a
strip; the report names the strips; nests a dependence crosses rows between are left alone."""

from __future__ import annotations

from pathlib import Path

import islpy as isl
import pytest
from difftest import check_program_against_gcc, tiled_bands

import polyflow
from polyflow.options import Options
from polyflow.schedule.row_strips import STRIP_ROWS, strip_rows_across_nests

# adi's time step with run-time sizes: a column sweep (u -> v) and a row sweep (v -> u), each a
# forward recurrence through a division and a backward one along every row (column)
ADI = """// polyflow: compiled=adi
#include <stdio.h>
#include <stdlib.h>
static void adi(int steps, int n, double u[n][n], double v[n][n], double p[n][n],
                double q[n][n]) {
  double a = -0.4, b = 1.8, c = -0.4, d = -0.2, e = 1.4, f = -0.2;
  for (int t = 1; t <= steps; t++) {
    for (int i = 1; i < n - 1; i++) {
      v[0][i] = 1.0;
      p[i][0] = 0.0;
      q[i][0] = v[0][i];
      for (int j = 1; j < n - 1; j++) {
        p[i][j] = -c / (a * p[i][j - 1] + b);
        q[i][j] = (-d * u[j][i - 1] + (1.0 + 2.0 * d) * u[j][i] - f * u[j][i + 1]
                   - a * q[i][j - 1]) / (a * p[i][j - 1] + b);
      }
      v[n - 1][i] = 1.0;
      for (int j = n - 2; j >= 1; j--) v[j][i] = p[i][j] * v[j + 1][i] + q[i][j];
    }
    for (int i = 1; i < n - 1; i++) {
      u[i][0] = 1.0;
      p[i][0] = 0.0;
      q[i][0] = u[i][0];
      for (int j = 1; j < n - 1; j++) {
        p[i][j] = -f / (d * p[i][j - 1] + e);
        q[i][j] = (-a * v[i - 1][j] + (1.0 + 2.0 * a) * v[i][j] - c * v[i + 1][j]
                   - d * q[i][j - 1]) / (d * p[i][j - 1] + e);
      }
      u[i][n - 1] = 1.0;
      for (int j = n - 2; j >= 1; j--) u[i][j] = p[i][j] * u[i][j + 1] + q[i][j];
    }
  }
}
int main(void) {
  int n = SIZE;
  double (*u)[n] = malloc(sizeof(double) * n * n);
  double (*v)[n] = malloc(sizeof(double) * n * n);
  double (*p)[n] = malloc(sizeof(double) * n * n);
  double (*q)[n] = malloc(sizeof(double) * n * n);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) u[i][j] = (double)(i + n - j) / n;
  adi(STEPS, n, u, v, p, q);
  for (int i = 0; i < n; i++)
    for (int j = i % 3; j < n; j += 3) printf("%.17g %.17g\\n", u[i][j], v[i][j]);
  free(u);
  free(v);
  free(p);
  free(q);
  return 0;
}
"""

PROGRAMS = {
    # 45 rows inside the borders: five strips of 8 and 5 rows after them
    "adi_odd": ADI.replace("STEPS", "4").replace("SIZE", "47"),
    # 5 rows: no strip at all, the nests as they were
    "adi_small": ADI.replace("STEPS", "3").replace("SIZE", "7"),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_row_strips_print_gccs_digits(tmp_path: Path, name: str, threads: int) -> None:
    src = tmp_path / f"{name}.c"
    src.write_text(PROGRAMS[name])
    check_program_against_gcc(src, tmp_path / "run", Options(opt_level=3, threads=threads))


def _strips(tmp_path: Path, options: Options) -> tuple[list[dict[str, object]], list[str]]:
    src = tmp_path / "adi.c"
    src.write_text(PROGRAMS["adi_odd"])
    built = polyflow.build_program(src, tmp_path / "adi.mlir", options=options, emit="affine-opt")
    bands = [band for band in tiled_bands(built) if band.get("row_strips")]
    return bands, [r.message for r in built.report.select(kind="tiled")]


def test_the_report_names_each_sweeps_strips(tmp_path: Path) -> None:
    bands, messages = _strips(tmp_path, Options(opt_level=3))
    # the column sweep's two nests, then the row sweep's
    assert [(band["sizes"], band["row_strips"]) for band in bands] == [([STRIP_ROWS], 2)] * 2
    assert (
        sum(f"rows in strips of {STRIP_ROWS} through 2 loop nests" in m for m in messages) == 2
    ), messages


def test_no_row_strips_keeps_the_nests_apart(tmp_path: Path) -> None:
    bands, messages = _strips(tmp_path, Options(opt_level=3, row_strips=False))
    assert not bands and not any("strips" in m for m in messages)


def _sequence(domain: str, nests: list[str]) -> isl.ScheduleNode:
    """A sequence of permutable two-member bands (isl's text), one per filter, over `domain`."""
    ctx = isl.Context()
    instances = isl.UnionSet.read_from_str(ctx, domain)
    filters = isl.UnionSetList.alloc(ctx, len(nests))
    for nest in nests:
        members = isl.MultiUnionPwAff.read_from_str(ctx, nest)
        filters = filters.add(members.domain())
    node = isl.Schedule.from_domain(instances).get_root().child(0).insert_sequence(filters)
    for pos, nest in enumerate(nests):
        members = isl.MultiUnionPwAff.read_from_str(ctx, nest)
        band = node.child(pos).child(0).insert_partial_schedule(members).band_set_permutable(1)
        node = band.parent().parent()
    return node


DOMAIN = "[N] -> { F[i, j] : 0 <= i < N and 0 < j < N; B[i, j] : 0 <= i < N and 0 < j < N }"
NESTS = [
    "[N] -> [{ F[i, j] -> [(i)] }, { F[i, j] -> [(j)] }]",
    "[N] -> [{ B[i, j] -> [(i)] }, { B[i, j] -> [(-j)] }]",
]
# F: a forward recurrence along each row; B a backward one along the rows F wrote
RECURRENCE = "F[i, j] -> F[i, j + 1] : 0 <= i < N and 0 < j < N - 1"
BACKWARD = "B[i, j] -> B[i, j - 1] : 0 <= i < N and 1 < j < N"


def test_nests_whose_dependences_stay_in_their_row_go_into_strips() -> None:
    node = _sequence(DOMAIN, NESTS)
    validity = isl.UnionMap.read_from_str(
        node.get_ctx(),
        f"[N] -> {{ {RECURRENCE}; {BACKWARD}; F[i, j] -> B[i, j] : 0 <= i < N and 0 < j < N }}",
    )
    stripped, runs = strip_rows_across_nests(node, validity)
    assert runs == [2]
    # a strip band over the full strips, then the rows left over
    assert stripped.get_type() == isl.schedule_node_type.sequence
    strip = stripped.child(0).child(0)
    assert strip.get_type() == isl.schedule_node_type.band and strip.band_n_member() == 1


def test_a_dependence_to_another_row_keeps_the_nests_apart() -> None:
    # B reads row i - 1 of what F wrote: a strip's first row needs the previous strip's F
    node = _sequence(DOMAIN, NESTS)
    validity = isl.UnionMap.read_from_str(
        node.get_ctx(),
        f"[N] -> {{ {RECURRENCE}; {BACKWARD}; F[i, j] -> B[i + 1, j] : 0 <= i < N - 1 and 0 < j < N }}",
    )
    stripped, runs = strip_rows_across_nests(node, validity)
    assert stripped is node and runs == []


@pytest.mark.parametrize(
    "dependences",
    [
        "F[i, j] -> B[i, j] : 0 <= i < N and 0 < j < N",
        # B is no recurrence (gemver's update of A before its sum): its rows gain nothing jammed
        f"{RECURRENCE}; F[i, j] -> B[i, j] : 0 <= i < N and 0 < j < N",
    ],
    ids=["no_recurrence", "one_recurrence"],
)
def test_nests_that_are_not_all_recurrences_are_left_to_tiling(dependences: str) -> None:
    node = _sequence(DOMAIN, NESTS)
    validity = isl.UnionMap.read_from_str(node.get_ctx(), f"[N] -> {{ {dependences} }}")
    assert strip_rows_across_nests(node, validity)[1] == []


def test_a_run_after_another_nest_gets_its_own_child() -> None:
    # an initialization loop, then the two sweeps: the sweeps are grouped under one child of
    # the sequence, the initialization stays a child of its own (covariance's shape, where isl
    # had already dissolved the one-child sequence the grouping leaves above it)
    domain = DOMAIN.replace("{ F", "{ I[i] : 0 <= i < N; F")
    node = _sequence(domain, ["[N] -> [{ I[i] -> [(i)] }]", *NESTS])
    validity = isl.UnionMap.read_from_str(
        node.get_ctx(),
        f"[N] -> {{ {RECURRENCE}; {BACKWARD}; I[i] -> F[i, 1] : 0 <= i < N and N > 1; "
        "F[i, j] -> B[i, j] : 0 <= i < N and 0 < j < N }",
    )
    stripped, runs = strip_rows_across_nests(node, validity)
    assert runs == [2]
    assert stripped.get_type() == isl.schedule_node_type.sequence and stripped.n_children() == 2
    first = stripped.child(0).child(0)
    assert first.get_type() == isl.schedule_node_type.band and first.band_n_member() == 1
    assert "I[" in str(stripped.child(0).filter_get_filter())
