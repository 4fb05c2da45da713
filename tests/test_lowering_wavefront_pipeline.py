"""Wavefronts of tile columns run as pipelines (lowering/wavefront_pipeline.py): the IR of a
small wavefront, which builds get it, and programs that print gcc -O2's digits on 1 to 4
threads (more threads than cores too: the waits give up the core)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from difftest import build_with_gcc
from mlir import ir
from mlir.passmanager import PassManager
from test_schedule_interleave import SEIDEL_2D
from test_schedule_point_distribution import JACOBI_2D
from test_schedule_whole_rows import PROGRAMS as WHOLE_ROW_PROGRAMS

import polyflow
from polyflow import Options
from polyflow.lowering.wavefront_pipeline import (
    pipeline_wavefront_columns,
    wavefront_column_marks,
)

# Steps w, columns of 4: column I exists at steps max(0, I/4 - 5) .. I/4 (a band of blocks
# skewed as tiling._wavefront makes them); each block adds its column's left neighbour.
WAVEFRONT = """
func.func @f(%a: memref<64xf64>) {
  affine.for %w = 0 to 11 {
    affine.parallel (%i) = (max(0, %w * 4 - 20)) to (min(%w * 4 + 4, 24)) step (4) {
      %x = affine.load %a[%i + 4] : memref<64xf64>
      %y = affine.load %a[%i] : memref<64xf64>
      %z = arith.addf %x, %y : f64
      affine.store %z, %a[%i + 4] : memref<64xf64>
    } {polyflow.wavefront_columns}
  }
  return
}
"""


def _pipelined(text: str) -> tuple[int, str]:
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        marks = wavefront_column_marks(module)
        PassManager.parse("builtin.module(lower-affine)").run(module.operation)
        count = pipeline_wavefront_columns(module, marks)
        assert module.operation.verify()
        return count, str(module)


def test_the_steps_loop_becomes_one_parallel_loop_over_columns() -> None:
    count, text = _pipelined(WAVEFRONT)
    assert count == 1
    body = text.split("func.func @f")[1]
    # the columns' range first (a loop over the steps), one counter per column, then the
    # parallel loop over columns with the steps inside it: no parallel loop inside a loop
    assert body.index("memref.alloc") < body.index("scf.parallel")
    assert body.count("scf.parallel") == 1
    parallel = body[body.index("scf.parallel") :]
    assert "scf.for" in parallel and "scf.while" in parallel
    assert parallel.count("memref.atomic_rmw assign") == 2  # after each block, at the end
    assert parallel.count("memref.atomic_rmw addi") == 2  # the two waits
    assert "func.call @sched_yield" in parallel
    assert "memref.dealloc" in body
    assert "polyflow.in_order" in parallel  # for hand_out_columns_in_order


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        (" {polyflow.wavefront_columns}", "", "not a wavefront's columns"),
        ("max(0, %w * 4 - 20)", "max(0, %w * 4 - 18)", "a step's columns off the grid"),
    ],
)
def test_other_parallel_loops_stay(old: str, new: str, why: str) -> None:
    count, text = _pipelined(WAVEFRONT.replace(old, new))
    assert count == 0, why
    assert "atomic_rmw" not in text


# heat-3d at a size with whole-row tiles in a wavefront and partial tiles at the edges; seidel-2d
# time-tiled and skewed in a wavefront; jacobi-2d in diamond tiles: the programs of the tests
# of those schedules
PROGRAMS = {
    "heat": WHOLE_ROW_PROGRAMS["heat"],
    "seidel": SEIDEL_2D.replace("STEPS", "17").replace("SIZE", "N"),
}


@pytest.mark.parametrize("name", ["heat", "seidel"])
def test_pipelined_wavefronts_print_gccs_digits_on_any_number_of_threads(
    tmp_path: Path, name: str
) -> None:
    src = tmp_path / f"{name}.c"
    src.write_text(PROGRAMS[name])
    lowered = tmp_path / f"{name}.mlir"
    options = Options(opt_level=3)  # threads: as many as OMP_NUM_THREADS says
    built = polyflow.build_program(src, lowered, options=options, emit="llvm-dialect", cache=None)
    said = [r.message for r in built.report.select(kind="pipelined")]
    assert len(said) == 1 and "wavefront runs as a pipeline" in said[0]
    text = lowered.read_text()
    assert "llvm.atomicrmw" in text
    # columns handed out in order: libomp steals under a nonmonotonic schedule
    assert "omp.wsloop schedule(dynamic, monotonic)" in text
    exe = tmp_path / name
    polyflow.build_program(src, exe, options=options, cache=None)
    want = subprocess.run(
        [build_with_gcc(src, tmp_path / f"{name}.gcc")], capture_output=True, text=True, check=True
    ).stdout
    for threads in (1, 2, 3, 4):
        for _ in range(3 if threads == 2 else 1):  # a race shows up some runs, not all
            got = subprocess.run(
                [exe],
                capture_output=True,
                text=True,
                check=True,
                timeout=120,
                env={**os.environ, "OMP_NUM_THREADS": str(threads)},
            ).stdout
            assert got == want, f"{name} on {threads} threads"


def test_one_thread_builds_and_diamonds_keep_their_steps(tmp_path: Path) -> None:
    src = tmp_path / "heat.c"
    src.write_text(PROGRAMS["heat"])
    one = tmp_path / "one.mlir"
    polyflow.build_program(src, one, options=Options(opt_level=3, threads=1), emit="llvm-dialect")
    assert "atomicrmw" not in one.read_text()
    # jacobi-2d's diamond tiles depend on both neighbours of the step before: no pipeline
    jacobi = tmp_path / "jacobi.c"
    jacobi.write_text(JACOBI_2D.replace("STEPS", "20").replace("SIZE", "N"))
    diamond = tmp_path / "jacobi.mlir"
    built = polyflow.build_program(
        jacobi, diamond, options=Options(opt_level=3), emit="llvm-dialect"
    )
    assert any("diamond" in r.message for r in built.report.select(kind="tiled"))
    assert "atomicrmw" not in diamond.read_text()
