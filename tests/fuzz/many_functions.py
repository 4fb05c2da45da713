"""A large C file of many small loop functions, to measure how compile time and memory grow
with the size of a file: ``python tests/fuzz/many_functions.py N > big.c``.

Each function is a different one- or two-loop kernel over its array parameters (a scaled copy, a
stencil, a dot product, a triangular update; unsigned arithmetic), about 120 bytes each; `main` calls every one of
them on small arrays and prints a checksum, so a build can be checked against gcc.
"""

from __future__ import annotations

import sys

# unsigned arithmetic: wraps (defined), and sums are exact in any order
_BODIES = (
    "for (int i = 0; i < n; i++) a[i] = b[i] * {c}u + {k}u;",
    "for (int i = 1; i < n - 1; i++) a[i] = (b[i - 1] + b[i] + b[i + 1]) >> {c};",
    "unsigned s = 0; for (int i = 0; i < n; i++) s += a[i] * b[i]; a[0] = s + {k}u;",
    "for (int i = 0; i < n; i++) for (int j = 0; j < i; j++) a[i] += b[j] * {c}u;",
)


def generate_many_functions(count: int) -> str:
    """`count` small loop functions and a `main` that calls them all."""
    lines = ["#include <stdio.h>", ""]
    for k in range(count):
        body = _BODIES[k % len(_BODIES)].format(c=k % 7 + 1, k=k)
        lines.append(f"void f{k}(int n, unsigned *restrict a, unsigned *restrict b) {{ {body} }}")
    lines += [
        "",
        "int main(void) {",
        "  static unsigned a[64], b[64];",
        "  for (int i = 0; i < 64; i++) { a[i] = i % 5; b[i] = i % 3; }",
    ]
    lines += [f"  f{k}(64, a, b); f{k}(64, b, a);" for k in range(count)]
    lines += [
        "  unsigned s = 0; for (int i = 0; i < 64; i++) s = s * 31u + a[i] + 2u * b[i];",
        '  printf("%u\\n", s);',
        "  return 0;",
        "}",
    ]
    return "\n".join(lines) + "\n"


def generate_large_initializer(kib: int) -> str:
    """A file holding a constant table of about `kib` KiB of C text (a generated lookup table,
    as real programs have), a loop function that reads it and a `main` printing the result."""
    count = kib * 1024 // 9  # "1234567, " per element
    values = ", ".join(str((k * 2654435761) % 9_000_000 + 1_000_000) for k in range(count))
    return "\n".join(
        [
            "#include <stdio.h>",
            "",
            f"static const unsigned table[{count}] = {{{values}}};",
            "",
            "void mix(int n, unsigned *restrict out) {",
            "  for (int i = 0; i < n; i++) out[i % 64] = out[i % 64] * 31u + table[i];",
            "}",
            "",
            "int main(void) {",
            "  static unsigned out[64];",
            f"  mix({count}, out);",
            "  unsigned s = 0; for (int i = 0; i < 64; i++) s = s * 7u + out[i];",
            '  printf("%u\\n", s);',
            "  return 0;",
            "}",
            "",
        ]
    )


if __name__ == "__main__":
    sys.stdout.write(generate_many_functions(int(sys.argv[1])))
