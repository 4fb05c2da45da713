"""C source → pycparser AST: syntax check with the system compiler, preprocess, parse."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, NoReturn

import pycparser_fake_libc
from pycparser import c_ast, c_parser

from polyflow.errors import CompileError, SourcePosition
from polyflow.frontend.initializers import elide_large_initializers
from polyflow.options import Options

_GCC_DIAG = re.compile(
    r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?:fatal )?error: (?P<msg>.*)$", re.M
)
# A macro of the file that redefines one given on the command line (-D): the file's wins.
_REDEFINED = re.compile(r'^(?P<file>[^:\n]+):(?P<line>\d+)(?::\d+)?: warning: "(?P<name>\w+)" redefined', re.M)
_PYCPARSER_DIAG = re.compile(r"^(?P<file>.*?):(?P<line>\d+):(?P<col>\d+): (?P<msg>.*)$")


_C_LOCALE = {**os.environ, "LC_ALL": "C"}  # plain ASCII quotes in the compiler's messages


@dataclass(frozen=True)
class ParsedC:
    """A parsed translation unit together with the text it came from."""

    ast: c_ast.FileAST
    filename: str
    source: str
    # what cc warned about that changes what the user asked for: (position, message)
    warnings: list[tuple[SourcePosition, str]] = field(default_factory=list)


def preprocessor_flags(options: Options, source_dir: Path | None) -> list[str]:
    flags = [f"-I{d}" for d in options.include_dirs]
    if source_dir is not None:
        flags.append(f"-I{source_dir}")
    flags += [f"-D{d}" for d in options.defines]
    return flags


def _run_c_compiler(cmd: list[str], source: str, filename: str) -> str:
    """Run the C compiler on `source`; its first error becomes a CompileError at its position."""
    proc = subprocess.run(
        cmd, input=_with_filename(source, filename), capture_output=True, text=True, env=_C_LOCALE
    )
    if proc.returncode == 0:
        return proc.stdout
    _raise_c_error(proc.stderr, source, filename)


def _raise_c_error(stderr: str, source: str, filename: str) -> NoReturn:
    """The C compiler's first error as a CompileError at its position."""
    match = _GCC_DIAG.search(stderr)
    if match is None:
        raise CompileError(stderr.strip() or "the C compiler rejected the input", file=filename)
    raise CompileError(
        match["msg"],
        file=match["file"],
        line=int(match["line"]),
        column=int(match["col"]),
        source_line=_line_of(source, int(match["line"])) if match["file"] == filename else None,
    )


def check_syntax(source: str, filename: str, options: Options, source_dir: Path | None) -> None:
    """Run the system C compiler's front end so that C errors carry its precise positions."""
    _run_c_compiler(_syntax_command(options, source_dir), source, filename)


def _syntax_command(options: Options, source_dir: Path | None, given: str = "-") -> list[str]:
    """cc's syntax check of the file `given` ('-': standard input)."""
    flags = preprocessor_flags(options, source_dir)
    return [options.cc, "-fsyntax-only", "-std=gnu11", "-x", "c", given, *flags]


def parse_c(
    source: str,
    filename: str,
    options: Options,
    source_dir: Path | None = None,
    *,
    elide_initializers: bool = False,
) -> ParsedC:
    """Preprocess with pycparser's fake libc headers and parse; errors become CompileError.
    With `elide_initializers`, large numeric tables are not parsed (`initializers.py`: for a
    build, whose globals the C compiler defines)."""
    if shutil.which(options.cc) is None:
        raise CompileError(
            f"the C compiler '{options.cc}' was not found (--cc names it; default: cc)",
            file=filename,
        )
    # cc's syntax check runs beside the preprocessing and parsing (on a 3.7 MB table it takes a
    # second of its own); its diagnostics, which carry cc's precise positions, come first. A
    # process of its own, reading a file, not a thread: under a memory limit (the service's) a
    # thread could start and die before it said so, and the parse then waited for it forever.
    with tempfile.TemporaryDirectory(prefix="polyflow-syntax-") as tmp:
        given = Path(tmp) / "input.c"
        given.write_text(_with_filename(source, filename))
        errors = (Path(tmp) / "errors.txt").open("w+")
        try:
            checking = subprocess.Popen(
                _syntax_command(options, source_dir, str(given)),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                env=_C_LOCALE,
            )
        except OSError:  # no process to be had: one after the other
            errors.close()
            check_syntax(source, filename, options, source_dir)
            checking = None
        try:
            ast = _preprocess_and_parse(source, filename, options, source_dir, elide_initializers)
        except CompileError:
            _finish_check(checking, errors, source, filename)
            raise
        except BaseException:  # not the input's fault: stop cc, leave nothing behind
            if checking is not None:
                checking.kill()
                checking.wait()
                errors.close()
            raise
        warnings = _finish_check(checking, errors, source, filename)
    return ParsedC(ast=ast, filename=filename, source=source, warnings=warnings)


def _finish_check(
    checking: subprocess.Popen[bytes] | None, errors: IO[str], source: str, filename: str
) -> list[tuple[SourcePosition, str]]:
    """Wait for cc's syntax check; its first error, if any, as a CompileError; otherwise the
    warnings that matter (a file's macro that overrides a -D)."""
    if checking is None:
        return []
    status = checking.wait()
    errors.seek(0)
    message = errors.read()
    errors.close()
    if status != 0:
        _raise_c_error(message, source, filename)
    return [
        (
            SourcePosition(m["file"], int(m["line"]), 0),
            f"the file's #define of '{m['name']}' overrides -D {m['name']}=... given to polyflow",
        )
        for m in _REDEFINED.finditer(message)
    ]


# Constants of the standard headers that loop nests use, by header. The parse reads pycparser's
# fake headers, which define none of them: their values come from the real headers (`cc -dM
# -E`), as plain C expressions, in headers of the same names that include the fake ones
# (`#include_next`), so a constant exists exactly where the source includes its header and the
# compiled code sees the value cc's does.
HEADER_CONSTANTS = {
    "float.h": ("DBL_MAX", "DBL_MIN", "DBL_EPSILON", "FLT_MAX", "FLT_MIN", "FLT_EPSILON"),
    "limits.h": (
        "CHAR_BIT", "SCHAR_MIN", "SCHAR_MAX", "UCHAR_MAX", "CHAR_MIN", "CHAR_MAX", "SHRT_MIN",
        "SHRT_MAX", "USHRT_MAX", "INT_MIN", "INT_MAX", "UINT_MAX", "LONG_MIN", "LONG_MAX",
        "ULONG_MAX", "LLONG_MIN", "LLONG_MAX", "ULLONG_MAX",
    ),
    "stdint.h": (
        "SIZE_MAX", "INT8_MIN", "INT8_MAX", "UINT8_MAX", "INT16_MIN", "INT16_MAX", "UINT16_MAX",
        "INT32_MIN", "INT32_MAX", "UINT32_MAX", "INT64_MIN", "INT64_MAX", "UINT64_MAX",
    ),
    "math.h": (
        "M_E", "M_LOG2E", "M_LOG10E", "M_LN2", "M_LN10", "M_PI", "M_PI_2", "M_PI_4", "M_1_PI",
        "M_2_PI", "M_2_SQRTPI", "M_SQRT2", "M_SQRT1_2", "INFINITY", "HUGE_VAL", "HUGE_VALF",
    ),
}  # fmt: skip
_HEADERS = "".join(f"#include <{header}>\n" for header in HEADER_CONSTANTS)
# gcc's built-in infinities, as literals that overflow to them
_BUILTINS = {
    "__builtin_inff ()": "(1e39f)",
    "__builtin_inff()": "(1e39f)",
    "__builtin_huge_valf ()": "(1e39f)",
    "__builtin_huge_valf()": "(1e39f)",
    "__builtin_huge_val ()": "(1e309)",
    "__builtin_huge_val()": "(1e309)",
}
# What a resolved value may hold: numbers (with C's suffixes), casts to arithmetic types,
# operators and parentheses.
_PLAIN_VALUE = re.compile(
    r"^[\s()+\-*/~0-9a-fA-FxXuUlL.e]*"
    r"(?:\((?:double|float|int|long|unsigned|short|char|signed| )+\)[\s()+\-*/~0-9a-fA-FxXuUlL.e]*)*$"
)


def is_stand_in_header(path: str) -> bool:
    """Whether `path` is one of the stand-in system headers the parse reads (pycparser's fake
    libc, header_constants' overlay) rather than a header of the project."""
    return path.startswith(str(pycparser_fake_libc.directory)) or "/polyflow-headers-" in path


@functools.cache
def header_constants(cc: str) -> str:
    """A directory of float.h, limits.h, stdint.h and math.h that include pycparser's fake ones
    and define each of HEADER_CONSTANTS the real headers (`cc`'s) give a plain value. Named by
    its contents, so every process of a build shares one directory instead of leaving its own."""
    macros: dict[str, str] = {}
    try:
        done = subprocess.run(
            [cc, "-dM", "-E", "-x", "c", "-"],
            input=_HEADERS,
            capture_output=True,
            text=True,
            env=_C_LOCALE,
            timeout=60,
        )
        for line in done.stdout.splitlines():
            parts = line.split(None, 2)
            if len(parts) == 3 and parts[0] == "#define" and "(" not in parts[1]:
                macros[parts[1]] = parts[2]
    except (OSError, subprocess.TimeoutExpired):
        pass  # no constants: functions that use them are left to cc, as before
    files = {"omp.h": _OMP_H}
    for header, names in HEADER_CONSTANTS.items():
        lines = [f"#include_next <{header}>"]
        for name in names:
            value = _resolve(macros.get(name), macros)
            if value is not None:
                lines.append(f"#ifndef {name}\n#define {name} {value}\n#endif")
        files[header] = "\n".join(lines) + "\n"
    digest = hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()[:16]
    final = Path(tempfile.gettempdir()) / f"polyflow-headers-{os.getuid()}-{digest}"
    if all((final / name).is_file() for name in files):
        return str(final)
    staging = Path(tempfile.mkdtemp(prefix="polyflow-headers-staging-"))
    for name, text in files.items():
        (staging / name).write_text(text)
    try:
        staging.rename(final)  # atomic: a process racing us may have made it first
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not all((final / name).is_file() for name in files):
            final.mkdir(parents=True, exist_ok=True)  # a broken leftover: refill it in place
            for name, text in files.items():
                (final / name).write_text(text)
    return str(final)


# <omp.h> for the parse (-fopenmp builds include it; pycparser has none): the runtime's types
# and functions as declarations. A function that calls them calls the real runtime; one with
# `#pragma omp` stays with cc (c_pragmas.py).
_OMP_H = """#ifndef POLYFLOW_OMP_H
#define POLYFLOW_OMP_H
typedef struct { unsigned char _x[8]; } omp_lock_t;
typedef struct { unsigned char _x[16]; } omp_nest_lock_t;
typedef enum omp_sched_t { omp_sched_static = 1, omp_sched_dynamic = 2,
  omp_sched_guided = 3, omp_sched_auto = 4 } omp_sched_t;
int omp_get_num_threads(void); int omp_get_thread_num(void); int omp_get_max_threads(void);
void omp_set_num_threads(int); int omp_get_num_procs(void); int omp_in_parallel(void);
void omp_set_dynamic(int); int omp_get_dynamic(void); void omp_set_nested(int);
int omp_get_nested(void); int omp_get_thread_limit(void); int omp_get_level(void);
void omp_set_schedule(omp_sched_t, int); void omp_get_schedule(omp_sched_t *, int *);
double omp_get_wtime(void); double omp_get_wtick(void);
void omp_init_lock(omp_lock_t *); void omp_destroy_lock(omp_lock_t *);
void omp_set_lock(omp_lock_t *); void omp_unset_lock(omp_lock_t *); int omp_test_lock(omp_lock_t *);
void omp_init_nest_lock(omp_nest_lock_t *); void omp_destroy_nest_lock(omp_nest_lock_t *);
void omp_set_nest_lock(omp_nest_lock_t *); void omp_unset_nest_lock(omp_nest_lock_t *);
int omp_test_nest_lock(omp_nest_lock_t *);
#endif
"""


def _resolve(value: str | None, macros: dict[str, str], depth: int = 0) -> str | None:
    """`value` with its macros expanded, as a plain C expression (see _PLAIN_VALUE), or None."""
    if value is None or depth > 8:
        return None
    for builtin, literal in _BUILTINS.items():
        value = value.replace(builtin, literal)
    names = set(re.findall(r"\b[A-Za-z_]\w*\b", value)) - _TYPE_WORDS
    names = {n for n in names if not re.fullmatch(r"[0-9a-fA-FxXuUlL]+|e", n)}
    for name in names:
        inner = _resolve(macros.get(name), macros, depth + 1)
        if inner is None:
            return None
        value = re.sub(rf"\b{name}\b", f"({inner})", value)
    # a long double literal (1.79e+308L): polyflow has no long double; the cast makes it double
    value = re.sub(r"(\d[\d.]*[eE][+-]?\d+|\d+\.\d*)L\b", r"\1", value)
    return value if _PLAIN_VALUE.match(value) else None


_TYPE_WORDS = {"double", "float", "int", "long", "unsigned", "short", "char", "signed"}


# Flags of the build that change what the preprocessor makes of the source (-U, the C dialect's
# macros, -fopenmp's _OPENMP, -pthread's _REENTRANT): the parse sees the code cc compiles.
_PREPROCESSOR_CFLAGS = ("-U", "-std=", "-ansi", "-fopenmp", "-pthread")


def _preprocess_and_parse(
    source: str,
    filename: str,
    options: Options,
    source_dir: Path | None,
    elide_initializers: bool,
) -> c_ast.FileAST:
    cmd = [
        options.cc,
        "-E",
        "-std=gnu11",
        "-nostdinc",
        f"-I{header_constants(options.cc)}",
        f"-I{pycparser_fake_libc.directory}",
        "-D__attribute__(x)=",
        "-D__extension__=",
        "-D__restrict=restrict",
        "-D__inline=inline",
        "-x",
        "c",
        "-",
        *preprocessor_flags(options, source_dir),
        *[f for f in options.cflags if f.startswith(_PREPROCESSOR_CFLAGS)],
    ]
    preprocessed = _run_c_compiler(cmd, source, filename)
    if elide_initializers:
        preprocessed = elide_large_initializers(preprocessed)
    try:
        ast = c_parser.CParser().parse(preprocessed, filename)
    except c_parser.ParseError as exc:
        match = _PYCPARSER_DIAG.match(str(exc))
        if match:
            line = int(match["line"])
            raise CompileError(
                f"syntax error ({match['msg']})",
                file=match["file"],
                line=line,
                column=int(match["col"]),
            ) from None
        raise CompileError(f"syntax error: {exc}", file=filename) from None
    return ast


def _with_filename(source: str, filename: str) -> str:
    escaped = filename.replace("\\", "\\\\").replace('"', '\\"')
    return f'# 1 "{escaped}"\n{source}'


def _line_of(source: str, line: int) -> str | None:
    lines = source.splitlines()
    return lines[line - 1] if 0 < line <= len(lines) else None
