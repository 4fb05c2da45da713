"""Inlining calls to scalar helper functions before raising: `max_score(a, b)` in a loop nest
becomes its `cmpi` and `select`, so the nest has no call left (a call stops the scheduler: it
may touch any memory) and its reductions can be recognized.

`inline_scalar_calls(module, callers)` replaces every `func.call` in `callers` whose callee is
defined in the module with a body of one block of scalar ops (`arith`, `math`) and plain array
accesses (`memref.load`, `memref.store`: accessors like `get(m, i, j)`), ending in
`func.return`, by copies of those ops on the call's operands. The callee itself stays (the rest
of the program may call it). The result computes what the calls computed: the copied ops run in
the callee's order, on the same operand values and the same arrays.
"""

from __future__ import annotations

from mlir import ir

from polyflow.ir.names import symbol_name

# Dialects whose ops are pure functions of their operands (no memory, no control flow).
_PURE_DIALECTS = ("arith.", "math.")
# Array accesses copied as they are: the call's arrays are the callee's parameters.
_ACCESSES = ("memref.load", "memref.store")


def _scalar_body(fn: ir.Operation) -> list[ir.Operation] | None:
    """The ops of `fn`'s body before its `func.return`, when the body is one block of pure
    scalar ops and array accesses; None otherwise."""
    blocks = list(fn.regions[0].blocks)
    if len(blocks) != 1:
        return None
    ops = [op.operation for op in blocks[0].operations]
    if not ops or ops[-1].name != "func.return":
        return None
    body = ops[:-1]
    for op in body:
        if op.name in _ACCESSES:
            continue
        if not op.name.startswith(_PURE_DIALECTS) or op.regions:
            return None
        if any(isinstance(v.type, ir.MemRefType) for v in [*op.operands, *op.results]):
            return None
    return body


def _inline(call: ir.Operation, callee: ir.Operation, body: list[ir.Operation]) -> None:
    """Replace `call` by copies of `body` (callee `callee`'s ops) on the call's operands."""
    args = list(callee.regions[0].blocks[0].arguments)
    mapping: dict[ir.Value, ir.Value] = dict(zip(args, call.operands, strict=True))
    ip = ir.InsertionPoint(call)
    for op in body:
        copy = op.clone(ip=ip)
        for pos, operand in enumerate(copy.operands):
            if operand in mapping:
                copy.operands[pos] = mapping[operand]
        for old, new in zip(op.results, copy.results, strict=True):
            mapping[old] = new
    returned = list(callee.regions[0].blocks[0].operations)[-1].operation.operands
    for result, value in zip(call.results, returned, strict=True):
        result.replace_all_uses_with(mapping.get(value, value))
    call.erase()


def _calls(op: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        if inner.name == "func.call":
            found.append(inner)
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def inline_scalar_calls(module: ir.Module, callers: list[ir.Operation]) -> int:
    """Inline the calls to scalar helpers (module docstring) in the functions `callers` of
    `module`; returns how many calls were inlined."""
    helpers: dict[str, tuple[ir.Operation, list[ir.Operation]]] = {}
    for op in module.body.operations:
        fn = op.operation
        if fn.name == "func.func" and len(fn.regions[0].blocks) == 1:
            body = _scalar_body(fn)
            if body is not None:
                helpers[symbol_name(fn)] = (fn, body)
    inlined = 0
    for caller in callers:
        for call in _calls(caller):
            callee = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
            if callee in helpers:
                _inline(call, *helpers[callee])
                inlined += 1
    return inlined


__all__ = ["inline_scalar_calls"]
