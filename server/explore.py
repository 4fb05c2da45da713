"""The `explore` section of a /v1/compile answer (the web explorer's data, see
/work/notes/issue29-explorer-contract.md): each source loop with what the compiler did to it,
each MLIR stage's text without locations beside the source position of the op on each line,
the schedule trees, the dependences and the statements of each rescheduled function.

The worker process builds it (`build_explore`), from the stages printed with their locations
(`Options.debug_locations`), the compile report, the loops of the frontend's module
(`source_loops`, read before the pipeline changes it) and the dependences the polyhedral stage
recorded (`polyflow.schedule.recording_dependences`). The text side (`split_locations`) is plain
Python: MLIR's printed form, `loc(...)` and `#locN = loc(...)` aliases parsed here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# stages whose text is MLIR (the others, `llvm` and `ptx`, have no locations to read)
MLIR_STAGES = frozenset({"mlir", "affine", "grad", "affine-opt", "gpu", "llvm-dialect"})
# at most this many dependences per function in an answer (`dependences_truncated` says so)
MAX_DEPENDENCES = 200

Position = tuple[int, int]  # (line, column), 1-based

_ALIAS_DEF = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$")


# ----- locations in MLIR's printed form


class _LocParser:
    """A recursive-descent reader of one location's printed form (what is inside `loc(...)`):
    `unknown`, `"file":L:C` (with an optional `to ...` range), `"name"` / `"name"(loc)`,
    `fused[...]` / `fused<...>[...]`, `callsite(loc at loc)` and `#locN` aliases."""

    def __init__(self, text: str, aliases: Mapping[str, str], files: frozenset[str] | None):
        self.text = text
        self.i = 0
        self.aliases = aliases
        self.files = files

    def parse(self) -> Position | None:
        try:
            return self._location(depth=0)
        except (IndexError, ValueError):
            return None

    def _skip(self) -> None:
        while self.i < len(self.text) and self.text[self.i] in " \t":
            self.i += 1

    def _string(self) -> str:
        assert self.text[self.i] == '"'
        j = self.i + 1
        while self.text[j] != '"':
            j += 2 if self.text[j] == "\\" else 1
        value = self.text[self.i + 1 : j]
        self.i = j + 1
        return value

    def _number(self) -> int:
        match = re.compile(r"\d+").match(self.text, self.i)
        if match is None:
            raise ValueError("a number")
        self.i = match.end()
        return int(match.group())

    def _location(self, depth: int) -> Position | None:
        if depth > 64:
            raise ValueError("nested too deep")
        self._skip()
        text = self.text
        if text.startswith("#loc", self.i):
            match = re.compile(r"#loc\d*").match(text, self.i)
            assert match is not None
            self.i = match.end()
            body = self.aliases.get(match.group())
            if body is None:
                return None
            return _LocParser(body, self.aliases, self.files)._location(depth + 1)
        if text.startswith("unknown", self.i):
            self.i += len("unknown")
            return None
        if text.startswith("fused", self.i):
            self.i += len("fused")
            if text[self.i] == "<":  # fused<#metadata>[...]
                self.i = _matching(text, self.i, "<", ">") + 1
            assert text[self.i] == "["
            self.i += 1
            found = None
            while True:
                self._skip()
                if text[self.i] == "]":
                    self.i += 1
                    return found
                inner = self._location(depth + 1)
                found = found or inner
                self._skip()
                if text[self.i] == ",":
                    self.i += 1
        if text.startswith("callsite(", self.i):
            self.i += len("callsite(")
            callee = self._location(depth + 1)
            self._skip()
            if not text.startswith("at", self.i):
                raise ValueError("callsite without 'at'")
            self.i += 2
            caller = self._location(depth + 1)
            self._skip()
            self.i += 1  # ")"
            return callee or caller
        if text[self.i] == '"':
            name = self._string()
            if self.i < len(text) and text[self.i] == ":":  # "file":line:col
                self.i += 1
                line = self._number()
                column = 0
                if self.i < len(text) and text[self.i] == ":":
                    self.i += 1
                    column = self._number()
                self._skip_range()
                if self.files is not None and name not in self.files:
                    return None
                return (line, column)
            if self.i < len(text) and text[self.i] == "(":  # "name"(child)
                self.i += 1
                child = self._location(depth + 1)
                self._skip()
                self.i += 1  # ")"
                return child
            return None  # a name alone
        raise ValueError(f"unknown location at {text[self.i : self.i + 20]!r}")

    def _skip_range(self) -> None:
        """` to L:C`, ` to :C` or ` to L` after a file position (a range's end)."""
        match = re.compile(r"\s+to\s+(\d*:\d+|\d+)").match(self.text, self.i)
        if match is not None:
            self.i = match.end()


def _matching(text: str, start: int, opening: str, closing: str) -> int:
    """The index of the bracket closing the one at `start` (strings skipped)."""
    depth = 0
    i = start
    while i < len(text):
        char = text[i]
        if char == '"':
            i = _string_end(text, i)
            continue
        if char == opening:
            depth += 1
        elif char == closing:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError("unbalanced")


def _string_end(text: str, start: int) -> int:
    """The index after the string literal starting at `start` (MLIR escapes with `\\`)."""
    i = start + 1
    while i < len(text) and text[i] != '"':
        i += 2 if text[i] == "\\" else 1
    return i + 1


_TOKEN = re.compile(r'"|(?<![\w.$])loc\(')


def _strip_line(line: str) -> tuple[str, list[str]]:
    """`line` without its ` loc(...)` attributes (outside strings), and their bodies in order."""
    if "loc(" not in line:
        return line, []
    out: list[str] = []
    found: list[str] = []
    i = start = 0
    while True:
        match = _TOKEN.search(line, i)
        if match is None:
            break
        if match.group() == '"':
            i = _string_end(line, match.start())
            continue
        at = match.start()
        try:
            end = _matching(line, at + 3, "(", ")")
        except ValueError:
            break
        cut = at - 1 if at > 0 and line[at - 1] == " " else at
        out.append(line[start:cut])
        found.append(line[at + 4 : end])
        i = start = end + 1
    out.append(line[start:])
    return "".join(out), found


def split_locations(
    text: str, files: Iterable[str] | None = None
) -> tuple[str, list[dict[str, int] | None]]:
    """(`text` as MLIR prints it without locations, the source position of the op on each of
    its lines or None) from a stage printed with locations. An op whose regions span lines
    (`affine.for ... {` ... `} loc(...)`) has its location on the closing line: the opening
    line (and an `} else {` between) gets it too. `files`: the source file names whose
    positions count (None: any)."""
    allowed = None if files is None else frozenset(files)
    lines = text.split("\n")
    aliases: dict[str, str] = {}
    kept: list[str] = []
    for line in lines:
        match = _ALIAS_DEF.match(line)
        if match is not None:
            aliases[match.group(1)] = match.group(2)
        else:
            kept.append(line)
    stripped: list[str] = []
    positions: list[Position | None] = []
    inline: list[Position | None] = []  # a region opener's own locations (its arguments')
    parsed: dict[str, Position | None] = {}
    for line in kept:
        plain, found = _strip_line(line)
        stripped.append(plain)
        where = None
        if found:
            body = found[-1]
            if body not in parsed:  # most lines name one of a few aliases
                parsed[body] = _LocParser(body, aliases, allowed).parse()
            where = parsed[body]
        opens = plain.rstrip().endswith("{")
        positions.append(None if opens else where)
        inline.append(where if opens else None)
    _regions_take_closing_locations(stripped, positions)
    for index, where in enumerate(inline):
        if positions[index] is None and where is not None:
            positions[index] = where
    return "\n".join(stripped), [
        None if p is None else {"line": p[0], "column": p[1]} for p in positions
    ]


def _regions_take_closing_locations(
    lines: Sequence[str], positions: list[Position | None]
) -> None:
    """Give each line that opens a region (ends with `{`) the location of the line that
    closes it (where MLIR prints the op's location), and so the lines between that close one
    region of the op and open the next (`} else {`)."""
    stack: list[list[int]] = []  # per open region: the lines of its op waiting for a location
    for index, line in enumerate(lines):
        body = line.strip()
        opens = body.endswith("{")
        if body.startswith("}") and opens and stack:  # `} else {`, `} do {`: the op goes on
            stack[-1].append(index)
            continue
        delta = _brace_delta(body)
        if delta > 0:
            stack.extend([] for _ in range(delta - 1))
            stack.append([index] if opens else [])
        elif delta < 0:
            for _ in range(-delta):
                if not stack:
                    break
                for waiting in stack.pop():
                    if positions[waiting] is None:
                        positions[waiting] = positions[index]


def _brace_delta(text: str) -> int:
    if '"' not in text:
        return text.count("{") - text.count("}")
    depth = 0
    i = 0
    while i < len(text):
        char = text[i]
        if char == '"':
            i = _string_end(text, i)
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        i += 1
    return depth


# ----- loops and their badges


@dataclass
class SourceLoop:
    """A loop of the source as the frontend made it: its function, position, and the positions
    of the ops inside it (to place remarks about them on the innermost loop around them)."""

    function: str
    line: int
    column: int
    depth: int
    inside: set[Position] = field(default_factory=set)


def source_loops(module: Any, files: Iterable[str]) -> list[dict[str, Any]]:
    """The loops of the frontend's `module` (C `for`/`while`/`do`, TC statements' loops), one
    per source position, each with its function, depth and the positions of the ops in it;
    call it inside the module's context, before the pipeline changes the module."""
    from polyflow.ir.locations import source_position
    from polyflow.ir.names import symbol_name

    allowed = frozenset(files)
    found: dict[tuple[str, int, int], SourceLoop] = {}
    loop_ops = ("scf.for", "scf.while", "scf.parallel", "affine.for", "affine.parallel")

    def visit(op: Any, function: str, enclosing: list[SourceLoop]) -> None:
        position = source_position(op.location)
        here = None if position is None or position.file not in allowed else (
            position.line,
            position.column,
        )
        inner = enclosing
        if op.name in loop_ops and here is not None:
            key = (function, *here)
            loop = found.get(key)
            if loop is None:
                loop = found[key] = SourceLoop(function, here[0], here[1], len(enclosing))
            if not enclosing or enclosing[-1] is not loop:
                inner = [*enclosing, loop]
        elif here is not None:
            for loop in enclosing:
                loop.inside.add(here)
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    visit(child.operation, function, inner)

    for op in module.body.operations:
        fn = op.operation
        if fn.name != "func.func":
            continue
        name = symbol_name(fn)
        if name.startswith("__polyflow_"):  # the C ABI entries: no loops of the source
            continue
        visit(fn, name, [])
    return [
        {
            "function": loop.function,
            "line": loop.line,
            "column": loop.column,
            "depth": loop.depth,
            "inside": sorted(loop.inside),
        }
        for loop in sorted(found.values(), key=lambda x: (x.line, x.column, x.function))
    ]


def loop_entries(
    loops: Sequence[Mapping[str, Any]],
    remarks: Sequence[Mapping[str, Any]],
    polyhedral_off: str | None = None,
) -> list[dict[str, Any]]:
    """One entry per source loop (`source_loops`, and any loop a remark names that the
    frontend's module did not show) with the badges that hold for it, the reasons for what did
    not happen (`why_not`) and the facts (`details`), from the report's remarks (for CUDA: the loops a kernel maps to
    blocks and threads are `parallel`, with their axis);
    `polyhedral_off`: why the polyhedral stage did not run, where it did not (every loop's)."""
    entries: dict[tuple[str, int, int], dict[str, Any]] = {}
    inside: dict[tuple[str, int, int], set[Position]] = {}
    depth: dict[tuple[str, int, int], int] = {}

    def entry(function: str, line: int, column: int) -> dict[str, Any]:
        key = (function, line, column)
        if key not in entries:
            entries[key] = {
                "function": function,
                "line": line,
                "column": column,
                "badges": [],
                "why_not": [],
                "details": {},
            }
        return entries[key]

    for loop in loops:
        key = (loop["function"], loop["line"], loop["column"])
        entry(*key)
        inside[key] = {tuple(p) for p in loop.get("inside", ())}  # type: ignore[misc]
        depth[key] = int(loop.get("depth", 0))
    raising = [r for r in remarks if r.get("kind") == "loop" and r.get("line")]
    for remark in raising:  # loops the frontend module did not show (none, normally)
        key = (str(remark.get("function")), int(remark["line"]), int(remark.get("column") or 0))
        if key not in entries:
            entry(*key)
            depth.setdefault(key, 0)
    raised: dict[tuple[str, int, int], list[bool]] = {}

    def loop_of(remark: Mapping[str, Any]) -> tuple[str, int, int] | None:
        """The loop a remark is about: the one at its position, else the innermost one around
        the op at its position, else the first one of its function at or after it."""
        if not remark.get("line"):
            return None
        function = str(remark.get("function"))
        position = (int(remark["line"]), int(remark.get("column") or 0))
        key = (function, *position)
        if key in entries:
            return key
        around = [k for k in entries if k[0] == function and position in inside.get(k, ())]
        if around:
            return max(around, key=lambda k: depth.get(k, 0))
        after = sorted(k for k in entries if k[0] == function and k[1:] >= position)
        return after[0] if after else None

    function_reasons: dict[str, list[str]] = {}
    for remark in remarks:
        kind = remark.get("kind")
        data = remark.get("data") or {}
        message = str(remark.get("message", ""))
        if kind in ("not-scheduled", "not-raised"):  # the whole function
            function_reasons.setdefault(str(remark.get("function")), []).append(message)
            continue
        if kind == "gpu-kernel":  # the loops it maps to blocks and threads run in parallel
            for mapped in data.get("loops") or ():
                for key in entries:
                    if key[0] == str(remark.get("function")) and key[1] == mapped.get("line"):
                        _add(entries[key]["badges"], "parallel")
                        entries[key]["details"]["gpu_axis"] = mapped.get("axis")
                        entries[key]["details"]["gpu_block"] = data.get("block")
            continue
        found = loop_of(remark)
        if found is None:
            continue
        key = found
        target = entries[key]
        details = target["details"]
        if kind == "loop":
            raised.setdefault(key, []).append(bool(data.get("raised")))
            if not data.get("raised"):
                _add(target["why_not"], f"not raised: {data.get('reason') or message}")
            if data.get("reductions"):
                details["reductions"] = sorted(
                    {*details.get("reductions", []), *map(str, data["reductions"])}
                )
        elif kind == "unraised":
            _add(target["why_not"], message)
        elif kind == "parallel-loop":
            _add(target["badges"], "parallel")
            if data.get("reductions"):
                details["parallel_reductions"] = list(data["reductions"])
        elif kind == "tiled":
            _add(target["badges"], "tiled")
            details["tile_sizes"] = list(data.get("sizes") or [])
            for flag in ("wavefront", "second_level", "contraction"):
                if data.get(flag):
                    details[flag] = True
        elif kind == "micro-kernel":
            _add(target["badges"], "micro-kernel")
            details["micro_kernel"] = f"{data.get('rows')}x{data.get('vectors')}"
            details["vector_lanes"] = data.get("lanes")
            if data.get("element"):
                details["element"] = data["element"]
        elif kind == "rescheduled":
            details["rescheduled"] = True
        elif kind == "unrolled":
            details["unrolled"] = data.get("factor")
        elif remark.get("severity") in ("warning", "note") and kind not in ("tuned",):
            _add(target["why_not"], message)
    for key, flags in raised.items():
        if flags and all(flags):
            entries[key]["badges"].insert(0, "raised")
    for key, target in entries.items():
        for reason in function_reasons.get(key[0], ()):
            _add(target["why_not"], reason)
        if polyhedral_off is not None:
            _add(target["why_not"], polyhedral_off)
        order = ["raised", "parallel", "tiled", "micro-kernel"]
        target["badges"].sort(key=lambda b: order.index(b) if b in order else len(order))
    return sorted(entries.values(), key=lambda e: (e["line"], e["column"], e["function"]))


def _add(items: list[str], item: str) -> None:
    if item not in items:
        items.append(item)


# ----- dependences


def polyhedral_off(options: Any) -> str | None:
    """Why the polyhedral stage (rescheduling, tiling, parallel loops, micro-kernels) does not
    run with `options` (polyflow's Options), or None where it does."""
    from polyflow.schedule import scheduling_enabled

    if scheduling_enabled(options):
        return None
    if options.opt_level != 3:
        return (
            "not rescheduled, tiled or parallelized: the polyhedral stage runs at -O3 "
            f"(this compile: -O{options.opt_level})"
        )
    if not options.raising_enabled:
        return "not rescheduled, tiled or parallelized: raising is off"
    return "not rescheduled, tiled or parallelized: rescheduling and parallelization are off"


def dependence_entries(
    recorded: Mapping[str, Sequence[Mapping[str, Any]]], names: Mapping[str, str]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, dict[str, int]]], dict[str, int]]:
    """(dependences per function, statements per function, the count of dependences left out
    per function) from what the polyhedral stage recorded per function symbol
    (`polyflow.schedule.recorded_dependences`); `names` maps symbols to source names."""
    dependences: dict[str, list[dict[str, Any]]] = {}
    statements: dict[str, dict[str, dict[str, int]]] = {}
    left_out: dict[str, int] = {}
    for symbol, scops in recorded.items():
        if not scops:  # no scop in the function
            continue
        name = names.get(symbol, symbol)
        deps = dependences.setdefault(name, [])
        stmts = statements.setdefault(name, {})
        for scop in scops:
            for stmt, (line, column) in dict(scop.get("statements") or {}).items():
                stmts[str(stmt)] = {"line": int(line), "column": int(column)}
            for dep in scop.get("dependences") or ():
                if len(deps) >= MAX_DEPENDENCES:
                    left_out[name] = left_out.get(name, 0) + 1
                    continue
                deps.append(dict(dep))
            if scop.get("left_out"):
                left_out[name] = left_out.get(name, 0) + int(scop["left_out"])
    return dependences, statements, left_out


def uncompiled_c_loops(cmod: Any, file: str, entry: str | None) -> list[dict[str, Any]]:
    """The loops of the C functions of `file` that this compile leaves to the C compiler
    (`main`, a function the frontend cannot compile, one other than the request's `entry`),
    as `loop_entries` gives them: no badge, and why the function is not compiled."""
    from pycparser import c_ast

    out = []
    for name, fdef in cmod.scope.defs.items():
        coord = fdef.decl.coord
        if name in cmod.functions or coord is None or coord.file != file:
            continue
        if name in cmod.skipped:
            reason = f"'{name}' is not compiled: {cmod.why_skipped(name)[1]}"
        elif name == "main":
            reason = "main is not compiled: polyflow compiles the functions it calls; main is built by the C compiler"
        else:
            reason = f"'{name}' is not compiled: the request's entry is '{entry}'"
        stack: list[Any] = [fdef.body]
        while stack:
            node = stack.pop()
            if isinstance(node, c_ast.For | c_ast.While | c_ast.DoWhile) and node.coord:
                out.append(
                    {
                        "function": name,
                        "line": node.coord.line,
                        "column": node.coord.column or 0,
                        "badges": [],
                        "why_not": [reason],
                        "details": {},
                    }
                )
            stack += [child for _, child in node.children()]
    return sorted(out, key=lambda loop: (loop["line"], loop["column"]))


def build_explore(
    *,
    language: str,
    stages: Mapping[str, str],
    report: Mapping[str, Any],
    loops: Sequence[Mapping[str, Any]],
    files: Iterable[str],
    recorded: Mapping[str, Sequence[Mapping[str, Any]]],
    names: Mapping[str, str],
    polyhedral_off: str | None = None,
    uncompiled: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The `explore` section (see the module docstring) of one compile: `stages` printed with
    locations (only the MLIR ones are read), the report as JSON, the frontend's loops
    (`source_loops`), the recorded dependences per function symbol, `names` symbol -> source
    name; `polyhedral_off`: why the polyhedral stage did not run (None: it did); `uncompiled`:
    the loops of the functions left to the C compiler (`uncompiled_c_loops`)."""
    files = tuple(files)
    shown = {}
    for name, text in stages.items():
        if name in MLIR_STAGES:
            plain, lines = split_locations(text, files)
            shown[name] = {"text": plain, "lines": lines}
    dependences, statements, left_out = dependence_entries(recorded, names)
    return {
        "language": language,
        "loops": sorted(
            [
                *loop_entries(loops, list(report.get("remarks") or []), polyhedral_off),
                *(dict(loop) for loop in uncompiled),
            ],
            key=lambda loop: (loop["line"], loop["column"]),
        ),
        "stages": shown,
        "schedule_trees": dict(report.get("schedules") or {}),
        "dependences": dependences,
        "dependences_truncated": left_out,
        "statements": statements,
    }


__all__ = [
    "MAX_DEPENDENCES",
    "MLIR_STAGES",
    "build_explore",
    "dependence_entries",
    "loop_entries",
    "polyhedral_off",
    "source_loops",
    "split_locations",
    "uncompiled_c_loops",
]
