"""MLIR (func/scf/memref/arith/math, and affine once raised) → the LLVM dialect."""

from __future__ import annotations

from mlir import ir
from mlir.passmanager import PassManager

# convert-math-to-llvm takes what LLVM has intrinsics for; math-to-libm the rest (tanh, erf...).
LOWER_TO_LLVM = ",".join(
    [
        "lower-affine",
        "convert-scf-to-cf",
        "canonicalize",
        "convert-math-to-llvm",
        "convert-math-to-libm",
        "expand-strided-metadata",
        "lower-affine",
        "finalize-memref-to-llvm",
        "convert-ub-to-llvm",
        "convert-arith-to-llvm",
        "convert-index-to-llvm",
        "convert-cf-to-llvm",
        "convert-func-to-llvm",
        "reconcile-unrealized-casts",
    ]
)


def lower_to_llvm_dialect(module: ir.Module) -> ir.Module:
    """Lower every op to the LLVM dialect in place; the module is then translatable to LLVM IR."""
    with module.context:
        PassManager.parse(f"builtin.module({LOWER_TO_LLVM})").run(module.operation)
    return module
