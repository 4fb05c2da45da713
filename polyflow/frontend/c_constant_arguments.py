"""Parameters that every call in the unit passes as one constant: a `static` function called as
`init_array(1900, 2100, A, x)` from `main` only ever sees `n == 2100`.

gcc inlines or clones such a function and folds the constant (`(i + j) % n` becomes a multiply
and shifts, bounds become trip counts); polyflow compiles the function apart from `main`, so
without this the division stays a `idiv` per element (atax's initialization: 3x slower than
gcc's, and the kernel timed after it slower for it). The lowering binds each such argument
(`polyflow.lowering.bound_arguments`) after the polyhedral stage, whose schedule stays the
parametric one.

Only what the unit shows for certain counts: a `static` function (no other unit can call it),
never named except as the callee of a direct call (no function pointer), an integer parameter
(not `_Bool`), and every call's argument an integer constant expression of `int` literals whose
every step stays within `int` (so C's value is the arithmetic's), the same at every call, and
representable in the parameter's type.

A local variable of the caller counts as its constant (`int n = N; ... kernel(n, A)`, as every
PolyBench `main` does, and gcc's constant propagation across calls sees) where its one
declaration in the function gives it such an expression, in its integer type, and nothing in
the function changes it (no assignment, `++`, `--`, or `&` of its name), at calls after that
declaration in its block.
"""

from __future__ import annotations

from pycparser import c_ast

from polyflow.frontend import c_analysis as ana
from polyflow.frontend.c_scope import CFunction, FileScope, char_literal, int_literal
from polyflow.frontend.c_types import INT, Scalar, Unsupported

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def constant_arguments(
    ast: c_ast.FileAST, scope: FileScope, functions: dict[str, CFunction]
) -> dict[str, dict[int, int]]:
    """For each function of `functions` that qualifies (module docstring), its parameters
    (by position) that every call of the unit passes as one integer constant, with that value."""
    candidates = {
        name
        for name, f in functions.items()
        if "static" in (f.node.decl.storage or []) and not f.unpacked
    }
    # one walk of the unit: the calls, the names used otherwise, the enumerators and the
    # declared names
    calls: dict[str, list[c_ast.FuncCall]] = {name: [] for name in candidates}
    callee_ids: set[int] = set()
    named: list[c_ast.ID] = []
    defined: dict[str, int] = {}
    declared: set[str] = set()
    for node in ana.walk(ast):
        if isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID):
            callee_ids.add(id(node.name))
            if node.name.name in calls:
                calls[node.name.name].append(node)
        elif isinstance(node, c_ast.ID) and node.name in calls:
            named.append(node)
        elif isinstance(node, c_ast.Enumerator):
            defined[node.name] = defined.get(node.name, 0) + 1
        elif isinstance(node, c_ast.Decl) and node.name:
            declared.add(node.name)
    for node in named:  # a name used as a value (a function pointer): any caller
        if id(node) not in callee_ids:
            calls.pop(node.name, None)
    # an enumerator counts where its name means one value wherever it is used: defined once,
    # and no variable or parameter of the unit has that name (one could hide it at a call)
    enums = {
        name: value
        for name, value in scope.enums.items()
        if defined.get(name) == 1 and name not in declared
    }
    constants_at: dict[int, dict[str, int]] = {}  # by call: the constant locals it sees
    if any(calls.values()):
        for fdef in ast.ext:
            if isinstance(fdef, c_ast.FuncDef):
                constants_at.update(_constant_locals_at_calls(fdef, scope, enums))
    found: dict[str, dict[int, int]] = {}
    for name, sites in calls.items():
        params = functions[name].params
        bound: dict[int, int] = {}
        for k, (_, ptype) in enumerate(params):
            if not isinstance(ptype, Scalar) or not ptype.is_int or ptype.boolean or not sites:
                continue
            values = {
                _call_argument(site, k, len(params), {**enums, **constants_at.get(id(site), {})})
                for site in sites
            }
            value = values.pop() if len(values) == 1 else None
            if value is not None and _representable(value, ptype):
                bound[k] = value
        if bound:
            found[name] = bound
    return found


# The nodes that open a block scope.
_SCOPES = (c_ast.Compound, c_ast.For)


def _constant_locals_at_calls(
    fdef: c_ast.FuncDef, scope: FileScope, enums: dict[str, int]
) -> dict[int, dict[str, int]]:
    """For each call in `fdef` (by `id`), the local variables in scope there whose value is one
    integer constant (module docstring), with their values."""
    declared: dict[str, int] = {}
    params = fdef.decl.type.args.params if fdef.decl.type.args is not None else []
    for node in [*params, *ana.walk(fdef.body)]:
        if isinstance(node, c_ast.Decl) and node.name:
            declared[node.name] = declared.get(node.name, 0) + 1
    changed = ana.assigned_names(fdef.body)  # assigned, ++, -- or & anywhere in the function
    found: dict[int, dict[str, int]] = {}
    visible: list[dict[str, int]] = []  # a level per open block scope
    # pre-order, children in source order (a declaration is met before the calls after it);
    # None closes the scope opened last (a stack, not recursion: expressions can be deep)
    pending: list[c_ast.Node | None] = [fdef.body]
    while pending:
        node = pending.pop()
        if node is None:
            visible.pop()
            continue
        if isinstance(node, _SCOPES):
            visible.append({})
            pending.append(None)
        if isinstance(node, c_ast.Decl) and node.name and declared.get(node.name) == 1:
            value = _constant_local(node, scope, {**enums, **_merged(visible)}, changed)
            if value is not None and visible:
                visible[-1][node.name] = value
        elif isinstance(node, c_ast.FuncCall):
            seen = _merged(visible)
            if seen:
                found[id(node)] = seen
        pending.extend(child for _, child in reversed(node.children()))
    return found


def _merged(scopes: list[dict[str, int]]) -> dict[str, int]:
    merged: dict[str, int] = {}
    for level in scopes:
        merged.update(level)
    return merged


def _constant_local(
    decl: c_ast.Decl, scope: FileScope, constants: dict[str, int], changed: set[str]
) -> int | None:
    """The value of local variable `decl` if it is one integer constant: an integer (not
    `_Bool`, not `volatile`) declared with an integer constant expression it holds, never
    changed."""
    if decl.name in changed or decl.init is None or "volatile" in (decl.quals or []):
        return None
    if "extern" in (decl.storage or []) or not isinstance(decl.type, c_ast.TypeDecl):
        return None
    try:
        local_type = scope.resolve(decl.type, allow_vla=False)
    except Unsupported:
        return None
    if not isinstance(local_type, Scalar) or not local_type.is_int or local_type.boolean:
        return None
    value = int_constant(decl.init, constants)
    return value if value is not None and _representable(value, local_type) else None


def _call_argument(
    site: c_ast.FuncCall, k: int, n_params: int, enums: dict[str, int]
) -> int | None:
    args = site.args.exprs if site.args is not None else []
    if len(args) != n_params:
        return None
    return int_constant(args[k], enums)


def int_constant(node: c_ast.Node, enums: dict[str, int]) -> int | None:
    """The value of `node` if it is an integer constant expression that C evaluates in `int`
    without overflow (literals without suffix, the enumerators `enums`, `+ - * / %`); else
    None."""
    value: int | None
    if isinstance(node, c_ast.Constant):
        if node.type == "char":
            value = char_literal(node.value)
        elif node.type == "int":
            try:
                value, literal_type = int_literal(node.value, node)
            except Unsupported:
                return None
            if literal_type != INT:  # 0xffffffff is unsigned: its arithmetic wraps
                return None
        else:
            return None
    elif isinstance(node, c_ast.ID):
        value = enums.get(node.name)
    elif isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+"):
        inner = int_constant(node.expr, enums)
        value = None if inner is None else (-inner if node.op == "-" else inner)
    elif isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*", "/", "%"):
        a, b = int_constant(node.left, enums), int_constant(node.right, enums)
        if a is None or b is None or (node.op in ("/", "%") and b == 0):
            return None
        quotient = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        value = {
            "+": a + b,
            "-": a - b,
            "*": a * b,
            "/": quotient,  # C truncates toward zero
            "%": a - quotient * b,
        }[node.op]
    else:
        return None
    return value if value is not None and _INT_MIN <= value <= _INT_MAX else None


def _representable(value: int, t: Scalar) -> bool:
    """Whether `t` holds `value` and its bits read signed are `value` (the attribute's form)."""
    low = -(2 ** (t.bits - 1)) if t.signed else 0
    return low <= value < 2 ** (t.bits - 1)
