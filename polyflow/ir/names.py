"""The names polyflow gives things in the IR, in one place so that every stage spells them alike:
symbol prefixes and suffixes, the discardable attributes one stage leaves for another (on
functions, loops and arguments), and the marks of isl schedule trees.

Attributes are read by later stages and by the reports; `polyflow/raising/CONTRACT.md` and
`polyflow/schedule/CONTRACT.md` say what each one promises.
"""

from __future__ import annotations

from mlir import ir

# ----- symbols
# The C-ABI entry of a compiled function `f` is `__polyflow_f` (a packed-argument wrapper).
CABI_PREFIX = "__polyflow_"
# A function left to the C compiler, as compiled code calls it (a trampoline cc defines).
TRAMPOLINE_PREFIX = "__polyflow_cc_"
# The alias guard's two copies of a function: the optimizable one and the one kept as written.
AFFINE_SUFFIX = ".affine"
SCF_SUFFIX = ".scf"
# The copies of a function whose C pointers are sized at run time (raising/pointer_extents.py):
# the one with extents, and the one that keeps the pointers (for overlapping calls).
SIZED_SUFFIX = ".sized"
POINTERS_SUFFIX = ".pointers"

# ----- on functions
# Why raising failed (also on the loops, ifs and accesses a pass could not raise).
NOT_AFFINE_ATTR = "polyflow.not_affine"
# Raising leaves this function alone (the alias guard's dispatcher and its unraised copy).
NO_RAISE_ATTR = "polyflow.no_raise"
# On the alias guard's dispatcher: the name of the copy the passes optimize.
DISPATCHER_ATTR = "polyflow.alias_dispatcher"
# Why the polyhedral stage kept a function's code.
NOT_SCHEDULED_ATTR = "polyflow.not_scheduled"
# Why the GPU mapping left a function on the host (`target="cuda"`).
NOT_MAPPED_ATTR = "polyflow.not_mapped"
# The isl schedule tree the polyhedral stage generated a function's code from.
SCHEDULE_ATTR = "polyflow.schedule"
# What a stage said about a function (`polyflow.report.Remark`s as JSON strings), until the
# pipeline moves them into the compile report (`polyflow.ir.remarks.take_remarks`).
REMARKS_ATTR = "polyflow.remarks"

# ----- on loops
# The C statement an `scf.while` was made from when it is not a `while` ("for", "do"): the
# reports name the loop as the source does.
C_LOOP_ATTR = "polyflow.c_loop"
# One reduction kind per iter_arg (add mul min max and or xor none), from raise-reductions.
REDUCTIONS_ATTR = "polyflow.reductions"
# isl showed the loop carries no dependence of its scop: upstream's analysis cannot see that
# through tile bounds (strides over max/min bounds), so the mark stands in for it.
INDEPENDENT_ATTR = "polyflow.independent"
# A wavefront's parallel tile loop; the same name marks it in the isl schedule tree.
WAVEFRONT_ATTR = "polyflow.wavefront"
# ... of a wavefront along the sum of its two outer block numbers (`tiling._wavefront`, not a
# diamond one): a block depends only on blocks of no later column (the parallel loop's
# iteration) and no later step, so columns may run as a pipeline (lowering/wavefront_pipeline.py).
WAVEFRONT_COLUMNS_ATTR = "polyflow.wavefront_columns"
# The loop could run its iterations in parallel (no carried dependence or value, no call, no
# aliasing conflict): set for `target="cuda"` on every such loop, nested ones too; the GPU
# mapping turns nests of them into blocks and threads.
PARALLEL_LOOP_ATTR = "polyflow.parallel_loop"
# On a sequential loop: the floating-point reductions whose updates carry `reassoc`.
REASSOCIATED_ATTR = "polyflow.reassociated"

# On a `memref.alloca` in a GPU kernel: the block's shared memory (one buffer per block), not
# a thread's; the CUDA lowering makes it a workgroup attribution (`.shared`).
SHARED_ATTR = "polyflow.shared"

# ----- on arguments
# A memref parameter made from a C pointer: its extent is unknown.
UNKNOWN_EXTENT_ATTR = "polyflow.unknown_extent"
# An array argument that aliases no other (the alias guard's copy, TC's inputs and outputs).
NOALIAS_ATTR = "llvm.noalias"
# A TC input read through a gather (its subscripts are data).
GATHER_ATTR = "polyflow.gather"
# An integer argument that every call passes as this constant (frontend/c_constant_arguments.py);
# the lowering replaces the argument by it (lowering/bound_arguments.py).
BOUND_VALUE_ATTR = "polyflow.bound_value"

# ----- marks in isl schedule trees
WAVEFRONT_MARK = WAVEFRONT_ATTR
WAVEFRONT_COLUMNS_MARK = WAVEFRONT_COLUMNS_ATTR
# A band of tiles that run in parallel (codegen tags the loop below it).
PARALLEL_TILES_MARK = "polyflow.parallel_tiles"


def symbol_name(op: ir.Operation | ir.OpView) -> str:
    """The `sym_name` of a function or global."""
    return ir.StringAttr(op.attributes["sym_name"]).value

# The gradient of function `f` (reverse mode, polyflow.autodiff) is the function `f` + this.
GRAD_SUFFIX = "_grad"
# On a declared gradient: which arguments of the primal function have a shadow (BoolAttrs, one per
# primal argument); without it, every array of floating-point elements has one.
ACTIVE_ARGUMENTS_ATTR = "polyflow.active_arguments"
# On a declared gradient: the arguments whose final values its caller ignores (a TC gradient
# that returns only adjoints), so that the forward sweep may skip the work that only they need
DISCARDED_ARGUMENTS_ATTR = "polyflow.discarded_arguments"
# On a top-level op: the scheduling stage starts a new region (scop) here. The adjoint marks each
# copy of a distributed nest (polyflow.autodiff): each is one contraction, scheduled on its own
# as a primal contraction is, rather than fused with the others.
REGION_START_ATTR = "polyflow.region_start"
# On a top-level loop: the scheduling stage leaves it in source order, out of every region (its
# loops are still parallelized by MLIR's dependence analysis). The adjoint marks the reversed
# sweeps of a time loop: isl's scheduler, given their many update statements, spent its AST
# budget (13 s on jacobi-2d's) for no faster code than the source order's.
KEEP_ORDER_ATTR = "polyflow.keep_order"


def gradient_name(name: str) -> str:
    """The name of the gradient function of `name`."""
    return name + GRAD_SUFFIX
