"""The C-ABI entries of compiled functions: `@__polyflow_f` takes plain pointers and scalars (as
C passes them), builds a memref descriptor per array and calls `@f`. The C and TC frontends
both build their entries from `memref_descriptor`."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, llvm

from polyflow.frontend.c_scope import (
    UNKNOWN_EXTENT,
    CFunction,
    FileScope,
    Var,
    mlir_type,
)
from polyflow.frontend.c_statements import FunctionEmitter
from polyflow.frontend.c_types import (
    Array,
    Scalar,
    Void,
)
from polyflow.ir.names import CABI_PREFIX


def emit_c_abi_entry(
    module: ir.Module, fn: CFunction, scope: FileScope, order: list[int] | None = None
) -> func.FuncOp:
    """`@__polyflow_f`: the C signature of `f` (pointers for arrays, then one pointer per global),
    calling `@f` with those operands (`order`: with operand `order[k]` as its argument k)."""
    ptr = ir.Type.parse("!llvm.ptr")
    arg_types = [ptr if isinstance(t, Array) else mlir_type(t) for _, t in fn.params] + [
        ptr for _ in fn.globals
    ]
    results = [] if isinstance(fn.ret, Void) else [mlir_type(fn.ret)]
    emitter = FunctionEmitter(scope, {}, fn)
    with ir.InsertionPoint(module.body), emitter.loc(fn.node.decl):
        fop = func.FuncOp(CABI_PREFIX + fn.name, (arg_types, results))
        entry = fop.add_entry_block()
        emitter.entry = entry
    try:
        with ir.InsertionPoint(entry), emitter.loc(fn.node.decl):
            args = list(entry.arguments)
            for (pname, ptype), arg in zip(fn.params, args, strict=False):
                if isinstance(ptype, Scalar):
                    emitter.bind(pname, Var(ptype, value=arg))
            operands = [
                memref_from_pointer(emitter, arg, t) if isinstance(t, Array) else arg
                for (_, t), arg in zip(fn.params, args, strict=False)
            ]
            for g, arg in zip(fn.globals, args[len(fn.params) :], strict=True):
                gt = scope.globals[g].type
                operands.append(
                    memref_from_pointer(
                        emitter, arg, gt if isinstance(gt, Array) else Array(gt, ())
                    )
                )
            if order is not None:
                operands = [operands[k] for k in order]
            call = func.CallOp(results, ir.FlatSymbolRefAttr.get(fn.name), operands)
            func.ReturnOp(list(call.results))
    except Exception:
        fop.operation.erase()
        raise
    return fop


def memref_from_pointer(emitter: FunctionEmitter, ptr: ir.Value, t: Array) -> ir.Value:
    """A memref descriptor over a C pointer: row-major, extents from the declared dimensions."""
    i64 = ir.IntegerType.get_signless(64)
    sizes: list[ir.Value] = []
    for d in t.dims:
        if isinstance(d, int):
            sizes.append(arith.constant(i64, d))
        elif d is None:
            sizes.append(arith.constant(i64, UNKNOWN_EXTENT))
        else:
            sizes.append(arith.index_cast(i64, emitter.emit_index(d)))
    return memref_descriptor(ptr, ir.MemRefType(mlir_type(t)), sizes)


def memref_descriptor(
    ptr: ir.Value, memref_type: ir.MemRefType, sizes: list[ir.Value] | None = None
) -> ir.Value:
    """The memref `memref_type` over the row-major array at `ptr`: the descriptor MLIR's
    lowering expects, built at the insertion point. Its extents are `sizes` (i64 values, the
    strides multiplied when the code runs: C arrays sized by parameters), or, without them,
    `memref_type`'s static shape (strides folded here: TC's tensors)."""
    i64 = ir.IntegerType.get_signless(64)
    shape = list(memref_type.shape) if sizes is None else []
    rank = len(shape) if sizes is None else len(sizes)
    fields = "ptr, ptr, i64" + (f", array<{rank} x i64>, array<{rank} x i64>" if rank else "")
    struct = ir.Type.parse(f"!llvm.struct<({fields})>")
    if sizes is None:
        desc = llvm.mlir_undef(struct)
        desc = llvm.insertvalue(desc, ptr, [0])
        desc = llvm.insertvalue(desc, ptr, [1])
        desc = llvm.insertvalue(desc, arith.constant(i64, 0), [2])
        stride = 1
        for k in range(rank - 1, -1, -1):
            desc = llvm.insertvalue(desc, arith.constant(i64, shape[k]), [3, k])
            desc = llvm.insertvalue(desc, arith.constant(i64, stride), [4, k])
            stride *= shape[k]
    else:
        strides: list[ir.Value] = [arith.constant(i64, 1)] * rank
        for k in range(rank - 2, -1, -1):
            strides[k] = arith.muli(strides[k + 1], sizes[k + 1])
        desc = llvm.mlir_undef(struct)
        desc = llvm.insertvalue(desc, ptr, [0])
        desc = llvm.insertvalue(desc, ptr, [1])
        desc = llvm.insertvalue(desc, arith.constant(i64, 0), [2])
        for k in range(rank):
            desc = llvm.insertvalue(desc, sizes[k], [3, k])
            desc = llvm.insertvalue(desc, strides[k], [4, k])
    cast = ir.Operation.create(
        "builtin.unrealized_conversion_cast", results=[memref_type], operands=[desc]
    )
    return cast.results[0]
