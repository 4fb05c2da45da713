"""C pointer arguments sized at run time (polyflow/raising/pointer_extents.py): which functions
become dispatchers, what the sized copy promises, the extents isl computes, and that programs
calling them with disjoint, overlapping and offset pointers behave as with gcc, on the CPU at
-O3 and on the emulated GPU."""

from __future__ import annotations

from pathlib import Path

import islpy as isl
import numpy as np
import pytest
from difftest import check_program_against_gcc
from mlir import ir

import polyflow
from polyflow.frontend.c import emit_c_module
from polyflow.frontend.c_parse import parse_c
from polyflow.ir.aliasing import has_argument_attribute, has_unknown_extent
from polyflow.ir.names import DISPATCHER_ATTR, NO_RAISE_ATTR, NOALIAS_ATTR, REMARKS_ATTR
from polyflow.poly import isl_helpers as ih
from polyflow.raising import raise_to_affine

PROGRAM = Path(__file__).parent / "programs" / "pointer_arguments.c"

SAXPY = """void saxpy(int n, double a, const double *x, double *y) {
  for (int i = 0; i < n; i++)
    y[i] = a * x[i] + y[i];
}
"""


def raised(source: str, **options: object) -> ir.Module:
    opts = polyflow.Options(opt_level=3, **options)  # type: ignore[arg-type]
    module = emit_c_module(parse_c(source, "t.c", opts)).module
    return raise_to_affine(module, opts)


def functions(module: ir.Module) -> dict[str, ir.Operation]:
    return {
        ir.StringAttr(op.attributes["sym_name"]).value: op.operation
        for op in module.body.operations
        if op.operation.name == "func.func"
    }


def remarks(fn: ir.Operation) -> str:
    return str(fn.attributes[REMARKS_ATTR]) if REMARKS_ATTR in fn.attributes else ""


def test_a_function_writing_through_a_pointer_gets_a_sized_copy() -> None:
    module = raised(SAXPY)
    module.operation.verify()
    fns = functions(module)
    assert {"saxpy", "saxpy.sized", "saxpy.pointers"} <= fns.keys()
    dispatcher = fns["saxpy"]
    assert NO_RAISE_ATTR in dispatcher.attributes
    assert ir.StringAttr(dispatcher.attributes[DISPATCHER_ATTR]).value == "saxpy.sized"
    text = str(dispatcher)
    assert "call @saxpy.sized" in text and "call @saxpy.pointers" in text
    assert text.count("memref.reinterpret_cast") == 2  # both pointers get their extent
    # the sized copy: no unknown extent, arrays marked noalias (the dispatcher checked them)
    sized_args = list(fns["saxpy.sized"].regions[0].blocks[0].arguments)[2:]
    assert not any(has_unknown_extent(a) for a in sized_args)
    assert all(has_argument_attribute(a, NOALIAS_ATTR) for a in sized_args)
    # the pointer copy stays as it was, out of the later stages' reach
    pointer_args = list(fns["saxpy.pointers"].regions[0].blocks[0].arguments)[2:]
    assert all(has_unknown_extent(a) for a in pointer_args)
    assert NO_RAISE_ATTR in fns["saxpy.pointers"].attributes
    assert "parameters 3 and 4 are C pointers" in remarks(dispatcher)


def test_a_read_only_pointer_is_sized_only_for_the_gpu() -> None:
    source = """double total(int n, const double *x) {
  double s = 0.0;
  for (int i = 0; i < n; i++) s += x[i];
  return s;
}
"""
    assert "total.sized" not in functions(raised(source))  # nothing to check on the CPU
    assert "total.sized" in functions(raised(source, target="cuda"))  # its copy needs a size


@pytest.mark.parametrize(
    ("source", "why"),
    [
        (
            "void gather(int n, const int *idx, const double *x, double *y) {\n"
            "  for (int i = 0; i < n; i++) y[i] = x[idx[i]];\n}\n",
            "used by 'memref.load'",
        ),
        (
            "void past_row(int n, int m, const double *a, double *s) {\n"
            "  for (int i = 0; i < n; i++)\n"
            "    for (int k = 0; k < m; k++) s[i * m + k] = a[i * m + k + 1] * 2.0;\n}\n",
            "",
        ),
    ],
    ids=["data-dependent-subscript", "row-crossing-subscript"],
)
def test_pointers_whose_footprint_is_unknown_stay_unsized(source: str, why: str) -> None:
    fns = functions(raised(source))
    assert not any(name.endswith(".sized") for name in fns)
    if why:
        assert any("stay unsized" in remarks(f) and why in remarks(f) for f in fns.values())


def test_lexicographic_extent_of_a_triangle_and_of_an_empty_set() -> None:
    triangle = isl.Set("[P0] -> { [r, c] : 0 <= c <= r < P0 }")
    extent = ih.lexicographic_extent(triangle)
    assert extent.low == (ih.Const(0), ih.Const(0))
    assert extent.nonempty == ih.Compare(">=", ih.Var("P0"), ih.Const(1))
    empty = ih.lexicographic_extent(isl.Set("[P0] -> { [r] : 0 <= r < P0 and r > P0 }"))
    assert empty.nonempty is False
    with pytest.raises(ih.AstUnsupported):
        ih.lexicographic_extent(isl.Set("[P0] -> { [r] : r >= P0 }"))


def test_pointer_program_matches_gcc_at_O3(tmp_path: Path) -> None:
    check_program_against_gcc(PROGRAM, tmp_path, polyflow.Options(opt_level=3))


def test_pointer_function_from_python_on_the_emulated_gpu() -> None:
    source = """void mm_flat(int n, int m, int p, const double *A, const double *B, double *C) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < p; j++) {
      C[i * p + j] = 0.0;
      for (int k = 0; k < m; k++)
        C[i * p + j] += A[i * m + k] * B[k * p + j];
    }
}
"""
    fn = polyflow.compile_c(source, "mm_flat", target="cuda")
    kernels = [r for r in fn.report.remarks if r.kind == "gpu-kernel" and r.function == "mm_flat"]
    assert kernels, [r.message for r in fn.report.remarks]
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((13, 7)), rng.standard_normal((7, 9))
    c = np.zeros((13, 9))
    fn.emulate(13, 7, 9, a.ravel(), b.ravel(), c.reshape(-1))
    np.testing.assert_allclose(c, a @ b, rtol=1e-12)
    # the same function on overlapping arrays takes the pointer copy: still right
    buffer = rng.standard_normal(3 * 16)
    expected = buffer.copy()
    for i in range(4):  # C's order, C (from element 20) overwriting B (16 to 31) as it goes
        for j in range(4):
            expected[20 + i * 4 + j] = 0.0
            for k in range(4):
                expected[20 + i * 4 + j] += expected[i * 4 + k] * expected[16 + k * 4 + j]
    fn.emulate(4, 4, 4, buffer[:16], buffer[16:32], buffer[20:36])
    np.testing.assert_allclose(buffer, expected, rtol=1e-12)


def test_pointer_program_with_line_tables_matches_gcc(tmp_path: Path) -> None:
    """With -g every op of the dispatcher keeps the function's source position: a call without
    one failed LLVM's lowering, and the whole file fell back to the C compiler."""
    options = polyflow.Options(opt_level=3, debug_info=True)
    built = polyflow.build_program(PROGRAM, tmp_path / "with-g", options=options)
    assert not built.report.select(kind="internal-error")
    assert built.compiled and not built.fallbacks  # through MLIR, not by the fallback
    check_program_against_gcc(PROGRAM, tmp_path / "run", options)
