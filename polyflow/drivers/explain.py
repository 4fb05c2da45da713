"""`polyflow explain file.c`: one row per loop nest of a C file, from the compile report: was it
raised to affine, rescheduled, tiled, run in parallel (which loop, or why not), turned into a
micro-kernel; with its source lines and, where something did not happen, the reason."""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from pycparser import c_ast

from polyflow.drivers.build import build_program
from polyflow.frontend.c_analysis import is_statement_wrapper, walk
from polyflow.frontend.c_parse import parse_c
from polyflow.options import Options
from polyflow.report import Remark
from polyflow.source_input import read_c_file

_LOOPS = (c_ast.For, c_ast.While, c_ast.DoWhile)


@dataclass
class NestRow:
    """What became of one loop nest (an outermost loop and everything in it)."""

    function: str
    first_line: int
    last_line: int
    raised: str  # yes / k of n loops / no
    scheduled: str
    tiled: str
    parallel: str
    micro_kernel: str
    why: str  # the first reason something above did not happen
    file: str = ""  # where the function is defined, when not in the file itself (an include)


def loop_nests(
    path: str | Path, options: Options, functions: set[str] | None = None
) -> list[tuple[str, int, int, str]]:
    """(function, first line, last line, file) of each outermost loop of the file's own
    functions, and of `functions` wherever the file includes them from (GSL's `*_source.c`
    templates; `file` names that file, and is empty for the file itself).
    `do { ... } while (0)`, a macro's statement wrapper, is no loop."""
    text, filename, directory = read_c_file(path)
    parsed = parse_c(text, filename, options, directory)
    nests: list[tuple[str, int, int, str]] = []
    for ext in parsed.ast.ext:
        if not isinstance(ext, c_ast.FuncDef):
            continue
        if ext.decl.coord.file != filename and ext.decl.name not in (functions or set()):
            continue
        stack: list[tuple[c_ast.Node, bool]] = [(ext.body, False)]
        while stack:
            node, inside = stack.pop()
            if isinstance(node, _LOOPS) and not inside and not is_statement_wrapper(node):
                lines = [n.coord.line for n in walk(node) if getattr(n, "coord", None)]
                where = "" if ext.decl.coord.file == filename else ext.decl.coord.file
                nests.append((ext.decl.name, node.coord.line, max(lines), where))
                inside = True
            stack += [(child, inside) for _, child in node.children()]
    return sorted(nests, key=lambda nest: (nest[3], nest[1]))


def explain_c_file(path: str | Path, options: Options) -> list[NestRow]:
    """Compile `path` with `options` as `polyflow cc -c` does (calls to other units' functions
    allowed) and say, per loop nest, what the compiler did with it."""
    with tempfile.TemporaryDirectory(prefix="polyflow-explain-") as tmp:
        built = build_program(
            path, Path(tmp) / "unit.o", options=options, emit="exe", link=False, cache=None
        )
    nests = loop_nests(path, options, {*built.compiled, *built.fallbacks})
    # each remark goes to the first nest of its function that ends at or after its line (a
    # scop's remarks stand at its first statement, which may precede the loop: `s = 0;`)
    by_nest: dict[int, list[Remark]] = {k: [] for k in range(len(nests))}
    for r in built.report.remarks:
        if r.position is None:
            continue
        for k, (function, _, last, _) in enumerate(nests):
            if function == r.function and r.position.line <= last:
                by_nest[k].append(r)
                break
    rows = []
    for k, (function, first, last, where) in enumerate(nests):
        here = by_nest[k]
        reason = built.fallbacks.get(function)
        if reason is not None or function == "main":
            why = reason or "main() is always compiled by the C compiler"
            rows.append(NestRow(function, first, last, "no", "no", "no", "no", "no", why, where))
            continue
        row = _row(function, first, last, here, options)
        row.file = where
        rows.append(row)
    return rows


def _row(function: str, first: int, last: int, here: list[Remark], options: Options) -> NestRow:
    def of(kind: str) -> list[Remark]:
        return [r for r in here if r.kind == kind]

    why: list[str] = []
    loops = of("loop")
    raised = [r for r in loops if r.data.get("raised")]
    if not loops:  # compiled, yet no loop left: it ran at most once and was folded away
        return NestRow(function, first, last, "folded", "-", "-", "-", "-",
                       "the loop runs at most once: its body is straight-line code")  # fmt: skip
    if len(raised) == len(loops):
        raised_text = "yes"
    elif raised:
        raised_text = f"{len(raised)} of {len(loops)} loops"
    else:
        raised_text = "no"
    why += [
        f"line {r.position.line}: {r.data.get('reason')}"
        for r in loops
        if r not in raised
        if r.position
    ]
    if options.opt_level < 3 or not options.schedule:
        scheduled = tiled = parallel = micro = "off (-O3)" if options.opt_level < 3 else "off"
    else:
        not_scheduled = of("not-scheduled") + of("source-order")
        scheduled = "yes" if of("rescheduled") else "no"
        why += [r.message for r in not_scheduled]
        tiles = of("tiled")
        tiled = ", ".join("x".join(str(n) for n in _sizes(r)) or "yes" for r in tiles)
        tiled = tiled or "no"
        why += [r.message for r in of("untiled")]
        parallel_loops = of("parallel-loop")
        if parallel_loops:
            parallel = "yes" if len(parallel_loops) == 1 else f"yes ({len(parallel_loops)} loops)"
        elif of("float-reduction"):
            parallel = "no: float reduction"
            why.append("a floating-point reduction runs in parallel only with -fassociative-math")
        elif any(r.data.get("reductions") for r in loops) and not options.reassociation:
            parallel = "no: reduction"
            why.append(
                "its loops carry reductions: floating-point ones run in parallel only with "
                "-fassociative-math or -ffast-math"
            )
        elif scheduled == "yes":
            parallel = "no"
            why.append("no loop is free of carried dependences, or each runs too few iterations")
        else:
            parallel = "no"
        micro = "yes" if of("micro-kernel") else "no"
    return NestRow(
        function, first, last, raised_text, scheduled, tiled, parallel, micro, "; ".join(why)
    )


def _sizes(remark: Remark) -> list[object]:
    sizes = remark.data.get("sizes")
    return list(sizes) if isinstance(sizes, list) else []


def render(rows: list[NestRow], filename: str) -> str:
    """The rows as a table for a terminal."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{filename}: what polyflow did with each loop nest")
    for column in ("function", "lines", "raised", "scheduled", "tiled", "parallel",
                   "micro-kernel", "why not"):  # fmt: skip
        table.add_column(column, overflow="fold")
    for r in rows:
        table.add_row(
            r.function, f"{Path(r.file).name + ':' if r.file else ''}{r.first_line}-{r.last_line}",
            r.raised, r.scheduled, r.tiled,
            r.parallel, r.micro_kernel, r.why,
        )  # fmt: skip
    console = Console(width=140, record=True, force_terminal=False)
    with console.capture() as capture:
        console.print(table)
    return capture.get()


def to_json(rows: list[NestRow]) -> str:
    return json.dumps([asdict(r) for r in rows], indent=2)


__all__ = ["NestRow", "explain_c_file", "loop_nests", "render", "to_json"]
