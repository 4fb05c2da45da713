"""Functions and symbols of a module: which functions the stages work on, the C names behind
the copies the alias guard makes, and scratch modules that hold one function with just what it
refers to (how each stage transforms a function on a copy, and swaps the copy in on success)."""

from __future__ import annotations

from collections.abc import Iterator

from mlir import ir

from polyflow.ir.names import CABI_PREFIX, DISPATCHER_ATTR, NO_RAISE_ATTR, symbol_name


def raisable_functions(module: ir.Module) -> Iterator[ir.Operation]:
    """The functions raising works on: defined, not a C-ABI entry, not marked `no_raise`."""
    for op in module.body.operations:
        operation = op.operation
        if operation.name != "func.func" or len(operation.regions[0].blocks) == 0:
            continue
        if symbol_name(operation).startswith(CABI_PREFIX) or NO_RAISE_ATTR in operation.attributes:
            continue
        yield operation


def scratch_module(module: ir.Module, target: ir.Operation) -> tuple[ir.Module, ir.Operation]:
    """A module holding a copy of `target`, declarations of the functions it references (so that
    calls verify) and copies of the other top-level symbols it references (globals); and the
    copy. Its size is that of `target`, not of `module`: a file of thousands of functions
    stays linear to compile."""
    names = referenced_symbols(target)
    # a symbol table of the module costs its size: built only for a function that refers to
    # something (most loop functions refer to nothing)
    table = ir.SymbolTable(module.operation) if names else None
    scratch = ir.Module.create(loc=module.operation.location)
    with ir.InsertionPoint(scratch.body):
        for name in sorted(names):
            assert table is not None
            if name not in table:
                continue
            operation = table[name]
            if operation == target:
                continue
            if operation.name == "func.func":
                declaration_of(operation)
            else:
                operation.clone()
        copy = target.clone()
    return scratch, copy


def declaration_of(function: ir.Operation) -> ir.Operation:
    """A private declaration of `function` (its name and type, no body), created at the current
    insertion point with its location."""
    return ir.Operation.create(
        "func.func",
        attributes={
            "sym_name": function.attributes["sym_name"],
            "function_type": function.attributes["function_type"],
            "sym_visibility": ir.StringAttr.get("private"),
        },
        regions=1,
        loc=function.location,
    )


def referenced_symbols(op: ir.Operation) -> set[str]:
    """The names of the top-level symbols that `op` and the ops inside it refer to (callees,
    globals), by the symbol references among their attributes."""
    names: set[str] = set()

    def collect(attr: ir.Attribute) -> None:
        if isinstance(attr, ir.FlatSymbolRefAttr):
            names.add(attr.value)
        elif isinstance(attr, ir.SymbolRefAttr):
            names.add(str(attr.value[0]))
        elif isinstance(attr, ir.ArrayAttr):
            for element in attr:
                collect(element)

    def visit(inner: ir.Operation) -> ir.WalkResult:
        attributes = inner.attributes
        for index in range(len(attributes)):
            collect(attributes[index].attr)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return names


def swap_in(fn: ir.Operation, copy: ir.Operation) -> ir.Operation | None:
    """Replace `fn` by `copy` (a transformed copy from `scratch_module`) when its type is
    unchanged, so that its callers still match it; the new function, or None (and `fn` stays).
    Every stage transforms a function this way: on a copy, swapped in only on success."""
    if copy.attributes["function_type"] != fn.attributes["function_type"]:
        return None
    new = copy.clone(ip=ir.InsertionPoint(fn))
    fn.erase()
    return new


def source_names(module: ir.Module) -> dict[str, str]:
    """The C name of each function that stands for another: the alias guard's optimizable
    copy `f.affine` stands for `f` (see alias_guard.py), the sized copy `f.sized` too
    (pointer_extents.py); the others are named as in C."""
    out: dict[str, str] = {}
    for op in module.body.operations:
        operation = op.operation
        if operation.name == "func.func" and DISPATCHER_ATTR in operation.attributes:
            copy = ir.StringAttr(operation.attributes[DISPATCHER_ATTR]).value
            out[copy] = symbol_name(operation)
    # a copy of a copy (the sized copy of `f.affine`) stands for the first one's C name
    for copy in list(out):
        name, seen = out[copy], {copy}
        while name in out and name not in seen:
            seen.add(name)
            name = out[name]
        out[copy] = name
    return out


def argument_attributes(fn: ir.Operation) -> list[dict[str, ir.Attribute]]:
    """The attributes of each argument of function `fn` (`func.func` or `llvm.func`), by name;
    `set_argument_attributes` writes them back."""
    old = ir.ArrayAttr(fn.attributes["arg_attrs"]) if "arg_attrs" in fn.attributes else None
    found: list[dict[str, ir.Attribute]] = []
    for k in range(len(fn.regions[0].blocks[0].arguments)):
        current = ir.DictAttr(old[k]) if old is not None else ir.DictAttr.get({})
        found.append({current[i].name: current[i].attr for i in range(len(current))})
    return found


def set_argument_attributes(fn: ir.Operation, entries: list[dict[str, ir.Attribute]]) -> None:
    """Give the arguments of function `fn` the attributes `entries` (one dict per argument)."""
    fn.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(e) for e in entries])


def enclosing_function_name(op: ir.Operation) -> str | None:
    """The symbol name of the `func.func` around `op`, None outside any."""
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        parent = parent.parent
    return symbol_name(parent) if parent is not None else None
