"""`polyflow build`: compile what polyflow can through MLIR, the rest with `cc`, link one program."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mlir import ir
from pycparser import c_ast

from polyflow.drivers.c_splice import (
    BodySpan,
    find_definition,
    find_function_body,
    gradient_header,
    splice,
)
from polyflow.drivers.compile import Compiled, compile_module
from polyflow.drivers.objects import openmp_link_flags
from polyflow.drivers.sources import c_module, check_gradients
from polyflow.errors import CompileError, SourcePosition
from polyflow.frontend.c import CFunction, CModule, defined_in_unit
from polyflow.frontend.c_analysis import is_statement_wrapper, walk
from polyflow.frontend.c_parse import preprocessor_flags
from polyflow.ir.names import CABI_PREFIX
from polyflow.lowering.llvm_ir import compile_llvm_ir_to_object
from polyflow.options import EmitStage, Options
from polyflow.pipeline import stage_text
from polyflow.raising.report import RaiseReport
from polyflow.report import CompileReport, Json, Remark, ReportViews
from polyflow.source_input import read_c_file
from polyflow.storage.cache import CompileCache, default_cache
from polyflow.storage.tuning import c_tuning_key_of, tuning_note, with_tuning
from polyflow.toolchain import openmp_library_dir


@dataclass
class BuildReport(ReportViews):
    """What a build did: which functions went through MLIR, which did not and why; the compile
    report (`report`: what each stage said, with the build's own warnings, the schedule trees
    and the time of each step; `warnings` and `notes` are its text); with
    `raise_report=True`, what raising made of each function (a `RaiseReport`, the table of
    `--report`); `parallel`: whether the program runs OpenMP loops (and links libiomp5)."""

    output: Path
    compiled: list[str] = field(default_factory=list)
    fallbacks: dict[str, str] = field(default_factory=dict)
    report: CompileReport = field(default_factory=CompileReport)
    raising: RaiseReport | None = None
    parallel: bool = False
    parallel_functions: list[str] = field(default_factory=list)  # the C functions that fork
    cached: bool = False  # the compiled functions' object came from the compile cache
    # the functions of the file (not of its headers) with a loop, compiled or not
    loop_functions: list[str] = field(default_factory=list)
    # the functions whose gradients (`f_grad`, --grad) this unit defines
    gradients: list[str] = field(default_factory=list)
    # the tuned options the build used (`polyflow tune`; None: none)
    tuned: dict[str, object] | None = None

    def warn(
        self,
        kind: str,
        message: str,
        position: SourcePosition | None,
        *,
        function: str | None = None,
        **data: Json,
    ) -> None:
        """Add a warning of the build itself (stage `build`) to the report."""
        self.report.add(Remark("build", kind, "warning", message, function, position, data))

    def leave_to_cc(self, name: str, position: SourcePosition | None, reason: str) -> None:
        """Record that `name` is built by the C compiler, and warn with the reason."""
        self.fallbacks[name] = reason
        self.report.add(
            Remark(
                "frontend",
                "left-to-cc",
                "warning",
                f"function '{name}' is left to the C compiler: {reason}",
                name,
                position,
                {"reason": reason},
            )
        )


def functions_with_loops(cmod: CModule) -> list[str]:
    """The functions of `cmod`'s unit (its file and the .c files it includes, not headers)
    whose bodies hold a loop (`do { ... } while (0)`, a macro's statement wrapper, is none)."""
    return sorted(
        name
        for name, fdef in cmod.scope.defs.items()
        if defined_in_unit(fdef.decl.coord.file, cmod.filename)
        and any(_is_loop(n) for n in walk(fdef.body))
    )


def _is_loop(node: c_ast.Node) -> bool:
    loop = isinstance(node, (c_ast.For, c_ast.While, c_ast.DoWhile))
    return loop and not is_statement_wrapper(node)


def _locate_bodies(
    cmod: CModule, text: str, report: BuildReport, preprocessed: Callable[[], str | None]
) -> tuple[dict[str, tuple[CFunction, BodySpan]], str | None]:
    """Find each compiled function's body in the source; without it the C compiler keeps its
    own. Where a body is not in the source as written (a macro names the function, or it is
    defined in an included .c file, as template instances are), they are all found in the
    unit as the preprocessor writes it (`preprocessed()`), which is then returned: the spliced
    unit is that text."""
    bodies: dict[str, tuple[CFunction, BodySpan]] = {}
    unplaced: list[str] = []
    for name, fn in cmod.functions.items():
        line = fn.node.decl.coord.line
        late = [g for g in fn.globals if cmod.globals[g].first_line >= line]
        old_style = bool(fn.node.param_decls)
        in_file = fn.node.decl.coord.file == cmod.filename
        span = find_function_body(text, name, line, old_style=old_style) if in_file else None
        if late:
            reason = f"it uses '{late[0]}', which is declared after it"
            report.leave_to_cc(name, SourcePosition(cmod.filename, line, 0), reason)
        elif span is None:
            unplaced.append(name)
        else:
            bodies[name] = (fn, span)
    if not unplaced:
        return bodies, None
    unit = preprocessed()
    if unit is not None:
        placed: dict[str, tuple[CFunction, BodySpan]] = {}
        for name in [*bodies, *unplaced]:
            fn = cmod.functions[name]
            found = find_definition(unit, name, old_style=bool(fn.node.param_decls))
            if found is not None:
                placed[name] = (fn, found)
        if len(placed) == len(bodies) + len(unplaced):
            return placed, unit
    for name in unplaced:
        coord = cmod.functions[name].node.decl.coord
        report.leave_to_cc(
            name,
            SourcePosition(coord.file, coord.line, 0),
            "its body could not be located in the source (is it produced by a macro?)",
        )
    return bodies, None


def _preprocessed_unit(filename: str, options: Options, source_dir: Path | None) -> str | None:
    """The unit as cc's preprocessor writes it with the build's flags (line markers kept), or
    None where there is no file to read or the preprocessor fails."""
    if not Path(filename).is_file():
        return None
    done = subprocess.run(
        [options.cc, "-E", "-std=gnu11", *preprocessor_flags(options, source_dir),
         *fp_flags(options), *options.cflags, filename],
        capture_output=True,
        text=True,
    )  # fmt: skip
    return done.stdout if done.returncode == 0 else None


def _run_cc(cmd: list[str], what: str, filename: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompileError(f"{what} failed:\n{proc.stderr.strip()}", file=filename)


def build_program(
    source: str | Path,
    output: str | Path,
    *,
    options: Options | None = None,
    emit: EmitStage = "exe",
    raise_report: bool = False,
    cache: CompileCache | Literal["default"] | None = "default",
    link: bool = True,
    link_flags: Sequence[str] = (),
) -> BuildReport:
    """Build `source` into `output` (an executable, or the stage named by `emit`); with
    `raise_report`, also report what raising made of each function (`BuildReport.raising`).
    `emit="exe"` with `link=False` writes the unit's ordinary object instead (`cc -c`): every
    function under its own name, the compiled ones forwarding to their MLIR code, joined into
    one relocatable object; `link_flags` go to the link of an executable (`-L`, `-l`, `-Wl,`).
    The object of the compiled functions (`exe`, `obj`) comes from `cache` when it holds one for
    the same frontend MLIR (with locations), options and compiler (default: the shared cache,
    off with `POLYFLOW_CACHE=off`; None: no cache); `--report` builds always compile.
    MLIR stages are written with their ops' source locations with `options.debug_locations`."""
    options = options or Options()
    if cache == "default":
        cache = default_cache()
    if raise_report:
        cache = None  # the raising report is read off the IR as it is compiled
    output = Path(output)
    report = BuildReport(output=output)
    start = time.perf_counter()
    text, filename, source_dir = read_c_file(source)
    tuned, tuning = with_tuning(options, lambda: c_tuning_key_of(text, options))
    options = tuned
    if tuning is not None:
        report.tuned = tuning.choices
        report.report.add(Remark("build", "tuned", "note", tuning_note(tuning)))
    cmod = c_module(
        text,
        filename,
        options,
        source_dir,
        only=options.functions,
        external_calls=emit in ("exe", "asm"),
        elide_initializers=True,
        bind_constant_arguments=True,
    )
    report.timings["frontend"] = time.perf_counter() - start
    report.gradients = sorted(cmod.gradients)
    if link or emit != "exe":  # a program of several units: the driver checks them all
        check_gradients(cmod.gradients, options, filename)
    report.loop_functions = functions_with_loops(cmod)
    for at, message in cmod.warnings:
        report.warn("macro-redefined", message, at)
    for name, at, message in cmod.notes:
        report.report.add(Remark("frontend", "pragma", "note", message, name, at))
    for name, values in cmod.bound_arguments.items():
        coord = cmod.scope.defs[name].decl.coord
        listed = ", ".join(f"{param} = {value}" for param, value in values.items())
        report.report.add(
            Remark(
                "frontend",
                "constant-argument",
                "remark",
                f"every call passes {listed}: compiled with that constant (scheduled for any)"
                if len(values) == 1
                else f"every call passes {listed}: compiled with those constants (scheduled "
                "for any)",
                name,
                SourcePosition(coord.file, coord.line, coord.column or 0),
                {"arguments": dict(values)},
            )
        )
    for name in cmod.skipped:
        position, reason = cmod.why_skipped(name)
        report.leave_to_cc(name, position or SourcePosition(filename, 0, 0), reason)
    if options.functions is not None:
        for name in options.functions:
            if name not in cmod.functions and name not in cmod.skipped:
                report.warn(
                    "unknown-function",
                    f"--functions names '{name}', which is not defined in this file",
                    SourcePosition(filename, 0, 0),
                    function=name,
                )
    whole_unit = emit in ("exe", "asm")  # the compiled functions and cc's, together
    unit: str | None = None  # the preprocessed unit, where the splice needs it

    def preprocessed() -> str | None:
        return _preprocessed_unit(filename, options, source_dir)

    bodies, unit = _locate_bodies(cmod, text, report, preprocessed) if whole_unit else ({}, None)
    report.compiled = sorted(bodies) if whole_unit else sorted(cmod.functions)

    after_stage = _reporter(report, options) if raise_report else None
    if emit == "header":
        if not cmod.gradients:
            raise CompileError(
                "--emit=header writes the header of the gradients: name the functions to "
                "differentiate with --grad NAME",
                file=filename,
            )
        output.write_text(gradient_header(list(cmod.gradients.values()), filename))
        return report
    with cmod.context:
        if emit == "mlir":
            output.write_text(stage_text(cmod.module, options))
            if raise_report:  # the output is written: raising may change the module now
                _record(
                    report,
                    compile_module(
                        cmod.module,
                        options,
                        produce="ir",
                        stop_after="affine",
                        after_stage=after_stage,
                    ),
                )
            return report
        if emit == "obj":
            built = _kernel_object(cmod, options, cache, report, after_stage)
            output.write_bytes(built.object)
            if built.openmp:
                report.parallel = True
                report.warn(
                    "openmp-object",
                    "the object file has OpenMP loops: link it with "
                    f"-L{openmp_library_dir()} -liomp5",
                    SourcePosition(filename, 0, 0),
                )
            return report
        if emit == "ptx":
            if options.target != "cuda" or options.gpu_emulate:
                raise CompileError("--emit=ptx needs --target=cuda (without --gpu-emulate)", file=filename)
            result = compile_module(cmod.module, options, produce="ptx", cache=cache)
            _record(report, result)
            output.write_text(result.stages["ptx"])
            return report
        if not whole_unit:
            if emit == "gpu" and options.target != "cuda":
                raise CompileError("--emit=gpu needs --target=cuda", file=filename)
            if emit == "grad" and not options.grad:
                raise CompileError(
                    "--emit=grad shows a gradient: name the function to differentiate with "
                    "--grad NAME",
                    file=filename,
                )
            result = compile_module(
                cmod.module,
                options,
                produce="ir",
                stop_after=_STOP_AFTER.get(emit, "llvm"),
                after_stage=after_stage,
            )
            _record(report, result)
            _write_stage(result, emit, output, options)
            return report
    gradients = list(cmod.gradients.values())
    with tempfile.TemporaryDirectory(prefix="polyflow-build-") as tmp:
        rest = Path(tmp) / "rest.o"
        spliced = Path(tmp) / Path(filename).name
        if unit is not None:  # cc compiles the preprocessed unit (a .i file) as it is
            spliced = spliced.with_suffix(".i")
            spliced.write_text(
                splice(unit, filename, bodies, cmod.globals, cmod.trampolines, gradients)
            )
        else:
            spliced.write_text(
                splice(text, filename, bodies, cmod.globals, cmod.trampolines, gradients)
                if bodies or gradients
                else text
            )
        if emit == "asm":
            _write_assembly(cmod, text, spliced, output, bodies, options, source_dir, report)
            report.timings["cc+link"] = time.perf_counter() - start
            return report
        # cc compiles the rest of the file while polyflow compiles its functions
        rest_job = _RestCompile(spliced, rest, options, source_dir, filename)
        kernels: Compiled | None = None
        try:
            as_written = spliced.with_suffix(Path(filename).suffix or ".c")
            try:
                with cmod.context:
                    kernels = _kernel_object(cmod, options, cache, report, after_stage)
            except Exception as exc:  # MLIRError or a failing LLVM tool: ours, not the user's
                _give_up_on_mlir(report, filename, exc)
                if bodies:  # the file as it was, all of it through cc
                    rest_job.cancel()
                    bodies = {}
                    as_written.write_text(text)
                    rest_job = _RestCompile(as_written, rest, options, source_dir, filename)
            start = time.perf_counter()
            objects: list[str] = []
            if bodies and kernels is not None:
                (Path(tmp) / "kernels.o").write_bytes(kernels.object)
                objects.append(str(Path(tmp) / "kernels.o"))
            try:
                rest_job.wait()
            except CompileError as exc:
                if not bodies:
                    raise  # the file as written: cc's error is the user's
                # the spliced file is polyflow's: the file as it was, all of it through cc
                _give_up_on_mlir(report, filename, exc)
                objects = []
                as_written.write_text(text)
                rest_job = _RestCompile(as_written, rest, options, source_dir, filename)
                rest_job.wait()
        finally:
            rest_job.cancel()  # only where something above raised
        if objects and kernels is not None and kernels.openmp:
            report.parallel = True
            report.parallel_functions = kernels.parallel_functions
        if objects and kernels is not None and kernels.cuda:  # its mgpu* are weak: one kept
            objects.append(str(_cuda_runtime_object(Path(tmp), options, filename)))
        if not link:  # one relocatable object, as cc -c writes it
            _run_cc([options.cc, "-r", "-o", str(output), str(rest), *objects], "joining", filename)
            # polyflow's entries and trampolines are the unit's own: two units with a static
            # function of the same name must not clash at the link
            _run_cc(
                ["objcopy", "--wildcard", f"--localize-symbol={CABI_PREFIX}*", str(output)],
                "localizing polyflow's symbols in",
                filename,
            )
            report.timings["cc+link"] = time.perf_counter() - start
            return report
        runtime = openmp_link_flags(filename) if report.parallel else []
        if objects and kernels is not None and kernels.cuda:
            runtime.append("-ldl")  # dlopen, outside libc before glibc 2.34
        _run_cc(
            [options.cc, "-o", str(output), str(rest), *objects, *link_flags, "-lm", *runtime],
            "linking",
            filename,
        )
    report.timings["cc+link"] = time.perf_counter() - start
    return report


def _cuda_runtime_object(directory: Path, options: Options, filename: str) -> Path:
    """The CUDA runtime (drivers/cuda_runtime.c: the `mgpu*` calls of the host code, on the
    CUDA driver opened at start) compiled by cc into `directory`."""
    source = Path(__file__).with_name("cuda_runtime.c")
    output = directory / "polyflow_cuda_runtime.o"
    _run_cc(
        [options.cc, "-c", "-O2", "-fPIC", "-o", str(output), str(source)],
        "compiling the CUDA runtime for",
        filename,
    )
    return output


def _write_assembly(
    cmod: CModule,
    text: str,
    spliced: Path,
    output: Path,
    bodies: dict[str, tuple[CFunction, BodySpan]],
    options: Options,
    source_dir: Path | None,
    report: BuildReport,
) -> None:
    """`-S`: the assembly of the whole unit, cc's for the functions left to it followed by
    llc's for the compiled ones, each side's local labels kept apart. With -g only cc's part has
    debug information: two compilers' DWARF sections cannot be concatenated as text (use -c
    for line tables of the compiled functions)."""
    filename = cmod.filename
    rest = spliced.with_suffix(".s")
    assembly = ""
    if bodies:
        try:
            kernel_options = options.model_copy(update={"debug_info": False})
            with cmod.context:
                result = compile_module(
                    cmod.module, kernel_options, produce="ir", stop_after="llvm"
                )
            _record(report, result)
            kernels = compile_llvm_ir_to_object(
                result.llvm_ir or "", spliced.with_name("kernels.s"), kernel_options, assembly=True
            )
            assembly = separate_local_labels(kernels.read_text())
        except Exception as exc:  # ours, not the user's: cc compiles the file as it was
            _give_up_on_mlir(report, filename, exc)
            spliced.write_text(text)
    _run_cc([*_rest_command(spliced, rest, options, source_dir, filename), "-S"], "compiling", filename)
    output.write_text(_local_entries(rest.read_text() + assembly))


def separate_local_labels(assembly: str) -> str:
    """llc's assembly with its local labels (`.LBB0_1`, `.LCPI0_0`, `.Lfunc_end0`) renamed
    apart from gcc's (`.L2`, `.LC0`), so that the two can be assembled as one file."""
    return re.sub(r"(?<![\w.$])\.L(?=[\w$])", ".Lpolyflow_", assembly)


def _local_entries(assembly: str) -> str:
    """`assembly` with polyflow's entries and trampolines not exported (see the object path)."""
    return re.sub(rf"^\s*\.globl\s+{CABI_PREFIX}\w*[^\n]*\n", "", assembly, flags=re.M)


# --emit=STAGE → the pipeline stage to stop after ('schedule' prints what 'affine-opt' recorded).
_STOP_AFTER = {
    "affine": "affine",
    "grad": "grad",
    "affine-opt": "affine-opt",
    "schedule": "affine-opt",
    "gpu": "gpu",
    "llvm-dialect": "llvm-dialect",
}


def _kernel_object(
    cmod: CModule,
    options: Options,
    cache: CompileCache | None,
    report: BuildReport,
    after_stage: Callable[[str, ir.Module], None] | None,
) -> Compiled:
    """The object of `cmod`'s functions (`compile_module`), what the compile said recorded into
    `report`. Runs in the module's context."""
    compiled = compile_module(
        cmod.module, options, produce="object", cache=cache, after_stage=after_stage
    )
    _record(report, compiled)
    report.cached = compiled.cached
    return compiled


def _record(report: BuildReport, result: Compiled) -> None:
    report.report.remarks += result.report.remarks
    report.report.schedules.update(result.report.schedules)
    report.report.timings.update(result.report.timings)
    if report.raising is not None and "affine" in result.timings:
        report.raising = dataclasses.replace(report.raising, seconds=result.timings["affine"])


def _reporter(report: BuildReport, options: Options) -> Callable[[str, ir.Module], None]:
    """An `after_stage` hook that reads the raising report off the IR after the 'affine' stage."""

    def after_stage(name: str, module: ir.Module) -> None:
        if name == "affine":
            report.raising = RaiseReport.from_module(
                module, enabled=options.raising_enabled
            )

    return after_stage


def _write_stage(
    result: Compiled, emit: EmitStage, output: Path, options: Options
) -> None:
    if emit in ("affine", "grad", "affine-opt", "gpu", "llvm-dialect"):
        assert result.module is not None
        output.write_text(stage_text(result.module, options))
    elif emit == "schedule":
        output.write_text(format_schedules(result.schedules, options))
    elif emit == "llvm":
        output.write_text(result.llvm_ir or "")


def format_schedules(schedules: dict[str, str], options: Options) -> str:
    """The isl schedule trees of `--emit=schedule`, one commented header per function."""
    if not schedules:
        if options.opt_level != 3:
            why = "rescheduling runs at -O3 only"
        elif not options.schedule:
            why = "rescheduling is off (--no-schedule)"
        else:
            why = "no function was rescheduled (see the warnings and --report)"
        return f"# no schedule: {why}\n"
    return "".join(f"# function {name}\n{tree.rstrip()}\n" for name, tree in schedules.items())


def _give_up_on_mlir(report: BuildReport, filename: str, exc: Exception) -> None:
    """An internal failure after the frontend: the C compiler builds everything, and we say so."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    report.warn(
        "internal-error",
        f"internal error in polyflow's backend ({first}); "
        "the whole file is compiled by the C compiler",
        SourcePosition(filename, 0, 0),
        error=first,
    )
    for name in report.compiled:
        report.fallbacks[name] = "internal error in polyflow's backend"
    report.compiled = []


class _RestCompile:
    """cc compiling what polyflow leaves to it (`spliced`, the file with the compiled functions'
    bodies cut out) into `obj`, started at once and running in the background; `wait` raises
    `CompileError` with cc's message when it failed."""

    def __init__(
        self, spliced: Path, obj: Path, options: Options, source_dir: Path | None, filename: str
    ) -> None:
        self._filename = filename
        self._log = obj.with_suffix(".log")
        with self._log.open("w") as log:
            self._proc = subprocess.Popen(
                _rest_command(spliced, obj, options, source_dir, filename),
                stdout=subprocess.DEVNULL,
                stderr=log,
            )

    def cancel(self) -> None:
        """Stop cc if it is still running."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def wait(self) -> None:
        if self._proc.wait() != 0:
            message = self._log.read_text(errors="replace").strip()
            raise CompileError(
                f"compiling the rest of the program with the C compiler failed:\n{message}",
                file=self._filename,
            )


def fp_flags(options: Options) -> list[str]:
    """gcc's flags for the floating-point contract `options` ask for (C's, by default; no
    fused multiply-adds in the C compiler's part either with `fp_contract` off)."""
    if options.fast_math:
        return ["-ffast-math"]
    contract = ["-ffp-contract=off"] if options.fp_contract == "off" else []
    if options.associative_math:  # gcc reassociates only without signed zeros and traps
        return ["-fassociative-math", "-fno-signed-zeros", "-fno-trapping-math", *contract]
    return contract


def _rest_command(
    spliced: Path, obj: Path, options: Options, source_dir: Path | None, filename: str
) -> list[str]:
    level = "-O0" if options.opt_level == 0 else "-O2"
    march = [f"-march={options.march}"] if options.march else []
    include = [f"-iquote{source_dir}"] if source_dir else []
    # the spliced copy sits in a temporary directory: debug info and __FILE__ name the source's
    include.append(f"-ffile-prefix-map={spliced.parent}={Path(filename).parent}")
    cmd = [
        options.cc,
        level,
        *march,
        "-std=gnu11",
        *include,
        *preprocessor_flags(options, source_dir),
        *fp_flags(options),
        *options.cflags,
        "-c",
        "-o",
        str(obj),
        str(spliced),
    ]
    return cmd
