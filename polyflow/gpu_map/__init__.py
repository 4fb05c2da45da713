"""The GPU mapping (`target="cuda"`): scheduled affine functions → host code with `gpu.launch`
kernels, never wrong code.

`map_module(module, options)` runs after the polyhedral stage has scheduled each function for
the GPU (coincident loops outermost, every parallel loop marked) and works on each function the
polyhedral stage worked on, on a copy swapped in on success:

1. `kernels.form_kernels`: parallel loop nests → bands (nested `affine.parallel`), sequential
   loops around them stay on the host (one kernel per step), other memory work → single-thread
   kernels;
2. `lower-affine` (the launch body is plain SCF, which the GPU and CPU lowerings both read);
3. `launch.map_launches`: each band → `gpu.launch` with blocks × threads, guards and grid-stride
   tile loops;
4. for a whole program (not `whole`: the arrays are the host's), `transfers`: GPU copies of the
   arrays the kernels use, in when the function starts, out before it returns.

A function that cannot be split keeps its code and runs on the host, with a warning saying why
(`NOT_MAPPED_ATTR`). What each launch maps goes to the report: a `gpu-kernel` remark per
launch (the loops and the axes they went to, the block shape), a `gpu-single-thread` note for
work that runs on one GPU thread. `emulate.emulate_launches` then runs the kernels on the CPU
(`--gpu-emulate`), or the CUDA lowering outlines them and makes PTX.
"""

from __future__ import annotations

from mlir import ir
from mlir.passmanager import PassManager

from polyflow.ir.functions import raisable_functions, scratch_module, swap_in
from polyflow.ir.locations import compile_error_at, source_position
from polyflow.ir.names import CABI_PREFIX, NOT_AFFINE_ATTR, NOT_MAPPED_ATTR, symbol_name
from polyflow.ir.remarks import attach_remarks, remark_at
from polyflow.options import Options
from polyflow.report import Remark

from .kernels import KernelFormation, NotMappable, form_kernels
from .launch import LaunchInfo, map_launches
from .transfers import copy_arrays_to_device

CONTAINER_ATTR = "gpu.container_module"


def map_module(module: ir.Module, options: Options, *, whole: bool = False) -> ir.Module:
    """Map the parallel loop nests of `module`'s functions to GPU kernels (module docstring);
    returns `module`. `whole`: every mapped function runs entirely on the GPU (its arrays live
    there: the Python API), so a function without parallel loops becomes one single-thread
    kernel rather than host code."""
    with module.context, ir.Location.unknown():
        module.operation.attributes[CONTAINER_ATTR] = ir.UnitAttr.get()
        if whole:  # every function: the alias guard's dispatcher and unraised copy too ...
            functions = [
                op.operation
                for op in module.body.operations
                if op.operation.name == "func.func"
                and op.operation.regions[0].blocks
                and not symbol_name(op.operation).startswith(CABI_PREFIX)
                # ... but those that touch no array of their caller's: they run as they are,
                # on the host or (called from a kernel) on the GPU
                and not _self_contained(op.operation)
            ]
        else:
            functions = [
                fn for fn in raisable_functions(module) if NOT_AFFINE_ATTR not in fn.attributes
            ]
        host_calls = frozenset(symbol_name(fn) for fn in functions) if whole else frozenset()
        for fn in functions:
            _map_function(module, fn, options, whole, host_calls)
    return module


def _self_contained(fn: ir.Operation) -> bool:
    """Whether `fn` takes no array, reads no global and calls nothing: the memory it touches is
    its own stack."""
    if any(isinstance(arg.type, ir.MemRefType) for arg in fn.regions[0].blocks[0].arguments):
        return False
    found = False

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal found
        if op.name in ("memref.get_global", "func.call", "llvm.call", "func.call_indirect"):
            found = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    fn.walk(visit)
    return not found


def _map_function(
    module: ir.Module,
    fn: ir.Operation,
    options: Options,
    whole: bool,
    host_calls: frozenset[str],
) -> None:
    scratch, copy = scratch_module(module, fn)
    try:
        formed = form_kernels(copy, whole=whole, host_calls=host_calls)
        if not formed.mapped and not whole:
            attach_remarks(fn, [_host_remark(fn, "it has no parallel loop")])
            return
        PassManager.parse("func.func(lower-affine)").run(copy)
        launches = map_launches(
            copy,
            block=options.block,
            grid=options.grid,
            shared_memory=options.shared_memory,
            reassociate=options.reassociation,
            register_tile=options.gpu_register_tile,
            unroll=options.unroll,
        )
        if not whole:  # its arrays are the host's: copies in GPU memory for the kernels
            copy_arrays_to_device(copy)
        swapped = swap_in(fn, copy)
        if swapped is None:
            raise NotMappable("the mapping changed the function's type")
        attach_remarks(swapped, _launch_remarks(launches, formed))
    except NotMappable as exc:
        if whole:  # its arrays are in GPU memory: the host cannot run it
            message = f"function '{symbol_name(fn)}' cannot run on the GPU: {exc}"
            raise compile_error_at(fn.location, message) from None
        fn.attributes[NOT_MAPPED_ATTR] = ir.StringAttr.get(str(exc))
        attach_remarks(fn, [_host_remark(fn, str(exc), warning=True)])
    finally:
        del scratch


def _host_remark(fn: ir.Operation, reason: str, *, warning: bool = False) -> Remark:
    return remark_at(
        fn.location,
        "gpu",
        "gpu-host",
        "warning" if warning else "note",
        f"runs on the host, not the GPU: {reason}",
        {"reason": reason},
    )


def _launch_remarks(launches: list[LaunchInfo], formed: KernelFormation) -> list[Remark]:
    out: list[Remark] = []
    for launch in launches:
        if launch.single_thread:
            out.append(
                remark_at(
                    launch.location,
                    "gpu",
                    "gpu-single-thread",
                    "note",
                    "this code runs on one GPU thread (it is not in a parallel loop)",
                )
            )
            continue
        mapped = ", ".join(
            f"line {loop.line} → {loop.axis}" if loop.line else f"loop → {loop.axis}"
            for loop in launch.loops
        )
        shape = "×".join(str(t) for t in launch.block)
        if launch.chosen_below is not None:
            shape += (
                f"; run when the band has fewer than {launch.chosen_below} points, the next "
                "kernel otherwise"
            )
        if any(launch.tree):
            out.append(
                remark_at(
                    launch.location,
                    "gpu",
                    "float-reduction",
                    "warning",
                    "this kernel reorders a floating-point reduction over the threads of a block "
                    "(-fassociative-math: the result may differ from C's order in the last bits)",
                )
            )
        if launch.register_tile:
            points = "×".join(str(f) for f in launch.register_tile)
            shape += f", {points} points per thread (register tile)"
        if launch.promoted:
            tiles = ", ".join(
                (f"argument {p.argument}" if p.argument is not None else "an array")
                + f" ({'×'.join(map(str, p.shape))}, {p.bytes} bytes)"
                for p in launch.promoted
            )
            shape += f"; read through shared memory: {tiles}"
        out.append(
            remark_at(
                launch.location,
                "gpu",
                "gpu-kernel",
                "remark",
                f"kernel: loops mapped to blocks × threads ({mapped}), block {shape}",
                {
                    "block": list(launch.block),
                    "register_tile": list(launch.register_tile),
                    "loops": [{"line": loop.line, "axis": loop.axis} for loop in launch.loops],
                    "promoted": [
                        {"argument": p.argument, "shape": list(p.shape), "bytes": p.bytes}
                        for p in launch.promoted
                    ],
                },
            )
        )
    shared_out = {
        loop.line for launch in launches for loop in launch.loops if loop.axis.endswith("(tree)")
    }
    for location, reason in formed.unmapped:
        position = source_position(location)
        if position is not None and position.line in shared_out:
            continue  # its iterations went to the threads of a block
        where = f"the loop at line {position.line}" if position else "a loop"
        out.append(
            remark_at(
                location,
                "gpu",
                "gpu-loop-not-mapped",
                "note",
                f"{where}: {reason}",
                {"reason": reason},
            )
        )
    return out


__all__ = ["NotMappable", "map_module"]
