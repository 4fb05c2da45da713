"""The isl operations of the polyhedral layer, by name: sets, maps and schedules built from
text over named dimensions, schedule trees, dependence questions, and the isl AST read into plain
Python values. Everything else in polyflow/schedule talks to islpy through this module.

Naming: a statement `S3` nested in `k` loops lives in the space `S3[i0, ..., i<k-1>]` (`i0` the
outermost loop), parameters are `P0, P1, ...`, arrays `A0, A1, ...`; schedule ranges are
anonymous. All objects live in islpy's default context (isl objects of two contexts never mix).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import islpy as isl

from .budget import isl_budget, step_budget

# ---------------------------------------------------------------------------------------------
# Names and text


def iterator_names(depth: int) -> tuple[str, ...]:
    """The iterator names of a statement nested in `depth` loops: `i0` (outermost) ... ."""
    return tuple(f"i{k}" for k in range(depth))


def _params(params: Sequence[str]) -> str:
    return f"[{', '.join(params)}] -> "


def _tuple(name: str, dims: Sequence[str]) -> str:
    return f"{name}[{', '.join(dims)}]"


def params_universe(params: Sequence[str]) -> isl.Set:
    """`[P0, ...] -> { : }`: nothing known of the parameters."""
    return isl.Set(_params(params) + "{ : }")


def statement_set(
    params: Sequence[str], statement: str, depth: int, formula: str | None = None
) -> isl.Set:
    """`{ S[i0, ...] : formula }` (the whole space when `formula` is None). `formula` is isl
    text over the iterators and parameters: affine (in)equalities, `and`/`or`/`not`, `floor(e/d)`,
    `e mod d`, `min`/`max`."""
    where = f" : {formula}" if formula else ""
    text = f"{_params(params)}{{ {_tuple(statement, iterator_names(depth))}{where} }}"
    return isl.Set(text)


def access_relation(
    params: Sequence[str], statement: str, depth: int, array: str, subscripts: Sequence[str]
) -> isl.Map:
    """`{ S[i0, ...] -> A[subscripts] }` (subscripts as isl text over iterators and parameters)."""
    lhs = _tuple(statement, iterator_names(depth))
    rhs = f"{array}[{', '.join(f'({s})' for s in subscripts)}]"
    return isl.Map(f"{_params(params)}{{ {lhs} -> {rhs} }}")


def schedule_relation(
    params: Sequence[str], statement: str, depth: int, entries: Sequence[int | str]
) -> isl.Map:
    """`{ S[i0, ...] -> [entries] }`: one statement's row of a (2d+1)-style schedule."""
    lhs = _tuple(statement, iterator_names(depth))
    rhs = f"[{', '.join(str(e) for e in entries)}]"
    return isl.Map(f"{_params(params)}{{ {lhs} -> {rhs} }}")


def union_set(sets: Iterable[isl.Set], params: Sequence[str]) -> isl.UnionSet:
    """The union of `sets` (empty, over `params`, when there are none)."""
    out = isl.UnionSet.empty(params_universe(params).get_space())
    for s in sets:
        out = out.union(isl.UnionSet.from_set(s))
    return out


def union_map(maps: Iterable[isl.Map], params: Sequence[str]) -> isl.UnionMap:
    """The union of `maps` (empty, over `params`, when there are none)."""
    out = isl.UnionMap.empty(params_universe(params).get_space())
    for m in maps:
        out = out.union(isl.UnionMap.from_map(m))
    return out


def maps_of(umap: isl.UnionMap) -> list[isl.Map]:
    """The maps of a union map, one per pair of spaces."""
    out: list[isl.Map] = []
    umap.foreach_map(out.append)
    return out


def sets_of(uset: isl.UnionSet) -> list[isl.Set]:
    """The sets of a union set, one per space."""
    out: list[isl.Set] = []
    uset.foreach_set(out.append)
    return out


def tuple_name(obj: isl.Set | isl.Map, *, range_: bool = False) -> str:
    """The tuple name of a set, or of a map's domain (`range_`: of its range)."""
    if isinstance(obj, isl.Set):
        return str(obj.get_tuple_name())
    kind = isl.dim_type.out if range_ else isl.dim_type.in_
    return str(obj.get_tuple_name(kind))


def fixed_output(relation: isl.Map, position: int) -> int | None:
    """The constant that output dimension `position` of `relation` always takes, or None."""
    val = relation.plain_get_val_if_fixed(isl.dim_type.out, position)
    if val.is_nan():
        return None
    return int(val.to_python())


# ---------------------------------------------------------------------------------------------
# Schedules


def padded_schedule(schedule: isl.UnionMap) -> isl.UnionMap:
    """`schedule` with every statement's range padded with zeros to one common width, so that
    all statement instances are ordered in one (anonymous) time space."""
    maps = maps_of(schedule)
    width = max((m.dim(isl.dim_type.out) for m in maps), default=0)
    out = isl.UnionMap.empty(schedule.get_space())
    for m in maps:
        n = m.dim(isl.dim_type.out)
        m = m.add_dims(isl.dim_type.out, width - n)
        for pos in range(n, width):
            m = m.fix_val(isl.dim_type.out, pos, 0)
        out = out.union(isl.UnionMap.from_map(m.reset_tuple_id(isl.dim_type.out)))
    return out


def schedule_map(schedule: isl.Schedule | isl.UnionMap) -> isl.UnionMap:
    """A schedule as one padded union map (a schedule tree is flattened)."""
    if isinstance(schedule, isl.Schedule):
        schedule = schedule.get_map()
    return padded_schedule(schedule)


def schedule_tree(domain: isl.UnionSet, schedule: isl.UnionMap) -> isl.Schedule:
    """The schedule tree of a (2d+1) schedule: a sequence node where statements split at a
    constant dimension, a one-member band for each loop dimension they share. `domain` gives
    each statement's instances; every statement of `domain` must have a row in `schedule`."""
    domains = {tuple_name(s): s for s in sets_of(domain)}
    # a statement that never runs (`if (i > i)`) has no set in `domain`: no row either
    rows = {
        tuple_name(m): m
        for m in maps_of(padded_schedule(schedule))
        if tuple_name(m) in domains
    }
    if not rows:
        return isl.Schedule.from_domain(domain)
    width = max((m.dim(isl.dim_type.out) for m in rows.values()), default=0)
    return atomic_loops(_subtree(sorted(rows), 0, width, rows, domains, domain))


def atomic_loops(schedule: isl.Schedule) -> isl.Schedule:
    """`schedule` with every band member generated as one loop ("atomic": isl does not split
    it into several loops to avoid guards), which keeps the source's loop structure."""

    def atomic(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if node.get_type() == isl.schedule_node_type.band:
            for k in range(node.band_n_member()):
                node = node.band_member_set_ast_loop_type(k, isl.ast_loop_type.atomic)
        return node

    return schedule.map_schedule_node_bottom_up(atomic)


def _subtree(
    names: list[str],
    position: int,
    width: int,
    rows: dict[str, isl.Map],
    domains: dict[str, isl.Set],
    domain: isl.UnionSet,
) -> isl.Schedule:
    if position >= width:
        return isl.Schedule.from_domain(_domain_of(names, domains, domain))
    fixed = {name: fixed_output(rows[name], position) for name in names}
    if all(value is not None for value in fixed.values()):
        groups: dict[int, list[str]] = {}
        for name in names:
            value = fixed[name]
            assert value is not None
            groups.setdefault(value, []).append(name)
        parts = [
            _subtree(groups[key], position + 1, width, rows, domains, domain)
            for key in sorted(groups)
        ]
        out = parts[0]
        for part in parts[1:]:
            out = out.sequence(part)
        return out
    # A loop dimension: the statements here share that loop (their constant prefixes agree).
    child = _subtree(names, position + 1, width, rows, domains, domain)
    projected = union_map(
        (_output(rows[name], position) for name in names),
        [],
    )
    band = isl.MultiUnionPwAff.from_union_map(projected)
    return child.insert_partial_schedule(band)


def _output(relation: isl.Map, position: int) -> isl.Map:
    n = relation.dim(isl.dim_type.out)
    out = relation.project_out(isl.dim_type.out, position + 1, n - position - 1)
    return out.project_out(isl.dim_type.out, 0, position)


def _domain_of(names: list[str], domains: dict[str, isl.Set], domain: isl.UnionSet) -> isl.UnionSet:
    out = isl.UnionSet.empty(domain.get_space())
    for name in names:
        out = out.union(isl.UnionSet.from_set(domains[name]))
    return out


def band_count(schedule: isl.Schedule) -> int:
    """How many band nodes a schedule tree has."""
    count = 0

    def visit(node: isl.ScheduleNode) -> bool:
        nonlocal count
        if node.get_type() == isl.schedule_node_type.band:
            count += 1
        return True

    schedule.get_root().foreach_descendant_top_down(visit)
    return count


# ---------------------------------------------------------------------------------------------
# Dependence questions


def flow(
    sink: isl.UnionMap,
    schedule: isl.UnionMap | isl.Schedule,
    *,
    must_source: isl.UnionMap | None = None,
    may_source: isl.UnionMap | None = None,
    kill: isl.UnionMap | None = None,
) -> tuple[isl.UnionMap, isl.UnionMap]:
    """isl's dataflow analysis: (dependences source → sink instance, sink accesses with no
    source). A source counts when it runs before the sink in `schedule` and no must-source or
    kill runs in between (`isl_union_access_info_compute_flow`). A schedule tree is the faster
    form: isl splits the problem at its sequence nodes (half the time on coupled subscripts)."""
    info = isl.UnionAccessInfo.from_sink(sink)
    if must_source is not None:
        info = info.set_must_source(must_source)
    if may_source is not None:
        info = info.set_may_source(may_source)
    if kill is not None:
        info = info.set_kill(kill)
    if isinstance(schedule, isl.Schedule):
        info = info.set_schedule(schedule)
    else:
        info = info.set_schedule_map(schedule)
    result = info.compute_flow()
    return result.get_may_dependence(), result.get_may_no_source()


def time_deltas(deps: isl.UnionMap, schedule: isl.UnionMap) -> isl.Set | None:
    """The differences time(target) - time(source) of the dependences `deps` under the padded
    schedule `schedule` (None when there are no dependences)."""
    timed = deps.apply_domain(schedule).apply_range(schedule)
    if timed.is_empty():
        return None
    deltas = sets_of(timed.deltas())
    out = deltas[0]
    for d in deltas[1:]:
        out = out.union(d)
    return out


def carried_at(deltas: isl.Set, dim: int) -> isl.Set:
    """The deltas that are zero before `dim` and nonzero at `dim` (the dependences `dim`
    carries, assuming the earlier dimensions are loops run in order)."""
    n = deltas.dim(isl.dim_type.set)
    names = [f"d{k}" for k in range(n)]
    zeros = [f"d{k} = 0" for k in range(dim)]
    nonzero = f"(d{dim} >= 1 or d{dim} <= -1)"
    formula = " and ".join([*zeros, nonzero])
    space = isl.Set(f"{{ [{', '.join(names)}] : {formula} }}")
    return deltas.intersect(space.align_params(deltas.get_space()))


def equal_before(deltas: isl.Set, dim: int) -> isl.Set:
    """The deltas that are zero on every dimension before `dim`."""
    n = deltas.dim(isl.dim_type.set)
    names = [f"d{k}" for k in range(n)]
    formula = " and ".join(f"d{k} = 0" for k in range(dim)) or "true"
    space = isl.Set(f"{{ [{', '.join(names)}] : {formula} }}")
    return deltas.intersect(space.align_params(deltas.get_space()))


def min_at(deltas: isl.Set, dim: int) -> int | None:
    """The smallest value of delta dimension `dim` over all parameter values (None: unbounded
    below)."""
    n = deltas.dim(isl.dim_type.set)
    projected = deltas.project_out(isl.dim_type.set, dim + 1, n - dim - 1).project_out(
        isl.dim_type.set, 0, dim
    )
    projected = projected.project_out(isl.dim_type.param, 0, projected.dim(isl.dim_type.param))
    if projected.is_empty():
        return None
    val = projected.dim_min_val(0)
    if val.is_infty() or val.is_neginfty() or val.is_nan():
        return None
    return int(val.to_python())


# ---------------------------------------------------------------------------------------------
# The isl AST, read into plain values


@dataclass(frozen=True)
class Var:
    """An AST iterator (`c0`...) or a parameter (`P0`...)."""

    name: str


@dataclass(frozen=True)
class Const:
    value: int


@dataclass(frozen=True)
class Add:
    terms: tuple[Expr, ...]


@dataclass(frozen=True)
class Mul:
    """`factor * expr` (isl AST products always have a constant side)."""

    factor: int
    expr: Expr


@dataclass(frozen=True)
class FloorDiv:
    expr: Expr
    divisor: int


@dataclass(frozen=True)
class Mod:
    """The remainder of `expr` by `divisor`: isl's `pdiv_r` has a non-negative dividend and its
    `zdiv_r` is only compared with zero, so the floor-based `mod` is exact for both."""

    expr: Expr
    divisor: int


@dataclass(frozen=True)
class Min:
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Max:
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Select:
    """`cond ? then : else_` (isl writes the value of a degenerate loop's iterator so, when it
    is piecewise)."""

    cond: Cond
    then: Expr
    else_: Expr


Expr = Var | Const | Add | Mul | FloorDiv | Mod | Min | Max | Select
Relation = Literal["<=", "<", ">=", ">", "=="]


@dataclass(frozen=True)
class Compare:
    relation: Relation
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True)
class And:
    args: tuple[Cond, ...]


@dataclass(frozen=True)
class Or:
    args: tuple[Cond, ...]


Cond = Compare | And | Or


@dataclass(frozen=True)
class AstFor:
    """`for (iterator = init; cond; iterator += step) body`."""

    iterator: str
    init: Expr
    cond: Cond
    step: int
    body: AstNode
    # isl showed that no dependence is carried by this loop (see `build_ast`).
    independent: bool = False


@dataclass(frozen=True)
class AstIf:
    cond: Cond
    then: AstNode
    else_: AstNode | None


@dataclass(frozen=True)
class AstBlock:
    children: tuple[AstNode, ...]


@dataclass(frozen=True)
class AstUser:
    """One statement instance set: `statement(args)`, the statement's original iterators as
    expressions of the AST iterators and the parameters."""

    statement: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class AstMark:
    mark: str
    child: AstNode


AstNode = AstFor | AstIf | AstBlock | AstUser | AstMark


class AstUnsupported(Exception):
    """An isl AST construct with no affine equivalent (e.g. `select`, a product of unknowns)."""


# isl operations an AST build may take by default (budget.py; isl.Error past it; codegen then
# keeps the source order). Every PolyBench kernel's AST needs under 1 000 000. A count, not a
# clock, so the same input always gets the same answer; isl counts sparsely in some of its AST
# work, so it bounds the time only loosely (a tiled floyd-warshall initialization spent 51 s on
# its first million).
AST_MAX_OPERATIONS = step_budget("ast")


def build_ast(
    context: isl.Set,
    schedule: isl.Schedule,
    *,
    max_operations: int = AST_MAX_OPERATIONS,
    dependences: isl.UnionMap | None = None,
    independence_operations: int | None = None,
) -> AstNode:
    """isl's AST for `schedule` (under what `context` says of the parameters), as plain values;
    `BudgetExhausted` when isl needs more than `max_operations` operations (0: unbounded). With
    `dependences` (all of them, between instances of `schedule`'s domain), each loop that
    carries none of them is marked `independent` (each check under `independence_operations`,
    default `INDEPENDENCE_MAX_OPERATIONS`)."""
    ctx = context.get_ctx()
    with isl_budget(ctx, "ast", max_operations):
        build = isl.AstBuild.from_context(context)
        if dependences is not None:
            checker = _IndependenceCheck(
                dependences,
                INDEPENDENCE_MAX_OPERATIONS
                if independence_operations is None
                else independence_operations,
            )

            def annotate(loop_build: isl.AstBuild) -> isl.Id:
                # An exception must not cross back into isl (it corrupts its state): any
                # failure counts as carrying a dependence.
                try:
                    independent = checker.carries_none(loop_build.get_schedule())
                except Exception:
                    independent = False
                return isl.Id(_INDEPENDENT if independent else _CARRIES, context=ctx)

            build, _lifetime = build.set_before_each_for(annotate)
            return _node(build.node_from_schedule(schedule))
        return _node(build.node_from_schedule(schedule))


_INDEPENDENT = "independent"
_CARRIES = "carries"


class _IndependenceCheck:
    """Which loops of an AST being built carry none of `dependences`. The checks run in a
    context of their own, so that their isl operations neither count against nor exhaust the
    AST build's budget; each check has `INDEPENDENCE_MAX_OPERATIONS` (past it: it carries)."""

    def __init__(self, dependences: isl.UnionMap, max_operations: int) -> None:
        self._ctx = isl.Context()
        self._ctx.set_max_operations(max_operations)
        self._dependences = isl.UnionMap.read_from_str(self._ctx, str(dependences))

    def carries_none(self, loop_schedule: isl.UnionMap) -> bool:
        """Whether the loop whose build has `loop_schedule` (domain instances → outer loops and
        this one, as the AST generator sees them) runs any two dependent instances with equal
        outer loop values in the same iteration."""
        self._ctx.reset_operations()
        schedule = isl.UnionMap.read_from_str(self._ctx, str(loop_schedule))
        maps = maps_of(schedule)
        if not maps:
            return True
        return not carries_at(self._dependences, schedule, maps[0].dim(isl.dim_type.out) - 1)


def carries_at(dependences: isl.UnionMap, schedule: isl.UnionMap, dim: int) -> bool:
    """Whether some dependence between instances that `schedule` (into one time space) maps
    relates two with equal values in its dimensions before `dim` and different ones at `dim`.

    Asked as one emptiness question per dependence relation, over source, target and both
    times together ({[s -> t] -> [time(s) -> time(t)]}), never by projecting instances away
    (`deltas`): under a tiled or skewed schedule isl's projections are its most expensive work
    (fdtd-2d's AST had 44 such loop checks taking 8 s; asked this way, 0.1 s)."""
    times: dict[str, isl.Map] = {}
    for time_map in maps_of(schedule):
        name = tuple_name(time_map)
        if not time_map.has_tuple_name(isl.dim_type.in_) or name in times:
            return _carries_at_by_deltas(dependences, schedule, dim)  # unnamed or split
        times[name] = time_map.flatten_range()
    if not times:
        return False
    n = next(iter(times.values())).dim(isl.dim_type.out)
    source = [f"s{k}" for k in range(n)]
    target = [f"t{k}" for k in range(n)]
    same_before = [f"s{k} = t{k}" for k in range(dim)]
    differ = f"(s{dim} < t{dim} or s{dim} > t{dim})"
    carried = isl.Map.read_from_str(
        dependences.get_ctx(),
        f"{{ [{', '.join(source)}] -> [{', '.join(target)}] : "
        f"{' and '.join([*same_before, differ])} }}",
    ).wrap()
    for dependence in maps_of(dependences):
        before = times.get(tuple_name(dependence))
        after = times.get(tuple_name(dependence, range_=True))
        if before is None or after is None:  # not both among the scheduled instances
            continue
        pairs = before.product(after)  # [s -> t] -> [time(s) -> time(t)]
        pairs = pairs.intersect_domain(dependence.wrap().align_params(pairs.get_space()))
        if not pairs.intersect_range(carried.align_params(pairs.get_space())).is_empty():
            return True
    return False


def _carries_at_by_deltas(dependences: isl.UnionMap, schedule: isl.UnionMap, dim: int) -> bool:
    instances = schedule.domain()
    deps = dependences.intersect_domain(instances).intersect_range(instances)
    if deps.is_empty():
        return False
    for deltas in sets_of(deps.apply_domain(schedule).apply_range(schedule).deltas()):
        for pos in range(dim):
            deltas = deltas.fix_dim_si(pos, 0)
        if not deltas.is_subset(deltas.fix_dim_si(dim, 0)):
            return True
    return False


def band_time(node: isl.ScheduleNode) -> isl.UnionMap:
    """Each instance under band `node` → its outer loops' values followed by the band's."""
    return node.get_prefix_schedule_union_map().flat_range_product(
        node.band_get_partial_schedule_union_map()
    )


def carries_dependence(node: isl.ScheduleNode, member: int, validity: isl.UnionMap) -> bool:
    """Whether some dependence of `validity` between instances under band `node` has the same
    values in every outer loop and the band's members before `member`, and different ones in
    `member`."""
    return carries_at(validity, band_time(node), node.get_schedule_depth() + member)


# isl operations one loop's independence check may take by default (see `_IndependenceCheck`).
INDEPENDENCE_MAX_OPERATIONS = step_budget("independence")


@dataclass(frozen=True)
class Extent:
    """The lexicographically first and last points of a parametric set, each as expressions of
    its parameters (one per dimension), valid where `nonempty` holds (elsewhere the set is
    empty, and `low` is all 0 and `high` all -1)."""

    nonempty: Cond | bool
    low: tuple[Expr, ...]
    high: tuple[Expr, ...]


def lexicographic_extent(points: isl.Set) -> Extent:
    """The exact first and last points of `points` in lexicographic order, over its parameters
    (isl's `lexmin`/`lexmax`), as AST expressions; `AstUnsupported` where the set is unbounded
    or they need more than the AST expressions can say."""
    if not points.is_bounded():
        raise AstUnsupported("the set is unbounded")
    low, high = points.lexmin_pw_multi_aff(), points.lexmax_pw_multi_aff()
    where = high.domain().coalesce()
    rest = where.complement()
    build = isl.AstBuild.from_context(isl.Set.universe(where.get_space()))

    def total(pa: isl.PwAff, outside: int) -> Expr:
        if not rest.is_empty():
            filler = isl.PwAff.val_on_domain(rest, isl.Val.int_from_si(pa.get_ctx(), outside))
            pa = pa.union_add(filler)
        return _expr(build.expr_from_pw_aff(pa.coalesce()))

    nonempty: Cond | bool
    if where.is_empty():
        nonempty = False
    elif rest.is_empty():
        nonempty = True
    else:
        nonempty = _cond(build.expr_from_set(where))
    dims = range(points.dim(isl.dim_type.set))
    return Extent(
        nonempty,
        tuple(total(low.get_pw_aff(k), 0) for k in dims),
        tuple(total(high.get_pw_aff(k), -1) for k in dims),
    )


def ast_text(context: isl.Set, schedule: isl.Schedule) -> str:
    """isl's AST for `schedule` printed as C (for reports and tests)."""
    build = isl.AstBuild.from_context(context)
    return str(build.node_from_schedule(schedule).to_C_str())


# (islpy's type stubs lack these members, which the module has: looked up by name)
_FOR_NODE = isl.ast_node_type["for_"]
_IF_NODE = isl.ast_node_type["if_"]
_AND_OPS = (isl.ast_expr_op_type["and_"], isl.ast_expr_op_type.and_then)
_OR_OPS = (isl.ast_expr_op_type["or_"], isl.ast_expr_op_type.or_else)


def _node(node: isl.AstNode) -> AstNode:
    kind = node.get_type()
    types = isl.ast_node_type
    if kind == _FOR_NODE:
        iterator = _expr(node.for_get_iterator())
        assert isinstance(iterator, Var)
        step = _expr(node.for_get_inc())
        if not isinstance(step, Const) or step.value <= 0:
            raise AstUnsupported(f"loop step {step} is not a positive constant")
        try:
            annotation = node.get_annotation()
        except isl.Error:  # no annotation: built without dependences
            annotation = None
        return AstFor(
            iterator.name,
            _expr(node.for_get_init()),
            _cond(node.for_get_cond()),
            step.value,
            _node(node.for_get_body()),
            independent=annotation is not None and annotation.get_name() == _INDEPENDENT,
        )
    if kind == _IF_NODE:
        else_ = _node(node.if_get_else_node()) if node.if_has_else_node() else None
        return AstIf(_cond(node.if_get_cond()), _node(node.if_get_then_node()), else_)
    if kind == types.block:
        children = node.block_get_children()
        return AstBlock(tuple(_node(children.get_at(k)) for k in range(children.n_ast_node())))
    if kind == types.mark:
        return AstMark(str(node.mark_get_id().get_name()), _node(node.mark_get_node()))
    if kind == types.user:
        call = node.user_get_expr()
        n = call.get_op_n_arg()
        name = call.get_op_arg(0).get_id().get_name()
        return AstUser(str(name), tuple(_expr(call.get_op_arg(k)) for k in range(1, n)))
    raise AstUnsupported(f"AST node of type {kind}")


_COMPARE: dict[object, Relation] = {
    isl.ast_expr_op_type.le: "<=",
    isl.ast_expr_op_type.lt: "<",
    isl.ast_expr_op_type.ge: ">=",
    isl.ast_expr_op_type.gt: ">",
    isl.ast_expr_op_type.eq: "==",
}


def _args(expr: isl.AstExpr) -> list[isl.AstExpr]:
    return [expr.get_op_arg(k) for k in range(expr.get_op_n_arg())]


def _cond(expr: isl.AstExpr) -> Cond:
    if expr.get_type() != isl.ast_expr_type.op:
        raise AstUnsupported(f"condition {expr.to_C_str()}")
    op = expr.get_op_type()
    if op in _COMPARE:
        lhs, rhs = _args(expr)
        return Compare(_COMPARE[op], _expr(lhs), _expr(rhs))
    if op in _AND_OPS:
        return And(tuple(_cond(a) for a in _args(expr)))
    if op in _OR_OPS:
        return Or(tuple(_cond(a) for a in _args(expr)))
    raise AstUnsupported(f"condition {expr.to_C_str()}")


def _expr(expr: isl.AstExpr) -> Expr:
    kind = expr.get_type()
    if kind == isl.ast_expr_type.id:
        return Var(str(expr.get_id().get_name()))
    if kind == isl.ast_expr_type.int:
        return Const(int(expr.get_val().to_python()))
    if kind != isl.ast_expr_type.op:
        raise AstUnsupported(f"expression {expr.to_C_str()}")
    op = expr.get_op_type()
    ops = isl.ast_expr_op_type
    if op in (ops.select, ops.cond):
        return _select(expr)
    args = [_expr(a) for a in _args(expr)]
    if op == ops.add:
        return Add(tuple(args))
    if op == ops.sub:
        return Add((args[0], Mul(-1, args[1])))
    if op == ops.minus:
        return Mul(-1, args[0])
    if op == ops.mul:
        if isinstance(args[0], Const):
            return Mul(args[0].value, args[1])
        if isinstance(args[1], Const):
            return Mul(args[1].value, args[0])
        raise AstUnsupported(f"product of two unknowns: {expr.to_C_str()}")
    if op in (ops.fdiv_q, ops.pdiv_q, ops.div, ops.pdiv_r, ops.zdiv_r):
        # `div` is exact division, `pdiv_q` has a non-negative dividend: floor division is
        # exact for all three; `pdiv_r`/`zdiv_r` are remainders compared with zero.
        divisor = args[1]
        if not isinstance(divisor, Const) or divisor.value <= 0:
            raise AstUnsupported(f"division by a non-constant: {expr.to_C_str()}")
        if op in (ops.pdiv_r, ops.zdiv_r):
            return Mod(args[0], divisor.value)
        return FloorDiv(args[0], divisor.value)
    if op == ops.min:
        return Min(tuple(args))
    if op == ops.max:
        return Max(tuple(args))
    raise AstUnsupported(f"expression {expr.to_C_str()}")


def _select(expr: isl.AstExpr) -> Select:
    cond, then, else_ = _args(expr)
    return Select(_cond(cond), _expr(then), _expr(else_))
