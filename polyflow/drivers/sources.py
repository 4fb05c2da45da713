"""Reading what users hand in (a C file, or C source given as a string) and making the
frontend's module of it."""

from __future__ import annotations

from pathlib import Path

from polyflow.errors import CompileError
from polyflow.frontend.c import CModule, emit_c_module
from polyflow.frontend.c_parse import parse_c
from polyflow.options import Options


def read_c_file(path: str | Path) -> tuple[str, str, Path]:
    """(text, file name, directory) of a C file; CompileError when it cannot be read."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise CompileError(f"cannot read '{path}': {exc.strerror}", file=str(path)) from None
    return text, str(path), Path(path).resolve().parent


def read_c_source(source_or_path: str | Path) -> tuple[str, str, Path | None]:
    """(text, file name, directory) of a C file, or of C source given as a string (a `str`
    with a newline, or naming no file; its file name is `<input>` and it has no directory)."""
    path = (
        Path(source_or_path)
        if isinstance(source_or_path, Path) or "\n" not in str(source_or_path)
        else None
    )
    if path is not None and (path.exists() or str(source_or_path).endswith(".c")):
        return read_c_file(source_or_path)
    return str(source_or_path), "<input>", None


def c_module(
    text: str,
    filename: str,
    options: Options,
    source_dir: Path | None = None,
    *,
    only: tuple[str, ...] | None = None,
    external_calls: bool = False,
    elide_initializers: bool = False,
) -> CModule:
    """The C frontend's module of `text`: every function it can compile (or those in `only`),
    with calls to the others as external calls where `external_calls` (a build links them);
    `elide_initializers` leaves large constant tables to cc when they are not compiled."""
    parsed = parse_c(text, filename, options, source_dir, elide_initializers=elide_initializers)
    return emit_c_module(parsed, only=only, external_calls=external_calls)
