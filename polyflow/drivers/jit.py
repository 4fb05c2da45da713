"""`polyflow.compile_c`: JIT-compile a C function and call it on NumPy arrays and Python scalars."""

from __future__ import annotations

import ctypes
import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
from mlir.execution_engine import ExecutionEngine
from pycparser import c_ast

from polyflow.arrays import contiguous, describe, host_view, library_of
from polyflow.drivers.compile import Compiled, compile_module
from polyflow.drivers.sources import c_module, check_gradients
from polyflow.errors import CompileError
from polyflow.frontend.c import (
    CFunction,
    CGlobal,
    CModule,
    FileScope,
)
from polyflow.frontend.c_analysis import walk
from polyflow.frontend.c_scope import flatten_initializer
from polyflow.frontend.c_struct_params import stored_arrays
from polyflow.frontend.c_types import Array, Scalar, Unsupported, Void
from polyflow.ir.names import CABI_PREFIX
from polyflow.lowering.llvm_dialect import has_parallel_loops
from polyflow.options import Options
from polyflow.report import CompileReport, Remark
from polyflow.source_input import given_c_source
from polyflow.storage.cache import CompileCache
from polyflow.storage.tuning import c_tuning_key_of, tuning_note, with_tuning
from polyflow.toolchain import openmp_library_dir

_CTYPES = {
    ("float", 32, True): ctypes.c_float,
    ("float", 64, True): ctypes.c_double,
    ("float", 80, True): ctypes.c_longdouble,
    ("int", 8, True): ctypes.c_int8,
    ("int", 8, False): ctypes.c_uint8,
    ("int", 16, True): ctypes.c_int16,
    ("int", 16, False): ctypes.c_uint16,
    ("int", 32, True): ctypes.c_int32,
    ("int", 32, False): ctypes.c_uint32,
    ("int", 64, True): ctypes.c_int64,
    ("int", 64, False): ctypes.c_uint64,
}


def _ctype(t: Scalar) -> type:
    if t.boolean:
        return ctypes.c_bool
    return _CTYPES[(t.kind, t.bits, t.signed if t.is_int else True)]


def _error_at(exc: Unsupported, filename: str, prefix: str) -> CompileError:
    coord = getattr(exc.node, "coord", None)
    if coord is None:
        return CompileError(f"{prefix}: {exc.reason}", file=filename)
    return CompileError(
        f"{prefix}: {exc.reason}", file=coord.file, line=coord.line, column=coord.column or 1
    )


class CompiledFunction:
    """A JIT-compiled C function; call it like the C function, with NumPy arrays for arrays.

    File-scope variables the function uses live in `globals` (NumPy arrays, initialized as C would);
    `report` is the compile report (polyflow.report: what each stage did and did not do, and
    where); `warnings` says what the compiler could not do (e.g. a function left unraised, and
    why); `notes` what the polyhedral stage (-O3) skipped and which loops reorder float
    reductions; `cached` whether the lowered code came from the shared compile cache.
    """

    def __init__(
        self,
        engine: ExecutionEngine,
        fn: CFunction,
        cmod: CModule,
        stages: dict[str, str],
        report: CompileReport | None = None,
        cached: bool = False,
    ) -> None:
        self._engine = engine  # keeps the compiled code alive
        self.name = fn.name
        self.signature = fn
        self.stages = stages
        self.report = report or CompileReport()
        self.warnings = self.report.warnings
        self.notes = self.report.notes
        self.cached = cached
        self.globals: dict[str, np.ndarray] = {
            g: _initial_global(cmod.globals[g], cmod) for g in fn.globals
        }
        # reverse-mode gradients compiled with it (`compile_c(grad=...)`), by function name
        self.gradients: dict[str, CompiledFunction] = {}
        self.grad: CompiledFunction | None = None  # this function's, when compiled
        # what `autotune` recompiles: (source text, file name, its directory, options)
        self.origin: tuple[str, str, Path | None, Options] | None = None
        self.last_tuning: Any = None  # what the last `autotune` found
        address = engine.raw_lookup(CABI_PREFIX + fn.name)
        if not address:
            raise RuntimeError(f"compiled code for '{fn.name}' not found")
        self._packed = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
        # the array parameters the function may store into (True: any of them), on first call
        self._stored: frozenset[str] | bool | None = None

    def mlir(self, stage: str = "mlir") -> str:
        """The IR after a pipeline stage ('mlir', 'affine', 'affine-opt', 'llvm-dialect')."""
        if stage not in self.stages:
            raise KeyError(f"stage '{stage}' not kept (have: {', '.join(self.stages)})")
        return self.stages[stage]

    # ----- notebooks (polyflow.display renders; these gather what it shows)

    def _repr_html_(self) -> str:
        from polyflow.display import render_html

        return render_html(self._display_view())

    def _repr_markdown_(self) -> str:
        from polyflow.display import render_markdown

        return render_markdown(self._display_view())

    def _display_view(self) -> Any:
        """A `polyflow.display.KernelView`: the C signature, the arrays' shapes as far as the
        parameters say them, the report, the stages, the options and the source."""
        from pycparser import c_generator

        from polyflow.display import KernelView
        from polyflow.frontend.c_analysis import is_statement_wrapper

        fn, generator = self.signature, c_generator.CGenerator()
        if fn.node.decl.name == fn.name and not fn.unpacked:
            signature = str(generator.visit(fn.node.decl))
        else:  # a gradient's or a struct-unpacked interface: the parameters as called
            signature = f"{fn.ret} {fn.name}({', '.join(f'{t} {n}' for n, t in fn.params)})"
        details = []
        for name, ptype in fn.params:
            if isinstance(ptype, Array):
                dims = [
                    "any" if d is None else str(d) if isinstance(d, int) else generator.visit(d)
                    for d in ptype.dims
                ]
                details.append(f"{name}: {ptype.elem} array, shape ({', '.join(dims)})")
        if fn.globals:
            details.append(f"file-scope variables: {', '.join(fn.globals)} (in .globals)")
        nests = []  # (function, line, column, last line) of each outermost loop: a table row
        if fn.node.decl.name == fn.name:
            stack: list[tuple[c_ast.Node, bool]] = [(fn.node.body, False)]
            while stack:
                node, inside = stack.pop()
                if isinstance(node, c_ast.For | c_ast.While | c_ast.DoWhile) and not inside:
                    if not is_statement_wrapper(node):
                        last = max(n.coord.line for n in walk(node) if n.coord is not None)
                        nests.append((fn.name, node.coord.line, node.coord.column or 0, last))
                        inside = True
                stack += [(child, inside) for _, child in node.children()]
        origin = self.origin
        return KernelView(
            name=self.name,
            language="c",
            signature=signature,
            details=details,
            report=self.report,
            stages=dict(self.stages),
            options=origin[3] if origin else None,
            source=origin[0] if origin else None,
            file=origin[1] if origin else None,
            cached=self.cached,
            nests=nests,
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
    ) -> CompiledFunction:
        """Tune this function's options on example arguments `args` (each candidate called on
        copies of them, the arrays it changes and its result checked against the default
        build's) for `budget` (seconds, or "90s", "2m"; default 2m unless `candidates` is
        given) or `candidates` builds; the result goes to the tuning database (`db`; default:
        the shared one), where later `compile_c`s of this source find it. Returns the function
        compiled with the tuned options (its `last_tuning`: what the search found)."""
        # The tuner sits above the drivers (it builds through them), so it is reached by name
        # here rather than imported: the one call from this layer up.
        api = importlib.import_module("polyflow.tune.api")
        return cast(
            CompiledFunction,
            api.autotune_c(
                self, args, budget=budget, candidates=candidates, search=search,
                workers=workers, dask=dask, db=db, seed=seed, progress=progress,
            ),
        )

    def __call__(self, *args: Any) -> Any:
        """Call the C function: arrays of NumPy, PyTorch, JAX or any DLPack library are passed
        by pointer to their own memory (a strided view through a contiguous copy, copied back
        where the function stores into it); scalars as C converts constants."""
        fn = self.signature
        if self._stored is None:
            self._stored = _stored_parameters(fn)
        copies: list[tuple[np.ndarray, np.ndarray]] = []  # (copy passed, the caller's view)

        def pointer(pname: str, ptype: Array, arg: Any, scalars: dict[str, int | float]) -> Any:
            stored = self._stored is True or pname in cast(frozenset[str], self._stored)
            array = _check_array(fn.name, pname, ptype, arg, scalars, stored=stored)
            if not array.flags.c_contiguous:
                passed = contiguous(array, function=fn.name, name=pname, stacklevel=6)
                if stored:
                    copies.append((passed, array))
                array = passed
            return ctypes.c_void_p(array.ctypes.data)

        ordered = bind_arguments(fn, args, lambda ptype, value: _ctype(ptype)(value), pointer)
        ordered += [ctypes.c_void_p(self.globals[g].ctypes.data) for g in fn.globals]
        result = None if isinstance(fn.ret, Void) else _ctype(fn.ret)()
        pointers = [*ordered, *([result] if result is not None else [])]
        packed = (ctypes.c_void_p * len(pointers))(*[ctypes.addressof(p) for p in pointers])
        self._packed(packed)
        for passed, view in copies:
            np.copyto(view, passed)
        return None if result is None else result.value


def bind_arguments(
    fn: CFunction,
    args: tuple[Any, ...],
    scalar: Callable[[Scalar, int | float], Any],
    array: Callable[[str, Array, Any, dict[str, int | float]], Any],
) -> list[Any]:
    """`args` checked against C function `fn`'s parameters (their number; each scalar as a C
    compiler checks a constant) and made into what a caller passes: `scalar(type, value)` for a
    scalar, `array(name, type, argument, scalars)` for an array (`scalars`: the scalar
    arguments by name, which size the arrays)."""
    if len(args) != len(fn.params):
        raise TypeError(f"{fn.name}() takes {len(fn.params)} argument(s), {len(args)} given")
    scalars = {
        pname: _scalar_value(fn.name, pname, ptype, arg)
        for (pname, ptype), arg in zip(fn.params, args, strict=True)
        if isinstance(ptype, Scalar)
    }
    return [
        scalar(ptype, scalars[pname])
        if isinstance(ptype, Scalar)
        else array(pname, ptype, arg, scalars)  # type: ignore[arg-type]
        for (pname, ptype), arg in zip(fn.params, args, strict=True)
    ]


def _scalar_value(fname: str, pname: str, ptype: Scalar, arg: Any) -> int | float:
    """`arg` as the value of C scalar parameter `pname`, checked as a C compiler would check a
    constant: a number (not a string), an integer for an integer type (not a float), within
    the type's range (`unsigned char` is 0..255); TypeError or ValueError naming the argument."""
    what = f"argument '{pname}' of {fname}() is {ptype}"
    if isinstance(arg, np.ndarray):
        if arg.ndim > 0:
            raise TypeError(f"{what}, a scalar, not an array")
        arg = arg.item()
    elif isinstance(arg, np.generic):
        arg = arg.item()
    if ptype.boolean and isinstance(arg, bool | int):
        return int(bool(arg))
    if ptype.is_float:
        if not isinstance(arg, int | float):
            raise TypeError(f"{what}: expected a number, got {type(arg).__name__}")
        return float(arg)
    if not isinstance(arg, int):
        raise TypeError(f"{what}: expected an integer, got {type(arg).__name__} {arg!r}")
    low, high = (-(1 << (ptype.bits - 1)), (1 << (ptype.bits - 1)) - 1) if ptype.signed else (
        0,
        (1 << ptype.bits) - 1,
    )
    if not low <= arg <= high:
        raise ValueError(f"{what}: {arg} is out of its range {low}..{high}")
    return int(arg)


def _stored_parameters(fn: CFunction) -> frozenset[str] | bool:
    """The array parameters `fn`'s body may store into; True (any of them) when that is not
    plain: a store whose target is no named array, one into a local pointer or array (it may
    point into a parameter's memory), or a pointer parameter assigned (it may then point
    into another's)."""
    if fn.shadows or fn.unpacked or fn.node.decl.name != fn.name:
        return True  # a gradient's or an unpacked interface: not the body's own parameters
    body = getattr(fn.node, "body", None)
    stored = None if body is None else stored_arrays(body)
    if stored is None:
        return True
    arrays = {name for name, ptype in fn.params if isinstance(ptype, Array)} | set(fn.globals)
    bases = {name.split("->")[0].split(".")[0] for name in stored}
    if bases - arrays:
        return True
    for node in walk(body):
        if (
            isinstance(node, c_ast.Assignment)
            and isinstance(node.lvalue, c_ast.ID)
            and node.lvalue.name in arrays
        ):
            return True
    return frozenset(bases)


def _check_array(
    fname: str,
    pname: str,
    ptype: Array,
    arg: Any,
    scalars: dict[str, int | float],
    *,
    stored: bool = True,
) -> np.ndarray:
    """`arg` as a NumPy array over its own memory, checked against parameter `pname`: dtype,
    rank and extents, memory the CPU reaches, and writeable where the function stores into it
    (TypeError or ValueError naming it)."""
    original = arg
    if stored and library_of(arg) == "jax":
        raise TypeError(
            f"argument '{pname}' of {fname}() is a JAX array, which is immutable, but {fname}() "
            "may store into it: pass a NumPy array or a torch tensor"
        )
    arg = host_view(arg, function=fname, name=pname, target_hint=": pass CPU memory")
    want = np.dtype(ptype.elem.numpy_dtype)
    if arg.dtype != want:
        raise TypeError(
            f"argument '{pname}' of {fname}() must have dtype {want} ({ptype.elem}), got "
            f"{describe(original)}"
        )
    if stored and not arg.flags.writeable:
        raise ValueError(
            f"argument '{pname}' of {fname}() is read-only ({describe(original)}) but "
            f"{fname}() may store into it: pass a writeable array"
        )
    if ptype.rank == 1 and ptype.dims[0] is None:
        return arg  # a plain pointer: any array of the element type (made contiguous)
    if arg.ndim != ptype.rank:
        raise TypeError(
            f"argument '{pname}' of {fname}() must have {ptype.rank} dimension(s) ({ptype}), got shape {arg.shape}"
        )
    for k, (dim, extent) in enumerate(zip(ptype.dims, arg.shape, strict=True)):
        expected = _eval_dim(dim, scalars)
        if expected is None:
            continue
        if (k == 0 and extent < expected) or (k > 0 and extent != expected):
            raise TypeError(
                f"argument '{pname}' of {fname}() must have shape {ptype} (dimension {k} = {expected}), got {arg.shape}"
            )
    return arg


def _eval_dim(dim: Any, scalars: dict[str, int | float]) -> int | None:
    """A dimension's extent when it is a constant or simple arithmetic of scalar arguments."""
    if dim is None or isinstance(dim, int):
        return dim
    if isinstance(dim, c_ast.ID):
        v = scalars.get(dim.name)
        return int(v) if v is not None else None
    if isinstance(dim, c_ast.Constant) and dim.type.endswith("int"):
        return int(dim.value.rstrip("uUlL"), 0)
    if isinstance(dim, c_ast.BinaryOp) and dim.op in ("+", "-", "*"):
        a, b = _eval_dim(dim.left, scalars), _eval_dim(dim.right, scalars)
        if a is None or b is None:
            return None
        return {"+": a + b, "-": a - b, "*": a * b}[dim.op]
    return None


def _initial_global(g: CGlobal, cmod: CModule) -> np.ndarray:
    t = g.type
    elem = t.elem if isinstance(t, Array) else t
    if isinstance(t, Array) and not all(isinstance(d, int) for d in t.dims):
        raise CompileError(
            f"global '{g.name}' has no size polyflow can allocate",
            file=cmod.filename,
            line=g.node.coord.line,
        )
    shape = tuple(d for d in t.dims if isinstance(d, int)) if isinstance(t, Array) else ()
    array = np.zeros(shape, dtype=elem.numpy_dtype)
    init = g.node.init
    if init is None:
        return array
    scope: FileScope = cmod.scope
    try:
        if isinstance(init, c_ast.InitList):
            flat = array.reshape(-1)
            for pos, expr in flatten_initializer(init, list(shape)).items():
                flat[pos] = _const_value(expr, scope, elem)
        else:
            array[()] = _const_value(init, scope, elem)
    except Unsupported as exc:
        raise _error_at(exc, cmod.filename, f"initializer of global '{g.name}'") from None
    return array


def _const_value(expr: c_ast.Node, scope: FileScope, elem: Scalar) -> int | float:
    if elem.is_float:
        sign = 1.0
        while isinstance(expr, c_ast.UnaryOp) and expr.op in ("-", "+"):
            sign = -sign if expr.op == "-" else sign
            expr = expr.expr
        if isinstance(expr, c_ast.Constant) and expr.type in ("float", "double"):
            text = expr.value.rstrip("fFlL")
            return sign * (float.fromhex(text) if text.lower().startswith("0x") else float(text))
        return sign * scope.const_int(expr)
    return scope.const_int(expr)


def compile_c(
    source: str | bytes | os.PathLike[str] | None = None,
    entry: str | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
    options: Options | Mapping[str, Any] | None = None,
    target: Literal["cpu", "cuda"] | None = None,
    grad: str | Sequence[str] | bool | None = None,
) -> Any:
    """JIT-compile function `entry` of C `source` (text: `str`, or UTF-8 `bytes`) or of the C
    file at `path`; returns a callable. `entry` may be left out when the source defines one
    function polyflow compiles. `options`: an `Options`, or a dict of its fields. `target`
    ("cpu" or "cuda", overriding the options'): "cuda" returns a `CudaFunction` (GPU kernels,
    called on CuPy arrays or torch CUDA tensors; `emulate` runs them on the CPU), compiled at
    -O3 unless the options say otherwise (the mapping needs the polyhedral stage).

    `grad` also compiles reverse-mode gradients: `True` for `entry`'s, or specs `"f"` /
    `"f:a,b"` (the active parameters; default: every float parameter). The callable's `grad`
    is `entry`'s gradient (`gradients` has each by function name), called as C calls
    `f_grad`: each active parameter followed by its shadow array (a float scalar's shadow is a
    1-element array), the seed of a float result last; shadows of inputs are added to."""
    given = dict(options) if isinstance(options, Mapping) else None
    options = Options.of(options)
    if target is not None:
        options = options.model_copy(update={"target": target})
    if options.target == "cuda":
        explicit_level = given is not None and "opt_level" in given
        options = options.model_copy(
            update={
                "gpu_device_arrays": True,
                "gpu_emulate": False,
                **({} if explicit_level or options.opt_level == 3 else {"opt_level": 3}),
            }
        )
    text, filename, source_dir = given_c_source(source, path)
    tuned, tuning = with_tuning(options, lambda: c_tuning_key_of(text, options))
    options = tuned
    if grad is True and entry is None:  # the entry's gradient: which function is it?
        entry = _entry_of(c_module(text, filename, options, source_dir), None, filename)
    if grad is not None and grad is not False:
        specs = [grad] if isinstance(grad, str) else [entry] if grad is True else list(grad)
        options = options.model_copy(update={"grad": (*(options.grad or ()), *specs)})
    cmod = c_module(text, filename, options, source_dir)
    entry = _entry_of(cmod, entry, filename)
    check_gradients(cmod.gradients, options, filename)
    if options.target == "cuda":
        return _cuda_function(cmod, entry, options)
    with cmod.context:
        engine, result = jit_module(cmod.module, options)
    if tuning is not None:
        result.report.add(Remark("build", "tuned", "note", tuning_note(tuning)))
    compiled = CompiledFunction(
        engine,
        cmod.functions[entry],
        cmod,
        result.stages,
        result.report,
        result.cached,
    )
    compiled.origin = (text, filename, source_dir, options)
    for name, interface in cmod.gradients.items():
        gradient = CompiledFunction(
            engine, interface, cmod, result.stages, result.report, result.cached
        )
        if name == entry:
            gradient.globals = compiled.globals  # one file scope for f and f_grad
            compiled.grad = gradient
        compiled.gradients[name] = gradient
    return compiled


def _cuda_function(cmod: CModule, entry: str, options: Options) -> Any:
    from polyflow.drivers.cuda_function import CudaFunction

    fn = cmod.functions[entry]
    if fn.globals:
        raise CompileError(
            f"'{entry}' uses file-scope variables ({', '.join(fn.globals)}), which the GPU "
            "build does not place in GPU memory yet: pass them as arguments",
            file=cmod.filename,
        )
    with cmod.context:
        compiled = compile_module(cmod.module, options, produce="ptx")
    function = CudaFunction(compiled, fn)
    # gradients (`grad=`) are functions of the same GPU program
    function.gradients = {
        name: CudaFunction(compiled, interface) for name, interface in cmod.gradients.items()
    }
    function.grad = function.gradients.get(entry)
    return function


def _entry_of(cmod: CModule, entry: str | None, filename: str) -> str:
    """The function to compile: `entry`, or the only one the source defines; CompileError
    naming why it cannot be compiled, and which functions can."""
    known = ", ".join(sorted(cmod.functions)) or "none"
    if entry is None:
        defined = [*cmod.functions, *cmod.skipped]
        if len(cmod.functions) == 1 and len(defined) == 1:
            return next(iter(cmod.functions))
        if len(defined) == 1:
            only = defined[0]
            raise _error_at(cmod.skipped[only], filename, f"cannot compile '{only}'")
        if not defined:
            raise CompileError("the source defines no function", file=filename)
        raise CompileError(
            f"the source defines {len(defined)} functions: say which one with entry= "
            f"(compilable: {known})",
            file=filename,
        )
    if entry in cmod.skipped:
        raise _error_at(cmod.skipped[entry], filename, f"cannot compile '{entry}'")
    if entry not in cmod.functions:
        raise CompileError(
            f"no function named '{entry}' to compile (compilable functions: {known})", file=filename
        )
    return entry


def jit_module(
    module: Any, options: Options, cache: CompileCache | Literal["default"] | None = "default"
) -> tuple[ExecutionEngine, Compiled]:
    """`module` (frontend MLIR) through the one compile entry (`compile_module`, through
    `cache`) and into an execution engine, keeping the IR of every MLIR stage; run inside the
    module's context. On a cache hit only the JIT compiles."""
    compiled = compile_module(module, options, produce="jit", cache=cache)
    return _engine(compiled.module, options), compiled


def _engine(lowered: Any, options: Options) -> ExecutionEngine:
    return ExecutionEngine(
        lowered,
        opt_level=0 if options.opt_level == 0 else 3,
        shared_libs=runtime_libraries(lowered),
    )


def runtime_libraries(module: Any) -> list[str]:
    """The shared libraries the JIT-compiled code calls into: libiomp5 for OpenMP loops."""
    directory = openmp_library_dir()
    if directory is None or not has_parallel_loops(module):
        return []
    return [str(directory / "libiomp5.so")]
