"""Syntactic facts about C statements that the emitter needs before it emits them."""

from __future__ import annotations

from collections.abc import Iterator

from pycparser import c_ast

_LOOPS = (c_ast.For, c_ast.While, c_ast.DoWhile)
_SIDE_EFFECT_OPS = ("++", "--", "p++", "p--")


def _child_slots(cls: type) -> tuple[str, ...]:
    """The attributes of a node class that hold child nodes (or lists of them), last child
    first (they go on a stack): its slots but the coordinates and the plain attributes.
    Remembered in `_CHILD_SLOTS`, which `walk` reads first."""
    plain = {"coord", "__weakref__", *getattr(cls, "attr_names", ())}
    slots = tuple(a for a in reversed(getattr(cls, "__slots__", ())) if a not in plain)
    _CHILD_SLOTS[cls] = slots
    return slots


_CHILD_SLOTS: dict[type, tuple[str, ...]] = {}


def walk(node: c_ast.Node | None) -> Iterator[c_ast.Node]:
    """Every node under `node`, itself included, in pre-order."""
    # The children are read off the slots: `children()` builds a tuple of named pairs per
    # node, and the frontend walks each function's statements several times.
    if node is None:
        return
    stack = [node]
    push = stack.append
    while stack:
        n = stack.pop()
        yield n
        slots = _CHILD_SLOTS.get(n.__class__)
        for attr in _child_slots(n.__class__) if slots is None else slots:
            child = getattr(n, attr)
            if child is None:
                continue
            if child.__class__ is list:
                stack.extend(reversed(child))
            else:
                push(child)


def assigned_names(node: c_ast.Node | None) -> set[str]:
    """Names of variables written under `node` (plain, compound or ++/-- assignment)."""
    names: set[str] = set()
    for n in walk(node):
        if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID):
            names.add(n.lvalue.name)
        elif (
            isinstance(n, c_ast.UnaryOp)
            and n.op in _SIDE_EFFECT_OPS
            and isinstance(n.expr, c_ast.ID)
        ):
            names.add(n.expr.name)
        elif isinstance(n, c_ast.UnaryOp) and n.op == "&" and isinstance(n.expr, c_ast.ID):
            names.add(n.expr.name)
    return names


def referenced_names(node: c_ast.Node | None) -> set[str]:
    return {n.name for n in walk(node) if isinstance(n, c_ast.ID)}


def called_names(node: c_ast.Node | None) -> set[str]:
    return {
        n.name.name
        for n in walk(node)
        if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID)
    }


def contains_return(node: c_ast.Node | None) -> bool:
    return any(isinstance(n, c_ast.Return) for n in walk(node))


def _binds_to_this_loop(node: c_ast.Node | None, kind: type) -> bool:
    """True if a `kind` (Break or Continue) under `node` belongs to the loop enclosing `node`."""
    if node is None:
        return False
    if isinstance(node, kind):
        return True
    if isinstance(node, _LOOPS) or (kind is c_ast.Break and isinstance(node, c_ast.Switch)):
        return False
    return any(_binds_to_this_loop(c, kind) for _, c in node.children())


def contains_break(body: c_ast.Node | None) -> bool:
    return _binds_to_this_loop(body, c_ast.Break)


def contains_continue(body: c_ast.Node | None) -> bool:
    return _binds_to_this_loop(body, c_ast.Continue)


def has_side_effects(node: c_ast.Node | None) -> bool:
    """Assignments, ++/-- or calls of anything but pure math functions."""
    from polyflow.frontend.c_builtins import is_math_function

    for n in walk(node):
        if isinstance(n, c_ast.Assignment):
            return True
        if isinstance(n, c_ast.UnaryOp) and n.op in _SIDE_EFFECT_OPS:
            return True
        if isinstance(n, c_ast.FuncCall):
            if not (isinstance(n.name, c_ast.ID) and is_math_function(n.name.name)):
                return True
    return False


def is_speculatable(node: c_ast.Node | None) -> bool:
    """Safe to evaluate even when C would not: no side effects, no memory reads, no division."""
    if has_side_effects(node):
        return False
    for n in walk(node):
        if isinstance(n, c_ast.ArrayRef) or (isinstance(n, c_ast.UnaryOp) and n.op == "*"):
            return False
        if isinstance(n, c_ast.BinaryOp) and n.op in ("/", "%") and not _nonzero_constant(n.right):
            return False
        if isinstance(n, c_ast.FuncCall):
            return False
    return True


def _nonzero_constant(node: c_ast.Node) -> bool:
    if not isinstance(node, c_ast.Constant) or not node.type.endswith("int"):
        return False
    try:
        return int(node.value.rstrip("uUlL"), 0) != 0
    except ValueError:
        return node.value.strip("0uUlL") != ""


def replace_child(parent: c_ast.Node, old: c_ast.Node, new: c_ast.Node) -> None:
    """Put `new` where `old` is among `parent`'s children."""
    for slot in parent.__slots__:
        if slot in ("coord", "__weakref__"):
            continue
        value = getattr(parent, slot, None)
        if value is old:
            setattr(parent, slot, new)
            return
        if isinstance(value, list):
            for k, item in enumerate(value):
                if item is old:
                    value[k] = new
                    return
    raise AssertionError("the node is not a child of its parent")


def is_statement_wrapper(node: c_ast.Node) -> bool:
    """`do { ... } while (0)`: a macro's way to be one statement, not a loop one counts."""
    return (
        isinstance(node, c_ast.DoWhile)
        and isinstance(node.cond, c_ast.Constant)
        and node.cond.value in ("0", "0L", "0U", "0u")
    )


def parent_map(root: c_ast.Node) -> dict[int, c_ast.Node]:
    """Each node under `root` (by `id`) → its parent."""
    parents: dict[int, c_ast.Node] = {}
    for node in walk(root):
        for _, child in node.children():
            parents[id(child)] = node
    return parents


def array_name(node: c_ast.Node) -> str | None:
    """The name an array expression goes by: `a`, or `p->f` for a field of pointer `p`."""
    if isinstance(node, c_ast.ID):
        return node.name
    if (
        isinstance(node, c_ast.StructRef)
        and node.type == "->"
        and isinstance(node.name, c_ast.ID)
        and isinstance(node.field, c_ast.ID)
    ):
        return f"{node.name.name}->{node.field.name}"
    return None
