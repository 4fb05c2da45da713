"""Vector loops started on a vector boundary (polyflow/lowering/vector_alignment.py): a row
loop whose body reads no array it writes gets a whole vector at each end around an aligned
middle, one that updates in place a scalar prologue before an aligned `affine.for`; loops the
vectorizer does not take, or too short to gain, stay as they were; and programs whose arrays
start at every offset within a vector compute what gcc computes."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from mlir import ir

import polyflow
from polyflow.lowering.vector_alignment import align_vector_loops

# One row of a 5-point stencil from element 1: reads A, writes B (distinct arguments).
ROW = """
func.func @row(%A: memref<100x1000xf64>, %B: memref<100x1000xf64>, %n: index) {
  affine.for %i = 1 to 99 {
    affine.for %k = 1 to %n {
      %c = affine.load %A[%i, %k] : memref<100x1000xf64>
      %l = affine.load %A[%i, %k - 1] : memref<100x1000xf64>
      %r = affine.load %A[%i + 1, %k + 1] : memref<100x1000xf64>
      %s = arith.addf %c, %l : f64
      %t = arith.addf %s, %r : f64
      affine.store %t, %B[%i, %k] : memref<100x1000xf64>
    }
  }
  return
}
"""


def _aligned(source: str, vector_bytes: int = 32) -> tuple[int, str]:
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(source)
        count = align_vector_loops(module, vector_bytes)
        assert module.operation.verify()
        return count, str(module)


def test_an_out_of_place_row_gets_a_vector_at_each_end_around_an_aligned_middle() -> None:
    # (rows read around their element, A[i][k - 1] and A[i][k], take their neighbours from
    # registers, and the iterations around the aligned middle run masked instead:
    # test_lowering_register_shifts.py)
    count, text = _aligned(ROW.replace("%A[%i, %k - 1]", "%A[%i - 1, %k - 1]"))
    assert count == 1
    # the array's address in elements modulo 4 (f64 in 32 bytes), at the function's top
    assert "memref.extract_aligned_pointer_as_index %arg1" in text
    assert re.search(r"arith\.remui %\w+, %c4", text)
    # at least a vector's iterations: head, middle and tail; else the loop as it was
    assert "scf.if" in text and text.count("scf.for") == 3
    assert "vector." not in text
    assert re.search(r"affine\.for %\w+ = 1 to %arg2", text)  # the else branch
    # the aligned start: the store's element offset at the first iteration, rounded up to 4
    assert re.search(r"mod 4", text)
    assert "memref.store" in text and "memref.load" in text


def test_an_in_place_update_gets_a_scalar_prologue_and_an_aligned_loop() -> None:
    in_place = ROW.replace("%B[%i, %k]", "%A[%i, %k]")
    count, text = _aligned(in_place)
    assert count == 1
    assert "scf.if" not in text and text.count("scf.for") == 1  # the prologue
    # the rest: an affine.for from the aligned start to the loop's own end
    assert re.search(r"affine\.for %\w+ = #map\d*\(.*\) to %arg2", text)


def test_avx512_vectors_align_to_64_bytes() -> None:
    _, text = _aligned(ROW, vector_bytes=64)
    assert re.search(r"arith\.remui %\w+, %c8", text) and "mod 8" in text


@pytest.mark.parametrize(
    "source",
    [
        ROW.replace("1 to %n", "1 to 40"),  # known to run fewer than 16 vectors
        ROW.replace("1 to %n {", "1 to %n step 2 {"),
        ROW.replace("%B[%i, %k]", "%B[%k, %i]").replace("1 to %n", "1 to 99"),  # a column
        ROW.replace("100x1000xf64>, %B", "100x1000xf64>, %B")
        .replace("%B: memref<100x1000xf64>", "%B: memref<100x?xf64>")
        .replace("%B[%i, %k] : memref<100x1000xf64>", "%B[%i, %k] : memref<100x?xf64>"),
    ],
    ids=["short", "step-2", "column-store", "dynamic-row-length"],
)
def test_loops_the_vectorizer_does_not_take_or_too_short_stay(source: str) -> None:
    count, text = _aligned(source)
    assert count == 0 and "scf.for" not in text and "extract_aligned" not in text


STENCILS = r"""
#include <stdio.h>
#define M 203
static double buf_a[M + 16], buf_b[M + 16], buf_c[M + 16];
static long buf_i[M + 16];

/* out of place: a whole vector at each end */
static void blur(int m, double a[m], double b[m]) {
  for (int k = 1; k < m - 1; k++)
    b[k] = 0.25 * (a[k - 1] + a[k + 1]) + 0.5 * a[k];
}
/* in place (each element from the one before): the scalar prologue */
static void sweep(int m, double a[m]) {
  for (int k = 1; k < m; k++)
    a[k] = 0.5 * a[k] + 0.5 * a[k - 1];
}
/* in place, element by element: the scalar prologue, and vectorized */
static void ints(int m, long x[m], double c[m]) {
  for (int k = 2; k < m; k++) {
    x[k] = x[k] * 3 + (long)(k ^ 5);
    c[k] = c[k] * 0.75 + 1.0;
  }
}
int main(void) {
  for (int shift = 0; shift < 4; shift++) {
    for (int m = 1; m <= M; m += (m < 24 ? 1 : 29)) {
      double *a = buf_a + shift, *b = buf_b + 3 - shift, *c = buf_c + (shift + 1) % 4;
      long *x = buf_i + shift;
      for (int k = 0; k < M; k++) {
        a[k] = (double)((k * 7 + shift) % 23) / 7.0;
        b[k] = -1.0;
        c[k] = (double)(k % 5);
        x[k] = k % 11;
      }
      blur(m, a, b);
      sweep(m, b);
      ints(m, x, c);
      double s = 0.0;
      long t = 0;
      for (int k = 0; k < M; k++) {
        s += (b[k] + c[k]) * (double)(1 + k % 5);
        t += x[k] * (1 + k % 3);
      }
      printf("%d %d %.17g %ld\n", shift, m, s, t);
    }
  }
  return 0;
}
"""


def test_rows_at_every_offset_and_length_match_gcc(tmp_path: Path) -> None:
    source = tmp_path / "stencils.c"
    source.write_text(STENCILS)
    # sequential: blur's loop would run in parallel (a parallel loop keeps its start)
    options = polyflow.Options(opt_level=3, march="native", parallel=False)
    mlir = tmp_path / "stencils.mlir"
    polyflow.build_program(source, mlir, options=options, emit="llvm-dialect", cache=None)
    # the three loops start aligned: each array's address modulo 4 elements
    assert mlir.read_text().count("llvm.urem") >= 4
    built = polyflow.build_program(source, tmp_path / "pf", options=options, cache=None)
    assert {"blur", "sweep", "ints"} <= set(built.compiled), built.fallbacks
    subprocess.run(["gcc", "-O2", str(source), "-o", str(tmp_path / "ref")], check=True)
    ours = subprocess.run([tmp_path / "pf"], capture_output=True, text=True, check=True)
    ref = subprocess.run([tmp_path / "ref"], capture_output=True, text=True, check=True)
    got_lines, want_lines = ours.stdout.splitlines(), ref.stdout.splitlines()
    assert len(got_lines) == len(want_lines) > 40
    for got, want in zip(got_lines, want_lines, strict=True):
        g, w = got.split(), want.split()
        assert g[:2] == w[:2] and g[3] == w[3]  # integers: exact
        assert float(g[2]) == pytest.approx(float(w[2]), rel=1e-13)


def test_the_option_turns_it_off(tmp_path: Path) -> None:
    source = tmp_path / "stencils.c"
    source.write_text(STENCILS)
    texts = {}
    for on in (True, False):
        options = polyflow.Options(
            opt_level=3, march="native", parallel=False, align_vector_loops=on
        )
        out = tmp_path / f"s{on}.mlir"
        polyflow.build_program(source, out, options=options, emit="llvm-dialect", cache=None)
        texts[on] = out.read_text()
    assert texts[True] != texts[False]
    assert texts[True].count("llvm.urem") > texts[False].count("llvm.urem")
