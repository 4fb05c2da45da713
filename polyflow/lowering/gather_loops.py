"""Innermost loops whose every moving access walks across rows stay scalar: LLVM's loop
vectorizer is told not to vectorize them (`llvm.loop_annotation`, vectorize disable).

Why: such a loop has no contiguous access for a vector load; vectorized, each access becomes a
gather or a scatter of one element per lane. With AVX-512 LLVM's cost model finds that
profitable, and on the Xeon these numbers come from it is not: seidel-2d's interleaved rows
(schedule/tiling.py `interleave_recurrence`: each iteration a row further down, two columns to
the left) ran LARGE -ffast-math, one thread, 5.97 s vectorized with gathers and 4.46 s scalar
(gcc -ffast-math: 9.14 s).

Which loops: an `affine.for` with no loop inside and no carried value (a sum down a column,
which -ffast-math lets LLVM vectorize, runs faster as gathers than as one scalar chain) whose
loads and stores that depend on its induction variable all use it in a subscript other than
the last (each iteration a row or more away), and at least one does. The annotation is set after `lower-affine` on the `scf.for` each
such loop becomes (`annotate_after_lowering`): lower-affine drops the attributes of the loops
it rewrites but keeps their order, so the loops are matched by their position among the
`affine.for` and `scf.for` ops of the module, and nothing is annotated if the counts differ;
convert-scf-to-cf carries it to the loop's back edge, where `move_loop_annotations` makes it
the branch's own.
"""

from __future__ import annotations

from mlir import ir

from polyflow.ir.affine import uses_operand
from polyflow.ir.functions import enclosing_function_name, source_names
from polyflow.ir.ops import walk
from polyflow.ir.remarks import attach_remarks, remark_at

ANNOTATION_ATTR = "llvm.loop_annotation"
_LOOPS = frozenset({"affine.for", "scf.for"})
_NESTED_LOOPS = frozenset({"affine.for", "affine.parallel", "scf.for", "scf.parallel", "scf.while"})


def row_walking_loops(module: ir.Module) -> list[bool]:
    """For each `affine.for` and `scf.for` of `module` in pre-order: whether it is an innermost
    `affine.for` whose moving accesses all walk across rows (see the module docstring)."""
    return [op.name == "affine.for" and _walks_rows(op) for op in _loops(module)]


def annotate_after_lowering(module: ir.Module, marks: list[bool]) -> int:
    """Give the `scf.for` loops at the positions `marks` says (from `row_walking_loops`, taken
    just before lower-affine) LLVM's "do not vectorize" annotation, each with a `kept-scalar`
    remark on the module (for the compile report); returns how many. Nothing is annotated when
    the loops no longer match the marks one for one."""
    loops = [op for op in _loops(module) if op.name == "scf.for"]
    if len(loops) != len(marks) or not any(marks):
        return 0
    annotation = ir.Attribute.parse(
        "#llvm.loop_annotation<vectorize = #llvm.loop_vectorize<disable = true>>"
    )
    names = source_names(module)
    said = []
    for loop, marked in zip(loops, marks, strict=True):
        if marked:
            loop.attributes[ANNOTATION_ATTR] = annotation
            symbol = enclosing_function_name(loop)
            said.append(
                remark_at(
                    loop.location,
                    "lowering",
                    "kept-scalar",
                    "remark",
                    "loop kept scalar: each access it makes moves a row or more per iteration "
                    "(vectorized, every one would be a gather or a scatter)",
                    function=names.get(symbol, symbol) if symbol else None,
                )
            )
    attach_remarks(module.operation, said)
    return len(said)


def move_loop_annotations(module: ir.Module) -> None:
    """Once `module` is in the LLVM dialect: the annotations convert-scf-to-cf carried onto the
    loops' back edges as a discardable attribute become the branch's own `loop_annotation`,
    the one the translation to LLVM IR reads (as `!llvm.loop` metadata)."""
    for op in walk(module.operation):
        if op.name in ("llvm.br", "llvm.cond_br") and ANNOTATION_ATTR in op.attributes:
            op.attributes["loop_annotation"] = op.attributes[ANNOTATION_ATTR]
            del op.attributes[ANNOTATION_ATTR]


def _loops(module: ir.Module) -> list[ir.Operation]:
    return [op for op in walk(module.operation) if op.name in _LOOPS]


def _walks_rows(loop: ir.Operation) -> bool:
    if len(loop.results) > 0:
        return False  # a sum down a column: vectorized under -ffast-math, gathers beat one chain
    body = loop.regions[0].blocks[0]
    iv = body.arguments[0]
    inner = [op for op in walk(loop) if op != loop]
    if any(op.name in _NESTED_LOOPS for op in inner):
        return False
    moving = 0
    for op in inner:
        if op.name not in ("affine.load", "affine.store"):
            continue
        first = 1 if op.name == "affine.load" else 2
        operands = list(op.operands)[first:]
        amap = ir.AffineMapAttr(op.attributes["map"]).value
        uses = [uses_operand(e, operands, amap.n_dims, iv) for e in amap.results]
        if not any(uses):
            continue
        if uses[-1] and not any(uses[:-1]):
            return False  # a contiguous (or strided along the row) access: vector loads pay
        moving += 1
    return moving > 0
