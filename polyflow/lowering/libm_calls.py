"""math ops that MLIR's LLVM lowering would compute inexactly become calls into libm.

convert-math-to-llvm expands `math.expm1` into `exp(x) - 1` and `math.log1p` into `log(1 + x)`:
both lose every significant digit near 0, which is the only reason C programs call them (GSL's
t-distribution quantile was off by 8e-9 relative). gcc calls libm's expm1/log1p, and so do we.
Vector forms are left alone: the micro-kernels vectorize arithmetic and sqrt only, never these.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import func

# op name → the C function for (f64, f32)
_LIBM_NAMES = {
    "math.expm1": ("expm1", "expm1f"),
    "math.log1p": ("log1p", "log1pf"),
}


def call_libm_for_inexact_math(module: ir.Module) -> ir.Module:
    """Replace every scalar `math.expm1`/`math.log1p` of `module` by a call to libm's function of
    the same name (declared once per module), so results match gcc's bit for bit."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in _LIBM_NAMES and _libm_name(op) is not None:
            found.append(op)
        return ir.WalkResult.ADVANCE

    with module.context:
        module.operation.walk(visit)
        if not found:
            return module
        declared = _declared_functions(module)
        for op in found:
            name = _libm_name(op)
            assert name is not None
            scalar = op.results[0].type
            if name not in declared:
                with ir.InsertionPoint.at_block_begin(module.body), op.location:
                    decl = func.FuncOp(name, ([scalar], [scalar]), visibility="private")
                    decl.attributes["llvm.readnone"] = ir.UnitAttr.get()
                declared.add(name)
            with ir.InsertionPoint(op), op.location:
                call = func.CallOp([scalar], ir.FlatSymbolRefAttr.get(name), [op.operands[0]])
            op.results[0].replace_all_uses_with(call.results[0])
            op.erase()
    return module


def _libm_name(op: ir.Operation) -> str | None:
    """The libm function for `op`'s element type (f64 or f32); None for vectors and others."""
    t = op.results[0].type
    double, single = _LIBM_NAMES[op.name]
    if isinstance(t, ir.F64Type):
        return double
    if isinstance(t, ir.F32Type):
        return single
    return None


def _declared_functions(module: ir.Module) -> set[str]:
    return {
        ir.StringAttr(op.attributes["sym_name"]).value
        for op in module.body.operations
        if op.operation.name == "func.func"
    }
