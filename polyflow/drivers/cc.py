"""`polyflow cc` / `polyflow-cc`: a C compiler driver with gcc's command line, for builds that
set `CC=polyflow-cc`.

Each C source is compiled as `polyflow build` compiles a file (the functions polyflow can
compile through MLIR, the rest by cc), into an ordinary object: every function under its own
name, joined into one relocatable object (`build_program(..., link=False)`), so that `ar`,
`gcc a.o b.o` and shared libraries work. Without `-c`, the objects (and the `.o`/`.a` inputs)
are linked by cc, with the OpenMP runtime linked in when a unit has parallel loops. What only
gcc understands (`-E`, `-M`, unknown flags) goes to cc: a command polyflow cannot run
itself is cc's, so a build that gcc accepts never fails because of polyflow.

Options that change the code polyflow generates keep gcc's spelling (`-O3`, `-march=`,
`-ffast-math`, `-fassociative-math`, `-I`, `-D`); polyflow's own (`--no-schedule`,
`--tile-sizes`, ...) may also come from the environment variable `POLYFLOW_FLAGS`, which
overrides the command line for polyflow's compile only (`POLYFLOW_FLAGS=-O3` under a build's
`-O2` schedules the compiled functions while cc compiles the rest at `-O2`). Tuned options
(`polyflow tune`) are used only with `--use-tuned`: a code base builds the same whoever tuned
one of its kernels on this machine.
"""

from __future__ import annotations

import fcntl
import json
import os
import pickle
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polyflow.drivers.objects import openmp_link_flags
from polyflow.errors import CompileError
from polyflow.frontend.c_parse import preprocessor_flags
from polyflow.options import EmitStage, Options
from polyflow.toolchain import openmp_library_dir

# gcc's floating-point contract flags, which polyflow reads (the trust issue's contract).
_CONTRACT_FLAGS = ("-ffast-math", "-fno-fast-math", "-fassociative-math", "-fno-associative-math")
# Flags that only the link reads.
_LINK_PREFIXES = ("-L", "-l", "-Wl,")
# Flags of the preprocessor and the code generator that polyflow reads as gcc does.
_OPTION_FLAGS = ("-O", "-march=", "-mtune=", "-I", "-D")
# gcc's other optimization levels, as polyflow's: -O is -O1; -Os and -Oz optimize without the
# polyhedral stage's code growth; -Og asks for debuggable code (cc alone); -Ofast is -O3
# -ffast-math.
_GCC_LEVELS = {
    "-O": ["-O1"],
    "-Os": ["-O2"],
    "-Oz": ["-O2"],
    "-Og": ["-O0"],
    "-Ofast": ["-O3", "-ffast-math"],
}
# Modes polyflow leaves to cc whole: preprocessing, dependency lists, version queries.
_CC_ONLY = ("-E", "-M", "-MM", "-v", "--version", "-dumpversion", "-dumpmachine")
# -f flags that change nothing polyflow's code means (code placement, diagnostics, hardening);
# any other -f flag (-fwrapv, -funsigned-char, -fno-strict-aliasing, -fsanitize=, -fopenmp, ...)
# may change what C means, or asks for something polyflow does not do: the command is cc's.
_NEUTRAL_F_FLAGS = (
    "-fPIC", "-fpic", "-fPIE", "-fpie", "-fno-pic", "-fno-pie", "-fno-plt", "-fno-common",
    "-fcommon", "-fomit-frame-pointer", "-fno-omit-frame-pointer", "-ffunction-sections",
    "-fdata-sections", "-fstack-protector", "-fno-stack-protector", "-fstack-clash-protection",
    "-fcf-protection", "-fdiagnostics-", "-fmessage-length=", "-fvisibility=", "-fno-ident",
    "-fasynchronous-unwind-tables", "-fno-asynchronous-unwind-tables", "-fexceptions",
    "-fno-exceptions", "-fmax-errors=", "-fno-builtin-", "-fdebug-prefix-map=",
    "-ffile-prefix-map=", "-fmacro-prefix-map=", "-fno-semantic-interposition",
)  # fmt: skip
# -m flags that change the sizes of C's types (long, pointers, long double): the command is cc's.
_TYPE_SIZE_FLAGS = ("-m32", "-mx32", "-m16", "-mlong-double-", "-m96bit-long-double")
# gcc's OpenMP: the functions with `#pragma omp` stay with cc (frontend/c_pragmas.py), compiled
# with it; their GOMP_* calls run on the OpenMP runtime polyflow links (libiomp5 implements
# libgomp's interface), so one thread pool serves both.
_OPENMP_FLAGS = ("-fopenmp", "-fopenmp-simd")
# Dependency files written while compiling (make's -MD): cc writes them from the source.
_DEPENDENCY_FLAGS = ("-MD", "-MMD", "-MP", "-MG")
_DEPENDENCY_OPTIONS = ("-MF", "-MT", "-MQ")


@dataclass
class CcCommand:
    """A gcc command line, sorted into what polyflow does with it."""

    sources: list[str] = field(default_factory=list)  # C files
    inputs: list[str] = field(default_factory=list)  # objects, archives, libraries: to the link
    output: str | None = None
    compile_only: bool = False  # -c
    assembly: bool = False  # -S: each unit's assembly (compile_only too)
    shared: bool = False  # -shared
    openmp: bool = False  # -fopenmp
    polyflow_args: list[str] = field(default_factory=list)  # for polyflow's option parser
    cc_flags: list[str] = field(default_factory=list)  # for every cc run on a unit
    link_flags: list[str] = field(default_factory=list)  # for the link only
    # sources (by index into `sources`), inputs and link flags in the command's order: the
    # link keeps it (-Wl,--whole-archive a.a -Wl,--no-whole-archive, -l after the objects)
    link_order: list[str | int] = field(default_factory=list)
    cc_only: bool = False  # a mode polyflow leaves to cc (see _CC_ONLY)
    # -f flags that may change what C means: the command is then cc's (see _NEUTRAL_F_FLAGS)
    meaning_flags: list[str] = field(default_factory=list)
    # -MD/-MMD and their -MF/-MT/-MQ/-MP: a dependency file written beside the compile
    dependency_flags: list[str] = field(default_factory=list)


def parse_cc_args(argv: list[str]) -> CcCommand:
    """Sort gcc's command line `argv` (after `polyflow cc`) into a CcCommand."""
    cmd = CcCommand()
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        value = args[i + 1] if i + 1 < len(args) else None
        if arg == "-o" and value is not None:
            cmd.output = value
            i += 2
            continue
        if arg in ("-I", "-D", "-U", "-L", "-l", "-include", "-MF", "-MT", "-MQ", "-x") and value:
            arg, i = arg + ("" if arg in ("-I", "-D", "-U", "-L", "-l") else " ") + value, i + 1
            if " " in arg:  # -include FILE, -MF FILE, ...: two words for cc
                name, _, rest = arg.partition(" ")
                if name in _DEPENDENCY_OPTIONS:
                    cmd.dependency_flags += [name, rest]
                else:
                    cmd.cc_flags += [name, rest]
                # -x (another language) and -include (a header polyflow's parse would not
                # see: its macros could change what the compiled functions mean) are cc's
                cmd.cc_only = cmd.cc_only or name in ("-x", "-include")
                i += 1
                continue
        i += 1
        if arg == "-c":
            cmd.compile_only = True
        elif arg == "-S":
            cmd.compile_only = cmd.assembly = True
        elif arg == "-shared":
            cmd.shared = True
            cmd.link_flags.append(arg)
        elif arg in _DEPENDENCY_FLAGS:
            cmd.dependency_flags.append(arg)
        elif arg in _CC_ONLY or arg.startswith(("-M", "-x")):
            cmd.cc_only = True
            cmd.cc_flags.append(arg)
        elif arg.startswith("--"):  # polyflow's own options
            cmd.polyflow_args.append(arg)
        elif arg.startswith("-O"):
            cmd.polyflow_args += _GCC_LEVELS.get(arg, [arg])
            cmd.cc_flags.append(arg)
        elif arg in _CONTRACT_FLAGS or arg.startswith(_OPTION_FLAGS):
            cmd.polyflow_args.append(arg)
            if arg.startswith(("-I", "-D")):
                continue  # polyflow hands them to cc itself (include_dirs, defines)
            cmd.cc_flags.append(arg)
        elif arg.startswith(_LINK_PREFIXES):
            cmd.link_flags.append(arg)
            cmd.link_order.append(arg)
        elif arg.endswith(".c") and not arg.startswith("-"):
            cmd.link_order.append(len(cmd.sources))
            cmd.sources.append(arg)
        elif not arg.startswith("-"):
            cmd.inputs.append(arg)
            cmd.link_order.append(arg)
        elif arg.startswith("-g") and not arg.startswith(("-gsplit-dwarf", "-gz")):
            # -g, -g2, -ggdb, -gdwarf-4: line tables for the MLIR-compiled functions too
            cmd.polyflow_args.append("--no-debug-info" if arg == "-g0" else "-g")
            cmd.cc_flags.append(arg)
        elif arg.startswith("-ffp-contract="):
            cmd.polyflow_args.append(arg)
            cmd.cc_flags.append(arg)
        elif arg.startswith("-std="):
            cmd.cc_flags.append(arg)
            if not arg.startswith("-std=gnu"):  # ISO C modes: no fused multiply-add
                cmd.polyflow_args.append("-ffp-contract=off")
        elif arg in _OPENMP_FLAGS:
            cmd.openmp = True
            cmd.cc_flags.append(arg)
        elif (arg.startswith("-f") and not arg.startswith(_NEUTRAL_F_FLAGS)) or arg.startswith(
            _TYPE_SIZE_FLAGS
        ):
            cmd.cc_flags.append(arg)
            cmd.meaning_flags.append(arg)
        else:  # a flag only gcc knows: every cc run gets it
            cmd.cc_flags.append(arg)
    if not any(a.startswith("-O") for a in cmd.polyflow_args):
        cmd.polyflow_args.insert(0, "-O0")  # gcc's default: no optimization, cc alone
    # POLYFLOW_FLAGS: polyflow's options over the build's, for polyflow's compile only (cc's
    # part keeps the build's flags): POLYFLOW_FLAGS=-O3 schedules under a build's -O2
    for flag in shlex.split(os.environ.get("POLYFLOW_FLAGS", "")):
        cmd.polyflow_args += _GCC_LEVELS.get(flag, [flag])
    return cmd


def leave_to_cc(cmd: CcCommand, options: Options) -> bool:
    """Whether the whole command is cc's: a mode polyflow does not do itself, nothing to
    compile or link, a flag that may change what the C means (-fwrapv, -funsigned-char,
    -fsanitize=, ...), or -O0 (no optimization asked: cc alone is the fastest build). A link
    still gets the OpenMP runtime, for objects polyflow compiled before."""
    return (
        cmd.cc_only
        or bool(cmd.meaning_flags)
        or not (cmd.sources or cmd.inputs)
        or options.opt_level == 0
    )


def run_cc(cmd: CcCommand, argv: list[str], options: Options) -> int:
    """Run `polyflow cc ARGV`, sorted into `cmd`, compiling with `options` (the CLI makes them
    from `cmd.polyflow_args`); the exit status."""
    if cmd.meaning_flags and cmd.sources:
        print(
            f"polyflow cc: note: {cmd.meaning_flags[0]} may change what the C means: "
            "the C compiler builds this command alone",
            file=sys.stderr,
        )
    if leave_to_cc(cmd, options):
        if cmd.sources and not cmd.cc_only:
            why = cmd.meaning_flags[0] if cmd.meaning_flags else f"-O{options.opt_level}"
            for source in cmd.sources:
                record_unit(source, {"status": "cc", "reason": why}, time.perf_counter())
        linking = not (cmd.cc_only or cmd.compile_only) and (cmd.sources or cmd.inputs)
        extra = _runtime(cmd) if linking else []
        return subprocess.run([options.cc, *argv, *extra]).returncode  # cc's messages
    options = options.model_copy(update={"cflags": (*options.cflags, *cmd.cc_flags)})
    if cmd.compile_only:
        if cmd.output is not None and len(cmd.sources) > 1:
            print("polyflow cc: error: -o with -c names one output, not several", file=sys.stderr)
            return 1
        suffix = ".s" if cmd.assembly else ".o"
        for source in cmd.sources:
            output = cmd.output or Path(source).with_suffix(suffix).name
            _compile_unit(source, output, options, assembly=cmd.assembly)
            if cmd.dependency_flags:
                _write_dependencies(cmd, source, output, options)
        return 0
    with tempfile.TemporaryDirectory(prefix="polyflow-cc-") as tmp:
        objects = []
        for k, source in enumerate(cmd.sources):
            obj = Path(tmp) / f"{k}-{Path(source).stem}.o"
            _compile_unit(source, str(obj), options)
            objects.append(str(obj))
        runtime = _runtime(cmd)
        # with polyflow's runtime linked in, -fopenmp would add libgomp: a second thread pool
        link_cc_flags = [f for f in cmd.cc_flags if not (runtime and f in _OPENMP_FLAGS)]
        shared = ["-shared"] if cmd.shared else []
        ordered = [objects[item] if isinstance(item, int) else item for item in cmd.link_order]
        link = [
            options.cc,
            *link_cc_flags,
            *shared,
            "-o",
            cmd.output or "a.out",
            *ordered,
            "-lm",
            *runtime,
        ]
        done = subprocess.run(link, capture_output=True, text=True)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
        return done.returncode


def _runtime(cmd: CcCommand) -> list[str]:
    """The OpenMP runtime for the link: any object or archive given may hold polyflow's
    parallel loops. Its archive is linked in (the linker takes only what is used, nothing when
    nothing is); a shared library links libiomp5 only if it uses it (`--as-needed`)."""
    if openmp_library_dir() is None:
        return []
    flags = openmp_link_flags("<link>", static=not cmd.shared)
    return ["-Wl,--as-needed", *flags, "-Wl,--no-as-needed"] if cmd.shared else flags


def _write_dependencies(cmd: CcCommand, source: str, output: str, options: Options) -> None:
    """The dependency file of -MD/-MMD, as cc writes it for `cc -c source -o output`: cc
    preprocesses the source once more to write it."""
    flags = list(cmd.dependency_flags)
    if "-MF" not in flags:
        flags += ["-MF", str(Path(output).with_suffix(".d"))]
    if "-MT" not in flags and "-MQ" not in flags:
        flags += ["-MT", output]
    done = subprocess.run(
        [
            options.cc,
            *cmd.cc_flags,
            *preprocessor_flags(options, None),
            *flags,
            "-E",
            source,
            "-o",
            os.devnull,
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise CompileError(f"writing the dependency file failed:\n{done.stderr}", file=source)


def _compile_unit(source: str, output: str, options: Options, *, assembly: bool = False) -> bool:
    """Compile one C unit into an ordinary object (with `assembly`, its assembly text); whether
    it has parallel loops. Warnings go to stderr as gcc's do. A unit polyflow cannot compile (C
    it cannot parse, or a failure of its own) is compiled by cc alone, with one warning: a build
    cc accepts never fails because of polyflow; when cc rejects the unit too, the error is cc's."""
    start = time.perf_counter()
    if not has_loops(source, options):  # nothing for polyflow: cc alone, and at once
        plain = subprocess.run(
            [options.cc, *options.cflags, *preprocessor_flags(options, None),
             "-S" if assembly else "-c", source, "-o", output],
        )  # fmt: skip
        if plain.returncode != 0:
            raise CompileError(f"{source}: the C compiler rejects it", file=source)
        record_unit(source, {"status": "cc", "reason": "no loops"}, start)
        return False
    report = _build_isolated(source, output, options, "asm" if assembly else "exe")
    if isinstance(report, str):  # cc decides whether the C is bad
        flags = [*options.cflags, *preprocessor_flags(options, None)]
        done = subprocess.run(
            [options.cc, *flags, "-S" if assembly else "-c", source, "-o", output],
            capture_output=True,
            text=True,
        )
        sys.stderr.write(done.stderr)
        if done.returncode != 0:
            raise CompileError(f"{source}: the C compiler rejects it", file=source)
        first = report
        print(
            f"{source}: warning: polyflow cannot compile this unit ({first}); the C compiler "
            "compiled it alone",
            file=sys.stderr,
        )
        record_unit(source, {"status": "cc", "reason": first}, start)
        return False
    for warning in report.warnings:
        print(warning, file=sys.stderr)
    raised = {
        str(r.function)
        for r in report.report.remarks
        if r.kind == "loop" and r.data.get("raised") and r.function
    }
    record_unit(
        source,
        {
            "status": "polyflow",
            "loop_functions": report.loop_functions,
            "compiled": report.compiled,
            "optimized": sorted(raised & set(report.compiled)),
            "parallel": report.parallel_functions,
            "fallbacks": report.fallbacks,
        },
        start,
    )
    return report.parallel


def _build_isolated(source: str, output: str, options: Options, emit: EmitStage) -> Any:
    """`build_program(source, output, ..., link=False)` in a forked child: its BuildReport, or
    the first line of why it failed. A crash of native code (an MLIR assertion aborts the
    process) then costs this unit its optimization, not the user's build."""
    from polyflow.forked import collect, fork_work

    def work() -> bytes:
        from polyflow.drivers.build import build_program  # the MLIR path, in the child only

        try:
            report = build_program(source, output, options=options, emit=emit, link=False)
        except Exception as exc:  # CompileError included
            return pickle.dumps((str(exc).strip().splitlines() or [type(exc).__name__])[0])
        return pickle.dumps(report)

    sys.stderr.flush()
    child = fork_work(work)
    payload = collect([child])[child]
    if payload is None:
        return "polyflow's compile of it crashed"
    return pickle.loads(payload)


# Line markers of `cc -E` output, and the directories of system headers (whose inline
# functions are not the unit's loops).
_LINE_MARKER = re.compile(r'^# \d+ "([^"]*)"')
_SYSTEM_HEADERS = ("/usr/include/", "/usr/lib/", "/usr/local/include/", "<")
_LOOP_KEYWORD = re.compile(r"\b(?:for|while)\b")


def has_loops(source: str, options: Options) -> bool:
    """Whether unit `source`, preprocessed as cc sees it, has a `for` or `while` outside the
    system headers (a unit without loops gains nothing from polyflow: cc compiles it alone,
    without starting the MLIR path). True when the preprocessor fails: the full path reports."""
    done = subprocess.run(
        [options.cc, *options.cflags, *preprocessor_flags(options, None), "-E", source],
        capture_output=True,
        text=True,
        errors="replace",
    )
    if done.returncode != 0:
        return True
    in_system_header = False
    for line in done.stdout.splitlines():
        if line.startswith("#"):
            marker = _LINE_MARKER.match(line)
            if marker is not None:
                in_system_header = marker.group(1).startswith(_SYSTEM_HEADERS)
            continue
        if not in_system_header and _LOOP_KEYWORD.search(line):
            return True
    return False


# Where `polyflow cc` appends one JSON line per unit it compiles (what went through MLIR, what
# was optimized, what stayed with cc and why), for reports over a whole build (`make real-world`).
REPORT_ENV = "POLYFLOW_CC_REPORT"


def record_unit(source: str, facts: dict[str, object], start: float) -> None:
    """Append what became of unit `source` to the file $POLYFLOW_CC_REPORT names, if any."""
    path = os.environ.get(REPORT_ENV)
    if not path:
        return
    line = json.dumps(
        {
            "unit": str(Path(source).resolve()),
            **facts,
            "seconds": round(time.perf_counter() - start, 3),
        }
    )
    with open(path, "a") as out:  # builds run units in parallel: one whole line at a time
        fcntl.flock(out, fcntl.LOCK_EX)
        out.write(line + "\n")


__all__ = [
    "REPORT_ENV",
    "CcCommand",
    "has_loops",
    "leave_to_cc",
    "parse_cc_args",
    "record_unit",
    "run_cc",
]
