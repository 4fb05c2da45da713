"""Blocked factorizations' tile order (polyflow/schedule/panels.py): the tiles each step's other
tiles wait for run first, the rest in parallel; only where that leaves most tiles parallel."""

from __future__ import annotations

from test_schedule_scheduler import gemm, make_scop, tiled_with_validity

from polyflow.schedule.model import Scop
from polyflow.schedule.panels import PARALLEL_TILES_MARK
from polyflow.schedule.scheduler import check_schedule_legal
from polyflow.schedule.tiling import describe_schedule


def lu() -> Scop:
    # for i: { for j < i: { for k < j: A[i][j] -= A[i][k] * A[k][j];  A[i][j] /= A[j][j] }
    #          for j >= i: for k < i: A[i][j] -= A[i][k] * A[k][j] }
    return make_scop(
        "N",
        "N >= 1",
        [
            ("S0", "[i, j, k] : 0 <= i < N and 0 <= j < i and 0 <= k < j",
             "[i, j, k] -> [0, i, 0, j, 0, k, 0]",
             ["[i, j, k] -> A[i, j]", "[i, j, k] -> A[i, k]", "[i, j, k] -> A[k, j]"],
             ["[i, j, k] -> A[i, j]"]),
            ("S1", "[i, j] : 0 <= i < N and 0 <= j < i", "[i, j] -> [0, i, 0, j, 1, 0, 0]",
             ["[i, j] -> A[i, j]", "[i, j] -> A[j, j]"], ["[i, j] -> A[i, j]"]),
            ("S2", "[i, j, k] : 0 <= i < N and i <= j < N and 0 <= k < i",
             "[i, j, k] -> [0, i, 1, j, 0, k, 0]",
             ["[i, j, k] -> A[i, j]", "[i, j, k] -> A[i, k]", "[i, j, k] -> A[k, j]"],
             ["[i, j, k] -> A[i, j]"]),
        ],
    )  # fmt: skip


def recurrence_2d() -> Scop:
    # for i: for j: A[i][j] = A[i - 1][j] + A[i][j - 1]: every tile feeds the next one
    return make_scop(
        "N",
        "N >= 2",
        [("S0", "[i, j] : 1 <= i, j < N", "[i, j] -> [0, i, 0, j, 0]",
          ["[i, j] -> A[i - 1, j]", "[i, j] -> A[i, j - 1]"], ["[i, j] -> A[i, j]"])],
    )  # fmt: skip


def test_lu_runs_its_trailing_update_and_its_panels_as_parallel_tiles() -> None:
    schedule, validity = tiled_with_validity(lu(), parallel=True)
    text = describe_schedule(schedule)
    # two splits: [diagonal, panels] before the trailing update, each of the latter parallel
    assert text.count(PARALLEL_TILES_MARK) == 2
    assert text.count("sequence") >= 2
    assert check_schedule_legal(schedule, validity)
    assert schedule.get_domain().is_equal(lu().domain.intersect_params(lu().context))


def test_without_parallel_the_tile_order_is_isls() -> None:
    schedule, _ = tiled_with_validity(lu(), parallel=False)
    assert PARALLEL_TILES_MARK not in describe_schedule(schedule)


def test_bands_with_parallel_tile_loops_are_left_alone() -> None:
    schedule, _ = tiled_with_validity(gemm(), parallel=True)
    assert PARALLEL_TILES_MARK not in describe_schedule(schedule)


def test_a_chain_of_tiles_is_not_split() -> None:
    # nearly every tile feeds the next of its row: splitting would leave one parallel tile per row
    schedule, validity = tiled_with_validity(recurrence_2d(), parallel=True)
    assert PARALLEL_TILES_MARK not in describe_schedule(schedule)
    assert check_schedule_legal(schedule, validity)
