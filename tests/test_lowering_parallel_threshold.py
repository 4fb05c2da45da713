"""Parallel loops whose work is known only at run time (polyflow/lowering/parallel_threshold.py):
guarded by a run-time count of their innermost iterations, with a sequential copy below the
threshold; nests whose count depends on the parallel loop's variables, or is known while
compiling, stay as they were; and a program calling a small runtime-sized parallel loop many
times, or a large one, computes what gcc computes on 1 and 2 threads."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from mlir import ir
from mlir.passmanager import PassManager

import polyflow
from polyflow.lowering.parallel_threshold import serialize_small_parallel_loops

# Rows %lo..%hi of a %n-column array, in parallel over rows; the column loop's bound is
# computed inside the parallel loop from a value outside it.
NEST = """
func.func @nest(%A: memref<?x?xf64>, %lo: index, %hi: index, %n: index) {
  affine.parallel (%i) = (%lo) to (%hi) {
    affine.for %j = 1 to affine_map<()[s0] -> (s0 - 1)>()[%n] {
      %x = affine.load %A[%i, %j - 1] : memref<?x?xf64>
      affine.store %x, %A[%i, %j] : memref<?x?xf64>
    }
  }
  return
}
"""


def _guarded(source: str, min_work: int = 8192) -> tuple[int, str]:
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(source)
        PassManager.parse("builtin.module(lower-affine)").run(module.operation)
        count = serialize_small_parallel_loops(module, min_work)
        assert module.operation.verify()
        return count, str(module)


def test_a_runtime_sized_nest_runs_in_parallel_only_with_enough_work() -> None:
    count, text = _guarded(NEST)
    assert count == 1
    # the count before the loop: rows times columns, each clamped to the threshold
    assert re.search(r"arith\.cmpi uge, %\w+, %c8192", text)
    assert "arith.muli" in text and "arith.minui" in text
    guard = text.index("scf.if")
    assert text.index("scf.parallel") > guard  # the parallel loop: the then branch
    otherwise = text.index("} else {")
    # the else branch: the same rows and columns as nested sequential loops
    assert text.count("scf.for") == 3 and text.index("scf.for", otherwise) > otherwise
    assert text.count("memref.store") == 2


def test_sibling_loops_add_and_branches_count_the_larger() -> None:
    siblings = NEST.replace(
        "    }\n  }\n  return",
        "    }\n    affine.for %k = 0 to %n {\n"
        "      %y = affine.load %A[%i, %k] : memref<?x?xf64>\n"
        "      affine.store %y, %A[%i, %k] : memref<?x?xf64>\n    }\n  }\n  return",
    )
    count, text = _guarded(siblings)
    assert count == 1 and "arith.addi" in text


@pytest.mark.parametrize(
    "source",
    [
        # a tile's point loop: its bounds depend on the parallel variable
        NEST.replace(
            "1 to affine_map<()[s0] -> (s0 - 1)>()[%n]",
            "affine_map<(d0) -> (d0)>(%i) to min affine_map<(d0)[s0] -> (d0 + 32, s0)>(%i)[%n]",
        ),
        # known while compiling: schedule-parallelize decided on it already
        NEST.replace("(%lo) to (%hi)", "(0) to (100)").replace(
            "affine_map<()[s0] -> (s0 - 1)>()[%n]", "99"
        ),
    ],
    ids=["bound-from-parallel-variable", "constant-work"],
)
def test_nests_whose_work_is_not_a_runtime_count_stay(source: str) -> None:
    count, text = _guarded(source)
    assert count == 0 and "scf.if" not in text and "arith.cmpi" not in text


def test_a_loop_that_reads_a_value_computed_inside_the_parallel_loop_stays() -> None:
    loaded = NEST.replace(
        "    affine.for %j = 1 to affine_map<()[s0] -> (s0 - 1)>()[%n] {",
        "    %v = affine.load %A[%i, 0] : memref<?x?xf64>\n"
        "    %m = arith.fptosi %v : f64 to i64\n"
        "    %u = arith.index_cast %m : i64 to index\n"
        "    scf.for %j = %lo to %u step %hi {",
    ).replace("%j - 1]", "%lo]").replace("%A[%i, %j]", "%A[%i, %lo]")
    count, text = _guarded(loaded)
    assert count == 0 and "scf.if" not in text


# A row of `m` points, relaxed `calls` times: each call's loop is parallel with a size known
# only at run time; a small row must not fork the threads on every call.
PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
static void relax(int m, double a[m], double b[m]) {
  for (int k = 1; k < m - 1; k++)
    b[k] = 0.25 * (a[k - 1] + a[k + 1]) + 0.5 * a[k];
}
int main(int argc, char **argv) {
  int m = atoi(argv[1]), calls = atoi(argv[2]);
  double *a = malloc(sizeof(double) * m), *b = malloc(sizeof(double) * m);
  for (int k = 0; k < m; k++) a[k] = b[k] = (double)(k % 17) / 3.0;
  for (int c = 0; c < calls; c++) {
    relax(m, a, b);
    relax(m, b, a);
  }
  double s = 0.0;
  for (int k = 0; k < m; k++) s += a[k] * (double)(1 + k % 7);
  printf("%.17g\n", s);
  free(a); free(b);
  return 0;
}
"""


def test_small_and_large_runtime_sized_loops_match_gcc_on_1_and_2_threads(
    tmp_path: Path,
) -> None:
    source = tmp_path / "relax.c"
    source.write_text(PROGRAM)
    options = polyflow.Options(opt_level=3, march="native", parallel=True)
    llvm = tmp_path / "relax.ll"
    polyflow.build_program(source, llvm, options=options, emit="llvm", cache=None)
    text = llvm.read_text()  # rows of m - 2 points: LLVM folds the count into m
    assert re.search(r"icmp \w+ i(32|64) %\w+, 819[1-4]", text) and "__kmpc_fork_call" in text
    built = polyflow.build_program(source, tmp_path / "pf", options=options, cache=None)
    assert "relax" in built.compiled, built.fallbacks
    subprocess.run(["gcc", "-O2", str(source), "-o", str(tmp_path / "ref")], check=True)
    for m, calls in ((118, 20000), (5, 3), (1, 2), (40000, 3)):
        args = [str(m), str(calls)]
        want = subprocess.run(
            [tmp_path / "ref", *args], capture_output=True, text=True, check=True
        ).stdout
        for threads in ("1", "2"):
            env = {**os.environ, "OMP_NUM_THREADS": threads}
            got = subprocess.run(
                [tmp_path / "pf", *args], capture_output=True, text=True, check=True, env=env
            ).stdout
            assert float(got) == pytest.approx(float(want), rel=1e-13), (m, calls, threads)


def test_a_two_dimensional_parallel_loop_becomes_two_nested_loops_below_the_threshold() -> None:
    grid = """
func.func @grid(%A: memref<?x?xf64>, %n: index, %m: index) {
  affine.parallel (%i, %j) = (1, 2) to (%n, %m) step (1, 3) {
    %x = affine.load %A[%i, %j] : memref<?x?xf64>
    %y = arith.addf %x, %x : f64
    affine.store %y, %A[%i, %j] : memref<?x?xf64>
  }
  return
}
"""
    count, text = _guarded(grid)
    assert count == 1
    otherwise = text[text.index("} else {") :]
    # rows from 1, columns from 2 in steps of 3: the parallel loop's own bounds and steps
    assert otherwise.count("scf.for") == 2
    assert re.search(r"step %c3\w*", otherwise)
    assert "arith.ceildivui" in text  # the column count: ceil((m - 2) / 3)
