"""`isl_helpers.carries_at`: whether a schedule dimension carries a dependence, asked as one
emptiness question per dependence relation. Each case is checked against the answer by
projection (`_carries_at_by_deltas`, the textbook formulation) and against the expected one."""

from __future__ import annotations

import islpy as isl
import pytest

from polyflow.poly import isl_helpers as ih

# A 1-d Jacobi sweep: S[t, i] reads S[t-1, i-1..i+1]; T copies back (not a dependence here).
JACOBI_DEPS = (
    "[N, T] -> { S[t, i] -> S[t + 1, i'] : 0 <= t < T - 1 and 1 <= i < N - 1 and "
    "1 <= i' < N - 1 and i - 1 <= i' <= i + 1 }"
)
# A statement of another scop part, scheduled elsewhere: its dependences are not asked about.
OTHER = "[N, T] -> { S[t, i] -> U[t, i] : 0 <= t < T and 0 <= i < N }"

CASES = [
    # (schedule, dim, carried?)
    ("[N, T] -> { S[t, i] -> [t, i] }", 0, True),  # the time loop carries
    ("[N, T] -> { S[t, i] -> [t, i] }", 1, False),  # space is parallel within a step
    ("[N, T] -> { S[t, i] -> [i, t] }", 0, True),  # interchanged: i carries (i-1, i+1)
    ("[N, T] -> { S[t, i] -> [t + i, t] }", 0, True),  # skewed wavefront: the front carries
    ("[N, T] -> { S[t, i] -> [2t + i, t] }", 1, False),  # equal front, equal t: none
    # tiled (nested range, as isl's AST build gives it): tile loops over 32 and points
    (
        "[N, T] -> { S[t, i] -> [[o0] -> [o1]] : o0 mod 32 = 0 and t - 31 <= o0 <= t and "
        "o1 mod 32 = 0 and t + i - 31 <= o1 <= t + i }",
        1,
        True,
    ),
    (
        "[N, T] -> { S[t, i] -> [[o0] -> [o1, o2]] : o0 mod 32 = 0 and t - 31 <= o0 <= t and "
        "o1 = t and o2 = i }",
        2,
        False,
    ),
]


@pytest.mark.parametrize(("schedule", "dim", "expected"), CASES)
def test_carries_at_agrees_with_the_projection(schedule: str, dim: int, expected: bool) -> None:
    ctx = isl.Context()
    deps = isl.UnionMap.read_from_str(ctx, JACOBI_DEPS).union(
        isl.UnionMap.read_from_str(ctx, OTHER)
    )
    sched = isl.UnionMap.read_from_str(ctx, schedule)
    assert ih.carries_at(deps, sched, dim) is expected
    assert ih._carries_at_by_deltas(deps, sched, dim) is expected


def test_two_statements_and_a_dependence_between_them() -> None:
    ctx = isl.Context()
    # S writes A[i], T reads A[i] and A[i-1]: fused in one loop, i carries (i-1 -> i).
    deps = isl.UnionMap.read_from_str(
        ctx, "[N] -> { S[i] -> T[i'] : 0 <= i < N and i <= i' <= i + 1 and i' < N }"
    )
    fused = isl.UnionMap.read_from_str(ctx, "[N] -> { S[i] -> [i, 0]; T[i] -> [i, 1] }")
    assert ih.carries_at(deps, fused, 0)
    # within one i, S before T (S[i] -> T[i]): the statement dimension carries that one
    assert ih.carries_at(deps, fused, 1) and ih._carries_at_by_deltas(deps, fused, 1)
    # one loop after the other: the outer sequence dimension carries, the loops do not
    split = isl.UnionMap.read_from_str(ctx, "[N] -> { S[i] -> [0, i]; T[i] -> [1, i] }")
    assert ih.carries_at(deps, split, 0)
    assert not ih.carries_at(deps, split, 1)
    assert ih._carries_at_by_deltas(deps, split, 1) is False


def test_no_dependence_among_the_scheduled_instances() -> None:
    ctx = isl.Context()
    deps = isl.UnionMap.read_from_str(ctx, OTHER)
    sched = isl.UnionMap.read_from_str(ctx, "[N, T] -> { S[t, i] -> [t, i] }")
    assert not ih.carries_at(deps, sched, 0)
