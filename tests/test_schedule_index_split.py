"""Index-set splitting (polyflow/schedule/index_split.py): an untiled loop whose carried
dependences all start or end at one iteration is cut there; the order stays the same and the
pieces carry none of those dependences."""

from __future__ import annotations

import islpy as isl
import pytest
from test_schedule_scheduler import (
    compute_deps,
    floyd_warshall,
    make_scop,
    tiled_with_validity,
)

from polyflow.options import Options
from polyflow.poly import isl_helpers as ih
from polyflow.schedule.index_split import split_index_sets
from polyflow.schedule.model import Scop
from polyflow.schedule.scheduler import check_schedule_legal, schedule_scop
from polyflow.schedule.tiling import describe_schedule


def tiled(scop: Scop, **options: object) -> tuple[isl.Schedule, isl.UnionMap]:
    # floyd-warshall's LARGE size: not worth tiling
    return tiled_with_validity(scop, 2800, **options)


def independent_loops(scop: Scop, schedule: isl.Schedule, validity: isl.UnionMap) -> list[bool]:
    """For each loop of the AST, outer first, whether it carries none of `validity`."""
    out: list[bool] = []

    def visit(node: ih.AstNode) -> None:
        if isinstance(node, ih.AstFor):
            out.append(node.independent)
            visit(node.body)
        elif isinstance(node, ih.AstIf):
            visit(node.then)
            if node.else_ is not None:
                visit(node.else_)
        elif isinstance(node, ih.AstBlock):
            for child in node.children:
                visit(child)
        elif isinstance(node, ih.AstMark):
            visit(node.child)

    visit(ih.build_ast(scop.context, schedule, dependences=validity))
    return out


def filters_of(schedule: isl.Schedule) -> int:
    return describe_schedule(schedule).count("filter:")


def test_floyd_warshall_is_split_at_k_in_i_and_in_j() -> None:
    scop = floyd_warshall()
    schedule, validity = tiled(scop, parallel=True)
    # i in three pieces, and j in three in each of them
    assert filters_of(schedule) == 3 + 3 * 3
    assert check_schedule_legal(schedule, validity)
    assert schedule.get_domain().is_equal(scop.domain)
    loops = independent_loops(scop, schedule, validity)
    # k carries; the i loops before and after k, and every j piece, carry nothing
    assert loops[0] is False
    assert loops.count(True) >= 2 + 6
    assert "for (int c1 = 0; c1 < c0; c1 += 1)" in ih.ast_text(scop.context, schedule)


def test_the_split_keeps_the_execution_order() -> None:
    scop = floyd_warshall()
    plain, _ = tiled(scop, parallel=True, index_split=False)
    split, _ = tiled(scop, parallel=True)
    instances = scop.domain.intersect_params(isl.Set("[N] -> { : N = 5 }"))
    order_plain = ih.schedule_map(plain).intersect_domain(instances)
    order_split = ih.schedule_map(split).intersect_domain(instances)
    before_plain = order_plain.lex_lt_union_map(order_plain)
    before_split = order_split.lex_lt_union_map(order_split)
    assert before_plain.is_equal(before_split)


def test_without_parallel_only_the_innermost_loop_is_split() -> None:
    schedule, validity = tiled(floyd_warshall(), parallel=False)
    assert filters_of(schedule) == 3
    assert check_schedule_legal(schedule, validity)


def test_switched_off_nothing_is_split() -> None:
    schedule, _ = tiled(floyd_warshall(), parallel=True, index_split=False)
    assert "sequence" not in describe_schedule(schedule)


def recurrence() -> Scop:
    # for i: for j: A[i][j] = A[i - 1][j] + A[i][j - 1]: carried everywhere, no single iteration
    return make_scop(
        "N",
        "N >= 2",
        [("S0", "[i, j] : 1 <= i, j < 8", "[i, j] -> [0, i, 0, j, 0]",
          ["[i, j] -> A[i - 1, j]", "[i, j] -> A[i, j - 1]"], ["[i, j] -> A[i, j]"])],
    )  # fmt: skip


def pivot_row() -> Scop:
    # for i: for j: A[i][j] = A[i][j] / A[i][p]  (p a parameter): j carries from and to j == p
    return make_scop(
        "N, p",
        "0 <= p < N",
        [("S0", "[i, j] : 0 <= i < 8 and 0 <= j < N", "[i, j] -> [0, i, 0, j, 0]",
          ["[i, j] -> A[i, j]", "[i, j] -> A[i, p]"], ["[i, j] -> A[i, j]"])],
    )  # fmt: skip


def test_dependences_not_meeting_at_one_iteration_are_not_split() -> None:
    schedule, _ = tiled(recurrence(), parallel=True)
    assert "sequence" not in describe_schedule(schedule)


def test_a_parameter_pinned_iteration_splits_the_innermost_loop() -> None:
    scop = pivot_row()
    schedule, validity = tiled(scop, parallel=True)
    assert filters_of(schedule) == 3
    assert check_schedule_legal(schedule, validity)
    assert schedule.get_domain().is_equal(scop.domain.intersect_params(scop.context))


@pytest.mark.parametrize("kernel", [floyd_warshall, pivot_row])
def test_past_the_operation_budget_the_band_is_unchanged(kernel: object) -> None:
    scop = kernel()  # type: ignore[operator]
    deps = compute_deps(scop)
    band = schedule_scop(scop, deps, options=Options()).get_root().child(0)
    while band.get_type() != isl.schedule_node_type.band:
        band = band.child(0)
    assert split_index_sets(band, deps.validity, parallel=True, max_operations=1) is band
    assert band.get_ctx().get_max_operations() == 0  # the budget is the call's only
