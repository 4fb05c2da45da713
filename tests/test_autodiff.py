"""Reverse-mode gradients (polyflow.autodiff, `TcFunction.grad`): every kernel's gradient is
checked in double against central finite differences along random directions, and against JAX;
exact cases (zeros in products, ties of max) are checked exactly; what cannot be differentiated
is a CompileError at its line."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polyflow.tc as tc
from polyflow import CompileError

# (name, TC source in double, input shapes)
KERNELS: list[tuple[str, str, list[tuple[int, ...]]]] = [
    (
        "matmul",
        "def mm(double(M,K) A, double(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }",
        [(7, 5), (5, 9)],
    ),
    (
        "transposed_batched_matmul",
        "def tbmm(double(B,N,M) X, double(B,K,M) Y) -> (Z) { Z(b,n,k) +=! X(b,n,m) * Y(b,k,m) }",
        [(3, 4, 6), (3, 5, 6)],
    ),
    (
        "conv2d",
        """def conv(double(N,C,H,W) I, double(F,C,KH,KW) W1, double(F) bias) -> (O) {
             O(n,f,h,w) +=! I(n,c,h+kh,w+kw) * W1(f,c,kh,kw)
             O(n,f,h,w) = O(n,f,h,w) + bias(f)
           }""",
        [(2, 3, 7, 6), (4, 3, 3, 2), (4,)],
    ),
    (
        "mlp_tanh_relu",
        """def mlp(double(B,I) X, double(H,I) W1, double(H) b1, double(O,H) W2) -> (h, a, y) {
             h(b,j) +=! X(b,i) * W1(j,i)
             a(b,j) = fmax(tanh(h(b,j) + b1(j)), 0.0)
             y(b,o) +=! a(b,j) * W2(o,j)
           }""",
        [(5, 6), (8, 6), (8,), (3, 8)],
    ),
    (
        "layernorm",
        """def ln(double(N,D) X, double(D) g, double(D) b) -> (mean, var, Y) {
             mean(n) +=! X(n,d) / D
             var(n) +=! (X(n,d) - mean(n)) * (X(n,d) - mean(n)) / D
             Y(n,d) = g(d) * (X(n,d) - mean(n)) * rsqrt(var(n) + 1e-5) + b(d)
           }""",
        [(4, 9), (9,), (9,)],
    ),
    (
        "group_norm",
        """def gn(double(N,G,D,H,W) I, double(G,D) gamma, double(G,D) beta) -> (mean, var, O) {
             mean(n,g) +=! I(n,g,d,h,w) / (D * H * W)
             var(n,g) +=! (I(n,g,d,h,w) - mean(n,g)) * (I(n,g,d,h,w) - mean(n,g)) / (D * H * W)
             O(n,g,d,h,w) = gamma(g,d) * (I(n,g,d,h,w) - mean(n,g)) * rsqrt(var(n,g) + 1e-5)
                          + beta(g,d)
           }""",
        [(2, 3, 2, 3, 4), (3, 2), (3, 2)],
    ),
    (
        "math_builtins",
        """def f(double(N) x, double(N) y) -> (z) {
             z(i) = exp(x(i)) * log(y(i) * y(i) + 1.0) + sin(x(i)) / (2.0 + cos(y(i)))
                  + sqrt(y(i) * y(i) + 0.5) - pow(x(i) * x(i) + 1.0, y(i)) + fabs(x(i))
                  + tanh(y(i)) * fmin(x(i), y(i)) + atan(x(i)) + log1p(y(i) * y(i))
           }""",
        [(11,), (11,)],
    ),
    (
        "row_sums_of_products",
        """def f(double(N,K) A, double(K) x) -> (s, t) {
             s(n) +=! A(n,k) * x(k) - A(n,k) / (1.0 + x(k) * x(k))
             t(n) = s(n) * s(n)
           }""",
        [(6, 13), (13,)],
    ),
]


def _inputs(shapes: list[tuple[int, ...]], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    # away from the kinks of fmax/fmin/fabs: no input near 0, no two inputs equal
    values = [rng.uniform(0.2, 1.0, s) * rng.choice([-1.0, 1.0], s) for s in shapes]
    return [np.ascontiguousarray(v) for v in values]


def _objective(fn: Any, seeds: list[np.ndarray]) -> Callable[[list[np.ndarray]], float]:
    def value(inputs: list[np.ndarray]) -> float:
        outputs = fn(*inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        return float(sum(np.sum(s * o) for s, o in zip(seeds, outputs, strict=True)))

    return value


@pytest.mark.parametrize(("name", "source", "shapes"), KERNELS, ids=[k[0] for k in KERNELS])
def test_gradients_agree_with_central_differences(
    name: str, source: str, shapes: list[tuple[int, ...]]
) -> None:
    fn = tc.define(source)
    inputs = _inputs(shapes, seed=1)
    outputs = fn(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    rng = np.random.default_rng(2)
    seeds = [rng.standard_normal(o.shape) for o in outputs]
    gradients = fn.grad()(*inputs, seed=seeds if len(seeds) > 1 else seeds[0])
    gradients = gradients if isinstance(gradients, tuple) else (gradients,)
    objective = _objective(fn, seeds)
    h = 1e-6
    for _ in range(3):
        directions = [rng.standard_normal(x.shape) for x in inputs]
        plus = objective([x + h * d for x, d in zip(inputs, directions, strict=True)])
        minus = objective([x - h * d for x, d in zip(inputs, directions, strict=True)])
        numeric = (plus - minus) / (2 * h)
        exact = sum(float(np.sum(g * d)) for g, d in zip(gradients, directions, strict=True))
        assert abs(exact - numeric) <= 1e-6 * max(1.0, abs(numeric)), (name, exact, numeric)


_JAX_MLP = """
import sys
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
data = np.load(sys.argv[1])
inputs = [data[f"x{k}"] for k in range(4)]
seeds = tuple(jnp.asarray(data[f"s{k}"]) for k in range(3))
def mlp(X, W1, b1, W2):
    h = X @ W1.T
    a = jnp.maximum(jnp.tanh(h + b1), 0.0)
    return h, a, a @ W2.T
_, pullback = jax.vjp(mlp, *inputs)
np.savez(sys.argv[2], *[np.asarray(g) for g in pullback(seeds)])
"""


def test_the_gradient_of_a_layer_matches_jax(tmp_path: Path) -> None:
    """JAX runs in a child process: it starts threads, and the compile time limit forks."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed")
    source, shapes = KERNELS[3][1], KERNELS[3][2]
    fn = tc.define(source)
    inputs = _inputs(shapes, seed=3)
    rng = np.random.default_rng(4)
    seeds = [rng.standard_normal(o.shape) for o in fn(*inputs)]
    arrays = {f"x{k}": x for k, x in enumerate(inputs)} | {f"s{k}": s for k, s in enumerate(seeds)}
    np.savez(tmp_path / "in.npz", **arrays)
    script = tmp_path / "jax_mlp.py"
    script.write_text(_JAX_MLP)
    run = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    expected = np.load(tmp_path / "out.npz")
    got = fn.grad()(*inputs, seed=seeds)
    for k, mine in enumerate(got):
        assert np.allclose(mine, expected[f"arr_{k}"], rtol=1e-12, atol=1e-12)


def test_wrt_picks_inputs_and_vjp_returns_the_outputs_too() -> None:
    fn = tc.define(KERNELS[0][1])
    A, B = _inputs(KERNELS[0][2], seed=5)
    S = np.random.default_rng(6).standard_normal((7, 9))
    dB = fn.grad(wrt="B")(A, B, S)
    assert np.allclose(dB, A.T @ S, rtol=1e-13)
    dA, dB2 = fn.grad(("A", "B"))(A, B, seed=S)
    assert np.allclose(dA, S @ B.T, rtol=1e-13) and np.array_equal(dB, dB2)
    C, (dA3, _) = fn.vjp(A, B, seed=S)
    assert np.allclose(C, A @ B, rtol=1e-13) and np.array_equal(dA, dA3)


def test_products_with_zeros_and_ties_of_max_are_exact() -> None:
    # (compile_timeout: isl's scheduler runs long on this adjoint's scop; noted as a defect)
    fn = tc.define(
        "def f(double(N) x, double(N) y) -> (z) { z(i) = x(i) * y(i) * fmax(x(i), y(i)) }",
        options={"compile_timeout": 2.0},
    )
    x = np.array([0.0, 0.0, 2.0, 3.0, -1.0])
    y = np.array([0.0, 5.0, 0.0, 3.0, -2.0])
    dx, dy = fn.grad()(x, y, np.ones(5))
    # z = x·y·max(x, y); a tie gives each side half of the max's derivative (as JAX does)
    m = np.maximum(x, y)
    tie = np.where(x == y, 0.5, np.where(x > y, 1.0, 0.0))
    assert np.array_equal(dx, y * m + x * y * tie)
    assert np.array_equal(dy, x * m + x * y * (1.0 - tie))


def test_float_kernels_differentiate_in_float() -> None:
    fn = tc.define("def mv(float(M,K) A, float(K) x) -> (y) { y(i) +=! A(i,k) * x(k) }")
    rng = np.random.default_rng(7)
    A = rng.standard_normal((6, 40)).astype(np.float32)
    x = rng.standard_normal(40).astype(np.float32)
    s = rng.standard_normal(6).astype(np.float32)
    dA, dx = fn.grad()(A, x, s)
    assert dA.dtype == np.float32 and np.allclose(dA, np.outer(s, x), rtol=1e-6)
    assert np.allclose(dx, A.T @ s, rtol=1e-5, atol=1e-5)


def test_the_adjoint_of_a_contraction_is_parallel_without_atomics() -> None:
    """The adjoint's scatter Ā[m,k] += C̄[m,n]·B[k,n] is plain affine code the scheduler
    turns into parallel loops: no atomics anywhere in the gradient."""
    fn = tc.define(KERNELS[0][1].replace("(M,K)", "(M,K)"))
    A, B = np.ones((64, 48)), np.ones((48, 80))
    fn.grad()(A, B, np.ones((64, 80)))
    stages = fn._last.stages
    gradient = stages["grad"][stages["grad"].index("func.func @mm_grad") :]
    assert "atomic" not in gradient and "atomic" not in stages["affine-opt"]
    parallel = [
        r for r in fn._last.report.remarks if r.function == "mm_grad" and "parallel" in r.message
    ]
    assert parallel, [r.message for r in fn._last.report.remarks]


def test_what_cannot_be_differentiated_is_a_compile_error_at_its_line() -> None:
    softmax_max = tc.define(
        """def f(double(N,K) X) -> (m) {
             m(n) max=! X(n,k)
           }"""
    )
    X = np.ones((3, 4))
    with pytest.raises(CompileError, match="not a sum") as error:
        softmax_max.grad()(X, np.ones(3))
    assert error.value.line == 2
    gradient = tc.define("def mv(float(M,K) A, float(K) x) -> (y) { y(i) +=! A(i,k) * x(k) }")
    with pytest.raises(ValueError, match="no floating-point input 'z'"):
        gradient.grad("z")
    with pytest.raises(TypeError, match="seed"):
        gradient.grad()(np.ones((2, 3), np.float32), np.ones(3, np.float32))
    with pytest.raises(ValueError, match="shape"):
        gradient.grad()(np.ones((2, 3), np.float32), np.ones(3, np.float32), np.ones(5))


def test_the_command_line_shows_the_adjoint_and_refuses_it_for_c(tmp_path: Path) -> None:
    layers = str(Path(__file__).resolve().parent.parent / "examples" / "layers.tc")
    shown = subprocess.run(
        [sys.executable, "-m", "polyflow", "tc", layers, "--name", "conv2d", "--emit", "grad",
         "--sizes", "N=1,C=2,H=6,W=6,K=3,KH=3,KW=3"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert shown.returncode == 0 and "func.func @conv2d_grad" in shown.stdout, shown.stderr
    source = tmp_path / "k.c"
    source.write_text("void f(int n, double a[n]) { for (int i = 0; i < n; i++) a[i] *= 2; }\n")
    refused = subprocess.run(
        [sys.executable, "-m", "polyflow", "build", str(source), "--emit", "grad"],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 1 and "not differentiated yet" in refused.stderr
    assert "internal error" not in refused.stderr


def test_a_condition_is_reversed_under_the_same_condition() -> None:
    """An `affine.if` in a loop: its adjoint runs under the same condition and hands the
    adjoints of values from outside it back through its results."""
    from mlir import ir

    from polyflow.autodiff import differentiate_module
    from polyflow.ir.contexts import new_context
    from polyflow.options import Options

    text = """
#set = affine_set<(d0) : (d0 - 2 >= 0)>
func.func @f(%x: memref<6xf64>, %y: memref<6xf64>) {
  affine.for %i = 0 to 6 {
    %v = affine.load %x[%i] : memref<6xf64>
    affine.if #set(%i) {
      %w = arith.mulf %v, %v : f64
      affine.store %w, %y[%i] : memref<6xf64>
    }
  }
  return
}
func.func private @f_grad(memref<6xf64>, memref<6xf64>, memref<6xf64>, memref<6xf64>)
"""
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        differentiate_module(module, Options(grad=("f",)))
        assert module.operation.verify()
        gradient = str(module).split("func.func @f_grad")[1]
    assert "affine.if #set" in gradient and "-> f64" in gradient and "else" in gradient
