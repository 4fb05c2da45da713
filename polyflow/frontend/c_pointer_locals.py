"""Local pointers set once to a place in an array, read through as that array.

C code walks its arrays through local pointers: GSL's `ATOMIC * const data = v->data;`,
`ATOMIC *col1 = m->data + MULTIPLICITY * i;`. polyflow has no pointer variables, but a pointer
that is never changed after its declaration always points `offset` elements into one array, so
`d[i]`, `*(d + i)` and `*d` are `A[offset + i]`, `A[offset + i]` and `A[offset]`. The offset
is the value at the declaration: written into each use when none of its variables is ever
assigned, else kept in a new local integer declared where the pointer was.

A pointer is rewritten only when every use of it is one of those forms (a pointer passed on,
compared or stored is left, and the function keeps "local pointer variables are not
supported"), it is declared once in the function and never assigned, incremented or has its
address taken, and its array is a parameter (or a parameter's field) that is not either.
"""

from __future__ import annotations

import copy

from pycparser import c_ast

from polyflow.frontend import c_analysis as ana


def inline_pointer_locals(body: c_ast.Compound | None, parameters: set[str]) -> None:
    """Rewrite, in place, the uses of each local pointer of `body` that always points into one
    array, a parameter or a parameter's field, as subscripts of that array (see the module's
    docstring). A global is no such array: a call could change where it points."""
    if body is None:
        return
    declared = _declaration_counts(body)
    changed = ana.assigned_names(body)
    for compound in [n for n in ana.walk(body) if isinstance(n, c_ast.Compound)]:
        for decl in list(compound.block_items or []):
            if isinstance(decl, c_ast.Decl) and _is_pointer_local(decl):
                _inline(body, compound, decl, declared, changed, parameters)


def parameter_names(fdef: c_ast.FuncDef) -> set[str]:
    args = getattr(fdef.decl.type, "args", None)
    names = {getattr(p, "name", None) for p in (args.params if args else [])}
    names |= {d.name for d in fdef.param_decls or [] if isinstance(d, c_ast.Decl)}
    return {n for n in names if isinstance(n, str)}


def _is_pointer_local(decl: c_ast.Decl) -> bool:
    return (
        decl.init is not None
        and not decl.storage
        and isinstance(decl.type, c_ast.PtrDecl)
        and isinstance(decl.type.type, c_ast.TypeDecl)
        and isinstance(decl.type.type.type, c_ast.IdentifierType)
    )


def _declaration_counts(body: c_ast.Node) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n in ana.walk(body):
        if isinstance(n, c_ast.Decl) and n.name:
            counts[n.name] = counts.get(n.name, 0) + 1
    return counts


def _base_and_offset(init: c_ast.Node) -> tuple[c_ast.Node, c_ast.Node | None] | None:
    """(array, offset) for `A`, `A + e` and `&A[e]`; None for anything else."""
    if ana.array_name(init) is not None:
        return init, None
    if (
        isinstance(init, c_ast.BinaryOp)
        and init.op == "+"
        and ana.array_name(init.left) is not None
    ):
        return init.left, init.right
    if (
        isinstance(init, c_ast.UnaryOp)
        and init.op == "&"
        and isinstance(init.expr, c_ast.ArrayRef)
        and ana.array_name(init.expr.name) is not None
    ):
        return init.expr.name, init.expr.subscript
    return None


def _inline(
    body: c_ast.Compound,
    compound: c_ast.Compound,
    decl: c_ast.Decl,
    declared: dict[str, int],
    changed: set[str],
    parameters: set[str],
) -> None:
    name = decl.name
    found = _base_and_offset(decl.init)
    if found is None or declared.get(name, 0) != 1 or name in changed:
        return
    base, offset = found
    base_names = {(base.name if isinstance(base, c_ast.StructRef) else base).name}
    if any(n in changed or declared.get(n, 0) > 0 or n not in parameters for n in base_names):
        return
    uses = _uses(body, decl, name)
    if uses is None:
        return
    items = compound.block_items or []
    position = [id(i) for i in items].index(id(decl))
    if offset is None:
        index_of = None
        items.pop(position)
    elif _stable(offset, declared, changed, parameters):
        index_of = offset
        items.pop(position)
    else:  # the offset's value at the declaration, kept in a local of pointer width
        held = f"{name}@offset"
        long_type = c_ast.TypeDecl(held, [], None, c_ast.IdentifierType(["long"]))
        items[position] = c_ast.Decl(held, [], [], [], [], long_type, offset, None, decl.coord)
        index_of = c_ast.ID(held, decl.coord)
    for parent, node, subscript in uses:
        index = subscript if index_of is None else _add(index_of, subscript, node)
        ref = c_ast.ArrayRef(_copy(base), index or c_ast.Constant("int", "0"), node.coord)
        ana.replace_child(parent, node, ref)


def _stable(
    offset: c_ast.Node, declared: dict[str, int], changed: set[str], parameters: set[str]
) -> bool:
    """Whether `offset` has the same value wherever it is written: arithmetic on constants and
    on variables never changed, each a parameter no local shadows or a local declared once
    (no memory read, no global: a call could change one)."""
    for n in ana.walk(offset):
        if isinstance(n, c_ast.ID):
            count = declared.get(n.name, 0)
            if n.name in changed or count > 1 or (count == 0) != (n.name in parameters):
                return False
        elif isinstance(n, c_ast.UnaryOp):
            if n.op not in ("-", "+", "~", "!"):
                return False
        elif not isinstance(n, _PURE):
            return False
    return True


_PURE = (c_ast.Constant, c_ast.BinaryOp, c_ast.TernaryOp, c_ast.Cast, c_ast.Typename,
         c_ast.TypeDecl, c_ast.IdentifierType, c_ast.PtrDecl)  # fmt: skip


def _uses(
    body: c_ast.Compound, decl: c_ast.Decl, name: str
) -> list[tuple[c_ast.Node, c_ast.Node, c_ast.Node | None]] | None:
    """Each use of pointer `name` as (parent, the node to replace, the subscript: None for
    `*d`); None when some use is not a subscript or a dereference."""
    parents = ana.parent_map(body)  # afresh: rewriting an earlier pointer replaced nodes
    pointee = _spelling(decl.type)
    uses: list[tuple[c_ast.Node, c_ast.Node, c_ast.Node | None]] = []
    for n in ana.walk(body):
        if not (isinstance(n, c_ast.ID) and n.name == name):
            continue
        parent = parents.get(id(n))
        if isinstance(parent, c_ast.StructRef) and parent.field is n:
            continue  # `q->data` names a field, not this variable
        if isinstance(parent, c_ast.ArrayRef) and parent.name is n:
            uses.append((parents[id(parent)], parent, parent.subscript))
            continue
        # *d, *(d + e), and GSL's *(BASE *) (d + e) with BASE the pointer's own type
        subscript: c_ast.Node | None = None
        if isinstance(parent, c_ast.BinaryOp) and parent.op == "+" and parent.left is n:
            subscript, parent = parent.right, parents.get(id(parent))
        if isinstance(parent, c_ast.Cast) and _spelling(parent.to_type.type) == pointee:
            parent = parents.get(id(parent))
        if isinstance(parent, c_ast.UnaryOp) and parent.op == "*":
            uses.append((parents[id(parent)], parent, subscript))
            continue
        return None
    return uses


def _spelling(node: c_ast.Node) -> str:
    """A pointer declarator's type as C writes it, without names and qualifiers of the pointer
    itself (`double * const d` and `(double *)` are both 'double *')."""
    if isinstance(node, c_ast.PtrDecl):
        return _spelling(node.type) + " *"
    if isinstance(node, c_ast.TypeDecl):
        return " ".join([*node.quals, *getattr(node.type, "names", ["?"])])
    return "?"


def _add(a: c_ast.Node, b: c_ast.Node | None, at: c_ast.Node) -> c_ast.Node:
    return _copy(a) if b is None else c_ast.BinaryOp("+", _copy(a), b, at.coord)


def _copy(node: c_ast.Node) -> c_ast.Node:
    """A fresh copy of an expression (one node object must not sit at two places of the tree)."""
    return copy.deepcopy(node)


__all__ = ["inline_pointer_locals", "parameter_names"]
