"""Arrays to and from the GPU in a whole program (PPCG's way): a function whose loops run as
kernels gets a GPU copy of each host array its kernels use, made when the function starts (or
where the array's value is defined: a global), copied back before it returns when a kernel
writes it, and freed. The host never touches the arrays in between (kernel formation put all
memory work in kernels), so the copies are what the function computed.

Arrays that may overlap cannot be copied separately without changing what the program means:
a function with two such arrays (neither marked `noalias`) is refused (`NotMappable`); the
alias guard's optimizable copy (`f.affine`) has its arrays marked, and its dispatcher picks the
host copy of the function when they overlap.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import gpu, memref

from polyflow.ir.aliasing import has_argument_attribute, has_unknown_extent
from polyflow.ir.names import NOALIAS_ATTR
from polyflow.ir.ops import index_value, nested_in_any, ops_named

from .kernels import NotMappable

# What only reads an array; any other use in a kernel may write it (it is copied back).
_READS = frozenset({"memref.load", "memref.dim", "vector.load", "vector.transfer_read"})


def copy_arrays_to_device(fn: ir.Operation) -> int:
    """Give the kernels of `fn` (`gpu.launch` ops) GPU copies of the host arrays they use
    (module docstring); returns how many arrays are copied."""
    launches = ops_named(fn, "gpu.launch")
    if not launches:
        return 0
    body = fn.regions[0].blocks[0]
    arrays = [
        value
        for value in _host_arrays(fn, body)
        if any(nested_in_any(use.owner.operation, launches) for use in value.uses)
    ]
    for array in arrays:
        if has_unknown_extent(array):
            raise NotMappable(
                "a kernel uses an array passed as a C pointer, whose extent (what to copy to "
                "the GPU) is unknown"
            )
        t = ir.MemRefType(array.type)
        if not _identity_layout(t):
            raise NotMappable(f"a kernel uses an array of type {t}, not a plain row-major one")
    _check_disjoint(arrays)
    returns = ops_named(fn, "func.return")
    for array in arrays:
        _copy(array, launches, returns, body)
    return len(arrays)


def _host_arrays(fn: ir.Operation, body: ir.Block) -> list[ir.Value]:
    """The memrefs the host holds: the function's arguments and the globals it reads."""
    values = [arg for arg in body.arguments if isinstance(arg.type, ir.MemRefType)]
    for op in body.operations:
        if op.operation.name == "memref.get_global":
            values.append(op.operation.results[0])
    return values


def _check_disjoint(arrays: list[ir.Value]) -> None:
    arguments = [a for a in arrays if isinstance(a, ir.BlockArgument)]
    if len(arguments) < 2:
        return
    for arg in arguments:
        if not has_argument_attribute(arg, NOALIAS_ATTR):
            raise NotMappable(
                "its arrays may overlap (polyflow could not show them disjoint), and separate "
                "GPU copies would not see each other's writes"
            )


def _copy(
    array: ir.Value, launches: list[ir.Operation], returns: list[ir.Operation], body: ir.Block
) -> None:
    t = ir.MemRefType(array.type)
    owner = array.owner
    if isinstance(owner, ir.Block):
        anchor = next(op.operation for op in body.operations)
        ip = ir.InsertionPoint(anchor)
    else:
        ip = ir.InsertionPoint.after(owner.operation)  # type: ignore[attr-defined]
    loc = launches[0].location
    with ip, loc:
        sizes = [
            memref.DimOp(array, index_value(k)).result
            for k, extent in enumerate(t.shape)
            if ir.ShapedType.is_dynamic_size(extent)
        ]
        device = gpu.AllocOp(t, None, [], sizes, []).memref
        gpu.MemcpyOp(None, [], device, array)
    written = False
    for use in list(array.uses):
        user = use.owner.operation
        if nested_in_any(user, launches):
            user.operands[use.operand_number] = device
            written = written or user.name not in _READS
    for ret in returns:
        with ir.InsertionPoint(ret), ret.location:
            if written:
                gpu.MemcpyOp(None, [], array, device)
            gpu.DeallocOp(None, [], device)


def _identity_layout(t: ir.MemRefType) -> bool:
    dims = ", ".join(f"d{k}" for k in range(t.rank))
    return str(t.layout) == f"affine_map<({dims}) -> ({dims})>"
