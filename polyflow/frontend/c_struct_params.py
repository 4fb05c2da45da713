"""Struct pointer parameters, their fields made into plain parameters.

Numerical C passes its arrays in small structs (`gsl_vector *v` with `v->data`, `v->size`,
`v->stride`) and returns results through them (`gsl_sf_result *result`, `result->val = ...`).
polyflow has no struct types, but a function that uses a parameter only as `p->field` can take
the fields instead; the C compiler's forwarding body passes them (c_splice.py). A field is
passed either by value (`v->size` a scalar, `v->data` an array of unknown extent), read once at
the call, or by address (`&p->f`, an array of one element), read and written where the
function does. By value is what lets a loop bound like `v->size` be affine, but it is the
function's own read only when nothing can change the field in between, so a scalar field is
passed by address when
- the function assigns it (`=`, `+=`, `++`), or assigns another field of its type (another
  parameter may point to the same struct);
- it may be read after a call to a function other than math.h's (the callee could change it);
- the function may store into an array whose element type is the field's, or a character type
  (C's aliasing rules let such a store change the field).
A parameter not dereferenced unconditionally at the start (its first statement, or a loop's
first test) may be a pointer the function never follows, NULL on an error path: its fields are
read at the call only where it is not NULL, `(v ? v->data : 0)`.
Pointer fields cannot be passed by address (polyflow has no arrays of pointers): where one
would have to be, or is assigned, the function stays with the C compiler, as does one that uses
a struct parameter other than as `p->field` (passed on, but to an accessor of the file that
c_struct_forwarding.py rewrites; compared, assigned, a field's address taken) or reaches a
volatile field.
"""

from __future__ import annotations

from pycparser import c_ast

from polyflow.frontend import c_analysis as ana
from polyflow.frontend.c_builtins import is_math_function
from polyflow.frontend.c_types import Array, Scalar, Unsupported

# How a struct pointer parameter's field is named among the compiled function's parameters:
# the C expression the forwarding body passes (never a C identifier, so no clash).
ARROW = "->"


def struct_of_pointer(scope: object, node: c_ast.Node) -> c_ast.Struct | None:
    """The struct definition a parameter of declarator `node` points to (`struct s *p`,
    `const T *p` with `typedef struct {...} T`), or None."""
    if not isinstance(node, c_ast.PtrDecl) or not isinstance(node.type, c_ast.TypeDecl):
        return None
    inner = node.type.type
    typedefs: dict[str, c_ast.Node] = scope.typedefs  # type: ignore[attr-defined]
    structs: dict[str, c_ast.Struct] = scope.structs  # type: ignore[attr-defined]
    for _ in range(8):  # typedef chains
        if isinstance(inner, c_ast.IdentifierType) and len(inner.names) == 1:
            target = typedefs.get(inner.names[0])
            if not isinstance(target, c_ast.TypeDecl):
                return None
            inner = target.type
            continue
        break
    if not isinstance(inner, c_ast.Struct):
        return None
    if inner.decls is None:
        return structs.get(inner.name) if inner.name else None
    return inner


def unpack_struct_parameters(
    scope: object,
    fdef: c_ast.FuncDef,
    struct_params: dict[str, c_ast.Struct],
    plain: list[tuple[str, Scalar | Array]],
    harmless_calls: set[int] | None = None,
) -> list[tuple[str, Scalar | Array]]:
    """The parameter list of `fdef` with each of `struct_params` (name → struct) replaced by
    the fields the body reads (`p->f`), in order of first use; the body's `p->f` become
    identifiers of those names. `plain` holds the other parameters' types, by name, in order;
    `harmless_calls` (ids) are calls known to change no field (c_struct_forwarding.py).
    Unsupported when the unpacking cannot be shown to keep the function's meaning."""
    body = fdef.body
    parents = ana.parent_map(body)
    refs: dict[str, list[c_ast.StructRef]] = {p: [] for p in struct_params}
    for node in ana.walk(body):
        if isinstance(node, c_ast.ID) and node.name in struct_params:
            parent = parents.get(id(node))
            if not (
                isinstance(parent, c_ast.StructRef) and parent.type == ARROW and parent.name is node
            ):
                raise Unsupported(
                    f"struct parameter '{node.name}' is used other than as '{node.name}->field'",
                    node,
                )
            refs[node.name].append(parent)
    written = {
        (p, ref.field.name) for p, uses in refs.items() for ref in uses if _is_written(ref, parents)
    }
    declared: dict[tuple[str, str], Scalar | Array] = {}
    for p, uses in refs.items():
        for ref in uses:
            _check_no_address_or_nesting(ref, parents)
            key = (p, ref.field.name)
            if key not in declared:
                declared[key] = _field_type(scope, struct_params[p], ref)
    for key in written:
        if isinstance(declared[key], Array):
            raise Unsupported(f"pointer field '{key[1]}' of a struct parameter is assigned", fdef)
    in_memory, guarded = _fields_passed_by_address(
        body, parents, fdef, declared, written, plain, scope, harmless_calls or set()
    )
    # The C expression the forwarding body passes for each field: its address, its value, or
    # for a parameter the function may never dereference (NULL on an error path) its value
    # only where the pointer is not NULL.
    passed: dict[tuple[str, str], str] = {}
    for p, f in declared:
        if (p, f) in in_memory:
            passed[p, f] = f"&{p}{ARROW}{f}"
        elif p in guarded:
            passed[p, f] = f"({p} ? {p}{ARROW}{f} : 0)"
        else:
            passed[p, f] = f"{p}{ARROW}{f}"
    for p, uses in refs.items():
        for ref in uses:
            name = passed[p, ref.field.name]
            if (p, ref.field.name) in in_memory:
                address = c_ast.ID(name, ref.coord)
                new: c_ast.Node = c_ast.ArrayRef(address, c_ast.Constant("int", "0"), ref.coord)
            else:
                new = c_ast.ID(name, ref.coord)
            ana.replace_child(parents[id(ref)], ref, new)
    params: list[tuple[str, Scalar | Array]] = []
    plain_types = dict(plain)
    for decl in fdef.decl.type.args.params if fdef.decl.type.args else []:
        pname = getattr(decl, "name", None)
        if pname in struct_params:
            for (p, f), t in declared.items():
                if p == pname:
                    if (p, f) in in_memory and isinstance(t, Scalar):
                        params.append((passed[p, f], Array(t, (1,))))
                    else:
                        params.append((passed[p, f], t))
        elif pname in plain_types:
            params.append((pname, plain_types[pname]))
    return params


def _fields_passed_by_address(
    body: c_ast.Compound,
    parents: dict[int, c_ast.Node],
    fdef: c_ast.FuncDef,
    declared: dict[tuple[str, str], Scalar | Array],
    written: set[tuple[str, str]],
    plain: list[tuple[str, Scalar | Array]],
    scope: object,
    harmless_calls: set[int],
) -> tuple[set[tuple[str, str]], set[str]]:
    """The scalar fields to pass by address (a value read at the call would not be the
    function's own read), and the parameters whose fields are read at the call only where the
    pointer is not NULL. Pointer fields cannot be passed by address (polyflow has no arrays of
    pointers): where one would have to be, Unsupported."""
    params = {p for p, _ in declared}
    by_address: set[tuple[str, str]] = set()

    def pass_by_address(keys: set[tuple[str, str]], why: str, at: c_ast.Node) -> None:
        pointers = sorted(f for key in keys if isinstance(declared[key], Array) for f in [key[1]])
        if pointers:
            raise Unsupported(why.format(field=pointers[0]), at)
        by_address.update(keys)

    # Written fields, and every field of a written one's type: another parameter may point to
    # the same struct, and a value read at the call would miss the store.
    stored_types = {_type_key(declared[key]) for key in written}
    by_address |= {key for key, t in declared.items() if _type_key(t) in stored_types}
    # A parameter not dereferenced before control flow: reading its fields at the call could
    # read through a pointer the function never follows (NULL on its error path): its fields
    # are read at the call only where it is not NULL (no other invalid pointer may be passed:
    # using one is undefined in C). A loop bound `j < b->cols` stays a value, so affine.
    guarded = {p for p in params if not _dereferenced_at_start(body, p)}
    # A field read after a call: the callee could change it.
    for call, late in _calls_with_later_reads(body, parents, params, harmless_calls):
        name = call.name.name if isinstance(call.name, c_ast.ID) else "a function"
        pass_by_address(
            {key for key in declared if key[0] in late},
            f"calls '{name}' with the pointer field '{{field}}' read after it "
            "(the callee could change it)",
            call,
        )
    # C's type rules let a store through a `T *` change a field of type T (or any field, for a
    # character type T): such fields are read where the function reads them.
    aliased = _stored_element_types(scope, fdef, declared, plain)
    characters = any(bits == 8 for bits, _ in aliased)
    pass_by_address(
        {
            key
            for key, t in declared.items()
            if characters or (isinstance(t, Scalar) and _type_key(t) in aliased)
        },
        "a store through an array of characters may change pointer field '{field}' of a struct "
        "parameter (C aliasing rules)",
        fdef.decl,
    )
    return by_address, guarded


def _is_written(ref: c_ast.StructRef, parents: dict[int, c_ast.Node]) -> bool:
    """Whether `p->f` is assigned (`=`, `+=`, ...), incremented or decremented."""
    parent = parents.get(id(ref))
    if isinstance(parent, c_ast.Assignment) and parent.lvalue is ref:
        return True
    return isinstance(parent, c_ast.UnaryOp) and parent.op in ("++", "--", "p++", "p--")


def _check_no_address_or_nesting(ref: c_ast.StructRef, parents: dict[int, c_ast.Node]) -> None:
    parent = parents.get(id(ref))
    if isinstance(parent, c_ast.UnaryOp) and parent.op == "&":
        raise Unsupported(
            f"the address of field '{ref.field.name}' of a struct parameter is taken", ref
        )
    if isinstance(parent, c_ast.StructRef) and parent.name is ref:
        raise Unsupported("nested struct fields are not supported", ref)


def _type_key(t: Scalar | Array) -> tuple[int, bool] | None:
    """Fields of one key may be one object (C's effective types: a written `size_t` field may
    be another parameter's `size_t` field); pointer fields are never written, so have none."""
    return None if isinstance(t, Array) else (t.bits, t.is_float)


def _field_type(scope: object, struct: c_ast.Struct, ref: c_ast.StructRef) -> Scalar | Array:
    for decl in struct.decls or []:
        if isinstance(decl, c_ast.Decl) and decl.name == ref.field.name:
            if "volatile" in (decl.quals or []) or _volatile(decl.type):
                raise Unsupported(f"field '{decl.name}' is volatile", ref)
            if decl.bitsize is not None:  # no address to pass, and no type of its width
                raise Unsupported(f"field '{decl.name}' is a bit-field", ref)
            t = scope.resolve(decl.type, allow_vla=False)  # type: ignore[attr-defined]
            if isinstance(t, Scalar | Array):
                return t
            raise Unsupported(f"field '{decl.name}' has type '{t}'", ref)
    raise Unsupported(f"no field '{ref.field.name}' in the struct", ref)


def _volatile(node: c_ast.Node) -> bool:
    while node is not None:
        if "volatile" in (getattr(node, "quals", None) or []):
            return True
        node = getattr(node, "type", None)
    return False


def _unconditional(node: c_ast.Node) -> list[c_ast.Node]:
    """The nodes of expression `node` that are evaluated whenever it is (not under ?:'s
    branches, nor the right side of && and ||)."""
    out: list[c_ast.Node] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n is None:
            continue
        out.append(n)
        if isinstance(n, c_ast.TernaryOp):
            stack.append(n.cond)
        elif isinstance(n, c_ast.BinaryOp) and n.op in ("&&", "||"):
            stack.append(n.left)
        else:
            stack += [child for _, child in n.children()]
    return out


def _dereferenced_at_start(body: c_ast.Compound, p: str) -> bool:
    """Whether the body reads some `p->f` before any control flow can skip it (a loop's
    initialization and first test run whenever the loop is reached)."""

    def reads(expr: c_ast.Node | None) -> bool:
        return expr is not None and any(
            isinstance(n, c_ast.StructRef) and isinstance(n.name, c_ast.ID) and n.name.name == p
            for n in _unconditional(expr)
        )

    for item in body.block_items or []:
        if isinstance(item, c_ast.For):
            return reads(item.init) or reads(item.cond)
        if isinstance(item, c_ast.While):
            return reads(item.cond)
        if isinstance(item, c_ast.Decl):
            expr = item.init
        elif isinstance(item, c_ast.If):
            expr = item.cond
        elif isinstance(item, (c_ast.Assignment, c_ast.UnaryOp, c_ast.BinaryOp)):
            expr = item
        elif isinstance(item, c_ast.Return):
            expr = item.expr
        else:
            return False
        if reads(expr):
            return True
        if isinstance(item, (c_ast.If, c_ast.Return)):
            return False
        if expr is not None and any(isinstance(n, c_ast.FuncCall) for n in ana.walk(expr)):
            return False  # a call could end the program before the first read
    return False


def _calls_with_later_reads(
    body: c_ast.Compound, parents: dict[int, c_ast.Node], params: set[str], harmless: set[int]
) -> list[tuple[c_ast.FuncCall, set[str]]]:
    """Each call (other than to math.h, or `harmless`) with the struct parameters used after
    it."""
    found: list[tuple[c_ast.FuncCall, set[str]]] = []
    for node in ana.walk(body):
        if not isinstance(node, c_ast.FuncCall) or id(node) in harmless:
            continue
        name = node.name.name if isinstance(node.name, c_ast.ID) else None
        if name is not None and is_math_function(name):
            continue
        late = {p for p in params if not _followed_only_by_return(node, parents, {p})}
        if late:
            found.append((node, late))
    return found


def _followed_only_by_return(
    call: c_ast.FuncCall, parents: dict[int, c_ast.Node], params: set[str]
) -> bool:
    statement: c_ast.Node = call
    parent = parents.get(id(call))
    while parent is not None and not isinstance(parent, (c_ast.Compound, c_ast.Return)):
        if isinstance(parent, (c_ast.Assignment, c_ast.Cast, c_ast.ExprList)):
            statement, parent = parent, parents.get(id(parent))
            continue
        return False  # a call inside a larger expression or a condition
    if isinstance(parent, c_ast.Return):
        return True  # its arguments are read before it; nothing runs after
    if not isinstance(parent, c_ast.Compound):
        return False
    items = parent.block_items or []
    rest = items[[id(i) for i in items].index(id(statement)) + 1 :]
    if not rest or not isinstance(rest[-1], c_ast.Return):
        return False
    for item in rest:
        if not isinstance(item, (c_ast.Return, c_ast.Assignment, c_ast.Decl)):
            return False
        for n in ana.walk(item):
            if isinstance(n, c_ast.FuncCall) or (isinstance(n, c_ast.ID) and n.name in params):
                return False
    return True


def _stored_element_types(
    scope: object,
    fdef: c_ast.FuncDef,
    declared: dict[tuple[str, str], Scalar | Array],
    plain: list[tuple[str, Scalar | Array]],
) -> set[tuple[int, bool]]:
    """The element types (bits, is_float) of the arrays the function may store into: pointer
    fields, array parameters and globals (reading GSL's Chebyshev coefficients `cs->c[j]`
    cannot change `cs->a`; storing into them could)."""
    stored = stored_arrays(fdef.body)
    arrays = [
        t
        for (p, f), t in declared.items()
        if isinstance(t, Array) and _in(f"{p}{ARROW}{f}", stored)
    ]
    arrays += [t for name, t in plain if isinstance(t, Array) and _in(name, stored)]
    globals_: dict[str, object] = scope.globals  # type: ignore[attr-defined]
    for name in ana.referenced_names(fdef.body):
        g = globals_.get(name)
        if g is not None and isinstance(getattr(g, "type", None), Array) and _in(name, stored):
            arrays.append(g.type)  # type: ignore[attr-defined]
    return {(a.elem.bits, a.elem.is_float) for a in arrays}


def _in(name: str, stored: set[str] | None) -> bool:
    return stored is None or name in stored


def stored_arrays(body: c_ast.Node, ignored_calls: set[int] | None = None) -> set[str] | None:
    """The arrays (`a`, `p->f`) the body may store into: assigned or incremented elements, and
    whatever a call is given (the callee may store into it), but for `ignored_calls` (ids).
    None: any array (a store whose target is not an element of a named array)."""
    stored: set[str] = set()
    ignored = ignored_calls or set()
    for node in ana.walk(body):
        target: c_ast.Node | None = None
        if isinstance(node, c_ast.Assignment):
            target = node.lvalue
        elif isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--"):
            target = node.expr
        elif isinstance(node, c_ast.FuncCall):
            name = node.name.name if isinstance(node.name, c_ast.ID) else None
            if id(node) in ignored:
                continue
            if name is None or not is_math_function(name):
                for arg in ana.walk(node.args):
                    key = ana.array_name(arg)
                    if key is not None:
                        stored.add(key)
            continue
        if target is None or isinstance(target, c_ast.ID):
            continue  # a local or parameter variable, no array element
        if isinstance(target, c_ast.StructRef):
            continue  # a field itself (passed by address when written)
        while isinstance(target, c_ast.ArrayRef):
            target = target.name
        key = ana.array_name(target)
        if key is None:
            return None
        stored.add(key)
    return stored


__all__ = ["ARROW", "stored_arrays", "struct_of_pointer", "unpack_struct_parameters"]
