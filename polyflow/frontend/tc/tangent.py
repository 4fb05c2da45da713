"""Forward-mode differentiation of a TC definition by source transformation: the tangent of a
comprehension is a comprehension (`O(i) +=! A(i,k)·B(k)` gives `O_dot(i) +=! A_dot(i,k)·B(k) +
A(i,k)·B_dot(k)`), so `<name>_jvp` is a TC definition like any other, checked, scheduled and
compiled by the same pipeline, and reverse mode can differentiate it again (Hessian–vector
products).

`<name>_jvp` takes the definition's parameters, then one tangent per parameter of `wrt`
(`<p>_dot`, the same type), and returns the outputs, then one tangent per output
(`<o>_dot`), then helpers: the tie counts of `max=!`/`min=!` reductions (whose tangent is the
mean of the tangents of the elements that reach the extreme) and the zero counts and products
of the nonzero factors of `*=!` reductions (exact with zeros). Comparisons, rounding and
integers carry no tangent. Calls of other definitions and `*=`/`max=`/`min=` without `!`
(updates of an existing value) are refused (`ValueError`).
"""

from __future__ import annotations

from collections.abc import Callable

from . import syntax as ast
from .text import expr_text, ranges_text, statement_text, type_text

# d f(x) / dx for the builtins of one float argument, as a TC expression of x (text)
_UNARY: dict[str, Callable[[str], str] | None] = {
    "exp": lambda x: f"exp({x})",
    "exp2": lambda x: f"(exp2({x}) * 0.6931471805599453)",
    "expm1": lambda x: f"exp({x})",
    "log": lambda x: f"(1.0 / ({x}))",
    "log2": lambda x: f"(1.0 / (({x}) * 0.6931471805599453))",
    "log10": lambda x: f"(1.0 / (({x}) * 2.302585092994046))",
    "log1p": lambda x: f"(1.0 / (1.0 + ({x})))",
    "sqrt": lambda x: f"(0.5 / sqrt({x}))",
    "rsqrt": lambda x: f"(-0.5 * rsqrt({x}) / ({x}))",
    "cbrt": lambda x: f"(cbrt({x}) / (3.0 * ({x})))",
    "tanh": lambda x: f"(1.0 - tanh({x}) * tanh({x}))",
    "sigmoid": lambda x: f"(sigmoid({x}) * (1.0 - sigmoid({x})))",
    "erf": lambda x: f"(1.1283791670955126 * exp(-({x}) * ({x})))",
    "erfc": lambda x: f"(-1.1283791670955126 * exp(-({x}) * ({x})))",
    "sin": lambda x: f"cos({x})",
    "cos": lambda x: f"(-sin({x}))",
    "tan": lambda x: f"(1.0 + tan({x}) * tan({x}))",
    "asin": lambda x: f"rsqrt(1.0 - ({x}) * ({x}))",
    "acos": lambda x: f"(-rsqrt(1.0 - ({x}) * ({x})))",
    "atan": lambda x: f"(1.0 / (1.0 + ({x}) * ({x})))",
    "sinh": lambda x: f"cosh({x})",
    "cosh": lambda x: f"sinh({x})",
    "asinh": lambda x: f"rsqrt(({x}) * ({x}) + 1.0)",
    "acosh": lambda x: f"rsqrt(({x}) * ({x}) - 1.0)",
    "atanh": lambda x: f"(1.0 / (1.0 - ({x}) * ({x})))",
    # pieces of rounding: no tangent
    "floor": None,
    "ceil": None,
    "round": None,
    "trunc": None,
}

_COMPARISONS = frozenset({"<", "<=", ">", ">=", "==", "!=", "&&", "||"})


def tangent_name(name: str) -> str:
    return f"{name}_dot"


def jvp_definition(program: ast.Program, name: str, wrt: tuple[str, ...]) -> tuple[str, list[str]]:
    """The TC source of `<name>_jvp` (see the module docstring) and the names of its helper
    outputs (after the outputs' tangents: tie counts, zero counts and products)."""
    definition = program.find(name)
    if definition is None:
        raise ValueError(f"no definition '{name}'")
    scalars = {p.name for p in definition.params if not p.type.dims}
    active: set[str] = set(wrt)
    lines: list[str] = []
    helpers: list[str] = []
    tensors = {p.name for p in definition.params} | {o.name for o in definition.outputs}
    for statement in definition.body:
        if isinstance(statement, ast.CallStatement):
            raise ValueError(
                f"{name}(): forward mode does not differentiate calls of other definitions "
                f"(line {statement.pos.line})"
            )
        lines.append(statement_text(statement))
        lines += _tangent_statements(statement, active, scalars, tensors, helpers)
    for output in definition.outputs:
        if output.name not in active:  # its tangent is zero; shaped like it
            indices = _indices_of(definition, output.name)
            if indices is None:
                raise ValueError(f"{name}(): no statement writes output '{output.name}'")
            lines.append(f"{tangent_name(output.name)}({indices}) = 0.0 * {output.name}({indices})")
    params = [f"{type_text(p.type)} {p.name}" for p in definition.params]
    params += [
        f"{type_text(p.type)} {tangent_name(p.name)}" for p in definition.params if p.name in wrt
    ]
    outputs = [o.name for o in definition.outputs]
    outputs += [tangent_name(o) for o in outputs] + helpers
    body = "\n".join(f"  {line}" for line in lines)
    text = f"def {name}_jvp({', '.join(params)}) -> ({', '.join(outputs)}) {{\n{body}\n}}\n"
    return text, helpers


def _indices_of(definition: ast.Definition, tensor: str) -> str | None:
    for statement in definition.body:
        if isinstance(statement, ast.Comprehension) and statement.tensor == tensor:
            return ", ".join(i.name for i in statement.indices)
    return None


def _tangent_statements(
    statement: ast.Comprehension,
    active: set[str],
    scalars: set[str],
    tensors: set[str],
    helpers: list[str],
) -> list[str]:
    """The comprehensions computing the tangent of `statement`'s tensor after it (none where
    it is not active); marks the tensor active when its tangent is not zero."""
    derivative = _derivative(statement.rhs, active, scalars, tensors)
    tensor = statement.tensor
    dot = tangent_name(tensor)
    indices = ", ".join(i.name for i in statement.indices)
    where = ranges_text(statement.ranges)
    if derivative is None:
        if tensor in active and statement.op != "=":  # an update of an active tensor: unchanged
            return []
        active.discard(tensor)
        return []
    if statement.op in ("max=", "min=", "*=") and not statement.init:
        raise ValueError(
            f"forward mode needs '{statement.op}!' (line {statement.pos.line}): an update of "
            "an existing value is not differentiated"
        )
    if statement.op == "*=":
        # Σ_k (Π_{j≠k} x_j)·ẋ_k exactly, zeros included: with no zero factor the product of
        # the others is p/x_k; with one, only that factor's term remains, times the product
        # of the nonzero ones; with more, nothing
        zeros, rest = f"{dot}_zeros", f"{dot}_rest"
        helpers += [zeros, rest]
        factor = expr_text(statement.rhs)
        at = f"({indices})"
        active.add(tensor)
        return [
            f"{zeros}{at} +=! (({factor}) == 0.0) ? 1.0 : 0.0{where}",
            f"{rest}{at} *=! (({factor}) == 0.0) ? 1.0 : ({factor}){where}",
            f"{dot}{at} +=! (({factor}) == 0.0) ? (({zeros}{at} == 1.0) ? ({rest}{at} * "
            f"({derivative})) : 0.0) : (({zeros}{at} == 0.0) ? ({rest}{at} * ({derivative}) / "
            f"({factor})) : 0.0){where}",
        ]
    if statement.op in ("max=", "min="):
        count = f"{dot}_ties"
        helpers.append(count)
        reaches = f"({expr_text(statement.rhs)}) == {tensor}({indices})"
        active.add(tensor)
        return [
            f"{count}({indices}) +=! ({reaches}) ? 1.0 : 0.0{where}",
            f"{dot}({indices}) +=! ({reaches}) ? ({derivative}) : 0.0{where}",
            f"{dot}({indices}) = {dot}({indices}) / {count}({indices})",
        ]
    active.add(tensor)
    op = statement.op + ("!" if statement.init else "")
    return [f"{dot}({indices}) {op} {derivative}{where}"]


def _derivative(
    expr: ast.Expr, active: set[str], scalars: set[str], tensors: set[str]
) -> str | None:
    """The tangent of `expr` as TC text; None where it is zero. `tensors`: the definition's
    parameters and outputs (an `Apply` of one is an access, of anything else a builtin)."""
    d = lambda e: _derivative(e, active, scalars, tensors)  # noqa: E731
    if isinstance(expr, (ast.Number, ast.DimSize)):
        return None
    if isinstance(expr, ast.Name):
        return tangent_name(expr.name) if expr.name in active and expr.name in scalars else None
    if isinstance(expr, ast.Unary):
        if expr.op != "-":
            return None
        inner = d(expr.operand)
        return None if inner is None else f"(-({inner}))"
    if isinstance(expr, ast.Ternary):
        then, otherwise = d(expr.then), d(expr.otherwise)
        if then is None and otherwise is None:
            return None
        return f"(({expr_text(expr.cond)}) ? ({then or '0.0'}) : ({otherwise or '0.0'}))"
    if isinstance(expr, ast.Binary):
        if expr.op in _COMPARISONS:
            return None
        a, b = expr_text(expr.left), expr_text(expr.right)
        da, db = d(expr.left), d(expr.right)
        if da is None and db is None:
            return None
        if expr.op == "+":
            return _sum(da, db)
        if expr.op == "-":
            return _sum(da, None if db is None else f"(-({db}))")
        if expr.op == "*":
            return _sum(
                None if da is None else f"({da}) * ({b})", None if db is None else f"({a}) * ({db})"
            )
        if expr.op == "/":
            return _sum(
                None if da is None else f"({da}) / ({b})",
                None if db is None else f"(-({a}) * ({db}) / (({b}) * ({b})))",
            )
        raise ValueError(f"forward mode does not differentiate '{expr.op}' yet")
    assert isinstance(expr, ast.Apply)
    args = [expr_text(a) for a in expr.args]
    if expr.name in tensors:  # an access: its subscripts are indices, never differentiated
        return f"{tangent_name(expr.name)}({', '.join(args)})" if expr.name in active else None
    if expr.name in _UNARY or expr.name in ("fabs", "abs"):
        inner = d(expr.args[0])
        if inner is None:
            return None
        if expr.name in ("fabs", "abs"):
            return f"((({args[0]}) < 0.0) ? (-({inner})) : ({inner}))"
        rule = _UNARY[expr.name]
        return None if rule is None else f"({rule(args[0])}) * ({inner})"
    derivatives = [d(a) for a in expr.args]
    if expr.name not in _BUILTINS_OF_SEVERAL:
        raise ValueError(f"forward mode has no rule for '{expr.name}' yet")
    if all(x is None for x in derivatives):
        return None
    da, db = (x or "0.0" for x in derivatives[:2])
    a, b = args[0], args[1]
    if expr.name in ("fmax", "max", "fmin", "min"):
        wins = ">" if "max" in expr.name else "<"
        loses = "<" if wins == ">" else ">"
        return f"((({a}) {wins} ({b})) ? ({da}) : ((({a}) {loses} ({b})) ? ({db}) : (0.5 * (({da}) + ({db})))))"
    if expr.name == "pow":
        return _sum(
            None if derivatives[0] is None else f"({b}) * pow({a}, ({b}) - 1.0) * ({da})",
            None if derivatives[1] is None else f"pow({a}, {b}) * log({a}) * ({db})",
        )
    if expr.name == "atan2":  # atan2(y, x)
        return f"((({b}) * ({da}) - ({a}) * ({db})) / (({a}) * ({a}) + ({b}) * ({b})))"
    if expr.name == "fmod":
        return _sum(
            None if derivatives[0] is None else f"({da})",
            None if derivatives[1] is None else f"(-trunc(({a}) / ({b})) * ({db}))",
        )
    if expr.name == "copysign":
        if derivatives[0] is None:
            return None
        return f"(copysign(1.0, {a}) * copysign(1.0, {b}) * ({da}))"
    assert expr.name == "fma"
    dc = derivatives[2]
    return _sum(
        _sum(
            None if derivatives[0] is None else f"({da}) * ({b})",
            None if derivatives[1] is None else f"({a}) * ({db})",
        ),
        dc,
    )


_BUILTINS_OF_SEVERAL = frozenset(
    {"fmax", "fmin", "max", "min", "pow", "atan2", "fmod", "copysign", "fma"}
)


def _sum(a: str | None, b: str | None) -> str | None:
    if a is None:
        return b
    if b is None:
        return a
    return f"({a} + {b})"
