"""Running a CUDA build from Python: the host side of the `gpu` stage interpreted here, its
kernels launched through CuPy (`cupy.RawModule` from the PTX), or through their CPU emulation.

A function compiled with `gpu_device_arrays` keeps on the host only control (loops around
launches, the alias guard's pointer test) and scalar arithmetic: grid sizes, loop bounds. That
is few ops, run once per call (per time step for a time loop), so `HostProgram` interprets them
from the `gpu` stage's MLIR instead of compiling a host binary: the C-ABI entry (`__polyflow_f`,
which builds each array's memref descriptor from the C pointers and sizes), the calls it makes,
`scf` loops and ifs, `arith`, and each `gpu.launch_func`, which becomes a launch with the kernel's
arguments flattened the way the kernel's PTX takes them (a memref as allocated pointer, aligned
pointer, offset, sizes, strides).

A `Launcher` runs the launches: `CupyLauncher` on the GPU (device pointers in, no copies), and
`CpuLauncher`, which calls the kernels' CPU emulation (`gpu_map.emulate`, JIT-compiled) with the
very same flattened arguments, so that every part of this path, from descriptors to grid sizes,
is checked on machines without a GPU.
"""

from __future__ import annotations

import ctypes
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mlir import ir

from polyflow.errors import GpuUnavailable


class HostInterpretError(RuntimeError):
    """The host side of a CUDA build has an op the Python launcher does not run."""


@dataclass
class MemRef:
    """A memref descriptor on the host side: pointers (device or host), offset, sizes, strides
    in elements, and what keeps the memory alive (an array the launcher allocated)."""

    allocated: int
    aligned: int
    offset: int
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    keep: Any = None


class Launcher(Protocol):
    """What runs the device side of a host program."""

    def launch(
        self,
        module: str,
        kernel: str,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        args: list[tuple[str, int | float]],
    ) -> None: ...

    def alloc(self, nbytes: int) -> tuple[int, Any]: ...

    def synchronize(self) -> None: ...


# ----- the interpreter


def _wrap(value: int, bits: int) -> int:
    """`value` as a signed integer of `bits` bits (two's complement)."""
    mask = (1 << bits) - 1
    value &= mask
    return value - (1 << bits) if value >> (bits - 1) else value


def _bits(t: ir.Type) -> int:
    if isinstance(t, ir.IndexType):
        return 64
    if isinstance(t, ir.IntegerType):
        return t.width
    raise HostInterpretError(f"not an integer type: {t}")


def _unsigned(value: int, bits: int) -> int:
    return value & ((1 << bits) - 1)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


_CMP = {
    0: lambda a, b, n: a == b,
    1: lambda a, b, n: a != b,
    2: lambda a, b, n: a < b,
    3: lambda a, b, n: a <= b,
    4: lambda a, b, n: a > b,
    5: lambda a, b, n: a >= b,
    6: lambda a, b, n: _unsigned(a, n) < _unsigned(b, n),
    7: lambda a, b, n: _unsigned(a, n) <= _unsigned(b, n),
    8: lambda a, b, n: _unsigned(a, n) > _unsigned(b, n),
    9: lambda a, b, n: _unsigned(a, n) >= _unsigned(b, n),
}

_INT_BINARY: dict[str, Callable[[int, int, int], int]] = {
    "arith.addi": lambda a, b, n: a + b,
    "arith.subi": lambda a, b, n: a - b,
    "arith.muli": lambda a, b, n: a * b,
    "arith.divsi": lambda a, b, n: _trunc_div(a, b),
    "arith.divui": lambda a, b, n: _unsigned(a, n) // _unsigned(b, n),
    "arith.remsi": lambda a, b, n: a - b * _trunc_div(a, b),
    "arith.remui": lambda a, b, n: _unsigned(a, n) % _unsigned(b, n),
    "arith.ceildivsi": lambda a, b, n: -((-a) // b),
    "arith.ceildivui": lambda a, b, n: -((-_unsigned(a, n)) // _unsigned(b, n)),
    "arith.floordivsi": lambda a, b, n: a // b,
    "arith.maxsi": lambda a, b, n: max(a, b),
    "arith.minsi": lambda a, b, n: min(a, b),
    "arith.maxui": lambda a, b, n: a if _unsigned(a, n) >= _unsigned(b, n) else b,
    "arith.minui": lambda a, b, n: a if _unsigned(a, n) <= _unsigned(b, n) else b,
    "arith.andi": lambda a, b, n: a & b,
    "arith.ori": lambda a, b, n: a | b,
    "arith.xori": lambda a, b, n: a ^ b,
    "arith.shli": lambda a, b, n: a << b,
    "arith.shrsi": lambda a, b, n: a >> b,
    "arith.shrui": lambda a, b, n: _unsigned(a, n) >> b,
}

_FLOAT_BINARY: dict[str, Callable[[float, float], float]] = {
    "arith.addf": lambda a, b: a + b,
    "arith.subf": lambda a, b: a - b,
    "arith.mulf": lambda a, b: a * b,
    "arith.divf": lambda a, b: a / b,
    "arith.maxnumf": max,
    "arith.minnumf": min,
}

_CASTS = frozenset(
    {"arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui", "arith.trunci"}
)


class _Return(Exception):
    def __init__(self, values: list[Any]) -> None:
        self.values = values


@dataclass
class HostProgram:
    """The host side of a CUDA build (the `gpu` stage's module, in its own context), ready to run
    a function's C-ABI entry with a `Launcher`."""

    text: str
    context: Any = None
    module: Any = None
    functions: dict[str, ir.Operation] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from polyflow.ir.contexts import new_context
        from polyflow.ir.names import symbol_name

        self.context = new_context()
        self.module = ir.Module.parse(self.text, self.context)
        with self.context:
            for op in self.module.body.operations:
                if op.operation.name == "func.func" and op.operation.regions[0].blocks:
                    self.functions[symbol_name(op.operation)] = op.operation

    def run(self, function: str, args: Sequence[Any], launcher: Launcher) -> list[Any]:
        """Run `function` (by symbol) on `args` (ints, floats, pointers as ints, `MemRef`s);
        returns its results."""
        with self.context:
            if function not in self.functions:
                raise HostInterpretError(f"no host function '{function}'")
            results = self._call(self.functions[function], list(args), launcher)
        launcher.synchronize()
        return results

    def _call(self, fn: ir.Operation, args: list[Any], launcher: Launcher) -> list[Any]:
        block = fn.regions[0].blocks[0]
        env: dict[ir.Value, Any] = dict(zip(block.arguments, args, strict=True))
        try:
            self._block(block, env, launcher)
        except _Return as done:
            return done.values
        return []

    def _block(self, block: ir.Block, env: dict[ir.Value, Any], launcher: Launcher) -> list[Any]:
        """Run `block`'s ops; returns what its terminator yields (scf.yield)."""
        for op in block.operations:
            op = op.operation
            name = op.name
            if name == "scf.yield":
                return [env[v] for v in op.operands]
            if name == "func.return":
                raise _Return([env[v] for v in op.operands])
            self._op(op, env, launcher)
        return []

    def _op(self, op: ir.Operation, env: dict[ir.Value, Any], launcher: Launcher) -> None:
        name = op.name
        ins = [env[v] for v in op.operands]
        out: list[Any]
        if name == "arith.constant":
            attr = op.attributes["value"]
            if isinstance(attr, ir.IntegerAttr):
                out = [
                    _wrap(attr.value, _bits(op.results[0].type))
                    if not isinstance(op.results[0].type, ir.IndexType)
                    else attr.value
                ]
            elif isinstance(attr, ir.FloatAttr):
                out = [attr.value]
            else:
                raise HostInterpretError(f"constant {attr} on the host")
        elif name in _INT_BINARY:
            bits = _bits(op.results[0].type)
            out = [_wrap(_INT_BINARY[name](ins[0], ins[1], bits), bits)]
        elif name in _FLOAT_BINARY:
            out = [_FLOAT_BINARY[name](ins[0], ins[1])]
        elif name == "arith.cmpi":
            predicate = ir.IntegerAttr(op.attributes["predicate"]).value
            out = [_CMP[predicate](ins[0], ins[1], _bits(op.operands[0].type))]
        elif name == "arith.select":
            out = [ins[1] if ins[0] else ins[2]]
        elif name in _CASTS:
            source_bits = _bits(op.operands[0].type)
            value = ins[0]
            if name in ("arith.extui", "arith.index_castui"):
                value = _unsigned(value, source_bits)
            out = [_wrap(int(value), _bits(op.results[0].type))]
        elif name in ("arith.sitofp", "arith.uitofp"):
            out = [float(ins[0])]
        elif name in ("arith.fptosi", "arith.fptoui"):
            out = [int(ins[0])]
        elif name in (
            "arith.extf",
            "arith.truncf",
            "memref.cast",
            "builtin.unrealized_conversion_cast",
        ):
            out = [self._cast(ins[0], op)]
        elif name == "memref.dim":
            out = [ins[0].sizes[ins[1]]]
        elif name == "memref.extract_aligned_pointer_as_index":
            out = [ins[0].aligned]
        elif name == "memref.extract_strided_metadata":
            source = ins[0]
            base = MemRef(source.allocated, source.aligned, 0, (), (), source.keep)
            out = [base, source.offset, *source.sizes, *source.strides]
        elif name == "memref.reinterpret_cast":
            out = [_reinterpreted(op, ins)]
        elif name == "llvm.mlir.undef" or name == "llvm.mlir.poison":
            out = [_undef(op.results[0].type)]
        elif name == "llvm.insertvalue":
            out = [_inserted(ins[0], ins[1], list(ir.DenseI64ArrayAttr(op.attributes["position"])))]
        elif name == "scf.for":
            out = self._for(op, ins, launcher, env)
        elif name == "scf.if":
            region = op.regions[0] if ins[0] else op.regions[1]
            out = self._block(region.blocks[0], env, launcher) if region.blocks else []
        elif name == "func.call":
            callee = str(op.attributes["callee"]).lstrip("@").strip('"')
            if callee not in self.functions:
                raise HostInterpretError(f"a call of '{callee}', which is not compiled here")
            out = self._call(self.functions[callee], ins, launcher)
        elif name == "gpu.launch_func":
            self._launch(op, env, launcher)
            out = []
        elif name == "gpu.alloc":
            out = [self._alloc(op, ins, launcher)]
        elif name == "gpu.dealloc":
            out = []
        else:
            raise HostInterpretError(
                f"the host side has '{name}', which the Python launcher does not run"
            )
        for result, value in zip(op.results, out, strict=True):
            env[result] = value

    def _cast(self, value: Any, op: ir.Operation) -> Any:
        target = op.results[0].type
        if isinstance(target, ir.MemRefType) and isinstance(value, list):
            return MemRef(value[0], value[1], value[2], tuple(value[3]), tuple(value[4]))
        return value

    def _for(
        self, op: ir.Operation, ins: list[Any], launcher: Launcher, env: dict[ir.Value, Any]
    ) -> list[Any]:
        low, high, step, carried = ins[0], ins[1], ins[2], ins[3:]
        body = op.regions[0].blocks[0]
        args = list(body.arguments)
        iv = low
        while iv < high:
            env[args[0]] = iv
            for arg, value in zip(args[1:], carried, strict=True):
                env[arg] = value
            carried = self._block(body, env, launcher)
            iv += step
        return carried

    def _alloc(self, op: ir.Operation, ins: list[Any], launcher: Launcher) -> MemRef:
        t = ir.MemRefType(op.results[0].type)
        dynamic = iter(
            v
            for v, operand in zip(ins, op.operands, strict=True)
            if isinstance(operand.type, ir.IndexType)
        )
        sizes = tuple(next(dynamic) if ir.ShapedType.is_dynamic_size(s) else s for s in t.shape)
        count = 1
        for size in sizes:
            count *= size
        width = max(1, _element_bytes(t.element_type))
        pointer, keep = launcher.alloc(max(1, count) * width)
        strides: list[int] = []
        step = 1
        for size in reversed(sizes):
            strides.insert(0, step)
            step *= size
        return MemRef(pointer, pointer, 0, sizes, tuple(strides), keep)

    def _launch(self, op: ir.Operation, env: dict[ir.Value, Any], launcher: Launcher) -> None:
        view = op.opview
        grid = (env[view.gridSizeX], env[view.gridSizeY], env[view.gridSizeZ])
        block = (env[view.blockSizeX], env[view.blockSizeY], env[view.blockSizeZ])
        module_name, _, kernel = str(op.attributes["kernel"]).partition("::")
        flat: list[tuple[str, int | float]] = []
        for value in view.kernelOperands:
            flat += flatten_argument(value.type, env[value])
        launcher.launch(
            module_name.lstrip("@").strip('"'), kernel.lstrip("@").strip('"'), grid, block, flat
        )


def _reinterpreted(op: ir.Operation, ins: list[Any]) -> MemRef:
    """The descriptor a `memref.reinterpret_cast` makes: its source's memory, the offset, sizes
    and strides it gives (static ones from its attributes, dynamic ones from its operands)."""
    source, dynamic = ins[0], iter(ins[1:])

    def values(attribute: str) -> tuple[int, ...]:
        static = list(ir.DenseI64ArrayAttr(op.attributes[attribute]))
        marker = ir.ShapedType.get_dynamic_size()
        offset_marker = ir.ShapedType.get_dynamic_stride_or_offset()
        return tuple(next(dynamic) if v in (marker, offset_marker) else v for v in static)

    offset = values("static_offsets")
    sizes = values("static_sizes")
    strides = values("static_strides")
    return MemRef(source.allocated, source.aligned, offset[0], sizes, strides, source.keep)


def _element_bytes(t: ir.Type) -> int:
    if isinstance(t, ir.IndexType):
        return 8
    if isinstance(t, ir.IntegerType | ir.FloatType):
        return (t.width + 7) // 8
    raise HostInterpretError(f"an array of {t} on the GPU")


def _undef(t: ir.Type) -> Any:
    text = str(t)
    if text.startswith("!llvm.struct<(ptr, ptr, i64, array<"):
        rank = int(text.split("array<", 1)[1].split(" ", 1)[0])
        return [0, 0, 0, [0] * rank, [0] * rank]
    raise HostInterpretError(f"an undefined {t} on the host")


def _inserted(aggregate: list[Any], value: Any, position: list[int]) -> list[Any]:
    copy = [list(part) if isinstance(part, list) else part for part in aggregate]
    if len(position) == 1:
        copy[position[0]] = value
    else:
        copy[position[0]][position[1]] = value
    return copy


def flatten_argument(t: ir.Type, value: Any) -> list[tuple[str, int | float]]:
    """One kernel argument as the PTX kernel takes it: (kind, value) pairs, kind one of
    `ptr`, `i8`..`i64`, `f32`, `f64` (a memref: allocated and aligned pointers, offset, sizes,
    strides)."""
    if isinstance(t, ir.MemRefType):
        return [
            ("ptr", value.allocated),
            ("ptr", value.aligned),
            ("i64", value.offset),
            *(("i64", s) for s in value.sizes),
            *(("i64", s) for s in value.strides),
        ]
    if isinstance(t, ir.IndexType):
        return [("i64", value)]
    if isinstance(t, ir.IntegerType):
        return [(f"i{max(8, t.width)}" if t.width > 1 else "i1", value)]
    if isinstance(t, ir.F32Type):
        return [("f32", value)]
    if isinstance(t, ir.F64Type):
        return [("f64", value)]
    raise HostInterpretError(f"a kernel argument of type {t}")


# ----- launchers


_CTYPES: dict[str, Any] = {
    "ptr": ctypes.c_void_p,
    "i1": ctypes.c_bool,
    "i8": ctypes.c_int8,
    "i16": ctypes.c_int16,
    "i32": ctypes.c_int32,
    "i64": ctypes.c_int64,
    "f32": ctypes.c_float,
    "f64": ctypes.c_double,
}


class CpuLauncher:
    """Runs the launches on the CPU emulation of the kernels (JIT-compiled from the same `gpu`
    stage), with the same flattened arguments a GPU launch gets; memory is host memory."""

    def __init__(self, gpu_stage: str) -> None:
        import numpy as np
        from mlir.execution_engine import ExecutionEngine

        from polyflow.gpu_map.emulate import CPU_KERNEL_PREFIX, emulate_kernels
        from polyflow.ir.contexts import new_context
        from polyflow.lowering.llvm_dialect import lower_to_llvm_dialect

        self._np = np
        self._prefix = CPU_KERNEL_PREFIX
        self.context = new_context()
        module = ir.Module.parse(gpu_stage, self.context)
        with self.context:
            emulate_kernels(module)
            for op in module.body.operations:
                operation = op.operation
                if operation.name == "func.func":
                    name = ir.StringAttr(operation.attributes["sym_name"]).value
                    if name.startswith(CPU_KERNEL_PREFIX):
                        del operation.attributes["sym_visibility"]  # keep it: it is looked up
            lowered = lower_to_llvm_dialect(module)
            self.engine = ExecutionEngine(lowered, opt_level=2)
        self._kernels: dict[str, Any] = {}
        self.launches = 0

    def launch(
        self,
        module: str,
        kernel: str,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        args: list[tuple[str, int | float]],
    ) -> None:
        if module not in self._kernels:
            # the execution engine's packed entry: one array of pointers to the arguments
            address = self.engine.raw_lookup(f"{self._prefix}{module}")
            if not address:
                raise HostInterpretError(f"no CPU emulation of kernel {module}::{kernel}")
            self._kernels[module] = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
        values = [ctypes.c_int64(size) for size in (*grid, *block)]
        values += [_CTYPES[kind](value) for kind, value in args]
        packed = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
        self._kernels[module](packed)
        self.launches += 1

    def alloc(self, nbytes: int) -> tuple[int, Any]:
        buffer = self._np.zeros(nbytes, dtype=self._np.uint8)
        return int(buffer.ctypes.data), buffer

    def synchronize(self) -> None:
        pass


class CupyLauncher:
    """Runs the launches on the GPU through CuPy: each GPU module's PTX loaded once as a
    `cupy.RawModule`, arguments passed as NumPy scalars of their PTX types."""

    def __init__(self, ptx: dict[str, str]) -> None:
        cupy = import_cupy()
        import numpy as np

        self._cupy = cupy
        self._np = np
        self._ptx = ptx
        self._modules: dict[str, Any] = {}
        # RawModule takes PTX only as a file (text given as `code` is compiled as CUDA C++),
        # and reads it lazily: the files live as long as the launcher
        self._folder = tempfile.TemporaryDirectory(prefix="polyflow-ptx-")

    def launch(
        self,
        module: str,
        kernel: str,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        args: list[tuple[str, int | float]],
    ) -> None:
        if module not in self._modules:
            path = Path(self._folder.name) / f"{module}.ptx"
            path.write_text(self._ptx[module])
            self._modules[module] = self._cupy.RawModule(path=str(path))
        function = self._modules[module].get_function(kernel)
        np = self._np
        kinds = {
            "ptr": np.uint64, "i1": np.bool_, "i8": np.int8, "i16": np.int16,
            "i32": np.int32, "i64": np.int64, "f32": np.float32, "f64": np.float64,
        }  # fmt: skip
        function(grid, block, tuple(kinds[kind](value) for kind, value in args))

    def alloc(self, nbytes: int) -> tuple[int, Any]:
        buffer = self._cupy.empty(max(1, nbytes), dtype=self._cupy.uint8)
        return int(buffer.data.ptr), buffer

    def synchronize(self) -> None:
        self._cupy.cuda.get_current_stream().synchronize()


def as_cupy(cupy: Any, value: Any, function: str, name: str) -> Any:
    """Argument `name` of `function` as a CuPy array without a copy: a CuPy array as it is, a
    CUDA tensor of another library (torch) through DLPack; TypeError naming it otherwise."""
    if isinstance(value, cupy.ndarray):
        return value
    try:
        return cupy.from_dlpack(value)
    except Exception:
        raise TypeError(
            f"argument '{name}' of {function}() must be a CuPy array or a CUDA tensor "
            f"(DLPack), got {type(value).__name__}"
        ) from None


def import_cupy() -> Any:
    """CuPy with a usable CUDA device, or `GpuUnavailable` saying what is missing."""
    try:
        import cupy  # type: ignore[import-not-found]
    except ImportError:
        raise GpuUnavailable(
            "no CUDA device: CuPy is not installed; use fn.emulate(...) to run the kernels "
            "on the CPU"
        ) from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA driver missing or broken
        raise GpuUnavailable(f"no CUDA device ({exc}); use fn.emulate(...)") from None
    if count == 0:
        raise GpuUnavailable("no CUDA device; use fn.emulate(...)")
    return cupy


class RecordingLauncher:
    """Records the launches of one run (no kernel runs) as a *launch plan*: each kernel, grid,
    block and argument, pointers named by the buffer they point into and the byte offset. The
    caller passes the host program pointers from `buffer_address`; memory the program
    allocates becomes a scratch buffer of the plan. Host control depends only on sizes (never on
    array contents), so the plan is what every run with these sizes launches: a runner with
    CuPy alone replays it (bench_polybench/gpu_runner.py)."""

    # buffers sit this far apart in the fake address space (larger than any array)
    SPACING = 1 << 40

    def __init__(self, buffers: int) -> None:
        self.buffers = buffers
        self.scratch: list[int] = []  # bytes of each scratch buffer, numbered after the given
        self.launches: list[dict[str, Any]] = []

    @classmethod
    def buffer_address(cls, index: int) -> int:
        return (index + 1) * cls.SPACING

    def _pointer(self, address: int) -> dict[str, int]:
        index = address // self.SPACING - 1
        if not 0 <= index < self.buffers + len(self.scratch):
            raise HostInterpretError(
                f"a kernel argument points outside every buffer ({address:#x})"
            )
        return {"buffer": index, "offset": address - self.buffer_address(index)}

    def launch(
        self,
        module: str,
        kernel: str,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        args: list[tuple[str, int | float]],
    ) -> None:
        recorded: list[dict[str, Any]] = []
        for kind, value in args:
            if kind == "ptr":
                recorded.append({"kind": "ptr", **self._pointer(int(value))})
            else:
                recorded.append({"kind": kind, "value": value})
        self.launches.append(
            {
                "module": module,
                "kernel": kernel,
                "grid": list(grid),
                "block": list(block),
                "args": recorded,
            }
        )

    def alloc(self, nbytes: int) -> tuple[int, Any]:
        self.scratch.append(nbytes)
        return self.buffer_address(self.buffers + len(self.scratch) - 1), None

    def synchronize(self) -> None:
        pass

    def plan(self) -> dict[str, Any]:
        return {"scratch_bytes": self.scratch, "launches": self.launches}


def replay_on_cpu(plan: dict[str, Any], arrays: Sequence[Any], launcher: CpuLauncher) -> None:
    """Run a launch plan on NumPy `arrays` (the plan's buffers, in order) with the CPU emulation
    of its kernels: what the GPU runner does with CuPy, checked here."""
    import numpy as np

    scratch = [np.zeros(max(1, n), dtype=np.uint8) for n in plan["scratch_bytes"]]
    bases = [int(a.ctypes.data) for a in (*arrays, *scratch)]
    for launch in plan["launches"]:
        args: list[tuple[str, int | float]] = [
            ("ptr", bases[a["buffer"]] + a["offset"])
            if a["kind"] == "ptr"
            else (a["kind"], a["value"])
            for a in launch["args"]
        ]
        launcher.launch(
            launch["module"], launch["kernel"], tuple(launch["grid"]), tuple(launch["block"]), args
        )  # type: ignore[arg-type]
