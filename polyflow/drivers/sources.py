"""Reading what users hand in (a C file, or C source given as a string) and making the
frontend's module of it."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from polyflow.errors import CompileError, source_text
from polyflow.frontend.c import CModule, emit_c_module
from polyflow.frontend.c_parse import parse_c
from polyflow.options import Options, grad_spec


def read_text_file(path: str | os.PathLike[str]) -> str:
    """The text of a source file (C or TC); CompileError when it cannot be read or is not
    UTF-8 text."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CompileError(f"cannot read '{path}': {exc.strerror}", file=str(path)) from None
    return source_text(data, str(path))


def read_c_file(path: str | os.PathLike[str]) -> tuple[str, str, Path]:
    """(text, file name, directory) of a C file; CompileError when it cannot be read."""
    return read_text_file(path), str(path), Path(path).resolve().parent


def given_c_source(
    source: str | bytes | os.PathLike[str] | None, path: str | os.PathLike[str] | None
) -> tuple[str, str, Path | None]:
    """(text, file name, directory) of what an API caller hands in: C source text (`str`, or
    UTF-8 `bytes`; named `<input>`, no directory), or a file (`path=`, or a `Path` as the
    source). A `str` is always source text, never a file name. CompileError for an empty source
    or an unreadable file, TypeError for anything else."""
    if (source is None) == (path is None):
        raise TypeError("give the C source text, or a file with path=, not both")
    if path is None and isinstance(source, os.PathLike):
        path = source
    if path is not None:
        if not isinstance(path, str | os.PathLike):
            raise TypeError(f"path must be a str or a Path, not {type(path).__name__}")
        text, filename, directory = read_c_file(path)
    else:
        assert source is not None and not isinstance(source, os.PathLike)
        text, filename, directory = source_text(source, "<input>"), "<input>", None
    if not text.strip():
        raise CompileError("the source is empty", file=filename)
    return text, filename, directory


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
    return emit_c_module(
        parsed, only=only, external_calls=external_calls, grad=options.grad or ()
    )


def check_gradients(declared: Iterable[str], options: Options, filename: str) -> None:
    """CompileError for a function of `options.grad` that no unit defined (`declared`: the
    functions whose gradients the units declared)."""
    found = set(declared)
    for spec in options.grad or ():
        name, _ = grad_spec(spec)
        if name not in found:
            raise CompileError(
                f"cannot differentiate '{name}': no such function is defined", file=filename
            )
