"""Micro-kernels (polyflow/schedule/micro_kernel.py) end to end: contraction nests become
register-blocked vector code, and every program still prints what gcc -O2's build prints (odd
sizes, so that the scalar edge rows and columns run too; 1 and 2 threads), and every TC still
matches NumPy."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from difftest import check_program_against_gcc

import polyflow
import polyflow.tc as tc
from polyflow.options import Options
from polyflow.target import vector_register_bits
from polyflow.toolchain import openmp_library_dir

# The products and sums of these small integers are exact in floating point, so fused
# multiply-adds (march=native, fp_contract fast) cannot change a printed digit.
PROGRAM = """#include <stdio.h>
#define NI 77
#define NJ 91
#define NK 53
static TYPE A[NI][NK], B[NK][NJ], BT[NJ][NK], C[NI][NJ], D[NI][NJ], E[NI][NJ], F[NI][NJ];
static void kernels(int ni, int nj, int nk, TYPE alpha) {
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++) {
      C[i][j] = 0;
      for (int k = 0; k < nk; k++) C[i][j] += alpha * A[i][k] * B[k][j];
    }
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++) {
      TYPE s = j % 3;
      for (int k = 0; k < nk; k++) s += A[i][k] * BT[j][k];
      D[i][j] = s > 0 ? s : 0;
    }
  for (int i = 0; i < ni; i++)
    for (int k = 0; k < nk; k++)
      for (int j = 0; j < nj; j++) E[i][j] = E[i][j] + A[i][k] * B[k][j] - BT[j][k];
  /* a fully connected layer: bias, x . W^T in place, ReLU as a comparison */
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++) F[i][j] = B[1][j];
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++)
      for (int k = 0; k < nk; k++) F[i][j] += A[i][k] * BT[j][k];
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++) F[i][j] = F[i][j] > 0 ? F[i][j] : 0;
}
int main(void) {
  for (int i = 0; i < NI; i++)
    for (int k = 0; k < NK; k++) A[i][k] = (i * 7 + k * 3) % 13 - 6;
  for (int k = 0; k < NK; k++)
    for (int j = 0; j < NJ; j++) B[k][j] = BT[j][k] = (k * 5 + j * 11) % 9 - 4;
  for (int i = 0; i < NI; i++)
    for (int j = 0; j < NJ; j++) E[i][j] = i - j;
  kernels(NI, NJ, NK, 2);
  double sum = 0, sum_d = 0;  /* D sums over k in a register: its order may be reassociated */
  for (int i = 0; i < NI; i++)
    for (int j = 0; j < NJ; j++) {
      sum += C[i][j] + 7 * E[i][j] + 3 * F[i][j];
      sum_d += D[i][j];
    }
  printf("%.17g %.9g %.17g %.9g %.17g\\n", sum, sum_d, (double)C[NI - 1][NJ - 1],
         (double)D[5][NJ - 2], (double)E[NI - 3][7]);
  for (int i = 0; i < NI; i += 19)
    for (int j = 0; j < NJ; j += 23)
      printf("%.17g %.9g %.17g %.17g\\n", (double)C[i][j], (double)D[i][j], (double)E[i][j],
             (double)F[i][j]);
  return 0;
}
"""


def _source(tmp_path: Path, element: str) -> Path:
    src = tmp_path / f"contractions_{element}.c"
    src.write_text(f"#define TYPE {element}\n" + PROGRAM)
    return src


@pytest.mark.parametrize("element", ["double", "float"])
def test_contractions_become_vector_blocks_and_match_gcc(tmp_path: Path, element: str) -> None:
    src = _source(tmp_path, element)
    options = Options(opt_level=3, march="native")
    affine = tmp_path / "kernels.mlir"
    polyflow.build_program(src, affine, options=options, emit="affine-opt")
    text = affine.read_text()
    body = text[text.index("@kernels.affine") :]
    assert "polyflow.not_scheduled" not in body
    assert body.count("vector.store") >= 4  # each of the four nests has vector blocks
    check_program_against_gcc(src, tmp_path / "run", options)


def test_contraction_tiles_with_edges_match_gcc(tmp_path: Path) -> None:
    # Large enough to be tiled with the micro-kernels' tile sizes (384 rows, 64 columns, 128
    # deep for f64), with a partial last tile in every dimension.
    src = tmp_path / "tiled.c"
    src.write_text(
        "#define TYPE double\n"
        + PROGRAM.replace("#define NI 77", "#define NI 401")
        .replace("#define NJ 91", "#define NJ 139")
        .replace("#define NK 53", "#define NK 267")
    )
    options = Options(opt_level=3, march="native")
    affine = tmp_path / "tiled.mlir"
    polyflow.build_program(src, affine, options=options, emit="affine-opt")
    text = affine.read_text()
    assert all(f"step ({size})" in text or f"step {size}" in text for size in (384, 64, 128))
    check_program_against_gcc(src, tmp_path / "run", options)


LAYER = """#include <stdio.h>
#define NB 37
#define NI 300
#define NO 150
static double X[NB][NI], W[NO][NI], bias[NO], Y[NB][NO];
static void layer(void) {
  for (int b = 0; b < NB; b++)
    for (int o = 0; o < NO; o++) Y[b][o] = bias[o];
  for (int b = 0; b < NB; b++)
    for (int o = 0; o < NO; o++)
      for (int i = 0; i < NI; i++) Y[b][o] += X[b][i] * W[o][i];
  for (int b = 0; b < NB; b++)
    for (int o = 0; o < NO; o++) Y[b][o] = Y[b][o] > 0 ? Y[b][o] : 0;
}
int main(void) {
  for (int b = 0; b < NB; b++)
    for (int i = 0; i < NI; i++) X[b][i] = (b * 3 + i * 7) % 11 - 5;
  for (int o = 0; o < NO; o++) {
    bias[o] = o % 7 - 3;
    for (int i = 0; i < NI; i++) W[o][i] = (o * 5 + i) % 9 - 4;
  }
  layer();
  for (int b = 0; b < NB; b++)
    for (int o = 0; o < NO; o += 7) printf("%.17g\\n", Y[b][o]);
  return 0;
}
"""


def test_a_layer_with_relu_as_a_comparison_is_one_vector_kernel(tmp_path: Path) -> None:
    # bias, x · Wᵀ and `y > 0 ? y : 0` fuse into one nest; the comparison and the choice run
    # on whole vectors of the register block (masks of i1), not on scalars.
    src = tmp_path / "layer.c"
    src.write_text(LAYER)
    options = Options(opt_level=3, march="native")
    affine = tmp_path / "layer.mlir"
    polyflow.build_program(src, affine, options=options, emit="affine-opt")
    text = affine.read_text()
    assert "vector.store" in text and "xi1>" in text
    check_program_against_gcc(src, tmp_path / "run", options)


def test_fractional_data_matches_gcc_to_rounding(tmp_path: Path) -> None:
    # Each element's sum over k keeps its order; what may differ from gcc's bits is the fused
    # multiply-adds and the reassociated register sums (parallel_reductions) elsewhere.
    src = tmp_path / "fractions.c"
    src.write_text(
        "#define TYPE double\n"
        + PROGRAM.replace("% 13 - 6", "% 13 * 0.37 - 2.1").replace("% 9 - 4", "% 9 * 1.3 - 0.7")
    )
    exe = tmp_path / "fractions"
    polyflow.build_program(src, exe, options=Options(opt_level=3, march="native"))
    expected = [float(x) for x in _gcc_output(src, tmp_path).split()]
    got = [float(x) for x in _run(exe, "2").split()]
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)


def _gcc_output(src: Path, tmp_path: Path) -> str:
    ref = tmp_path / "ref"
    subprocess.run(["gcc", "-O2", str(src), "-o", str(ref)], check=True)
    return subprocess.run([str(ref)], capture_output=True, text=True, check=True).stdout


def _run(exe: Path, threads: str) -> str:
    env = {"OMP_NUM_THREADS": threads, "PATH": "/usr/bin:/bin"}
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True, env=env).stdout


@pytest.mark.skipif(openmp_library_dir() is None, reason="libiomp5 is not installed")
def test_panels_are_private_to_each_thread(tmp_path: Path) -> None:
    src = _source(tmp_path, "double")
    exe = tmp_path / "kernels"
    polyflow.build_program(src, exe, options=Options(opt_level=3, march="native"))
    expected = _gcc_output(src, tmp_path)
    assert [_run(exe, threads) for threads in ("1", "2")] == [expected, expected]


def test_the_option_turns_micro_kernels_off(tmp_path: Path) -> None:
    src = _source(tmp_path, "double")
    affine = tmp_path / "kernels.mlir"
    options = Options(opt_level=3, march="native", micro_kernels=False)
    polyflow.build_program(src, affine, options=options, emit="affine-opt")
    assert "vector." not in affine.read_text()


@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 3, 7), (37, 29, 53), (64, 64, 64), (130, 17, 95)])
def test_tc_matmul_matches_numpy_at_odd_shapes(shape: tuple[int, int, int]) -> None:
    m, k, n = shape
    fn = tc.define("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }")
    rng = np.random.default_rng(sum(shape))
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    np.testing.assert_allclose(fn(a, b), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("batch,width", [(3, 5), (33, 70), (128, 200)])
def test_tc_layers_with_transposed_weights_match_numpy(batch: int, width: int) -> None:
    fn = tc.define(
        """def fc(float(B,I) x, float(O,I) w, float(O) b) -> (y) {
             y(n, o) = b(o) where n in 0:B
             y(n, o) += x(n, i) * w(o, i)
             y(n, o) = fmax(y(n, o), 0)
           }"""
    )
    rng = np.random.default_rng(batch)
    x = rng.standard_normal((batch, width)).astype(np.float32)
    w = rng.standard_normal((width + 3, width)).astype(np.float32)
    b = rng.standard_normal(width + 3).astype(np.float32)
    expected = np.maximum(x @ w.T + b, 0)
    np.testing.assert_allclose(fn(x, w, b), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "march,bits",
    [("", 128), ("haswell", 256), ("znver3", 256), ("skylake-avx512", 512), ("znver4", 512)],
)
def test_register_width_follows_the_target(march: str, bits: int) -> None:
    assert vector_register_bits(march) == bits


def test_the_host_register_width_is_one_of_the_known_ones() -> None:
    assert vector_register_bits("native") in (128, 256, 512)
