"""Large constant tables left out of the parse: a build hands them to cc as they are.

A generated lookup table of a few MB (`static const unsigned table[420977] = {...};`) took
pycparser 16 s, element by element, although `polyflow build` never reads the values: globals
stay defined by the C compiler, and compiled functions receive their addresses. So before
parsing, each file-scope brace initializer of at least `MIN_ELIDED_CHARS` characters made only
of numeric literals is replaced by `{0}`, with its line breaks kept (every later line and column
is unchanged, so diagnostics and the splice still point at the user's text). The declared type
is unchanged too (`a[]` stays an array of unknown extent in the frontend, as it was). Only the
build uses this; the JIT needs the values (it defines the globals itself).
"""

from __future__ import annotations

import re

# Shorter initializers cost pycparser little (~20 ms per 4 KiB).
MIN_ELIDED_CHARS = 4096

# What a file-scope token scan must see: literals (their braces do not count), braces, and an
# initializer's start.
_TOKEN = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|=\s*\{|[{}]')
_BRACE = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|[{}]')
# Numbers (decimal, hex, octal, floating, with suffixes and signs), commas, braces, parentheses.
_NUMERIC = re.compile(r"[\s0-9a-fA-FxXpP.+\-uUlL,{}()]*")


def elide_large_initializers(text: str) -> str:
    """`text` (preprocessed C) with each large numeric file-scope initializer replaced by
    `{0}` plus its line breaks (the module docstring says why that is safe for a build)."""
    pieces: list[str] = []
    depth, pos, done = 0, 0, 0
    while True:
        match = _TOKEN.search(text, pos)
        if match is None:
            break
        token = match.group()
        pos = match.end()
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
        elif token.startswith("="):
            opening = match.end() - 1
            closing = _matching_brace(text, opening)
            if closing is None:
                break  # unbalanced: leave the rest to the parser's diagnostics
            if depth == 0 and _elidable(text, opening, closing):
                pieces.append(text[done : opening + 1])
                content = text[opening + 1 : closing]
                last_line = content.rsplit("\n", 1)[-1] if "\n" in content else ""
                pieces.append("0" + "\n" * content.count("\n") + " " * len(last_line))
                done = closing
            pos = closing + 1
    pieces.append(text[done:])
    return "".join(pieces)


def _matching_brace(text: str, opening: int) -> int | None:
    depth = 0
    for match in _BRACE.finditer(text, opening):
        token = match.group()
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
            if depth == 0:
                return match.start()
    return None


def _elidable(text: str, opening: int, closing: int) -> bool:
    return (
        closing - opening > MIN_ELIDED_CHARS
        and _NUMERIC.fullmatch(text, opening + 1, closing) is not None
    )
