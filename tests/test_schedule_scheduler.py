"""isl scheduling and tiling (polyflow/schedule/scheduler.py, tiling.py) on hand-built Scops.

Kernels follow their PolyBench definitions; every schedule is checked for legality against the
dependences, and the structure (fusion, coincidence, tile sizes) against what the options ask for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import islpy as isl
import pytest

from polyflow.options import Options
from polyflow.schedule.model import Access, Scop, Statement
from polyflow.schedule.scheduler import (
    DEFAULT_MAX_OPERATIONS,
    ScheduleError,
    check_schedule_legal,
    isl_scheduler_options,
    original_schedule,
    schedule_or_original,
    schedule_scop,
    scheduler_settings,
)
from polyflow.schedule.tiling import (
    SECOND_LEVEL_FACTOR,
    WAVEFRONT_COLUMNS_MARK,
    band_tile_sizes,
    carries_dependence,
    default_tile_size,
    describe_schedule,
    tile_schedule,
)

# ----- building scops and their dependences


@dataclass(frozen=True)
class Deps:
    raw: isl.UnionMap
    false: isl.UnionMap  # WAR ∪ WAW

    @property
    def validity(self) -> isl.UnionMap:
        return self.raw.union(self.false)

    @property
    def proximity(self) -> isl.UnionMap:
        return self.raw

    @property
    def coincidence(self) -> isl.UnionMap:
        return self.validity


def make_scop(
    params: str, context: str, statements: list[tuple[str, str, str, list[str], list[str]]]
) -> Scop:
    """statements: (name, "[i, j] : constraints", "[i, j] -> [2d+1 order]", reads, writes), the
    accesses written "[i, j] -> A[i, j + 1]"."""
    built = []
    order = None
    for name, domain_text, order_text, reads, writes in statements:
        domain = isl.Set(f"[{params}] -> {{ {name}{domain_text} }}")
        accesses = []
        kinds: tuple[tuple[Literal["read", "write"], list[str]], ...] = (
            ("read", reads),
            ("write", writes),
        )
        for kind, texts in kinds:
            for text in texts:
                relation = isl.Map(f"[{params}] -> {{ {name}{text} }}").intersect_domain(domain)
                array = relation.get_tuple_name(isl.dim_type.out)
                accesses.append(Access(name, array, kind, relation))
        built.append(Statement(name, domain, tuple(accesses)))
        piece = isl.UnionMap(f"[{params}] -> {{ {name}{order_text} }}")
        order = piece if order is None else order.union(piece)
    assert order is not None
    return Scop(
        function="kernel",
        params=tuple(p.strip() for p in params.split(",")),
        statements=tuple(built),
        arrays={},
        initial_schedule=order,
        context=isl.Set(f"[{params}] -> {{ : {context} }}"),
    )


def compute_deps(scop: Scop) -> Deps:
    """RAW, and WAR ∪ WAW, from isl's dataflow analysis in source order (a stand-in for
    polyflow/schedule/dependences.py)."""
    reads, writes = scop.accesses("read"), scop.accesses("write")
    order = scop.initial_schedule
    flow = (
        isl.UnionAccessInfo.from_sink(reads)
        .set_must_source(writes)
        .set_schedule_map(order)
        .compute_flow()
    )
    # The last write kills older reads and writes: what remains is WAW plus WAR since then.
    false = (
        isl.UnionAccessInfo.from_sink(writes)
        .set_must_source(writes)
        .set_may_source(reads)
        .set_schedule_map(order)
        .compute_flow()
    )
    return Deps(raw=flow.get_may_dependence(), false=false.get_may_dependence())


def access_maps(scop: Scop) -> list[isl.Map]:
    return [access.relation for statement in scop.statements for access in statement.accesses]


# ----- kernels

N1 = "N >= 1"


def gemm() -> Scop:
    # for i: { for j: C[i][j] *= beta;  for k: for j: C[i][j] += alpha * A[i][k] * B[k][j] }
    return make_scop(
        "N",
        N1,
        [
            ("S0", "[i, j] : 0 <= i, j < N", "[i, j] -> [0, i, 0, j, 0, 0, 0]",
             ["[i, j] -> C[i, j]"], ["[i, j] -> C[i, j]"]),
            ("S1", "[i, k, j] : 0 <= i, j, k < N", "[i, k, j] -> [0, i, 1, k, 0, j, 0]",
             ["[i, k, j] -> C[i, j]", "[i, k, j] -> A[i, k]", "[i, k, j] -> B[k, j]"],
             ["[i, k, j] -> C[i, j]"]),
        ],
    )  # fmt: skip


def two_mm() -> Scop:
    # tmp = alpha * A * B; D = beta * D + tmp * C, each as init + reduction
    return make_scop(
        "N",
        N1,
        [
            ("S0", "[i, j] : 0 <= i, j < N", "[i, j] -> [0, i, 0, j, 0, 0, 0]",
             [], ["[i, j] -> T[i, j]"]),
            ("S1", "[i, j, k] : 0 <= i, j, k < N", "[i, j, k] -> [0, i, 0, j, 1, k, 0]",
             ["[i, j, k] -> T[i, j]", "[i, j, k] -> A[i, k]", "[i, j, k] -> B[k, j]"],
             ["[i, j, k] -> T[i, j]"]),
            ("S2", "[i, j] : 0 <= i, j < N", "[i, j] -> [1, i, 0, j, 0, 0, 0]",
             ["[i, j] -> D[i, j]"], ["[i, j] -> D[i, j]"]),
            ("S3", "[i, j, k] : 0 <= i, j, k < N", "[i, j, k] -> [1, i, 0, j, 1, k, 0]",
             ["[i, j, k] -> D[i, j]", "[i, j, k] -> T[i, k]", "[i, j, k] -> C[k, j]"],
             ["[i, j, k] -> D[i, j]"]),
        ],
    )  # fmt: skip


def jacobi_1d() -> Scop:
    # for t: { for i: B[i] = (A[i-1] + A[i] + A[i+1]) / 3;  for i: A[i] = (B[i-1] + ...) / 3 }
    domain = "[t, i] : 0 <= t < T and 1 <= i < N - 1"
    return make_scop(
        "T, N",
        "T >= 1 and N >= 3",
        [
            ("S0", domain, "[t, i] -> [0, t, 0, i, 0]",
             ["[t, i] -> A[i - 1]", "[t, i] -> A[i]", "[t, i] -> A[i + 1]"], ["[t, i] -> B[i]"]),
            ("S1", domain, "[t, i] -> [0, t, 1, i, 0]",
             ["[t, i] -> B[i - 1]", "[t, i] -> B[i]", "[t, i] -> B[i + 1]"], ["[t, i] -> A[i]"]),
        ],
    )  # fmt: skip


def seidel_2d() -> Scop:
    # for t, i, j: A[i][j] = (sum of the 3x3 neighbourhood, updated in place) / 9
    reads = [f"[t, i, j] -> A[i + {a}, j + {b}]" for a in (-1, 0, 1) for b in (-1, 0, 1)]
    return make_scop(
        "T, N",
        "T >= 1 and N >= 3",
        [
            ("S0", "[t, i, j] : 0 <= t < T and 1 <= i, j < N - 1",
             "[t, i, j] -> [0, t, 0, i, 0, j, 0]", reads, ["[t, i, j] -> A[i, j]"]),
        ],
    )  # fmt: skip


def producer_consumer() -> Scop:
    # for i: Y[i] = 2 * X[i];  for i: Z[i] = Y[i] + 1
    return make_scop(
        "N",
        N1,
        [
            ("S0", "[i] : 0 <= i < N", "[i] -> [0, i, 0]", ["[i] -> X[i]"], ["[i] -> Y[i]"]),
            ("S1", "[i] : 0 <= i < N", "[i] -> [1, i, 0]", ["[i] -> Y[i]"], ["[i] -> Z[i]"]),
        ],
    )  # fmt: skip


def shared_input() -> Scop:
    # for i: Y[i] = X[i] * 2;  for i: Z[i] = X[i] + 1  (no dependence, only a shared read)
    return make_scop(
        "N",
        N1,
        [
            ("S0", "[i] : 0 <= i < N", "[i] -> [0, i, 0]", ["[i] -> X[i]"], ["[i] -> Y[i]"]),
            ("S1", "[i] : 0 <= i < N", "[i] -> [1, i, 0]", ["[i] -> X[i]"], ["[i] -> Z[i]"]),
        ],
    )  # fmt: skip


def mixed_depth() -> Scop:
    # s = 0;  for i: s += X[i];  Y[0] = s   (statements at depth 0, 1, 0)
    return make_scop(
        "N",
        N1,
        [
            ("S0", "[] : ", "[] -> [0]", [], ["[] -> s[]"]),
            ("S1", "[i] : 0 <= i < N", "[i] -> [1, i, 0]", ["[i] -> s[]", "[i] -> X[i]"],
             ["[i] -> s[]"]),
            ("S2", "[] : ", "[] -> [2]", ["[] -> s[]"], ["[] -> Y[0]"]),
        ],
    )  # fmt: skip


def filter_3x3() -> Scop:
    # for i, j, a, b (a, b < 3): O[i][j] += W[a][b] * I[i + a][j + b]
    return make_scop(
        "N",
        N1,
        [
            ("S0", "[i, j, a, b] : 0 <= i, j < N and 0 <= a, b < 3",
             "[i, j, a, b] -> [0, i, 0, j, 0, a, 0, b, 0]",
             ["[i, j, a, b] -> O[i, j]", "[i, j, a, b] -> W[a, b]", "[i, j, a, b] -> I[i + a, j + b]"],
             ["[i, j, a, b] -> O[i, j]"]),
        ],
    )  # fmt: skip


def gramschmidt_update() -> Scop:
    # for k: { for i: Q[i][k] = A[i][k];
    #          for j in k+1..N: { for i: R[k][j] += Q[i][k] * A[i][j];
    #                             for i: A[i][j] -= Q[i][k] * R[k][j] } }
    update = "[k, j, i] : 0 <= k < j < N and 0 <= i < M"
    return make_scop(
        "N, M",
        "N >= 2 and M >= 1",
        [
            ("S0", "[k, i] : 0 <= k < N and 0 <= i < M", "[k, i] -> [0, k, 0, i, 0]",
             ["[k, i] -> A[i, k]"], ["[k, i] -> Q[i, k]"]),
            ("S1", update, "[k, j, i] -> [0, k, 1, j, 0, i, 0]",
             ["[k, j, i] -> R[k, j]", "[k, j, i] -> Q[i, k]", "[k, j, i] -> A[i, j]"],
             ["[k, j, i] -> R[k, j]"]),
            ("S2", update, "[k, j, i] -> [0, k, 1, j, 1, i, 0]",
             ["[k, j, i] -> A[i, j]", "[k, j, i] -> Q[i, k]", "[k, j, i] -> R[k, j]"],
             ["[k, j, i] -> A[i, j]"]),
        ],
    )  # fmt: skip


KERNELS = {
    "gemm": gemm,
    "gramschmidt-update": gramschmidt_update,
    "2mm": two_mm,
    "jacobi-1d": jacobi_1d,
    "seidel-2d": seidel_2d,
    "producer-consumer": producer_consumer,
    "shared-input": shared_input,
    "mixed-depth": mixed_depth,
    "filter-3x3": filter_3x3,
}

PRESETS = ("pluto", "isl", "feautrier")
FUSIONS = ("max", "min", "smart")


# ----- helpers over schedule trees


def shape(node: isl.ScheduleNode) -> Any:
    """A schedule tree as nested tuples: ("band", n_member, child), ("sequence", [...]), ...;
    filters show their statements; the domain node and leaves are left out."""
    kind = node.get_type()
    children = [shape(node.child(pos)) for pos in range(node.n_children())]
    if kind in (isl.schedule_node_type.domain, isl.schedule_node_type.context):
        return children[0] if children else None
    if kind == isl.schedule_node_type.leaf:
        return None
    if kind == isl.schedule_node_type.band:
        return ("band", node.band_n_member(), children[0])
    if kind == isl.schedule_node_type.filter:
        names: list[str] = []
        node.filter_get_filter().foreach_set(lambda s: names.append(s.get_tuple_name()))
        return ("filter", tuple(sorted(names)), children[0])
    return (str(kind).split(".")[-1], children)


def bands(schedule: isl.Schedule) -> list[isl.ScheduleNode]:
    """Every band node, outermost first."""
    found: list[isl.ScheduleNode] = []

    def visit(node: isl.ScheduleNode) -> bool:
        if node.get_type() == isl.schedule_node_type.band:
            found.append(node.copy())  # the callback only borrows the node
        return True

    schedule.get_root().foreach_descendant_top_down(visit)
    return found


def band_of(schedule: isl.Schedule, statement: str, depth: int = 0) -> isl.ScheduleNode:
    """The `depth`-th band (outermost 0) on the path to `statement`."""
    on_path = [
        band
        for band in bands(schedule)
        if any(s.get_tuple_name() == statement for s in _sets(band.get_domain()))
    ]
    return on_path[depth]


def _sets(union_set: isl.UnionSet) -> list[isl.Set]:
    sets: list[isl.Set] = []
    union_set.foreach_set(sets.append)
    return sets


def member_map(band: isl.ScheduleNode, statement: str) -> isl.Map:
    """The band's partial schedule for one statement."""
    maps: list[isl.Map] = []
    band.band_get_partial_schedule_union_map().foreach_map(maps.append)
    (found,) = [m for m in maps if m.get_tuple_name(isl.dim_type.in_) == statement]
    return found


def member_affs(band: isl.ScheduleNode, statement: str) -> list[isl.Aff]:
    """The band's members for one statement, as affine functions of its iterators."""
    pieces: list[isl.MultiAff] = []
    isl.PwMultiAff.from_map(member_map(band, statement)).foreach_piece(
        lambda _domain, function: pieces.append(function)
    )
    function = pieces[0]
    return [function.get_at(pos) for pos in range(function.dim(isl.dim_type.out))]


def same_map(actual: isl.Map, expected: str, domain: isl.Set) -> bool:
    """Whether `actual` is the relation `expected` on `domain` (ranges are anonymous in both)."""
    expected_map = isl.UnionMap(expected).intersect_domain(isl.UnionSet.from_set(domain))
    actual_map = isl.UnionMap.from_map(actual).intersect_domain(isl.UnionSet.from_set(domain))
    return bool(actual_map.is_equal(expected_map))


def schedule_for(kernel: str, **options: Any) -> tuple[Scop, Deps, isl.Schedule]:
    scop = KERNELS[kernel]()
    deps = compute_deps(scop)
    return scop, deps, schedule_scop(scop, deps, options=Options(**options))


# ----- legality, every preset and fusion


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("fusion", FUSIONS)
def test_schedule_is_legal(kernel: str, preset: str, fusion: str) -> None:
    scop, deps, schedule = schedule_for(kernel, schedule_preset=preset, fusion=fusion)
    assert check_schedule_legal(schedule, deps.validity)
    assert check_schedule_legal(schedule, deps.validity, context=scop.context)


def test_the_schedule_domain_carries_the_context_the_scheduler_relied_on() -> None:
    # With N >= 1 known, isl may run S2 (Y[0] = s) at time N: after the loop only when N >= 1.
    scop, deps, schedule = schedule_for("mixed-depth", fusion="max")
    assert schedule.get_domain().params().is_subset(scop.context)
    assert check_schedule_legal(schedule, deps.validity)  # what the orchestrator calls
    assert check_schedule_legal(schedule, deps.validity, context=scop.context)
    # The same band over instances for every N: wrong for N <= 0 (S2 would run before S0).
    unrestricted = isl.Schedule.from_domain(scop.domain).insert_partial_schedule(
        schedule.get_root().child(0).band_get_partial_schedule()
    )
    assert not check_schedule_legal(unrestricted, deps.validity)


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_original_schedule_is_legal(kernel: str) -> None:
    scop = KERNELS[kernel]()
    assert check_schedule_legal(original_schedule(scop), compute_deps(scop).validity)


def test_check_rejects_a_reversed_reduction() -> None:
    scop = gemm()
    deps = compute_deps(scop)
    backwards = isl.UnionMap(
        "[N] -> { S0[i, j] -> [i, j, 0, 0]; S1[i, k, j] -> [i, j, 1, -k] }"
    )  # k runs down: C[i][j]'s updates read what later k wrote
    schedule = isl.Schedule.from_domain(scop.domain).insert_partial_schedule(
        isl.MultiUnionPwAff.from_union_map(backwards)
    )
    assert not check_schedule_legal(schedule, deps.validity, context=scop.context)
    forwards = isl.UnionMap("[N] -> { S0[i, j] -> [i, j, 0, 0]; S1[i, k, j] -> [i, j, 1, k] }")
    schedule = isl.Schedule.from_domain(scop.domain).insert_partial_schedule(
        isl.MultiUnionPwAff.from_union_map(forwards)
    )
    assert check_schedule_legal(schedule, deps.validity, context=scop.context)


def test_check_rejects_unscheduled_instances() -> None:
    scop = producer_consumer()
    deps = compute_deps(scop)
    only_s0 = isl.Schedule.from_domain(isl.UnionSet.from_set(scop.statements[0].domain))
    assert not check_schedule_legal(only_s0, deps.validity)


# ----- structure: coincidence, skewing, fusion


def test_gemm_i_and_j_are_parallel_k_is_not() -> None:
    _, _, schedule = schedule_for("gemm")
    band = band_of(schedule, "S1")
    assert band.band_get_permutable()
    assert band.band_n_member() == 3
    # Which member follows which loop, whatever order isl picked.
    follows = {}
    for member, aff in enumerate(member_affs(band, "S1")):
        for pos, name in enumerate("ikj"):
            if aff.get_coefficient_val(isl.dim_type.in_, pos).is_one():
                follows[name] = member
    assert set(follows) == set("ikj")
    assert band.band_member_get_coincident(follows["i"])
    assert band.band_member_get_coincident(follows["j"])
    assert not band.band_member_get_coincident(follows["k"])


@pytest.mark.parametrize("kernel", ["jacobi-1d", "seidel-2d"])
def test_stencils_get_a_skewed_band_without_outer_parallelism(kernel: str) -> None:
    scop, _, schedule = schedule_for(kernel)
    band = band_of(schedule, "S0")
    depth = scop.statements[0].domain.dim(isl.dim_type.set)
    assert band.band_get_permutable()
    assert band.band_n_member() == depth  # time tiling possible: the whole nest is one band
    assert not band.band_member_get_coincident(0)
    # Skewed: some inner member moves with t.
    t_coefficients = [
        aff.get_coefficient_val(isl.dim_type.in_, 0).to_python()
        for aff in member_affs(band, "S0")[1:]
    ]
    assert any(c != 0 for c in t_coefficients)


def test_2mm_fusion_max_and_min_differ() -> None:
    _, _, fused = schedule_for("2mm", fusion="max")
    _, _, split = schedule_for("2mm", fusion="min")
    fused_shape, split_shape = shape(fused.get_root()), shape(split.get_root())
    assert fused_shape != split_shape
    # max: one band over all four statements; min: a sequence of one nest per statement.
    assert fused_shape[0] == "band"
    assert split_shape[0] == "sequence"
    assert len(split_shape[1]) == 4
    assert all(child[2][0] == "band" for child in split_shape[1])


def test_2mm_smart_fuses_each_contraction_with_its_initialization() -> None:
    _, _, schedule = schedule_for("2mm", fusion="smart")
    top = shape(schedule.get_root())
    assert top[0] == "sequence"
    groups = [child[1] for child in top[1]]
    assert groups == [("S0", "S1"), ("S2", "S3")]
    for child in top[1]:
        assert child[2][0] == "band" and child[2][1] == 3


@pytest.mark.parametrize(("fusion", "fused"), [("smart", True), ("max", True), ("min", False)])
def test_producer_consumer_fusion(fusion: str, fused: bool) -> None:
    _, _, schedule = schedule_for("producer-consumer", fusion=fusion)
    top = shape(schedule.get_root())
    # Fused: one loop around both statements; otherwise one loop per statement.
    assert (top[0] == "band") is fused
    if fused:
        band = band_of(schedule, "S0")
        assert band.band_member_get_coincident(0)


@pytest.mark.parametrize(("fusion", "fused"), [("smart", False), ("max", True), ("min", False)])
def test_only_max_fusion_fuses_statements_that_share_only_inputs(fusion: str, fused: bool) -> None:
    _, _, schedule = schedule_for("shared-input", fusion=fusion)
    assert (shape(schedule.get_root())[0] == "band") is fused


# ----- presets and their isl options


def test_presets_set_the_isl_options() -> None:
    pluto = scheduler_settings(Options(schedule_preset="pluto"))
    assert pluto.maximize_band_depth and pluto.maximize_coincidence and pluto.treat_coalescing
    assert not pluto.outer_coincidence and not pluto.whole_component
    assert pluto.algorithm == isl.schedule_algorithm.ISL
    plain = scheduler_settings(Options(schedule_preset="isl"))
    assert not plain.maximize_band_depth and not plain.maximize_coincidence
    feautrier = scheduler_settings(Options(schedule_preset="feautrier"))
    assert feautrier.algorithm == isl.schedule_algorithm.FEAUTRIER
    assert scheduler_settings(Options(fusion="min")).serialize_sccs
    fused = scheduler_settings(Options(fusion="max"))
    assert fused.whole_component and not fused.serialize_sccs and fused.input_reuse
    smart = scheduler_settings(Options(fusion="smart"))
    assert not smart.whole_component and not smart.serialize_sccs and not smart.input_reuse


def test_options_are_set_for_the_run_and_restored() -> None:
    ctx = isl.DEFAULT_CONTEXT
    before = (ctx.get_schedule_maximize_band_depth(), ctx.get_schedule_algorithm())
    settings = scheduler_settings(Options(schedule_preset="feautrier", fusion="min"))
    with isl_scheduler_options(ctx, settings, max_operations=1234):
        assert ctx.get_schedule_algorithm() == isl.schedule_algorithm.FEAUTRIER
        assert ctx.get_schedule_serialize_sccs() == 1
        assert ctx.get_max_operations() == 1234
    assert (ctx.get_schedule_maximize_band_depth(), ctx.get_schedule_algorithm()) == before
    assert ctx.get_max_operations() == 0


def test_presets_give_different_schedules() -> None:
    _, _, pluto = schedule_for("gemm", schedule_preset="pluto")
    _, _, feautrier = schedule_for("gemm", schedule_preset="feautrier")
    assert not pluto.plain_is_equal(feautrier)
    # Feautrier carries the k reduction in a one-member outer band; Pluto keeps a 3-deep band.
    assert band_of(feautrier, "S1").band_n_member() == 1
    assert band_of(pluto, "S1").band_n_member() == 3


# ----- failure and fallback


def test_budget_exceeded_falls_back_to_source_order() -> None:
    scop = two_mm()
    deps = compute_deps(scop)
    with pytest.raises(ScheduleError, match="operations"):
        schedule_scop(scop, deps, options=Options(), max_operations=10)
    outcome = schedule_or_original(scop, deps, options=Options(), max_operations=10)
    assert not outcome.rescheduled
    assert "operations" in outcome.reason
    assert outcome.schedule.get_map().is_equal(original_schedule(scop).get_map())
    assert check_schedule_legal(outcome.schedule, deps.validity, context=scop.context)
    # The context is usable and unbounded again afterwards.
    assert isl.DEFAULT_CONTEXT.get_max_operations() == 0
    assert schedule_or_original(scop, deps, options=Options()).rescheduled


def test_unsatisfiable_dependences_fall_back_to_source_order() -> None:
    scop = producer_consumer()
    real = compute_deps(scop)
    # S1 both before and after S0 on the same element: no schedule can respect both.
    cycle = isl.UnionMap("[N] -> { S1[i] -> S0[i] : 0 <= i < N }")
    deps = Deps(raw=real.raw, false=real.false.union(cycle))
    with pytest.raises(ScheduleError):
        schedule_scop(scop, deps, options=Options())
    outcome = schedule_or_original(scop, deps, options=Options())
    assert not outcome.rescheduled and outcome.reason


def test_default_budget_is_ample_for_the_kernels() -> None:
    for kernel in KERNELS:
        scop = KERNELS[kernel]()
        outcome = schedule_or_original(
            scop,
            compute_deps(scop),
            options=Options(fusion="max"),
            max_operations=DEFAULT_MAX_OPERATIONS,
        )
        assert outcome.rescheduled, (kernel, outcome.reason)


# ----- tiling


def test_default_tile_sizes_follow_the_element_size() -> None:
    assert default_tile_size(8) == 32
    assert default_tile_size(4) == 32
    assert default_tile_size(2) == 64
    assert default_tile_size(1) == 64
    assert band_tile_sizes(3, options=Options()) == (32, 32, 32)
    assert band_tile_sizes(3, options=Options(tile_sizes=(64, 16))) == (64, 16, 16)
    with pytest.raises(ValueError):
        band_tile_sizes(2, options=Options(tile_sizes=(0,)))


def tiled(kernel: str, **options: Any) -> tuple[Scop, Deps, isl.Schedule]:
    scop, deps, schedule = schedule_for(kernel)
    result = tile_schedule(schedule, options=Options(**options), accesses=access_maps(scop))
    return scop, deps, result


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("second_level", [False, True])
def test_tiled_schedules_stay_legal(kernel: str, second_level: bool) -> None:
    scop, deps, schedule = tiled(kernel, tile_second_level=second_level)
    assert check_schedule_legal(schedule, deps.validity)
    assert schedule.get_domain().is_equal(scop.domain.intersect_params(scop.context))


def test_gemm_is_tiled_32_cubed_with_j_innermost() -> None:
    scop, _, schedule = tiled("gemm", micro_kernels=False)
    domain = scop.statements[1].domain
    tiles, points = band_of(schedule, "S1", 0), band_of(schedule, "S1", 1)
    assert tiles.band_n_member() == 3 and points.band_n_member() == 3
    assert tiles.band_get_permutable() and points.band_get_permutable()
    # Scaled tile loops over (i, j, k), isl's band order.
    assert same_map(
        member_map(tiles, "S1"),
        "[N] -> { S1[i, k, j] -> [32 * floor(i / 32), 32 * floor(j / 32), 32 * floor(k / 32)] }",
        domain,
    )
    # Unshifted point loops, reordered so that j (stride 1 in C and B, A invariant) is innermost.
    assert same_map(member_map(points, "S1"), "[N] -> { S1[i, k, j] -> [i, k, j] }", domain)
    # Parallel tile loops stay marked as such.
    assert tiles.band_member_get_coincident(0) and tiles.band_member_get_coincident(1)
    assert not tiles.band_member_get_coincident(2)
    assert points.band_member_get_coincident(0) and points.band_member_get_coincident(2)
    assert not points.band_member_get_coincident(1)


def test_contractions_get_tiles_for_the_micro_kernels_by_role() -> None:
    # gemm's S1[i, k, j] (band order i, j, k): many rows i, 64 columns j, 1 KiB of depth k
    # (128 f64, 256 f32), whatever position each has in the band; the column tiles go
    # outermost (they are many: the parallel loop shares them out).
    for element_bytes, depth in ((8, 128), (4, 256)):
        scop, _, schedule = schedule_for("gemm")
        result = tile_schedule(
            schedule, options=Options(), accesses=access_maps(scop), element_bytes=element_bytes
        )
        assert same_map(
            member_map(band_of(result, "S1", 0), "S1"),
            f"[N] -> {{ S1[i, k, j] -> [64 * floor(j / 64), 384 * floor(i / 384), "
            f"{depth} * floor(k / {depth})] }}",
            scop.statements[1].domain,
        )


def syrk_like() -> Scop:
    # for i: for j <= i: for k: C[i][j] += A[i][k] * A[j][k]   (triangular: no micro-kernel)
    return make_scop(
        "N",
        N1,
        [
            ("S0", "[i, j, k] : 0 <= j <= i < N and 0 <= k < N", "[i, j, k] -> [0, i, 0, j, 0, k, 0]",
             ["[i, j, k] -> C[i, j]", "[i, j, k] -> A[i, k]", "[i, j, k] -> A[j, k]"],
             ["[i, j, k] -> C[i, j]"]),
        ],
    )  # fmt: skip


def test_triangular_contractions_and_other_bands_keep_the_default_tiles() -> None:
    for scop in (syrk_like(), filter_3x3()):
        schedule = schedule_scop(scop, compute_deps(scop), options=Options())
        default = tile_schedule(schedule, options=Options(), accesses=access_maps(scop))
        without = tile_schedule(
            schedule, options=Options(micro_kernels=False), accesses=access_maps(scop)
        )
        assert default.plain_is_equal(without)
        assert "32 * floor" in str(default.get_map()) or "mod 32" in str(default.get_map())


def test_tile_sizes_from_options_are_used() -> None:
    scop, _, schedule = tiled("gemm", tile_sizes=(64, 16))
    assert same_map(
        member_map(band_of(schedule, "S1", 0), "S1"),
        "[N] -> { S1[i, k, j] -> [64 * floor(i / 64), 16 * floor(j / 16), 16 * floor(k / 16)] }",
        scop.statements[1].domain,
    )


def test_second_level_tiles_nest() -> None:
    scop, _, schedule = tiled("gemm", tile_second_level=True)
    domain = scop.statements[1].domain
    outer = 32 * SECOND_LEVEL_FACTOR
    assert [band_of(schedule, "S1", d).band_n_member() for d in range(3)] == [3, 3, 3]
    assert same_map(
        member_map(band_of(schedule, "S1", 0), "S1"),
        f"[N] -> {{ S1[i, k, j] -> [{outer} * floor(i / {outer}), {outer} * floor(j / {outer}), "
        f"{outer} * floor(k / {outer})] }}",
        domain,
    )
    assert same_map(
        member_map(band_of(schedule, "S1", 1), "S1"),
        "[N] -> { S1[i, k, j] -> [32 * floor(i / 32), 32 * floor(j / 32), 32 * floor(k / 32)] }",
        domain,
    )


def test_stencil_bands_are_time_tiled() -> None:
    scop, deps, schedule = tiled("jacobi-1d")
    tiles, points = band_of(schedule, "S0", 0), band_of(schedule, "S0", 1)
    assert tiles.band_n_member() == 2 and points.band_n_member() == 2
    assert check_schedule_legal(schedule, deps.validity, context=scop.context)


def test_one_member_bands_are_not_tiled() -> None:
    _, _, untiled = schedule_for("producer-consumer")
    _, _, schedule = tiled("producer-consumer")
    assert schedule.plain_is_equal(untiled)


def test_small_constant_loops_get_one_tile() -> None:
    scop, deps, schedule = tiled("filter-3x3")
    assert check_schedule_legal(schedule, deps.validity, context=scop.context)
    tiles = band_of(schedule, "S0", 0)
    # The 3-long filter loop in the band is tiled by 4: its tile loop runs once (at 0), and
    # codegen drops it; the N-long loops are tiled by 32.
    points = tiles.get_domain().apply(tiles.band_get_partial_schedule_union_map())
    (point_set,) = _sets(points)
    highest = [point_set.dim_max_val(m) for m in range(tiles.band_n_member())]
    assert [v.is_int() and v.to_python() == 0 for v in highest].count(True) == 1
    assert same_map(
        member_map(tiles, "S0"),
        "[N] -> { S0[i, j, a, b] -> [32 * floor(i / 32), 32 * floor(j / 32), 0] }",
        scop.statements[0].domain,
    )


def test_bands_of_small_constant_loops_are_not_tiled() -> None:
    scop = make_scop(
        "N",
        N1,
        [("S0", "[a, b] : 0 <= a, b < 4", "[a, b] -> [0, a, 0, b, 0]", ["[a, b] -> A[a, b]"],
          ["[a, b] -> A[a, b]"])],
    )  # fmt: skip
    schedule = schedule_scop(scop, compute_deps(scop), options=Options())
    assert tile_schedule(schedule, options=Options()).plain_is_equal(schedule)


def test_bands_over_divisibility_guards_are_not_tiled() -> None:
    # floyd-warshall's initialization: statements guarded by (i + j) % 7 == 0; tiled, isl's AST
    # generation ran for minutes
    scop = make_scop(
        "N",
        N1,
        [("S0", "[i, j] : 0 <= i, j < N and (i + j) mod 13 = 0", "[i, j] -> [0, i, 0, j, 0]", [],
          ["[i, j] -> A[i, j]"]),
         ("S1", "[i, j] : 0 <= i, j < N and (i + j) mod 7 = 0", "[i, j] -> [0, i, 0, j, 1]", [],
          ["[i, j] -> A[i, j]"])],
    )  # fmt: skip
    schedule = schedule_scop(scop, compute_deps(scop), options=Options())
    assert tile_schedule(schedule, options=Options()).plain_is_equal(schedule)


def floyd_warshall() -> Scop:
    # for k: for i: for j: P[i][j] = min(P[i][j], P[i][k] + P[k][j])
    return make_scop(
        "N",
        N1,
        [("S0", "[k, i, j] : 0 <= k, i, j < N", "[k, i, j] -> [0, k, 0, i, 0, j, 0]",
          ["[k, i, j] -> P[i, j]", "[k, i, j] -> P[i, k]", "[k, i, j] -> P[k, j]"],
          ["[k, i, j] -> P[i, j]"])],
    )  # fmt: skip


def matrix_vector() -> Scop:
    # for i: for j: y[i] += A[i][j] * x[j]
    return make_scop(
        "N",
        N1,
        [("S0", "[i, j] : 0 <= i, j < N", "[i, j] -> [0, i, 0, j, 0]",
          ["[i, j] -> y[i]", "[i, j] -> A[i, j]", "[i, j] -> x[j]"], ["[i, j] -> y[i]"])],
    )  # fmt: skip


def with_shapes(scop: Scop, n: int) -> dict[str, tuple[int, ...]]:
    """Every array of `scop` as an n-sided square (vectors: n long)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for relation in access_maps(scop):
        shapes[relation.get_tuple_name(isl.dim_type.out)] = (n,) * relation.dim(isl.dim_type.out)
    return shapes


def tiled_with_shapes(scop: Scop, n: int, **options: Any) -> tuple[isl.Schedule, isl.Schedule]:
    """(isl's schedule, the tiled one) with `scop`'s arrays `n` elements on a side."""
    schedule = schedule_scop(scop, compute_deps(scop), options=Options())
    result = tile_schedule(
        schedule,
        options=Options(**options),
        accesses=access_maps(scop),
        array_shapes=with_shapes(scop, n),
    )
    return schedule, result


def tiled_with_validity(
    scop: Scop, side: int | None = None, **options: Any
) -> tuple[isl.Schedule, isl.UnionMap]:
    """(the tiled schedule, the dependences) of `scop`, tiled knowing the dependences (and,
    with `side`, arrays `side` elements on a side)."""
    deps = compute_deps(scop)
    schedule = schedule_scop(scop, deps, options=Options())
    result = tile_schedule(
        schedule,
        options=Options(**options),
        accesses=access_maps(scop),
        validity=deps.validity,
        array_shapes=None if side is None else with_shapes(scop, side),
    )
    return result, deps.validity


def n_tiled_bands(untiled: isl.Schedule, tiled_schedule: isl.Schedule) -> int:
    return len(bands(tiled_schedule)) - len(bands(untiled))


def test_contractions_over_large_arrays_are_tiled() -> None:
    # gemm at 1000: B (8 MB) is reused along i, with all of it touched in between
    untiled, result = tiled_with_shapes(gemm(), 1000)
    assert n_tiled_bands(untiled, result) >= 1


def test_contractions_whose_arrays_fit_in_cache_are_not_tiled_without_micro_kernels() -> None:
    # gemm at 40: the three arrays take 38 KB, which the L2 keeps between uses anyway
    untiled, result = tiled_with_shapes(gemm(), 40, micro_kernels=False)
    assert n_tiled_bands(untiled, result) == 0


def test_contractions_get_their_tiles_for_the_micro_kernels_even_when_they_fit() -> None:
    # the micro-kernels take the contraction's point band; untiled, the band's rows would be
    # jammed as in-order sums instead (a small layer on a host with a 2 MiB L2)
    untiled, result = tiled_with_shapes(gemm(), 40)
    assert n_tiled_bands(untiled, result) == 1


@pytest.mark.parametrize("kernel", [floyd_warshall, matrix_vector])
def test_bands_that_reuse_only_a_row_are_not_tiled(kernel: Any) -> None:
    # floyd-warshall's (i, j) band under k reuses row P[k] (22 KB) along i; matrix-vector
    # reuses x along i. Tiled, LARGE floyd-warshall ran 0.45x gcc's speed, untiled 0.84x.
    untiled, result = tiled_with_shapes(kernel(), 2800)
    assert n_tiled_bands(untiled, result) == 0
    assert result.plain_is_equal(
        tile_schedule(untiled, options=Options(tile=False), accesses=access_maps(kernel()))
    )


def transpose() -> Scop:
    # for i: for j: B[i][j] = A[j][i]
    return make_scop(
        "N",
        N1,
        [("S0", "[i, j] : 0 <= i, j < N", "[i, j] -> [0, i, 0, j, 0]", ["[i, j] -> A[j, i]"],
          ["[i, j] -> B[i, j]"])],
    )  # fmt: skip


def test_column_walks_are_tiled_unless_the_columns_fit_in_l1() -> None:
    # Whichever loop is inner, one array is walked down a column, and reuses each cache line
    # at the next value of the outer loop: 2800 lines in between at 2800, 40 at 40.
    untiled, result = tiled_with_shapes(transpose(), 2800)
    assert n_tiled_bands(untiled, result) == 1
    untiled, result = tiled_with_shapes(transpose(), 40)
    assert n_tiled_bands(untiled, result) == 0


def doitgen() -> Scop:
    # for r: for q: { for p: { S[p] = 0; for s: S[p] += A[r][q][s] * C[s][p] };
    #                 for p: A[r][q][p] = S[p] }
    return make_scop(
        "R, Q, P",
        "R >= 1 and Q >= 1 and P >= 1",
        [("S0", "[r, q, p] : 0 <= r < R and 0 <= q < Q and 0 <= p < P",
          "[r, q, p] -> [0, r, 0, q, 0, p, 0, 0, 0]", [], ["[r, q, p] -> S[p]"]),
         ("S1", "[r, q, p, s] : 0 <= r < R and 0 <= q < Q and 0 <= p < P and 0 <= s < P",
          "[r, q, p, s] -> [0, r, 0, q, 0, p, 1, s, 0]",
          ["[r, q, p, s] -> S[p]", "[r, q, p, s] -> A[r, q, s]", "[r, q, p, s] -> C[s, p]"],
          ["[r, q, p, s] -> S[p]"]),
         ("S2", "[r, q, p] : 0 <= r < R and 0 <= q < Q and 0 <= p < P",
          "[r, q, p] -> [0, r, 0, q, 1, p, 0, 0, 0]", ["[r, q, p] -> S[p]"],
          ["[r, q, p] -> A[r, q, p]"])],
    )  # fmt: skip


def test_bands_whose_parallel_loop_reordering_would_move_inwards_are_tiled_when_parallel() -> None:
    # doitgen's (p, s) band under r and q: p is parallel, s puts C's rows innermost. The data
    # fits in cache (C: 200 KB), but untiled the parallel p loop would fork once per s.
    scop = doitgen()
    shapes = {"S": (160,), "A": (150, 140, 160), "C": (160, 160)}
    schedule = schedule_scop(scop, compute_deps(scop), options=Options())

    def tiles(parallel: bool, micro_kernels: bool = False) -> int:
        result = tile_schedule(
            schedule,
            options=Options(parallel=parallel, micro_kernels=micro_kernels),
            accesses=access_maps(scop),
            array_shapes=shapes,
        )
        return n_tiled_bands(schedule, result)

    assert tiles(parallel=True) == 1
    assert tiles(parallel=False) == 0
    # with micro-kernels, S[p] is a row vector summed again under each (r, q): the band gets
    # the contraction's tiles whether or not it runs in parallel (tests/test_schedule_row_vector)
    assert tiles(parallel=False, micro_kernels=True) == 1


def test_given_tile_sizes_tile_bands_without_reuse() -> None:
    untiled, result = tiled_with_shapes(matrix_vector(), 2800, tile_sizes=(32,))
    assert n_tiled_bands(untiled, result) == 1


def test_bands_over_arrays_of_unknown_size_are_tiled() -> None:
    scop = matrix_vector()
    schedule = schedule_scop(scop, compute_deps(scop), options=Options())
    shapes = {name: (-1,) * len(shape) for name, shape in with_shapes(scop, 2800).items()}
    result = tile_schedule(
        schedule, options=Options(), accesses=access_maps(scop), array_shapes=shapes
    )
    assert n_tiled_bands(schedule, result) == 1


def test_tiling_off_leaves_bands_whole() -> None:
    _, _, schedule = tiled("seidel-2d", tile=False)
    assert [b.band_n_member() for b in bands(schedule)] == [3]


def test_describe_schedule_is_block_yaml() -> None:
    _, _, schedule = tiled("gemm")
    text = describe_schedule(schedule)
    assert text.startswith("domain:")
    assert "\nchild:" in text and "permutable: 1" in text and "S1[i, k, j]" in text
    assert "coincident: [ 1, 1, 0 ]" in text


def test_deepest_skewed_band_measures_skewing() -> None:
    from polyflow.schedule.scheduler import deepest_skewed_band

    def tree(partial: str) -> isl.Schedule:
        domain = isl.UnionSet("[N] -> { S[t, i, j] : 0 <= t, i, j < N }")
        band = isl.MultiUnionPwAff(partial)
        return isl.Schedule.from_domain(domain).insert_partial_schedule(band)

    assert (
        deepest_skewed_band(tree("[N] -> [{ S[t, i, j] -> [(t)] }, { S[t, i, j] -> [(i)] }]")) == 0
    )
    skewed = (
        "[N] -> [{ S[t, i, j] -> [(t)] }, { S[t, i, j] -> [(t + i)] }, { S[t, i, j] -> [(j)] }]"
    )
    assert deepest_skewed_band(tree(skewed)) == 3


# ----- wavefronts


def _marks(schedule: isl.Schedule) -> list[str]:
    found: list[str] = []

    def visit(node: isl.ScheduleNode) -> bool:
        if node.get_type() == isl.schedule_node_type.mark:
            found.append(str(node.mark_get_id().get_name()))
        return True

    schedule.get_root().foreach_descendant_top_down(visit)
    return found


def test_stencil_tiles_become_a_wavefront_of_blocks_with_a_parallel_second_loop() -> None:
    scop, deps, schedule = schedule_for("seidel-2d")
    # wavefronts are on by default; interleave off keeps cubic tiles (test_schedule_interleave)
    options = Options(parallel=True, interleave=False)
    result = tile_schedule(
        schedule, options=options, accesses=access_maps(scop), validity=deps.validity
    )
    # (a wavefront of columns: lowering/wavefront_pipeline.py runs it as a pipeline)
    assert _marks(result) == [WAVEFRONT_COLUMNS_MARK]
    assert check_schedule_legal(result, deps.validity)
    wave, blocks, tiles = (band_of(result, "S0", depth) for depth in range(3))
    assert wave.band_n_member() == 1 and blocks.band_n_member() == 2
    assert tiles.band_n_member() == 3 and wave.band_get_permutable()
    # The wavefront is the sum of the block numbers along the first two loops, over blocks of
    # 1x2x2 tiles of 32 (the time tiles are not coarsened), and the block loop below it
    # carries no dependence; inside a block, tiles go in lexicographic order.
    plain = member_affs(band_of(tiled("seidel-2d")[2], "S0", 0), "S0")
    size = Options().wavefront_block * 32
    domain = scop.statements[0].domain
    wavefront = isl.Map.from_aff(member_affs(wave, "S0")[0]).intersect_domain(domain)
    tile_loops = [isl.Map.from_aff(aff).intersect_domain(domain) for aff in plain[:2]]
    time_block = isl.Map("{ [x] -> [floor(x / 32)] }")
    space_block = isl.Map(f"{{ [x] -> [floor(x / {size})] }}")
    diagonal = tile_loops[0].apply_range(time_block).sum(tile_loops[1].apply_range(space_block))
    assert wavefront.is_equal(diagonal)
    assert carries_dependence(wave, 0, deps.validity)
    assert not carries_dependence(blocks, 0, deps.validity)
    # Sequential builds, --no-wavefront and calls without the dependences keep the plain order.
    for kept in (
        tile_schedule(schedule, options=Options(parallel=False), validity=deps.validity),
        tile_schedule(schedule, options=Options(wavefront=False), validity=deps.validity),
        tile_schedule(schedule, options=options),
    ):
        assert _marks(kept) == []


def test_two_loop_stencils_get_no_wavefront() -> None:
    # jacobi-1d's blocks would hold a few thousand points: less than a fork and join costs.
    scop, deps, schedule = schedule_for("jacobi-1d")
    result = tile_schedule(
        schedule, options=Options(), accesses=access_maps(scop), validity=deps.validity
    )
    assert _marks(result) == []


def test_bands_with_a_parallel_tile_loop_get_no_wavefront() -> None:
    _, deps, schedule = schedule_for("gemm")
    options = Options(parallel=True)
    result = tile_schedule(schedule, options=options, validity=deps.validity)
    assert _marks(result) == []
    assert result.plain_is_equal(tile_schedule(schedule, options=options))


# ----- sinking a strided point loop


def _iterators_on_path(schedule: isl.Schedule, statement: str) -> list[int | None]:
    """For each band on the path to `statement`, the iterator its last member follows."""
    found: list[int | None] = []
    for band in bands(schedule):
        if not any(s.get_tuple_name() == statement for s in _sets(band.get_domain())):
            continue
        last = member_affs(band, statement)[-1]
        used = [
            d
            for d in range(last.dim(isl.dim_type.in_))
            if not last.get_coefficient_val(isl.dim_type.in_, d).is_zero()
        ]
        found.append(used[0] if len(used) == 1 else None)
    return found


def test_a_strided_point_loop_moves_below_the_statements_loops() -> None:
    # isl fuses the column loop j of both updates into the (k, j) band, leaving each statement a
    # row loop i of its own, innermost, that strides down a column of A. Inside each tile, j
    # moves below the i loops: rows are then walked contiguously.
    scop, deps, schedule = schedule_for("gramschmidt-update")
    untiled = tile_schedule(schedule, options=Options(tile=False))
    for statement in ("S1", "S2"):
        assert _iterators_on_path(untiled, statement)[-1] == 2  # i innermost
    result = tile_schedule(
        schedule, options=Options(), accesses=access_maps(scop), validity=deps.validity
    )
    assert check_schedule_legal(result, deps.validity)
    for statement in ("S1", "S2"):
        assert _iterators_on_path(result, statement)[-2:] == [2, 1]  # i, then j innermost
    # Without the dependences to check against, nothing moves.
    kept = tile_schedule(schedule, options=Options(), accesses=access_maps(scop))
    for statement in ("S1", "S2"):
        assert _iterators_on_path(kept, statement)[-1] == 2


@pytest.mark.parametrize(("column", "moves"), [("j", True), ("j + 1", False)])
def test_a_point_loop_moves_only_where_every_dependence_still_goes_forward(
    column: str, moves: bool
) -> None:
    # S0 updates A[i][j] and S1 reads A[i][column]; both under a permutable (t, j) band, each
    # with its own row loop i. Moving j below the row loops runs all of a row's S0 before its
    # S1: fine when S1 reads the column S0 just wrote, wrong when it reads the next one (S1 at
    # column j must see A[i][j + 1] before S0 at column j + 1 updates it).
    from polyflow.schedule.tiling import _AccessStrides, _sink_strided_member

    scop = make_scop(
        "N",
        "N >= 2",
        [
            ("S0", "[t, j, i] : 0 <= t, j, i < N", "[t, j, i] -> [0, t, 0, j, 0, i, 0]",
             ["[t, j, i] -> A[i, j]"], ["[t, j, i] -> A[i, j]"]),
            ("S1", "[t, j, i] : 0 <= t, i < N and 0 <= j < N - 1",
             "[t, j, i] -> [0, t, 0, j, 1, i, 0]",
             [f"[t, j, i] -> A[i, {column}]"], ["[t, j, i] -> B[i, j]"]),
        ],
    )  # fmt: skip
    deps = compute_deps(scop)
    both = "S0[t, j, i] -> [({0})]; S1[t, j, i] -> [({0})]"
    tree = isl.Schedule(
        "\n".join(
            [
                'domain: "[N] -> { S0[t, j, i] : 0 <= t, j, i < N; '
                'S1[t, j, i] : 0 <= t, i < N and 0 <= j < N - 1 }"',
                "child:",
                f'  schedule: "[N] -> [{{ {both.format("t")} }}, {{ {both.format("j")} }}]"',
                "  permutable: 1",
                "  child:",
                "    sequence:",
                '    - filter: "[N] -> { S0[t, j, i] }"',
                "      child:",
                '        schedule: "[N] -> [{ S0[t, j, i] -> [(i)] }]"',
                '    - filter: "[N] -> { S1[t, j, i] }"',
                "      child:",
                '        schedule: "[N] -> [{ S1[t, j, i] -> [(i)] }]"',
            ]
        )
    )
    assert check_schedule_legal(tree, deps.validity)
    band = tree.get_root().child(0)
    result = _sink_strided_member(band, _AccessStrides(access_maps(scop)), deps.validity)
    schedule = result.get_schedule()
    assert check_schedule_legal(schedule, deps.validity)
    if moves:
        for statement in ("S0", "S1"):
            assert _iterators_on_path(schedule, statement) == [0, 2, 1]  # t, i, then j
    else:
        assert schedule.plain_is_equal(tree)


# ----- loops isl shows independent


def test_ast_loops_are_marked_independent_from_the_dependences() -> None:
    from polyflow.poly import isl_helpers as ih

    scop, deps, _ = schedule_for("jacobi-1d")
    tree = ih.build_ast(scop.context, original_schedule(scop), dependences=deps.validity)
    time_loop = tree
    assert isinstance(time_loop, ih.AstFor) and not time_loop.independent
    assert isinstance(time_loop.body, ih.AstBlock)
    space_loops = time_loop.body.children
    assert all(isinstance(loop, ih.AstFor) and loop.independent for loop in space_loops)
    # Without the dependences, nothing is marked.
    plain = ih.build_ast(scop.context, original_schedule(scop))
    assert isinstance(plain, ih.AstFor) and isinstance(plain.body, ih.AstBlock)
    assert not any(isinstance(loop, ih.AstFor) and loop.independent for loop in plain.body.children)
