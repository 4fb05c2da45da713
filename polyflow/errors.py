"""The one user-facing error type: a position in the user's source and a message to act on."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SourcePosition:
    """A 1-based line and column in a named source file."""

    file: str
    line: int
    column: int


class CompileError(Exception):
    """Bad input (syntax, type, unsupported construct) at a known place in the source.

    Printed as ``file:line:col: error: message``, then the source line and a caret.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str = "<input>",
        line: int = 0,
        column: int = 0,
        source_line: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.source_line = source_line

    @property
    def position(self) -> SourcePosition:
        return SourcePosition(self.file, self.line, self.column)

    def to_dict(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "message": self.message,
        }

    @property
    def where(self) -> str:
        """`file:line:col`, `file:line` or `file`, as far as the position is known."""
        if self.line <= 0:
            return self.file
        return f"{self.file}:{self.line}" + (f":{self.column}" if self.column > 0 else "")

    def format(self) -> str:
        """The diagnostic as a compiler prints it, with the source line and a caret."""
        head = str(self)
        text = self.source_line
        if text is None and self.line > 0:
            text = _read_line(self.file, self.line)
        if text is None:
            return head
        caret = " " * max(self.column - 1, 0) + "^"
        return f"{head}\n{text.rstrip()}\n{caret}"

    def __str__(self) -> str:
        return f"{self.where}: error: {self.message}"


class GpuUnavailable(RuntimeError):
    """A CUDA callable was called where no CUDA device (or no CuPy) is usable; the message says
    which, and that `fn.emulate(...)` runs the same kernels on the CPU."""


def _read_line(file: str, line: int) -> str | None:
    try:
        lines = Path(file).read_text(errors="replace").splitlines()
    except OSError:
        return None
    return lines[line - 1] if 0 < line <= len(lines) else None
