"""Reading what users hand in: a C file, or C source given as a string."""

from __future__ import annotations

from pathlib import Path

from polyflow.errors import CompileError


def read_c_source(source_or_path: str | Path) -> tuple[str, str, Path | None]:
    """(text, file name, directory) of a C file, or of C source given as a string (a `str`
    with a newline, or naming no file; its file name is `<input>` and it has no directory)."""
    path = (
        Path(source_or_path)
        if isinstance(source_or_path, Path) or "\n" not in str(source_or_path)
        else None
    )
    if path is not None and path.exists():
        return path.read_text(), str(source_or_path), path.resolve().parent
    if path is not None and str(source_or_path).endswith(".c"):
        raise CompileError(f"cannot read '{source_or_path}'", file=str(source_or_path))
    return str(source_or_path), "<input>", None
