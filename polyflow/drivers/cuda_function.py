"""`polyflow.compile_c(..., target="cuda")`: a C function compiled into GPU kernels, callable on
CuPy arrays or torch CUDA tensors (no copies), and on NumPy arrays through the kernels' CPU
emulation (`emulate`).

    fn = polyflow.compile_c(src, "gemm", target="cuda")
    fn(ni, nj, nk, alpha, beta, C, A, B)       # C, A, B: cupy arrays or torch CUDA tensors
    fn.emulate(ni, nj, nk, alpha, beta, C, A, B)  # NumPy arrays, kernels run on the CPU
    print(fn.ptx)                               # the kernels' PTX
    print(fn.report.text())                     # blocks/threads per loop, registers (ptxas)

Where there is no CUDA device (or no CuPy), a call raises `polyflow.GpuUnavailable`, saying so;
`emulate` works everywhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from polyflow.drivers.compile import Compiled
from polyflow.drivers.gpu_launch import (
    CpuLauncher,
    CupyLauncher,
    HostProgram,
    as_cupy,
    import_cupy,
)
from polyflow.frontend.c import CFunction
from polyflow.frontend.c_types import Array, Scalar, Void
from polyflow.ir.names import CABI_PREFIX


class CudaFunction:
    """A C function compiled for the GPU (see the module docstring): `ptx` (the kernels' PTX),
    `report` (the compile report: what went to blocks and threads, registers and shared memory
    from ptxas, what stayed on one thread and why), `stages` (each stage's IR, `gpu` and `ptx`
    included)."""

    def __init__(self, compiled: Compiled, fn: CFunction) -> None:
        self.name = fn.name
        self.signature = fn
        self.stages = compiled.stages
        self.report = compiled.report
        self.warnings = self.report.warnings
        self.notes = self.report.notes
        self.cached = compiled.cached
        self.ptx_modules = dict(compiled.ptx)
        self.gpu_resources = dict(compiled.gpu_resources)
        self._host = HostProgram(compiled.stages["gpu"])
        self._cpu: CpuLauncher | None = None
        self._gpu: CupyLauncher | None = None
        # with `compile_c(grad=...)`: the gradients compiled with it (Enzyme's arguments, as
        # on the CPU), by function name, and this function's
        self.gradients: dict[str, CudaFunction] = {}
        self.grad: CudaFunction | None = None

    @property
    def ptx(self) -> str:
        """The PTX of every kernel, one GPU module after another."""
        return self.stages["ptx"]

    def mlir(self, stage: str = "gpu") -> str:
        """The IR after a stage ('mlir', 'affine', 'affine-opt', 'gpu'), or 'ptx'."""
        if stage not in self.stages:
            raise KeyError(f"stage '{stage}' not kept (have: {', '.join(self.stages)})")
        return self.stages[stage]

    def __call__(self, *args: Any) -> Any:
        """Run on the GPU: arrays must be CuPy arrays or DLPack-capable CUDA arrays (torch)."""
        cupy = import_cupy()  # GpuUnavailable here, before anything else
        if self._gpu is None:
            self._gpu = CupyLauncher(self.ptx_modules)
        values = self._values(
            args,
            lambda name, ptype, arg, scalars: _device_pointer(
                cupy, self.name, name, ptype, arg, scalars
            ),
        )
        return self._run(values, self._gpu)

    def emulate(self, *args: Any) -> Any:
        """Run the same kernels on the CPU (blocks and threads as loops), on NumPy arrays."""
        from polyflow.drivers.jit import _check_array

        if self._cpu is None:
            self._cpu = CpuLauncher(self.stages["gpu"])
        values = self._values(
            args,
            lambda name, ptype, arg, scalars: int(
                _check_array(self.name, name, ptype, arg, scalars).ctypes.data
            ),
        )
        return self._run(values, self._cpu)

    def _values(self, args: tuple[Any, ...], pointer: Any) -> list[Any]:
        from polyflow.drivers.jit import bind_arguments

        return bind_arguments(self.signature, args, _c_value, pointer)

    def _run(self, values: list[Any], launcher: Any) -> Any:
        results = self._host.run(CABI_PREFIX + self.name, values, launcher)
        if isinstance(self.signature.ret, Void) or not results:
            return None
        return results[0]


def _c_value(ptype: Scalar, value: int | float) -> int | float:
    """A scalar argument as the host program holds it (integers wrapped to their C type)."""
    if ptype.is_float:
        return float(value)
    bits = 1 if ptype.boolean else ptype.bits
    if bits == 1:
        return int(bool(value))
    mask = (1 << bits) - 1
    value = int(value) & mask
    return value - (1 << bits) if value >> (bits - 1) else value


def _device_pointer(
    cupy: Any, fname: str, pname: str, ptype: Array, arg: Any, scalars: dict[str, int | float]
) -> int:
    """The device address of array argument `pname`, checked like a NumPy argument (dtype,
    rank, sizes against the scalar arguments, C-contiguous); a torch CUDA tensor comes in
    through DLPack without a copy."""
    from polyflow.drivers.jit import _eval_dim

    arg = as_cupy(cupy, arg, fname, pname)
    want = np.dtype(ptype.elem.numpy_dtype)
    if arg.dtype != want:
        raise TypeError(f"argument '{pname}' of {fname}() must have dtype {want}, got {arg.dtype}")
    if not arg.flags.c_contiguous:
        raise TypeError(f"argument '{pname}' of {fname}() must be C-contiguous")
    if not (ptype.rank == 1 and ptype.dims[0] is None):
        if arg.ndim != ptype.rank:
            raise TypeError(
                f"argument '{pname}' of {fname}() must have {ptype.rank} dimension(s), got "
                f"shape {arg.shape}"
            )
        for k, (dim, extent) in enumerate(zip(ptype.dims, arg.shape, strict=True)):
            expected = _eval_dim(dim, scalars)
            if expected is not None and (
                (k == 0 and extent < expected) or (k > 0 and extent != expected)
            ):
                raise TypeError(
                    f"argument '{pname}' of {fname}() must have shape {ptype} (dimension {k} = "
                    f"{expected}), got {arg.shape}"
                )
    return int(arg.data.ptr)


__all__ = ["CudaFunction"]
