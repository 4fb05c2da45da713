"""Arrays of every library at the boundary of a compiled kernel (NumPy, PyTorch, JAX, CuPy).

A CPU kernel reads and writes NumPy views over the caller's own memory, made through DLPack
(`np.from_dlpack`): no copy in, and outputs allocated in the caller's library and handed back
as that library's arrays, again without a copy. What cannot cross without a copy is copied
with an `ArrayCopyWarning` that says so (a non-contiguous view; an output `out=` that is one is
computed into a contiguous array and copied back into it). What cannot be right is refused
before any kernel runs, with a `TypeError` or `ValueError` that names the argument, what was
expected and what was given: a GPU array for a CPU kernel, an unsupported dtype, an immutable
or read-only array as an output.

Libraries are recognized by their array types' modules, so none of them is imported here
until an argument of theirs arrives (`import polyflow` stays light).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

# DLPack's device types (dlpack.h, DLDeviceType) that this module names in its messages
_DLPACK_DEVICES = {
    1: "cpu",
    2: "cuda",
    3: "cuda (pinned host memory)",
    4: "opencl",
    7: "vulkan",
    8: "metal",
    10: "rocm",
    13: "cuda (managed memory)",
    14: "oneapi",
}
_CPU_DEVICES = frozenset({1, 3})  # memory the CPU may read and write in place

# what newly allocated outputs are aligned to: JAX takes a buffer without a copy only when it
# is aligned (64 bytes covers its CPU client and AVX-512 loads)
_ALIGNMENT = 64


class ArrayCopyWarning(UserWarning):
    """An argument could not be used in place and was copied (e.g. a non-contiguous view)."""


def library_of(value: Any) -> str | None:
    """The array library of `value` ('numpy', 'torch', 'jax', 'cupy'), 'dlpack' for another
    object that exports DLPack, or None for a non-array (a Python scalar, a list)."""
    if isinstance(value, np.ndarray):
        return "numpy"
    module = type(value).__module__.split(".", 1)[0]
    if module == "torch" and hasattr(value, "data_ptr"):
        return "torch"
    if module in ("jax", "jaxlib"):
        return "jax"
    if module == "cupy":
        return "cupy"
    if hasattr(value, "__dlpack__"):
        return "dlpack"
    return None


def result_library(values: Any) -> str:
    """The library the outputs of a call on `values` are made in: the first argument's that
    is an array of a known library (NumPy when none is)."""
    for value in values:
        library = library_of(value)
        if library in ("numpy", "torch", "jax", "cupy"):
            return library
    return "numpy"


def describe(value: Any) -> str:
    """`value`'s kind for an error message: 'a torch tensor of float64 with shape (3, 4)'."""
    library = library_of(value)
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    kind = {
        "numpy": "a NumPy array",
        "torch": "a torch tensor",
        "jax": "a JAX array",
        "cupy": "a CuPy array",
        "dlpack": f"a {type(value).__name__} (DLPack)",
    }.get(library or "", f"a {type(value).__name__}")
    if dtype is not None and shape is not None:
        dtype_name = str(dtype).removeprefix("torch.")
        return f"{kind} of {dtype_name} with shape {tuple(int(d) for d in shape)}"
    return kind


def device_of(value: Any) -> str:
    """Where `value`'s memory is ('cpu', 'cuda:0', ...), from its DLPack device."""
    if isinstance(value, np.ndarray) or not hasattr(value, "__dlpack_device__"):
        return "cpu"
    kind, index = value.__dlpack_device__()
    name = _DLPACK_DEVICES.get(int(kind), f"device type {int(kind)}")
    return name if int(kind) == 1 else f"{name}:{int(index)}"


def host_view(value: Any, *, function: str, name: str, target_hint: str = "") -> np.ndarray:
    """A NumPy array over `value`'s own memory (no copy): NumPy arrays as they are, others
    through DLPack. TypeError for what is no array or has no NumPy dtype, ValueError for
    memory the CPU cannot reach (naming its device)."""
    if isinstance(value, np.ndarray):
        return value
    library = library_of(value)
    if library is None:
        raise TypeError(
            f"argument '{name}' of {function}() must be an array (NumPy, PyTorch, JAX, CuPy or "
            f"any DLPack array), got {type(value).__name__}"
        )
    if hasattr(value, "__dlpack_device__"):
        kind, _ = value.__dlpack_device__()
        if int(kind) not in _CPU_DEVICES:
            raise ValueError(
                f"argument '{name}' of {function}() is on {device_of(value)} ({describe(value)}) "
                f"but {function}() runs on the CPU{target_hint}"
            )
    if library == "torch":
        value = value.detach()  # the same memory; DLPack refuses tensors that require grad
    try:
        return np.from_dlpack(value)
    except (TypeError, AttributeError, BufferError, RuntimeError) as exc:
        dtype = str(getattr(value, "dtype", "")).removeprefix("torch.")
        if dtype and ("dtype" in str(exc).lower() or "type" in str(exc).lower()):
            raise TypeError(
                f"argument '{name}' of {function}() has dtype {dtype}, which polyflow's CPU "
                f"kernels do not take ({describe(value)}); convert it to a NumPy dtype "
                "(float32, float64, int32, ...)"
            ) from None
        raise TypeError(
            f"argument '{name}' of {function}() cannot be read as an array: {describe(value)} "
            f"({exc})"
        ) from None


def contiguous(view: np.ndarray, *, function: str, name: str, stacklevel: int = 4) -> np.ndarray:
    """`view` when it is C-contiguous, else a C-contiguous copy (with an ArrayCopyWarning:
    the kernel indexes memory densely, so a strided view read in place would be read wrong)."""
    if view.flags.c_contiguous:
        return view
    warnings.warn(
        f"argument '{name}' of {function}() is not C-contiguous (shape {view.shape}, strides "
        f"{view.strides}): copied for this call; pass a contiguous array to avoid the copy",
        ArrayCopyWarning,
        stacklevel=stacklevel,  # the caller's call of the kernel
    )
    return np.ascontiguousarray(view)


def aligned_zeros(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """A zeroed C-contiguous NumPy array whose data starts on a 64-byte boundary."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.zeros(count * dtype.itemsize + _ALIGNMENT, dtype=np.uint8)
    start = (-raw.ctypes.data) % _ALIGNMENT
    return raw[start : start + count * dtype.itemsize].view(dtype).reshape(shape)


@dataclass
class Output:
    """An output of a call: `view` is what the kernel writes (contiguous, host memory);
    `result` what the caller gets back; `copy_back`: the caller's non-contiguous array that
    `view` is copied into after the kernel ran (None when the kernel wrote in place)."""

    view: np.ndarray
    result: Any
    copy_back: np.ndarray | None = None

    def finish(self) -> Any:
        """The caller's result, after the copy back where one is needed."""
        if self.copy_back is not None:
            np.copyto(self.copy_back, self.view)
        return self.result


def new_output(library: str, shape: tuple[int, ...], dtype: Any) -> Output:
    """A zeroed output of `shape` and `dtype` made in `library` (NumPy for a library that has
    no CPU arrays of its own), which the kernel writes in place."""
    dtype = np.dtype(dtype)
    if library == "torch":
        import torch

        tensor = torch.zeros(shape, dtype=_torch_dtype(torch, dtype))
        return Output(np.from_dlpack(tensor), tensor)
    if library == "jax":
        import jax.numpy as jnp

        array = aligned_zeros(shape, dtype)
        # the JAX array takes the buffer over (its DLPack capsule keeps `array` alive); the
        # kernel writes it before anyone can read it, which is what makes this legal
        return _DeferredJax(array, jnp)
    array = aligned_zeros(shape, dtype)
    return Output(array, array)


class _DeferredJax(Output):
    """A JAX output: made from the buffer after the kernel wrote it (a JAX array must not
    change once it exists)."""

    def __init__(self, view: np.ndarray, jnp: Any) -> None:
        super().__init__(view, None)
        self._jnp = jnp

    def finish(self) -> Any:
        return self._jnp.from_dlpack(self.view)


def given_output(
    value: Any, *, function: str, name: str, shape: tuple[int, ...], dtype: Any
) -> Output:
    """`value` (an `out=` array) checked as the output `name`: mutable, host memory, of `dtype`
    and `shape` (TypeError/ValueError naming it otherwise); written in place when contiguous,
    through a contiguous copy copied back when not. The call returns `value` itself."""
    dtype = np.dtype(dtype)
    library = library_of(value)
    if library == "jax":
        raise TypeError(
            f"out= cannot take a JAX array for output '{name}' of {function}(): JAX arrays are "
            "immutable; call without out= to get a new JAX array"
        )
    view = host_view(value, function=function, name=name)
    if view.dtype != dtype:
        raise TypeError(
            f"output '{name}' of {function}() must have dtype {dtype}, got {describe(value)}"
        )
    if view.shape != tuple(shape):
        raise ValueError(
            f"output '{name}' of {function}() must have shape {tuple(shape)}, got "
            f"{describe(value)}"
        )
    if not view.flags.writeable:
        raise ValueError(
            f"output '{name}' of {function}() is read-only ({describe(value)}): give a "
            "writeable array"
        )
    if view.flags.c_contiguous:
        return Output(view, value)
    warnings.warn(
        f"output '{name}' of {function}() is not C-contiguous (strides {view.strides}): "
        "computed into a contiguous array and copied into it",
        ArrayCopyWarning,
        stacklevel=4,
    )
    return Output(np.ascontiguousarray(view), value, copy_back=view)


def as_library(array: np.ndarray, library: str) -> Any:
    """`array` (a NumPy array the caller now owns) as an array of `library`, sharing its
    memory (JAX copies a buffer that is not aligned as it needs)."""
    if library == "torch":
        import torch

        return torch.from_numpy(array)
    if library == "jax":
        import jax.numpy as jnp

        return jnp.from_dlpack(array)
    return array


def _torch_dtype(torch: Any, dtype: np.dtype[Any]) -> Any:
    return torch.from_numpy(np.zeros(0, dtype)).dtype
