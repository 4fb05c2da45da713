"""Source positions read off MLIR locations: the frontends give every op `file:line:col`, and
statements a name (`S3`) around it; transformations keep them (fused, call-site and name
locations wrap them), so that warnings, notes and reports point at the C or TC source."""

from __future__ import annotations

from mlir import ir

from polyflow.errors import CompileError, SourcePosition


def source_position(loc: ir.Location) -> SourcePosition | None:
    """The first file:line:col inside `loc` (through names, fusions and call sites), or None."""
    if loc.is_a_file():
        return SourcePosition(loc.filename, loc.start_line, loc.start_col)
    if loc.is_a_name():
        return source_position(loc.child_loc)
    if loc.is_a_fused():
        for inner in loc.locations:
            position = source_position(inner)
            if position is not None:
                return position
        return None
    if loc.is_a_callsite():
        return source_position(loc.callee) or source_position(loc.caller)
    return None


def statement_name(loc: ir.Location) -> str | None:
    """The statement name (`S3`) of a location named by the frontend, or None."""
    if loc.is_a_name():
        return loc.name_str
    if loc.is_a_fused():
        for inner in loc.locations:
            name = statement_name(inner)
            if name is not None:
                return name
    return None


def position_text(loc: ir.Location) -> str:
    """`file:line:col` of `loc` for messages, or `<unknown>`."""
    position = source_position(loc)
    if position is None:
        return "<unknown>"
    return f"{position.file}:{position.line}:{position.column}"


def compile_error_at(loc: ir.Location, message: str) -> CompileError:
    """A `CompileError` with `message` at the source position of `loc` (none known: the
    file is "<input>", line and column 0)."""
    position = source_position(loc)
    return CompileError(
        message,
        file=position.file if position else "<input>",
        line=position.line if position else 0,
        column=position.column if position else 0,
    )
