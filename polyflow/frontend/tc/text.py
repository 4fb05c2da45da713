"""TC source text of syntax-tree nodes: what the source transformations (forward mode,
rematerialized temporaries) write back out to be parsed and checked again."""

from __future__ import annotations

from . import syntax as ast


def type_text(t: ast.TensorType) -> str:
    return f"{t.element}({', '.join(str(d) for d in t.dims)})" if t.dims else t.element


def ranges_text(ranges: tuple[ast.RangeClause, ...]) -> str:
    if not ranges:
        return ""
    return " where " + ", ".join(
        f"{r.index} in {expr_text(r.low)}:{expr_text(r.high)}" for r in ranges
    )


def statement_text(statement: ast.Comprehension) -> str:
    indices = ", ".join(i.name for i in statement.indices)
    op = statement.op + ("!" if statement.init else "")
    return f"{statement.tensor}({indices}) {op} {expr_text(statement.rhs)}{ranges_text(statement.ranges)}"


def expr_text(expr: ast.Expr) -> str:
    if isinstance(expr, ast.Number):
        return repr(float(expr.value)) if expr.is_float else str(expr.value)
    if isinstance(expr, ast.Name):
        return expr.name
    if isinstance(expr, ast.DimSize):
        return f"{expr.tensor}.{expr.dim}"
    if isinstance(expr, ast.Unary):
        return f"({expr.op}{expr_text(expr.operand)})"
    if isinstance(expr, ast.Binary):
        return f"({expr_text(expr.left)} {expr.op} {expr_text(expr.right)})"
    if isinstance(expr, ast.Ternary):
        return f"({expr_text(expr.cond)} ? {expr_text(expr.then)} : {expr_text(expr.otherwise)})"
    return f"{expr.name}({', '.join(expr_text(a) for a in expr.args)})"
