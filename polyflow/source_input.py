"""What users hand in as source: text (`str`, or UTF-8 `bytes`) or a file, read into text or
refused with a `CompileError` (no MLIR here: the service's client reads sources too)."""

from __future__ import annotations

import os
from pathlib import Path

from polyflow.errors import CompileError


def source_text(data: str | bytes, filename: str) -> str:
    """Source text given as `str`, or as `bytes` of UTF-8 text; CompileError (at `filename`)
    for anything else, e.g. a binary file."""
    if isinstance(data, str):
        return data
    if not isinstance(data, bytes | bytearray):
        raise TypeError(f"source must be str or bytes, not {type(data).__name__}")
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CompileError(  # no line: it would print binary data
            f"not a text file: byte 0x{data[exc.start]:02x} at offset {exc.start} is not UTF-8",
            file=filename,
        ) from None


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
