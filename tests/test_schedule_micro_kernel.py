"""Micro-kernels (polyflow/schedule/micro_kernel.py) end to end: contraction and convolution
nests become register-blocked vector code, and every program still prints what gcc -O2's build
prints (odd sizes, so that the edge rows and columns run too; 1 and 2 threads), and every TC
still matches NumPy (and, without fused multiply-adds, the build without micro-kernels bit for
bit: each element's sum keeps its order)."""

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
from polyflow.tc_library import LIBRARY
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


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_width_of_tail_columns_sums_like_the_build_without_micro_kernels(dtype: str) -> None:
    # After the full blocks, the columns left run as whole vectors and one masked vector (on
    # AVX and AVX-512 hosts) or as narrower vectors and scalars: every count of them, with and
    # without a full block before, keeps each element's sum bit for bit.
    element = "float" if dtype == "float32" else "double"
    source = (
        f"def mm({element}(M,K) A, {element}(K,N) B) -> (C) {{ C(m, n) +=! A(m, k) * B(k, n) }}"
    )
    options = Options(opt_level=3, march="native", fp_contract="off", micro_kernel_vectors=2)
    plain = options.model_copy(update={"micro_kernels": False})
    lanes = vector_register_bits("native") // (32 if dtype == "float32" else 64)
    rng = np.random.default_rng(lanes)
    for n in sorted({1, 2, 3, lanes // 2 + 1, lanes - 1, lanes, lanes + 1, 2 * lanes + 3,
                     2 * lanes + lanes // 2, 3 * lanes - 1, 4 * lanes + 5}):  # fmt: skip
        a = rng.standard_normal((7, 19)).astype(dtype)
        b = rng.standard_normal((19, n)).astype(dtype)
        got = tc.define(source, options=options)(a, b)
        assert np.array_equal(got, tc.define(source, options=plain)(a, b)), n
        np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


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


# Convolutions in C, as TC writes them (the output updated in place) and with the sum in a
# local, 3x3, 5x5 (one image) and 1x1 kernels; odd sizes: 7 output channels (a block of 6 and
# one row), 19 output columns (vectors of 16 or 8 lanes, then 2, then 1).
CONV_PROGRAM = """#include <stdio.h>
#define NN 2
#define NC 5
#define NK 7
#define NH 13
#define NW 21
/* Products of these values are exact (small integers times powers of two), their sums are not:
   the magnitudes span 2^-56 to 2^36, so each output element prints the same digits as gcc's
   only if its sum runs in the source order (c, then i, then j), fused multiply-adds or not. */
static const double scale_in[4] = {0x1p-40, 0x1p-10, 1.0, 0x1p20};
static const double scale_wt[3] = {0x1p-16, 1.0, 0x1p12};
static TYPE in[NN][NC][NH][NW], w3[NK][NC][3][3], w5[NK][NC][5][5], w1[NK][NC];
static TYPE out3[NN][NK][NH - 2][NW - 2], sum3[NN][NK][NH - 2][NW - 2];
static TYPE out5[1][NK][NH - 4][NW - 4], out1[NN][NK][NH][NW];
static void fill_input(void) {
  for (int n = 0; n < NN; n++)
    for (int c = 0; c < NC; c++)
      for (int h = 0; h < NH; h++)
        for (int w = 0; w < NW; w++)
          in[n][c][h][w] = ((n * 3 + c * 7 + h * 5 + w) % 11 - 5) * scale_in[(c + h + w) % 4];
}
/* TC conv2d's form: the output element updated in place */
static void conv3(void) {
  for (int n = 0; n < NN; n++)
    for (int k = 0; k < NK; k++)
      for (int h = 0; h < NH - 2; h++)
        for (int w = 0; w < NW - 2; w++) {
          out3[n][k][h][w] = 0;
          for (int c = 0; c < NC; c++)
            for (int i = 0; i < 3; i++)
              for (int j = 0; j < 3; j++)
                out3[n][k][h][w] += in[n][c][h + i][w + j] * w3[k][c][i][j];
        }
}
/* the sum in a local variable */
static void conv3_local(void) {
  for (int n = 0; n < NN; n++)
    for (int k = 0; k < NK; k++)
      for (int h = 0; h < NH - 2; h++)
        for (int w = 0; w < NW - 2; w++) {
          TYPE s = 0;
          for (int c = 0; c < NC; c++)
            for (int i = 0; i < 3; i++)
              for (int j = 0; j < 3; j++) s += in[n][c][h + i][w + j] * w3[k][c][i][j];
          sum3[n][k][h][w] = s;
        }
}
/* a 5x5 kernel, one image */
static void conv5(void) {
  for (int k = 0; k < NK; k++)
    for (int h = 0; h < NH - 4; h++)
      for (int w = 0; w < NW - 4; w++) {
        out5[0][k][h][w] = 0;
        for (int c = 0; c < NC; c++)
          for (int i = 0; i < 5; i++)
            for (int j = 0; j < 5; j++)
              out5[0][k][h][w] += in[1][c][h + i][w + j] * w5[k][c][i][j];
      }
}
/* a 1x1 kernel: a product of matrices per image row */
static void conv1(void) {
  for (int n = 0; n < NN; n++)
    for (int k = 0; k < NK; k++)
      for (int h = 0; h < NH; h++)
        for (int w = 0; w < NW; w++) {
          out1[n][k][h][w] = 0;
          for (int c = 0; c < NC; c++) out1[n][k][h][w] += in[n][c][h][w] * w1[k][c];
        }
}
int main(void) {
  fill_input();
  for (int k = 0; k < NK; k++)
    for (int c = 0; c < NC; c++) {
      w1[k][c] = ((k * 2 + c) % 5 - 2) * scale_wt[(k + c) % 3];
      for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++) {
          TYPE v = ((k * 5 + c * 3 + i * 2 + j) % 7 - 3) * scale_wt[(k + c + j) % 3];
          w5[k][c][i][j] = v;
          if (i < 3 && j < 3) w3[k][c][i][j] = v;
        }
    }
  conv3();
  conv3_local();
  conv5();
  conv1();
  for (int n = 0; n < NN; n++)
    for (int k = 0; k < NK; k++)
      for (int h = 0; h < NH - 4; h++)
        for (int w = 0; w < NW - 4; w += 3)
          printf("%.17g %.17g %.17g %.17g\\n", (double)out3[n][k][h][w],
                 (double)sum3[n][k][h][w + 1], (double)out5[0][k][h][w + n],
                 (double)out1[n][k][h + 1][w + 2]);
  printf("%.17g %.17g\\n", (double)out3[NN - 1][NK - 1][NH - 3][NW - 3],
         (double)out1[NN - 1][NK - 1][NH - 1][NW - 1]);
  return 0;
}
"""


@pytest.mark.parametrize("element", ["double", "float"])
def test_c_convolutions_are_micro_kernels_that_sum_in_source_order(
    tmp_path: Path, element: str
) -> None:
    src = tmp_path / f"conv_{element}.c"
    src.write_text(f"#define TYPE {element}\n" + CONV_PROGRAM)
    options = Options(opt_level=3, march="native")
    built = polyflow.build_program(src, tmp_path / "conv.mlir", options=options, emit="affine-opt")
    kernels = {
        remark.function: remark.data
        for remark in built.report.remarks
        if remark.kind == "micro-kernel"
    }
    assert set(kernels) == {"conv3", "conv3_local", "conv5", "conv1"}
    assert all(kernels[name]["convolution"] for name in ("conv3", "conv3_local", "conv5"))
    # bit for bit: the data makes every reordering of a sum visible, and no product rounds
    check_program_against_gcc(src, tmp_path / "run", options)


# The update alone, its seven loops in a given order: each output element sums in that order.
CONV_LOOPS = {"n": "NN", "k": "NK", "h": "NH - 2", "w": "NW - 2", "c": "NC", "i": "3", "j": "3"}
CONV_IN_ORDER = """static void conv(void) {
  for (int n = 0; n < NN; n++)
    for (int k = 0; k < NK; k++)
      for (int h = 0; h < NH - 2; h++)
        for (int w = 0; w < NW - 2; w++) out3[n][k][h][w] = 0;
LOOPS        out3[n][k][h][w] += in[n][c][h + i][w + j] * w3[k][c][i][j];
}
int main(void) {
  fill_input();
  for (int k = 0; k < NK; k++)
    for (int c = 0; c < NC; c++)
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
          w3[k][c][i][j] = ((k * 5 + c * 3 + i * 2 + j) % 7 - 3) * scale_wt[(k + c + j) % 3];
  conv();
  for (int n = 0; n < NN; n++)
    for (int k = 0; k < NK; k++)
      for (int h = 0; h < NH - 2; h++)
        for (int w = 0; w < NW - 2; w++) printf("%.17g\\n", (double)out3[n][k][h][w]);
  return 0;
}
"""


def _conv_in_order(tmp_path: Path, order: str, element: str) -> Path:
    """CONV_IN_ORDER with its seven loops nested in `order`, of `element`s, written out."""
    loops = "".join(
        f"{'  ' * (depth + 1)}for (int {v} = 0; {v} < {CONV_LOOPS[v]}; {v}++)\n"
        for depth, v in enumerate(order)
    )
    header = CONV_PROGRAM[: CONV_PROGRAM.index("/* TC conv2d's form")]
    src = tmp_path / f"conv_{order}.c"
    src.write_text(f"#define TYPE {element}\n" + header + CONV_IN_ORDER.replace("LOOPS", loops))
    return src


@pytest.mark.parametrize("order,element", [("jcikhnw", "float"), ("cwnkhij", "double"),
                                           ("wijnkhc", "float")])  # fmt: skip
def test_c_convolutions_in_any_loop_order_sum_in_that_order(
    tmp_path: Path, order: str, element: str
) -> None:
    # The scheduler keeps each element's order of (c, i, j) as written; the micro-kernel too.
    src = _conv_in_order(tmp_path, order, element)
    options = Options(opt_level=3, march="native")
    built = polyflow.build_program(src, tmp_path / "conv.mlir", options=options, emit="affine-opt")
    assert [r.data["convolution"] for r in built.report.remarks if r.kind == "micro-kernel"] == [
        True
    ]
    check_program_against_gcc(src, tmp_path / "run", options)


def _conv_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    kh, kw = w.shape[2:]
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (kh, kw), axis=(2, 3))
    return np.einsum("nchwij,kcij->nkhw", windows, w.astype(np.float64))


@pytest.mark.parametrize(
    "shape",
    [
        (1, 3, 5, 9, 23, 3),  # N = 1; 21 columns: 16 + 4 + 1; 5 rows: 4 + 1
        (2, 4, 13, 12, 40, 5),  # 5x5
        (2, 8, 8, 10, 18, 1),  # 1x1: a product of matrices per image row
        (3, 16, 64, 18, 58, 3),  # 56 columns: 32 + 16 + 8; 64 rows: 10 x 6 + 4
        (1, 24, 20, 30, 30, 3),  # 28 columns: 16 + 12 of a masked 16 (AVX-512)
        (2, 12, 10, 19, 19, 3),  # 17 columns: 16 + 1 of a masked 4
    ],
)
def test_tc_conv2d_is_a_convolution_micro_kernel_matching_numpy(
    shape: tuple[int, int, int, int, int, int],
) -> None:
    n, c, k, h, w, kernel = shape
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    weight = rng.standard_normal((k, c, kernel, kernel)).astype(np.float32)
    options = Options(opt_level=3, march="native")
    fn = tc.define(LIBRARY["conv2d"], "conv2d", options=options)
    got = fn(x, weight)
    kernels = [r.data for r in fn.report.remarks if r.kind == "micro-kernel"]
    assert len(kernels) == 1 and kernels[0]["convolution"] == (kernel > 1)
    default = tc.define(
        LIBRARY["conv2d"], "conv2d", options=options.model_copy(update={"micro_kernels": False})
    )(x, weight)
    scale = float(np.max(np.abs(default)))
    assert float(np.max(np.abs(got - default))) <= 2e-6 * scale
    np.testing.assert_allclose(got, _conv_reference(x, weight), rtol=0, atol=1e-5 * scale)


@pytest.mark.parametrize(
    "shape,extra,contraction_tiles",
    [
        ((2, 5, 13, 11, 37, 3), {}, False),
        ((2, 5, 9, 11, 37, 3), {"tile_sizes": [2, 8, 4, 16, 8]}, False),  # odd tiles
        ((1, 300, 400, 6, 140, 3), {}, True),  # 384 channels x 64 columns x 256 deep
        ((2, 6, 10, 8, 30, 3), {"micro_kernel_rows": 4, "micro_kernel_vectors": 1}, False),
        ((1, 9, 14, 7, 30, 3), {}, False),  # 28 columns: a tail block only
    ],
)
def test_tc_conv2d_sums_each_element_in_source_order(
    shape: tuple[int, int, int, int, int, int], extra: dict[str, object], contraction_tiles: bool
) -> None:
    # Without fused multiply-adds, the micro-kernel's output is the default build's bit for
    # bit: c, then kh, then kw for every element, whatever the blocks' order.
    n, c, k, h, w, kernel = shape
    rng = np.random.default_rng(k)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    weight = rng.standard_normal((k, c, kernel, kernel)).astype(np.float32)
    options = Options(opt_level=3, march="native", fp_contract="off", **extra)
    fn = tc.define(LIBRARY["conv2d"], "conv2d", options=options)
    got = fn(x, weight)
    kernels = [r.data for r in fn.report.remarks if r.kind == "micro-kernel"]
    assert len(kernels) == 1 and kernels[0]["convolution"]
    assert (kernels[0]["rows"], kernels[0]["vectors"]) == (
        options.micro_kernel_rows,
        options.micro_kernel_vectors,
    )
    tiles = [r.data for r in fn.report.remarks if r.kind == "tiled"]
    assert any(t["contraction"] for t in tiles) == contraction_tiles
    default = tc.define(
        LIBRARY["conv2d"], "conv2d", options=options.model_copy(update={"micro_kernels": False})
    )(x, weight)
    assert np.array_equal(got, default)


def test_tc_convolution_with_bias_and_relu_is_one_micro_kernel() -> None:
    # The bias and the ReLU fuse into the convolution's nest as guarded code after its last
    # channel: the kernel applies them to its registers, still bit for bit without FMAs.
    source = """def cbr(float(N,C,H,W) in, float(K,C,KH,KW) weight, float(K) bias) -> (out) {
      out(n, k, h, w) +=! in(n, c, h + kh, w + kw) * weight(k, c, kh, kw)
      out(n, k, h, w) = fmax(out(n, k, h, w) + bias(k), 0)
    }"""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 5, 12, 30)).astype(np.float32)
    weight = rng.standard_normal((9, 5, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(9).astype(np.float32)
    options = Options(opt_level=3, march="native", fp_contract="off")
    fn = tc.define(source, "cbr", options=options)
    got = fn(x, weight, bias)
    assert [r.data["convolution"] for r in fn.report.remarks if r.kind == "micro-kernel"] == [True]
    default = tc.define(source, "cbr", options=options.model_copy(update={"micro_kernels": False}))(
        x, weight, bias
    )
    assert np.array_equal(got, default)
    expected = np.maximum(_conv_reference(x, weight) + bias[None, :, None, None], 0)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_tc_strided_and_grouped_convolutions_match_numpy() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 6, 21, 35)).astype(np.float32)
    weight = rng.standard_normal((9, 6, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(9).astype(np.float32)
    options = Options(opt_level=3, march="native")
    strided = tc.define(LIBRARY["strided_conv2d"], "strided_conv2d", options=options)
    expected = _conv_reference(x, weight)[:, :, ::2, ::2] + bias[None, :, None, None]
    np.testing.assert_allclose(strided(x, weight, bias), expected, rtol=1e-4, atol=1e-4)
    # `in` at 2 * w + kw is not contiguous along w: no micro-kernel
    assert not [r for r in strided.report.remarks if r.kind == "micro-kernel"]
    grouped = tc.define(LIBRARY["group_conv2d"], "group_conv2d", options=options)
    x = rng.standard_normal((2, 3, 4, 12, 19)).astype(np.float32)
    weight = rng.standard_normal((3, 5, 4, 3, 3)).astype(np.float32)
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (3, 3), axis=(3, 4))
    expected = np.einsum("ngchwij,gfcij->ngfhw", windows, weight.astype(np.float64))
    np.testing.assert_allclose(grouped(x, weight), expected, rtol=1e-4, atol=1e-4)
    assert [r.data["convolution"] for r in grouped.report.remarks if r.kind == "micro-kernel"] == [
        True
    ]


# ----- transposed blocks: vectors along the output channels (or any loop of another subscript
# than the output's last), the reads along them packed into panels, the outputs gathered and
# scattered


@pytest.mark.parametrize(
    "shape,extra",
    [
        ((1, 8, 32, 9, 30, 3), {}),  # 32 channels: one full block of 2 x 16
        ((2, 5, 20, 7, 19, 3), {}),  # 20: a block of 16 + 16 masked to 4
        ((1, 6, 37, 8, 12, 3), {"micro_kernel_rows": 4, "micro_kernel_vectors": 3}),  # 37 = 32 + 5
        ((2, 3, 5, 6, 9, 3), {}),  # fewer channels than lanes
        ((1, 4, 50, 11, 40, 5), {"micro_kernel_rows": 7}),  # 5x5, 36 columns = 5 x 7 + 1
        ((2, 7, 24, 5, 6, 1), {}),  # 1x1
    ],
)
def test_transposed_blocks_sum_each_element_in_source_order(
    shape: tuple[int, int, int, int, int, int], extra: dict[str, object]
) -> None:
    n, c, k, h, w, kernel = shape
    rng = np.random.default_rng(k + h)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    weight = rng.standard_normal((k, c, kernel, kernel)).astype(np.float32)
    options = Options(
        opt_level=3, march="native", fp_contract="off", micro_kernel_transposed="on", **extra
    )
    fn = tc.define(LIBRARY["conv2d"], "conv2d", options=options)
    got = fn(x, weight)
    kernels = [r.data for r in fn.report.remarks if r.kind == "micro-kernel"]
    assert len(kernels) == 1 and kernels[0]["transposed"]
    default = tc.define(
        LIBRARY["conv2d"], "conv2d", options=options.model_copy(update={"micro_kernels": False})
    )(x, weight)
    assert np.array_equal(got, default)
    scale = float(np.max(np.abs(default)))
    np.testing.assert_allclose(got, _conv_reference(x, weight), rtol=0, atol=1e-5 * scale)


@pytest.mark.parametrize("element", ["double", "float"])
def test_transposed_c_convolutions_print_gccs_digits(tmp_path: Path, element: str) -> None:
    # the in-place update, the local sum, 5x5 and 1x1, with 7 output channels: every block
    # is a masked one, and each element's sum still runs in the source order
    src = tmp_path / f"conv_{element}.c"
    src.write_text(f"#define TYPE {element}\n" + CONV_PROGRAM)
    options = Options(opt_level=3, march="native", micro_kernel_transposed="on")
    built = polyflow.build_program(src, tmp_path / "conv.mlir", options=options, emit="affine-opt")
    transposed = {
        remark.function for remark in built.report.remarks if remark.data.get("transposed")
    }
    assert transposed == {"conv3", "conv3_local", "conv5", "conv1"}
    check_program_against_gcc(src, tmp_path / "run", options)


@pytest.mark.parametrize("order", ["kcnhwij", "hwijnkc"])
def test_transposed_c_convolutions_in_other_loop_orders_print_gccs_digits(
    tmp_path: Path, order: str
) -> None:
    src = _conv_in_order(tmp_path, order, "float")
    options = Options(opt_level=3, march="native", micro_kernel_transposed="on")
    built = polyflow.build_program(src, tmp_path / "conv.mlir", options=options, emit="affine-opt")
    assert [r.data["transposed"] for r in built.report.remarks if r.kind == "micro-kernel"] == [
        True
    ]
    check_program_against_gcc(src, tmp_path / "run", options)


# Sizes known only at run time: the outputs' stride comes from the array's shape, the blocks
# left over are decided at run time.
RUNTIME_SIZES = """#include <stdio.h>
#include <stdlib.h>
static void conv(int nk, int nc, int nh, int nw, double out[nk][nh][nw],
                 double in[nc][nh + 2][nw + 2], double w[nk][nc][3][3]) {
  for (int k = 0; k < nk; k++)
    for (int h = 0; h < nh; h++)
      for (int x = 0; x < nw; x++) {
        out[k][h][x] = 0;
        for (int c = 0; c < nc; c++)
          for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) out[k][h][x] += in[c][h + i][x + j] * w[k][c][i][j];
      }
}
int main(int argc, char **argv) {
  int nk = argc > 1 ? atoi(argv[1]) : 19, nc = 6, nh = 5, nw = 11;
  double (*out)[nh][nw] = malloc(sizeof(double) * nk * nh * nw);
  double (*in)[nh + 2][nw + 2] = malloc(sizeof(double) * nc * (nh + 2) * (nw + 2));
  double (*w)[nc][3][3] = malloc(sizeof(double) * nk * nc * 9);
  for (int c = 0; c < nc; c++)
    for (int h = 0; h < nh + 2; h++)
      for (int x = 0; x < nw + 2; x++) in[c][h][x] = (c * 7 + h * 3 + x) % 13 - 6;
  for (int k = 0; k < nk; k++)
    for (int c = 0; c < nc; c++)
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) w[k][c][i][j] = ((k + c * 5 + i * 3 + j) % 9 - 4) * 0.125;
  conv(nk, nc, nh, nw, out, in, w);
  for (int k = 0; k < nk; k++)
    for (int h = 0; h < nh; h++)
      for (int x = 0; x < nw; x++) printf("%.17g\\n", out[k][h][x]);
  free(out); free(in); free(w);
  return 0;
}
"""


def test_transposed_blocks_with_sizes_known_at_run_time_print_gccs_digits(tmp_path: Path) -> None:
    src = tmp_path / "runtime_sizes.c"
    src.write_text(RUNTIME_SIZES)
    options = Options(opt_level=3, march="native", micro_kernel_transposed="on")
    built = polyflow.build_program(src, tmp_path / "conv.mlir", options=options, emit="affine-opt")
    assert [r.data["transposed"] for r in built.report.remarks if r.kind == "micro-kernel"] == [
        True
    ]
    text = (tmp_path / "conv.mlir").read_text()
    assert "vector.gather" in text and "memref.dim" in text
    check_program_against_gcc(src, tmp_path / "run", options)


@pytest.mark.parametrize("shape", [(5, 3, 7), (37, 29, 53), (130, 17, 20)])
def test_transposed_matmul_matches_numpy(shape: tuple[int, int, int]) -> None:
    # vectors along C's rows: A's columns packed, B's row elements broadcast
    m, k, n = shape
    rng = np.random.default_rng(m)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    options = Options(opt_level=3, march="native", micro_kernel_transposed="on")
    fn = tc.define(LIBRARY["matmul"], "matmul", options=options)
    got = fn(a, b)
    assert [r.data["transposed"] for r in fn.report.remarks if r.kind == "micro-kernel"] == [True]
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "shape,transposed",
    [
        ((1, 32, 48, 30, 30), True),  # 28 columns fill 28 of 32 lanes, 48 channels all 48
        ((1, 8, 48, 34, 34), False),  # 32 columns fill all lanes already
        ((1, 8, 20, 30, 30), False),  # 20 channels fill 20 of 32
        ((1, 2, 48, 30, 30), False),  # 18 steps of the reductions: too short for the gathers
        ((1, 64, 48, 9, 9), False),  # each packed weight serves 7 x 7 outputs only
    ],
)
def test_transposed_blocks_are_chosen_where_they_fill_more_lanes(
    shape: tuple[int, int, int, int, int], transposed: bool
) -> None:
    n, c, k, h, w = shape
    x = np.ones((n, c, h, w), np.float32)
    weight = np.ones((k, c, 3, 3), np.float32)
    bits = vector_register_bits("native")
    fn = tc.define(LIBRARY["conv2d"], "conv2d", options=Options(opt_level=3, march="native"))
    np.testing.assert_array_equal(fn(x, weight), np.full((n, k, h - 2, w - 2), 9.0 * c))
    (kernel,) = [r.data for r in fn.report.remarks if r.kind == "micro-kernel"]
    assert kernel["transposed"] == (transposed and bits >= 256)  # 4 lanes fill 28 columns


def test_strided_convolutions_become_transposed_blocks() -> None:
    # `in` at 2 * w + kw is no vector along the columns, but a scalar per row of a block whose
    # vectors run along the channels; the bias (a vector along them) is added in registers
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 8, 41, 35)).astype(np.float32)
    weight = rng.standard_normal((20, 8, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(20).astype(np.float32)
    options = Options(opt_level=3, march="native", fp_contract="off")
    fn = tc.define(LIBRARY["strided_conv2d"], "strided_conv2d", options=options)
    got = fn(x, weight, bias)
    assert [r.data["transposed"] for r in fn.report.remarks if r.kind == "micro-kernel"] == [True]
    default = tc.define(
        LIBRARY["strided_conv2d"],
        "strided_conv2d",
        options=options.model_copy(update={"micro_kernels": False}),
    )(x, weight, bias)
    assert np.array_equal(got, default)
    expected = _conv_reference(x, weight)[:, :, ::2, ::2] + bias[None, :, None, None]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)



@pytest.mark.parametrize("seed", [3, 11, 26])
def test_a_sample_of_random_contractions_prints_gccs_digits_every_way(
    tmp_path: Path, seed: int
) -> None:
    """A sample of tests/fuzz/contraction_fuzz.py (`make fuzz` runs more): a random nest,
    untransposed, transposed and as `auto` chooses, each output bit for bit gcc's."""
    from fuzz.contraction_fuzz import check_contraction

    failures, transposed = check_contraction(seed, tmp_path)
    assert not failures, failures
    assert transposed  # these seeds are ones the transposed blocks take
