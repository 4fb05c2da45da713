"""Arguments every call passes as one constant become that constant in the function's body, so
that LLVM folds it: a `% n` by a known `n` is a multiply and shifts, not a division per element;
bounds become trip counts.

The frontend marks the arguments (`BOUND_VALUE_ATTR`, frontend/c_constant_arguments.py: a static
function whose every call in the unit passes the constant); the polyhedral stage ran on the
parametric function, so its schedule is the one it would be without the mark.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func

from polyflow.ir.functions import argument_attributes, set_argument_attributes
from polyflow.ir.names import BOUND_VALUE_ATTR


def bind_constant_arguments(module: ir.Module) -> int:
    """Replace every use of a function argument marked `BOUND_VALUE_ATTR` by an `arith.constant`
    of its value at the function's entry, and drop the mark; the number of arguments bound."""
    bound = 0
    for op in module.body.operations:
        fn = op.opview
        if not isinstance(fn, func.FuncOp) or fn.is_external or "arg_attrs" not in op.attributes:
            continue
        block = fn.entry_block
        attrs = argument_attributes(op.operation)
        for entries, arg in zip(attrs, block.arguments, strict=True):
            value = entries.pop(BOUND_VALUE_ATTR, None)
            if value is None:
                continue
            with ir.InsertionPoint.at_block_begin(block), op.location:
                constant = arith.ConstantOp(arg.type, value)
            arg.replace_all_uses_with(constant.result)
            bound += 1
        set_argument_attributes(op.operation, attrs)
    return bound
