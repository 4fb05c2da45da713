"""Row neighbours from registers (polyflow/lowering/register_shifts.py): the aligned middle of an
out-of-place row sweep loads each row once per vector and shifts it across lanes for the
neighbouring elements; loops that do not qualify keep LLVM's vectorization. IR tests on small
MLIR, and programs with rows at every offset within a vector and of every short length, in
double, float and int, against gcc -O2's digits."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from mlir import ir

import polyflow
from polyflow.lowering.vector_alignment import align_vector_loops

# A 5-point stencil's row: A read at j-1, j, j+1 of row i and at j of rows i-1 and i+1.
ROW = """
func.func @row(%A: memref<100x1000xf64>, %B: memref<100x1000xf64>, %n: index) {
  %c = arith.constant 2.000000e-01 : f64
  affine.for %i = 1 to 99 {
    affine.for %k = 1 to %n {
      %0 = affine.load %A[%i, %k] : memref<100x1000xf64>
      %1 = affine.load %A[%i, %k - 1] : memref<100x1000xf64>
      %2 = affine.load %A[%i, %k + 1] : memref<100x1000xf64>
      %3 = affine.load %A[%i - 1, %k] : memref<100x1000xf64>
      %4 = affine.load %A[%i + 1, %k] : memref<100x1000xf64>
      %5 = arith.addf %0, %1 : f64
      %6 = arith.addf %5, %2 : f64
      %7 = arith.addf %6, %3 : f64
      %8 = arith.addf %7, %4 : f64
      %9 = arith.mulf %8, %c : f64
      affine.store %9, %B[%i, %k] : memref<100x1000xf64>
    }
  }
  return
}
"""


def _aligned(source: str, vector_bytes: int = 64) -> str:
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(source)
        assert align_vector_loops(module, vector_bytes) == 1
        assert module.operation.verify()
        return str(module)


def _register_loop(text: str) -> str:
    """The body of the loop that carries vectors (the register loop)."""
    match = re.search(r"scf\.for .* iter_args\(.*\) -> \(.*\) \{\n(.*?)\n\s*scf\.yield", text, re.S)
    assert match, text
    return match.group(1)


def test_the_middle_loads_each_row_once_and_shifts_the_neighbours() -> None:
    text = _aligned(ROW)
    body = _register_loop(text)
    # row i: one load (the vector after; the one at j is carried), rows i-1 and i+1: one each
    assert body.count("vector.load") == 3
    masks = re.findall(r"vector\.shuffle %\w+, %\w+ \[([\d, ]+)\]", body)
    assert sorted(masks) == ["1, 2, 3, 4, 5, 6, 7, 8", "7, 8, 9, 10, 11, 12, 13, 14"]
    assert body.count("vector.store") == 1 and "vector<8xf64>" in body
    # the constant is broadcast once, before the loop
    assert "vector.broadcast" in text and "vector.broadcast" not in body
    # the loops: the register loop, and one scalar loop for rows of fewer than two vectors
    # (the iterations around the whole vectors run masked: the next test)
    assert text.count("scf.for") == 2
    # the vector at the start carried in; the loop's 3 loads; its last iteration peeled, with
    # the loads of rows i-1 and i+1
    assert text.count("vector.load") == 1 + 3 + 2 and text.count("vector.store") == 2
    # the vector before the first iteration and the one after the last: only the lanes the
    # shifts use (the last of the one before, the first of the one after)
    masks = re.findall(r"dense<\[([a-z, ]+)\]> : vector<8xi1>", text)
    assert sorted(masks) == [
        "false, false, false, false, false, false, false, true",
        "true, false, false, false, false, false, false, false",
    ]
    # and 5 masked loads in each of the two masked vectors around the whole ones
    assert text.count("vector.maskedload") == 2 + 2 * 5


def _then_block(text: str, condition: str) -> str:
    """The then-block of the `scf.if` on the comparison `condition` (e.g. `sgt`) of indices:
    the lines up to its closing brace."""
    match = re.search(
        rf"(%\w+) = arith\.cmpi {condition}, %\w+, %\w+ : index\n(\s*)scf\.if \1 \{{\n", text
    )
    assert match, text
    end = text.index(f"\n{match.group(2)}}}", match.end())
    return text[match.end() : end]


def test_the_iterations_around_the_whole_vectors_run_as_one_masked_vector_each() -> None:
    text = _aligned(ROW)
    # before the aligned start (where it lies past the first iteration) and after the last
    # whole vector (where the end is not one): one vector each, not a scalar loop
    for condition in ("sgt", "slt"):
        block = _then_block(text, condition)
        assert "scf.for" not in block and "memref.store" not in block
        # its store only to the iterations in the row: lanes first <= j + l < end
        assert block.count("vector.maskedstore") == 1 and "vector.store" not in block
        assert "cmpi sge" in block and "cmpi slt" in block
        # loads: row i before, at and after the vector (shifted across lanes), rows i-1 and
        # i+1 at it; every one masked to the elements the scalar loop reads
        assert block.count("vector.maskedload") == 5 and "vector.load" not in block
        assert len(re.findall(r"vector\.shuffle", block)) == 2
    # the scalar stores: only in the loop of rows shorter than two vectors
    assert text.count("memref.store") == 1


INTEGER_ROW = """
func.func @row(%A: memref<100x1000xTYPE>, %B: memref<100x1000xTYPE>, %n: index) {
  affine.for %i = 1 to 99 {
    affine.for %k = 1 to %n {
      %0 = affine.load %A[%i, %k - 1] : memref<100x1000xTYPE>
      %1 = affine.load %A[%i, %k] : memref<100x1000xTYPE>
      %2 = affine.load %A[%i, %k + 1] : memref<100x1000xTYPE>
      %3 = arith.addi %0, %2 : TYPE
      %4 = arith.OP %3, %1 : TYPE
      affine.store %4, %B[%i, %k] : memref<100x1000xTYPE>
    }
  }
  return
}
"""


@pytest.mark.parametrize(
    ("type_", "op", "masked"),
    [
        ("i64", "muli", True),
        ("i32", "subi", True),
        # masked-off lanes hold zeros: a division by one would trap
        ("i64", "divsi", False),
        ("i32", "remui", False),
        # 16-bit elements: masked loads and stores only with AVX-512BW
        ("i16", "muli", False),
    ],
)
def test_bodies_that_may_not_run_on_lanes_outside_the_row_keep_llvms_ends(
    type_: str, op: str, masked: bool
) -> None:
    text = _aligned(INTEGER_ROW.replace("TYPE", type_).replace("OP", op))
    # the register loop either way
    assert "vector.shuffle" in _register_loop(text)
    assert ("vector.maskedstore" in text) is masked
    if not masked:
        # the alignment's head and tail as scalar loops, the register loop, short middles
        assert text.count("scf.for") == 4


def test_the_row_the_next_sweep_reads_first_is_prefetched_a_row_ahead() -> None:
    # rows of 8000 B: A[i + 2], read first by the next iteration of i, lies in another page
    text = _aligned(ROW)
    body = _register_loop(text)
    prefetches = re.findall(r"memref\.prefetch %arg0\[(%\w+), (%\w+)\], read", body)
    assert len(prefetches) == 1, body
    row, column = prefetches[0]

    def defined(value: str) -> str:
        found = re.search(rf"{value} = (.*)", body)
        assert found, value
        return found.group(1)

    # the row: one past the row i + 1 that a vector load of the body reads
    below, one = re.fullmatch(r"arith\.addi (%\w+), (%\w+) : index", defined(row)).groups()
    assert re.fullmatch(r"arith\.constant 1 : index", defined(one))
    row_map = re.match(r"affine\.apply (#map\d+)", defined(below)).group(1)
    loads = re.findall(r"vector\.load %arg0\[(%\w+), %\w+\]", body)
    assert row_map in {defined(load).split("(")[0].split()[-1] for load in loads}
    maps = dict(re.findall(r"^(#map\d+) = affine_map<(.*)>$", text, re.M))
    assert maps[row_map].endswith("-> (d0 + 1)")
    # the column: 4 vectors (32 elements) ahead of the loop's
    column_map = re.match(r"affine\.apply (#map\d+)", defined(column)).group(1)
    assert maps[column_map].endswith("-> (d1 + 32)"), maps[column_map]
    # the peeled last iteration and the loops around prefetch nothing
    assert text.count("memref.prefetch") == 1
    # rows of 3200 B: the hardware prefetchers follow them
    short = ROW.replace("100x1000xf64", "100x400xf64")
    assert "memref.prefetch" not in _aligned(short)


def test_a_row_read_only_before_its_element_carries_the_vector_before() -> None:
    text = _aligned(
        ROW.replace(
            "%k + 1] : memref<100x1000xf64>\n      %3", "%k] : memref<100x1000xf64>\n      %3"
        )
    )
    body = _register_loop(text)
    # row i at j-1 and j: the vector at j is loaded, the one before it carried
    assert re.findall(r"vector\.shuffle %\w+, %\w+ \[([\d, ]+)\]", body) == [
        "7, 8, 9, 10, 11, 12, 13, 14"
    ]
    assert body.count("vector.load") == 3


def test_an_update_in_place_of_its_own_element_shifts_the_rows_it_does_not_write() -> None:
    # B[i][k] read and written at its own element: each iteration on its own, A not written
    source = ROW.replace(
        "%9 = arith.mulf %8, %c : f64",
        "%b = affine.load %B[%i, %k] : memref<100x1000xf64>\n"
        "      %m = arith.mulf %8, %c : f64\n      %9 = arith.addf %m, %b : f64",
    )
    text = _aligned(source)
    body = _register_loop(text)
    masks = re.findall(r"vector\.shuffle %\w+, %\w+ \[([\d, ]+)\]", body)
    assert len(masks) == 2
    # A's three rows and B's own element: one load each, B's before its store
    assert body.count("vector.load") == 4
    assert body.index("vector.load %arg1") < body.index("vector.store")
    # masked vectors before the aligned start and after the last whole vector (no scalar
    # prologue and rest): the register loop and the loop of short rows
    assert text.count("scf.for") == 2
    assert text.count("vector.maskedstore") == 2


# two rows unrolled and jammed into one loop: rows i and i+1 of B, each from A's rows
# around it, A's row i+1 the centre of one and a neighbour of the other
JAMMED = """
func.func @rows(%A: memref<100x1000xf64>, %B: memref<100x1000xf64>, %n: index) {
  %c = arith.constant 2.000000e-01 : f64
  affine.for %i = 1 to 97 step 2 {
    affine.for %k = 1 to %n {
      %0 = affine.load %A[%i, %k - 1] : memref<100x1000xf64>
      %1 = affine.load %A[%i, %k + 1] : memref<100x1000xf64>
      %2 = affine.load %A[%i + 1, %k] : memref<100x1000xf64>
      %3 = arith.addf %0, %1 : f64
      %4 = arith.addf %3, %2 : f64
      %5 = arith.mulf %4, %c : f64
      affine.store %5, %B[%i, %k] : memref<100x1000xf64>
      %6 = affine.load %A[%i + 1, %k - 1] : memref<100x1000xf64>
      %7 = affine.load %A[%i + 1, %k + 1] : memref<100x1000xf64>
      %8 = affine.load %A[%i, %k] : memref<100x1000xf64>
      %9 = arith.addf %6, %7 : f64
      %10 = arith.addf %9, %8 : f64
      %11 = arith.addf %10, %2 : f64
      affine.store %11, %B[%i + 1, %k] : memref<100x1000xf64>
    }
  }
  return
}
"""


def test_jammed_rows_share_the_rows_they_both_read() -> None:
    text = _aligned(JAMMED)
    body = _register_loop(text)
    # A's rows i and i+1, each loaded once per vector (the centre of one row, the neighbour of
    # the other), the neighbours shifted; both rows of B stored
    assert body.count("vector.load") == 2
    assert len(re.findall(r"vector\.shuffle", body)) == 4
    assert body.count("vector.store") == 2


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # the second row's element moves with another value: at run time it may be the first
        # row's element of another iteration
        ("affine.store %11, %B[%i + 1, %k]", "affine.store %11, %B[%i + 1, %k + %i]"),
        # the second row one element further along: vectorized, an earlier iteration's store
        # would land after a later one's
        ("affine.store %11, %B[%i + 1, %k]", "affine.store %11, %B[%i + 1, %k + 1]"),
    ],
)
def test_jammed_stores_that_may_meet_across_iterations_keep_llvms_path(old: str, new: str) -> None:
    assert old in JAMMED
    assert "vector." not in _aligned(JAMMED.replace(old, new))


@pytest.mark.parametrize(
    "changes",
    [
        # in place, the written row read around its element: the prologue-and-aligned-loop
        # shape, vectorized by LLVM
        [("%B[%i, %k]", "%A[%i, %k]")],
        # a row written at two elements per iteration: vectorized, the later iteration's
        # first store would not be the last
        [
            (
                "affine.store %9, %B[%i, %k] : memref<100x1000xf64>",
                "affine.store %9, %B[%i, %k] : memref<100x1000xf64>\n"
                "      affine.store %8, %B[%i, %k + 1] : memref<100x1000xf64>",
            )
        ],
        # in place, a row written that the body reads at another row
        [
            (
                "%9 = arith.mulf %8, %c : f64",
                "%b = affine.load %B[%i - 1, %k] : memref<100x1000xf64>\n"
                "      %9 = arith.addf %8, %b : f64",
            )
        ],
        # each row read at one element only: LLVM's vector loads are as good
        [("%A[%i, %k - 1]", "%A[%i + 2, %k]"), ("%A[%i, %k + 1]", "%A[%i - 2, %k]")],
        # neighbours a vector or more apart
        [("%A[%i, %k - 1]", "%A[%i, %k - 8]"), ("%A[%i, %k + 1]", "%A[%i, %k + 9]")],
        # a value of the loop's variable in the arithmetic
        [
            (
                "%9 = arith.mulf %8, %c : f64",
                "%x = arith.index_cast %k : index to i64\n      %y = arith.sitofp %x : i64 to f64\n"
                "      %9 = arith.mulf %8, %y : f64",
            )
        ],
    ],
)
def test_loops_that_do_not_qualify_keep_llvms_vectorization(
    changes: list[tuple[str, str]],
) -> None:
    source = ROW
    for old, new in changes:
        assert old in source
        source = source.replace(old, new)
    text = _aligned(source)
    assert "vector." not in text


PROGRAMS = r"""
#include <stdio.h>
#define M 160
double buf_a[M + 16], buf_b[M + 16], buf_w[4];
float buf_f[M + 32], buf_g[M + 32];
int buf_i[M + 16], buf_j[M + 16], buf_q[M + 16];
short buf_h[M + 16], buf_u[M + 16];
double rows_a[3][M + 16], rows_b[2][M + 16];
/* three points, a row read at j-1, j, j+1 */
static void blur(int m, const double a[m + 2], double b[m + 2]) {
  for (int k = 1; k <= m; k++)
    b[k] = (a[k - 1] + a[k] + a[k + 1]) / 3.0;
}
/* five points of a float row, weights from memory (a load that does not move) */
static void wide(int m, const float f[m + 4], float g[m + 4], const double w[4]) {
  for (int k = 2; k < m + 2; k++)
    g[k] = (float)w[0] * (f[k - 2] + f[k + 2]) - (float)w[1] * (f[k - 1] - f[k + 1]) + f[k];
}
/* ints: a maximum of the neighbours (exact), the element after only */
static void peaks(int m, const int x[m + 2], int y[m + 2]) {
  for (int k = 0; k < m; k++)
    y[k] = (x[k] > x[k + 1] ? x[k] : x[k + 1]) + 3 * x[k];
}
/* integer quotients (never by zero in the row): the ends stay LLVM's loops, where a masked
   vector would divide by the zeros of lanes outside the row */
static void quotients(int m, const int q[m + 2], int y[m + 2]) {
  for (int k = 1; k <= m; k++)
    y[k] = (q[k - 1] * 7 + q[k + 1]) / q[k] - q[k + 1] % q[k];
}
/* 16-bit rows: the ends stay LLVM's loops */
static void halves(int m, const short h[m + 2], short u[m + 2]) {
  for (int k = 1; k <= m; k++)
    u[k] = (short)(h[k - 1] - 2 * h[k] + h[k + 1]);
}
/* in place: b read and written at its own element, a's neighbours shifted */
static void update(int m, const double a[m + 2], double b[m + 2]) {
  for (int k = 1; k <= m; k++)
    b[k] = b[k] - 0.5 * (a[k + 1] - a[k - 1]);
}
/* in place along a recurrence: stays LLVM's (scalar) */
static void chain(int m, const double a[m + 2], double b[m + 2]) {
  for (int k = 1; k <= m; k++)
    b[k] = b[k - 1] * 0.5 + (a[k + 1] - a[k]);
}
/* two elements of b written per iteration: stays LLVM's (the next one's first store wins) */
static void pairs(int m, const double a[m + 2], double b[m + 3]) {
  for (int k = 1; k <= m; k++) {
    b[k] = a[k - 1] + a[k + 1];
    b[k + 1] = a[k] * 0.5;
  }
}
/* the row written one element past the one read */
static void shift(int m, const double a[m + 2], double b[m + 2]) {
  for (int k = 1; k < m; k++)
    b[k + 1] = a[k] * 0.5 - a[k - 1] * 0.25;
}
/* two rows in one loop (jammed): rows 0 and 1 of b from a's rows around them */
static void two_rows(int m, int s, double a[3][M + 16], double b[2][M + 16]) {
  for (int k = s + 1; k <= s + m; k++) {
    b[0][k] = a[0][k] * 0.5 + a[1][k - 1] - a[1][k + 1];
    b[1][k] = a[1][k] * 0.25 + a[2][k - 1] - a[2][k + 1] + a[0][k];
  }
}
/* two rows updated in place, each at its own element */
static void two_updates(int m, int s, double a[3][M + 16], double b[2][M + 16]) {
  for (int k = s + 1; k <= s + m; k++) {
    b[0][k] = b[0][k] - 0.5 * (a[0][k + 1] - a[0][k - 1]);
    b[1][k] = b[1][k] * 0.75 - 0.5 * (a[2][k + 1] - a[2][k - 1]);
  }
}
int main(void) {
  for (int s = 0; s < 8; s++) {
    for (int m = 1; m <= M - 8; m += (m < 40 ? 1 : 13)) {
      double *a = buf_a + s, *b = buf_b + (7 - s), *w = buf_w;
      float *f = buf_f + 2 * s, *g = buf_g + (s * 3) % 16;
      int *x = buf_i + s, *y = buf_j + (s + 3) % 8;
      w[0] = 0.375; w[1] = 1.0 / 3.0;
      for (int k = 0; k < M; k++) {
        a[k] = (double)((k * 7 + s) % 23) / 7.0;
        b[k] = -1.0;
        f[k] = (float)((k * 5 + s) % 19) / 3.0f;
        g[k] = -2.0f;
        x[k] = (k * 37 + s) % 101 - 50;
        y[k] = 0;
      }
      blur(m, a, b);
      double sb = 0.0;
      for (int k = 0; k < M; k++) sb += b[k] * (double)(1 + k % 5);
      shift(m, a, b);
      update(m, a, b);
      chain(m, a, b);
      update(m, a, b);
      pairs(m, a, b);
      double sc = 0.0;
      for (int k = 0; k < M; k++) sc += b[k] * (double)(1 + k % 7);
      wide(m, f, g, w);
      double sf = 0.0;
      for (int k = 0; k < M; k++) sf += (double)g[k] * (double)(1 + k % 3);
      peaks(m, x, y);
      long sy = 0;
      for (int k = 0; k < M; k++) sy += (long)y[k] * (1 + k % 4);
      int *q = buf_q + (s + 5) % 8;
      short *h = buf_h + s, *u = buf_u + (8 - s) % 8;
      for (int k = 0; k < M; k++) {
        q[k] = 1 + (k * 13 + s) % 17;
        h[k] = (short)((k * 29 + s) % 61 - 30);
        u[k] = 7;
        y[k] = 0;
      }
      quotients(m, q, y);
      halves(m, h, u);
      for (int k = 0; k < M; k++) sy += ((long)y[k] * 3 + u[k]) * (1 + k % 5);
      for (int k = 0; k < M; k++) sy += (long)y[k] * (1 + k % 4);
      for (int r = 0; r < 3; r++)
        for (int k = 0; k < M + 16; k++) rows_a[r][k] = (double)((k * 11 + r * 5 + s) % 29) / 5.0;
      for (int r = 0; r < 2; r++)
        for (int k = 0; k < M + 16; k++) rows_b[r][k] = (double)r - 0.5;
      two_rows(m, s, rows_a, rows_b);
      two_updates(m, s, rows_a, rows_b);
      double sr = 0.0;
      for (int r = 0; r < 2; r++)
        for (int k = 0; k < M + 16; k++) sr += rows_b[r][k] * (double)(1 + (k + r) % 6);
      printf("%d %d %.17g %.17g %.17g %ld %.17g\n", s, m, sb, sc, sf, sy, sr);
    }
  }
  return 0;
}
"""


def test_rows_at_every_offset_and_length_print_gccs_digits(tmp_path: Path) -> None:
    source = tmp_path / "rows.c"
    source.write_text(PROGRAMS)
    options = polyflow.Options(opt_level=3, march="native", parallel=False, fp_contract="off")
    built = polyflow.build_program(source, tmp_path / "pf", options=options, cache=None)
    kernels = {"blur", "wide", "peaks", "shift", "update", "chain", "pairs", "two_rows"}
    kernels |= {"quotients", "halves"}
    assert kernels | {"two_updates"} <= set(built.compiled)
    shifted = {r.function for r in built.report.remarks if r.kind == "register-shifts"}
    assert shifted == {
        *("blur", "wide", "peaks", "shift", "update", "two_rows", "two_updates"),
        *("quotients", "halves"),
    }
    subprocess.run(
        ["gcc", "-O2", "-ffp-contract=off", str(source), "-o", str(tmp_path / "ref")], check=True
    )
    ours = subprocess.run([tmp_path / "pf"], capture_output=True, text=True, check=True)
    ref = subprocess.run([tmp_path / "ref"], capture_output=True, text=True, check=True)
    assert len(ours.stdout.splitlines()) > 300
    assert ours.stdout == ref.stdout
