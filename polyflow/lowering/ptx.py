"""The CUDA lowering: a module with `gpu.launch` kernels → each kernel outlined into a `gpu.func`,
lowered to NVVM and compiled to PTX by MLIR's own pipeline (`gpu-module-to-binary{format=isa}`),
for the architecture `Options.gpu_arch`; then, where the CUDA toolkit's `ptxas` is on PATH, each
kernel's registers, shared memory and spills as ptxas reports them.

The host side keeps `gpu.launch_func` ops naming the kernels and their arguments (each memref
as MLIR's descriptor: allocated and aligned pointer, offset, sizes, strides), which is what
launchers pass.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mlir import ir
from mlir.passmanager import PassManager

from polyflow.ir.functions import source_names
from polyflow.ir.names import SHARED_ATTR, symbol_name
from polyflow.ir.remarks import remark_at
from polyflow.options import Options
from polyflow.report import Remark

OUTLINE_PIPELINE = "builtin.module(gpu-kernel-outlining,canonicalize{region-simplify=disabled},cse)"


def _nvvm_pipeline(arch: str) -> str:
    return (
        f"builtin.module(nvvm-attach-target{{chip={arch} O=3}},"
        "gpu.module(lower-affine,convert-scf-to-cf,convert-gpu-to-nvvm,canonicalize,cse,"
        "reconcile-unrealized-casts),"
        "gpu-module-to-binary{format=isa})"
    )


@dataclass
class KernelResources:
    """What ptxas says one kernel uses per thread and per block."""

    registers: int
    shared_bytes: int
    stack_bytes: int
    spill_stores: int
    spill_loads: int


@dataclass
class PtxResult:
    """The PTX of each GPU module (by module name; one kernel each, one module per launch), the
    kernel names in it, and ptxas's account of each module's kernel (empty where ptxas is not
    installed; `ptxas_error` when it rejected the PTX)."""

    ptx: dict[str, str] = field(default_factory=dict)
    kernels: dict[str, list[str]] = field(default_factory=dict)
    resources: dict[str, KernelResources] = field(default_factory=dict)
    ptxas: str | None = None  # the ptxas that checked the PTX, None when none was found
    ptxas_error: str | None = None
    # where each module's kernel is launched (the loop it was made from)
    locations: dict[str, ir.Location] = field(default_factory=dict)
    functions: dict[str, str] = field(default_factory=dict)  # ... and from which C function

    def text(self) -> str:
        """All PTX, module after module, each under a comment naming it."""
        return "".join(f"// ----- gpu module {name}\n{text}" for name, text in self.ptx.items())


def outline_kernels(module: ir.Module) -> ir.Module:
    """Outline each `gpu.launch` of `module` (in place) into a `gpu.func` of its own
    `gpu.module`, the launch becoming a `gpu.launch_func`; returns `module`."""
    with module.context:
        PassManager.parse(OUTLINE_PIPELINE).run(module.operation)
        _ptx_names(module)
    return module


def _ptx_names(module: ir.Module) -> None:
    """Kernel names PTX accepts: outlining names a kernel after its function, and the alias
    guard's copies have a `.` in their names (`f.affine`), which PTX identifiers cannot hold."""
    renamed: dict[str, str] = {}
    for op in module.body.operations:
        operation = op.operation
        if operation.name != "gpu.module":
            continue
        name = ir.StringAttr(operation.attributes["sym_name"]).value
        if "." not in name:
            continue
        new = name.replace(".", "_")
        renamed[name] = new
        operation.attributes["sym_name"] = ir.StringAttr.get(new)
        for inner in operation.regions[0].blocks[0].operations:
            if inner.operation.name == "gpu.func":
                kernel = ir.StringAttr(inner.operation.attributes["sym_name"]).value
                inner.operation.attributes["sym_name"] = ir.StringAttr.get(kernel.replace(".", "_"))
    if not renamed:
        return

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "gpu.launch_func":
            text = str(op.attributes["kernel"])  # @module::@kernel
            module_name, _, kernel = text.partition("::")
            bare = module_name.lstrip("@").strip('"')
            if bare in renamed:
                fixed = f"@{renamed[bare]}::@{kernel.lstrip('@').strip(chr(34)).replace('.', '_')}"
                op.attributes["kernel"] = ir.Attribute.parse(fixed)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)


# The kernels' float ops, and the flags each floating-point contract adds to them.
_CONTRACTED = frozenset({"arith.addf", "arith.subf", "arith.mulf"})


def _float_contract(module: ir.Module, options: Options) -> None:
    """The floating-point contract of `options` on the kernels' float ops (the host code gets it
    in lowering/llvm_dialect.py): -ffast-math, all of its flags; -ffp-contract=fast, multiplies
    and adds that the backend may fuse into FMAs. Flags already there (a reduction's
    `reassoc`) stay."""
    if options.fast_math:
        wanted = {"fast"}
    elif options.fp_contract == "fast":
        wanted = {"contract"}
    else:
        return
    for op in module.body.operations:
        if op.operation.name != "gpu.module":
            continue

        def visit(inner: ir.Operation) -> ir.WalkResult:
            if inner.name in _CONTRACTED or (
                options.fast_math
                and inner.name.startswith(("arith.divf", "arith.negf", "arith.remf", "math."))
                and all(isinstance(r.type, ir.FloatType) for r in inner.results)
            ):
                flags = set(wanted)
                if "fastmath" in inner.attributes:
                    text = str(inner.attributes["fastmath"])  # #arith.fastmath<reassoc,contract>
                    flags |= {f for f in text.partition("<")[2].rstrip(">").split(",") if f}
                flags.discard("none")
                order = "fast" if "fast" in flags else ",".join(sorted(flags))
                inner.attributes["fastmath"] = ir.Attribute.parse(f"#arith.fastmath<{order}>")
            return ir.WalkResult.ADVANCE

        op.operation.walk(visit)


def kernels_to_ptx(module: ir.Module, options: Options) -> PtxResult:
    """PTX for the outlined kernels of `module` (in place: its `gpu.module`s become
    `gpu.binary`s), checked by ptxas where it is installed."""
    result = PtxResult()
    with module.context:
        for op in module.body.operations:
            if op.operation.name == "gpu.module":
                name = ir.StringAttr(op.operation.attributes["sym_name"]).value
                result.kernels[name] = [
                    ir.StringAttr(inner.operation.attributes["sym_name"]).value
                    for inner in op.operation.regions[0].blocks[0].operations
                    if inner.operation.name == "gpu.func"
                ]
        if not result.kernels:
            return result

        names = source_names(module)

        def locate(op: ir.Operation) -> ir.WalkResult:
            if op.name == "gpu.launch_func":
                target = str(op.attributes["kernel"]).partition("::")[0].lstrip("@").strip('"')
                result.locations.setdefault(target, op.location)
                parent = op.parent
                while parent is not None and parent.operation.name != "func.func":
                    parent = parent.parent
                if parent is not None:
                    symbol = symbol_name(parent.operation)
                    result.functions.setdefault(target, names.get(symbol, symbol))
            return ir.WalkResult.ADVANCE

        module.operation.walk(locate)
        _workgroup_memory(module)
        _float_contract(module, options)
        PassManager.parse(_nvvm_pipeline(options.gpu_arch)).run(module.operation)
        for op in module.body.operations:
            if op.operation.name == "gpu.binary":
                name = ir.StringAttr(op.operation.attributes["sym_name"]).value
                result.ptx[name] = assembly_of(str(op.operation.attributes["objects"]))
    check_with_ptxas(result, options.gpu_arch)
    return result


def _workgroup_memory(module: ir.Module) -> None:
    """Each kernel's shared buffers (`memref.alloca` marked `SHARED_ATTR` at its top level)
    become workgroup attributions of its `gpu.func`, which NVVM lowers to `.shared` arrays."""
    workgroup = ir.Attribute.parse("#gpu.address_space<workgroup>")
    for op in module.body.operations:
        if op.operation.name != "gpu.module":
            continue
        for fn in op.operation.regions[0].blocks[0].operations:
            fn = fn.operation
            if fn.name != "gpu.func":
                continue
            entry = fn.regions[0].blocks[0]
            shared: list[ir.Operation] = []

            def visit(inner: ir.Operation, found: list[ir.Operation] = shared) -> ir.WalkResult:
                if inner.name == "memref.alloca" and SHARED_ATTR in inner.attributes:
                    found.append(inner)
                return ir.WalkResult.ADVANCE

            fn.walk(visit)  # wherever it is: a block's shared memory lives as long as the block
            for alloca in shared:
                t = ir.MemRefType(alloca.results[0].type)
                moved = ir.MemRefType.get(
                    t.shape, t.element_type, memory_space=workgroup, loc=alloca.location
                )
                argument = entry.add_argument(moved, alloca.location)
                alloca.results[0].replace_all_uses_with(argument)
                alloca.erase()
            if shared:
                count = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(shared))
                fn.attributes["workgroup_attributions"] = count


def assembly_of(objects: str) -> str:
    """The `assembly` string of a printed `#gpu.object` array (MLIR escapes a string's bytes
    as `\\XX` hex pairs and a backslash as `\\\\`)."""
    match = re.search(r'assembly = "((?:[^"\\]|\\.)*)"', objects, re.S)
    if match is None:
        raise ValueError("no PTX assembly in the GPU binary")
    raw = match.group(1)
    out = bytearray()
    k = 0
    while k < len(raw):
        if raw[k] == "\\":
            if raw[k + 1] == "\\":
                out += b"\\"
                k += 2
            else:
                out.append(int(raw[k + 1 : k + 3], 16))
                k += 3
        else:
            out += raw[k].encode()
            k += 1
    return out.decode()


def ptxas_path() -> str | None:
    """The CUDA toolkit's ptxas on PATH, if any."""
    return shutil.which("ptxas")


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def check_with_ptxas(result: PtxResult, arch: str) -> None:
    """Assemble every PTX of `result` with `ptxas -arch=<arch> -v`; record each kernel's
    resources, or the error ptxas gave. Nothing happens where ptxas is not installed."""
    ptxas = ptxas_path()
    if ptxas is None:
        return
    result.ptxas = ptxas
    with tempfile.TemporaryDirectory(prefix="polyflow-ptx-") as tmp:
        for name, text in result.ptx.items():
            source = Path(tmp) / f"{name}.ptx"
            source.write_text(text)
            done = subprocess.run(
                [ptxas, f"-arch={arch}", "-v", str(source), "-o", str(Path(tmp) / f"{name}.cubin")],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                result.ptxas_error = f"ptxas rejected gpu module {name}: {done.stderr.strip()}"
                return
            # one kernel per gpu module (outlining makes one module per launch)
            for resources in parse_ptxas_report(done.stderr + done.stdout).values():
                result.resources[name] = resources


def parse_ptxas_report(text: str) -> dict[str, KernelResources]:
    """Each kernel's resources from `ptxas -v` output."""
    out: dict[str, KernelResources] = {}
    current: str | None = None
    frame = (0, 0, 0)
    for line in text.splitlines():
        entry = _ENTRY.search(line)
        if entry:
            current = entry.group(1)
            frame = (0, 0, 0)
            continue
        found = _FRAME.search(line)
        if found:
            frame = (int(found.group(1)), int(found.group(2)), int(found.group(3)))
            continue
        used = _USED.search(line)
        if used and current is not None:
            out[current] = KernelResources(
                registers=int(used.group(1)),
                shared_bytes=int(used.group(2) or 0),
                stack_bytes=frame[0],
                spill_stores=frame[1],
                spill_loads=frame[2],
            )
            current = None
    return out


def gpu_resource_remarks(result: PtxResult, options: Options) -> list[Remark]:
    """What ptxas said, for the compile report: each kernel's registers, shared memory, stack
    and spills (remarks); a warning when it rejected the PTX; a note when it is not installed."""
    if not result.ptx:
        return []
    if result.ptxas is None:
        return [
            Remark(
                "gpu",
                "ptxas-missing",
                "note",
                "ptxas (CUDA toolkit) is not on PATH: the PTX was not assembled, registers and "
                "shared memory are unknown",
            )
        ]
    if result.ptxas_error is not None:
        return [Remark("gpu", "ptxas-error", "warning", result.ptxas_error)]
    out = []
    for name, used in result.resources.items():
        spills = (
            f", {used.spill_stores} bytes spill stores, {used.spill_loads} bytes spill loads"
            if used.spill_stores or used.spill_loads
            else ", no spills"
        )
        out.append(
            remark_at(
                result.locations.get(name),
                "gpu",
                "gpu-resources",
                "remark",
                f"kernel {name} ({options.gpu_arch}): {used.registers} registers per thread, "
                f"{used.shared_bytes} bytes shared memory, {used.stack_bytes} bytes stack"
                f"{spills}",
                {"kernel": name, **asdict(used)},
                function=result.functions.get(name),
            )
        )
    return out
