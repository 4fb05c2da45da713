"""The mapped program on the CPU: each outlined kernel (`gpu.func`) becomes a CPU function that
loops over the blocks of its grid and, inside, over the threads of a block, and each
`gpu.launch_func` a call of it with the grid, the block and the kernel's arguments, so that a
program built for `cuda` runs here and can be compared with gcc and NumPy (`--gpu-emulate`,
`fn.emulate(...)`). It proves the mapping and the outlining: the grid, the guards, the index
arithmetic, the arguments each launch passes and the barriers run exactly as written for the
GPU. The CPU function's lowered signature is the kernel's (grid and block sizes first, then
each memref as its descriptor's fields), so a launcher's argument list can be checked on it.

A barrier is honoured the way Polygeist runs GPU code on CPUs: the thread loop is split at it,
so every thread finishes what comes before the barrier before any starts what comes after. A loop
around a barrier must be uniform (its bounds the same in every thread of a block, as CUDA
requires); it runs once per block with the thread loops split inside it. A value a thread
computes before a barrier and uses after it is refused (the mapping computes such values
again after the barrier); thread-independent values (block ids, sizes, constants) are computed
once per block. `gpu.alloc`/`gpu.dealloc`/`gpu.memcpy` become their host equivalents.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, gpu, memref, scf

from polyflow.ir.names import SHARED_ATTR, symbol_name
from polyflow.ir.ops import (
    all_operands,
    index_value,
    nested_in_any,
    ops_named,
    remap_operands,
    shared_buffer,
    walk,
)

_PURE_PREFIXES = ("arith.", "math.", "index.")
_AXES = {"x": 0, "y": 1, "z": 2}
# The CPU function of the kernel in gpu module M: `__polyflow_gpu_M`.
CPU_KERNEL_PREFIX = "__polyflow_gpu_"


class NotEmulatable(Exception):
    """A kernel the CPU emulation cannot run faithfully (a value crossing a barrier, a loop
    around a barrier whose bounds depend on the thread)."""


def emulate_kernels(module: ir.Module) -> int:
    """Replace `module`'s outlined kernels and their launches by CPU functions and calls (module
    docstring), and the GPU memory ops by host ones; returns the number of kernels."""
    count = 0
    with module.context:
        names: dict[str, str] = {}  # "@module::@kernel" -> CPU function
        for op in [o.operation for o in module.body.operations]:
            if op.name != "gpu.module":
                continue
            module_name = symbol_name(op)
            for inner in [o.operation for o in op.regions[0].blocks[0].operations]:
                if inner.name == "gpu.func" and "gpu.kernel" in inner.attributes:
                    cpu = f"{CPU_KERNEL_PREFIX}{module_name}"
                    with ir.InsertionPoint(op), inner.location:
                        _cpu_kernel(inner, cpu)
                    names[f"@{module_name}::@{symbol_name(inner)}"] = cpu
                    count += 1
            op.erase()
        for op in [o.operation for o in module.body.operations]:
            if op.name == "func.func":
                for launch in ops_named(op, "gpu.launch_func"):
                    _call_instead(launch, names)
                _host_memory(op)
        if "gpu.container_module" in module.operation.attributes:
            del module.operation.attributes["gpu.container_module"]
    return count


def _cpu_kernel(kernel: ir.Operation, name: str) -> ir.Operation:
    """The CPU function of `kernel`: (grid x y z, block x y z, the kernel's arguments)."""
    index = ir.IndexType.get()
    kernel_type = ir.FunctionType(ir.TypeAttr(kernel.attributes["function_type"]).value)
    inputs = [index] * 6 + list(kernel_type.inputs)
    fn = func.FuncOp(name, (inputs, []))
    fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
    entry = fn.add_entry_block()
    args = list(entry.arguments)
    grid, block = args[0:3], args[3:6]
    old_entry = kernel.regions[0].blocks[0]
    for old, new in zip(old_entry.arguments, args[6:], strict=True):
        old.replace_all_uses_with(new)
    _demote_carried_values(old_entry, kernel.location)
    ops = [o.operation for o in old_entry.operations]
    block_ivs, ip = _loops_over(grid, ir.InsertionPoint(entry), kernel.location)
    with ir.InsertionPoint(entry), kernel.location:
        func.ReturnOp([])
    thread_ids: list[list[ir.Value]] = [[], [], []]
    body_ops = []
    for op in ops:
        if op.name in ("gpu.block_id", "gpu.grid_dim", "gpu.block_dim"):
            axis = _axis(op)
            value = {"gpu.block_id": block_ivs, "gpu.grid_dim": grid, "gpu.block_dim": block}[
                op.name
            ][axis]
            op.results[0].replace_all_uses_with(value)
            op.erase()
        elif op.name == "gpu.thread_id":
            thread_ids[_axis(op)].append(op.results[0])
            body_ops.append(op)
        elif op.name == "gpu.return":
            op.erase()
        else:
            body_ops.append(op)
    nested = [
        inner
        for op in body_ops
        for inner in ops_named(op, "gpu.thread_id")
        + ops_named(op, "gpu.block_id")
        + ops_named(op, "gpu.return")
    ]
    if nested:
        raise NotEmulatable(f"{nested[0].name} nested in the kernel's control flow")
    id_ops = [op for op in body_ops if op.name == "gpu.thread_id"]
    body_ops = [op for op in body_ops if op.name != "gpu.thread_id"]
    _threads(body_ops, ip, thread_ids, block, kernel.location)
    for op in id_ops:
        op.erase()
    return fn.operation


MAX_BLOCK_THREADS = 1024


def _demote_carried_values(body: ir.Block, loc: ir.Location) -> None:
    """The values a loop around a barrier carries from one iteration to the next (a register
    tile's partial sums) differ between the threads: each goes to a per-thread slot of a block
    buffer (stored before the loop and at the end of each iteration, loaded where it is used),
    which is what a GPU thread's registers are to the split thread loops."""
    loops = [
        op
        for op in walk(body.owner.operation)
        if op.name == "scf.for"
        and len(op.results) > 0
        and any(inner.name == "gpu.barrier" for inner in walk(op))
    ]
    crossing = _values_across_barriers(body)
    if not loops and not crossing:
        return
    first = next(o.operation for o in body.operations)
    dims = [ir.Attribute.parse(f"#gpu<dim {axis}>") for axis in "xyz"]
    with ir.InsertionPoint(first), loc:
        tids = [gpu.ThreadIdOp(d).result for d in dims]
        sizes = [gpu.BlockDimOp(d).result for d in dims]

    def thread_linear() -> ir.Value:
        return arith.AddIOp(
            tids[0],
            arith.MulIOp(
                sizes[0], arith.AddIOp(tids[1], arith.MulIOp(sizes[1], tids[2])).result
            ).result,
        ).result

    for value, users in crossing:
        definer = value.owner.operation
        with ir.InsertionPoint(definer), loc:
            slot = shared_buffer((MAX_BLOCK_THREADS,), value.type)
        with ir.InsertionPoint.after(definer), loc:  # type: ignore[attr-defined]
            memref.StoreOp(value, slot, [thread_linear()])
        for user, number in users:
            with ir.InsertionPoint(user), loc:
                user.operands[number] = memref.LoadOp(slot, [thread_linear()]).result
    for loop in loops:
        with ir.InsertionPoint(loop), loc:
            linear = thread_linear()
            slots = [shared_buffer((MAX_BLOCK_THREADS,), value.type) for value in loop.operands[3:]]
            for slot, value in zip(slots, list(loop.operands)[3:], strict=True):
                memref.StoreOp(value, slot, [linear])
        loop_body = loop.regions[0].blocks[0]
        carried = list(loop_body.arguments)[1:]
        ops = [o.operation for o in loop_body.operations]
        with ir.InsertionPoint(ops[-1]), loc:
            for slot, value in zip(slots, list(ops[-1].operands), strict=True):
                memref.StoreOp(value, slot, [linear])
        _load_at_uses(carried, slots, linear, loop, loc)
        with ir.InsertionPoint(loop), loc:
            plain = scf.ForOp(*list(loop.operands)[:3])
        ops = [o.operation for o in loop_body.operations]  # the stores and loads included
        for op in ops[:-1]:
            plain.body.append(op)
        with ir.InsertionPoint(plain.body), loc:
            scf.YieldOp([])
        loop_body.arguments[0].replace_all_uses_with(plain.induction_variable)
        _load_at_uses(list(loop.results), slots, linear, loop.parent.operation, loc)
        ops[-1].erase()
        loop.erase()


def _values_across_barriers(
    body: ir.Block,
) -> list[tuple[ir.Value, list[tuple[ir.Operation, int]]]]:
    """The results of ops (not pure arithmetic, which is computed again) at a block level of
    the kernel that are used after a barrier at that level, with those uses (user, operand
    number): a GPU thread keeps them in registers, the split thread loops need them stored."""
    found: list[tuple[ir.Value, list[tuple[ir.Operation, int]]]] = []
    ops = [o.operation for o in body.operations]
    barrier_at = [
        k for k, op in enumerate(ops) if any(inner.name == "gpu.barrier" for inner in walk(op))
    ]
    for k, op in enumerate(ops):
        if any(inner.name == "gpu.barrier" for inner in walk(op)) and op.name == "scf.for":
            found += _values_across_barriers(op.regions[0].blocks[0])
        block_level = op.name == "memref.alloca" or op.name.startswith("gpu.")
        if _is_pure(op) or block_level or not barrier_at or k > barrier_at[-1]:
            continue
        for value in op.results:
            users = []
            for use in value.uses:
                user = use.owner.operation
                top = user
                while top.parent is not None and top.parent.operation != body.owner.operation:
                    top = top.parent.operation
                position = next((j for j, o in enumerate(ops) if o == top), None)
                if position is not None and any(k < b <= position for b in barrier_at):
                    users.append((user, use.operand_number))
            if users:
                found.append((value, users))
    return found


def _load_at_uses(
    values: list[ir.Value],
    slots: list[ir.Value],
    linear: ir.Value,
    owner: ir.Operation,
    loc: ir.Location,
) -> None:
    """Replace each use of `values[k]` by a load of `slots[k][linear]` placed just before the
    user's ancestor among the ops of `owner`'s body."""
    for value, slot in zip(values, slots, strict=True):
        for use in list(value.uses):
            user = use.owner.operation
            top = user
            while top.parent is not None and top.parent.operation != owner:
                top = top.parent.operation
            with ir.InsertionPoint(top), loc:
                loaded = memref.LoadOp(slot, [linear]).result
            user.operands[use.operand_number] = loaded


def _loops_over(
    sizes: list[ir.Value], ip: ir.InsertionPoint, loc: ir.Location
) -> tuple[list[ir.Value], ir.InsertionPoint]:
    """Loops over `sizes` (x, y, z; z outermost) at `ip`: their induction variables (x, y, z)
    and the insertion point inside the innermost."""
    with ip, loc:
        zero, one = index_value(0), index_value(1)
    ivs: list[ir.Value] = [zero, zero, zero]
    for axis in (2, 1, 0):
        with ip, loc:
            loop = scf.ForOp(zero, sizes[axis], one)
        with ir.InsertionPoint(loop.body), loc:
            end = scf.YieldOp([])
        ip = ir.InsertionPoint(end)
        ivs[axis] = loop.induction_variable
    return ivs, ip


def _axis(op: ir.Operation) -> int:
    text = str(op.attributes["dimension"])  # #gpu<dim x>
    return _AXES[text.rstrip(">").split()[-1]]


def _call_instead(launch: ir.Operation, names: dict[str, str]) -> None:
    view = launch.opview
    kernel = str(launch.attributes["kernel"])
    if kernel not in names:
        raise NotEmulatable(f"launch of an unknown kernel {kernel}")
    sizes = [
        view.gridSizeX,
        view.gridSizeY,
        view.gridSizeZ,
        view.blockSizeX,
        view.blockSizeY,
        view.blockSizeZ,
    ]
    with ir.InsertionPoint(launch), launch.location:
        func.CallOp([], ir.FlatSymbolRefAttr.get(names[kernel]), [*sizes, *view.kernelOperands])
    launch.erase()


def _depends_on(op: ir.Operation, values: list[ir.Value]) -> bool:
    """Whether `op` (or an op nested in it) uses one of `values`, directly or through the ops of
    the same block that compute its operands."""
    for operand in all_operands(op):
        if any(operand == v for v in values):
            return True
        owner = operand.owner
        if not isinstance(owner, ir.Block) and owner.operation.parent == op.parent:
            if _depends_on(owner.operation, values):
                return True
    return False


def _value_depends(value: ir.Value, values: list[ir.Value], depth: int = 0) -> bool:
    """Whether `value` is one of `values` or computed from one (through pure ops)."""
    if any(value == v for v in values):
        return True
    owner = value.owner
    if isinstance(owner, ir.Block) or depth > 32:
        return False
    return any(_value_depends(v, values, depth + 1) for v in owner.operation.operands)


def _flat(values: list[list[ir.Value]]) -> list[ir.Value]:
    return [value for axis in values for value in axis]


def _is_pure(op: ir.Operation) -> bool:
    return not op.regions and op.name.startswith(_PURE_PREFIXES)


def _threads(
    ops: list[ir.Operation],
    ip: ir.InsertionPoint,
    thread_ids: list[list[ir.Value]],
    block: list[ir.Value],
    loc: ir.Location,
    outer_recomputed: list[ir.Operation] | None = None,
) -> None:
    """Emit `ops` (one block-level sequence of a kernel body) at `ip`: split at barriers, each
    piece inside its own loops over the threads; uniform loops that contain barriers run at the
    block level with their bodies split the same way. Pure values computed per thread at this
    level (a thread's position and indices) are computed again inside each piece that uses
    them: a thread keeps them in registers across a barrier on the GPU."""
    outer_recomputed = outer_recomputed or []
    recomputed: list[ir.Operation] = list(outer_recomputed)
    piece: list[ir.Operation] = []
    for op in ops:
        if op.name == "memref.alloca" and SHARED_ATTR in op.attributes:
            op.move_before(_anchor(ip))  # shared memory: one buffer per block
        elif op.name == "gpu.barrier":
            _thread_loops(piece, ip, thread_ids, block, loc, recomputed)
            piece = []
            op.erase()
        elif any(inner.name == "gpu.barrier" for inner in walk(op)):
            if op.name != "scf.for" or any(
                _value_depends(v, _flat(thread_ids)) for v in op.operands
            ):
                raise NotEmulatable(
                    f"a barrier inside {op.name} whose control depends on the thread"
                )
            _thread_loops(piece, ip, thread_ids, block, loc, recomputed)
            piece = []
            op.move_before(_anchor(ip))
            inner_ops = [o.operation for o in op.regions[0].blocks[0].operations]
            _threads(
                inner_ops[:-1], ir.InsertionPoint(inner_ops[-1]), thread_ids, block, loc, recomputed
            )
        elif _is_pure(op) and not _depends_on(op, _flat(thread_ids)):
            op.move_before(_anchor(ip))  # the same in every thread: once per block
        elif _is_pure(op) and not any(_produced_by(operand, piece) for operand in op.operands):
            recomputed.append(op)  # per thread: computed again in each piece that uses it
        else:
            piece.append(op)
    _thread_loops(piece, ip, thread_ids, block, loc, recomputed)
    for op in reversed(recomputed[len(outer_recomputed) :]):
        if not list(op.results[0].uses):
            op.erase()


def _anchor(ip: ir.InsertionPoint) -> ir.Operation:
    """The op an insertion point inserts before (block-end points are made before a yield)."""
    ref = ip.ref_operation
    if ref is None:
        raise NotEmulatable("internal: an insertion point at a block's end")
    return ref.operation


def _thread_loops(
    piece: list[ir.Operation],
    ip: ir.InsertionPoint,
    thread_ids: list[list[ir.Value]],
    block: list[ir.Value],
    loc: ir.Location,
    recomputed: list[ir.Operation] | None = None,
) -> None:
    """Move `piece` into loops over the block's threads (z outermost, x innermost) at `ip`,
    with clones of the `recomputed` ops its ops use."""
    if not piece:
        return
    ivs, inner_ip = _loops_over(block, ip, loc)
    anchor = _anchor(inner_ip)
    needed = _needed(piece, recomputed or [])
    mapping: dict[ir.Value, ir.Value] = {}
    for op in needed:  # in their original order: operands before users
        clone = op.clone(ip=ir.InsertionPoint(anchor))
        for index, operand in enumerate(clone.operands):
            if operand in mapping:
                clone.operands[index] = mapping[operand]
        mapping[op.results[0]] = clone.results[0]
    for op in piece:
        op.move_before(anchor)
        remap_operands([op], mapping)
    piece = [*(mapping[op.results[0]].owner.operation for op in needed), *piece]
    old = [value for axis in range(3) for value in thread_ids[axis]]
    new = [ivs[axis] for axis in range(3) for _ in thread_ids[axis]]
    for op in piece:
        _replace_operands(op, old, new)
    for op in piece:
        for result in op.results:
            for use in result.uses:
                if not nested_in_any(use.owner.operation, piece):
                    raise NotEmulatable(
                        "a value a thread computes before a barrier is used after it"
                    )


def _produced_by(value: ir.Value, ops: list[ir.Operation]) -> bool:
    owner = value.owner
    return not isinstance(owner, ir.Block) and any(owner.operation == op for op in ops)


def _needed(piece: list[ir.Operation], recomputed: list[ir.Operation]) -> list[ir.Operation]:
    """The `recomputed` ops whose values `piece` uses, directly or through each other, in the
    order of `recomputed`."""
    wanted: set[int] = set()
    pending = [v for op in piece for v in all_operands(op)]
    index = {op.results[0]: k for k, op in enumerate(recomputed)}
    while pending:
        value = pending.pop()
        k = index.get(value)
        if k is not None and k not in wanted:
            wanted.add(k)
            pending.extend(recomputed[k].operands)
    return [recomputed[k] for k in sorted(wanted)]


def _replace_operands(op: ir.Operation, old: list[ir.Value], new: list[ir.Value]) -> None:
    for index, operand in enumerate(op.operands):
        for before, after in zip(old, new, strict=True):
            if operand == before:
                op.operands[index] = after
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                _replace_operands(inner.operation, old, new)


def _host_memory(fn: ir.Operation) -> None:
    """`gpu.alloc` → `memref.alloc`, `gpu.dealloc` → `memref.dealloc`, `gpu.memcpy` →
    `memref.copy` (host memory stands in for the GPU's)."""
    for op in ops_named(fn, "gpu.alloc"):
        with ir.InsertionPoint(op), op.location:
            dynamic = [v for v in op.operands if isinstance(v.type, ir.IndexType)]
            host = memref.AllocOp(op.results[0].type, dynamic, []).result
        op.results[0].replace_all_uses_with(host)
        op.erase()
    for op in ops_named(fn, "gpu.dealloc"):
        with ir.InsertionPoint(op), op.location:
            memref.DeallocOp(list(op.operands)[-1])
        op.erase()
    for op in ops_named(fn, "gpu.memcpy"):
        target, source = list(op.operands)[-2:]
        with ir.InsertionPoint(op), op.location:
            memref.CopyOp(source, target)
        op.erase()
