"""How compiled kernels show themselves in notebooks and terminals.

Jupyter calls `_repr_html_` / `_repr_markdown_` of a TC function or a `compile_c` result; those
gather plain data into a `KernelView` and `render_html` / `render_markdown` here turn it into
text: the signature with the inferred ranges, one row per source loop of the compile report
(raised? parallel? tiled? micro-kernel? why not), the options that differ from the defaults,
the warnings, and each stage's IR, highlighted, in a collapsible block (the HTML carries its
styles inline, so a saved notebook shows it anywhere). `show(fn, stage)` prints one stage with
colours: HTML in a notebook, ANSI in a terminal, plain text into a file or pipe.

Pygments 2.21 has no MLIR lexer: `MlirLexer` is ours; LLVM IR, PTX and C use Pygments' own.
No MLIR, TC or driver code here: the renderers take names, strings, a `CompileReport`, a dict
of stage texts and an `Options`.
"""

from __future__ import annotations

import html
import re
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TextIO

from pygments import highlight
from pygments.formatters import HtmlFormatter, TerminalFormatter
from pygments.lexer import Lexer, RegexLexer, bygroups, inherit, words
from pygments.lexers import CLexer, TextLexer
from pygments.lexers import LlvmLexer as _PygmentsLlvmLexer
from pygments.lexers import PtxLexer as _PygmentsPtxLexer
from pygments.styles.default import DefaultStyle
from pygments.token import (
    Comment,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    String,
    Whitespace,
)

from polyflow.options import Options
from polyflow.report import CompileReport, Remark

__all__ = [
    "KernelView",
    "LlvmLexer",
    "LoopRow",
    "MlirLexer",
    "PtxLexer",
    "TcLexer",
    "definition_header",
    "highlight_ansi",
    "highlight_html",
    "lexer_for",
    "loop_rows",
    "options_diff",
    "render_html",
    "render_markdown",
    "show",
    "stage_text",
]

# The stage a kernel shows by default: the affine IR after the polyhedral stage.
DEFAULT_STAGE = "affine-opt"
# A stage longer than this is cut in the rich repr (at a line end), with a pointer to `show`:
# highlighted HTML is ~6x the text, and a notebook should stay small enough to open.
MAX_STAGE_CHARS = 16_000

# ----- lexers

_ID = r"[A-Za-z_$.\-0-9]+"  # the characters of MLIR's suffix ids (%c1_5, ^bb0, @mm_kernel)


_MLIR_TYPES = ("memref", "vector", "tensor", "complex", "tuple", "function", "ptr")
_MLIR_ATTRIBUTES = ("affine_map", "affine_set", "dense", "dense_resource", "array", "sparse",
                    "strided", "unit", "distinct")  # fmt: skip
_MLIR_KEYWORDS = ("module", "attributes", "to", "step", "iter_args", "ins", "outs", "kernel",
                  "blocks", "threads", "args", "in", "private", "public", "nested", "floordiv",
                  "ceildiv", "mod", "symbol", "offset", "strides")  # fmt: skip
_TC_TYPES = ("float", "double", "half", "bool", "int8", "int16", "int32", "int64", "uint8",
             "uint16", "uint32", "uint64", "float16", "float32", "float64")  # fmt: skip


class MlirLexer(RegexLexer):
    """MLIR's textual form: ops (`affine.for`), SSA values (`%x`, `%0#1`), block labels,
    symbols, attribute and type aliases (`#map`, `!llvm.ptr`), builtin types, shapes
    (`64x32xf32`), numbers, strings, locations and comments."""

    name = "MLIR"
    aliases: ClassVar[list[str]] = ["mlir"]
    filenames: ClassVar[list[str]] = ["*.mlir"]
    mimetypes: ClassVar[list[str]] = ["text/x-mlir"]

    tokens: ClassVar[dict[str, list[Any]]] = {
        "root": [
            (r"\s+", Whitespace),
            (r"//.*?$", Comment.Single),
            (r'"(?:\\.|[^"\\])*"', String.Double),
            (rf"\^{_ID}", Name.Label),
            (rf"%{_ID}(?:#\d+)?", Name.Variable),
            (r'@"(?:\\.|[^"\\])*"', Name.Function),
            (rf"@{_ID}", Name.Function),
            (r"(loc)(\()", bygroups(Keyword.Pseudo, Punctuation)),
            (rf"#{_ID}", Name.Decorator),  # attribute aliases and dialect attributes
            (rf"!{_ID}", Keyword.Type),  # type aliases and dialect types
            (r"0x[0-9A-Fa-f]+\b", Number.Hex),
            (r"(?:(?:\d+|\?)x)+", Keyword.Type),  # the shape of memref<64x?xf32>
            (r"[-+]?\d+\.\d*(?:[eE][-+]?\d+)?", Number.Float),
            (r"[-+]?\d+[eE][-+]?\d+", Number.Float),
            (r"[-+]?\d+", Number.Integer),
            # an op (`arith.addf`, `memref.dim`, `llvm.mlir.constant`) or a dialect attribute
            (r"[A-Za-z_][\w$]*(?:\.[A-Za-z_][\w$]*)+", Name.Builtin),
            (r"(?:bf16|tf32|f8\w*|f16|f32|f64|f80|f128|index|none|[su]?i\d+)\b", Keyword.Type),
            (words(_MLIR_TYPES, suffix=r"\b"), Keyword.Type),
            (words(_MLIR_ATTRIBUTES, suffix=r"\b"), Name.Builtin),
            (r"(?:true|false|unknown)\b", Keyword.Constant),
            (words(_MLIR_KEYWORDS, suffix=r"\b"), Keyword),
            (r"[A-Za-z_][\w$]*", Name),
            (r"->|::|\.\.\.", Operator),
            (r"[=*+\-/?|&]", Operator),
            (r"[(){}\[\]<>,:]", Punctuation),
        ]
    }


class PtxLexer(_PygmentsPtxLexer):
    """Pygments' PTX lexer, which also reads guard predicates (`@%p1 bra`, `@!%p2`)."""

    tokens: ClassVar[dict[str, list[Any]]] = {
        "root": [(r"@!?%[\w$]+", Keyword.Pseudo), inherit]
    }


class LlvmLexer(_PygmentsLlvmLexer):
    """Pygments' LLVM IR lexer, which also reads the keywords of LLVM releases newer than
    its list (`captures(none)`, `or disjoint`, `zext nneg`, `memory(...)`): in LLVM IR a bare
    lower-case word is a keyword (names carry `%`, `@`, `!` or `#`)."""

    tokens: ClassVar[dict[str, list[Any]]] = {"root": [inherit, (r"[a-z_][a-z0-9_]*\b", Keyword)]}


class TcLexer(RegexLexer):
    """Tensor Comprehensions source: `def`, typed parameters, reductions (`+=!`), `where`
    clauses, numbers and `#` comments."""

    name = "Tensor Comprehensions"
    aliases: ClassVar[list[str]] = ["tc"]
    filenames: ClassVar[list[str]] = ["*.tc"]

    tokens: ClassVar[dict[str, list[Any]]] = {
        "root": [
            (r"\s+", Whitespace),
            (r"#.*?$", Comment.Single),
            (r"(def)(\s+)([A-Za-z_]\w*)", bygroups(Keyword, Whitespace, Name.Function)),
            (words(("def", "where", "in", "exists"), suffix=r"\b"), Keyword),
            (words(_TC_TYPES, suffix=r"\b"), Keyword.Type),
            (r"\b(?:max|min)=!?", Operator),  # reductions: max=!
            (r"\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\.\d+", Number.Float),
            (r"\d+", Number.Integer),
            (r"[A-Za-z_]\w*(?=\s*\()", Name.Function),
            (r"[A-Za-z_]\w*", Name),
            (r"[-+*/]=!?|->|==|!=|<=|>=|&&|\|\||[-+*/%<>=!?:.^]", Operator),
            (r"[(){}\[\],;]", Punctuation),
        ]
    }


def lexer_for(language: str) -> Lexer:
    """The lexer of a stage name or language: `llvm` (LLVM IR), `ptx`, `c`, `tc`, `text`;
    any other stage (`mlir`, `affine`, `affine-opt`, `grad`, `gpu`, `llvm-dialect`) is MLIR."""
    if language == "llvm":
        return LlvmLexer()
    if language == "ptx":
        return PtxLexer()
    if language == "c":
        return CLexer()
    if language == "tc":
        return TcLexer()
    if language == "text":
        return TextLexer()
    return MlirLexer()


class _Style(DefaultStyle):
    """Pygments' default colours, with whitespace left unstyled (a span per blank would
    double the HTML of a stage)."""

    styles: ClassVar[dict[Any, str]] = {**DefaultStyle.styles, Whitespace: ""}


def highlight_html(text: str, language: str) -> str:
    """`text` highlighted as a `<pre>` block with inline styles (no stylesheet needed)."""
    formatter = HtmlFormatter(noclasses=True, nobackground=True, style=_Style)
    return str(highlight(text, lexer_for(language), formatter))


def highlight_ansi(text: str, language: str) -> str:
    """`text` with ANSI colours for a terminal."""
    return str(highlight(text, lexer_for(language), TerminalFormatter()))


def guess_language(text: str) -> str:
    """`llvm` for LLVM IR, `ptx` for PTX, else `mlir`."""
    if re.search(r"^\s*(?:\.version|\.target)\s", text, re.M):
        return "ptx"
    if re.search(r"^(?:; ModuleID|define |declare |target (?:datalayout|triple))", text, re.M):
        return "llvm"
    return "mlir"


# ----- the per-loop table


@dataclass
class LoopRow:
    """What became of the loops at one source position (a C loop, or a TC statement's loops)."""

    function: str
    where: str  # line:col (file:line:col outside the main file; "-" for the function)
    raised: str  # yes / no / k of n
    parallel: str
    tiled: str
    micro_kernel: str
    why_not: list[str] = field(default_factory=list)
    line: int = 0
    column: int = 0


_SCHEDULE_REASONS = ("untiled", "source-order", "not-scheduled", "unfused", "schedule-note")


def _where(remark: Remark, main_file: str | None) -> str:
    position = remark.position
    if position is None:
        return "-"
    if position.file in (main_file, "<tc>", "<input>") and position.line > 0:
        return f"{position.line}:{position.column}" if position.column > 0 else str(position.line)
    return remark.where


# A loop nest of a C function: (function, line, column of its outermost loop, its last line).
Nest = tuple[str, int, int, int]


def loop_rows(
    report: CompileReport,
    *,
    polyhedral: bool = True,
    main_file: str | None = None,
    nests: Sequence[Nest] = (),
    reassociation: bool = False,
) -> list[LoopRow]:
    """One row per source position of a loop in `report` (raising's `loop` remarks; a TC
    statement's loops share one), or per loop nest of `nests` (the loops inside one share its
    row, as the polyhedral stage's results do: a band is tiled, a loop of it parallel), in
    source order per function. A schedule remark (tiled, parallel-loop, micro-kernel, why not)
    stands at its scop's first statement: it goes to the row there, else to the next loop of
    its function, else to its last; a GPU kernel's loops run in parallel on the GPU. Without
    `polyhedral` (opt_level < 3) the schedule columns say `off (-O3)`; without
    `reassociation` a loop carrying a reduction that runs sequentially says why."""
    rows: dict[tuple[str, int, int], LoopRow] = {}
    loops: dict[tuple[str, int, int], list[Remark]] = {}

    def key(r: Remark) -> tuple[str, int, int]:
        p = r.position
        function = r.function or "?"
        if p is None:
            return (function, 0, 0)
        for name, line, column, last in nests:
            if name == function and line <= p.line <= last and p.file in (main_file, None):
                return (name, line, column)
        return (function, p.line, p.column)

    def new_row(r: Remark) -> LoopRow:
        k = key(r)
        where = f"{k[1]}:{k[2]}" if k != (r.function or "?", *_line_column(r)) else None
        row = LoopRow(k[0], where or _where(r, main_file), "-", "-", "-", "-", line=k[1],
                      column=k[2])  # fmt: skip
        rows[k] = row
        return row

    for r in report.select(kind="loop"):
        if key(r) not in rows:
            new_row(r)
        loops.setdefault(key(r), []).append(r)

    def row_for(r: Remark, *, after: bool) -> LoopRow:
        """The row of `r`'s position; else the next (`after`) or the enclosing loop's row of
        its function; else a new row at `r`."""
        k = key(r)
        if k in rows:
            return rows[k]
        same = sorted((kk for kk in rows if kk[0] == k[0]), key=lambda kk: kk[1:])
        if same:
            following = [kk for kk in same if kk[1:] >= k[1:]]
            preceding = [kk for kk in same if kk[1:] <= k[1:]]
            if after:
                return rows[following[0] if following else same[-1]]
            return rows[preceding[-1] if preceding else same[0]]
        return new_row(r)

    for k, remarks in loops.items():
        row = rows[k]
        raised = [r for r in remarks if r.data.get("raised")]
        if len(raised) == len(remarks):
            row.raised = "yes"
        elif raised:
            row.raised = f"{len(raised)} of {len(remarks)} loops"
        else:
            row.raised = "no"
        merged = len({_line_column(r) for r in remarks}) > 1
        for r in remarks:
            if not r.data.get("raised") and r.data.get("reason"):
                at = f"{_where(r, main_file)}: " if merged else ""
                row.why_not.append(f"{at}{r.data['reason']}")
    for r in report.select(kind="unraised"):
        reason = r.data.get("reason") or r.message
        row_for(r, after=False).why_not.append(f"{r.data.get('construct') or 'access'}: {reason}")
    for r in report.select(kind="not-raised"):
        row = row_for(r, after=True)
        row.raised = "no"
        row.why_not.append(str(r.data.get("reason") or r.message))

    tiled: dict[int, list[str]] = {}
    parallel: dict[int, int] = {}
    micro: dict[int, list[str]] = {}
    float_reduction: set[int] = set()
    gpu: dict[int, int] = {}
    for r in report.remarks:
        if r.stage == "gpu" and r.kind != "gpu-resources":
            row = row_for(r, after=True)
            if r.kind == "gpu-kernel":
                gpu[id(row)] = gpu.get(id(row), 0) + 1
            else:  # a loop not mapped, a function left on the host
                row.why_not.append(r.message)
            continue
        if r.stage != "schedule" or r.kind == "rescheduled":
            continue
        row = row_for(r, after=True)
        if r.kind == "tiled":
            sizes = r.data.get("sizes")
            text = "x".join(str(s) for s in sizes) if isinstance(sizes, list) and sizes else "yes"
            if r.data.get("wavefront"):
                text += " (wavefront)"
            tiled.setdefault(id(row), []).append(text)
        elif r.kind == "parallel-loop":
            parallel[id(row)] = parallel.get(id(row), 0) + 1
        elif r.kind == "micro-kernel":
            d = r.data
            micro.setdefault(id(row), []).append(
                f"{d.get('rows')} rows x {d.get('vectors')} vectors of {d.get('lanes')} "
                f"{d.get('element') or ''}".rstrip()
            )
        elif r.kind == "float-reduction":
            float_reduction.add(id(row))
            row.why_not.append(r.message)
        elif r.kind in _SCHEDULE_REASONS or r.severity != "remark":
            row.why_not.append(r.message)

    carries = {
        k: sorted({str(kind) for r in remarks for kind in _list(r.data.get("reductions"))})
        for k, remarks in loops.items()
    }
    for k, row in rows.items():
        if row.raised == "no" or not polyhedral:
            off = "off (-O3)" if not polyhedral and row.raised != "no" else "-"
            row.parallel = row.tiled = row.micro_kernel = off
            continue
        count = parallel.get(id(row), 0)
        row.parallel = ("yes" if count == 1 else f"yes ({count} loops)") if count else "no"
        if id(row) in gpu:
            kernels = gpu[id(row)]
            row.parallel = "GPU kernel" if kernels == 1 else f"GPU ({kernels} kernels)"
        elif not count and id(row) in float_reduction:
            row.parallel = "no: float reduction"
        elif not count and carries.get(k) and not reassociation:
            row.parallel = "no: reduction"
            row.why_not.append(
                f"its loops carry a reduction ({', '.join(carries[k])}): a floating-point one "
                "runs in parallel only with -fassociative-math or -ffast-math"
            )
        row.tiled = ", ".join(tiled.get(id(row), [])) or "no"
        row.micro_kernel = ", ".join(micro.get(id(row), [])) or "no"
    return sorted(rows.values(), key=lambda row: (row.function, row.line, row.column))


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _line_column(r: Remark) -> tuple[int, int]:
    return (r.position.line, r.position.column) if r.position else (0, 0)


# ----- options


def options_diff(options: Options | None) -> dict[str, Any]:
    """The fields of `options` whose value differs from the field's default, in field order."""
    if options is None:
        return {}
    out: dict[str, Any] = {}
    for name, info in Options.model_fields.items():
        value = getattr(options, name)
        if value != info.get_default(call_default_factory=True):
            out[name] = value
    return out


# ----- the view of a kernel


@dataclass
class KernelView:
    """Everything a kernel's rich repr shows, as plain data."""

    name: str
    language: str  # "tc" or "c": how `signature` and `source` are highlighted
    signature: str  # `def mm(float(M,K) A, ...) -> (C)`, `void f(int n, double A[n][n])`
    details: list[str] = field(default_factory=list)  # inferred ranges, sizes of the last call
    report: CompileReport | None = None  # None: not compiled yet
    stages: Mapping[str, str] = field(default_factory=dict)  # stage → IR text, in order
    options: Options | None = None
    source: str | None = None
    file: str | None = None  # the main source file's name, as remark positions say it
    status: str | None = None  # e.g. "not specialized yet: ..." (shown first)
    cached: bool = False
    nests: list[Nest] = field(default_factory=list)  # C: one row per nest (see loop_rows)

    @property
    def polyhedral(self) -> bool:
        return self.options is None or (self.options.opt_level >= 3 and self.options.schedule)


_COLUMNS = ("function", "where", "raised", "parallel", "tiled", "micro-kernel", "why not")


def _row_cells(row: LoopRow) -> list[str]:
    why = "; ".join(dict.fromkeys(row.why_not))  # each reason once
    return [row.function, row.where, row.raised, row.parallel, row.tiled, row.micro_kernel, why]


def _options_text(view: KernelView) -> list[str]:
    return [f"{k}={v!r}" for k, v in options_diff(view.options).items()]


def _cut(text: str, limit: int) -> tuple[str, int]:
    """`text` cut at the last line end before `limit` characters, and the lines left out."""
    if len(text) <= limit:
        return text, 0
    end = text.rfind("\n", 0, limit)
    end = limit if end <= 0 else end + 1
    return text[:end], text[end:].count("\n") + (0 if text.endswith("\n") else 1)


def _lines(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def _kind(view: KernelView) -> str:
    kind = "a Tensor Comprehension" if view.language == "tc" else "a C function"
    if view.report is None:
        return f"{kind} (polyflow)"
    cached = " (from the compile cache)" if view.cached else ""
    return f"{kind} compiled by polyflow{cached}"


def render_html(view: KernelView) -> str:
    """The HTML of a kernel's rich repr (see the module docstring); every text escaped."""
    e = html.escape
    uid = f"polyflow-{uuid.uuid4().hex[:12]}"  # unique across the outputs of a saved notebook
    cell = "border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top"
    parts = [f'<div class="polyflow-kernel" id="{uid}">']
    parts.append(f"<p><b>{e(view.name)}</b>: {e(_kind(view))}</p>")
    if view.status:
        parts.append(f"<p><i>{e(view.status)}</i></p>")
    parts.append(highlight_html(view.signature, view.language))
    if view.details:
        parts.append(f"<pre>{e(chr(10).join(view.details))}</pre>")
    if view.report is not None:
        rows = loop_rows(
            view.report,
            polyhedral=view.polyhedral,
            main_file=view.file,
            nests=view.nests,
            reassociation=view.options is not None and view.options.reassociation,
        )
        parts.append("<p><b>Loops</b></p>")
        if rows:
            head = "".join(f'<th style="{cell}">{e(c)}</th>' for c in _COLUMNS)
            body = "".join(
                "<tr>" + "".join(f'<td style="{cell}">{e(c)}</td>' for c in _row_cells(r)) + "</tr>"
                for r in rows
            )
            parts.append(
                '<table class="polyflow-loops" style="border-collapse:collapse">'
                f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            )
        else:
            parts.append("<p>no loops in the compile report</p>")
        warnings = view.report.warnings
        if warnings:
            items = "".join(f"<li>{e(w)}</li>" for w in warnings)
            parts.append(f'<p><b>Warnings</b></p><ul class="polyflow-warnings">{items}</ul>')
    if view.options is not None:  # (a gradient's compile_c result does not know them)
        shown = ", ".join(f"<code>{e(o)}</code>" for o in _options_text(view)) or "the defaults"
        parts.append(f"<p><b>Options</b>: {shown}</p>")
    if view.stages:
        links = " · ".join(f'<a href="#{uid}-{e(s)}">{e(s)}</a>' for s in view.stages)
        parts.append(f"<p><b>Stages</b>: {links}</p>")
        for stage, text in view.stages.items():
            shown_text, left = _cut(text, MAX_STAGE_CHARS)
            more = ""
            if left:
                hint = f"polyflow.show(fn, {stage!r})"
                more = f"<p><i>… {left} more lines: {e(hint)} shows them all</i></p>"
            parts.append(
                f'<details id="{uid}-{e(stage)}"><summary><code>{e(stage)}</code> '
                f"({_lines(text)} lines)</summary>"
                f'<div style="max-height:40em;overflow:auto">'
                f"{highlight_html(shown_text, stage)}{more}</div></details>"
            )
    for function, tree in (view.report.schedules if view.report is not None else {}).items():
        parts.append(
            f"<details><summary>isl schedule tree of <code>{e(function)}</code></summary>"
            f"<pre>{e(tree)}</pre></details>"
        )
    if view.source:
        parts.append(
            f"<details><summary>source</summary>"
            f"{highlight_html(view.source, view.language)}</details>"
        )
    parts.append("</div>")
    return "\n".join(parts)


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")


def _md(text: str) -> str:
    """`text` with Markdown's special characters escaped (safe in a table cell)."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text).replace("\n", " ")


def _code(text: str) -> str:
    """`text` as inline code (a fence longer than any run of backticks in it)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def render_markdown(view: KernelView) -> str:
    """A compact Markdown equivalent of `render_html`: signature, ranges, the loop table,
    options, warnings and the names of the stages (their text is left to `show`)."""
    lines = [f"**{_md(view.name)}**: {_kind(view)}", ""]
    if view.status:
        lines += [f"*{_md(view.status)}*", ""]
    fence = "````" if "```" in view.signature else "```"
    lines += [f"{fence}{view.language}", view.signature, *view.details, fence, ""]
    if view.report is not None:
        rows = loop_rows(
            view.report,
            polyhedral=view.polyhedral,
            main_file=view.file,
            nests=view.nests,
            reassociation=view.options is not None and view.options.reassociation,
        )
        if rows:
            lines.append("| " + " | ".join(_COLUMNS) + " |")
            lines.append("|" + "---|" * len(_COLUMNS))
            lines += ["| " + " | ".join(_md(c) for c in _row_cells(r)) + " |" for r in rows]
            lines.append("")
        for warning in view.report.warnings:
            lines.append(f"- warning: {_md(warning)}")
        if view.report.warnings:
            lines.append("")
    if view.options is not None:
        shown = ", ".join(_code(o) for o in _options_text(view)) or "the defaults"
        lines.append(f"Options: {shown}")
    if view.stages:
        stages = ", ".join(_code(s) for s in view.stages)
        lines += ["", f"Stages: {stages} (each one: {_code('polyflow.show(fn, stage)')})"]
    return "\n".join(lines) + "\n"


def definition_header(source: str, line: int, column: int) -> str:
    """The header of the TC definition at `line`:`column` of `source`: `def ...` up to its
    body's `{`, on one line."""
    lines = source.splitlines()
    start = sum(len(text) + 1 for text in lines[: max(line - 1, 0)]) + max(column - 1, 0)
    end = source.find("{", start)
    text = source[start:] if end < 0 else source[start:end]
    return " ".join(text.split())


# ----- show


def _stages_of(target: Any) -> Sequence[str] | None:
    """The stages `target` keeps, where it says (a `stages` mapping; a TC function's last
    compile), else None."""
    stages = getattr(target, "stages", None)
    return list(stages) if isinstance(stages, Mapping) and stages else None


def stage_text(target: Any, stage: str = DEFAULT_STAGE) -> str:
    """The IR of `stage` of `target` (anything with `.mlir(stage)`; a string is the IR
    itself); ValueError listing the stages there are when `target` has no `stage`."""
    if isinstance(target, str):
        return target
    if not callable(getattr(target, "mlir", None)):
        raise TypeError(
            "polyflow.show() takes a compiled kernel (a TC function, a compile_c result, "
            f"anything with .mlir(stage)) or IR text, got {type(target).__name__}"
        )
    name = getattr(target, "name", type(target).__name__)
    known = _stages_of(target)
    if known is not None and stage not in known and stage != "grad":
        raise ValueError(
            f"{name} has no stage '{stage}': the stages available are "
            f"{', '.join(known) or 'none'}"
        )
    try:
        return str(target.mlir(stage))
    except KeyError:
        raise ValueError(
            f"{name} has no stage '{stage}'"
            + (f": the stages available are {', '.join(known)}" if known else "")
        ) from None


def _in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (IPython imported and running one)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def show(
    target: Any,
    stage: str = DEFAULT_STAGE,
    *,
    language: str | None = None,
    file: TextIO | None = None,
    color: bool | None = None,
) -> None:
    """Print `stage` of `target` (a TC function, a `compile_c` result, anything with
    `.mlir(stage)`, or IR text) highlighted: as HTML in a notebook; into `file` (default
    stdout) with ANSI colours when it is a terminal (or `color=True`), plain otherwise.
    `language` (`mlir`, `llvm`, `ptx`, `c`, `tc`) overrides the one the stage implies."""
    text = stage_text(target, stage)
    if language is None:
        language = guess_language(text) if isinstance(target, str) else stage
    if file is None and color is None and _in_notebook():
        from IPython.display import HTML, display

        display(HTML(highlight_html(text, language)))
        return
    out = file if file is not None else sys.stdout
    if color is None:
        isatty = getattr(out, "isatty", None)
        color = bool(isatty()) if callable(isatty) else False
    written = highlight_ansi(text, language) if color else text
    out.write(written if written.endswith("\n") else written + "\n")
