"""`polyflow.tc`: Tensor Comprehensions from Python.

    mv = polyflow.tc.define("def mv(float(M,K) A, float(K) x) -> (C) { C(i) +=! A(i,k) * x(k) }")
    C = mv(A, x)                  # NumPy, PyTorch, JAX arrays in (any DLPack CPU array), the same kind out
    mv(A, x, out=C)               # or into arrays you give
    print(mv.explain())           # inferred ranges and output shapes
    print(mv.mlir("affine-opt"))  # the IR after a stage, for the last shapes it ran on

`define` parses and checks the source at once (a `CompileError` with line, column and caret for
any mistake). A call checks the arguments against the signature (dtypes, ranks, sizes that must
agree), specializes the definition to their sizes, compiles it through the same pipeline as C
(options: the same `Options` model; default -O3 for this machine), and caches the compiled kernel
per argument shapes and dtypes; across processes, the shared compile cache holds the lowered IR
(polyflow/storage/cache.py; `.cached` says whether the last call's kernel came from it). Outputs are allocated zero-filled with the inferred shapes, so
elements no statement writes are 0. Arrays cross without copies both ways (polyflow/arrays.py):
outputs are made in the library of the first array argument; `out=` is written in place and
returned; a strided view is copied (an `ArrayCopyWarning` says so).
"""

from __future__ import annotations

import ctypes
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np

from polyflow.arrays import (
    Output,
    aligned_zeros,
    as_library,
    contiguous,
    describe,
    given_output,
    host_view,
    library_of,
    new_output,
    result_library,
)
from polyflow.errors import CompileError
from polyflow.frontend.tc import syntax as ast
from polyflow.frontend.tc.checks import CheckedComprehension, CheckedDefinition
from polyflow.frontend.tc.parser import parse
from polyflow.frontend.tc.ranges import (
    InferredDefinition,
    Specialized,
    inferred_definitions,
    specialize,
)
from polyflow.options import TC_DEFAULTS, Options
from polyflow.report import CompileReport, Remark
from polyflow.source_input import source_text
from polyflow.storage.tuning import Tuning, TuningKey, tc_tuning_key, tuning_note, with_tuning

__all__ = ["TcFunction", "TcGradient", "define", "definition_names"]

NUMPY_DTYPES = {
    "f16": np.float16, "f32": np.float32, "f64": np.float64, "i1": np.bool_,
    "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
}  # fmt: skip

DEFAULT_OPTIONS = Options(**TC_DEFAULTS)
# seconds the polyhedral stage may spend on a gradient when the options set no limit
GRAD_COMPILE_TIMEOUT = 10.0


def definition_names(source: str, *, file: str = "<tc>") -> list[str]:
    """The names of the definitions of `source`, in order (after parsing it)."""
    return [d.name for d in parse(source, file=file).definitions]


def define(
    source: str | bytes,
    name: str | None = None,
    *,
    options: Options | Mapping[str, Any] | None = None,
    file: str = "<tc>",
    target: Literal["cpu", "cuda"] | None = None,
) -> TcFunction:
    """The TC definition `name` of `source` (TC text: `str`, or UTF-8 `bytes`; the only
    definition when `name` is None), checked and ready to call. `options`: an `Options`, or a
    dict of fields that change the TC defaults (-O3 for this machine). `target="cuda"` (or the
    options' target) compiles GPU kernels: the function is then called on CuPy arrays or torch
    CUDA tensors (outputs come back as the inputs' kind), `emulate(...)` runs the same kernels
    on the CPU on NumPy arrays, and `ptx(...)` gives their PTX."""
    source = source_text(source, file)
    if isinstance(options, Mapping):
        options = Options(**{**TC_DEFAULTS, **options})
    options = Options.of(options) if options is not None else DEFAULT_OPTIONS
    if target is not None:
        options = options.model_copy(update={"target": target})
    if options.target == "cuda":
        options = options.model_copy(update={"gpu_device_arrays": True, "gpu_emulate": False})
    name, inferred = inferred_definitions(source, name, file=file)
    return TcFunction(source, file, inferred[name], inferred, options)


class TcGradient:
    """The reverse-mode gradient of a TC definition (`TcFunction.grad`): `g(*inputs, seed)`
    returns the adjoint of each input of `wrt` (one array, or a tuple in `wrt`'s order) for the
    output adjoint `seed`: an array shaped like the output, or, for a definition of several
    outputs, a sequence with one entry per output (None: zero). It runs on the CPU, compiled
    through the same pipeline (the adjoint is scheduled and parallelized like the primal).
    Between calls it keeps, per input shapes, the buffers it hands the kernel for the seeds and
    the outputs it does not return (as large as the outputs: reusing them is much faster than
    fresh memory for small kernels); `release_buffers()` frees them. An output whose seed is
    None and that one cheap assignment of the inputs defines (`xc = x - means`) is not stored
    at all: the gradient recomputes it where it is read (`frontend.tc.rematerialize`), which
    spares memory as large as it twice (its value and its shadow); and a costly call on inputs
    that a statement repeats in loops it does not depend on is computed once."""

    def __init__(self, fn: TcFunction, wrt: str | tuple[str, ...] | list[str] | None) -> None:
        floats = [t.name for t in fn.definition.inputs if t.element in _FLOAT_ELEMENTS]
        if wrt is None:
            wanted = floats
        else:
            wanted = [wrt] if isinstance(wrt, str) else list(wrt)
        for name in wanted:
            if name not in floats:
                known = ", ".join(floats) or "none"
                raise ValueError(
                    f"{fn.name}() has no floating-point input '{name}' to differentiate with "
                    f"respect to (floating-point inputs: {known})"
                )
        self.fn = fn
        self.wrt = tuple(wanted)
        # per compiled gradient: the buffers of the outputs (when discarded) and of the seeds,
        # kept between calls (zeroed or overwritten in each); fresh ones cost more than the
        # gradient of a small kernel (page faults on first touch, TLB shootdowns when freed)
        self._scratch: dict[int, tuple[list[np.ndarray], list[int]]] = {}
        # per set of outputs without a seed: the gradient of the definition without the
        # temporaries among them it can recompute, and the outputs that one keeps
        self._reduced: dict[frozenset[str], tuple[TcGradient, list[str]] | None] = {}
        # what the last CPU call ran: its stages and report (`stages`, `report`)
        self.compiled: _Compiled | None = None

    def __call__(self, *args: Any, seed: Any = None) -> Any:
        inputs = self.fn.definition.inputs
        if seed is None and len(args) == len(inputs) + 1:
            *rest, seed = args
            args = tuple(rest)
        if seed is None:
            raise TypeError(f"the gradient of {self.fn.name}() needs the output adjoint 'seed'")
        adjoints: list[Any] | None
        if self.fn.options.target == "cuda":
            adjoints = self._run_gpu(args, seed, emulate=False)
        else:
            adjoints = self._run_reduced(args, seed)
            if adjoints is None:
                _, adjoints = self.run(args, seed, outputs=False)
            library = result_library(args)
            adjoints = [as_library(a, library) for a in adjoints]
        return adjoints[0] if len(adjoints) == 1 else tuple(adjoints)

    def _run_reduced(self, args: tuple[Any, ...], seed: Any) -> list[np.ndarray] | None:
        """The adjoints from the gradient of the rewritten definition (`_without_unseeded`);
        None where there is none, or where it does not compile (the gradient of the definition
        as written then says why, at the user's lines)."""
        reduced = self._without_unseeded(seed)
        if reduced is None:
            return None
        gradient, kept_seeds = reduced
        try:
            _, adjoints = gradient.run(args, kept_seeds, outputs=False)
        except CompileError:
            self._reduced = {k: None for k in self._reduced}
            return None
        self.compiled = gradient.compiled
        return adjoints

    def _without_unseeded(self, seed: Any) -> tuple[TcGradient, list[Any]] | None:
        """The gradient of this definition rewritten for the outputs that get no seed here
        (`frontend.tc.rematerialize`: the cheap temporaries among them recomputed where they are
        read, costly calls invariant in some loops computed once), and the seeds of its outputs
        (None for the hoisted temporaries); None where the rewrite changes nothing. The outputs
        are not returned, so only their seeds tell which the caller wants."""
        outputs = [t.name for t in self.fn.definition.outputs]
        if len(outputs) < 2 or not isinstance(seed, (tuple, list)) or len(seed) != len(outputs):
            return None
        unseeded = frozenset(n for n, s in zip(outputs, seed, strict=True) if s is None)
        if not unseeded:
            return None
        if unseeded not in self._reduced:
            self._reduced[unseeded] = self._reduced_gradient(unseeded)
        found = self._reduced[unseeded]
        if found is None:
            return None
        gradient, kept = found
        by_name = dict(zip(outputs, seed, strict=True))
        return gradient, [by_name.get(name) for name in kept]  # hoisted temporaries: None

    def _reduced_gradient(self, unseeded: frozenset[str]) -> tuple[TcGradient, list[str]] | None:
        from polyflow.frontend.tc.rematerialize import without_temporaries

        program = parse(self.fn.source, file=self.fn.file)
        definition = program.find(self.fn.name)
        if definition is None:
            return None
        found = without_temporaries(definition, set(unseeded))
        if found is None:
            return None
        text, kept = found
        try:
            reduced = define(text, self.fn.name, options=self.fn.options, file=self.fn.file)
        except CompileError:
            return None  # (a range the temporary gave its readers): the gradient as it is
        return TcGradient(reduced, self.wrt), kept

    def emulate(self, *args: Any, seed: Any) -> Any:
        """For a definition of target "cuda": the gradient's GPU kernels run on the CPU
        (blocks and threads as loops) on NumPy arrays; the adjoints are what the GPU computes."""
        if self.fn.options.target != "cuda":
            raise ValueError(f"{self.fn.name} was defined for the CPU: its gradient runs there")
        adjoints = self._run_gpu(args, seed, emulate=True)
        return adjoints[0] if len(adjoints) == 1 else tuple(adjoints)

    def _run_gpu(self, args: tuple[Any, ...], seed: Any, *, emulate: bool) -> list[Any]:
        """The adjoints of the inputs of `wrt` from the gradient's GPU kernels: on CuPy arrays
        (or torch CUDA tensors) on the GPU, or on NumPy arrays in the CPU emulation."""
        from polyflow.drivers.gpu_launch import CpuLauncher, CupyLauncher, import_cupy

        fn = self.fn
        definition = fn.definition
        wanted = tuple(t.name for t in definition.inputs if t.name in self.wrt)
        if emulate:
            xp: Any = np
            arrays: list[Any] = fn._arrays(args)
        else:
            xp = import_cupy()
            arrays = [
                _as_cupy(xp, a, fn.name, p.name)
                for a, p in zip(args, definition.inputs, strict=True)
            ]
        shapes = [_shape_and_dtype(a) for a in arrays]
        compiled = fn._compile_shapes(shapes, grad=wanted, discard_outputs=True)
        assert isinstance(compiled, _CompiledGpu)
        if emulate:
            seeds: list[Any] = self._seeds(compiled.specialized, seed)
        else:
            seeds = self._device_seeds(xp, compiled.specialized, seed)
        outputs = [
            xp.zeros(compiled.specialized.shapes[t.name], dtype=NUMPY_DTYPES[t.element])
            for t in definition.outputs
        ]
        input_shadows = [
            xp.zeros_like(a)
            for t, a in zip(definition.inputs, arrays, strict=True)
            if t.name in wanted
        ]
        output_shadows = [
            s
            for t, s in zip(definition.outputs, seeds, strict=True)
            if t.element in _FLOAT_ELEMENTS
        ]
        everything = (*arrays, *outputs, *input_shadows, *output_shadows)
        if emulate:
            if compiled.cpu is None:
                compiled.cpu = CpuLauncher(compiled.stages["gpu"])
            pointers = [int(a.ctypes.data) for a in everything]
            compiled.host.run(compiled.entry, pointers, compiled.cpu)
        else:
            if compiled.gpu is None:
                compiled.gpu = CupyLauncher(compiled.ptx)
            pointers = [int(a.data.ptr) for a in everything]
            compiled.host.run(compiled.entry, pointers, compiled.gpu)
            if any(type(a).__module__.startswith("torch") for a in args):
                import torch  # type: ignore[import-not-found]

                return [torch.from_dlpack(a) for a in input_shadows]
        return input_shadows

    def _device_seeds(self, cupy: Any, specialized: Specialized, seed: Any) -> list[Any]:
        """One CuPy array per output holding its seed (zeros for None), copies of the CuPy
        arrays or torch CUDA tensors given (the gradient consumes them)."""
        out = []
        for value, name, shape, dtype in self._given_seeds(specialized, seed):
            if value is None:
                out.append(cupy.zeros(shape, dtype))
                continue
            array = cupy.array(_as_cupy(cupy, value, self.fn.name, f"seed of {name}"), dtype=dtype)
            out.append(self._shaped(name, array, shape))
        return out

    def _given_seeds(
        self, specialized: Specialized, seed: Any
    ) -> list[tuple[Any, str, tuple[int, ...], np.dtype[Any]]]:
        """(the seed given or None, the output's name, shape and dtype) per output, from
        `seed`: an array, or a sequence with one entry per output."""
        outputs = self.fn.definition.outputs
        given = list(seed) if isinstance(seed, (tuple, list)) else [seed]
        if len(given) != len(outputs):
            raise TypeError(
                f"{self.fn.name}() has {len(outputs)} output(s): give 'seed' as a sequence of "
                f"{len(outputs)} arrays (None for an output that gets no adjoint)"
            )
        return [
            (value, t.name, specialized.shapes[t.name], np.dtype(NUMPY_DTYPES[t.element]))
            for value, t in zip(given, outputs, strict=True)
        ]

    def _shaped(self, name: str, array: Any, shape: tuple[int, ...]) -> Any:
        """`array`, the seed of output `name`, when it has the output's `shape`."""
        if array.shape != shape:
            raise ValueError(
                f"the seed of output '{name}' of {self.fn.name}() must have shape {shape}, "
                f"got {array.shape}"
            )
        return array

    def run(
        self, args: tuple[Any, ...], seed: Any, *, outputs: bool = True
    ) -> tuple[Any, list[np.ndarray]]:
        """(the outputs, the adjoints of the inputs of `wrt`, in signature order; only those
        are computed: the others are not active in the compiled gradient). Without `outputs`
        the first is None, and the gradient skips the primal work only the outputs need."""
        fn = self.fn
        arrays = fn._arrays(args)
        wanted = tuple(t.name for t in fn.definition.inputs if t.name in self.wrt)
        compiled = fn._compile_shapes(
            [(a.shape, a.dtype) for a in arrays], grad=wanted, discard_outputs=not outputs
        )
        fn._check_gathers(compiled.specialized, arrays)
        self.compiled = compiled
        # taken out while in use: a call from another thread meanwhile makes its own
        scratch = self._scratch.pop(id(compiled), None)
        if scratch is None:
            buffers = fn._outputs(compiled.specialized) + self._seeds(
                compiled.specialized, [None] * len(fn.definition.outputs)
            )
            scratch = (buffers, [_address(b) for b in buffers])
        buffers, addresses = scratch
        definition = fn.definition
        count = len(definition.outputs)
        if outputs:
            results = fn._outputs(compiled.specialized)
            result_addresses = [_address(r) for r in results]
        else:
            results = buffers[:count]
            result_addresses = addresses[:count]
            for array in results:
                array.fill(0)
        self._seeds(compiled.specialized, seed, buffers[count:])  # into the kept buffers
        input_shadows = [
            aligned_zeros(a.shape, a.dtype)
            for t, a in zip(definition.inputs, arrays, strict=True)
            if t.name in wanted
        ]
        seed_addresses = [
            address
            for tensor, address in zip(definition.outputs, addresses[count:], strict=True)
            if tensor.element in _FLOAT_ELEMENTS
        ]
        packed = _PackedPointers(
            [_address(a) for a in arrays]
            + result_addresses
            + [_address(a) for a in input_shadows]
            + seed_addresses
        )
        compiled.call(packed.array)
        self._scratch[id(compiled)] = scratch
        if not outputs:
            return None, input_shadows
        result = results[0] if len(results) == 1 else tuple(results)
        return result, input_shadows

    def release_buffers(self) -> None:
        """Free the buffers kept between calls (the next call allocates them again)."""
        self._scratch.clear()
        for found in self._reduced.values():
            if found is not None:
                found[0].release_buffers()

    def _seeds(
        self, specialized: Specialized, seed: Any, into: list[np.ndarray] | None = None
    ) -> list[np.ndarray]:
        """One array per output holding its seed (zeros for None): copies (the gradient
        consumes them), into the arrays `into` where given."""
        out = []
        for k, (value, name, shape, dtype) in enumerate(self._given_seeds(specialized, seed)):
            if value is None:
                if into is None:
                    out.append(np.zeros(shape, dtype))
                else:
                    into[k].fill(0)
                    out.append(into[k])
                continue
            given_array = host_view(value, function=self.fn.name, name=f"seed of {name}")
            copy = np.asarray if into is not None else np.array  # `into` is the copy
            array = self._shaped(name, copy(given_array, dtype=dtype), shape)
            if into is None:
                out.append(np.ascontiguousarray(array))  # a copy: the gradient consumes it
            else:
                np.copyto(into[k], array)
                out.append(into[k])
        return out


_FLOAT_ELEMENTS = frozenset({"f16", "f32", "f64"})


def _address(array: np.ndarray) -> int:
    """The address of `array`'s first element."""
    return int(array.__array_interface__["data"][0])


class _PackedPointers:
    """The argument of a compiled `__polyflow_<f>` entry: an array of pointers to pointers to
    the arrays' data (`array`), and the pointers it points at (kept alive with it)."""

    def __init__(self, addresses: list[int]) -> None:
        n = len(addresses)
        self.values = (ctypes.c_void_p * n)(*addresses)
        base = ctypes.addressof(self.values)
        size = ctypes.sizeof(ctypes.c_void_p)
        self.array = (ctypes.c_void_p * n)(*range(base, base + size * n, size))


@dataclass
class _Compiled:
    specialized: Specialized
    engine: Any  # keeps the code alive
    call: Any
    stages: dict[str, str]
    report: CompileReport
    cached: bool  # lowered from the shared compile cache (only the JIT ran)


class TcFunction:
    """A TC definition callable on arrays; see the module docstring."""

    def __init__(
        self,
        source: str,
        file: str,
        inferred: InferredDefinition,
        all_inferred: dict[str, InferredDefinition],
        options: Options,
    ) -> None:
        self.source = source
        self.file = file
        self.inferred = inferred
        self.options = options
        self._callees = all_inferred
        # _Compiled (CPU) or _CompiledGpu (target "cuda"), by argument shapes and dtypes
        self._cache: dict[tuple[Any, ...], Any] = {}
        self._jvp: dict[tuple[str, ...], TcFunction] = {}  # jvp_function, per wrt
        # per specialization (its id; specializations live as long as the compiled cache):
        # the gathers to check on each call
        self._gathers: dict[int, list[tuple[str, int, str, int, int]]] = {}
        self._last: Any = None
        self.last_tuning: Any = None  # what the last `autotune` found

    @property
    def name(self) -> str:
        return self.inferred.definition.name

    @property
    def definition(self) -> CheckedDefinition:
        return self.inferred.definition

    def explain(self) -> str:
        """The inferred ranges of every statement and the shapes of the outputs."""
        return self.inferred.explain()

    @property
    def size_names(self) -> list[str]:
        """The symbolic dimensions of the inputs (`M`, `K`, ...), sorted: what `module` needs."""
        return sorted(
            {
                dim
                for param in self.definition.inputs
                for dim in (param.dims or ())
                if isinstance(dim, str)
            }
        )

    def module(self, sizes: Mapping[str, int], *, grad: bool = False) -> tuple[Any, Any]:
        """(an MLIR context, the frontend module in it) of this definition specialized to
        `sizes` (each of `size_names`): what a compile without arrays at hand starts from;
        with `grad`, its gradient declared too (for a compile with `Options.grad`)."""
        from mlir import ir

        from polyflow.frontend.tc.lower import lower_definition
        from polyflow.ir.contexts import new_context

        missing = [name for name in self.size_names if name not in sizes]
        if missing:
            raise CompileError(
                f"{self.name} needs the size of every symbolic dimension: give "
                f"{', '.join(missing)}",
                file=self.file,
            )
        specialized = specialize(self.inferred, dict(sizes), source=self.source, file=self.file)
        context = new_context()
        with context, ir.Location.unknown():
            module = lower_definition(
                specialized, callees=self._callees, source=self.source, file=self.file, grad=grad
            )
        return context, module

    def mlir(self, stage: str = "mlir", *args: Any) -> str:
        """The IR after `stage` ('mlir', 'affine', 'affine-opt', 'llvm-dialect'; 'grad': the
        gradient's module after the `grad` stage) for `args`' shapes, or for the last call's."""
        if stage == "grad":
            arrays = self._arrays(args)
            every = tuple(t.name for t in self.definition.inputs if t.element in _FLOAT_ELEMENTS)
            last = self._last  # the report, stages and display stay the last call's
            try:
                gradient = self._compile_shapes([(a.shape, a.dtype) for a in arrays], grad=every)
            finally:
                self._last = last
            return str(gradient.stages["grad"])
        compiled = self._compile(self._arrays(args)) if args else self._last
        if compiled is None:
            raise ValueError(f"{self.name} has not run yet: pass arguments to specialize it")
        if stage not in compiled.stages:
            raise KeyError(f"unknown stage '{stage}' (have: {', '.join(compiled.stages)})")
        return compiled.stages[stage]

    @property
    def stages(self) -> dict[str, str]:
        """The IR after each stage for the last call's shapes (empty before the first call)."""
        return {} if self._last is None else dict(self._last.stages)

    @property
    def warnings(self) -> list[str]:
        """What the compiler could not do for the last call's shapes."""
        return [] if self._last is None else self._last.report.warnings

    @property
    def report(self) -> CompileReport:
        """The compile report of the last call's shapes (polyflow.report): what each stage did
        and did not do, and where."""
        if self._last is None:
            raise ValueError(f"{self.name} has not run yet: pass arguments to specialize it")
        return self._last.report

    @property
    def cached(self) -> bool:
        """Whether the last call's kernel came from the shared compile cache."""
        return self._last is not None and self._last.cached

    # ----- notebooks (polyflow.display renders; these gather what it shows)

    def _repr_html_(self) -> str:
        from polyflow.display import render_html

        return render_html(self._display_view())

    def _repr_markdown_(self) -> str:
        from polyflow.display import render_markdown

        return render_markdown(self._display_view())

    def _display_view(self) -> Any:
        """A `polyflow.display.KernelView`: the signature, the inferred ranges and, after a
        call, the sizes, report and stages of the last call's kernel."""
        from polyflow.display import KernelView, definition_header

        position = self.definition.source.pos
        details = [line.strip() for line in self.explain().splitlines()[1:]]
        last = self._last
        status = None
        if last is None:
            status = (
                "not specialized yet: call it on arrays (or .mlir(stage, *arrays)) to compile "
                "it for their shapes"
            )
        else:
            sizes = ", ".join(f"{k}={v}" for k, v in last.specialized.sizes.items())
            shapes = ", ".join(
                f"{t.name}: {'x'.join(map(str, last.specialized.shapes[t.name])) or 'scalar'}"
                for t in self.definition.outputs
            )
            details.append(f"last call: {sizes} ({shapes})" if sizes else f"last call: {shapes}")
        return KernelView(
            name=self.name,
            language="tc",
            signature=definition_header(self.source, position.line, position.column),
            details=details,
            report=None if last is None else last.report,
            stages={} if last is None else dict(last.stages),
            options=self.options,
            source=self.source,
            file=self.file,
            status=status,
            cached=self.cached,
        )

    def __call__(self, *args: Any, out: Any = None) -> Any:
        """Run the kernel on `args` (arrays of NumPy, PyTorch, JAX or any DLPack library, read
        in place); the outputs come back as arrays of the first array argument's library, or
        are written into `out=` (an array, or a sequence with one per output) and returned."""
        if self.options.target == "cuda":
            return self._call_on_gpu(args, out)
        arrays = self._arrays(args)
        compiled = self._compile(arrays)
        self._check_gathers(compiled.specialized, arrays)
        outputs = self._output_slots(compiled.specialized, out, result_library(args))
        if out is not None:
            _check_disjoint(self, arrays, outputs)
        packed = _PackedPointers([_address(a) for a in (*arrays, *(o.view for o in outputs))])
        compiled.call(packed.array)
        results = [o.finish() for o in outputs]
        return results[0] if len(results) == 1 else tuple(results)

    # ----- the GPU (target "cuda")

    def emulate(self, *args: Any, out: Any = None) -> Any:
        """For target "cuda": run the GPU kernels on the CPU (blocks and threads as loops) on
        NumPy arrays; the result is what the GPU computes."""
        from polyflow.drivers.gpu_launch import CpuLauncher

        compiled = self._gpu_compiled(args)
        if compiled.cpu is None:
            compiled.cpu = CpuLauncher(compiled.stages["gpu"])
        arrays = self._arrays(args)
        outputs = self._output_slots(compiled.specialized, out, result_library(args))
        if out is not None:
            _check_disjoint(self, arrays, outputs)
        pointers = [int(a.ctypes.data) for a in (*arrays, *(o.view for o in outputs))]
        compiled.host.run(compiled.entry, pointers, compiled.cpu)
        results = [o.finish() for o in outputs]
        return results[0] if len(results) == 1 else tuple(results)

    def ptx(self, *args: Any) -> str:
        """For target "cuda": the PTX of the kernels for `args`' shapes (or the last call's)."""
        return self._gpu_compiled(args).stages["ptx"] if args else self.mlir("ptx")

    def _gpu_compiled(self, args: tuple[Any, ...]) -> _CompiledGpu:
        if self.options.target != "cuda":
            raise ValueError(f"{self.name} was defined for the CPU: define it with target='cuda'")
        shapes = [_shape_and_dtype(a) for a in args]
        compiled = self._compile_shapes(shapes)
        assert isinstance(compiled, _CompiledGpu)
        return compiled

    def _call_on_gpu(self, args: tuple[Any, ...], out: Any) -> Any:
        from polyflow.drivers.gpu_launch import CupyLauncher, import_cupy

        cupy = import_cupy()
        torch_inputs = any(type(a).__module__.startswith("torch") for a in args)
        arrays = [
            _as_cupy(cupy, a, self.name, p.name)
            for a, p in zip(args, self.definition.inputs, strict=True)
        ]
        compiled = self._gpu_compiled(tuple(arrays))
        if compiled.gpu is None:
            compiled.gpu = CupyLauncher(compiled.ptx)
        if out is None:
            outputs = [
                cupy.zeros(compiled.specialized.shapes[t.name], dtype=NUMPY_DTYPES[t.element])
                for t in self.definition.outputs
            ]
        else:
            given = list(out) if isinstance(out, (tuple, list)) else [out]
            outputs = [
                _as_cupy(cupy, o, self.name, t.name)
                for o, t in zip(given, self.definition.outputs, strict=True)
            ]
        pointers = [int(a.data.ptr) for a in (*arrays, *outputs)]
        compiled.host.run(compiled.entry, pointers, compiled.gpu)
        if out is not None:  # the caller's own arrays (a torch tensor stays one)
            outputs = list(out) if isinstance(out, (tuple, list)) else [out]
        elif torch_inputs:
            import torch  # type: ignore[import-not-found]

            outputs = [torch.from_dlpack(o) for o in outputs]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    # ----- arguments

    def _arrays(self, args: tuple[Any, ...]) -> list[np.ndarray]:
        """The arguments as C-contiguous NumPy arrays over the caller's memory (a strided view
        copied, with an ArrayCopyWarning), each checked against its parameter: dtype and rank
        (TypeError), memory the CPU can read (ValueError), naming it."""
        params = self.definition.inputs
        if len(args) != len(params):
            raise TypeError(f"{self.name}() takes {len(params)} argument(s), {len(args)} given")
        arrays = []
        for arg, param in zip(args, params, strict=True):
            want = np.dtype(NUMPY_DTYPES[param.element])
            if param.rank == 0 and library_of(arg) is None and np.ndim(arg) == 0:
                arrays.append(np.asarray(arg, dtype=want))
                continue
            array = host_view(arg, function=self.name, name=param.name, target_hint=_CPU_HINT)
            if array.dtype != want:
                raise TypeError(
                    f"argument '{param.name}' of {self.name}() must have dtype {want} "
                    f"(TC {param.element}), got {describe(arg)}"
                )
            if array.ndim != param.rank:
                raise TypeError(
                    f"argument '{param.name}' of {self.name}() must have {param.rank} "
                    f"dimension(s), got {describe(arg)}"
                )
            arrays.append(contiguous(array, function=self.name, name=param.name))
        return arrays

    def _sizes(self, arrays: list[np.ndarray]) -> dict[str, int]:
        sizes: dict[str, int] = {}
        where: dict[str, str] = {}
        for array, param in zip(arrays, self.definition.inputs, strict=True):
            for k, (dim, extent) in enumerate(zip(param.dims or (), array.shape, strict=True)):
                if isinstance(dim, int):
                    if extent != dim:
                        raise ValueError(
                            f"argument '{param.name}' of {self.name}() must have size {dim} in "
                            f"dimension {k}, got shape {array.shape}"
                        )
                elif dim in sizes and sizes[dim] != extent:
                    raise ValueError(
                        f"size '{dim}' of {self.name}() is {sizes[dim]} in {where[dim]} but "
                        f"{extent} in '{param.name}' (dimension {k})"
                    )
                else:
                    sizes.setdefault(dim, extent)
                    where.setdefault(dim, f"'{param.name}' (dimension {k})")
        return sizes

    def _outputs(self, specialized: Specialized) -> list[np.ndarray]:
        """Zeroed NumPy arrays for the outputs (the gradient's buffers)."""
        return [
            aligned_zeros(specialized.shapes[t.name], NUMPY_DTYPES[t.element])
            for t in self.definition.outputs
        ]

    def _output_slots(self, specialized: Specialized, out: Any, library: str) -> list[Output]:
        """Where the kernel writes each output: new zeroed arrays of `library`, or the arrays
        of `out=` checked (shape, dtype, writeable, host memory; naming the output)."""
        outputs = self.definition.outputs
        if out is None:
            return [
                new_output(library, specialized.shapes[t.name], NUMPY_DTYPES[t.element])
                for t in outputs
            ]
        given = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(given) != len(outputs):
            raise TypeError(f"{self.name}() has {len(outputs)} output(s), out= gives {len(given)}")
        return [
            given_output(
                array,
                function=self.name,
                name=tensor.name,
                shape=specialized.shapes[tensor.name],
                dtype=NUMPY_DTYPES[tensor.element],
            )
            for array, tensor in zip(given, outputs, strict=True)
        ]

    def _check_gathers(self, specialized: Specialized, arrays: list[np.ndarray]) -> None:
        """Index tensors that are inputs must hold valid positions of the tensor they index."""
        checks = self._gathers.get(id(specialized))
        if checks is None:  # (index input, its position, tensor indexed, dimension, extent)
            checks = []
            positions = {t.name: k for k, t in enumerate(self.definition.inputs)}
            for statement in specialized.inferred.statements:
                checked = statement.statement
                if not isinstance(checked, CheckedComprehension):
                    continue
                for read in checked.reads:
                    for dim, subscript in enumerate(read.subscripts):
                        if isinstance(subscript, ast.Apply) and subscript.name in positions:
                            extent = specialized.shapes[read.tensor][dim]
                            checks.append(
                                (
                                    subscript.name,
                                    positions[subscript.name],
                                    read.tensor,
                                    dim,
                                    extent,
                                )
                            )
            self._gathers[id(specialized)] = checks
        for name, position, tensor, dim, extent in checks:
            values = arrays[position]
            if values.size and (values.min() < 0 or values.max() >= extent):
                raise ValueError(
                    f"'{name}' indexes dimension {dim} of '{tensor}' (size {extent}) but holds "
                    f"values from {values.min()} to {values.max()}"
                )

    # ----- compilation

    def _compile(self, arrays: list[np.ndarray]) -> Any:
        return self._compile_shapes([(a.shape, a.dtype) for a in arrays])

    def _compile_shapes(
        self,
        shapes: list[tuple[tuple[int, ...], np.dtype[Any]]],
        *,
        grad: tuple[str, ...] | None = None,
        discard_outputs: bool = False,
    ) -> Any:
        """The compiled kernel for these shapes and dtypes, or with `grad` (the inputs it is
        taken with respect to) the compiled gradient (with `discard_outputs`, one whose
        caller ignores the outputs' final values)."""
        key = (*((shape, np.dtype(dtype).str) for shape, dtype in shapes), grad, discard_outputs)
        compiled = self._cache.get(key)
        if compiled is None:
            probes = [
                np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, [0] * len(shape))
                for shape, dtype in shapes
            ]
            specialized = specialize(
                self.inferred, self._sizes(probes), source=self.source, file=self.file
            )
            if grad is not None:
                # a time limit on the polyhedral stage unless one is set: the adjoint of a
                # body with comparisons and selects (max, fabs) becomes a scop of many small
                # statements on which isl's scheduler can run for minutes past its budget
                timeout = self.options.compile_timeout or GRAD_COMPILE_TIMEOUT
                update: dict[str, Any] = {"grad": (self.name,), "compile_timeout": timeout}
                if "fusion" not in self.options.model_fields_set:
                    # smart fusion puts an elementwise consumer (a layer's tanh) into the loops
                    # of the contraction before it, which the micro-kernels then do not take:
                    # the gradient's forward sweep of a 2-layer MLP ran 64 ms, 6 ms unfused
                    update["fusion"] = "min"
                options = self.options.model_copy(update=update)
                build_gradient = _build_gpu if self.options.target == "cuda" else _build
                compiled = build_gradient(
                    specialized,
                    self._callees,
                    self.source,
                    self.file,
                    options,
                    grad=grad,
                    discard_outputs=discard_outputs,
                )
            else:
                options, tuning = self._tuned_options(shapes)
                build = _build_gpu if self.options.target == "cuda" else _build
                compiled = build(specialized, self._callees, self.source, self.file, options)
                if tuning is not None:
                    compiled.report.add(Remark("build", "tuned", "note", tuning_note(tuning)))
            self._cache[key] = compiled
        self._last = compiled
        return compiled

    def _tuned_options(
        self, shapes: list[tuple[tuple[int, ...], np.dtype[Any]]]
    ) -> tuple[Options, Tuning | None]:
        """The options for these shapes: the tuning database's choices over this function's
        options, where `polyflow tune` / `autotune` tuned it for them on this machine."""
        return with_tuning(self.options, lambda: self.tuning_key(shapes))

    def tuning_key(self, shapes: list[tuple[tuple[int, ...], Any]]) -> TuningKey:
        """The tuning database's key of this definition for arguments of these shapes and
        dtypes."""
        return tc_tuning_key(
            self.source,
            self.name,
            [(tuple(shape), np.dtype(dtype).name) for shape, dtype in shapes],
            target=self.options.target,
            reassociation=self.options.reassociation,
        )

    def autotune(
        self,
        *args: Any,
        budget: float | str | None = None,
        candidates: int | None = None,
        search: str = "genetic",
        workers: int = 1,
        dask: str | None = None,
        db: str | None = None,
        seed: int = 0,
        progress: bool = False,
    ) -> TcFunction:
        """Tune this definition's options for arguments like `args` (example inputs: what the
        candidates run on, each candidate's outputs checked against the default build's) for
        `budget` (seconds, or "90s", "2m", "1h"; default 2m unless `candidates` is given) or
        `candidates` builds, with `search` ("genetic", "random", "tpe") on `workers` local
        processes or the Dask cluster at `dask`; the result goes to the tuning database (`db`:
        a URL or path; default: the shared one), from which later `define`s of this kernel
        reuse it for these shapes. Returns this definition with the tuned options;
        `last_tuning` has what the search found (`polyflow.tune.tuner.TuneResult`)."""
        # The tuner sits above this API (it builds TC kernels through it), so it is reached
        # by name rather than imported.
        api = importlib.import_module("polyflow.tune.api")
        return cast(
            TcFunction,
            api.autotune_tc(
                self, args, budget=budget, candidates=candidates, search=search,
                workers=workers, dask=dask, db=db, seed=seed, progress=progress,
            ),
        )

    # ----- gradients

    def grad(self, wrt: str | tuple[str, ...] | list[str] | None = None) -> TcGradient:
        """The reverse-mode gradient of this definition with respect to the float inputs `wrt`
        (all of them by default): `g = fn.grad(("W", "X"))`, then `dW, dX = g(*inputs, seed)`,
        the vector–Jacobian product for the output adjoint `seed` (see `TcGradient`)."""
        return TcGradient(self, wrt)

    def jvp_function(self, wrt: str | tuple[str, ...] | list[str] | None = None) -> TcFunction:
        """`<name>_jvp`, this definition's forward-mode derivative with respect to the float
        inputs `wrt` (all by default), as a definition of its own
        (`polyflow.frontend.tc.tangent`): the parameters, then a tangent per input of `wrt`;
        the outputs, then their tangents (then the tie counts of `max=!`/`min=!`)."""
        from polyflow.frontend.tc.tangent import jvp_definition

        wanted = TcGradient(self, wrt).wrt if self.options.target != "cuda" else ()
        if self.options.target == "cuda":
            raise ValueError(f"forward mode of {self.name}() runs on the CPU only for now")
        ordered = tuple(t.name for t in self.definition.inputs if t.name in wanted)
        found = self._jvp.get(ordered)
        if found is None:
            program = parse(self.source, file=self.file)
            try:
                text, _ = jvp_definition(program, self.name, ordered)
            except ValueError as error:
                raise CompileError(str(error), file=self.file) from None
            found = define(text, f"{self.name}_jvp", options=self.options, file=self.file)
            self._jvp[ordered] = found
        return found

    def jvp(
        self, *args: Any, tangents: Any, wrt: str | tuple[str, ...] | list[str] | None = None
    ) -> tuple[Any, Any]:
        """(the outputs, their tangents): the Jacobian–vector product for `tangents`, one array
        per input of `wrt` (all float inputs by default; a single array for one), in forward
        mode (`jvp_function`)."""
        forward = self.jvp_function(wrt)
        given = list(tangents) if isinstance(tangents, (tuple, list)) else [tangents]
        wanted = forward.definition.inputs[len(self.definition.inputs) :]
        if len(given) != len(wanted):
            raise TypeError(
                f"{self.name}() differentiates {len(wanted)} input(s) in forward mode: give "
                f"'tangents' as {len(wanted)} array(s)"
            )
        results = forward(*args, *given)
        results = results if isinstance(results, tuple) else (results,)
        n = len(self.definition.outputs)
        outputs, dots = results[:n], results[n : 2 * n]
        return (outputs[0], dots[0]) if n == 1 else (tuple(outputs), tuple(dots))

    def hvp(
        self,
        *args: Any,
        vector: Any,
        output: str | None = None,
        wrt: str | tuple[str, ...] | list[str] | None = None,
    ) -> Any:
        """The Hessian–vector product `H·v` of the scalar output `output` (the last output by
        default) with respect to the inputs `wrt` (all float inputs by default), `vector` one
        array per input of `wrt`: reverse mode over forward mode, the gradient of ⟨1, ȯ⟩
        through `jvp_function` with respect to the inputs."""
        forward = self.jvp_function(wrt)
        names = [t.name for t in self.definition.outputs]
        chosen = output if output is not None else names[-1]
        if chosen not in names:
            raise ValueError(f"{self.name}() has no output '{chosen}'")
        outputs = forward.definition.outputs
        seeds: list[Any] = [None] * len(outputs)
        position = [t.name for t in outputs].index(f"{chosen}_dot")
        seeds[position] = np.ones(())
        given = list(vector) if isinstance(vector, (tuple, list)) else [vector]
        wanted = tuple(
            t.name for t in self.definition.inputs if t.name in TcGradient(self, wrt).wrt
        )
        return forward.grad(wanted)(*args, *given, seed=seeds)

    def vjp(self, *args: Any, seed: Any) -> tuple[Any, Any]:
        """(the outputs, the adjoints of every float input) for the output adjoint `seed`, from
        one run of the gradient (which computes the outputs on its way)."""
        gradient = self.grad()
        outputs, adjoints = gradient.run(args, seed)
        return outputs, adjoints


def _build(
    specialized: Specialized,
    callees: dict[str, InferredDefinition],
    source: str,
    file: str,
    options: Options,
    *,
    grad: tuple[str, ...] | None = None,
    discard_outputs: bool = False,
) -> _Compiled:
    from mlir import ir

    from polyflow.drivers.jit import jit_module
    from polyflow.frontend.tc.lower import lower_definition
    from polyflow.ir.contexts import new_context
    from polyflow.ir.names import CABI_PREFIX, gradient_name

    context = new_context()
    with context, ir.Location.unknown():
        module = lower_definition(
            specialized,
            callees=callees,
            source=source,
            file=file,
            grad=grad if grad is not None else False,
            discard_outputs=discard_outputs,
        )
        engine, result = jit_module(module, options)
    name = specialized.inferred.definition.name
    if grad is not None:
        name = gradient_name(name)
    address = engine.raw_lookup(CABI_PREFIX + name)
    if not address:
        raise CompileError(f"compiled code for '{name}' not found", file=file)
    call = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
    return _Compiled(
        specialized,
        (engine, context),
        call,
        result.stages,
        result.report,
        result.cached,
    )


@dataclass
class _CompiledGpu:
    """A definition compiled for the GPU: its host program, the PTX of each GPU module, and the
    launchers made so far (CPU emulation, CuPy)."""

    specialized: Specialized
    host: Any  # drivers.gpu_launch.HostProgram
    entry: str
    ptx: dict[str, str]
    stages: dict[str, str]
    report: CompileReport
    cached: bool
    cpu: Any = None
    gpu: Any = None


def _build_gpu(
    specialized: Specialized,
    callees: dict[str, InferredDefinition],
    source: str,
    file: str,
    options: Options,
    *,
    grad: tuple[str, ...] | None = None,
    discard_outputs: bool = False,
) -> _CompiledGpu:
    from mlir import ir

    from polyflow.drivers.compile import compile_module
    from polyflow.drivers.gpu_launch import HostProgram
    from polyflow.frontend.tc.lower import lower_definition
    from polyflow.ir.contexts import new_context
    from polyflow.ir.names import CABI_PREFIX, gradient_name

    context = new_context()
    with context, ir.Location.unknown():
        module = lower_definition(
            specialized,
            callees=callees,
            source=source,
            file=file,
            grad=grad if grad is not None else False,
            discard_outputs=discard_outputs,
        )
        result = compile_module(module, options, produce="ptx")
    name = specialized.inferred.definition.name
    if grad is not None:
        name = gradient_name(name)
    return _CompiledGpu(
        specialized,
        HostProgram(result.stages["gpu"]),
        CABI_PREFIX + name,
        dict(result.ptx),
        result.stages,
        result.report,
        result.cached,
    )


def _shape_and_dtype(value: Any) -> tuple[tuple[int, ...], np.dtype[Any]]:
    shape = tuple(int(d) for d in getattr(value, "shape", ()))
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return shape, np.asarray(value).dtype
    return shape, np.dtype(str(dtype).replace("torch.", ""))


def _as_cupy(cupy: Any, value: Any, function: str, name: str) -> Any:
    """`value` as a CuPy array without a copy (CuPy arrays as they are, torch CUDA tensors
    through DLPack), C-contiguous."""
    from polyflow.drivers.gpu_launch import as_cupy

    value = as_cupy(cupy, value, function, name)
    if not value.flags.c_contiguous:
        raise TypeError(f"argument '{name}' of {function}() must be C-contiguous")
    return value


def _check_disjoint(fn: TcFunction, arrays: list[np.ndarray], slots: list[Output]) -> None:
    """The compiled code assumes no two tensors overlap (as TC's semantics do)."""
    names = [t.name for t in fn.definition.inputs] + [t.name for t in fn.definition.outputs]
    # the caller's arrays (an output written through a copy overlaps where its target does)
    outputs = [s.view if s.copy_back is None else s.copy_back for s in slots]
    everything = [*arrays, *outputs]
    for k, output in enumerate(outputs, start=len(arrays)):
        for j in range(k):
            if np.shares_memory(output, everything[j]):
                raise ValueError(
                    f"output '{names[k]}' of {fn.name}() overlaps '{names[j]}': give outputs "
                    "their own arrays"
                )


# what a message about an array in GPU memory passed to a CPU kernel suggests
_CPU_HINT = ": pass CPU memory (`.cpu()`, `cupy.asnumpy`) or define it with target='cuda'"

