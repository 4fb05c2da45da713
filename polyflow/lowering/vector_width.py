"""The vector width LLVM's vectorizers use, per function: the target's whole SIMD register
where that pays, LLVM's narrower default where it does not.

LLVM tunes AVX-512 Intel cores (Ice Lake, Sapphire Rapids...) to prefer 256-bit vectors, gcc -O3
-march=native uses 512-bit ones, and on stencils the difference is the core's: LARGE, 1 thread,
heat-3d 1.16 -> 0.91 s, jacobi-1d 0.36 -> 0.30 ms with 512-bit vectors (gcc: 1.2 s, 0.28 ms).
Sums kept in C's order (vectorized as ordered reductions, lane after lane) lose instead: bicg
1.27 -> 1.68 ms, atax 3.5 -> 4.9 ms, gesummv 1.6 -> 2.0 ms; so a function with a float
accumulator it may not reorder (in a register or, where the loop was not raised, in memory)
keeps LLVM's choice, and so does a function that calls one, as what it inlines takes its
width. That keeps doitgen's at 256 bits through its alias dispatcher, whose fallback copy sums
in memory, and rightly: with 512-bit vectors its optimized copy ran 0.098 -> 0.121 s (0.103 ->
0.127 under -ffast-math), so wider is not always better, and the rule is measured, not derived.
Under -ffast-math the same rule applies (sums schedule-parallelize marked reorderable count as
reorderable). The preference is a function attribute, which the functions LLVM outlines for
OpenMP inherit.
"""

from __future__ import annotations

from mlir import ir

from polyflow.ir.names import REASSOCIATED_ATTR
from polyflow.ir.ops import defined_in, walk

_LOOPS = frozenset({"affine.for", "scf.for", "scf.while"})
_UNRAISED_LOOPS = frozenset({"scf.for", "scf.while"})


def prefer_vector_width(module: ir.Module, bits: int) -> list[str]:
    """Give each function of `module` with a body and no float sum kept in C's order, whose
    callees in `module` are such functions too, the LLVM attribute `prefer-vector-width=bits`;
    returns their names. Call before lowering makes `scf` loops of affine ones and the
    functions `llvm.func` (the attribute is carried over)."""
    functions = {
        ir.StringAttr(op.operation.attributes["sym_name"]).value: op.operation
        for op in module.body.operations
        if op.operation.name == "func.func" and len(op.operation.regions[0].blocks) > 0
    }
    # a function takes the preference into the functions inlined into it (a C entry point, a
    # dispatcher): only where everything it calls here qualifies too
    qualifies = {name: not _may_sum_in_order(fn) for name, fn in functions.items()}
    calls = {name: _callees(fn) for name, fn in functions.items()}
    changed = True
    while changed:
        changed = False
        for name in functions:
            if qualifies[name] and not all(qualifies.get(c, True) for c in calls[name]):
                qualifies[name] = False
                changed = True
    width = ir.ArrayAttr.get(
        [ir.ArrayAttr.get([ir.StringAttr.get("prefer-vector-width"), ir.StringAttr.get(str(bits))])]
    )
    marked = [name for name in functions if qualifies[name]]
    for name in marked:
        functions[name].attributes["passthrough"] = width
    return marked


def _callees(function: ir.Operation) -> set[str]:
    return {
        ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        for op in walk(function)
        if op.name == "func.call"
    }


def _may_sum_in_order(function: ir.Operation) -> bool:
    """Whether a loop of `function` carries a float value from one iteration to the next in C's
    order: as a loop result (`iter_args`) that schedule-parallelize has not marked reorderable
    (`polyflow.reassociated`), or, in a loop left unraised, through memory (a float loaded and
    stored back at the same place, which the loop does not move: a C sum `s += ...`)."""
    found = False

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal found
        if op.name in _LOOPS and REASSOCIATED_ATTR not in op.attributes:
            if any(isinstance(result.type, ir.FloatType) for result in op.results):
                found = True
        if op.name in _UNRAISED_LOOPS and _sums_through_memory(op):
            found = True
        return ir.WalkResult.INTERRUPT if found else ir.WalkResult.ADVANCE

    function.walk(visit)
    return found


def _sums_through_memory(loop: ir.Operation) -> bool:
    loads: set[tuple[ir.Value, tuple[ir.Value, ...]]] = set()
    stores: list[tuple[ir.Value, tuple[ir.Value, ...]]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "memref.load" and isinstance(op.results[0].type, ir.FloatType):
            operands = list(op.operands)
            loads.add((operands[0], tuple(operands[1:])))
        elif op.name == "memref.store" and isinstance(op.operands[0].type, ir.FloatType):
            operands = list(op.operands)
            stores.append((operands[1], tuple(operands[2:])))
        return ir.WalkResult.ADVANCE

    loop.walk(visit)
    return any(
        place in loads and all(not defined_in(index, loop) for index in place[1])
        for place in stores
    )
