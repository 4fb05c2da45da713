"""The alias guard: which functions become dispatchers and which argument pairs they check, and
that overlapping arrays take the unraised copy (the raised one would compute something else)."""

from __future__ import annotations

import numpy as np
import pytest
from mlir import ir

import polyflow
from polyflow.frontend.c import emit_c_module
from polyflow.frontend.c_parse import parse_c
from polyflow.raising import alias_guard as guard

ACCUMULATE = """void kernel(int n, double A[8], double B[8]) {
  for (int i = 0; i < n; i++)
    for (int k = 0; k < n; k++)
      A[i] += B[k];
}
"""


def frontend(source: str) -> ir.Module:
    return emit_c_module(parse_c(source, "t.c", polyflow.Options())).module


def functions(module: ir.Module) -> dict[str, ir.Operation]:
    return {
        ir.StringAttr(op.attributes["sym_name"]).value: op.operation
        for op in module.body.operations
        if op.operation.name == "func.func"
    }


def test_a_function_writing_one_of_two_arrays_becomes_a_dispatcher() -> None:
    module = frontend(ACCUMULATE)
    assert guard.guard_argument_aliasing(module) == ["kernel"]
    module.operation.verify()
    fns = functions(module)
    assert {"kernel", "kernel.affine", "kernel.scf"} <= fns.keys()
    dispatcher = fns["kernel"]
    assert guard.NO_RAISE_ATTR in dispatcher.attributes
    assert ir.StringAttr(dispatcher.attributes[guard.DISPATCHER_ATTR]).value == "kernel.affine"
    assert guard.NO_RAISE_ATTR in fns["kernel.scf"].attributes
    assert guard.NO_RAISE_ATTR not in fns["kernel.affine"].attributes
    text = str(dispatcher)
    assert text.count("memref.extract_aligned_pointer_as_index") == 2
    assert "call @kernel.affine" in text and "call @kernel.scf" in text
    # guarding again changes nothing
    assert guard.guard_argument_aliasing(module) == []


@pytest.mark.parametrize(
    ("source", "why"),
    [
        (
            "double kernel(int n, double A[8], double B[8]) {\n double s = 0;\n"
            " for (int i = 0; i < n; i++) s += A[i] * B[i];\n return s;\n}\n",
            "both arrays are only read",
        ),
        (
            "void kernel(int n, double *A, double *B) {\n"
            " for (int i = 0; i < n; i++) A[i] += B[i];\n}\n",
            "pointer parameters have no extent to check",
        ),
        (
            "void kernel(double A[8], double B[8]) {\n A[0] = B[1];\n}\n",
            "no loop to optimize",
        ),
    ],
)
def test_functions_that_need_no_guard_are_left_alone(source: str, why: str) -> None:
    module = frontend(source)
    assert guard.guard_argument_aliasing(module) == [], why


def test_overlapping_arrays_run_the_unraised_copy() -> None:
    fn = polyflow.compile_c(ACCUMULATE)
    assert "reductions" in fn.mlir("affine")  # the raised copy keeps A[i] in a register

    def reference(a: np.ndarray, b: np.ndarray) -> None:
        for i in range(8):
            for k in range(8):
                a[i] += b[k]

    same = np.arange(8.0)
    expected = same.copy()
    reference(expected, expected)
    fn(8, same, same)
    assert np.array_equal(same, expected)

    a, b = np.arange(8.0), np.linspace(1.0, 2.0, 8)
    want_a = a.copy()
    reference(want_a, b)
    fn(8, a, b)
    assert np.array_equal(a, want_a)
