"""Multiplies whose every use is an add or a subtract become one multiply-add per use
(`llvm.intr.fmuladd`: fused where the target has fused multiply-adds), as gcc forms them under
`-ffp-contract=fast`.

Why: LLVM's backend fuses a multiply only into its single use. heat-3d's
`A[i+1][j][k] - 2.0 * A[i][j][k]`, written three times for the three axes, is one multiply
(`A + A`) after common subexpressions and three subtracts: four ops per element on the two
ports that run vector floating point, where three fused ones do (gcc's code).

The rounding is that of contraction, which `fp_contract = "fast"` allows (each use rounds once
instead of twice); where the product is exact (a power of two times a value that neither
overflows nor underflows, heat-3d's) the results are the unfused ones to the bit.
"""

from __future__ import annotations

from mlir import ir

from polyflow.ir.ops import ops_named

_ADDS = frozenset({"llvm.fadd", "llvm.fsub"})


def fuse_shared_multiplies(module: ir.Module) -> int:
    """Replace each `llvm.fmul` used two or more times, only as an operand of `llvm.fadd` or
    `llvm.fsub` ops of its block (once each), by an `llvm.intr.fmuladd` per use; returns how
    many multiplies went."""
    fused = 0
    for multiply in ops_named(module.operation, "llvm.fmul"):
        uses = [(use.owner, use.operand_number) for use in multiply.results[0].uses]
        if len(uses) < 2 or not all(_fusable(multiply, user) for user, _ in uses):
            continue
        for user, position in uses:
            _fuse(multiply, user, position)
        multiply.erase()
        fused += 1
    return fused


def _fusable(multiply: ir.Operation, user: ir.OpView | ir.Operation) -> bool:
    user = user.operation
    operands = list(user.operands)
    return (
        user.name in _ADDS
        and user.block == multiply.block
        and sum(value == multiply.results[0] for value in operands) == 1
    )


def _fuse(multiply: ir.Operation, user: ir.OpView | ir.Operation, position: int) -> None:
    """`user` (an add or subtract with `multiply` as operand `position`) as a multiply-add."""
    user = user.operation
    a, b = list(multiply.operands)
    other = user.operands[1 - position]
    result_type = user.results[0].type
    attributes = (
        {"fastmathFlags": user.attributes["fastmathFlags"]}
        if "fastmathFlags" in user.attributes
        else {}
    )
    with ir.InsertionPoint(user), user.location:
        if user.name == "llvm.fsub" and position == 1:  # other - a * b = (-a) * b + other
            a = _negated(a, attributes)
        elif user.name == "llvm.fsub":  # a * b - other
            other = _negated(other, attributes)
        fused = ir.Operation.create(
            "llvm.intr.fmuladd",
            results=[result_type],
            operands=[a, b, other],
            attributes=attributes,
        )
    user.results[0].replace_all_uses_with(fused.results[0])
    user.erase()


def _negated(value: ir.Value, attributes: dict[str, ir.Attribute]) -> ir.Value:
    """`-value` (exact: the sign flips)."""
    return ir.Operation.create(
        "llvm.fneg", results=[value.type], operands=[value], attributes=attributes
    ).results[0]
