"""The GPU mapping (polyflow/gpu_map), the CUDA lowering (lowering/ptx.py) and the CPU emulation:
kernel formation and launches on small IR, PTX accepted by ptxas, every kernel run on the CPU
against the CPU build (and gcc, in test_differential.py), and barriers honoured (a dropped
barrier must change the result)."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mlir import ir
from mlir.passmanager import PassManager

import polyflow
import polyflow.tc as tc
from polyflow import Options
from polyflow.drivers.gpu_launch import CpuLauncher, HostProgram
from polyflow.gpu_map import launch
from polyflow.gpu_map.emulate import emulate_kernels
from polyflow.gpu_map.kernels import NotMappable, form_kernels
from polyflow.gpu_map.launch import block_shape
from polyflow.ir.contexts import new_context
from polyflow.ir.names import PARALLEL_LOOP_ATTR
from polyflow.lowering.ptx import assembly_of, parse_ptxas_report

CUDA = {"target": "cuda"}

GEMM = """
void gemm(int ni, int nj, int nk, double alpha, double beta,
          double C[ni][nj], double A[ni][nk], double B[nk][nj]) {
  for (int i = 0; i < ni; i++) {
    for (int j = 0; j < nj; j++) C[i][j] *= beta;
    for (int k = 0; k < nk; k++)
      for (int j = 0; j < nj; j++)
        C[i][j] += alpha * A[i][k] * B[k][j];
  }
}
"""

JACOBI = """
void jacobi(int steps, int n, double A[n][n], double B[n][n]) {
  for (int t = 0; t < steps; t++) {
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        B[i][j] = 0.2 * (A[i][j] + A[i][j-1] + A[i][j+1] + A[i-1][j] + A[i+1][j]);
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        A[i][j] = 0.2 * (B[i][j] + B[i][j-1] + B[i][j+1] + B[i-1][j] + B[i+1][j]);
  }
}
"""

PREFIX_SUM = """
void prefix(int n, double *x) {
  for (int i = 1; i < n; i++) x[i] += x[i - 1];
}
"""


def _gpu_remarks(fn: object) -> list[str]:
    return [r.text() for r in fn.report.remarks if r.stage == "gpu"]  # type: ignore[attr-defined]


# --- kernel formation and launches on IR ------------------------------------------------------


def _parsed(text: str) -> tuple[ir.Context, ir.Module]:
    context = new_context()
    return context, ir.Module.parse(text, context)


BAND = f"""
func.func @f(%A: memref<64x48xf32>, %n: index) {{
  affine.for %i = 0 to 64 {{
    affine.for %j = 0 to 48 {{
      %v = affine.load %A[%i, %j] : memref<64x48xf32>
      %w = arith.addf %v, %v : f32
      affine.store %w, %A[%i, %j] : memref<64x48xf32>
    }} {{{PARALLEL_LOOP_ATTR}}}
  }} {{{PARALLEL_LOOP_ATTR}}}
  return
}}
"""


def test_a_parallel_band_becomes_nested_parallel_loops_contiguous_one_innermost() -> None:
    context, module = _parsed(BAND.replace("%A[%i, %j]", "%A[%j, %i]").replace("64x48", "48x64"))
    with context:
        fn = module.body.operations[0].operation
        formed = form_kernels(fn)
        module.operation.verify()
        text = str(module)
    assert len(formed.bands) == 1 and formed.single_thread == 0
    # A[j][i]: i walks memory contiguously, so i's loop is moved innermost (threadIdx.x)
    outer, inner = (
        text.index("affine.parallel (%arg2) = (0) to (48)"),
        text.index("affine.parallel (%arg3) = (0) to (64)"),
    )
    assert outer < inner, text


def test_memory_work_outside_parallel_loops_goes_to_a_single_thread_kernel() -> None:
    text = BAND.replace(
        "  return\n",
        "  %c0 = arith.constant 0 : index\n"
        "  %x = affine.load %A[0, 0] : memref<64x48xf32>\n"
        "  affine.store %x, %A[1, 1] : memref<64x48xf32>\n  return\n",
    )
    context, module = _parsed(text)
    with context:
        formed = form_kernels(module.body.operations[0].operation)
        module.operation.verify()
        printed = str(module)
    assert len(formed.bands) == 1 and formed.single_thread == 1
    assert "affine.parallel (%arg2) = (0) to (1)" in printed


def test_a_host_loop_bound_read_from_memory_is_not_mappable() -> None:
    text = f"""
func.func @f(%A: memref<64xindex>, %B: memref<64x64xf32>) {{
  %n = affine.load %A[0] : memref<64xindex>
  affine.for %t = 0 to %n {{
    affine.for %i = 0 to 64 {{
      %v = affine.load %B[%t, %i] : memref<64x64xf32>
      affine.store %v, %B[%t, %i] : memref<64x64xf32>
    }} {{{PARALLEL_LOOP_ATTR}}}
  }}
  return
}}
"""
    context, module = _parsed(text)
    with context, pytest.raises(NotMappable, match="read from memory"):
        form_kernels(module.body.operations[0].operation)


def test_block_shapes_follow_the_band_depth_and_small_loops() -> None:
    assert block_shape(1, [None], None) == [256]
    assert block_shape(2, [None, None], None) == [32, 8]
    assert block_shape(3, [None, None, None], None) == [32, 4, 2]
    assert block_shape(2, [10, None], None) == [10, 8]  # a 10-iteration loop: 10 threads
    assert block_shape(2, [None, None], (64, 4)) == [64, 4]
    assert block_shape(2, [None, None], (64,)) == [64, 1]


def test_gpu_options_are_checked() -> None:
    with pytest.raises(ValueError, match="at most 1024"):
        Options(block=(64, 32))
    with pytest.raises(ValueError, match="unknown GPU architecture"):
        Options(gpu_arch="sm_12")
    assert Options(gpu_arch="sm_80", block=(16, 16)).block == (16, 16)


# --- PTX ------------------------------------------------------------------------------------


def test_ptx_strings_are_unescaped_from_the_gpu_binary() -> None:
    printed = 'assembly = "//\\0A.version 7.8\\0A.entry k(\\22x\\22) \\\\ end"'
    assert assembly_of(printed) == '//\n.version 7.8\n.entry k("x") \\ end'


def test_ptxas_reports_are_read_per_kernel() -> None:
    report = (
        "ptxas info    : Compiling entry function 'k0' for 'sm_90'\n"
        "ptxas info    : Function properties for k0\n"
        "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0]\n"
    )
    used = parse_ptxas_report(report)["k0"]
    assert (used.registers, used.shared_bytes, used.stack_bytes, used.spill_stores) == (
        40,
        2048,
        8,
        4,
    )


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs the CUDA toolkit's ptxas")
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_kernels_become_ptx_that_ptxas_accepts(arch: str) -> None:
    fn = polyflow.compile_c(GEMM, "gemm", target="cuda", options={"gpu_arch": arch})
    assert f".target {arch}" in fn.ptx
    said = _gpu_remarks(fn)
    assert any(
        "kernel: loops mapped to blocks × threads" in s and "block 32×8" in s for s in said
    ), said
    resources = [r for r in fn.report.remarks if r.kind == "gpu-resources"]
    assert resources and all(r.data["registers"] > 0 for r in resources), said
    assert not [r for r in fn.report.remarks if r.kind == "ptxas-error"]


def test_the_command_line_writes_the_gpu_dialect_and_ptx(tmp_path: Path) -> None:
    source = tmp_path / "jacobi.c"
    source.write_text(JACOBI)
    run = [sys.executable, "-m", "polyflow", "build", str(source), "--target=cuda"]
    gpu = subprocess.run([*run, "--emit=gpu", "-o", "-"], capture_output=True, text=True)
    assert gpu.returncode == 0, gpu.stderr
    assert gpu.stdout.count("gpu.launch_func") == 2 and "gpu.func" in gpu.stdout
    ptx = subprocess.run(
        [*run, "--emit=ptx", "--block", "16,16", "--report", "-o", str(tmp_path / "k.ptx")],
        capture_output=True,
        text=True,
    )
    assert ptx.returncode == 0, ptx.stderr
    assert ".visible .entry" in (tmp_path / "k.ptx").read_text()
    assert "block 16×16" in ptx.stdout + ptx.stderr
    wrong = subprocess.run(
        [*run, "--gpu-arch", "sm_1", "--emit=ptx"], capture_output=True, text=True
    )
    assert wrong.returncode != 0 and "unknown GPU architecture" in wrong.stderr


def test_a_cpu_build_has_no_gpu_stage(tmp_path: Path) -> None:
    source = tmp_path / "k.c"
    source.write_text(GEMM)
    with pytest.raises(polyflow.CompileError, match="--target=cuda"):
        polyflow.build_program(source, tmp_path / "k.mlir", emit="gpu")


# --- running the kernels: the CPU emulation --------------------------------------------------


def test_compile_c_for_cuda_runs_emulated_like_the_cpu_build() -> None:
    rng = np.random.default_rng(3)
    gpu = polyflow.compile_c(GEMM, "gemm", target="cuda")
    cpu = polyflow.compile_c(GEMM, "gemm")
    for ni, nj, nk in ((37, 45, 29), (1, 1, 1), (40, 33, 0)):
        A, B = rng.random((ni, nk)), rng.random((nk, nj))
        C = rng.random((ni, nj))
        expected = C.copy()
        cpu(ni, nj, nk, 1.5, 0.5, expected, A, B)
        gpu.emulate(ni, nj, nk, 1.5, 0.5, C, A, B)
        # strict floating point: each thread sums its element in C's order, bit for bit
        assert np.array_equal(C, expected)


def test_a_time_loop_launches_two_kernels_per_step() -> None:
    rng = np.random.default_rng(4)
    gpu = polyflow.compile_c(JACOBI, "jacobi", target="cuda")
    n = 37
    A, B = rng.random((n, n)), rng.random((n, n))
    A2, B2 = A.copy(), B.copy()
    polyflow.compile_c(JACOBI, "jacobi")(6, n, A2, B2)
    gpu.emulate(6, n, A, B)
    assert np.array_equal(A, A2) and np.array_equal(B, B2)
    assert gpu._cpu is not None and gpu._cpu.launches == 12


def test_a_sequential_function_runs_on_one_gpu_thread() -> None:
    gpu = polyflow.compile_c(PREFIX_SUM, "prefix", target="cuda")
    x = np.arange(10, dtype=np.float64)
    gpu.emulate(10, x)
    assert np.array_equal(x, np.cumsum(np.arange(10, dtype=np.float64)))
    assert any("one GPU thread" in s for s in _gpu_remarks(gpu))


def test_a_gpu_call_without_a_gpu_says_so() -> None:
    gpu = polyflow.compile_c(PREFIX_SUM, "prefix", target="cuda")
    try:
        import cupy  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        with pytest.raises(polyflow.GpuUnavailable, match=r"no CUDA device.*emulate"):
            gpu(10, np.zeros(10))


def test_block_and_grid_options_change_the_launch_not_the_result() -> None:
    rng = np.random.default_rng(5)
    A, B = rng.random((23, 19)), rng.random((19, 31))
    results = []
    for options in ({}, {"block": (8, 4)}, {"block": (4,), "grid": (2, 1)}, {"grid": (1, 1)}):
        gpu = polyflow.compile_c(GEMM, "gemm", target="cuda", options=options)
        C = np.ones((23, 31))
        gpu.emulate(23, 31, 19, 1.0, 2.0, C, A, B)
        results.append(C)
    for other in results[1:]:
        assert np.array_equal(results[0], other)


# --- barriers in the emulation ---------------------------------------------------------------

ROTATE = """
module attributes {gpu.container_module} {
  gpu.module @rot {
    gpu.func @rot(%A: memref<64xf32>, %B: memref<64xf32>) kernel {
      %t = gpu.thread_id x
      %n = gpu.block_dim x
      %c1 = arith.constant 1 : index
      %v = arith.index_cast %t : index to i32
      %f = arith.sitofp %v : i32 to f32
      memref.store %f, %A[%t] : memref<64xf32>
      gpu.barrier
      %t2 = gpu.thread_id x
      %next = arith.addi %t2, %c1 : index
      %wrapped = arith.remui %next, %n : index
      %w = memref.load %A[%wrapped] : memref<64xf32>
      memref.store %w, %B[%t2] : memref<64xf32>
      gpu.return
    }
  }
  func.func @rotate(%A: memref<64xf32>, %B: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    gpu.launch_func @rot::@rot blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%A : memref<64xf32>, %B : memref<64xf32>)
    return
  }
  func.func @__polyflow_rotate(%a: !llvm.ptr, %b: !llvm.ptr) {
    %0 = llvm.mlir.undef : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
    %1 = llvm.insertvalue %a, %0[0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
    %2 = llvm.insertvalue %a, %1[1] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
    %c0 = arith.constant 0 : i64
    %c1 = arith.constant 1 : i64
    %c64 = arith.constant 64 : i64
    %3 = llvm.insertvalue %c0, %2[2] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
    %4 = llvm.insertvalue %c64, %3[3, 0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
    %5 = llvm.insertvalue %c1, %4[4, 0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
    %A = builtin.unrealized_conversion_cast %5 : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> to memref<64xf32>
    %6 = llvm.insertvalue %b, %0[0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
    %7 = llvm.insertvalue %b, %6[1] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
    %8 = llvm.insertvalue %c0, %7[2] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
    %9 = llvm.insertvalue %c64, %8[3, 0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
    %10 = llvm.insertvalue %c1, %9[4, 0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
    %B = builtin.unrealized_conversion_cast %10 : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> to memref<64xf32>
    func.call @rotate(%A, %B) : (memref<64xf32>, memref<64xf32>) -> ()
    return
  }
}
"""


def _rotate(text: str) -> np.ndarray:
    A = np.zeros(64, dtype=np.float32)
    B = np.zeros(64, dtype=np.float32)
    HostProgram(text).run(
        "__polyflow_rotate", [int(A.ctypes.data), int(B.ctypes.data)], CpuLauncher(text)
    )
    return B


def test_the_emulation_honours_a_barrier_and_a_dropped_one_shows() -> None:
    expected = np.roll(np.arange(64, dtype=np.float32), -1)
    assert np.array_equal(_rotate(ROTATE), expected)
    # without the barrier, thread t reads A[t + 1] before thread t + 1 wrote it
    dropped = _rotate(ROTATE.replace("      gpu.barrier\n", ""))
    assert not np.array_equal(dropped, expected)


def test_per_thread_arithmetic_across_a_barrier_is_computed_again_after_it() -> None:
    # %f (the thread's id as a float), computed before the barrier, is used after it
    again = ROTATE.replace("memref.store %w, %B[%t2]", "memref.store %f, %B[%t2]")
    assert np.array_equal(_rotate(again), np.arange(64, dtype=np.float32))


def test_a_loaded_value_carried_across_a_barrier_stays_the_threads_own() -> None:
    # %x, loaded by each thread before the barrier, is used after it: a GPU thread keeps it in
    # a register; the emulation keeps one per thread (a shared value would give 63 everywhere)
    carried = ROTATE.replace(
        "      gpu.barrier\n", "      %x = memref.load %A[%t] : memref<64xf32>\n      gpu.barrier\n"
    ).replace("memref.store %w, %B[%t2]", "memref.store %x, %B[%t2]")
    assert np.array_equal(_rotate(carried), np.arange(64, dtype=np.float32))


def test_emulated_kernels_lower_to_plain_cpu_code() -> None:
    context, module = _parsed(ROTATE)
    with context:
        assert emulate_kernels(module) == 1
        PassManager.parse("builtin.module(convert-scf-to-cf)").run(module.operation)
        text = str(module)
    assert "gpu." not in text and "call @__polyflow_gpu_rot(" in text


# --- whole programs ---------------------------------------------------------------------------

PROGRAM = """
#include <stdio.h>
#define N 50
void kernel_scale(int n, double a[N][N], double b[N][N]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      b[i][j] = 2.0 * a[i][j] + 1.0;
}
int main(void) {
  static double a[N][N], b[N][N];
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) a[i][j] = i * 0.5 + j;
  kernel_scale(N, a, b);
  double s = 0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) s += b[i][j];
  printf("%.6f\\n", s);
  return 0;
}
"""


def _has_gpu() -> bool:
    probe = (
        subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
        if shutil.which("nvidia-smi")
        else None
    )
    return probe is not None and probe.returncode == 0 and "GPU" in probe.stdout


def test_a_whole_program_for_cuda_copies_its_arrays_and_launches_through_the_runtime(
    tmp_path: Path,
) -> None:
    source = tmp_path / "scale.c"
    source.write_text(PROGRAM)
    exe = tmp_path / "scale"
    report = polyflow.build_program(source, exe, options=Options(opt_level=3, target="cuda"))
    kinds = [r.kind for r in report.report.remarks if r.stage == "gpu"]
    assert "gpu-kernel" in kinds, kinds
    assert "gpu-resources" in kinds or shutil.which("ptxas") is None, kinds
    symbols = subprocess.run(["nm", str(exe)], capture_output=True, text=True).stdout
    assert "mgpuLaunchKernel" in symbols and "mgpuMemcpy" in symbols
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    if _has_gpu():
        assert run.returncode == 0 and run.stdout == "186250.000000\n", run.stderr
    else:  # one clear line at start, before main prints anything
        assert run.returncode == 1 and run.stdout == ""
        assert run.stderr.count("\n") == 1
        assert run.stderr.startswith("polyflow: this program runs its loops on a CUDA GPU: no CUDA")


def test_the_emulated_whole_program_copies_arrays_like_the_gpu_build(tmp_path: Path) -> None:
    source = tmp_path / "scale.c"
    source.write_text(PROGRAM)
    exe = tmp_path / "scale"
    polyflow.build_program(
        source, exe, options=Options(opt_level=3, target="cuda", gpu_emulate=True)
    )
    gpu_stage = tmp_path / "scale.mlir"
    polyflow.build_program(
        source, gpu_stage, options=Options(opt_level=3, target="cuda"), emit="gpu"
    )
    text = gpu_stage.read_text()
    assert text.count("gpu.memcpy") == 3  # a and b in, b (written) out
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout == "186250.000000\n"


def test_the_report_says_why_a_loop_is_not_mapped() -> None:
    gemm = polyflow.compile_c(GEMM, "gemm", target="cuda")
    notes = [r for r in gemm.report.remarks if r.kind == "gpu-loop-not-mapped"]
    assert [r.position.line for r in notes if r.position] == [6]
    assert "a reduction" in notes[0].message and "C's order" in notes[0].message
    jacobi = polyflow.compile_c(JACOBI, "jacobi", target="cuda")
    (host,) = [r for r in jacobi.report.remarks if r.kind == "gpu-loop-not-mapped"]
    assert "one kernel launch per iteration" in host.message and host.position.line == 3


# --- shared memory ----------------------------------------------------------------------------


def test_reads_with_reuse_go_through_shared_memory() -> None:
    gpu = polyflow.compile_c(GEMM, "gemm", target="cuda")
    (kernel,) = [r for r in gpu.report.remarks if r.kind == "gpu-kernel" and r.function == "gemm"]
    promoted = kernel.data["promoted"]
    # A[i][k]: 8 rows x 32 of k; B[k][j]: 32 of k x 32 columns (f64)
    assert sorted(tuple(p["shape"]) for p in promoted) == [(8, 32), (32, 32)], promoted
    assert "read through shared memory" in kernel.message
    assert gpu.mlir("gpu").count("gpu.barrier") == 2
    if shutil.which("ptxas"):
        (used,) = [
            r
            for r in gpu.report.remarks
            if r.kind == "gpu-resources" and "affine" in r.data["kernel"]
        ]
        assert used.data["shared_bytes"] >= (8 * 32 + 32 * 32) * 8
    assert ".shared" in gpu.ptx
    without = polyflow.compile_c(GEMM, "gemm", target="cuda", options={"shared_memory": 0})
    assert "gpu.barrier" not in without.mlir("gpu")


def test_a_dropped_barrier_in_a_promoted_kernel_changes_the_result() -> None:
    gpu = polyflow.compile_c(GEMM, "gemm", target="cuda")
    rng = np.random.default_rng(9)
    ni, nj, nk = 19, 45, 70
    A, B = rng.random((ni, nk)), rng.random((nk, nj))
    C0 = rng.random((ni, nj))
    expected = C0.copy()
    polyflow.compile_c(GEMM, "gemm")(ni, nj, nk, 1.5, 0.5, expected, A, B)

    def run(text: str) -> np.ndarray:
        C = C0.copy()
        host = HostProgram(text)
        args = [ni, nj, nk, 1.5, 0.5, *(int(a.ctypes.data) for a in (C, A, B))]
        host.run("__polyflow_gemm", args, CpuLauncher(text))
        return C

    stage = gpu.mlir("gpu")
    assert np.array_equal(run(stage), expected)
    dropped = "\n".join(line for line in stage.splitlines() if "gpu.barrier" not in line)
    assert not np.array_equal(run(dropped), expected)


# --- reductions over the threads of a block ----------------------------------------------------

ROW_SUMS = """
void row_sums(long A[6][3000], long out[6]) {
  for (int i = 0; i < 6; i++) {
    long s = 3;
    for (int j = 0; j < 3000; j++) s += A[i][j] * (j % 7);
    out[i] = s;
  }
}
"""


def test_an_integer_reduction_of_few_rows_is_a_tree_over_the_threads() -> None:
    gpu = polyflow.compile_c(ROW_SUMS, "row_sums", target="cuda")
    (kernel,) = [
        r for r in gpu.report.remarks if r.kind == "gpu-kernel" and r.function == "row_sums"
    ]
    assert "threads x (tree)" in kernel.message and "block 256" in kernel.message
    assert not [r for r in gpu.report.remarks if r.kind == "float-reduction"]  # integers: exact
    A = np.random.default_rng(2).integers(-1000, 1000, size=(6, 3000))
    out, expected = np.zeros(6, np.int64), np.zeros(6, np.int64)
    gpu.emulate(A, out)
    polyflow.compile_c(ROW_SUMS, "row_sums")(A, expected)
    assert np.array_equal(out, expected)
    if shutil.which("ptxas"):
        (used,) = [
            r
            for r in gpu.report.remarks
            if r.kind == "gpu-resources" and "affine" in r.data["kernel"]
        ]
        assert used.data["shared_bytes"] >= 256 * 8 and used.data["stack_bytes"] == 0


def test_a_float_reduction_becomes_a_tree_only_under_reassociation() -> None:
    import polyflow.tc as tc

    source = "def mv(float(M,K) A, float(K) x) -> (y) { y(i) +=! A(i,k) * x(k) }"
    rng = np.random.default_rng(3)
    A = rng.standard_normal((37, 3000)).astype(np.float32)
    x = rng.standard_normal(3000).astype(np.float32)
    strict = tc.define(source, target="cuda")
    assert np.allclose(strict.emulate(A, x), A @ x, rtol=1e-3, atol=1e-3)
    assert not any("(tree)" in r.message for r in strict.report.remarks)
    tree = tc.define(source, target="cuda", options={"associative_math": True})
    assert np.allclose(tree.emulate(A, x), A @ x, rtol=1e-3, atol=1e-3)
    assert any("(tree)" in r.message for r in tree.report.remarks if r.kind == "gpu-kernel")
    assert [r for r in tree.report.remarks if r.kind == "float-reduction"]


def test_the_tc_command_shows_the_gpu_stage_for_cuda_only() -> None:
    layers = str(Path(__file__).resolve().parent.parent / "examples" / "layers.tc")
    run = [sys.executable, "-m", "polyflow", "tc", layers, "--name", "conv2d", "--emit", "gpu"]
    sizes = ["--sizes", "N=1,C=3,H=16,W=16,K=4,KH=3,KW=3"]
    ok = subprocess.run([*run, "--target", "cuda", *sizes], capture_output=True, text=True)
    assert ok.returncode == 0 and "gpu.launch_func" in ok.stdout, ok.stderr
    refused = subprocess.run([*run, *sizes], capture_output=True, text=True)
    assert refused.returncode == 1 and "needs --target cuda" in refused.stderr


CALLS = """
double helper(double x) {
  double s = 0;
  for (int k = 0; k < 3; k++) s += x * k;
  return s;
}
void scale(int n, double a[64]) {
  for (int i = 0; i < n; i++) a[i] = 2 * a[i];
}
void steps(int n, double a[64], double b[64]) {
  a[0] = 5;            /* before the call: one GPU thread */
  scale(n, a);         /* a function with its own kernel, called by the host */
  b[0] = a[0] + 1;     /* after it: sees the scaled value */
  for (int i = 1; i < n; i++) b[i] = helper(a[i]);  /* a device function in a kernel */
}
"""


def test_work_around_a_call_stays_in_order_and_callees_run_on_the_gpu() -> None:
    rng = np.random.default_rng(11)
    a = rng.random(64)
    b = np.zeros(64)
    a2, b2 = a.copy(), b.copy()
    gpu = polyflow.compile_c(CALLS, "steps", target="cuda")
    gpu.emulate(40, a, b)
    polyflow.compile_c(CALLS, "steps")(40, a2, b2)
    assert np.array_equal(a, a2) and np.array_equal(b, b2)
    assert b[0] == 11.0
    assert not [r for r in gpu.report.remarks if r.kind == "ptxas-error"]


def test_long_double_stays_on_the_host(tmp_path: Path) -> None:
    """x87's 80-bit long double has no GPU type (NVPTX cannot even compile it): such functions
    run on the host, the rest of the file still gets its kernels."""
    source = Path(__file__).resolve().parent / "programs" / "long_double.c"
    report = polyflow.build_program(
        source, tmp_path / "prog", options=Options(opt_level=3, target="cuda")
    )
    assert not [w for w in report.warnings if "internal error" in w]
    reasons = [r.data.get("reason", "") for r in report.report.remarks if r.kind == "gpu-host"]
    assert any("long double" in reason for reason in reasons)


MOMENTS = """
def moments(float(N,K) I) -> (mean, var) {
  mean(n) +=! I(n, k) / K
  var(n) +=! (I(n, k) - mean(n)) * (I(n, k) - mean(n)) / K
}
"""

PREFIX_AND_SUM = """
void prefix(long a[5000], long b[5000]) {
  long s = 0;
  for (int i = 0; i < 5000; i++) { s += a[i]; b[i] = s; }
}
"""


def test_two_reductions_in_one_body_share_a_block_in_turn() -> None:
    """moments: the mean, then (reading it) the variance, each over the block's threads; what
    passes between them goes through shared memory."""
    import polyflow.tc as tc

    fn = tc.define(MOMENTS, target="cuda", options={"associative_math": True})
    x = np.random.default_rng(5).standard_normal((6, 3000)).astype(np.float32)
    mean, var = fn.emulate(x)
    assert np.allclose(mean, x.mean(1), atol=1e-6) and np.allclose(var, x.var(1), atol=1e-5)
    (kernel,) = [r for r in fn.report.remarks if r.kind == "gpu-kernel"]
    assert kernel.message.count("(tree)") == 2


def test_a_running_sum_is_not_a_tree() -> None:
    gpu = polyflow.compile_c(PREFIX_AND_SUM, "prefix", target="cuda")
    assert not any("(tree)" in r.message for r in gpu.report.remarks)
    a = np.arange(5000) % 13
    b, expected = np.zeros(5000, np.int64), np.zeros(5000, np.int64)
    gpu.emulate(a, b)
    polyflow.compile_c(PREFIX_AND_SUM, "prefix")(a, expected)
    assert np.array_equal(b, expected)


def test_softmax_and_layernorm_use_trees_under_reassociation() -> None:
    """A max tree (identity -inf) then a sum tree in softmax; mean then variance in layernorm."""
    import polyflow.tc as tc
    from polyflow.tc_library import LIBRARY

    rng = np.random.default_rng(6)
    x = rng.standard_normal((5, 700)).astype(np.float32)
    softmax = tc.define(
        LIBRARY["softmax"], "softmax", target="cuda", options={"associative_math": True}
    )
    row_max, _e, total, y = softmax.emulate(x)
    assert np.array_equal(row_max, x.max(axis=1))  # max is exact in any order
    e = np.exp(x - x.max(axis=1)[:, None])
    assert np.allclose(total, e.sum(axis=1), rtol=1e-4)
    assert np.allclose(y, e / e.sum(axis=1)[:, None], rtol=1e-4, atol=1e-6)
    kernels = [r for r in softmax.report.remarks if r.kind == "gpu-kernel"]
    assert sum(r.message.count("(tree)") for r in kernels) == 2
    g, b = rng.standard_normal(900).astype(np.float32), rng.standard_normal(900).astype(np.float32)
    x = rng.standard_normal((4, 900)).astype(np.float32)
    layernorm = tc.define(
        LIBRARY["layernorm"], "layernorm", target="cuda", options={"associative_math": True}
    )
    mean, var, out = layernorm.emulate(x, g, b)
    assert np.allclose(mean, x.mean(1), atol=1e-5) and np.allclose(var, x.var(1), rtol=1e-4)
    assert np.allclose(
        out,
        g * (x - x.mean(1)[:, None]) / np.sqrt(x.var(1)[:, None] + 1e-5) + b,
        rtol=1e-3,
        atol=1e-4,
    )


ROW_SUMS_OF_ANY_SIZE = """
void row_sums(int n, int m, long A[n][m], long out[n]) {
  for (int i = 0; i < n; i++) {
    long s = 3;
    for (int j = 0; j < m; j++) s += A[i][j] * (j % 7);
    out[i] = s;
  }
}
"""


def test_a_band_of_unknown_size_gets_both_kernels_and_the_host_chooses() -> None:
    gpu = polyflow.compile_c(ROW_SUMS_OF_ANY_SIZE, "row_sums", target="cuda")
    cpu = polyflow.compile_c(ROW_SUMS_OF_ANY_SIZE, "row_sums")
    kernels = [
        r.message for r in gpu.report.remarks if r.kind == "gpu-kernel" and r.function == "row_sums"
    ]
    assert len(kernels) == 2 and "(tree)" in kernels[0] and "fewer than 32768 points" in kernels[0]
    rng = np.random.default_rng(8)
    for n, m in ((6, 3000), (40000, 3), (0, 5)):
        A = rng.integers(-9, 9, size=(n, m))
        out, expected = np.zeros(n, np.int64), np.zeros(n, np.int64)
        gpu.emulate(n, m, A, out)
        cpu(n, m, A, expected)
        assert np.array_equal(out, expected), (n, m)


# --- register tiles, loops folded into the grid, padded tiles ------------------------------------

TMM = "def tmm(float(M,K) A, float(N,K) B) -> (C) { C(m, n) +=! A(m, k) * B(n, k) }"


def _kernel_remark(fn: Any) -> Any:
    (kernel,) = [r for r in fn.report.remarks if r.kind == "gpu-kernel"]
    return kernel


def test_full_tiles_give_each_thread_a_register_tile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch, "MIN_TILED_BLOCKS", 1)  # small sizes: the test stays quick
    fn = tc.define(TMM, target="cuda")
    rng = np.random.default_rng(4)
    A = rng.standard_normal((64, 40)).astype(np.float32)  # 64 = 8 threads × 4 × 2 blocks
    B = rng.standard_normal((256, 40)).astype(np.float32)  # 256 = 32 threads × 4 × 2 blocks
    C = fn.emulate(A, B)
    assert np.allclose(C, A @ B.T, rtol=1e-5, atol=1e-5)
    kernel = _kernel_remark(fn)
    assert kernel.data["register_tile"] == [4, 4], kernel.message
    assert "4×4 points per thread" in kernel.message
    stage = fn.mlir("gpu")
    # every copy's point in one reduction loop: 16 partial sums carried, no slots in between
    assert "iter_args" in stage and stage.count("gpu.barrier") == 2
    # a size that leaves a partial tile gets no register tile (its copies would need guards)
    C = fn.emulate(A[:63], B)
    assert np.allclose(C, A[:63] @ B.T, rtol=1e-5, atol=1e-5)
    assert _kernel_remark(fn).data["register_tile"] == []


@pytest.mark.parametrize("wanted,made", [((2, 1), [2, 1]), ((1, 4), [1, 4]), ((8, 2), [8, 2]),
                                         ((1,), []), ((3, 1), [])])  # fmt: skip
def test_the_register_tile_is_an_option(wanted: tuple[int, ...], made: list[int]) -> None:
    # (the tuner's choice: points per thread along x, y; 1 or a shape that leaves a partial tile
    # (64 / (32 x 3)): one point per thread)
    fn = tc.define(TMM, options=Options(opt_level=3, target="cuda", gpu_register_tile=wanted))
    rng = np.random.default_rng(6)
    A = rng.standard_normal((64, 24)).astype(np.float32)  # y: 8 threads
    B = rng.standard_normal((512, 24)).astype(np.float32)  # x: 32 threads
    C = fn.emulate(A, B)
    assert np.allclose(C, A @ B.T, rtol=1e-5, atol=1e-5)
    assert _kernel_remark(fn).data["register_tile"] == made


def test_a_dropped_barrier_in_a_register_tiled_kernel_changes_the_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(launch, "MIN_TILED_BLOCKS", 1)
    fn = tc.define(TMM, target="cuda")
    rng = np.random.default_rng(5)
    A = rng.standard_normal((32, 70)).astype(np.float32)
    B = rng.standard_normal((128, 70)).astype(np.float32)
    C = fn.emulate(A, B)
    assert _kernel_remark(fn).data["register_tile"] == [4, 4]
    stage = fn.mlir("gpu")
    dropped = "\n".join(line for line in stage.splitlines() if "gpu.barrier" not in line)
    host = HostProgram(dropped)
    out = np.zeros((32, 128), dtype=np.float32)
    args = [int(a.ctypes.data) for a in (A, B, out)]
    host.run(fn._gpu_compiled((A, B)).entry, args, CpuLauncher(dropped))
    assert np.allclose(C, A @ B.T, rtol=1e-5, atol=1e-5)
    assert not np.allclose(out, C, rtol=1e-5, atol=1e-5)


GROUP_CONV = """
def group_conv(float(N,G,C,H,W) I, float(G,F,C,KH,KW) W1) -> (O) {
  O(n, g, f, h, w) +=! I(n, g, c, h + kh, w + kw) * W1(g, f, c, kh, kw)
}
"""


def test_parallel_loops_beyond_three_fold_into_the_grid() -> None:
    fn = tc.define(GROUP_CONV, target="cuda")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 2, 2, 7, 6)).astype(np.float32)
    w = rng.standard_normal((2, 3, 2, 3, 3)).astype(np.float32)
    out = fn.emulate(x, w)
    expected = np.zeros((3, 2, 3, 5, 4), dtype=np.float64)
    for i in range(3):
        for j in range(3):
            expected += np.einsum(
                "ngchw,gfc->ngfhw", x[:, :, :, i : i + 5, j : j + 4], w[..., i, j]
            )
    assert np.allclose(out, expected, rtol=1e-4, atol=1e-4)
    axes = [loop["axis"] for loop in _kernel_remark(fn).data["loops"]]
    assert axes == ["x", "y", "z", "blocks x", "blocks x"], axes
    assert not [r for r in fn.report.remarks if "three axes" in r.message]


def test_a_promoted_tile_of_even_rows_is_padded_against_bank_conflicts() -> None:
    fn = tc.define(TMM, target="cuda")
    A = np.ones((33, 17), dtype=np.float32)
    B = np.ones((40, 17), dtype=np.float32)
    C = fn.emulate(A, B)
    assert np.array_equal(C, np.full((33, 40), 17.0, dtype=np.float32))
    promoted = _kernel_remark(fn).data["promoted"]
    assert sorted(tuple(p["shape"]) for p in promoted) == [(8, 32), (32, 32)]
    assert sorted(p["bytes"] for p in promoted) == [8 * 33 * 4, 32 * 33 * 4]
    assert "memref<32x33xf32" in fn.mlir("gpu")


GROUP_NORM = """
def group_norm(float(N,G,D,H,W) I, float(G,D) gamma, float(G,D) beta) -> (mean, var, O) {
  mean(n, g) +=! I(n, g, d, h, w) / (D * H * W)
  var(n, g) +=! (I(n, g, d, h, w) - mean(n, g)) * (I(n, g, d, h, w) - mean(n, g)) / (D * H * W)
  O(n, g, d, h, w) = gamma(g, d) * (I(n, g, d, h, w) - mean(n, g)) * rsqrt(var(n, g) + 1e-5) + beta(g, d)
}
"""


def test_a_reduction_over_nested_loops_is_one_tree_over_their_product() -> None:
    """group_norm reduces over d, h, w: the three loops become one flat loop shared out over
    the block's threads (each index recovered from the flat one), then one tree."""
    fn = tc.define(GROUP_NORM, target="cuda", options={"associative_math": True})
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3, 3, 7, 9)).astype(np.float32)
    gamma, beta = rng.standard_normal((3, 3)).astype(np.float32), rng.standard_normal((3, 3))
    mean, var, out = fn.emulate(x, gamma, beta.astype(np.float32))
    assert np.allclose(mean, x.mean(axis=(2, 3, 4)), atol=1e-6)
    assert np.allclose(var, x.var(axis=(2, 3, 4)), rtol=1e-4)
    expected = (x - mean[..., None, None, None]) / np.sqrt(var[..., None, None, None] + 1e-5)
    expected = gamma[None, :, :, None, None] * expected + beta[None, :, :, None, None]
    assert np.allclose(out, expected, rtol=1e-4, atol=1e-5)
    (tree,) = [r for r in fn.report.remarks if r.kind == "gpu-kernel" and "(tree)" in r.message]
    assert tree.message.count("(tree)") == 6  # d, h, w of the mean, then of the variance
    assert not [r for r in fn.report.remarks if r.kind == "gpu-loop-not-mapped"]


TRIANGLE_SUMS = """
void triangle(int n, int m, long A[n][m][m], long out[n]) {
  for (int i = 0; i < n; i++) {
    long s = 0;
    for (int j = 0; j < m; j++)
      for (int k = 0; k <= j; k++)
        s += A[i][j][k];
    out[i] = s;
  }
}
"""


def test_integer_sums_over_nested_loops_are_exact_in_any_order() -> None:
    fn = tc.define(
        "def sums(int64(N,C,H,W) I) -> (s) { s(n) +=! I(n, c, h, w) * (h + 2 * w) }",
        target="cuda",
    )
    rng = np.random.default_rng(12)
    for shape in ((3, 5, 37, 41), (2, 1, 1, 7), (1, 2, 3, 1)):
        x = rng.integers(-50, 50, size=shape)
        h = np.arange(shape[2])[:, None]
        w = np.arange(shape[3])[None, :]
        assert np.array_equal(fn.emulate(x), (x * (h + 2 * w)).sum(axis=(1, 2, 3))), shape
        if shape[0] == 3:  # few points, 7,585 iterations: c, h and w flattened into one tree
            (kernel,) = [r.message for r in fn.report.remarks if r.kind == "gpu-kernel"]
            assert kernel.count("(tree)") == 3 and "block 256" in kernel, kernel


def test_a_triangular_reduction_nest_stays_in_each_thread() -> None:
    """The inner bound reads the outer index: no flat loop over a product; C's order."""
    gpu = polyflow.compile_c(TRIANGLE_SUMS, "triangle", target="cuda")
    cpu = polyflow.compile_c(TRIANGLE_SUMS, "triangle")
    assert not any("(tree)" in r.message for r in gpu.report.remarks)
    rng = np.random.default_rng(13)
    for n, m in ((3, 37), (2, 1), (1, 0)):
        A = rng.integers(-50, 50, size=(n, m, m))
        out, expected = np.zeros(n, np.int64), np.zeros(n, np.int64)
        gpu.emulate(n, m, A, out)
        cpu(n, m, A, expected)
        assert np.array_equal(out, expected), (n, m)


def test_unrolling_a_loop_chains_its_copies_through_the_carried_values() -> None:
    from polyflow.ir.ops import unroll_loop

    context, module = _parsed(
        """
func.func @f(%A: memref<32xf32>, %s: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %k = %c0 to %c32 step %c1 iter_args(%acc = %s) -> (f32) {
    %v = memref.load %A[%k] : memref<32xf32>
    %w = arith.addf %acc, %v : f32
    scf.yield %w : f32
  }
  return %r : f32
}
"""
    )
    with context, ir.Location.unknown():
        fn = module.body.operations[0].operation
        loop = next(
            op.operation
            for op in fn.regions[0].blocks[0].operations
            if op.operation.name == "scf.for"
        )
        unroll_loop(loop, 8)
        assert module.operation.verify()
        text = str(module)
    assert text.count("memref.load") == 8 and text.count("arith.addf") == 8
    assert "step %c8" in text
    # each copy adds to the one before it, the last one is yielded
    body = loop.regions[0].blocks[0]
    adds = [op.operation for op in body.operations if op.operation.name == "arith.addf"]
    for before, after in itertools.pairwise(adds):
        assert after.operands[0] == before.results[0]
    assert list(body.operations)[-1].operation.operands[0] == adds[-1].results[0]


def test_a_tile_loop_of_whole_steps_is_unrolled_reading_the_tiles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """K a multiple of the tile step: the loop over a tile runs 8 steps a pass, and every
    copy reads the shared tiles (none goes back to global memory)."""
    monkeypatch.setattr(launch, "MIN_TILED_BLOCKS", 1)
    fn = tc.define(TMM, target="cuda")
    rng = np.random.default_rng(14)
    A = rng.standard_normal((64, 64)).astype(np.float32)
    B = rng.standard_normal((256, 64)).astype(np.float32)
    assert np.allclose(fn.emulate(A, B), A @ B.T, rtol=1e-5, atol=1e-5)
    stage = fn.mlir("gpu")
    kernel = stage[stage.index("gpu.func") :]
    # 16 points per thread × 8 steps read the tiles; only the copies read global memory
    shared = set(re.findall(r"(%\w+) = memref.alloca\(\) \{polyflow.shared\}", kernel))
    loads = re.findall(r"memref.load (%\w+)\[", kernel)
    assert len([name for name in loads if name in shared]) == 8 * 8  # 4 of A, 4 of B, 8 steps
    if shutil.which("ptxas"):
        ptx = fn.ptx(A, B)
        assert ptx.count("fma.rn.f32") + ptx.count("mul.rn.f32") >= 8 * 16


FIXED_GEMM = """
void fixed_gemm(double C[19][45], double A[19][64], double B[64][45]) {
  for (int i = 0; i < 19; i++)
    for (int k = 0; k < 64; k++)
      for (int j = 0; j < 45; j++)
        C[i][j] += A[i][k] * B[k][j];
}
"""


def test_the_loops_over_shared_tiles_unroll_as_asked_and_still_compute_the_same() -> None:
    # 64 steps of k in tiles of 32: 8 steps a pass by default, 16 or 1 as asked; 3 does not
    # divide the tile (left rolled). The kernels run on the CPU, blocks and threads as loops.
    rng = np.random.default_rng(4)
    A, B = rng.random((19, 64)), rng.random((64, 45))
    C0 = rng.random((19, 45))
    expected = C0 + A @ B
    stages = {}
    for unroll in (None, 1, 3, 16):
        gpu = polyflow.compile_c(FIXED_GEMM, "fixed_gemm", target="cuda", options={"unroll": unroll})
        stage = gpu.mlir("gpu")
        C = C0.copy()
        args = [int(a.ctypes.data) for a in (C, A, B)]
        HostProgram(stage).run("__polyflow_fixed_gemm", args, CpuLauncher(stage))
        np.testing.assert_allclose(C, expected, rtol=1e-12)
        stages[unroll] = stage
    assert stages[3] == stages[1]  # 3 does not divide 32
    products = {u: s.count("arith.mulf") for u, s in stages.items()}
    assert products[1] < products[None] < products[16], products
