"""LLVM-dialect MLIR → LLVM IR → optimized IR → relocatable object file."""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mlir import ir
from mlir.dialects import llvm

from polyflow.options import Options
from polyflow.toolchain import host_triple, llvm_bin


def translate_to_llvm_ir(module: ir.Module) -> str:
    """The textual LLVM IR of a module already lowered to the LLVM dialect."""
    with module.context:
        return str(llvm.translate_module_to_llvmir(module.operation))


def with_compile_directory(text: str, directory: str) -> str:
    """`text` (LLVM IR with line tables) with its source files found from `directory`, as gcc's
    compile directory: MLIR's locations name files as the command line did, relative to it.
    The compile unit, unnamed in MLIR's translation, takes the first file's name."""
    text = re.sub(
        r'!DIFile\(filename: "([^"]*)", directory: ""\)',
        lambda m: f'!DIFile(filename: "{m.group(1)}", directory: "{_escape(directory)}")',
        text,
    )
    first = re.search(r'!DIFile\(filename: "((?!<unknown>)[^"]*)"', text)
    if first is not None:
        text = text.replace('filename: "<unknown>"', f'filename: "{first.group(1)}"')
    return text


def _escape(text: str) -> str:
    """A string for an LLVM IR metadata string literal."""
    return "".join(c if c.isprintable() and c not in '"\\' else f"\\{ord(c):02X}" for c in text)


def _cpu_flags(options: Options) -> list[str]:
    triple = [f"-mtriple={host_triple()}"]
    return triple + ([f"-mcpu={options.march}"] if options.march else [])


@dataclass(frozen=True)
class VectorizedLoop:
    """A loop LLVM's loop vectorizer vectorized: the function it is in (LLVM's name), its
    vector width and interleave count, and its C position where the IR has line tables."""

    function: str
    width: int
    interleave: int
    line: int = 0
    column: int = 0
    file: str = ""


def optimize_llvm_ir(
    text: str, options: Options, vectorized: list[VectorizedLoop] | None = None
) -> str:
    """Run LLVM's `opt` at the level the options ask for (O3 unless opt_level is 0); the loops
    it vectorizes are appended to `vectorized`, when given."""
    level = "-O0" if options.opt_level == 0 else "-O3"
    command = [str(llvm_bin("opt")), level, *_cpu_flags(options), *_OPT_FLAGS, "-S", "-", "-o", "-"]
    if vectorized is None or options.opt_level == 0:
        return _run(command, text)
    with tempfile.TemporaryDirectory(prefix="polyflow-") as tmp:
        remarks = Path(tmp) / "remarks.yaml"
        out = _run(
            [*command, f"-pass-remarks-output={remarks}", "-pass-remarks-filter=loop-vectorize"],
            text,
        )
        if remarks.exists():
            vectorized += vectorized_loops(remarks.read_text())
    return out


_DOCUMENT = re.compile(r"^--- !(\w+)\n(.*?)^\.\.\.$", re.M | re.S)
_FIELD = re.compile(r"^(Pass|Name|Function):\s+(.*)$", re.M)
_DEBUG_LOC = re.compile(r"DebugLoc:\s+\{\s*File:\s*'?([^',]*)'?,\s*Line:\s*(\d+),\s*Column:\s*(\d+)")
_ARG = re.compile(r"-\s+(VectorizationFactor|InterleaveCount):\s+'?(\d+)")


def vectorized_loops(remarks_yaml: str) -> list[VectorizedLoop]:
    """The `Vectorized` remarks of an LLVM optimization-remarks YAML file (`opt
    -pass-remarks-output`) as `VectorizedLoop`s, in the file's order."""
    found: list[VectorizedLoop] = []
    for kind, body in _DOCUMENT.findall(remarks_yaml):
        fields = dict(_FIELD.findall(body))
        if kind != "Passed" or fields.get("Pass") != "loop-vectorize":
            continue
        if fields.get("Name") != "Vectorized":
            continue
        args = dict(_ARG.findall(body))
        where = _DEBUG_LOC.search(body)
        found.append(
            VectorizedLoop(
                function=fields.get("Function", "").strip("'"),
                width=int(args.get("VectorizationFactor", "1")),
                interleave=int(args.get("InterleaveCount", "1")),
                line=int(where.group(2)) if where else 0,
                column=int(where.group(3)) if where else 0,
                file=where.group(1) if where else "",
            )
        )
    return found


# Memref row strides are runtime values; LLVM otherwise vectorizes a copy of each loop that
# assumes a symbolic stride equals 1 (never true for a row of a C matrix) and runs the scalar
# copy. On syrk (A[j][k] with j innermost) this halves the instructions executed (3.64 G → 1.67 G,
# gcc -O3: 2.04 G); gemm, jacobi-2d, heat-3d and floyd-warshall are unchanged.
# Runtime alias checks stay with their loop: hoisted out of the loop around it, the check spans
# every row that loop visits and fails where the rows of one iteration are disjoint. floyd-
# warshall's split j loops (index_split.py) then never ran vectorized: LARGE, 1 thread, 0.76x
# -> 1.53x gcc.
# No load PRE in GVN: it carries a[i+1] of one iteration over as a[i] of the next, and the
# vectorizer then builds each stencil vector from the previous one with cross-lane shuffles
# instead of loading it (gcc loads). Among PolyBench only jacobi-1d and fdtd-2d change: LARGE,
# 1 thread, over gcc, jacobi-1d 0.92x -> 1.19x, fdtd-2d 1.51x -> 1.56x.
# Ordered reductions: a float sum kept in C's order is still vectorized, its additions done lane
# by lane in order (gcc's fold-left reductions), so the loop's loads, products and other
# statements run in vectors. x86 leaves this off by default; without it bicg's
# `q[i] += A[i][j] * p[j]` kept the whole loop scalar (LARGE, 1 thread, over gcc: bicg 0.74x ->
# 0.95x, atax 0.67x -> 0.81x, gesummv 0.77x -> 0.96x, durbin 0.86x -> 1.04x). -ffast-math builds
# are unchanged (their sums may be reordered anyway).
_OPT_FLAGS = [
    "-enable-mem-access-versioning=false",
    "-hoist-runtime-checks=false",
    "-enable-load-pre=false",
    "-force-ordered-reductions",
]


def compile_llvm_ir_to_object(
    text: str, output: Path, options: Options, *, assembly: bool = False
) -> Path:
    """`llc` to a position-independent object file, linkable into a PIE with `cc` (with
    `assembly`, its assembly text instead)."""
    level = "-O0" if options.opt_level == 0 else "-O3"
    with tempfile.TemporaryDirectory(prefix="polyflow-") as tmp:
        src = Path(tmp) / "module.ll"
        src.write_text(text)
        _run(
            [
                str(llvm_bin("llc")),
                level,
                *_cpu_flags(options),
                f"-fp-contract={options.fp_contract}",
                "-relocation-model=pic",
                "-filetype=asm" if assembly else "-filetype=obj",
                str(src),
                "-o",
                str(output),
            ],
            None,
        )
    return output


def _run(cmd: list[str], stdin: str | None) -> str:
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{Path(cmd[0]).name} failed:\n{proc.stderr.strip()}")
    return proc.stdout
