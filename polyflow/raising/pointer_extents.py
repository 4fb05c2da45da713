"""Arrays passed as C pointers get extents at run time, from what the function touches.

A C pointer argument (`double *x`, `double (*A)[M]`) is a memref whose first extent is unknown
(`polyflow.unknown_extent`). Every later stage must then assume that it overlaps every other
array argument (polyflow/ir/aliasing.py, rule 5): the scheduler leaves the loop nests that write
one of them alone, and a GPU build cannot know what to copy. But where the raised function
touches a pointer only through `affine.load`/`affine.store` inside `affine.for`/`affine.if`,
isl gives the exact range of rows it touches, `[low, high]`, as piecewise affine functions of
the function's parameters. `size_pointer_arguments` then turns such a function `f` into a
dispatcher:

    @f(args) = ok ? @f.sized(args, each pointer's first extent set to high + 1)
                  : @f.pointers(args)

where `ok` says that every pointer's `low` is at least 0 (the sized array starts at the pointer)
and that every pair of arrays one of which is written and one of which is a pointer occupies
disjoint bytes (each pointer its rows `[low, high]`, any other array its whole extent).
`@f.sized` has no unknown extent left and its array arguments are marked `noalias` (the
dispatcher checked them), so it is scheduled, parallelized and mapped to the GPU (whose copies
now have a size) like any function; `@f.pointers` is the raised code as it was, marked
`no_raise`, for the calls whose arrays overlap.

Only where it pays: on the CPU, a function with a pair to check (a pointer and another array,
one of them written); for the GPU, any function with a pointer (its copies need the extent).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Collection
from dataclasses import dataclass

import islpy as isl
from mlir import ir
from mlir.dialects import arith, memref

from polyflow.ir.affine_text import Namer, NotModeled, if_condition, loop_bounds
from polyflow.ir.aliasing import has_argument_attribute, has_unknown_extent
from polyflow.ir.functions import raisable_functions
from polyflow.ir.names import (
    DISPATCHER_ATTR,
    NO_RAISE_ATTR,
    NOALIAS_ATTR,
    NOT_AFFINE_ATTR,
    POINTERS_SUFFIX,
    SIZED_SUFFIX,
    UNKNOWN_EXTENT_ATTR,
    symbol_name,
)
from polyflow.ir.ops import index_value, ops_named, remap_operands
from polyflow.ir.remarks import attach_remarks, remark_at
from polyflow.options import Options
from polyflow.poly import isl_helpers as ih
from polyflow.report import Remark, Severity

from .alias_guard import (
    address_range,
    call_either,
    disjoint,
    may_be_written,
    rewrite_argument_attributes,
    row_bytes,
)

# Ops that compute without memory or regions: a parameter computed by them is recomputed in the
# dispatcher.
_PURE_PREFIXES = ("arith.", "index.")
_PURE_OPS = frozenset({"affine.apply", "affine.min", "affine.max"})


class NotSized(Exception):
    """Why a function's pointer arguments get no extent (it stays as it is)."""


@dataclass
class _Access:
    """One access to a pointer, directly or through a row-major view of it, as isl text: the
    domain of the op (`excluded`: else branches) and its subscripts."""

    domain: list[str]
    excluded: list[str]
    subscripts: list[str]
    depth: int


@dataclass
class _Group:
    """The accesses to a pointer through one memref: the pointer itself (`row_size` None: the
    first subscript counts rows) or a 2-d row-major view of a flat pointer (element `[r, c]` is
    element `r * row_size + c`, the name of the row size among the parameters)."""

    accesses: list[_Access]
    row_size: str | None = None
    extent: ih.Extent | None = None


@dataclass
class _Pointer:
    """A pointer argument and the accesses to it, grouped by the memref they go through."""

    arg: ir.BlockArgument
    groups: list[_Group]


def size_pointer_arguments(
    module: ir.Module, options: Options, *, functions: Collection[str] | None = None
) -> list[str]:
    """Version each raised function (of those named in `functions`, by symbol) whose pointer
    arguments can be sized (module docstring); returns the names of the versioned functions."""
    versioned: list[str] = []
    for fn in list(raisable_functions(module)):
        if NOT_AFFINE_ATTR in fn.attributes or DISPATCHER_ATTR in fn.attributes:
            continue
        if functions is not None and symbol_name(fn) not in functions:
            continue
        args = list(fn.regions[0].blocks[0].arguments)
        pointers = [a for a in args if isinstance(a.type, ir.MemRefType) and has_unknown_extent(a)]
        if not pointers:
            continue
        pairs = _pairs_to_check(args, pointers)
        if not pairs and options.target != "cuda":
            continue
        try:
            with fn.location:
                namer = Namer(functools.partial(_computed_in_body, fn=fn))
                found = [_pointer_rows(p, namer) for p in pointers]
                params = list(namer.params.values())
                for pointer in found:
                    for group in pointer.groups:
                        group.extent = _group_extent(group, params)
        except (NotSized, NotModeled, ih.AstUnsupported, isl.Error) as exc:
            attach_remarks(fn, [_remark(fn, f"its pointer arguments stay unsized: {exc}")])
            continue
        try:
            _make_dispatcher(module, fn, found, pairs, namer)
        except NotSized as exc:  # (before anything changed)
            attach_remarks(fn, [_remark(fn, f"its pointer arguments stay unsized: {exc}")])
            continue
        versioned.append(symbol_name(fn))
    return versioned


def _pairs_to_check(
    args: list[ir.BlockArgument], pointers: list[ir.BlockArgument]
) -> list[tuple[int, int]]:
    """The argument pairs, one of them a pointer, one of them written, that the sized copy
    assumes disjoint (pairs of known extents are the alias guard's)."""
    arrays = [a for a in args if isinstance(a.type, ir.MemRefType)]
    written = {a.arg_number for a in arrays if may_be_written(a)}
    promised = {a.arg_number for a in arrays if has_argument_attribute(a, NOALIAS_ATTR)}
    return [
        (a.arg_number, b.arg_number)
        for a, b in itertools.combinations(arrays, 2)
        if (a in pointers or b in pointers)
        and (a.arg_number in written or b.arg_number in written)
        and not {a.arg_number, b.arg_number} <= promised
    ]


def _computed_in_body(value: ir.Value, fn: ir.Operation) -> bool:
    """Whether `value` is computed inside a loop or condition of `fn` (not a parameter: an
    argument or a value of the entry block)."""
    owner = value.owner
    block = owner if isinstance(owner, ir.Block) else owner.operation.block
    return block != fn.regions[0].blocks[0]


def _pointer_rows(arg: ir.BlockArgument, namer: Namer) -> _Pointer:
    """The accesses to `arg` as isl text (`NotSized` where one is not affine, not under affine
    control, or through a view other than a row-major one of a flat pointer)."""
    pointer = _Pointer(arg, [_Group([])])
    rank = ir.MemRefType(arg.type).rank
    for use in arg.uses:
        op = use.owner.operation
        if op.name == "memref.dim":  # the frontend's row count of a view: the sized extent
            continue
        if op.name == "memref.reinterpret_cast" and rank == 1:
            pointer.groups.append(_Group([], _row_size(op.opview, namer)))
            for view_use in op.results[0].uses:
                pointer.groups[-1].accesses.append(_access(view_use, namer))
            continue
        pointer.groups[0].accesses.append(_access(use, namer))
    return pointer


def _row_size(view: ir.OpView, namer: Namer) -> str:
    """The row size of `view`, a `memref.reinterpret_cast` of a flat pointer, as isl text;
    `NotSized` unless it is a 2-d row-major view from the pointer's start."""
    static_sizes = list(view.static_sizes)  # type: ignore[attr-defined]
    static_strides = list(view.static_strides)  # type: ignore[attr-defined]
    dynamic = ir.ShapedType.get_dynamic_size()
    if list(view.static_offsets) != [0] or len(static_sizes) != 2 or static_strides[1] != 1:  # type: ignore[attr-defined]
        raise NotSized("a pointer is read through a view other than rows of it")
    sizes = list(view.sizes)  # type: ignore[attr-defined]
    strides = list(view.strides)  # type: ignore[attr-defined]
    if static_sizes[1] != dynamic:
        if static_strides[0] != static_sizes[1]:
            raise NotSized("a pointer is read through a view whose rows are not contiguous")
        return str(static_sizes[1])
    if static_strides[0] != dynamic or not strides or sizes[-1] != strides[0]:
        raise NotSized("a pointer is read through a view whose rows are not contiguous")
    return namer.value(strides[0], {})


def _access(use: ir.OpOperand, namer: Namer) -> _Access:
    op = use.owner.operation
    if op.name == "affine.load" and use.operand_number == 0:
        operands = list(op.operands)[1:]
    elif op.name == "affine.store" and use.operand_number == 1:
        operands = list(op.operands)[2:]
    else:
        raise NotSized(f"a pointer argument is used by '{op.name}'")
    loops, conds = _control(op)
    names = ih.iterator_names(len(loops))
    ivs = {loop.opview.induction_variable: n for loop, n in zip(loops, names, strict=True)}
    domain: list[str] = []
    excluded: list[str] = []
    for loop, iv_name in zip(loops, names, strict=True):
        domain += loop_bounds(loop, iv_name, namer, ivs)
    for if_op, then in conds:
        amap, equalities = if_condition(if_op)
        lhs = namer.map_results(amap, list(if_op.operands), ivs)
        parts = [f"{e} {'=' if eq else '>='} 0" for e, eq in zip(lhs, equalities, strict=True)]
        (domain if then else excluded).append(" and ".join(parts) if parts else "true")
    amap = ir.AffineMapAttr(op.attributes["map"]).value
    subscripts = namer.map_results(amap, operands, ivs)
    return _Access(domain, excluded, subscripts, len(loops))


def _control(op: ir.Operation) -> tuple[list[ir.Operation], list[tuple[ir.Operation, bool]]]:
    """The `affine.for` loops (outermost first) and `affine.if` branches around `op` (True: the
    then branch); `NotSized` when anything else stands between `op` and its function."""
    loops: list[ir.Operation] = []
    conds: list[tuple[ir.Operation, bool]] = []
    child = op
    parent = op.parent
    while parent is not None and parent.operation.name != "func.func":
        owner = parent.operation
        if owner.name == "affine.for":
            loops.append(owner)
        elif owner.name == "affine.if":
            then_blocks = list(owner.regions[0].blocks)
            conds.append((owner, any(child.block == b for b in then_blocks)))
        else:
            raise NotSized(f"an access to a pointer argument lies in '{owner.name}'")
        child = owner
        parent = owner.parent
    return loops[::-1], conds[::-1]


def _group_extent(group: _Group, params: list[str]) -> ih.Extent:
    """The first and last element `group` touches: rows of the pointer, or `[r, c]` of a view
    (whose `c` must stay in its row for the flat order to be the lexicographic one)."""
    width = 1 if group.row_size is None else 2
    points: isl.Set | None = None
    for k, access in enumerate(group.accesses):
        name = f"S{k}"
        formula = " and ".join(f"({part})" for part in access.domain) or None
        domain = ih.statement_set(params, name, access.depth, formula)
        for part in access.excluded:
            domain = domain.subtract(ih.statement_set(params, name, access.depth, part))
        touched = ih.access_relation(
            params, name, access.depth, "R", access.subscripts[:width]
        ).intersect_domain(domain)
        points = touched.range() if points is None else points.union(touched.range())
    if points is None:  # no access at all: nothing to size, nothing to copy
        return ih.Extent(False, (ih.Const(0),) * width, (ih.Const(-1),) * width)
    points = points.coalesce()
    if group.row_size is not None:
        rows = isl.Set(f"[{', '.join(params)}] -> {{ R[r, c] : 0 <= c < {group.row_size} }}")
        if not points.is_subset(rows):
            raise NotSized("an access through a view of a pointer leaves its row")
    return ih.lexicographic_extent(points)


# ---------------------------------------------------------------------------------------------
# The dispatcher


def _make_dispatcher(
    module: ir.Module,
    fn: ir.Operation,
    pointers: list[_Pointer],
    pairs: list[tuple[int, int]],
    namer: Namer,
) -> None:
    for value in namer.params:
        _check_recomputable(value)
    name = symbol_name(fn)
    with ir.InsertionPoint(module.body):
        sized = fn.clone()
        unsized = fn.clone()
    sized.attributes["sym_name"] = ir.StringAttr.get(name + SIZED_SUFFIX)
    unsized.attributes["sym_name"] = ir.StringAttr.get(name + POINTERS_SUFFIX)
    unsized.attributes[NO_RAISE_ATTR] = ir.UnitAttr.get()
    for clone in (sized, unsized):
        clone.attributes["sym_visibility"] = ir.StringAttr.get("private")
    _mark_sized(sized)
    body = fn.regions[0].blocks[0]
    old_ops = [op.operation for op in body.operations]
    args = list(body.arguments)
    results = list(ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value).results)
    # at the function's position: with -g, a call without a source location fails LLVM's
    # lowering (an inlinable call in a function with debug info needs one)
    with ir.InsertionPoint(old_ops[0]), fn.location:
        mapping: dict[ir.Value, ir.Value] = {}
        values = {pname: _recompute(value, mapping) for value, pname in namer.params.items()}
        sized_args: list[ir.Value] = list(args)
        ranges: dict[int, tuple[ir.Value, ir.Value]] = {}
        ok: ir.Value = arith.constant(ir.IntegerType.get_signless(1), 1)
        for pointer in pointers:
            low, high = _pointer_extent(pointer, values)
            rows = arith.addi(high, index_value(1))
            # the sized array starts at the pointer: rows below it keep the pointer copy
            ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.sge, low, index_value(0)))
            sized_args[pointer.arg.arg_number] = _with_rows(pointer.arg, rows)
            base, size = row_bytes(pointer.arg)
            begin = arith.addi(base, arith.muli(low, size))
            ranges[pointer.arg.arg_number] = (begin, arith.addi(base, arith.muli(rows, size)))
        for a, b in pairs:
            first = ranges.get(a) or address_range(args[a])
            second = ranges.get(b) or address_range(args[b])
            ok = arith.andi(ok, _disjoint(first, second))
        sized, pointers_copy = name + SIZED_SUFFIX, name + POINTERS_SUFFIX
        call_either(ok, results, (sized, sized_args), (pointers_copy, args))
    for op in reversed(old_ops):
        op.erase()
    fn.attributes[NO_RAISE_ATTR] = ir.UnitAttr.get()
    fn.attributes[DISPATCHER_ATTR] = ir.StringAttr.get(name + SIZED_SUFFIX)
    numbers = [str(p.arg.arg_number + 1) for p in pointers]
    shown = (
        f"parameter {numbers[0]} is a C pointer"
        if len(numbers) == 1
        else f"parameters {', '.join(numbers[:-1])} and {numbers[-1]} are C pointers"
    )
    checked = " and do not overlap the other arrays" if pairs else ""
    note = (
        f"{shown}, sized at run time from the elements the function touches; its optimized "
        f"copy runs when they start at the pointer{checked}"
    )
    attach_remarks(fn, [_remark(fn, note, "note")])


def _pointer_extent(pointer: _Pointer, values: dict[str, ir.Value]) -> tuple[ir.Value, ir.Value]:
    """The first and last row (of a flat pointer: element) that `pointer` touches, at run time
    (0 and -1 where it touches none)."""
    low: ir.Value | None = None
    high: ir.Value | None = None
    for group in pointer.groups:
        extent = group.extent
        assert extent is not None
        if extent.nonempty is False:
            continue
        first = [_expr(e, values) for e in extent.low]
        last = [_expr(e, values) for e in extent.high]
        if group.row_size is not None:  # [r, c] of a row-major view: r * row_size + c
            size = values[group.row_size] if group.row_size in values else None
            row_size = size if size is not None else index_value(int(group.row_size))
            first = [arith.addi(arith.muli(first[0], row_size), first[1])]
            last = [arith.addi(arith.muli(last[0], row_size), last[1])]
        nonempty = _expr(extent.nonempty, values)
        group_low = arith.select(nonempty, first[0], index_value(0))
        group_high = arith.select(nonempty, last[0], index_value(-1))
        low = group_low if low is None else arith.minsi(low, group_low)
        high = group_high if high is None else arith.maxsi(high, group_high)
    if low is None or high is None:
        return index_value(0), index_value(-1)
    return low, high


def _check_recomputable(value: ir.Value) -> None:
    """`NotSized` unless `value` is computed from the arguments by pure arithmetic."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return
    op = owner.operation
    if op.regions or not (op.name.startswith(_PURE_PREFIXES) or op.name in _PURE_OPS):
        raise NotSized(f"a loop bound or subscript depends on '{op.name}'")
    for operand in op.operands:
        _check_recomputable(operand)


def _recompute(value: ir.Value, mapping: dict[ir.Value, ir.Value]) -> ir.Value:
    """`value` (checked by `_check_recomputable`) computed again at the insertion point."""
    if value in mapping:
        return mapping[value]
    owner = value.owner
    if isinstance(owner, ir.Block):
        return value  # an argument: the dispatcher has it
    op = owner.operation
    operands = [_recompute(v, mapping) for v in op.operands]
    clone = op.clone()
    remap_operands([clone], dict(zip(list(op.operands), operands, strict=True)))
    for old, new in zip(op.results, clone.results, strict=True):
        mapping[old] = new
    return mapping[value]


def _expr(e: ih.Expr | ih.Cond | bool, values: dict[str, ir.Value]) -> ir.Value:
    """An isl AST expression of the parameters as `index` arithmetic (conditions as `i1`)."""
    if isinstance(e, bool):
        return arith.constant(ir.IntegerType.get_signless(1), int(e))
    if isinstance(e, ih.Var):
        return values[e.name]
    if isinstance(e, ih.Const):
        return index_value(e.value)
    if isinstance(e, ih.Add):
        total = _expr(e.terms[0], values)
        for term in e.terms[1:]:
            total = arith.addi(total, _expr(term, values))
        return total
    if isinstance(e, ih.Mul):
        return arith.muli(index_value(e.factor), _expr(e.expr, values))
    if isinstance(e, ih.FloorDiv):
        return arith.floordivsi(_expr(e.expr, values), index_value(e.divisor))
    if isinstance(e, ih.Mod):
        inner = _expr(e.expr, values)
        quotient = arith.floordivsi(inner, index_value(e.divisor))
        return arith.subi(inner, arith.muli(quotient, index_value(e.divisor)))
    if isinstance(e, ih.Min | ih.Max):
        pick = arith.minsi if isinstance(e, ih.Min) else arith.maxsi
        out = _expr(e.args[0], values)
        for arg in e.args[1:]:
            out = pick(out, _expr(arg, values))
        return out
    if isinstance(e, ih.Select):
        return arith.select(_expr(e.cond, values), _expr(e.then, values), _expr(e.else_, values))
    if isinstance(e, ih.Compare):
        return arith.cmpi(_PREDICATES[e.relation], _expr(e.lhs, values), _expr(e.rhs, values))
    combine = arith.andi if isinstance(e, ih.And) else arith.ori
    conds: list[ir.Value] = [_expr(arg, values) for arg in e.args]
    out_cond = conds[0]
    for cond in conds[1:]:
        out_cond = combine(out_cond, cond)
    return out_cond


_PREDICATES = {
    "<=": arith.CmpIPredicate.sle,
    "<": arith.CmpIPredicate.slt,
    ">=": arith.CmpIPredicate.sge,
    ">": arith.CmpIPredicate.sgt,
    "==": arith.CmpIPredicate.eq,
}


def _with_rows(arg: ir.Value, rows: ir.Value) -> ir.Value:
    """`arg` with first extent `rows`, its other extents and its strides as they are."""
    mtype = ir.MemRefType(arg.type)
    meta = memref.ExtractStridedMetadataOp(arg)
    dynamic = ir.ShapedType.get_dynamic_size()
    static_sizes = [dynamic, *mtype.shape[1:]]
    sizes = [rows] + [
        size
        for size, static in zip(list(meta.sizes)[1:], static_sizes[1:], strict=True)
        if static == dynamic
    ]
    strides = list(meta.strides)
    layout = ir.Attribute.parse(f"strided<[{', '.join('?' for _ in strides)}]>")
    strided = ir.MemRefType.get(mtype.shape, mtype.element_type, layout, mtype.memory_space)
    view = memref.ReinterpretCastOp(
        strided,
        arg,
        [],
        sizes,
        strides,
        static_offsets=[0],
        static_sizes=static_sizes,
        static_strides=[dynamic] * len(strides),
    ).result
    return memref.CastOp(mtype, view).result


def _disjoint(a: tuple[ir.Value, ir.Value], b: tuple[ir.Value, ir.Value]) -> ir.Value:
    """Whether byte ranges `[a0, a1)` and `[b0, b1)` share no byte (an empty one shares none)."""
    empty_a = arith.cmpi(arith.CmpIPredicate.ule, a[1], a[0])
    empty_b = arith.cmpi(arith.CmpIPredicate.ule, b[1], b[0])
    return arith.ori(disjoint(a, b), arith.ori(empty_a, empty_b))


def _mark_sized(fn: ir.Operation) -> None:
    """The sized copy's pointers lose `unknown_extent`; its arrays get `noalias` (checked by the
    dispatcher, or by the alias guard's before it), unless the function reaches a global array,
    which could be one of them."""
    noalias = NOALIAS_ATTR if not ops_named(fn, "memref.get_global") else None
    rewrite_argument_attributes(fn, add_to_arrays=noalias, drop=UNKNOWN_EXTENT_ATTR)


def _remark(fn: ir.Operation, text: str, severity: Severity = "remark") -> Remark:
    return remark_at(fn.location, "raising", "pointer-extents", severity, text)


__all__ = ["NotSized", "size_pointer_arguments"]
