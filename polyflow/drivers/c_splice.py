"""Rewrite a C file so that functions compiled by polyflow forward to their compiled versions."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from polyflow.frontend.c import CFunction, CGlobal
from polyflow.frontend.c_types import Array, Scalar, Void
from polyflow.ir.names import CABI_PREFIX, TRAMPOLINE_PREFIX


@dataclass(frozen=True)
class BodySpan:
    open_brace: int
    close_brace: int


def _skip_literal_or_comment(text: str, i: int) -> int:
    """If a comment or string/char literal starts at `i`, the offset just past it, else `i`."""
    if text.startswith("//", i):
        end = text.find("\n", i)
        return len(text) if end < 0 else end
    if text.startswith("/*", i):
        end = text.find("*/", i + 2)
        return len(text) if end < 0 else end + 2
    if text[i] in "\"'":
        quote, j = text[i], i + 1
        while j < len(text) and text[j] != quote:
            j += 2 if text[j] == "\\" else 1
        return j + 1
    return i


@functools.lru_cache(maxsize=4)
def _line_starts(source: str) -> tuple[int, ...]:
    """The offset of each line of `source`, and its length at the end (computed once per
    source: a file of thousands of functions asks for each)."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return tuple(starts)


def find_function_body(
    source: str, name: str, line: int, *, old_style: bool = False
) -> BodySpan | None:
    """The braces of the definition of `name` whose declarator is on `line` (1-based), if found.
    `old_style`: a K&R definition, whose parameter declarations (with their `;`) come between
    the `)` and the `{`."""
    starts = _line_starts(source)
    if not 0 < line < len(starts):
        return None
    start = starts[line - 1]
    match = re.compile(rf"\b{re.escape(name)}\s*\(").search(source, start, starts[line])
    if match is None:
        return None
    i, depth, open_brace = match.end() - 1, 0, -1
    while i < len(source):
        j = _skip_literal_or_comment(source, i)
        if j != i:
            i = j
            continue
        c = source[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == ";" and depth == 0 and not old_style:
            return None  # a prototype, not the definition
        elif c == "{" and depth == 0:
            open_brace = i
            break
        i += 1
    if open_brace < 0:
        return None
    return _matching_brace(source, open_brace)


def find_definition(text: str, name: str, *, old_style: bool = False) -> BodySpan | None:
    """The braces of the definition of `name` in preprocessed C `text` (no comments; names
    spelled out, as a macro that makes function names expands them): the first `name(` at
    file scope that a `{` follows (after the parameters, and an old-style definition's
    declarations), not a `;` at file scope."""
    pattern = re.compile(rf"\b{re.escape(name)}\s*\(")
    depth, i = 0, 0
    while i < len(text):
        j = _skip_literal_or_comment(text, i)
        if j != i:
            i = j
            continue
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "#" and (i == 0 or text[i - 1] == "\n"):  # a line marker or a pragma
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif depth == 0 and (match := pattern.match(text, i)) and (
            i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")
        ):
            span = _braces_after(text, match.end() - 1, old_style)
            if span is not None:
                return span
            i = match.end()
            continue
        i += 1
    return None


def _braces_after(text: str, open_paren: int, old_style: bool) -> BodySpan | None:
    """The body after a declarator's parameter list starting at `open_paren`, if the `{` comes
    before a `;`, `=` or `,` outside parentheses (an old-style definition's parameter
    declarations come between: `old_style` lets them pass)."""
    i, depth = open_paren, 0
    while i < len(text):
        j = _skip_literal_or_comment(text, i)
        if j != i:
            i = j
            continue
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif depth == 0 and c in ";=," and not old_style:
            return None  # a declaration (prototype, variable), not the definition
        elif depth == 0 and c == "{":
            return _matching_brace(text, i)
        i += 1
    return None


def _matching_brace(text: str, open_brace: int) -> BodySpan | None:
    i, depth = open_brace, 0
    while i < len(text):
        j = _skip_literal_or_comment(text, i)
        if j != i:
            i = j
            continue
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return BodySpan(open_brace, i)
        i += 1
    return None


# `# 12 "file.c" 2` (what the preprocessor writes) or `#line 12`
_LINE_MARKER = re.compile(r"#\s*(?:line\s+)?\d+")


def _c_type(t: Scalar | Array | Void) -> str:
    if isinstance(t, Void):
        return "void"
    return "void *" if isinstance(t, Array) else t.c_spelling


def prototype(fn: CFunction, globals_: dict[str, CGlobal]) -> str:
    # `const void *`: every object pointer, const or not, converts to it with no cast and no
    # warning, so that the forwarding body compiles under the user's -Wall -Wextra -Werror
    params = [_pointer_or(t) for _, t in fn.params] + ["const void *" for _ in fn.globals]
    return f"extern {_c_type(fn.ret)} {CABI_PREFIX}{fn.name}({', '.join(params) or 'void'});"


def _pointer_or(t: Scalar | Array) -> str:
    return "const void *" if isinstance(t, Array) else _c_type(t)


def forwarding_body(fn: CFunction, globals_: dict[str, CGlobal]) -> str:
    args = [p for p, _ in fn.params]
    args += [g if isinstance(globals_[g].type, Array) else f"&{g}" for g in fn.globals]
    call = f"{CABI_PREFIX}{fn.name}({', '.join(args)})"
    return f"{{ {'' if isinstance(fn.ret, Void) else 'return '}{call}; }}"


def _gradient_parameters(fn: CFunction) -> str:
    # arrays as `const void *` (what the function reads) and shadows as `void *` (what it
    # writes): any object pointer converts to them, so callers of every array type compile
    return ", ".join(
        f"{'void *' if name in fn.shadows else _pointer_or(t)}{name}"
        if isinstance(t, Array)
        else f"{_c_type(t)} {name}"
        for name, t in fn.params
    ) or "void"


def gradient_definition(fn: CFunction, globals_: dict[str, CGlobal]) -> str:
    """`f_grad` in C: forwards its arguments to the compiled `__polyflow_f_grad`."""
    return f"void {fn.name}({_gradient_parameters(fn)}) {forwarding_body(fn, globals_)}"


def gradient_header(gradients: list[CFunction], filename: str) -> str:
    """A header declaring the gradient functions `gradients` (compiled from `filename`)."""
    guard = "POLYFLOW_GRAD_" + re.sub(r"\W", "_", Path(filename).name).upper()
    lines = [
        f"/* Reverse-mode gradients of functions of {Path(filename).name}, compiled by polyflow",
        "   (--grad). Each active argument is followed by its shadow: an array's shadow has its",
        "   shape; a float scalar's is a pointer to one value. On entry a shadow holds the seed",
        "   (the adjoint of the array's final value: zeros for an input); on return, the",
        "   adjoint of its value on entry is added. A float result's seed comes last. The",
        "   arrays of one call must not overlap. */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        *(f"void {fn.name}({_gradient_parameters(fn)});" for fn in gradients),
        "#ifdef __cplusplus",
        "}",
        "#endif",
        f"#endif /* {guard} */",
    ]
    return "\n".join(lines) + "\n"


def trampoline(fn: CFunction) -> str:
    """A C-ABI entry into a function the C compiler builds, for compiled code to call."""
    params = ", ".join(f"{_c_type(t)} a{i}" for i, (_, t) in enumerate(fn.params)) or "void"
    args = ", ".join(f"a{i}" for i in range(len(fn.params)))
    ret = "" if isinstance(fn.ret, Void) else "return "
    return f"{_c_type(fn.ret)} {TRAMPOLINE_PREFIX}{fn.name}({params}) {{ {ret}{fn.name}({args}); }}"


# The trampolines are polyflow's code, appended to the user's: the warnings a strict build turns
# on (-Wmissing-prototypes, -Wc++-compat's void * conversions, ...) are not the user's to fix.
# -Wpragmas first: a compiler that does not know one of the others must not warn about it.
_QUIET_WARNINGS = (
    "-Wpragmas", "-Wmissing-prototypes", "-Wmissing-declarations", "-Wc++-compat",
    "-Wcast-qual", "-Wpedantic", "-Wconversion", "-Wsign-conversion", "-Wlong-long",
    "-Wstrict-prototypes", "-Wredundant-decls", "-Wbad-function-cast", "-Wtraditional",
    "-Wdeclaration-after-statement", "-Wsuggest-attribute=noreturn",
)  # fmt: skip


def _quietly(code: str) -> str:
    ignored = "".join(f'#pragma GCC diagnostic ignored "{w}"\n' for w in _QUIET_WARNINGS)
    return f"#pragma GCC diagnostic push\n{ignored}{code}\n#pragma GCC diagnostic pop\n"


def splice(
    source: str,
    filename: str,
    bodies: dict[str, tuple[CFunction, BodySpan]],
    globals_: dict[str, CGlobal],
    trampolines: dict[str, CFunction] | None = None,
    gradients: list[CFunction] | None = None,
) -> str:
    """The source with each listed body replaced by a call to `__polyflow_<name>` (line numbers
    kept), and trampolines into C-compiled functions and the C gradient functions
    (`gradient_definition`) appended."""
    pieces: list[str] = []
    pos = 0
    for fn, span in sorted(bodies.values(), key=lambda item: item[1].open_brace):
        pieces.append(source[pos : span.open_brace])
        original = source[span.open_brace : span.close_brace + 1]
        # Keep the line count so that later diagnostics still point at the right lines (and a
        # preprocessed body's line markers, which renumber what follows).
        kept = [line if _LINE_MARKER.match(line) else "" for line in original.split("\n")[1:]]
        pieces.append(forwarding_body(fn, globals_) + "".join("\n" + k for k in kept))
        pos = span.close_brace + 1
    pieces.append(source[pos:])
    if trampolines:
        pieces.append("\n" + _quietly("\n".join(trampoline(fn) for fn in trampolines.values())))
    if gradients:
        pieces.append(
            "\n" + _quietly("\n".join(gradient_definition(fn, globals_) for fn in gradients))
        )
    forwarded = [fn for fn, _ in bodies.values()] + list(gradients or [])
    header = _quietly("\n".join(prototype(fn, globals_) for fn in forwarded))
    escaped = filename.replace("\\", "\\\\").replace('"', '\\"')
    # preprocessed text (a .i file) takes only line markers, and has its own from the start
    marker = "" if source.startswith("# ") else f'#line 1 "{escaped}"\n'
    return f"{header}\n{marker}" + "".join(pieces)
