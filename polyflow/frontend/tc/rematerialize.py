"""A TC definition without some of its temporaries: an output that nobody asks for (a gradient's
caller wants neither its value nor its adjoint), defined by one plain assignment of a cheap
expression of the parameters (`xc(i,k,a) = x(i,a) - means(k,a)`), is substituted into the
statements that read it (`qx(i,k,a) += Lt(k,a,b) * (x(i,b) - means(k,b))`), and neither
computed nor returned.

Why: reverse mode gives every array of the forward sweep a shadow as large; a temporary as
large as GMM's (n·K·d) then costs four arrays (its value, its shadow, and the buffers the caller
hands over for them), which made the gradient's peak memory twice the primal's. Recomputing a
subtraction where it is read is cheaper than storing it and reading it back.

Cheap: `+`, `-`, `*`, negation, numbers and reads of parameters (which no statement writes, so
the substitution reads the same values). The values of the other outputs are those of the
definition: each read of the temporary is replaced by the expression it stored.

The same rewrite computes once what a statement computes again in loops it does not depend on:
a costly builtin of parameters (`exp(qlog(k,a))` in a statement over i, k, a) goes into a
temporary over its own indices (`hoisted_0(k,a)`), an output more that nobody seeds; GMM's
gradient then calls exp K·d times instead of n·K·d (its adjoint reads the temporary back).
"""

from __future__ import annotations

from collections.abc import Callable

from . import syntax as ast
from .text import expr_text, statement_text, type_text

_CHEAP = frozenset({"+", "-", "*"})


def without_temporaries(
    definition: ast.Definition, unwanted: set[str]
) -> tuple[str, list[str]] | None:
    """The TC source of `definition` with the outputs of `unwanted` it can drop substituted
    into their readers and invariant costly calls hoisted (module docstring), and the names of
    its outputs (those it keeps, then the hoisted temporaries); None where it changes nothing."""
    if any(isinstance(s, ast.CallStatement) for s in definition.body):
        return None
    params = {p.name for p in definition.params}
    body = [s for s in definition.body if isinstance(s, ast.Comprehension)]
    dropped: set[str] = set()
    for output in definition.outputs:
        name = output.name
        if name not in unwanted:
            continue
        writes = [k for k, s in enumerate(body) if s.tensor == name]
        if len(writes) != 1:
            continue
        at = writes[0]
        statement = body[at]
        if not _plain_assignment(statement, params):
            continue
        if any(_reads(s, name) for s in body[: at + 1]):
            continue
        if any(_reads_in_ranges(s, name) for s in body):
            continue
        indices = [i.name for i in statement.indices]
        body = body[:at] + [_substituted(s, name, indices, statement.rhs) for s in body[at + 1 :]]
        dropped.add(name)
    sizes = {d for p in definition.params for d in p.type.dims if isinstance(d, str)}
    taken = params | {o.name for o in definition.outputs} | sizes
    body, hoisted = hoisted_calls(body, params, sizes, taken)
    if not dropped and not hoisted:
        return None
    kept = [o for o in definition.outputs if o.name not in dropped]
    params_text = ", ".join(f"{type_text(p.type)} {p.name}" for p in definition.params)
    outputs_text = ", ".join(
        [f"{type_text(o.type)} {o.name}" if o.type is not None else o.name for o in kept] + hoisted
    )
    lines = "\n".join(f"  {statement_text(s)}" for s in body)
    text = f"def {definition.name}({params_text}) -> ({outputs_text}) {{\n{lines}\n}}\n"
    return text, [o.name for o in kept] + hoisted


# ----- costly calls invariant in some of a statement's loops

_COSTLY_CALLS = frozenset(
    {
        "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "cbrt",
        "tanh", "sigmoid", "erf", "erfc", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
        "cosh", "asinh", "acosh", "atanh", "pow",
    }
)  # fmt: skip


def hoisted_calls(
    body: list[ast.Comprehension], params: set[str], sizes: set[str], taken: set[str]
) -> tuple[list[ast.Comprehension], list[str]]:
    """`body` with each call of a costly builtin on parameters that uses only some of its
    statement's indices (`exp(qlog(k,a))` in a statement over i, k, a) computed once, into a
    temporary over those indices placed before the statement, and read there (the same values:
    parameters are never written); and the names of the temporaries, outputs to add, none of
    them in `taken`."""
    out: list[ast.Comprehension] = []
    made: dict[str, tuple[str, list[str]]] = {}  # the call's text -> (temporary, indices)
    for statement in body:
        indices = _statement_indices(statement, params | sizes)
        calls: list[ast.Apply] = []
        _costly_calls(statement.rhs, params, calls)
        replacements: dict[str, ast.Expr] = {}
        for call in calls:
            used = _free_indices(call, params | sizes)
            if used is None or not used or not set(used) < set(indices):
                continue
            text = expr_text(call)
            if text not in made:
                name = _fresh("hoisted", taken | {n for n, _ in made.values()})
                made[text] = (name, used)
                out.append(
                    ast.Comprehension(
                        tensor=name,
                        indices=tuple(ast.Name(u, statement.pos) for u in used),
                        op="=",
                        init=False,
                        rhs=call,
                        ranges=(),
                        pos=statement.pos,
                    )
                )
            name, used = made[text]
            replacements[text] = ast.Apply(
                name, tuple(ast.Name(u, call.pos) for u in used), call.pos
            )
        if replacements:
            statement = ast.Comprehension(
                tensor=statement.tensor,
                indices=statement.indices,
                op=statement.op,
                init=statement.init,
                rhs=_replaced_calls(statement.rhs, replacements),
                ranges=statement.ranges,
                pos=statement.pos,
            )
        out.append(statement)
    return out, [name for name, _ in made.values()]


def _fresh(prefix: str, taken: set[str]) -> str:
    k = 0
    while f"{prefix}_{k}" in taken:
        k += 1
    return f"{prefix}_{k}"


def _statement_indices(statement: ast.Comprehension, known: set[str]) -> list[str]:
    """The statement's index names: its left-hand side's, then those of its reads."""
    names = [i.name for i in statement.indices]
    for name in _names(statement.rhs):
        if name not in known and name not in names:
            names.append(name)
    return names


def _names(expr: ast.Expr) -> list[str]:
    if isinstance(expr, ast.Name):
        return [expr.name]
    if isinstance(expr, ast.Apply):
        return [n for a in expr.args for n in _names(a)]
    if isinstance(expr, ast.Unary):
        return _names(expr.operand)
    if isinstance(expr, ast.Binary):
        return _names(expr.left) + _names(expr.right)
    if isinstance(expr, ast.Ternary):
        return _names(expr.cond) + _names(expr.then) + _names(expr.otherwise)
    return []


def _costly_calls(expr: ast.Expr, params: set[str], out: list[ast.Apply]) -> None:
    """The outermost calls of costly builtins in `expr` that read parameters only."""
    if isinstance(expr, ast.Apply):
        if expr.name in _COSTLY_CALLS and _reads_only(expr, params):
            out.append(expr)
            return
        for a in expr.args:
            _costly_calls(a, params, out)
    elif isinstance(expr, ast.Unary):
        _costly_calls(expr.operand, params, out)
    elif isinstance(expr, ast.Binary):
        _costly_calls(expr.left, params, out)
        _costly_calls(expr.right, params, out)
    elif isinstance(expr, ast.Ternary):
        for e in (expr.cond, expr.then, expr.otherwise):
            _costly_calls(e, params, out)


def _reads_only(expr: ast.Expr, params: set[str]) -> bool:
    """Whether every tensor `expr` reads is a parameter (builtins aside)."""
    if isinstance(expr, ast.Apply):
        if expr.name not in _COSTLY_CALLS and expr.name not in params:
            return False
        return all(_reads_only(a, params) for a in expr.args)
    if isinstance(expr, ast.DimSize):
        return expr.tensor in params
    if isinstance(expr, ast.Unary):
        return _reads_only(expr.operand, params)
    if isinstance(expr, ast.Binary):
        return _reads_only(expr.left, params) and _reads_only(expr.right, params)
    if isinstance(expr, ast.Ternary):
        return all(_reads_only(e, params) for e in (expr.cond, expr.then, expr.otherwise))
    return True


def _free_indices(call: ast.Apply, known: set[str]) -> list[str] | None:
    """The index names `call` uses, in order, when each appears in a subscript of one of its
    reads (which then gives the temporary's range); else None."""
    used = [n for n in dict.fromkeys(_names(call)) if n not in known]
    subscripted: set[str] = set()
    _subscript_names(call, subscripted)
    return used if all(n in subscripted for n in used) else None


def _subscript_names(expr: ast.Expr, out: set[str]) -> None:
    if isinstance(expr, ast.Apply):
        if expr.name not in _COSTLY_CALLS:
            for a in expr.args:
                out.update(_names(a))
        for a in expr.args:
            _subscript_names(a, out)
    elif isinstance(expr, ast.Unary):
        _subscript_names(expr.operand, out)
    elif isinstance(expr, ast.Binary):
        _subscript_names(expr.left, out)
        _subscript_names(expr.right, out)


def _replaced_calls(expr: ast.Expr, replacements: dict[str, ast.Expr]) -> ast.Expr:
    return _rewritten(
        expr,
        lambda node: replacements.get(expr_text(node)) if isinstance(node, ast.Apply) else None,
    )


def _plain_assignment(statement: ast.Comprehension, params: set[str]) -> bool:
    """`T(i, j, ...) = e` over distinct indices, without ranges, e cheap (module docstring)."""
    if statement.op != "=" or statement.ranges:
        return False
    names = [i.name for i in statement.indices]
    if len(set(names)) != len(names) or not _cheap(statement.rhs, params):
        return False
    # each index is read by the expression, which then gives its range wherever it is put
    subscripted: set[str] = set()
    _subscript_names(statement.rhs, subscripted)
    return set(names) <= subscripted


def _cheap(expr: ast.Expr, params: set[str]) -> bool:
    if isinstance(expr, (ast.Number, ast.Name, ast.DimSize)):
        return True
    if isinstance(expr, ast.Unary):
        return expr.op == "-" and _cheap(expr.operand, params)
    if isinstance(expr, ast.Binary):
        return expr.op in _CHEAP and _cheap(expr.left, params) and _cheap(expr.right, params)
    if isinstance(expr, ast.Apply):  # a read: of a parameter, with index expressions
        return expr.name in params
    return False


def _reads(statement: ast.Comprehension, tensor: str) -> bool:
    return _mentions(statement.rhs, tensor)


def _reads_in_ranges(statement: ast.Comprehension, tensor: str) -> bool:
    return any(_mentions(r.low, tensor) or _mentions(r.high, tensor) for r in statement.ranges)


def _mentions(expr: ast.Expr, tensor: str) -> bool:
    if isinstance(expr, ast.Apply):
        return expr.name == tensor or any(_mentions(a, tensor) for a in expr.args)
    if isinstance(expr, ast.DimSize):
        return expr.tensor == tensor
    if isinstance(expr, ast.Unary):
        return _mentions(expr.operand, tensor)
    if isinstance(expr, ast.Binary):
        return _mentions(expr.left, tensor) or _mentions(expr.right, tensor)
    if isinstance(expr, ast.Ternary):
        return any(_mentions(e, tensor) for e in (expr.cond, expr.then, expr.otherwise))
    return False


def _substituted(
    statement: ast.Comprehension, tensor: str, indices: list[str], value: ast.Expr
) -> ast.Comprehension:
    """`statement` with each read `tensor(e1, ..)` replaced by `value` at indices (e1, ..)."""
    return ast.Comprehension(
        tensor=statement.tensor,
        indices=statement.indices,
        op=statement.op,
        init=statement.init,
        rhs=_replace(statement.rhs, tensor, indices, value),
        ranges=statement.ranges,
        pos=statement.pos,
    )


def _replace(expr: ast.Expr, tensor: str, indices: list[str], value: ast.Expr) -> ast.Expr:
    def visit(node: ast.Expr) -> ast.Expr | None:
        if isinstance(node, ast.Apply) and node.name == tensor:
            return _at(value, dict(zip(indices, node.args, strict=True)))
        return None

    return _rewritten(expr, visit)


def _at(expr: ast.Expr, indices: dict[str, ast.Expr]) -> ast.Expr:
    """`expr` with its index names replaced by the expressions `indices` gives."""
    return _rewritten(
        expr, lambda node: indices.get(node.name) if isinstance(node, ast.Name) else None
    )


def _rewritten(expr: ast.Expr, visit: Callable[[ast.Expr], ast.Expr | None]) -> ast.Expr:
    """`expr` rebuilt from the leaves up, each node (its operands rewritten already) replaced
    by what `visit` gives for it, or kept where that is None."""
    node: ast.Expr = expr
    if isinstance(expr, ast.Apply):
        node = ast.Apply(expr.name, tuple(_rewritten(a, visit) for a in expr.args), expr.pos)
    elif isinstance(expr, ast.Unary):
        node = ast.Unary(expr.op, _rewritten(expr.operand, visit), expr.pos)
    elif isinstance(expr, ast.Binary):
        node = ast.Binary(
            expr.op, _rewritten(expr.left, visit), _rewritten(expr.right, visit), expr.pos
        )
    elif isinstance(expr, ast.Ternary):
        node = ast.Ternary(
            _rewritten(expr.cond, visit),
            _rewritten(expr.then, visit),
            _rewritten(expr.otherwise, visit),
            expr.pos,
        )
    found = visit(node)
    return node if found is None else found


__all__ = ["without_temporaries"]
