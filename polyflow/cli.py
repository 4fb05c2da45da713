"""The `polyflow` command: build C programs through MLIR (`polyflow build`), and compile Tensor
Comprehensions (`polyflow tc`: inferred ranges and shapes, the IR for given sizes)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

from polyflow.errors import CompileError
from polyflow.options import BUILD_DEFAULTS, TC_DEFAULTS, EmitStage, PipelineStage
from polyflow.report import CompileReport

if TYPE_CHECKING:
    from polyflow.drivers.build import BuildReport

EMITS = list(get_args(EmitStage))
# to stdout unless -o says otherwise (LLVM IR goes to a .ll file, binaries to files)
TEXT_STAGES = tuple(e for e in EMITS if e not in ("llvm", "obj", "asm", "exe"))
# what `polyflow tc --emit` prints: the stages a JIT compile keeps
TC_EMITS = [s for s in get_args(PipelineStage) if s != "llvm"]


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="polyflow", description="A polyhedral optimizing compiler for C loop nests."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "serve",
        help="run the compile service (HTTP; polyflow serve --help for its flags)",
        add_help=False,
    )
    sub.add_parser(
        "config",
        help="polyflow config --libs: the link flags of polyflow objects for another linker",
        add_help=False,
    )
    sub.add_parser(
        "cc",
        help="a C compiler with gcc's command line (-c, -o, several sources, objects, "
        "-I -D -L -l ...; also the polyflow-cc command, for CC=polyflow-cc)",
        add_help=False,
    )
    sub.add_parser(
        "explain",
        help="one row per loop nest of a C file: raised? scheduled? tiled? parallel? "
        "micro-kernel? with the reasons and source lines",
        add_help=False,
    )
    build = sub.add_parser(
        "build",
        help="compile a C file into an executable (or an intermediate stage)",
        description="Compile a C file: the functions polyflow can compile go through MLIR, "
        "the rest through the C compiler, linked into one program. The default is -O3, the "
        "polyhedral stage (isl scheduling: fusion, tiling, parallel loops, micro-kernels); "
        "-O2 raises loops to affine and optimizes with LLVM only; -O0 leaves everything to "
        "the C compiler. For builds of several files, use polyflow cc (gcc's command line).",
    )
    build.add_argument("source", help="the C file")
    build.add_argument(
        "more_sources",
        nargs="*",
        metavar="SOURCE",
        help="more C files of the same program (each compiled as a unit, then linked)",
    )
    build.add_argument("-o", "--output", help="output path ('-' for stdout with text stages)")
    groups = add_option_arguments(build, c_build=True, defaults=BUILD_DEFAULTS)
    debugging = groups["debugging and reports"]
    debugging.add_argument(
        "--emit", choices=EMITS, default="exe", help="stop after this stage and write it"
    )
    debugging.add_argument(
        "--report",
        action="store_true",
        help="print what raising to affine made of each loop, and why not, and what the -O3 "
        "stage skipped, tiled, ran in parallel and turned into micro-kernels, on stderr",
    )
    debugging.add_argument(
        "--report-json",
        metavar="PATH",
        help="write the compile report (versioned JSON: every remark of every stage, with "
        "source positions; the schedule trees; the timings) to PATH",
    )
    debugging.add_argument("--time", action="store_true", help="print the time of each stage")
    debugging.add_argument(
        "--no-cache",
        dest="cache",
        action="store_false",
        help="compile even when the compile cache holds the result (POLYFLOW_CACHE=off: always)",
    )
    _add_tc_parser(sub)
    _add_tune_parser(sub)
    return parser


def _add_tune_parser(sub: Any) -> None:
    from polyflow.tune.command import add_tune_arguments

    tune = sub.add_parser(
        "tune",
        help="autotune a C program's kernels or a TC definition: search the options, keep the "
        "fastest correct build for later builds",
        description="Search the polyhedral stage's options (tile sizes, fusion, scheduler "
        "preset, splitting, micro-kernel shape, parallel loops, threads, wavefronts) for the "
        "fastest build of a C program's kernels (the file needs a main: each candidate is "
        "built, run and checked against the default build's output) or of a TC definition "
        "(on random inputs of the --sizes given). The best options go to the tuning database; "
        "polyflow build, compile_c, polyflow.tc and the service use them for the same kernel "
        "and inputs (--no-tuned ignores them).",
    )
    tune.add_argument("source", nargs="?", help="the C or .tc file")
    add_option_arguments(tune, c_build=True, defaults=BUILD_DEFAULTS)
    add_tune_arguments(tune)


def _add_tc_parser(sub: Any) -> None:
    tc = sub.add_parser(
        "tc",
        help="check a Tensor Comprehensions file: inferred ranges and shapes, or the IR",
        description="Check the TC definitions of a file. --explain prints each statement's "
        "inferred index ranges and each output's shape; --emit prints the IR after a stage "
        "for the sizes given with --sizes.",
    )
    tc.add_argument("source", help="the TC file")
    tc.add_argument(
        "--name", help="the definition to explain or emit (default: all / the only one)"
    )
    tc.add_argument("--explain", action="store_true", help="print inferred ranges and shapes")
    tc.add_argument("--emit", choices=TC_EMITS, help="print the IR after this stage")
    tc.add_argument(
        "--sizes",
        type=_size_bindings,
        default={},
        metavar="NAME=N,...",
        help="values of the signature's sizes, for --emit (e.g. M=64,K=32)",
    )
    add_option_arguments(tc, c_build=False, defaults=TC_DEFAULTS)


def _size_bindings(text: str) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        try:
            sizes[name.strip()] = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected NAME=integer, got '{part}'") from None
    return sizes


def add_option_arguments(
    parser: argparse.ArgumentParser,
    *,
    c_build: bool,
    defaults: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A flag for each `Options` field, derived from the model: its name (`tile_sizes` is
    `--tile-sizes`, or the `flags` its metadata gives), help text and default; booleans get
    `--x` and `--no-x`, literals their choices. Fields of C builds only where `c_build`.
    `defaults` are this command's defaults where they differ from the model's."""
    from polyflow.options import Options

    defaults = defaults or {}
    groups: dict[str, Any] = {"common": parser.add_argument_group("common options")}
    groups["scheduling: the polyhedral stage (-O3)"] = parser.add_argument_group(
        "scheduling: the polyhedral stage (-O3)"
    )
    groups["debugging and reports"] = parser.add_argument_group("debugging and reports")
    for name, info in Options.model_fields.items():
        how: dict[str, Any] = dict(info.json_schema_extra or {})  # type: ignore[arg-type]
        if how.get("cli") is False or (how.get("c_only") and not c_build):
            continue
        where: Any = groups["common"]
        if "group" in how:
            where = groups.setdefault(how["group"], parser.add_argument_group(how["group"]))
        flags = how.get("flags") or [f"--{name.replace('_', '-')}"]
        default = defaults.get(name, info.default)
        shown = {True: "on", False: "off", None: "none", "": "none", (): "none"}.get(
            default, default
        )
        text = f"{info.description} (default: {shown})" if info.description else None
        kind = how.get("kind") or _flag_kind(info.annotation)
        common: dict[str, Any] = {"dest": name, "default": argparse.SUPPRESS, "help": text}
        if kind == "bool":
            where.add_argument(*flags, action=argparse.BooleanOptionalAction, **common)
        elif kind == "append":
            where.add_argument(*flags, action="append", metavar=how.get("metavar"), **common)
        else:
            where.add_argument(
                *flags,
                type=_FLAG_TYPES[kind],
                choices=get_args(info.annotation) if kind == "choice" else None,
                metavar=how.get("metavar", None if kind == "choice" else name.upper()),
                **common,
            )
    return groups


def _flag_kind(annotation: Any) -> str:
    """How a field's type reads from the command line."""
    if annotation is bool:
        return "bool"
    if get_origin(annotation) is Literal:
        return "choice"
    if annotation == tuple[str, ...]:
        return "append"  # -I a -I b
    if annotation == tuple[str, ...] | None:
        return "names"  # --functions f,g
    if annotation == tuple[int, ...] | None:
        return "integers"  # --tile-sizes 32,8
    if annotation in (int, int | None):
        return "int"
    if annotation in (float, float | None):
        return "float"
    return "str"


def _integers(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: '{text}'") from None


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _number(kind: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: '{text}'") from None

    return parse


_FLAG_TYPES: dict[str, Callable[[str], Any]] = {
    "choice": str,
    "names": _names,
    "integers": _integers,
    "int": _number(int),
    "float": _number(float),
    "str": str,
}


def options_from_args(
    args: argparse.Namespace, defaults: Mapping[str, Any] | None = None
) -> Any:
    """The `Options` a parsed command line asks for: the flags given, over this command's
    `defaults`, over the model's. An invalid value is a usage error naming the flag."""
    from pydantic import ValidationError

    from polyflow.options import Options

    given = {name: value for name, value in vars(args).items() if name in Options.model_fields}
    for name in ("include_dirs", "defines", "grad"):
        if name in given:
            given[name] = tuple(given[name])
    try:
        return Options(**{**(defaults or {}), **given})
    except ValidationError as exc:
        problems = "; ".join(f"{_flag(str(e['loc'][0]))}: {e['msg']}" for e in exc.errors())
        raise UsageError(problems) from None


def _flag(name: str) -> str:
    """The command line's spelling of option `name`."""
    from polyflow.options import Options

    how: dict[str, Any] = dict(Options.model_fields[name].json_schema_extra or {})  # type: ignore[arg-type]
    return str((how.get("flags") or [f"--{name.replace('_', '-')}"])[0])


class UsageError(Exception):
    """A command line polyflow cannot run: printed as `polyflow: error: ...`, exit status 2."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line, C-compiler spellings (`-O3`, `-Idir`) accepted; option values the
    `Options` model refuses are usage errors here, as malformed ones are."""
    parser = _build_parser()
    args = parser.parse_args(_normalize_argv(argv))
    try:
        options_from_args(args, TC_DEFAULTS if args.command == "tc" else BUILD_DEFAULTS)
    except UsageError as exc:
        parser.error(str(exc))
    return args


# gcc's spellings of boolean options → ours
_GCC_FLAGS = {
    "-ffast-math": "--fast-math",
    "-fno-fast-math": "--no-fast-math",
    "-fassociative-math": "--associative-math",
    "-fno-associative-math": "--no-associative-math",
}


def _normalize_argv(argv: list[str]) -> list[str]:
    """Accept the C-compiler spellings `-O3`, `-Idir`, `-DX=1`, `-march=native`,
    `-ffast-math`, `-fassociative-math` (and their `-fno-` forms)."""
    out: list[str] = []
    for arg in argv:
        if len(arg) == 3 and arg.startswith("-O") and arg[2].isdigit():
            out += ["-O", arg[2]]
        elif arg.startswith("-ffp-contract="):
            out += ["--fp-contract", arg.split("=", 1)[1]]
        elif arg in _GCC_FLAGS:
            out.append(_GCC_FLAGS[arg])
        elif arg.startswith(("-march=", "-mtune=")):
            out += [arg[:6].replace("-", "--", 1), arg.split("=", 1)[1]]
        elif arg.startswith(("-I", "-D")) and len(arg) > 2:
            out += [arg[:2], arg[2:]]
        else:
            out.append(arg)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "serve":
        return _serve(argv[1:])
    if argv and argv[0] == "cc":
        return cc_main(argv[1:])
    if argv and argv[0] == "config":
        return _config(argv[1:])
    if argv in (["--version"], ["-V"]):
        print(version_text())
        return 0
    if argv and argv[0] == "explain":
        return _explain(argv[1:])
    args = parse_args(argv)
    try:
        if args.command == "tc":
            return _tc(args)
        if args.command == "tune":
            from polyflow.tune.command import run_tune_command

            return run_tune_command(
                args, options_from_args(args, BUILD_DEFAULTS), options_from_args(args, TC_DEFAULTS)
            )
        return _build(args, options_from_args(args, BUILD_DEFAULTS))
    except CompileError as exc:
        print(exc.format(), file=sys.stderr)
        return 1
    except UsageError as exc:
        print(f"polyflow: error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, TypeError) as exc:  # an option value the model refused, and the like
        print(f"polyflow: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug of ours: one line, and how to see more
        if os.environ.get("POLYFLOW_TRACEBACK"):
            raise
        print(
            f"polyflow: internal error: {type(exc).__name__}: {_one_line(exc)} "
            "(a bug in polyflow: POLYFLOW_TRACEBACK=1 shows where; please report it)",
            file=sys.stderr,
        )
        return 3


def _explain(argv: list[str]) -> int:
    """`polyflow explain FILE [build options] [--json]`: the table of drivers/explain.py."""
    from polyflow.drivers.explain import explain_c_file, render, to_json

    as_json = "--json" in argv
    argv = [a for a in argv if a != "--json"]
    if not argv or argv[0] in ("-h", "--help"):
        print(
            "usage: polyflow explain FILE.c [build options, e.g. -O3 -march=native] [--json]\n"
            "One row per loop nest: raised to affine? rescheduled? tiled (sizes)? parallel "
            "(which line, or why not)? micro-kernel? with the reasons."
        )
        return 0 if argv else 2
    args = parse_args(["build", *argv])
    try:
        rows = explain_c_file(args.source, options_from_args(args, BUILD_DEFAULTS))
    except CompileError as exc:
        print(exc.format(), file=sys.stderr)
        return 1
    print(to_json(rows) if as_json else render(rows, args.source), end="")
    return 0


def version_text() -> str:
    """`polyflow --version`: polyflow's release and the versions of what it compiles with."""
    import subprocess

    from polyflow.options import Options
    from polyflow.toolchain import llvm_bin
    from polyflow.version import __version__

    def package(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    def first_line(cmd: list[str], pattern: str = "") -> str:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
        except OSError:
            return "not found"
        lines = [line.strip() for line in out.splitlines() if pattern in line]
        return lines[0] if lines else "unknown"

    return "\n".join(
        [
            f"polyflow {__version__}",
            f"MLIR {package('xtc-mlir-python-bindings')} (Python bindings)",
            f"{first_line([str(llvm_bin('opt')), '--version'], 'LLVM version')} (opt, llc)",
            f"isl via islpy {package('islpy')}",
            f"C compiler: {first_line([Options().cc, '--version'])}",
        ]
    )


def _config(argv: list[str]) -> int:
    """`polyflow config --libs`: what a link of polyflow objects by another compiler needs (the
    OpenMP runtime, linked in statically, as `polyflow cc` links it; `--shared-libs`: as a
    shared library), pkg-config style."""
    from polyflow.drivers.objects import openmp_link_flags

    if argv not in (["--libs"], ["--shared-libs"]):
        print("usage: polyflow config --libs | --shared-libs", file=sys.stderr)
        return 2
    print(" ".join(openmp_link_flags("<config>", static=argv == ["--libs"])))
    return 0


def cc_main(argv: list[str] | None = None) -> int:
    """`polyflow cc` and the `polyflow-cc` console script: gcc's command line (drivers/cc.py)."""
    from polyflow.drivers.cc import parse_cc_args, run_cc

    argv = sys.argv[1:] if argv is None else argv
    cmd = parse_cc_args(argv)
    try:
        # polyflow's options from their gcc spellings and its own flags; a unit name is needed
        return run_cc(cmd, argv, cc_options(cmd.polyflow_args))
    except CompileError as exc:
        print(exc.format(), file=sys.stderr)
        return 1


def cc_options(polyflow_args: list[str]) -> Any:
    """The `Options` of `polyflow cc`: its gcc spellings and polyflow's own flags. A build of a
    code base must not change because someone tuned one of its kernels: tuned options only
    where asked for (`--use-tuned`)."""
    flags = ["--tuned" if a == "--use-tuned" else a for a in polyflow_args]
    # a unit name is needed by the parser
    return options_from_args(parse_args(["build", "<unit>", "--no-tuned", *flags]))


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return "; ".join(lines[:3]) or type(exc).__name__



def _serve(argv: list[str]) -> int:
    """`polyflow serve`: the service lives above polyflow (server/ imports polyflow, never the
    other way round), so it is found through the `polyflow.commands` entry point it declares."""
    commands = {e.name: e for e in metadata.entry_points(group="polyflow.commands")}
    if "serve" not in commands:
        print("polyflow: the compile service is not installed (pip install -e .)", file=sys.stderr)
        return 1
    serve: Callable[[list[str]], int] = commands["serve"].load()
    return int(serve(argv))


def _tc(args: argparse.Namespace) -> int:
    import numpy as np

    from polyflow import tc
    from polyflow.source_input import read_text_file

    path = Path(args.source)
    source = read_text_file(path)
    options = options_from_args(args, TC_DEFAULTS)
    names = [args.name] if args.name else tc.definition_names(source, file=str(path))
    if not args.explain and not args.emit:
        args.explain = True
    for name in names:
        try:
            fn = tc.define(source, name, options=options, file=str(path))
        except ValueError as exc:
            print(f"polyflow: error: {exc}", file=sys.stderr)
            return 1
        if args.explain:
            print(fn.explain())
        if args.emit:
            if args.emit == "gpu" and fn.options.target != "cuda":
                print("polyflow: error: --emit gpu needs --target cuda", file=sys.stderr)
                return 1
            if args.emit == "llvm-dialect" and fn.options.target == "cuda":
                print(
                    "polyflow: error: a CUDA build has no llvm-dialect stage here "
                    "(--emit gpu shows its kernels)",
                    file=sys.stderr,
                )
                return 1
            missing = [s for s in fn.definition.size_names if s not in args.sizes]
            if missing:
                print(
                    f"polyflow: error: --emit needs --sizes for {', '.join(missing)}",
                    file=sys.stderr,
                )
                return 1
            arrays = [
                np.zeros(
                    tuple(args.sizes[d] if isinstance(d, str) else d for d in t.dims or ()),
                    dtype=tc.NUMPY_DTYPES[t.element],
                )
                for t in fn.definition.inputs
            ]
            sys.stdout.write(fn.mlir(args.emit, *arrays))
    return 0


def _build(args: argparse.Namespace, options: object) -> int:
    import tempfile

    from polyflow.drivers.build import build_program

    if args.more_sources:
        return _build_program_of_units(args, options)
    source = Path(args.source)
    default = {
        "exe": source.with_suffix(""),
        "obj": source.with_suffix(".o"),
        "llvm": source.with_suffix(".ll"),
        "asm": source.with_suffix(".s"),
    }
    to_stdout = args.output == "-" or (args.output is None and args.emit in TEXT_STAGES)
    if to_stdout and args.emit in ("exe", "obj"):
        print("polyflow: error: binary output cannot go to stdout", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        output = (
            Path(tmp) / "out.txt"
            if to_stdout
            else Path(args.output or default.get(args.emit, "a.out"))
        )
        report = build_program(
            source,
            output,
            options=options,  # type: ignore[arg-type]
            emit=args.emit,
            raise_report=args.report,
            cache="default" if args.cache else None,
        )
        for warning in report.warnings:
            print(warning, file=sys.stderr)
        _print_report(report, args.report)
        if args.report_json:
            Path(args.report_json).write_text(report.report.to_json() + "\n")
        if to_stdout:
            sys.stdout.write(output.read_text())
    if args.time:
        for stage, seconds in report.timings.items():
            print(f"{stage:>30}: {seconds * 1000:8.1f} ms", file=sys.stderr)
    return 0


def _build_program_of_units(args: argparse.Namespace, options: Any) -> int:
    """`polyflow build a.c b.c -o prog`: each file compiled as a unit (ordinary objects, as
    `polyflow cc -c` makes them), linked by cc with the OpenMP runtime when one has parallel
    loops."""
    import subprocess
    import tempfile

    from polyflow.drivers.build import build_program
    from polyflow.drivers.objects import openmp_link_flags
    from polyflow.drivers.sources import check_gradients

    if args.emit != "exe":
        raise UsageError("--emit needs one source file (several are compiled and linked)")
    if args.report_json or args.time:
        raise UsageError(
            "--report-json and --time need one source file (--report prints each file's)"
        )
    sources = [Path(args.source), *map(Path, args.more_sources)]
    with tempfile.TemporaryDirectory(prefix="polyflow-build-") as tmp:
        objects, parallel, gradients = [], False, []
        for k, source in enumerate(sources):
            obj = Path(tmp) / f"{k}-{source.stem}.o"
            report = build_program(
                source,
                obj,
                options=options,
                link=False,
                raise_report=args.report,
                cache="default" if args.cache else None,
            )
            for warning in report.warnings:
                print(warning, file=sys.stderr)
            _print_report(report, args.report)
            objects.append(str(obj))
            parallel = parallel or report.parallel
            gradients += report.gradients
        check_gradients(gradients, options, str(sources[0]))
        runtime = openmp_link_flags("<link>") if parallel else []
        output = args.output or sources[0].with_suffix("").name
        link = [options.cc, "-o", output, *objects, "-lm", *runtime]
        done = subprocess.run(link, capture_output=True, text=True)
        if done.returncode != 0:
            raise CompileError(f"linking failed:\n{done.stderr.strip()}")
    return 0


def _print_report(report: BuildReport, remarks: bool) -> None:
    """On stderr (so that `-o -` output stays clean): the raising table where it was asked for,
    and with `remarks` the notes and what the frontend bound, scheduling, differentiation and
    GPU mapping did."""
    if report.raising is not None:
        print(report.raising.format(), file=sys.stderr)
    if remarks:
        for note in report.notes:
            print(f"note: {note}", file=sys.stderr)
        facts = [
            remark
            for stage in ("frontend", "grad", "schedule", "gpu", "lowering")
            for remark in report.report.select(stage=stage, severity="remark")
        ]
        if facts:
            print(CompileReport(remarks=facts).format(["remark"]), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
