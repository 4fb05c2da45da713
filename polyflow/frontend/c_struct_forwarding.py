"""Struct pointer parameters passed on to accessor functions of the same file.

C that keeps its arrays in structs reads them through small functions (`double get(const Mat *m,
int i, int j) { return m->data[i * m->cols + j]; }`). The accessor's struct parameter is unpacked
into the fields it reads (c_struct_params.py), so a caller that passes its own struct parameter
on can pass those fields instead: `get(A, i, j)` becomes `get(A->data, A->cols, i, j)`, which
the caller's own unpacking then reads like any `A->field`. This is done only where it keeps the
caller's meaning:
- the callee takes each forwarded field by value (it reads it once, at the call), with no NULL
  guard;
- the callee calls nothing but math.h and accessors it forwards its own fields to (by this
  same rule), and stores only into arrays of floating-point elements, so the call cannot
  change a field the caller reads after it (a pointer or an integer field;
  floating-point fields of the caller that such a store could reach are read where the caller
  reads them, as for any store: c_struct_params.py sees the forwarded arrays as stored into).
"""

from __future__ import annotations

from pycparser import c_ast

from polyflow.frontend import c_analysis as ana
from polyflow.frontend.c_builtins import is_math_function
from polyflow.frontend.c_struct_params import ARROW, stored_arrays, struct_of_pointer
from polyflow.frontend.c_types import Array, Unsupported


def forward_struct_arguments(
    scope: object, fdef: c_ast.FuncDef, struct_params: dict[str, c_ast.Struct]
) -> set[int]:
    """Rewrite the calls of `fdef` that pass one of its `struct_params` to a function of this
    file that unpacks it, into calls passing the fields (see the module docstring). Returns the
    ids of the rewritten calls: calls that change no field of the caller's structs."""
    defs: dict[str, c_ast.FuncDef] = scope.defs  # type: ignore[attr-defined]
    rewritten: set[int] = set()
    calls = [n for n in ana.walk(fdef.body) if isinstance(n, c_ast.FuncCall)]
    for node in reversed(calls):  # inner calls first: `set(a, i, get(a, i))`
        if not isinstance(node.name, c_ast.ID):
            continue
        callee_def = defs.get(node.name.name)
        args = node.args.exprs if node.args else []
        passes_struct = any(isinstance(a, c_ast.ID) and a.name in struct_params for a in args)
        if callee_def is None or callee_def is fdef or not passes_struct:
            continue
        if any(_changes_memory(a, rewritten) for a in args):
            continue  # the fields are read with the arguments: no argument may change them
        expanded = _expanded_arguments(scope, callee_def, args, struct_params)
        if expanded is not None:
            node.args = c_ast.ExprList(expanded, node.coord)
            rewritten.add(id(node))
    return rewritten


def _expanded_arguments(
    scope: object,
    callee_def: c_ast.FuncDef,
    args: list[c_ast.Node],
    struct_params: dict[str, c_ast.Struct],
) -> list[c_ast.Node] | None:
    """The call's arguments with each forwarded struct replaced by the callee's fields, or None
    where the call must stay as it is."""
    try:
        callee = scope.interface(callee_def)  # type: ignore[attr-defined]
    except Unsupported:
        return None
    forwarded: set[int] = scope.forwarded_calls  # type: ignore[attr-defined]
    if not callee.unpacked or not _changes_no_field(callee_def, callee.params, forwarded):
        return None
    declared = callee_def.decl.type.args.params if callee_def.decl.type.args else []
    if len(declared) != len(args):
        return None
    expanded: list[c_ast.Node] = []
    for param, arg in zip(declared, args, strict=True):
        name = str(getattr(param, "name", None) or "")
        fields = [p for p, _ in callee.params if name and _of_param(p, name)]
        if not fields:
            expanded.append(arg)
            continue
        if not (isinstance(arg, c_ast.ID) and arg.name in struct_params):
            return None  # a struct that is not the caller's parameter: no fields to pass
        if not _same_struct(scope, param, struct_params[arg.name]):
            return None
        for passed in fields:
            field = passed[len(name) + len(ARROW) :] if passed.startswith(name + ARROW) else ""
            if not field.isidentifier():
                return None  # by address, or guarded against NULL: not forwarded
            expanded.append(
                c_ast.StructRef(c_ast.ID(arg.name, arg.coord), ARROW, c_ast.ID(field), arg.coord)
            )
    return expanded


def _changes_memory(expr: c_ast.Node, harmless: set[int]) -> bool:
    """Whether evaluating `expr` may store: an assignment, `++`/`--`, or a call other than to
    math.h or a `harmless` (forwarded) one."""
    for n in ana.walk(expr):
        if isinstance(n, c_ast.Assignment):
            return True
        if isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--"):
            return True
        if _may_store(n, harmless):
            return True
    return False


def _may_store(node: c_ast.Node, harmless: set[int]) -> bool:
    """Whether `node` is a call that may store: not to math.h, nor a `harmless` one."""
    return (
        isinstance(node, c_ast.FuncCall)
        and id(node) not in harmless
        and not (isinstance(node.name, c_ast.ID) and is_math_function(node.name.name))
    )


def _of_param(passed: str, name: str) -> bool:
    """Whether the callee's parameter `passed` (the C expression its forwarding body passes)
    is a field of its struct parameter `name`."""
    return any(
        passed.startswith(prefix) for prefix in (name + ARROW, f"&{name}{ARROW}", f"({name} ?")
    )


def _same_struct(scope: object, param: c_ast.Node, struct: c_ast.Struct) -> bool:
    theirs = struct_of_pointer(scope, getattr(param, "type", None))
    return theirs is struct or (
        theirs is not None and bool(theirs.name) and theirs.name == struct.name
    )


def _changes_no_field(
    callee_def: c_ast.FuncDef, params: list[tuple[str, object]], forwarded: set[int]
) -> bool:
    """The callee calls only math.h and accessors it forwards its own fields to (calls that
    change no field, by this same rule), and stores only into arrays of floating-point
    elements."""
    if any(_may_store(node, forwarded) for node in ana.walk(callee_def.body)):
        return False
    # a forwarded call stores only into floating-point arrays (this same rule, for its callee)
    stored = stored_arrays(callee_def.body, forwarded)
    if stored is None:
        return False
    types = dict(params)
    for name in stored:
        t = types.get(name)
        if not (isinstance(t, Array) and t.elem.is_float):
            return False  # an integer array, a global, a local: keep it simple
    return True


__all__ = ["forward_struct_arguments"]
