"""What polyflow does with the user's `#pragma`s: never drop one that changes what the C means.

A pragma that asks the C compiler for something polyflow does not do (OpenMP, a floating-point
environment, per-function optimization or target settings) keeps its function with the C
compiler; at file scope (`#pragma pack`, `#pragma omp threadprivate`, `STDC FP_CONTRACT`, ...)
it keeps every function of the file there. Loop hints that only assert what polyflow's own
dependence analysis decides (`GCC ivdep`, `GCC unroll`, `scop`) are read and left, with a note
saying so; other pragmas are ignored, as gcc ignores pragmas it does not know.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pycparser import c_ast

from polyflow.frontend import c_analysis as ana

# What a pragma asks of the compiler:
#   cc     something only the C compiler does: the function (file scope: the file) is its
#   note   a loop hint polyflow reads and leaves to its own analysis: compiled, with a note
#   quiet  nothing for the generated code (diagnostics, identification, include guards)
Verdict = Literal["cc", "note", "quiet"]


@dataclass(frozen=True)
class PragmaVerdict:
    verdict: Verdict
    reason: str


# First words (lowercase) → (verdict, why). Longest match first.
_KNOWN: list[tuple[tuple[str, ...], Verdict, str]] = [
    (("omp",), "cc", "OpenMP directives are the C compiler's (-fopenmp)"),
    (("acc",), "cc", "OpenACC directives are the C compiler's"),
    (("stdc",), "cc", "it changes the floating-point environment or contraction"),
    (("float_control",), "cc", "it changes the floating-point semantics"),
    (("fenv_access",), "cc", "it changes the floating-point environment"),
    (("fp_contract",), "cc", "it changes floating-point contraction"),
    (("pack",), "cc", "it changes structure layouts"),
    (("scalar_storage_order",), "cc", "it changes the byte order of structures"),
    # symbol-level: the C compiler's part of the file, which keeps them, defines the symbols
    (("redefine_extname",), "quiet", ""),
    (("weak",), "quiet", ""),
    (("gcc", "optimize"), "cc", "it sets gcc's optimization options for the code after it"),
    (("gcc", "target"), "cc", "it sets gcc's target options for the code after it"),
    (("gcc", "push_options"), "cc", "it sets gcc's options for the code after it"),
    (("gcc", "pop_options"), "cc", "it sets gcc's options for the code after it"),
    (("gcc", "reset_options"), "cc", "it sets gcc's options for the code after it"),
    (("gcc", "ivdep"), "note", "polyflow's dependence analysis decides what runs in parallel"),
    (("gcc", "unroll"), "note", "polyflow and LLVM choose the unrolling"),
    (("gcc", "novector"), "note", "polyflow and LLVM choose the vectorization"),
    (("ivdep",), "note", "polyflow's dependence analysis decides what runs in parallel"),
    (("unroll",), "note", "polyflow and LLVM choose the unrolling"),
    (("nounroll",), "note", "polyflow and LLVM choose the unrolling"),
    (("clang", "loop"), "note", "polyflow and LLVM choose the loop transformations"),
    (("vector",), "note", "polyflow and LLVM choose the vectorization"),
    (("simd",), "note", "polyflow and LLVM choose the vectorization"),
    (("scop",), "note", "polyflow finds the loop nests it optimizes by itself"),
    (("endscop",), "note", "polyflow finds the loop nests it optimizes by itself"),
    (("once",), "quiet", ""),
    (("message",), "quiet", ""),
    (("ident",), "quiet", ""),
    (("gcc", "diagnostic"), "quiet", ""),
    (("clang", "diagnostic"), "quiet", ""),
    (("gcc", "warning"), "quiet", ""),
    (("gcc", "error"), "quiet", ""),
    (("gcc", "system_header"), "quiet", ""),
    (("gcc", "visibility"), "quiet", ""),
    (("gcc", "poison"), "quiet", ""),
    (("gcc", "dependency"), "quiet", ""),
    (("region",), "quiet", ""),
    (("endregion",), "quiet", ""),
]


def pragma_verdict(text: str) -> PragmaVerdict:
    """What polyflow does with `#pragma TEXT` (TEXT without `#pragma`)."""
    words = text.replace("(", " ( ").split()
    lowered = tuple(w.lower() for w in words[:2])
    for prefix, verdict, why in _KNOWN:
        if lowered[: len(prefix)] == prefix:
            return PragmaVerdict(verdict, why)
    return PragmaVerdict("note", "gcc does not act on it either (unknown pragma)")


def pragmas_in(node: c_ast.Node | None) -> list[c_ast.Pragma]:
    """The `#pragma` lines inside `node` (a function body), in source order."""
    if node is None:
        return []
    return [n for n in ana.walk(node) if isinstance(n, c_ast.Pragma)]


def pragma_label(pragma: c_ast.Pragma) -> str:
    """`#pragma omp parallel for` as the user wrote it, for messages."""
    return f"#pragma {' '.join(str(pragma.string).split())}"


__all__ = ["PragmaVerdict", "pragma_label", "pragma_verdict", "pragmas_in"]
