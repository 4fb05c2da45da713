"""Keep the passes' no-aliasing assumption honest: a function whose array arguments overlap at run
time runs an unraised copy of itself.

The raising and scheduling passes assume that distinct memref arguments do not overlap (as Pluto,
PPCG and Polygeist do). C allows `f(A, A)`, so before raising, `guard_argument_aliasing` turns each
function that has loops and at least two memref arguments of known extent into a dispatcher:

    @f(args) = all_disjoint(args) ? @f.affine(args) : @f.scf(args)

`@f.affine` is the copy the passes optimize; `@f.scf` is the frontend's code, marked
`polyflow.no_raise` so that no pass touches it. Only pairs where one side may be written are
checked, and not pairs whose frontend marked both `llvm.noalias` (TC tensors, whose caller
checks them). Arguments made from C pointers (`polyflow.unknown_extent`) have no extent to check:
passes must treat them as possibly aliasing any other argument (polyflow/ir/aliasing.py).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from polyflow.ir.aliasing import VIEW_OPS, has_argument_attribute, has_unknown_extent
from polyflow.ir.functions import argument_attributes, set_argument_attributes
from polyflow.ir.names import (
    AFFINE_SUFFIX,
    CABI_PREFIX,
    DISPATCHER_ATTR,
    NO_RAISE_ATTR,
    NOALIAS_ATTR,
    SCF_SUFFIX,
)
from polyflow.ir.ops import index_value

# Ops through which an argument is only read or measured; any other use may write it.
_READ_ONLY_USERS = frozenset({"memref.load", "affine.load", "memref.dim", "affine.vector_load"})
def may_be_written(value: ir.Value) -> bool:
    for use in value.uses:
        user = use.owner
        name = user.name
        if name in _READ_ONLY_USERS:
            continue
        if name in ("memref.store", "affine.store") and use.operand_number != 0:
            return True
        if name in VIEW_OPS:
            if may_be_written(user.results[0]):
                return True
            continue
        return True  # stored as a value, passed to a call, anything unknown
    return False


def _contains_op(op: ir.Operation, names: frozenset[str]) -> bool:
    """Whether an op named in `names` is nested in `op` (or is `op`)."""
    found = False

    def visit(o: ir.Operation) -> ir.WalkResult:
        nonlocal found
        if o.name in names:
            found = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return found


_LOOP_OPS = frozenset({"scf.for", "scf.while", "affine.for"})
_GLOBAL_OPS = frozenset({"memref.get_global"})


def _needs_guard(fn: func.FuncOp) -> list[tuple[int, int]]:
    """The argument pairs to check at run time: known extents, one of the two may be written,
    not both marked `llvm.noalias` by their frontend (TC tensors: the caller checks them)."""
    args = [
        a
        for a in fn.entry_block.arguments
        if isinstance(a.type, ir.MemRefType) and not has_unknown_extent(a)
    ]
    written = {a.arg_number for a in args if may_be_written(a)}
    promised = {a.arg_number for a in args if has_argument_attribute(a, NOALIAS_ATTR)}
    return [
        (a.arg_number, b.arg_number)
        for i, a in enumerate(args)
        for b in args[i + 1 :]
        if (a.arg_number in written or b.arg_number in written)
        and not {a.arg_number, b.arg_number} <= promised
    ]


def element_bytes(element: ir.Type) -> int:
    """The bytes one element of a memref of `element` takes in memory (x87's 80-bit long
    double takes 16, as LLVM lays it out on x86-64)."""
    if str(element) == "f80":
        return 16
    width = element.width if hasattr(element, "width") else 64
    return max(1, (width + 7) // 8)


def row_bytes(value: ir.Value) -> tuple[ir.Value, ir.Value]:
    """The address a memref argument starts at and the bytes of one of its rows (one step of
    its first index), as `index` values."""
    mtype = ir.MemRefType(value.type)
    size: ir.Value = index_value(element_bytes(mtype.element_type))
    for k, extent in enumerate(mtype.shape[1:], start=1):
        dim = memref.dim(value, index_value(k)) if ir.ShapedType.is_dynamic_size(extent) else None
        size = arith.muli(size, dim if dim is not None else index_value(extent))
    return memref.extract_aligned_pointer_as_index(value), size


def address_range(value: ir.Value) -> tuple[ir.Value, ir.Value]:
    """[begin, end) in bytes of what a memref argument spans, as `index` values."""
    begin, size = row_bytes(value)
    shape = ir.MemRefType(value.type).shape
    if not shape:  # a single element
        return begin, arith.addi(begin, size)
    if ir.ShapedType.is_dynamic_size(shape[0]):
        rows = memref.dim(value, index_value(0))
    else:
        rows = index_value(shape[0])
    return begin, arith.addi(begin, arith.muli(size, rows))


def disjoint(a: tuple[ir.Value, ir.Value], b: tuple[ir.Value, ir.Value]) -> ir.Value:
    """Whether byte ranges `[a0, a1)` and `[b0, b1)` lie one wholly before the other."""
    a_before_b = arith.cmpi(arith.CmpIPredicate.ule, a[1], b[0])
    b_before_a = arith.cmpi(arith.CmpIPredicate.ule, b[1], a[0])
    return arith.ori(a_before_b, b_before_a)


def call_either(
    ok: ir.Value,
    results: list[ir.Type],
    chosen: tuple[str, list[ir.Value]],
    otherwise: tuple[str, list[ir.Value]],
) -> None:
    """A dispatcher's end, at the insertion point: call `chosen` (a callee and its arguments)
    when `ok`, else `otherwise`, and return what the call returns."""
    branch = scf.IfOp(ok, results, has_else=True)
    for block, (callee, args) in ((branch.then_block, chosen), (branch.else_block, otherwise)):
        with ir.InsertionPoint(block):
            call = func.CallOp(results, ir.FlatSymbolRefAttr.get(callee), args)
            scf.YieldOp(list(call.results))
    func.ReturnOp(list(branch.results))


def rewrite_argument_attributes(
    fn_op: ir.Operation, *, add_to_arrays: str | None = None, drop: str | None = None
) -> None:
    """Give every memref argument of `fn_op` the unit attribute `add_to_arrays` and take the
    attribute `drop` from every argument."""
    attrs = argument_attributes(fn_op)
    for entries, arg in zip(attrs, fn_op.regions[0].blocks[0].arguments, strict=True):
        if drop is not None:
            entries.pop(drop, None)
        if add_to_arrays is not None and isinstance(arg.type, ir.MemRefType):
            entries[add_to_arrays] = ir.UnitAttr.get()
    set_argument_attributes(fn_op, attrs)


def guard_argument_aliasing(module: ir.Module) -> list[str]:
    """Turn every function whose memref arguments could overlap into a run-time dispatcher
    between its optimizable copy and its unraised copy; the names of the guarded functions."""
    guarded: list[str] = []
    with module.context:
        candidates = [
            op.opview
            for op in module.body.operations
            if isinstance(op.opview, func.FuncOp)
            and not ir.StringAttr(op.opview.sym_name).value.startswith(CABI_PREFIX)
            and NO_RAISE_ATTR not in op.attributes
            and not op.opview.is_external
        ]
        copies = {
            ir.StringAttr(op.attributes[DISPATCHER_ATTR]).value
            for op in module.body.operations
            if DISPATCHER_ATTR in op.attributes
        }
        for fn in candidates:
            if ir.StringAttr(fn.sym_name).value in copies:  # guarded already
                continue
            pairs = _needs_guard(fn)
            if not pairs or not _contains_op(fn.operation, _LOOP_OPS):
                continue
            _make_dispatcher(module, fn, pairs)
            guarded.append(ir.StringAttr(fn.sym_name).value)
    return guarded


def _make_dispatcher(module: ir.Module, fn: func.FuncOp, pairs: list[tuple[int, int]]) -> None:
    name = ir.StringAttr(fn.sym_name).value
    with ir.InsertionPoint(module.body):
        fast = fn.operation.clone()
        safe = fn.operation.clone()
    fast.attributes["sym_name"] = ir.StringAttr.get(name + AFFINE_SUFFIX)
    safe.attributes["sym_name"] = ir.StringAttr.get(name + SCF_SUFFIX)
    safe.attributes[NO_RAISE_ATTR] = ir.UnitAttr.get()
    _mark_noalias(fast)
    fn.attributes[NO_RAISE_ATTR] = ir.UnitAttr.get()
    fn.attributes[DISPATCHER_ATTR] = ir.StringAttr.get(name + AFFINE_SUFFIX)
    block = fn.entry_block
    for op in reversed(list(block.operations)):
        op.erase()
    args = list(block.arguments)
    results = list(ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value).results)
    with ir.InsertionPoint(block), fn.location:
        ranges = {k: address_range(args[k]) for pair in pairs for k in pair}
        ok: ir.Value | None = None
        for a, b in pairs:
            check = disjoint(ranges[a], ranges[b])
            ok = check if ok is None else arith.andi(ok, check)
        assert ok is not None
        call_either(ok, results, (name + AFFINE_SUFFIX, args), (name + SCF_SUFFIX, args))


def _mark_noalias(fn_op: ir.Operation) -> None:
    """Tell LLVM that the copy's array arguments do not overlap (the dispatcher checked it), so
    its vectorizer needs no run-time overlap checks. Not when an argument has an unknown extent or
    the function reaches a global array: either could point into a checked argument."""
    memrefs = [a for a in fn_op.opview.entry_block.arguments if isinstance(a.type, ir.MemRefType)]
    if any(has_unknown_extent(a) for a in memrefs) or _contains_op(fn_op, _GLOBAL_OPS):
        return
    rewrite_argument_attributes(fn_op, add_to_arrays=NOALIAS_ATTR)
