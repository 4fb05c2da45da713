"""The `polyflow` command: build C programs through MLIR (`polyflow build`), and compile Tensor
Comprehensions (`polyflow tc`: inferred ranges and shapes, the IR for given sizes)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from polyflow.errors import CompileError

EMITS = ["mlir", "affine", "affine-opt", "schedule", "llvm-dialect", "llvm", "obj", "exe"]
# to stdout unless -o says otherwise
TEXT_STAGES = ("mlir", "affine", "affine-opt", "schedule", "llvm-dialect")


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
    build = sub.add_parser(
        "build", help="compile a C file into an executable (or an intermediate stage)"
    )
    build.add_argument("source", help="the C file")
    build.add_argument("-o", "--output", help="output path ('-' for stdout with text stages)")
    build.add_argument(
        "--emit", choices=EMITS, default="exe", help="stop after this stage and write it"
    )
    build.add_argument(
        "--functions",
        help="comma-separated functions to compile through MLIR (default: all that can be)",
    )
    build.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR")
    build.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]")
    build.add_argument(
        "-O", dest="opt_level", type=int, choices=[0, 1, 2, 3], default=2, help="optimization level"
    )
    build.add_argument(
        "-march", "--march", dest="march", default="", help="target CPU ('native' for this machine)"
    )
    build.add_argument(
        "--cc", default="cc", help="the system C compiler for the rest of the program"
    )
    build.add_argument(
        "--fp-contract",
        dest="fp_contract",
        choices=["off", "fast"],
        default="fast",
        help="fuse multiply-adds ('fast', like gcc) or never ('off')",
    )
    build.add_argument(
        "--no-raise-affine",
        dest="raise_affine",
        action="store_false",
        help="do not raise loops to the affine dialect (keep the frontend's scf code)",
    )
    build.add_argument(
        "--report",
        action="store_true",
        help="print what raising to affine made of each loop, and why not, and what the -O3 "
        "stage skipped, on stderr",
    )
    _add_polyhedral_arguments(build)
    build.add_argument("--time", action="store_true", help="print the time of each stage")
    build.add_argument(
        "--no-cache",
        dest="cache",
        action="store_false",
        help="compile even when the compile cache holds the result (POLYFLOW_CACHE=off: always)",
    )
    _add_tc_parser(sub)
    return parser


TC_EMITS = ["mlir", "affine", "affine-opt", "llvm-dialect"]


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
    tc.add_argument(
        "-O", dest="opt_level", type=int, choices=[0, 1, 2, 3], default=3, help="optimization level"
    )
    tc.add_argument("-march", "--march", dest="march", default="native", help="target CPU")
    _add_polyhedral_arguments(tc)


def _size_bindings(text: str) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        try:
            sizes[name.strip()] = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected NAME=integer, got '{part}'") from None
    return sizes


def _add_polyhedral_arguments(build: argparse.ArgumentParser) -> None:
    """The -O3 stage's switches (all on by default at -O3; see polyflow.options.Options)."""
    group = build.add_argument_group("polyhedral optimization (-O3)")
    group.add_argument(
        "--schedule",
        dest="schedule",
        action="store_true",
        default=None,
        help="reschedule with isl (fusion, tiling, splitting); on by default at -O3",
    )
    group.add_argument(
        "--no-schedule",
        dest="schedule",
        action="store_false",
        help="keep the source order (parallelization still runs)",
    )
    group.add_argument("--no-tile", dest="tile", action="store_false", help="do not tile")
    group.add_argument(
        "--no-split", dest="split", action="store_false", help="do not split statements"
    )
    group.add_argument(
        "--no-index-split",
        dest="index_split",
        action="store_false",
        help="do not cut loops at the one iteration their dependences start or end at",
    )
    group.add_argument(
        "--no-micro-kernels",
        dest="micro_kernels",
        action="store_false",
        help="keep contraction nests (C[i][j] += A[i][k] * B[k][j]) as scheduled, without "
        "register-blocked vector code",
    )
    group.add_argument(
        "--no-parallel",
        dest="parallel",
        action="store_false",
        help="no OpenMP loops (sequential code)",
    )
    group.add_argument(
        "--no-parallel-reductions",
        dest="parallel_reductions",
        action="store_false",
        help="keep floating-point reductions sequential (bit-exact sums)",
    )
    group.add_argument(
        "--tile-sizes",
        type=_tile_sizes,
        default=None,
        metavar="N,N,...",
        help="tile size per band dimension, outermost first (the last repeats)",
    )
    group.add_argument(
        "--tile-second-level",
        action="store_true",
        help="tile the tiles once more (L2/L3 cache)",
    )
    group.add_argument(
        "--no-wavefront",
        dest="wavefront",
        action="store_false",
        help="no wavefronts: stencil tiles with no parallel tile loop stay sequential",
    )
    group.add_argument(
        "--schedule-preset",
        choices=["pluto", "isl", "feautrier"],
        default="pluto",
        help="isl scheduler settings",
    )
    group.add_argument(
        "--fusion", choices=["max", "min", "smart"], default="smart", help="how much to fuse"
    )
    group.add_argument(
        "--min-parallel-trip",
        type=int,
        default=8,
        metavar="N",
        help="keep loops known to run fewer than N iterations sequential",
    )
    group.add_argument(
        "--isl-max-operations",
        type=_non_negative_int,
        default=1_000_000,
        metavar="N",
        help="base isl operation budget (about one per microsecond); each step gets a multiple "
        "(dependences 0.5x, scheduling 5x, tiling 2x, AST 2x, ...) and a region whose step "
        "runs out keeps its code or a cheaper schedule, with a note; 0: unbounded",
    )
    group.add_argument(
        "--compile-timeout",
        type=_positive_seconds,
        default=None,
        metavar="SECONDS",
        help="last resort: a function whose polyhedral optimization runs longer keeps its "
        "raised code (with a warning); such a build is never cached",
    )


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: '{text}'") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: '{text}'")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: '{text}'") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: '{text}'")
    return value


def _tile_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: '{text}'") from None
    if not sizes or any(size <= 0 for size in sizes):
        raise argparse.ArgumentTypeError(f"tile sizes must be positive integers: '{text}'")
    return sizes


def options_from_args(args: argparse.Namespace) -> Any:
    """The `Options` the parsed `build` command line asks for."""
    from polyflow.options import Options

    return Options(
        opt_level=args.opt_level,
        march=args.march,
        functions=tuple(f for f in args.functions.split(",") if f) if args.functions else None,
        include_dirs=tuple(args.include_dirs),
        defines=tuple(args.defines),
        cc=args.cc,
        fp_contract=args.fp_contract,
        raise_affine=args.raise_affine,
        **_polyhedral_options(args),
    )


def _polyhedral_options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "schedule": args.schedule is not False,
        "schedule_preset": args.schedule_preset,
        "fusion": args.fusion,
        "tile": args.tile,
        "tile_sizes": args.tile_sizes,
        "tile_second_level": args.tile_second_level,
        "wavefront": args.wavefront,
        "split": args.split,
        "index_split": args.index_split,
        "micro_kernels": args.micro_kernels,
        "parallel": args.parallel,
        "parallel_reductions": args.parallel_reductions,
        "min_parallel_trip": args.min_parallel_trip,
        "isl_max_operations": args.isl_max_operations,
        "compile_timeout": args.compile_timeout,
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line, C-compiler spellings (`-O3`, `-Idir`) accepted."""
    return _build_parser().parse_args(_normalize_argv(argv))


def _normalize_argv(argv: list[str]) -> list[str]:
    """Accept the C-compiler spellings `-O3`, `-Idir`, `-DX=1`, `-march=native`."""
    out: list[str] = []
    for arg in argv:
        if len(arg) == 3 and arg.startswith("-O") and arg[2].isdigit():
            out += ["-O", arg[2]]
        elif arg.startswith("-ffp-contract="):
            out += ["--fp-contract", arg.split("=", 1)[1]]
        elif arg.startswith("-march="):
            out += ["--march", arg.split("=", 1)[1]]
        elif arg.startswith(("-I", "-D")) and len(arg) > 2:
            out += [arg[:2], arg[2:]]
        else:
            out.append(arg)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "serve":
        return _serve(argv[1:])
    args = parse_args(argv)
    try:
        if args.command == "tc":
            return _tc(args)
        return _build(args, options_from_args(args))
    except CompileError as exc:
        print(exc.format(), file=sys.stderr)
        return 1


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
    from polyflow.options import Options

    path = Path(args.source)
    try:
        source = path.read_text()
    except OSError as exc:
        raise CompileError(f"cannot read '{path}': {exc.strerror}", file=str(path)) from None
    options = Options(opt_level=args.opt_level, march=args.march, **_polyhedral_options(args))
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

    source = Path(args.source)
    default = {
        "exe": source.with_suffix(""),
        "obj": source.with_suffix(".o"),
        "llvm": source.with_suffix(".ll"),
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
        if report.raising is not None:  # stderr, so that `-o -` output stays clean
            print(report.raising.format(), file=sys.stderr)
        if args.report:
            for note in report.notes:
                print(f"note: {note}", file=sys.stderr)
        if to_stdout:
            sys.stdout.write(output.read_text())
    if args.time:
        for stage, seconds in report.timings.items():
            print(f"{stage:>30}: {seconds * 1000:8.1f} ms", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
