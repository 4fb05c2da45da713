"""Alias scopes for the accesses of `noalias` arguments: in a function of the LLVM dialect whose
pointer arguments carry `llvm.noalias`, each load and store whose address is based on one of
them (through `getelementptr` and the memref descriptors built from the arguments) gets that
argument's alias scope, and the other arguments' scopes as its noalias scopes.

This states on the accesses what `noalias` already says of the arguments (memory reached
through one of them is not reached through another while the function runs), so it adds no
assumption; it survives what the argument attribute does not: OpenMP's outlining moves a
parallel loop's body into a function of its own that receives the pointers in a struct, and
there LLVM saw every store as a possible write to every array. In adi's row strips it reloaded
each recurrence's previous value after every store and kept the divisions scalar.
"""

from __future__ import annotations

from mlir import ir

# The ops whose address operand is followed back to an argument, and which operand it is.
_ACCESSES = {"llvm.load": 0, "llvm.store": 1}
# How far back through getelementptr / extractvalue an address is followed.
MAX_TRACE_STEPS = 64


def scope_noalias_accesses(module: ir.Module, positions: dict[str, list[int]]) -> ir.Module:
    """Give the loads and stores of each `llvm.func` named in `positions` (its `llvm.noalias`
    pointer arguments' positions) alias scopes, one per argument (module docstring); accesses
    whose address is not traced to one of them are left as they are."""
    for view in module.body.operations:
        op = view.operation
        if op.name != "llvm.func" or not op.regions[0].blocks:
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        marked = positions.get(name, [])
        if len(marked) < 2:  # one array alone: nothing to tell apart
            continue
        _scope_accesses(op, name, marked)
    return module


def _scope_accesses(function: ir.Operation, name: str, marked: list[int]) -> None:
    entry = function.regions[0].blocks[0]
    arguments = {entry.arguments[pos]: k for k, pos in enumerate(marked)}
    scopes = _scopes(name, len(marked))
    own = [ir.ArrayAttr.get([scope]) for scope in scopes]
    others = [
        ir.ArrayAttr.get([scopes[j] for j in range(len(marked)) if j != k])
        for k in range(len(marked))
    ]

    def visit(op: ir.Operation) -> ir.WalkResult:
        operand = _ACCESSES.get(op.name)
        if operand is not None:
            k = _argument_of(op.operands[operand], arguments)
            if k is not None:
                op.attributes["alias_scopes"] = own[k]
                op.attributes["noalias_scopes"] = others[k]
        return ir.WalkResult.ADVANCE

    function.walk(visit)


def _scopes(function: str, count: int) -> list[ir.Attribute]:
    """`count` alias scopes in one new domain (parsed at once: `distinct[0]` is one domain)."""
    label = function.replace("\\", "").replace('"', "")
    domain = f'#llvm.alias_scope_domain<id = distinct[0]<>, description = "{label}">'
    text = ", ".join(
        f"#llvm.alias_scope<id = distinct[{k + 1}]<>, domain = {domain}, "
        f'description = "{label}: noalias argument {k}">'
        for k in range(count)
    )
    return list(ir.ArrayAttr(ir.Attribute.parse(f"[{text}]")))


def _argument_of(address: ir.Value, arguments: dict[ir.Value, int]) -> int | None:
    """Which of `arguments` `address` is based on: followed back through `getelementptr` and
    through `extractvalue` of a descriptor built by `insertvalue`; None where it leads
    elsewhere (a loaded pointer, a phi, a call)."""
    value = address
    for _ in range(MAX_TRACE_STEPS):
        if value in arguments:
            return arguments[value]
        owner = value.owner
        if not isinstance(owner, ir.Operation | ir.OpView):
            return None  # an argument of another block, or of the entry block but not marked
        op = owner.operation if isinstance(owner, ir.OpView) else owner
        if op.name in ("llvm.getelementptr", "llvm.bitcast", "llvm.addrspacecast"):
            value = op.operands[0]
        elif op.name == "llvm.extractvalue":
            inserted = _inserted_at(op.operands[0], str(op.attributes["position"]))
            if inserted is None:
                return None
            value = inserted
        else:
            return None
    return None


def _inserted_at(container: ir.Value, position: str) -> ir.Value | None:
    """The value the chain of `insertvalue` ops that built `container` put at `position`."""
    for _ in range(MAX_TRACE_STEPS):
        owner = container.owner
        if not isinstance(owner, ir.Operation | ir.OpView):
            return None
        op = owner.operation if isinstance(owner, ir.OpView) else owner
        if op.name != "llvm.insertvalue":
            return None
        if str(op.attributes["position"]) == position:
            return op.operands[1]
        container = op.operands[0]
    return None
