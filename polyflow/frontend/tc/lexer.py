"""Tokens of the Tensor Comprehensions language, each with its 1-based line and column.

`tokenize(source, *, file)` returns the tokens of `source` followed by one `EOF` token; `#`
starts a comment that runs to the end of the line. Numbers start with a digit (`0.5`, `1e-3`,
`2.0f`), so `T.1` is a tensor, a dot and a dimension. Characters that start no token are a
`CompileError` at their position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from polyflow.errors import CompileError


class Kind(Enum):
    IDENT = "identifier"
    INT = "integer"
    FLOAT = "number"
    PUNCT = "symbol"
    EOF = "end of input"


@dataclass(frozen=True)
class Token:
    kind: Kind
    text: str
    line: int
    column: int

    def describe(self) -> str:
        """The token as an error message names it."""
        return "end of input" if self.kind is Kind.EOF else f"'{self.text}'"


# Longest first: a symbol is matched before any of its prefixes.
_SYMBOLS = (
    "->", "+=", "*=", "<=", ">=", "==", "!=", "&&", "||",
    "(", ")", "{", "}", ",", ":", ".", "?", "+", "-", "*", "/", "%", "<", ">", "=", "!",
)  # fmt: skip
_TOKEN = re.compile(
    r"""
    (?P<space>[ \t\r\f\v]+)
  | (?P<newline>\n)
  | (?P<comment>\#[^\n]*)
  | (?P<float>\d+\.\d*(?:[eE][+-]?\d+)?[fF]?|\d+[eE][+-]?\d+[fF]?|\d+[fF])
  | (?P<int>\d+)
  | (?P<ident>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<symbol>"""
    + "|".join(re.escape(symbol) for symbol in _SYMBOLS)
    + ")",
    re.VERBOSE,
)


def tokenize(source: str, *, file: str = "<tc>") -> list[Token]:
    """The tokens of `source`, ending with an EOF token."""
    tokens: list[Token] = []
    line, line_start, pos = 1, 0, 0
    while pos < len(source):
        match = _TOKEN.match(source, pos)
        column = pos - line_start + 1
        if match is None:
            raise error_at(f"unexpected character '{source[pos]}'", source, file, line, column)
        kind = match.lastgroup
        text = match.group()
        if kind == "newline":
            line, line_start = line + 1, match.end()
        elif kind == "float":
            tokens.append(Token(Kind.FLOAT, text, line, column))
        elif kind == "int":
            tokens.append(Token(Kind.INT, text, line, column))
        elif kind == "ident":
            tokens.append(Token(Kind.IDENT, text, line, column))
        elif kind == "symbol":
            tokens.append(Token(Kind.PUNCT, text, line, column))
        pos = match.end()
    tokens.append(Token(Kind.EOF, "", line, pos - line_start + 1))
    return tokens


def error_at(message: str, source: str, file: str, line: int, column: int) -> CompileError:
    """The `CompileError` for `message` at `line`:`column` of `source`, with its caret line."""
    return CompileError(
        message, file=file, line=line, column=column, source_line=source_line(source, line)
    )


def source_line(source: str, line: int) -> str | None:
    """Line `line` (1-based) of `source`, for the caret under an error."""
    lines = source.splitlines()
    if line == len(lines) + 1:  # the end of input, after a final newline
        return ""
    return lines[line - 1] if 0 < line <= len(lines) else None
