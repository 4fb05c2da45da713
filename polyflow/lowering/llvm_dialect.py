"""MLIR (func/scf/memref/arith/math, and affine once raised) → the LLVM dialect."""

from __future__ import annotations

from mlir import ir
from mlir.passmanager import PassManager

from polyflow.ir.functions import argument_attributes, set_argument_attributes
from polyflow.ir.names import NOALIAS_ATTR
from polyflow.lowering.alias_scopes import scope_noalias_accesses
from polyflow.lowering.bound_arguments import bind_constant_arguments
from polyflow.lowering.carried_values import carry_stored_values
from polyflow.lowering.float_reductions import deterministic_float_reductions
from polyflow.lowering.float_sum_trees import balance_float_sums
from polyflow.lowering.gather_loops import (
    annotate_after_lowering,
    move_loop_annotations,
    row_walking_loops,
)
from polyflow.lowering.libm_calls import call_libm_for_inexact_math
from polyflow.lowering.page_prefetch import prefetch_page_strided_accesses
from polyflow.lowering.parallel_threshold import serialize_small_parallel_loops
from polyflow.lowering.recurrences import recurrence_cycles
from polyflow.lowering.shared_multiplies import fuse_shared_multiplies
from polyflow.lowering.vector_alignment import align_vector_loops
from polyflow.lowering.vector_width import prefer_vector_width
from polyflow.lowering.wavefront_pipeline import (
    hand_out_columns_in_order,
    in_order_marks,
    pipeline_wavefront_columns,
    wavefront_column_marks,
)

# convert-math-to-llvm takes what LLVM has intrinsics for; math-to-libm the rest (tanh, erf...).
# convert-vector-to-llvm: the micro-kernels' vector loads, stores, broadcasts and FMAs.
_TO_LLVM = [
    "convert-vector-to-llvm",
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
# Run in two parts: between them, `hoist_loop_allocas` moves the reduction variables that
# convert-scf-to-openmp allocates next to each parallel loop out of enclosing sequential loops.
# Between lower-affine and convert-scf-to-openmp, float reductions get a fixed combination order
# (float_reductions.py).
PARALLEL_TO_OPENMP = "lower-affine,convert-scf-to-openmp"
LOWER_PARALLEL_TO_LLVM = ",".join(
    [
        "canonicalize",
        "convert-scf-to-cf",
        "canonicalize",
        *_TO_LLVM,
        "convert-openmp-to-llvm",
        "convert-func-to-llvm",
        "reconcile-unrealized-casts",
    ]
)

# -g: a DISubprogram per function from its location; LLVM then keeps each op's line.
LINE_TABLES = "ensure-debug-info-scope-on-llvm-func{emission-kind=LineTablesOnly}"

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


def lower_to_llvm_dialect(
    module: ir.Module,
    *,
    threads: int | None = None,
    fast_math: bool = False,
    line_tables: bool = False,
    gpu_host: bool = False,
    vector_bytes: int | None = None,
    min_parallel_work: int | None = None,
    vector_bits: int | None = None,
    contract: bool = False,
) -> ir.Module:
    """Lower every op to the LLVM dialect in place; the module is then translatable to LLVM IR.
    Parallel loops become OpenMP (`omp` ops, calls into libiomp5 once translated), run by
    `threads` threads (None: as many as the OpenMP runtime decides when the program runs).
    With `fast_math` (-ffast-math) every floating-point op gets LLVM's `fast` flags (those of
    a recurrence that is not a reduction all but reassociation, `allow_fast_math`); with
    `line_tables` (-g) each function gets a debug scope, so its ops' file:line:col locations
    become the object's line table. `gpu_host`: the module launches kernels (`gpu.binary` and
    `gpu.launch_func`), which become calls of the CUDA runtime (drivers/cuda_runtime.c).
    `vector_bytes`: vector loops start where their store is aligned to that many bytes
    (`vector_alignment.py`; None: as they are). `min_parallel_work`: a parallel loop whose work
    is known only at run time forks the threads only when it runs at least that many innermost
    iterations (`parallel_threshold.py`; None: always). `vector_bits`: LLVM's vectorizers may
    use vectors that wide in the functions where that pays (`vector_width.py`; None: LLVM's
    choice everywhere). `contract`: a multiply whose every use is an add becomes a multiply-add
    per use (`shared_multiplies.py`; LLVM fuses a multiply into one use only). Arguments the
    frontend found constant at every call become that constant first (`bound_arguments.py`)."""
    with module.context:
        bind_constant_arguments(module)
        if vector_bits:
            prefer_vector_width(module, vector_bits)
        call_libm_for_inexact_math(module)
        with ir.Location.unknown():
            carry_stored_values(module)
            prefetch_page_strided_accesses(module)
            if vector_bytes:
                align_vector_loops(module, vector_bytes)
        if fast_math:
            allow_fast_math(module)
            with ir.Location.unknown():
                balance_float_sums(module)
        noalias = _noalias_pointer_positions(module)
        # loops whose every access would be a gather stay scalar (gather_loops.py): marked
        # before lower-affine, annotated on the scf.for each becomes
        row_walks = row_walking_loops(module)
        if has_parallel_loops(module):
            to_scf, to_openmp = PARALLEL_TO_OPENMP.split(",")
            if threads is not None:
                to_openmp += f"{{num-threads={threads}}}"
            columns = wavefront_column_marks(module)
            PassManager.parse(f"builtin.module({to_scf})").run(module.operation)
            annotate_after_lowering(module, row_walks)
            if threads != 1:  # one thread: the wavefront's steps as they are
                with ir.Location.unknown():
                    pipeline_wavefront_columns(module, columns)
            deterministic_float_reductions(module.operation)
            if min_parallel_work:
                with ir.Location.unknown():
                    serialize_small_parallel_loops(module, min_parallel_work)
            in_order = in_order_marks(module)
            PassManager.parse(f"builtin.module({to_openmp})").run(module.operation)
            hoist_loop_allocas(module)
            schedule_tile_loops_dynamically(module)
            hand_out_columns_in_order(module, in_order)
            pipeline = LOWER_PARALLEL_TO_LLVM
        else:
            PassManager.parse("builtin.module(lower-affine)").run(module.operation)
            annotate_after_lowering(module, row_walks)
            pipeline = LOWER_TO_LLVM
        if gpu_host:  # launches, GPU allocations and copies → calls of the CUDA runtime
            # (synchronous gpu.alloc and gpu.memcpy lower only in their async form)
            pipeline = pipeline.replace(
                "convert-scf-to-cf,", "convert-scf-to-cf,func.func(gpu-async-region),gpu-to-llvm,", 1
            )
        if line_tables:
            pipeline += f",{LINE_TABLES}"
        PassManager.parse(f"builtin.module({pipeline})").run(module.operation)
        if contract:
            fuse_shared_multiplies(module)
        move_loop_annotations(module)
        _mark_noalias_pointers(module, noalias)
        scope_noalias_accesses(module, noalias)
    return module


# The ops that carry `fastmath` flags (arith's floating-point ops and every math op).
_FLOAT_OPS = frozenset(
    {"arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.remf", "arith.negf",
     "arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf", "arith.cmpf"}
)  # fmt: skip


def allow_fast_math(module: ir.Module) -> ir.Module:
    """Give every floating-point op of `module` the `fast` flags (-ffast-math as clang means
    it: reassociation, no NaNs, no infinities, no signed zeros, reciprocals, contraction,
    approximate functions), except reassociation on the ops of a recurrence that is not a
    reduction (`recurrence_ops`)."""
    fast = ir.Attribute.parse("#arith.fastmath<fast>")
    in_order = ir.Attribute.parse("#arith.fastmath<nnan,ninf,nsz,arcp,contract,afn>")
    recurrences = set(recurrence_ops(module))

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in _FLOAT_OPS or (op.name.startswith("math.") and _float_results(op)):
            op.attributes["fastmath"] = in_order if op in recurrences else fast
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return module


def recurrence_ops(module: ir.Module) -> list[ir.Operation]:
    """The ops of loop bodies on the path from a loop-carried value (`iter_args`) to its next
    value, for each carried value that is not a plain reduction. Reassociating them does not
    vectorize anything and can put the carried value deeper in the expression: LLVM moved
    adi's `a * q[j-1]` to the start of a sum of four, a longer chain from one iteration to the
    next, and -ffast-math ran adi a third slower than C's order (6.4 s against 4.7 s). A
    plain sum or product (`recurrences.FLOAT_REDUCTION_KINDS`) keeps reassociation: that is what
    lets LLVM vectorize it."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in ("affine.for", "scf.for") and len(op.results) > 0:
            found.extend(recurrence_cycles(op))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def _float_results(op: ir.Operation) -> bool:
    """Whether `op` computes floats (math's float ops carry `fastmath`; its integer ones,
    `math.absi` and the like, do not)."""
    types = [r.type for r in op.results]
    return bool(types) and all(
        isinstance(ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t, ir.FloatType)
        for t in types
    )


def schedule_tile_loops_dynamically(module: ir.Module) -> ir.Module:
    """Give each OpenMP loop over tiles (a constant step above 1) a dynamic schedule: the tiles
    of a triangular nest hold unequal work, and the static split gave one of two threads three
    quarters of cholesky's trailing update (1.33x on 2 threads instead of 1.8x)."""
    dynamic = ir.Attribute.parse("#omp<schedulekind dynamic>")

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "omp.wsloop" and "schedule_kind" not in op.attributes:
            nest = op.regions[0].blocks[0].operations[0].operation
            if nest.name == "omp.loop_nest" and all(_constant_above_one(s) for s in _steps(nest)):
                op.attributes["schedule_kind"] = dynamic
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return module


def _steps(nest: ir.Operation) -> list[ir.Value]:
    operands = list(nest.operands)
    rank = len(operands) // 3  # lower bounds, upper bounds, steps
    return operands[2 * rank :]


def _constant_above_one(value: ir.Value) -> bool:
    owner = value.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name != "arith.constant":
        return False
    attr = owner.attributes["value"]
    return isinstance(attr, ir.IntegerAttr) and attr.value > 1


def hoist_loop_allocas(module: ir.Module) -> ir.Module:
    """Move each constant-size `llvm.alloca` that sits in a loop (outside any OpenMP region) to
    its function's entry block; the memory is the same on every iteration.

    convert-scf-to-openmp allocates a parallel loop's reduction variables just before it, so
    inside a sequential loop each iteration would grow the stack (symm and ludcmp overflowed
    8 MiB at LARGE size). The variable is initialized right after the alloca, before every use,
    so one slot serves all iterations. An alloca inside an `omp` region stays: it is per thread.
    """
    for fn in module.body.operations:
        if fn.operation.name != "func.func" or not fn.operation.regions[0].blocks:
            continue
        entry = fn.operation.regions[0].blocks[0]
        for alloca in _loop_allocas(fn.operation, entry):
            size = alloca.operands[0].owner
            first = entry.operations[0]
            size.move_before(first)
            alloca.move_before(first)
    return module


def _loop_allocas(fn: ir.Operation, entry: ir.Block) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("omp."):
            return ir.WalkResult.SKIP
        if (
            op.name == "llvm.alloca"
            and op.block != entry
            and len(op.operands) == 1
            and isinstance(op.operands[0], ir.OpResult)
            and op.operands[0].owner.name == "llvm.mlir.constant"
            and len(list(op.operands[0].uses)) == 1
        ):
            found.append(op)
        return ir.WalkResult.ADVANCE

    fn.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def _noalias_pointer_positions(module: ir.Module) -> dict[str, list[int]]:
    """For each func with `llvm.noalias` memref arguments: the positions, after
    convert-func-to-llvm expands each memref into (allocated, aligned, offset, sizes, strides),
    of their aligned pointers (the one every access goes through)."""
    positions: dict[str, list[int]] = {}
    for view in module.body.operations:
        op = view.operation
        if op.name != "func.func" or "arg_attrs" not in op.attributes:
            continue
        arg_attrs = ir.ArrayAttr(op.attributes["arg_attrs"])
        expanded, marked = 0, []
        for k, arg in enumerate(op.regions[0].blocks[0].arguments):
            if isinstance(arg.type, ir.MemRefType):
                if NOALIAS_ATTR in ir.DictAttr(arg_attrs[k]):
                    marked.append(expanded + 1)
                expanded += 3 + 2 * ir.MemRefType(arg.type).rank
            else:
                expanded += 1
        if marked:
            positions[ir.StringAttr(op.attributes["sym_name"]).value] = marked
    return positions


def _mark_noalias_pointers(module: ir.Module, positions: dict[str, list[int]]) -> None:
    """Put `llvm.noalias` on the pointer arguments `_noalias_pointer_positions` found (the
    conversion to the LLVM dialect drops the attribute from expanded memref arguments)."""
    for view in module.body.operations:
        op = view.operation
        if op.name != "llvm.func":
            continue
        marked = positions.get(ir.StringAttr(op.attributes["sym_name"]).value)
        if not marked:
            continue
        attrs = argument_attributes(op)
        for k in marked:
            attrs[k][NOALIAS_ATTR] = ir.UnitAttr.get()
        set_argument_attributes(op, attrs)
