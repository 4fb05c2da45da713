"""MLIR (func/scf/memref/arith/math, and affine once raised) → the LLVM dialect."""

from __future__ import annotations

from mlir import ir
from mlir.passmanager import PassManager

# convert-math-to-llvm takes what LLVM has intrinsics for; math-to-libm the rest (tanh, erf...).
_TO_LLVM = [
    "convert-math-to-llvm",
    "convert-math-to-libm",
    "expand-strided-metadata",
    "lower-affine",
    "finalize-memref-to-llvm",
    "convert-ub-to-llvm",
    "convert-arith-to-llvm",
    "convert-index-to-llvm",
    "convert-cf-to-llvm",
]
LOWER_TO_LLVM = ",".join(
    [
        "lower-affine",
        "convert-scf-to-cf",
        "canonicalize",
        *_TO_LLVM,
        "convert-func-to-llvm",
        "reconcile-unrealized-casts",
    ]
)
# With parallel loops: affine.parallel → scf.parallel (reductions → scf.reduce) → omp.parallel +
# omp.wsloop (reductions → omp.declare_reduction). canonicalize then inlines the
# memref.alloca_scope that convert-scf-to-openmp wraps loop bodies in (convert-scf-to-cf cannot
# lower it). convert-openmp-to-llvm rewrites the omp ops' operand and region types once their
# contents are LLVM; the OpenMP translation then emits the __kmpc_* runtime calls.
LOWER_PARALLEL_TO_LLVM = ",".join(
    [
        "lower-affine",
        "convert-scf-to-openmp",
        "canonicalize",
        "convert-scf-to-cf",
        "canonicalize",
        *_TO_LLVM,
        "convert-openmp-to-llvm",
        "convert-func-to-llvm",
        "reconcile-unrealized-casts",
    ]
)

_PARALLEL_OPS = frozenset({"affine.parallel", "scf.parallel"})


def has_parallel_loops(module: ir.Module) -> bool:
    """Whether `module` has loops that lower to OpenMP (`affine.parallel`, `scf.parallel`) or
    is already lowered from them (`omp` ops)."""
    found = False

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal found
        if op.name in _PARALLEL_OPS or op.name.startswith("omp."):
            found = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    with module.context:
        module.operation.walk(visit)
    return found


def lower_to_llvm_dialect(module: ir.Module) -> ir.Module:
    """Lower every op to the LLVM dialect in place; the module is then translatable to LLVM IR.
    Parallel loops become OpenMP (`omp` ops, calls into libiomp5 once translated)."""
    pipeline = LOWER_PARALLEL_TO_LLVM if has_parallel_loops(module) else LOWER_TO_LLVM
    with module.context:
        PassManager.parse(f"builtin.module({pipeline})").run(module.operation)
    return module
