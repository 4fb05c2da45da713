"""Affine MLIR → the polyhedral model: each maximal fully affine stretch of a function becomes a
`Scop` (statements with domains, access relations and their (2d+1) source order, isl side, pure
data) and a `ScopRegion` (which ops form each statement, which `ir.Value` each parameter and
array is, MLIR side, read by codegen.py).

How (Polygeist's statement formation, see CONTRACT.md):
1. Regions (regions.py): in every block, a maximal run of consecutive fully affine ops is a
   candidate; an op with unknown effects ends it and is reported with its reason; a run without
   loops is left alone.
2. Demotion to memory (scratch.py, the pass `schedule-demote-to-memory`), so that the model has
   only loads and stores: loop-carried values, results of `affine.if` and values shared by
   statements move to scratchpads or to the array element a reduction ends in. `find_scops`
   runs it first.
3. Statements: each `affine.store` with its backward slice in the region (pure ops are cloned
   per statement, loads stay next to their store). Domains come from the enclosing `affine.for`
   bounds (max/min maps, floordiv/mod, steps) and `affine.if` sets, read by isl; parameters are
   the index values from outside the region (named `P0`...), arrays the memrefs (`A0`...).

Nothing is changed but by step 2, and step 2 keeps the program's meaning. An exception
(a bug) may leave a function half demoted: callers work on a copy (schedule/__init__.py does).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

import islpy as isl
from mlir import ir
from mlir.dialects import func

from polyflow.ir.locations import statement_name
from polyflow.ir.names import symbol_name
from polyflow.poly import isl_helpers as ih

from .regions import (
    LeftOut,
    Namer,
    NotModeled,
    Run,
    block_owner,
    body_ops,
    defining_op,
    find_runs,
    if_condition,
    is_pure,
    left_out_of,
    line_column,
    loop_bounds,
    precheck,
)
from .scratch import Home, demote_to_memory

# ---------------------------------------------------------------------------------------------
# The model (isl side: pure data)


@dataclass(frozen=True)
class Access:
    """One array access of a statement: `{ S3[i, j] -> A0[i, j + 1] }` within S3's domain."""

    stmt: str
    array: str
    kind: Literal["read", "write"]
    relation: isl.Map


@dataclass(frozen=True)
class Statement:
    """A store and the computation it stores, run once per point of `domain`."""

    name: str
    domain: isl.Set
    accesses: tuple[Access, ...]
    line: int = 0
    column: int = 0

    @property
    def depth(self) -> int:
        """How many loops enclose the statement."""
        return int(self.domain.dim(isl.dim_type.set))


@dataclass(frozen=True)
class Scop:
    """A static control part: statements, arrays and their original (2d+1) order."""

    function: str
    params: tuple[str, ...]
    statements: tuple[Statement, ...]
    arrays: dict[str, tuple[int, ...]]
    initial_schedule: isl.UnionMap
    context: isl.Set

    @property
    def domain(self) -> isl.UnionSet:
        """Every statement instance."""
        return ih.union_set((s.domain for s in self.statements), self.params)

    def accesses(self, kind: Literal["read", "write"]) -> isl.UnionMap:
        """All reads (or all writes) as one relation from statement instances to elements."""
        return ih.union_map(
            (a.relation for s in self.statements for a in s.accesses if a.kind == kind),
            self.params,
        )

    def statement(self, name: str) -> Statement:
        """The statement called `name`."""
        for s in self.statements:
            if s.name == name:
                return s
        raise KeyError(name)


def initial_schedule_tree(scop: Scop) -> isl.Schedule:
    """The source order of `scop` as a schedule tree (sequences and one-member bands, every
    loop generated as one loop), ready for `codegen.generate`."""
    return ih.schedule_tree(scop.domain, scop.initial_schedule)


# ---------------------------------------------------------------------------------------------
# The MLIR side


@dataclass(eq=False)
class StatementOps:
    """The ops of one statement: its backward slice in dependence order, the store last; the
    IVs of the loops around it (outermost first; the domain's `i0, i1...`) and those loops."""

    name: str
    ops: tuple[ir.Operation, ...]
    ivs: tuple[ir.Value, ...]
    loops: tuple[ir.Operation, ...]

    @property
    def store(self) -> ir.Operation:
        return self.ops[-1]


@dataclass(eq=False)
class ScopRegion:
    """Where a Scop lives: the top-level ops of `block` it replaces (in order; pure ops kept in
    between are not among them), the value of each parameter and array, each statement's ops."""

    function: ir.Operation
    block: ir.Block
    ops: tuple[ir.Operation, ...]
    params: dict[str, ir.Value]
    arrays: dict[str, ir.Value]
    statements: dict[str, StatementOps]


@dataclass
class Extraction:
    """What `find_scops` found: the scops, and what was left out of them (with reasons)."""

    scops: list[tuple[Scop, ScopRegion]] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# 3. Statements, domains, accesses


@dataclass
class _Site:
    """A store and where it sits: loops and conditions around it (inside the region) and its
    (2d+1) schedule row."""

    store: ir.Operation
    loops: list[ir.Operation]
    conds: list[tuple[ir.Operation, bool]]
    row: list[int | str]


def _sites(ops: Sequence[ir.Operation]) -> list[_Site]:
    out: list[_Site] = []

    def visit(
        ops: Sequence[ir.Operation],
        loops: list[ir.Operation],
        conds: list[tuple[ir.Operation, bool]],
        row: list[int | str],
        counter: Iterator[int],
    ) -> None:
        for op in ops:
            if op.name == "affine.for":
                name = ih.iterator_names(len(loops) + 1)[-1]
                inner = body_ops(op.regions[0].blocks[0])
                visit(inner, [*loops, op], conds, [*row, next(counter), name], itertools.count())
            elif op.name == "affine.if":
                for k, branch in enumerate(op.regions):
                    for block in branch.blocks:
                        visit(body_ops(block), loops, [*conds, (op, k == 0)], row, counter)
            elif op.name == "affine.store":
                out.append(_Site(op, loops, conds, [*row, next(counter)]))

    visit(ops, [], [], [], itertools.count())
    return out


def _slice(site: _Site, run: Run) -> list[ir.Operation]:
    """The store's backward slice in the region, in dependence order, the store last."""
    ivs = {loop.opview.induction_variable for loop in site.loops}
    order: list[ir.Operation] = []

    def visit(value: ir.Value) -> None:
        if value in ivs or not run.defines(value):
            return
        op = defining_op(value)
        if op is None:
            raise NotModeled(f"a block argument of '{block_owner(value).name}' in a statement")
        if any(op == o for o in order):
            return
        if op.name == "affine.load":
            if op.block != site.store.block:
                raise NotModeled("a load used in another block (not demoted)")
        elif not is_pure(op):
            raise NotModeled(f"a value of '{op.name}' used in a statement")
        for operand in op.operands:
            visit(operand)
        if not any(op == o for o in order):
            order.append(op)

    for operand in site.store.operands:
        visit(operand)
    return [*order, site.store]


@dataclass
class _Text:
    """One statement as isl text, before the parameters are all known."""

    name: str
    depth: int
    domain: list[str]
    excluded: list[str]
    accesses: list[tuple[Literal["read", "write"], ir.Value, list[str]]]
    row: list[int | str]
    ops: StatementOps
    line: int
    column: int


def _statement_text(site: _Site, run: Run, namer: Namer, name: str) -> _Text:
    names = ih.iterator_names(len(site.loops))
    ivs = {loop.opview.induction_variable: n for loop, n in zip(site.loops, names, strict=True)}
    domain: list[str] = []
    excluded: list[str] = []
    for loop, iv_name in zip(site.loops, names, strict=True):
        domain += loop_bounds(loop, iv_name, namer, ivs)
    for if_op, then in site.conds:
        amap, equalities = if_condition(if_op)
        lhs = namer.map_results(amap, list(if_op.operands), ivs)
        parts = [f"{e} {'=' if eq else '>='} 0" for e, eq in zip(lhs, equalities, strict=True)]
        text = " and ".join(parts) if parts else "true"
        (domain if then else excluded).append(text)
    ops = _slice(site, run)
    accesses: list[tuple[Literal["read", "write"], ir.Value, list[str]]] = []
    for op in ops:
        if op.name in ("affine.load", "affine.store"):
            home = Home.of(op)
            amap = ir.AffineMapAttr(home.amap).value
            subscripts = namer.map_results(amap, list(home.operands), ivs)
            kind: Literal["read", "write"] = "write" if op.name == "affine.store" else "read"
            accesses.append((kind, home.mem, subscripts))
    line, column = line_column(site.store)
    stmt_ops = StatementOps(
        name,
        tuple(ops),
        tuple(ivs),
        tuple(site.loops),
    )
    return _Text(
        name, len(site.loops), domain, excluded, accesses, site.row, stmt_ops, line, column
    )


def _unique_names(sites: Sequence[_Site]) -> list[str]:
    used: set[str] = set()
    out: list[str] = []
    for site in sites:
        base = statement_name(site.store.location) or "S"
        name, k = base, 0
        while name in used or (name == "S" and base == "S"):
            k += 1
            name = f"{base}_{k}"
        used.add(name)
        out.append(name)
    return out


def _build(run: Run, func_op: ir.Operation) -> tuple[Scop, ScopRegion]:
    """Step 3 of the module docstring, on a run already demoted."""
    namer = Namer(run.defines)
    sites = _sites(run.ops)
    texts = [
        _statement_text(site, run, namer, name)
        for site, name in zip(sites, _unique_names(sites), strict=True)
    ]
    params = tuple(namer.params.values())
    arrays: dict[ir.Value, str] = {}
    for text in texts:
        for _, mem, _ in text.accesses:
            if mem not in arrays:
                arrays[mem] = f"A{len(arrays)}"
    width = 2 * max((t.depth for t in texts), default=0) + 1
    statements: list[Statement] = []
    rows: list[isl.Map] = []
    for text in texts:
        formula = " and ".join(f"({part})" for part in text.domain) or None
        domain = ih.statement_set(params, text.name, text.depth, formula)
        for part in text.excluded:
            domain = domain.subtract(ih.statement_set(params, text.name, text.depth, part))
        domain = domain.coalesce()
        accesses = tuple(
            Access(
                text.name,
                arrays[mem],
                kind,
                ih.access_relation(params, text.name, text.depth, arrays[mem], subscripts)
                .intersect_domain(domain)
                .coalesce(),
            )
            for kind, mem, subscripts in text.accesses
        )
        statements.append(Statement(text.name, domain, accesses, text.line, text.column))
        row = text.row + [0] * (width - len(text.row))
        rows.append(ih.schedule_relation(params, text.name, text.depth, row))
    scop = Scop(
        function=symbol_name(func_op),
        params=params,
        statements=tuple(statements),
        arrays={name: _shape(mem) for mem, name in arrays.items()},
        initial_schedule=ih.union_map(rows, params),
        context=ih.params_universe(params),
    )
    region = ScopRegion(
        function=func_op,
        block=run.block,
        ops=tuple(run.ops),
        params={name: value for value, name in namer.params.items()},
        arrays={name: mem for mem, name in arrays.items()},
        statements={t.name: t.ops for t in texts},
    )
    return scop, region


def _shape(mem: ir.Value) -> tuple[int, ...]:
    mtype = ir.MemRefType(mem.type)
    return tuple(-1 if d < 0 else int(d) for d in mtype.shape)


# ---------------------------------------------------------------------------------------------
# Entry points


def find_scops(func_op: ir.Operation | ir.OpView, *, expand_scalars: bool = True) -> Extraction:
    """The scops of `func_op` (a `func.func`) with their regions, and what was left out and why.

    Demotes loop-carried and cross-statement values to memory first (`scratch.demote_to_memory`;
    `expand_scalars`: values a loop carries get one element per iteration of the loop around
    it where `scratch._Scratch.expanded_home` can): the function computes the same, and a region
    left as it is stays correct."""
    fn = func_op.operation
    out = Extraction()
    if not isinstance(fn.opview, func.FuncOp) or len(fn.regions[0].blocks) == 0:
        return out
    with fn.context, fn.location:
        demote_to_memory(fn, expand=expand_scalars)
        runs, out.left_out = find_runs(fn)
        for run in runs:
            problem = precheck(run)
            if problem is None:
                try:
                    out.scops.append(_build(run, fn))
                    continue
                except (NotModeled, isl.Error) as exc:
                    problem = f"not modeled: {exc}"
            out.left_out.append(left_out_of(run.ops[0], f"region not modeled: {problem}"))
    return out


def extract_scops(
    func_op: ir.Operation | ir.OpView, *, expand_scalars: bool = True
) -> list[tuple[Scop, ScopRegion]]:
    """The scops of `func_op` and their regions (see `find_scops`, which also says what was
    left out)."""
    return find_scops(func_op, expand_scalars=expand_scalars).scops


__all__ = [
    "Access",
    "Extraction",
    "LeftOut",
    "NotModeled",
    "Scop",
    "ScopRegion",
    "Statement",
    "StatementOps",
    "extract_scops",
    "find_scops",
    "initial_schedule_tree",
]
