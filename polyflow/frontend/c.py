"""C → MLIR (func, scf, memref, arith, math): every function polyflow can compile, with C semantics.

Each compiled C function `f` becomes `func.func private @f` over memrefs (its C parameters, then
the file-scope variables it reaches, in `CFunction.globals` order) and a C-ABI entry
`@__polyflow_f` taking plain pointers and scalars, which builds the memref descriptors and calls
`@f`. Functions using constructs outside the supported subset are not emitted; `CModule.skipped`
says why, so the driver can leave them to the system C compiler.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import func
from pycparser import c_ast

from polyflow.errors import CompileError, SourcePosition
from polyflow.frontend import c_analysis as ana
from polyflow.frontend.c_abi import emit_c_abi_entry
from polyflow.frontend.c_builtins import is_math_function
from polyflow.frontend.c_constant_arguments import constant_arguments
from polyflow.frontend.c_gradient import NotDifferentiable as GradientRefused
from polyflow.frontend.c_gradient import declare_gradient, gradient_interface
from polyflow.frontend.c_parse import ParsedC, is_stand_in_header
from polyflow.frontend.c_pragmas import pragma_label, pragma_verdict, pragmas_in
from polyflow.frontend.c_scope import (
    CFunction,
    CGlobal,
    FileScope,
    mlir_type,
)
from polyflow.frontend.c_statements import FunctionEmitter
from polyflow.frontend.c_types import (
    Array,
    Unsupported,
    Void,
)
from polyflow.ir.contexts import new_context
from polyflow.ir.functions import argument_attributes, set_argument_attributes
from polyflow.ir.names import BOUND_VALUE_ATTR, TRAMPOLINE_PREFIX
from polyflow.options import grad_spec


@dataclass
class CModule:
    """The MLIR module of the compilable functions, and the verdict on every other one."""

    module: ir.Module
    filename: str
    functions: dict[str, CFunction]
    skipped: dict[str, Unsupported]
    globals: dict[str, CGlobal]
    scope: FileScope
    trampolines: dict[str, CFunction] = field(default_factory=dict)
    # what the C compiler warned about that changes what the user asked for (ParsedC.warnings)
    warnings: list[tuple[SourcePosition, str]] = field(default_factory=list)
    # the loop hints (`#pragma GCC ivdep`, `scop`) of compiled functions, read and left:
    # (function, position, message)
    notes: list[tuple[str, SourcePosition, str]] = field(default_factory=list)
    # the C interface of each gradient asked for (`f_grad`, c_gradient.py), by function
    gradients: dict[str, CFunction] = field(default_factory=dict)
    # the parameters marked bound to a constant (bind_constant_arguments), by function: name ->
    # value
    bound_arguments: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def context(self) -> ir.Context:
        return self.module.context

    def why_skipped(self, name: str) -> tuple[SourcePosition | None, str]:
        """Where skipped function `name` is defined, and why it is not compiled: the reason
        with the line and column of the construct that blocks it when that is elsewhere (a
        `switch` at 12:5, a struct parameter's type at its typedef)."""
        exc = self.skipped[name]
        fdef = self.scope.defs.get(name)
        coord = fdef.decl.coord if fdef is not None else None
        where = SourcePosition(coord.file, coord.line, coord.column or 0) if coord else None
        blocker = getattr(exc.node, "coord", None)
        reason = exc.reason
        if blocker is not None and (where is None or blocker.line != where.line):
            reason += f" (at {blocker.line}:{blocker.column or 0})"
        return where or (
            SourcePosition(blocker.file, blocker.line, blocker.column or 0) if blocker else None
        ), reason


def collect_globals(scope: FileScope, functions: dict[str, CFunction]) -> None:
    """Set each function's `globals`: file-scope variables it or its callees reference."""
    direct = {
        name: sorted(
            (ana.referenced_names(f.node.body) - _shadowing_parameters(f)) & scope.globals.keys()
        )
        for name, f in functions.items()
    }
    calls = {
        name: ana.called_names(f.node.body) & functions.keys() for name, f in functions.items()
    }
    for name, f in functions.items():
        seen, stack, reach = {name}, [name], set(direct[name])
        while stack:
            for c in calls[stack.pop()]:
                if c not in seen:
                    seen.add(c)
                    stack.append(c)
                    reach |= set(direct[c])
        f.globals = sorted(reach)


def _shadowing_parameters(f: CFunction) -> set[str]:
    """The parameters of `f`: in its body their names are the parameters, not file-scope
    variables of the same name (unless a block of the body declares the name `extern`)."""
    externs = {
        n.name
        for n in ana.walk(f.node.body)
        if isinstance(n, c_ast.Decl) and "extern" in (n.storage or [])
    }
    return {name for name, _ in f.params} - externs


def emit_c_module(
    parsed: ParsedC,
    *,
    only: tuple[str, ...] | None = None,
    external_calls: bool = False,
    grad: tuple[str, ...] = (),
    bind_constant_arguments: bool = False,
) -> CModule:
    """Emit every function of the file polyflow can compile (all but `main`, or just `only`).

    With `external_calls`, compiled code may call the file's other functions through C-ABI
    trampolines (`CModule.trampolines`, for the driver to define); without it, a function that
    calls one that is not compiled is not compiled either. Each function of `grad` (specs
    `f` or `f:a,b`, Options.grad) also gets its gradient declared (c_gradient.py); one that
    cannot is a CompileError at its definition (one the unit does not define is left to the
    unit that does: the driver checks that some unit did). With `bind_constant_arguments`,
    the integer parameters every call of the unit passes as one constant are marked with it
    (c_constant_arguments.py; not those of a function differentiated: its gradient's callers
    pass their own).
    """
    scope = FileScope(parsed)
    skipped: dict[str, Unsupported] = {}
    functions: dict[str, CFunction] = {}
    helpers = _header_helpers(scope, parsed.filename, only)
    for name, fdef in scope.defs.items():
        if name in helpers:
            try:
                functions[name] = scope.interface(fdef)
                functions[name].helper = True
            except Unsupported as exc:
                skipped[name] = exc
            continue
        if not defined_in_unit(fdef.decl.coord.file, parsed.filename) or name == "main":
            continue
        if only is not None and name not in only:
            continue
        try:
            functions[name] = scope.interface(fdef)
        except Unsupported as exc:
            skipped[name] = exc
    pragma_notes = _read_pragmas(parsed, functions, skipped)
    collect_globals(scope, functions)
    for f in functions.values():
        names = ana.referenced_names(f.node.body) - _shadowing_parameters(f)
        bad = [g for g in sorted(names) if g in scope.bad_globals]
        if bad and f.name not in skipped:
            g = bad[0]
            skipped[f.name] = Unsupported(
                f"uses global '{g}': {scope.bad_globals[g].reason}", f.node.decl
            )
    ctx = new_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        emitted: dict[str, _Emitted] = {}
        # Functions that fail while being emitted are handled below, by re-emitting their callers.
        external = _external(scope, functions, skipped, external_calls)
        for name, f in functions.items():
            if name not in skipped:
                _emit_one(module, scope, functions, f, external, emitted, skipped)
                if name in skipped and external is not None and not f.unpacked:
                    external[name] = f  # later callers reach it through its trampoline
        # Callers of functions left to the C compiler: call them through trampolines, or give up.
        changed = True
        while changed:
            changed = False
            for name in list(emitted):
                bad = sorted(functions[name].callees & skipped.keys())
                if not bad:
                    continue
                emitted.pop(name).erase()
                functions[name].callees = set()
                changed = True
                if not external_calls:
                    skipped[name] = Unsupported(
                        f"calls '{bad[0]}', which is left to the C compiler",
                        functions[name].node.decl,
                    )
                    continue
                _emit_one(
                    module,
                    scope,
                    functions,
                    functions[name],
                    _external(scope, functions, skipped, True),
                    emitted,
                    skipped,
                )
        bound_arguments: dict[str, dict[str, int]] = {}
        if bind_constant_arguments:
            differentiated = {grad_spec(spec)[0] for spec in grad}
            for name, bound in constant_arguments(parsed.ast, scope, functions).items():
                if name in emitted and name not in differentiated:
                    _mark_bound_arguments(emitted[name].ops[0], bound)
                    params = functions[name].params
                    bound_arguments[name] = {params[k][0]: v for k, v in sorted(bound.items())}
        trampolines: dict[str, CFunction] = {}
        for e in emitted.values():
            trampolines.update(e.external)
        for callee in trampolines.values():
            _declare_trampoline(module, callee)
        compiled = {n: functions[n] for n in emitted if not functions[n].helper}
        gradients = {
            spec_name: _declare_gradient(
                module, scope, functions, emitted, skipped, spec_name, active
            )
            for spec_name, active in map(grad_spec, grad)
            if spec_name in scope.defs  # another unit's function: that unit declares it
        }
        if not module.operation.verify():
            raise RuntimeError("polyflow produced invalid MLIR (a bug in the C frontend)")
    return CModule(
        module,
        parsed.filename,
        compiled,
        {n: exc for n, exc in skipped.items() if n not in helpers},
        scope.globals,
        scope,
        trampolines,
        warnings=list(parsed.warnings),
        notes=[note for note in pragma_notes if note[0] in compiled],
        gradients=gradients,
        bound_arguments={n: b for n, b in bound_arguments.items() if n in compiled},
    )


def _declare_gradient(
    module: ir.Module,
    scope: FileScope,
    functions: dict[str, CFunction],
    emitted: dict[str, _Emitted],
    skipped: dict[str, Unsupported],
    name: str,
    active: tuple[str, ...] | None,
) -> CFunction:
    """Declare the gradient of `name` (c_gradient.py); its C interface."""
    fdef = scope.defs.get(name)
    where = fdef.decl.coord if fdef is not None else None
    position = (
        SourcePosition(where.file, where.line, where.column or 0) if where is not None else None
    )
    if name not in emitted or functions[name].helper:
        if name in skipped:
            reason = f"it is left to the C compiler: {skipped[name].reason}"
        elif fdef is None:
            reason = "no such function is defined in this file"
        else:
            reason = "it is not compiled"
        raise CompileError(
            f"cannot differentiate '{name}': {reason}",
            file=position.file if position else scope.filename,
            line=position.line if position else 0,
            column=position.column if position else 0,
        )
    fn = functions[name]
    try:
        interface = gradient_interface(fn, active)
    except GradientRefused as exc:
        raise CompileError(
            f"cannot differentiate '{name}': {exc}",
            file=position.file if position else scope.filename,
            line=position.line if position else 0,
            column=position.column if position else 0,
        ) from None
    impl = next(op for op in emitted[name].ops if op.name.value == name)
    declare_gradient(module, impl, interface, scope)
    return interface.c


def _header_helpers(scope: FileScope, filename: str, only: tuple[str, ...] | None) -> set[str]:
    """The functions that headers define (inline accessors) and the file's own functions call,
    directly or through one another: compiled as private helpers of those functions."""
    own = [
        fdef
        for name, fdef in scope.defs.items()
        if defined_in_unit(fdef.decl.coord.file, filename)
        and name != "main"
        and (only is None or name in only)
    ]
    helpers: set[str] = set()
    work = [name for fdef in own for name in ana.called_names(fdef.body)]
    while work:
        name = work.pop()
        fdef = scope.defs.get(name)
        if name in helpers or fdef is None or defined_in_unit(fdef.decl.coord.file, filename):
            continue
        if is_stand_in_header(fdef.decl.coord.file):
            continue
        helpers.add(name)
        work += ana.called_names(fdef.body)
    return helpers


def defined_in_unit(file: str, filename: str) -> bool:
    """Whether a definition in `file` belongs to unit `filename`: the file itself, or a `.c`
    file it includes (template instances, as GSL's `FUNCTION(gsl_vector, add)`), not a
    header's inline functions (every unit that includes the header has them)."""
    return file == filename or (file.endswith(".c") and not is_stand_in_header(file))


def _read_pragmas(
    parsed: ParsedC, functions: dict[str, CFunction], skipped: dict[str, Unsupported]
) -> list[tuple[str, SourcePosition, str]]:
    """Leave to the C compiler each function whose pragmas ask for what only it does (all of
    them for such a pragma at file scope: `#pragma pack`, `omp threadprivate`, ...); the notes
    (function, position, text) on the loop hints polyflow reads and leaves."""
    file_scope = [
        p for p in parsed.ast.ext
        if isinstance(p, c_ast.Pragma) and pragma_verdict(p.string).verdict == "cc"
    ]  # fmt: skip
    notes: list[tuple[str, SourcePosition, str]] = []
    for name, f in functions.items():
        if name in skipped:
            continue
        if file_scope:
            first = file_scope[0]
            skipped[name] = Unsupported(
                f"the file's '{pragma_label(first)}' at line {first.coord.line}: "
                f"{pragma_verdict(first.string).reason}",
                f.node.decl,
            )
            continue
        for pragma in pragmas_in(f.node.body):
            verdict = pragma_verdict(pragma.string)
            if verdict.verdict == "cc":
                skipped[name] = Unsupported(
                    f"'{pragma_label(pragma)}': {verdict.reason}", pragma
                )
                break
            if verdict.verdict == "note":
                at = SourcePosition(
                    pragma.coord.file, pragma.coord.line, pragma.coord.column or 0
                )
                notes.append(
                    (
                        name,
                        at,
                        f"'{pragma_label(pragma)}' at {at.line}:{at.column} is read and left: "
                        f"{verdict.reason}",
                    )
                )
    return notes


@dataclass
class _Emitted:
    ops: list[func.FuncOp]
    external: dict[str, CFunction]

    def erase(self) -> None:
        for op in self.ops:
            op.operation.erase()


def _external(
    scope: FileScope,
    functions: dict[str, CFunction],
    skipped: dict[str, Unsupported],
    enabled: bool,
) -> dict[str, CFunction] | None:
    """The file's functions that compiled code must reach through the C compiler's build."""
    if not enabled:
        return None
    out: dict[str, CFunction] = {}
    for name, fdef in scope.defs.items():
        if name in functions and (name not in skipped or functions[name].unpacked):
            continue
        try:
            out[name] = functions[name] if name in functions else scope.interface(fdef)
        except Unsupported:
            continue
    # functions of other units, declared by the file or the project's headers; math.h's stay
    # math ops (c_builtins)
    for name in scope.prototypes.keys() - scope.defs.keys():
        if is_math_function(name):
            continue
        try:
            out[name] = scope.prototype_interface(name)
        except Unsupported:
            continue
    return out


def _emit_one(
    module: ir.Module,
    scope: FileScope,
    functions: dict[str, CFunction],
    f: CFunction,
    external: dict[str, CFunction] | None,
    emitted: dict[str, _Emitted],
    skipped: dict[str, Unsupported],
) -> None:
    emitter = FunctionEmitter(scope, functions, f, external=external)
    impl: func.FuncOp | None = None
    try:
        impl = emitter.emit(module)  # on failure, emit() has removed what it built
        impl.operation.verify()
        entry = None if f.helper else emit_c_abi_entry(module, f, scope)
    except Exception as exc:  # a bug of ours must cost speed, never correctness
        if impl is not None:
            impl.operation.erase()
        skipped[f.name] = (
            exc
            if isinstance(exc, Unsupported)
            else Unsupported(
                f"internal error in polyflow ({type(exc).__name__}: {exc})", f.node.decl
            )
        )
        return
    emitted[f.name] = _Emitted(
        [impl] if entry is None else [impl, entry], emitter.called_externally
    )


def _mark_bound_arguments(fn: func.FuncOp, bound: dict[int, int]) -> None:
    """Give argument `k` of `fn` the attribute `BOUND_VALUE_ATTR` = `bound[k]`."""
    attrs = argument_attributes(fn.operation)
    arguments = fn.entry_block.arguments
    for k, value in bound.items():
        attrs[k][BOUND_VALUE_ATTR] = ir.IntegerAttr.get(arguments[k].type, value)
    set_argument_attributes(fn.operation, attrs)


def _declare_trampoline(module: ir.Module, callee: CFunction) -> None:
    ptr = ir.Type.parse("!llvm.ptr")
    args = [ptr if isinstance(t, Array) else mlir_type(t) for _, t in callee.params]
    results = [] if isinstance(callee.ret, Void) else [mlir_type(callee.ret)]
    with ir.InsertionPoint(module.body):
        decl = func.FuncOp(TRAMPOLINE_PREFIX + callee.name, (args, results))
        decl.attributes["sym_visibility"] = ir.StringAttr.get("private")


__all__ = ["CFunction", "CGlobal", "CModule", "FileScope", "FunctionEmitter", "emit_c_module"]
