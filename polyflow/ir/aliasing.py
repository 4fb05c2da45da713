"""The one alias analysis: whether two memref values may address the same memory.

Every stage that reasons about memory asks here (the alias guard, reduction detection, the
polyhedral model's dependences, the parallelizer), so they all answer alike. The rules, for two
memref values `a` and `b`, each followed through views (subview, casts, reshapes, transpose...)
to its root:

1. The same root: they alias (two views of one array).
2. A root of unknown origin (a block argument of a nested block, a call's result, a memref read
   from memory): it may be anything, so they may alias.
3. A fresh allocation (`memref.alloc`, `memref.alloca`) aliases nothing but itself.
4. Two globals (`memref.get_global`) alias exactly when they name the same symbol.
5. Two distinct arguments of the function do not alias, unless one of them came from a C
   pointer (`polyflow.unknown_extent`): the alias guard (raising/alias_guard.py) checks the
   others at run time and runs an unoptimized copy where they overlap; TC's callers check
   theirs before the call.
6. An argument and a global may be one array (`f(G)` in a file that also names `G`).
"""

from __future__ import annotations

from typing import Any, Literal

from mlir import ir

from polyflow.ir.names import UNKNOWN_EXTENT_ATTR

# Ops whose result is a view of their first operand: the same memory under another name.
VIEW_OPS = frozenset(
    "memref.subview memref.cast memref.reinterpret_cast memref.view memref.collapse_shape "
    "memref.expand_shape memref.transpose memref.memory_space_cast memref.assume_alignment".split()
)

Origin = Literal["argument", "allocation", "global", "unknown"]


def view_root(memref: ir.Value) -> ir.Value:
    """The memref that `memref` is a view of (itself when it is no view)."""
    while isinstance(memref, ir.OpResult) and memref.owner.operation.name in VIEW_OPS:
        memref = memref.owner.operation.operands[0]
    return memref


def origin(root: ir.Value) -> tuple[Origin, Any]:
    """Where a root memref comes from: ('argument', value) for an argument of its function,
    ('allocation', value), ('global', symbol name) or ('unknown', value)."""
    if isinstance(root, ir.BlockArgument):
        block = root.owner
        parent = block.owner  # an OpView: its `name` may be the function's symbol
        if (
            parent is not None
            and parent.operation.name == "func.func"
            and block == parent.regions[0].blocks[0]
        ):
            return ("argument", root)
        return ("unknown", root)
    op = root.owner.operation  # not the OpView: memref.get_global's `name` is its symbol
    if op.name in ("memref.alloca", "memref.alloc"):
        return ("allocation", root)
    if op.name == "memref.get_global":
        return ("global", ir.FlatSymbolRefAttr(op.attributes["name"]).value)
    return ("unknown", root)


def has_argument_attribute(value: ir.Value, name: str) -> bool:
    """Whether `value` is an argument of its function carrying the argument attribute `name`."""
    if not isinstance(value, ir.BlockArgument):
        return False
    owner = value.owner.owner
    if owner is None or owner.operation.name != "func.func" or "arg_attrs" not in owner.attributes:
        return False
    attrs = ir.ArrayAttr(owner.attributes["arg_attrs"])
    return name in ir.DictAttr(attrs[value.arg_number])


def has_unknown_extent(value: ir.Value) -> bool:
    """Whether `value` is a function argument made from a C pointer (extent unknown)."""
    return has_argument_attribute(value, UNKNOWN_EXTENT_ATTR)


def may_alias(a: ir.Value, b: ir.Value) -> bool:
    """Whether memrefs `a` and `b` may address the same memory (the rules of the module
    docstring)."""
    kind_a, what_a = origin(view_root(a))
    kind_b, what_b = origin(view_root(b))
    if kind_a == kind_b and what_a == what_b:
        return True
    if "unknown" in (kind_a, kind_b):
        return True
    if "allocation" in (kind_a, kind_b):
        return False
    if kind_a == kind_b == "argument":
        return has_unknown_extent(what_a) or has_unknown_extent(what_b)
    return kind_a != kind_b  # two globals: distinct names; an argument and a global: maybe one
