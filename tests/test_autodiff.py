"""Reverse-mode gradients (polyflow.autodiff, `TcFunction.grad`): every kernel's gradient is
checked in double against central finite differences along random directions, and against JAX;
exact cases (zeros in products, ties of max) are checked exactly; what cannot be differentiated
is a CompileError at its line."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fuzz.ad_fuzz import central_difference_mismatch

import polyflow.tc as tc
from polyflow import CompileError, compile_c

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
    (
        "max_min_product_reductions",
        """def f(double(N,K) X) -> (m, l, p) {
             m(n) max=! X(n,k)
             l(n) min=! X(n,k) * X(n,k)
             p(n) *=! X(n,k)
           }""",
        [(4, 7)],
    ),
    (
        "logsumexp",
        """def lse(double(N,K) X) -> (m, s, l) {
             m(n) max=! X(n,k)
             s(n) +=! exp(X(n,k) - m(n))
             l(n) = m(n) + log(s(n))
           }""",
        [(5, 8)],
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


@pytest.mark.parametrize(("name", "source", "shapes"), KERNELS, ids=[k[0] for k in KERNELS])
def test_forward_mode_agrees_with_central_differences_and_with_reverse_mode(
    name: str, source: str, shapes: list[tuple[int, ...]]
) -> None:
    """`fn.jvp(*inputs, tangents=v)`: the output tangents J·v against central differences of
    the outputs along v (relative error ≤ 1e-6), and ⟨u, J·v⟩ = ⟨Jᵀ·u, v⟩ with reverse mode's
    vector–Jacobian product (to rounding)."""
    fn = tc.define(source)
    inputs = _inputs(shapes, seed=3)
    rng = np.random.default_rng(4)
    directions = [rng.standard_normal(x.shape) for x in inputs]
    outputs, tangents = fn.jvp(*inputs, tangents=directions)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    tangents = tangents if isinstance(tangents, tuple) else (tangents,)
    reference = fn(*inputs)
    reference = reference if isinstance(reference, tuple) else (reference,)
    assert all(np.array_equal(o, r) for o, r in zip(outputs, reference, strict=True))
    h = 1e-6
    plus = fn(*(x + h * d for x, d in zip(inputs, directions, strict=True)))
    minus = fn(*(x - h * d for x, d in zip(inputs, directions, strict=True)))
    plus = plus if isinstance(plus, tuple) else (plus,)
    minus = minus if isinstance(minus, tuple) else (minus,)
    for k, (p, m, t) in enumerate(zip(plus, minus, tangents, strict=True)):
        numeric = (p - m) / (2 * h)
        scale = max(1.0, float(np.max(np.abs(numeric))))
        assert np.max(np.abs(numeric - t)) <= 1e-6 * scale, (name, k)
    seeds = [rng.standard_normal(o.shape) for o in outputs]
    adjoints = fn.grad()(*inputs, seed=seeds if len(seeds) > 1 else seeds[0])
    adjoints = adjoints if isinstance(adjoints, tuple) else (adjoints,)
    forward = sum(float(np.sum(u * t)) for u, t in zip(seeds, tangents, strict=True))
    backward = sum(float(np.sum(a * v)) for a, v in zip(adjoints, directions, strict=True))
    assert abs(forward - backward) <= 1e-10 * max(1.0, abs(forward)), (name, forward, backward)


def test_hessian_vector_products_are_reverse_over_forward_mode() -> None:
    """`fn.hvp(..., vector=v)`: the gradient of ⟨1, ṡ⟩ through `fn.jvp_function()` is H·v,
    which central differences of the gradient along v confirm; what forward mode does not
    differentiate is a CompileError naming the line."""
    fn = tc.define(
        """def f(double(N) x, double(N,N) A) -> (y, s) {
             y(i) +=! A(i,j) * tanh(x(j))
             s() +=! exp(x(i)) * y(i)
           }"""
    )
    rng = np.random.default_rng(6)
    x, a, v = rng.standard_normal(6), rng.standard_normal((6, 6)), rng.standard_normal(6)
    product = fn.hvp(x, a, vector=v, wrt="x")
    gradient = fn.grad("x")
    h = 1e-6
    step = gradient(x + h * v, a, seed=[None, np.ones(())])
    back = gradient(x - h * v, a, seed=[None, np.ones(())])
    numeric = (step - back) / (2 * h)
    assert np.allclose(product, numeric, rtol=1e-6, atol=1e-7), (product, numeric)
    product_fn = tc.define("def p(double(N) x) -> (y) { y() = 1.0\n y() *= x(i) }")
    with pytest.raises(CompileError, match="needs '\\*=!'"):
        product_fn.jvp(x, tangents=v)


_GPU_KERNELS = ["matmul", "conv2d", "mlp_tanh_relu", "max_min_product_reductions", "logsumexp"]


@pytest.mark.parametrize(
    ("name", "source", "shapes"),
    [k for k in KERNELS if k[0] in _GPU_KERNELS],
    ids=_GPU_KERNELS,
)
def test_gradients_of_gpu_definitions_map_to_kernels_that_agree_on_the_cpu(
    name: str, source: str, shapes: list[tuple[int, ...]]
) -> None:
    """`tc.define(..., target="cuda").grad()`: the gradient goes through the GPU mapping (its
    PTX checked by ptxas where the toolkit is installed) and its kernels, run on the CPU by the
    emulation (blocks and threads as loops), give the CPU gradient's adjoints (relative 1e-12).
    A sample of five of the ten kernels: all ten take 40 s to compile for the GPU."""
    inputs = _inputs(shapes, seed=1)
    cpu, gpu = tc.define(source), tc.define(source, target="cuda")
    outputs = cpu(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    rng = np.random.default_rng(2)
    seeds = [rng.standard_normal(o.shape) for o in outputs]
    seed = seeds if len(seeds) > 1 else seeds[0]
    want = cpu.grad()(*inputs, seed=seed)
    got = gpu.grad().emulate(*inputs, seed=seed)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    assert "gpu.launch_func" in gpu._last.stages["gpu"] and gpu._last.ptx
    for g, w in zip(got, want, strict=True):
        assert np.allclose(g, w, rtol=1e-12, atol=1e-14), (name, np.max(np.abs(g - w)))


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


_JAX_FLOAT = """
import sys
import numpy as np
import jax
import jax.numpy as jnp
kernel = sys.argv[1]
data = np.load(sys.argv[2])
inputs = [jnp.asarray(data[f"x{k}"]) for k in range(int(data["inputs"]))]
seeds = tuple(jnp.asarray(data[f"s{k}"]) for k in range(int(data["outputs"])))
def matmul(A, B):
    return (A @ B,)
def conv2d(I, W, b):
    O = jax.lax.conv_general_dilated(I, W, (1, 1), "VALID")
    return (O + b[None, :, None, None],)
def mlp_tanh_relu(X, W1, b1, W2):
    h = X @ W1.T
    a = jnp.maximum(jnp.tanh(h + b1), 0.0)
    return h, a, a @ W2.T
def layernorm(X, g, b):
    mean = X.mean(axis=1)
    var = ((X - mean[:, None]) ** 2).mean(axis=1)
    return mean, var, g * (X - mean[:, None]) * jax.lax.rsqrt(var[:, None] + 1e-5) + b
def logsumexp(X):
    m = X.max(axis=1)
    s = jnp.exp(X - m[:, None]).sum(axis=1)
    return m, s, m + jnp.log(s)
_, pullback = jax.vjp(globals()[kernel], *inputs)
np.savez(sys.argv[3], *[np.asarray(g) for g in pullback(seeds)])
"""


def _torch_float_gradients(
    kernel: str, inputs: list[np.ndarray], seeds: list[np.ndarray]
) -> list[np.ndarray]:
    import torch

    xs = [torch.tensor(x, requires_grad=True) for x in inputs]
    if kernel == "matmul":
        outs = [xs[0] @ xs[1]]
    elif kernel == "conv2d":
        outs = [torch.nn.functional.conv2d(xs[0], xs[1], xs[2])]
    elif kernel == "mlp_tanh_relu":
        h = xs[0] @ xs[1].T
        a = torch.clamp_min(torch.tanh(h + xs[2]), 0.0)
        outs = [h, a, a @ xs[3].T]
    elif kernel == "layernorm":
        mean = xs[0].mean(dim=1)
        var = ((xs[0] - mean[:, None]) ** 2).mean(dim=1)
        outs = [
            mean,
            var,
            xs[1] * (xs[0] - mean[:, None]) * torch.rsqrt(var[:, None] + 1e-5) + xs[2],
        ]
    else:
        m = xs[0].max(dim=1).values
        s = torch.exp(xs[0] - m[:, None]).sum(dim=1)
        outs = [m, s, m + torch.log(s)]
    grads = torch.autograd.grad(outs, xs, [torch.tensor(s) for s in seeds])
    return [g.numpy() for g in grads]


_FLOAT_KERNELS = ["matmul", "conv2d", "mlp_tanh_relu", "layernorm", "logsumexp"]


@pytest.mark.parametrize("name", _FLOAT_KERNELS)
def test_float_kernels_agree_with_jax_and_pytorch_at_float_tolerance(
    name: str, tmp_path: Path
) -> None:
    """The `float` variant of a TC/ML kernel: its gradient (all inputs, a seed per output)
    against `jax.vjp` (CPU, float32, in a child process) and PyTorch autograd (float32), to
    float tolerances (relative 1e-4 of the largest adjoint)."""
    if importlib.util.find_spec("jax") is None or importlib.util.find_spec("torch") is None:
        pytest.skip("jax or torch is not installed")
    _, source, shapes = next(k for k in KERNELS if k[0] == name)
    fn = tc.define(source.replace("double", "float"))
    rng = np.random.default_rng(12)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    outputs = fn(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    seeds = [rng.standard_normal(np.shape(o)).astype(np.float32) for o in outputs]
    arrays = {f"x{k}": x for k, x in enumerate(inputs)} | {f"s{k}": s for k, s in enumerate(seeds)}
    np.savez(tmp_path / "in.npz", inputs=len(inputs), outputs=len(seeds), **arrays)
    script = tmp_path / "jax_float.py"
    script.write_text(_JAX_FLOAT)
    run = subprocess.run(
        [sys.executable, str(script), name, str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    from_jax = np.load(tmp_path / "out.npz")
    got = fn.grad()(*inputs, seed=seeds if len(seeds) > 1 else seeds[0])
    got = list(got) if isinstance(got, tuple) else [got]
    from_torch = _torch_float_gradients(name, inputs, seeds)
    for k, mine in enumerate(got):
        assert mine.dtype == np.float32
        for reference in (from_jax[f"arr_{k}"], from_torch[k]):
            scale = float(np.abs(reference).max()) or 1.0
            np.testing.assert_allclose(mine, reference, rtol=1e-4, atol=1e-4 * scale)


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


def test_a_gradient_that_returns_only_adjoints_skips_the_primal_work_they_do_not_need() -> None:
    """`fn.grad(wrt)(...)` returns adjoints only: the forward sweep leaves out the nests that
    compute outputs nothing reads again (C = A·B for the gradient of a matmul), while `vjp`
    computes them; both give the same adjoints. An intermediate output the adjoint reads
    (`H` under tanh) is still computed."""
    mm = tc.define("def mm(double(M,K) A, double(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }")
    rng = np.random.default_rng(4)
    a, b, seed = (
        rng.standard_normal((6, 5)),
        rng.standard_normal((5, 4)),
        rng.standard_normal((6, 4)),
    )
    d_a, d_b = mm.grad()(a, b, seed=seed)
    grad_ir = mm._last.stages["grad"]
    adjoint_only = grad_ir[grad_ir.index("@mm_grad(") :]
    c, (v_a, v_b) = mm.vjp(a, b, seed=seed)
    vjp_ir = mm._last.stages["grad"]
    with_outputs = vjp_ir[vjp_ir.index("@mm_grad(") :]
    assert np.allclose(c, a @ b) and np.allclose(d_a, seed @ b.T) and np.allclose(d_b, a.T @ seed)
    assert np.array_equal(d_a, v_a) and np.array_equal(d_b, v_b)
    # the forward sweep's zeroing and product of C: 5 loops fewer
    assert adjoint_only.count("affine.for") + 5 == with_outputs.count("affine.for")
    layer = tc.define(
        """def layer(double(B,I) X, double(O,I) W) -> (H, Y) {
             H(b,o) +=! X(b,i) * W(o,i)
             Y(b,o) = tanh(H(b,o))
           }"""
    )
    x, w = rng.standard_normal((3, 5)), rng.standard_normal((2, 5))
    seed_y = rng.standard_normal((3, 2))
    d_w = layer.grad("W")(x, w, seed=[None, seed_y])
    want = ((1 - np.tanh(x @ w.T) ** 2) * seed_y).T @ x
    assert np.allclose(d_w, want)


_MIXTURE = """
def mixture(double(N,D) x, double(K,D) means, double(K,D,D) L, double(K) alphas)
    -> (xc, qx, sq, score) {
  xc(i,k,a) = x(i,a) - means(k,a)
  qx(i,k,a) +=! L(k,a,b) * xc(i,k,b)
  sq(i,k) +=! qx(i,k,a) * qx(i,k,a)
  score(i) +=! exp(alphas(k) - 0.5 * sq(i,k)) + xc(i,k,0) * tanh(alphas(k))
}
"""


def test_unseeded_cheap_temporaries_are_recomputed_where_read_not_stored() -> None:
    """`fn.grad` of a definition whose temporary `xc` (a difference of parameters) gets no
    seed: the gradient runs the definition with `xc` substituted into its readers, so neither
    `xc` nor its shadow is allocated (GMM's peak memory), and with a costly call on parameters
    that varies with fewer loops than its statement computed once into a temporary; the
    adjoints equal `vjp`'s, which keeps every output. `qx`, a reduction, and a seeded
    temporary stay."""
    from polyflow.frontend.tc.parser import parse
    from polyflow.frontend.tc.rematerialize import without_temporaries

    definition = parse(_MIXTURE).find("mixture")
    assert definition is not None
    text, kept = without_temporaries(definition, {"xc", "qx", "sq"}) or ("", [])
    # tanh(alphas(k)) in a statement over i and k: computed once per k, read per (i, k)
    assert kept == ["qx", "sq", "score", "hoisted_0"]
    assert "(L(k, a, b) * (x(i, b) - means(k, b)))" in text and "xc" not in text
    assert "(x(i, 0) - means(k, 0)) * hoisted_0(k)" in text
    assert "hoisted_0(k) = tanh(alphas(k))" in text
    hoisted_only = without_temporaries(definition, {"qx", "sq"})
    assert hoisted_only is not None and hoisted_only[1] == [*"xc qx sq score".split(), "hoisted_0"]
    fn = tc.define(_MIXTURE, "mixture")
    rng = np.random.default_rng(8)
    args = [rng.standard_normal(s) for s in [(7, 16), (4, 16), (4, 16, 16), (4,)]]
    args[2] *= 0.1
    seed = rng.standard_normal(7)
    gradient = fn.grad(("means", "L", "alphas"))
    got = gradient(*args, seed=[None, None, None, seed])
    assert gradient.compiled is not None and "xc" not in gradient.compiled.specialized.shapes
    # means̄[k,b] is then a sum over i and a: ordered (a | k, b, i) for the micro-kernels
    assert "polyflow.keep_order" in gradient.compiled.stages["grad"]
    _, want = fn.vjp(*args, seed=[None, None, None, seed])  # x too: want[0]
    for a, b in zip(got, want[1:], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)
    seed_xc = rng.standard_normal((7, 4, 16))  # seeded: xc stays an output of the gradient
    got = gradient(*args, seed=[seed_xc, None, None, seed])
    assert "xc" in gradient.compiled.specialized.shapes
    _, want = fn.vjp(*args, seed=[seed_xc, None, None, seed])
    for a, b in zip(got, want[1:], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)


def test_a_costly_value_the_primal_stored_is_read_back_not_computed_again() -> None:
    """The adjoint of `a = tanh(h + b)` needs tanh(h + b): the forward sweep stored it in `a`,
    which nothing overwrites, so the adjoint loads it (one tanh in the gradient, not two); a
    value stored where a later statement overwrites it is computed again (C kernel
    `costly_value_overwritten_later`, checked against central differences)."""
    layer = tc.define(
        """def layer(double(B,I) X, double(O,I) W, double(O) b, double(P,O) V) -> (h, a, y) {
             h(n,o) +=! X(n,i) * W(o,i)
             a(n,o) = tanh(h(n,o) + b(o))
             y(n,p) +=! a(n,o) * V(p,o)
           }"""
    )
    rng = np.random.default_rng(9)
    x, w, b, v = (rng.standard_normal(s) for s in [(5, 4), (3, 4), (3,), (2, 3)])
    seed = rng.standard_normal((5, 2))
    gradient = layer.grad(("W", "b"))
    d_w, d_b = gradient(x, w, b, v, seed=[None, None, seed])
    assert gradient.compiled is not None
    grad = gradient.compiled.stages["grad"]
    assert grad[grad.index("@layer_grad(") :].count("math.tanh") == 1
    d_a = seed @ v
    d_h = d_a * (1 - np.tanh(x @ w.T + b) ** 2)
    np.testing.assert_allclose(d_w, d_h.T @ x, rtol=1e-12)
    np.testing.assert_allclose(d_b, d_h.sum(axis=0), rtol=1e-12)


def test_a_gradient_called_again_starts_afresh() -> None:
    """The buffers a gradient keeps between calls (seeds, outputs it does not return) hold
    nothing over: a None seed after a given one is zero again, and an output accumulated with
    `+=` (no `!`) starts from zero in each call; a fresh definition agrees."""
    source = """def acc(double(N) x) -> (s, y) {
                  s(i) += x(i) * x(i)
                  y(i) = s(i) * x(i)
                }"""
    rng = np.random.default_rng(8)
    x, seed_s, seed_y = (rng.standard_normal(5) for _ in range(3))
    g = tc.define(source).grad("x")
    first = g(x, seed=[seed_s, seed_y])
    again = g(x, seed=[None, seed_y])
    assert np.allclose(first, 2 * x * seed_s + 3 * x * x * seed_y)
    assert np.array_equal(again, tc.define(source).grad("x")(x, seed=[None, seed_y]))
    assert np.allclose(again, 3 * x * x * seed_y)


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


def test_forward_mode_of_products_with_zeros_and_of_ties_is_exact() -> None:
    """`p(n) *=! X(n,k)` in forward mode: rows with 0, 1 and 2 zero factors get Σ_k (Π_{j≠k}
    X)·Ẋ exactly; `m(n) max=! X(n,k)` with a tie gets the mean of the tied tangents."""
    fn = tc.define("def f(double(N,K) X) -> (p, m) { p(n) *=! X(n,k)\n m(n) max=! X(n,k) }")
    x = np.array([[2.0, 3.0, 4.0], [2.0, 0.0, 4.0], [0.0, 3.0, 0.0], [5.0, 1.0, 5.0]])
    dx = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    _, (dp, dm) = fn.jvp(x, tangents=dx)
    want = [
        sum(np.prod(np.delete(row, k)) * d[k] for k in range(3))
        for row, d in zip(x, dx, strict=True)
    ]
    assert np.array_equal(dp, np.array(want)), (dp, want)
    assert np.array_equal(dm, np.array([3.0, 3.0, 2.0, 2.0])), dm


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
    gradient = stages["grad"][stages["grad"].index("@mm_grad(") :]
    assert "atomic" not in gradient and "atomic" not in stages["affine-opt"]
    parallel = [
        r for r in fn._last.report.remarks if r.function == "mm_grad" and "parallel" in r.message
    ]
    assert parallel, [r.message for r in fn._last.report.remarks]


def test_what_cannot_be_differentiated_is_a_compile_error_at_its_line() -> None:
    halving = """void f(int n, double x[n]) {
  for (int i = 0; i < n; i++)
    while (x[i] > 1.0)
      x[i] = x[i] / 2.0;
}
"""
    with pytest.raises(CompileError, match="cannot differentiate 'f'") as error:
        compile_c(halving, "f", grad=True)
    assert error.value.line == 3, error.value
    with pytest.raises(CompileError, match="'n' of 'f' is not floating-point"):
        compile_c(halving, "f", grad="f:n")
    with pytest.raises(CompileError, match="no parameter 'y'"):
        compile_c(halving, "f", grad="f:y")
    with pytest.raises(CompileError, match="cannot differentiate 'g'"):
        compile_c(halving, "f", grad="g")
    gradient = tc.define("def mv(float(M,K) A, float(K) x) -> (y) { y(i) +=! A(i,k) * x(k) }")
    with pytest.raises(ValueError, match="no floating-point input 'z'"):
        gradient.grad("z")
    with pytest.raises(TypeError, match="seed"):
        gradient.grad()(np.ones((2, 3), np.float32), np.ones(3, np.float32))
    with pytest.raises(ValueError, match="shape"):
        gradient.grad()(np.ones((2, 3), np.float32), np.ones(3, np.float32), np.ones(5))


def test_the_command_line_shows_the_adjoint_of_tc_and_c(tmp_path: Path) -> None:
    layers = str(Path(__file__).resolve().parent.parent / "examples" / "layers.tc")
    shown = subprocess.run(
        [sys.executable, "-m", "polyflow", "tc", layers, "--name", "conv2d", "--emit", "grad",
         "--sizes", "N=1,C=2,H=6,W=6,K=3,KH=3,KW=3"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert shown.returncode == 0 and "@conv2d_grad(" in shown.stdout, shown.stderr
    source = tmp_path / "k.c"
    source.write_text("void f(int n, double a[n]) { for (int i = 0; i < n; i++) a[i] *= 2; }\n")
    build = [sys.executable, "-m", "polyflow", "build", str(source)]
    refused = subprocess.run([*build, "--emit", "grad"], capture_output=True, text=True)
    assert refused.returncode == 1 and "--grad NAME" in refused.stderr
    assert "internal error" not in refused.stderr
    shown = subprocess.run(
        [*build, "--emit", "grad", "--grad", "f"], capture_output=True, text=True
    )
    assert shown.returncode == 0 and "@f_grad(" in shown.stdout, shown.stderr
    header = subprocess.run(
        [*build, "--emit", "header", "--grad", "f:a"], capture_output=True, text=True
    )
    assert "void f_grad(int n, const void *a, void *d_a);" in header.stdout, header.stderr


# A C program that calls the gradient polyflow builds for `energy` (examples/energy.c); built
# with -DORACLE by gcc -O2, main.c prints central differences of `energy` instead: the two must
# agree.
_ENERGY = Path(__file__).resolve().parent.parent / "examples" / "energy.c"

_MAIN = """#include <math.h>
#include <stdio.h>
#ifndef ORACLE
#include "energy_grad.h"
#endif

double energy(int n, int steps, double x[n], double w[n], double k);

static void start(int n, double x[n], double w[n]) {
  for (int i = 0; i < n; i++) {
    x[i] = 0.3 + 0.1 * sin(1.0 + i);
    w[i] = 1.0 + 0.5 * cos(2.0 * i);
  }
}

int main(void) {
  enum { N = 9, STEPS = 4 };
  double x[N], w[N], dx[N], dw[N], k = 0.7, dk = 0.0;
#ifdef ORACLE
  double h = 1e-6, xp[N], xm[N], wp[N], wm[N];
  for (int i = 0; i < N; i++) {
    start(N, xp, wp);
    start(N, xm, wm);
    xp[i] += h;
    xm[i] -= h;
    dx[i] = (energy(N, STEPS, xp, wp, k) - energy(N, STEPS, xm, wm, k)) / (2 * h);
    start(N, xp, wp);
    start(N, xm, wm);
    wp[i] += h;
    wm[i] -= h;
    dw[i] = (energy(N, STEPS, xp, wp, k) - energy(N, STEPS, xm, wm, k)) / (2 * h);
  }
  start(N, x, w);
  double up = energy(N, STEPS, x, w, k + h);
  start(N, x, w);
  dk = (up - energy(N, STEPS, x, w, k - h)) / (2 * h);
#else
  for (int i = 0; i < N; i++)
    dx[i] = dw[i] = 0.0;
  start(N, x, w);
  energy_grad(N, STEPS, x, dx, w, dw, k, &dk, 1.0);
#endif
  for (int i = 0; i < N; i++)
    printf("%.12e %.12e\\n", dx[i], dw[i]);
  printf("%.12e 0\\n", dk);
  return 0;
}
"""


def test_a_c_program_calls_the_gradient_polyflow_builds(tmp_path: Path) -> None:
    """`polyflow build energy.c main.c --grad energy`: main's calls to `energy_grad` (declared
    by the header `--emit=header` writes) agree with central differences from gcc -O2; the time
    loop overwrites `x` in place, so the adjoint reads the values it needs from a tape, here
    checkpointed every 4 steps (`--report` says so)."""
    (tmp_path / "energy.c").write_text(_ENERGY.read_text())
    (tmp_path / "main.c").write_text(_MAIN)
    polyflow = [sys.executable, "-m", "polyflow", "build", "--grad", "energy"]
    header = subprocess.run(
        [*polyflow, "energy.c", "--emit", "header", "-o", "energy_grad.h"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert header.returncode == 0, header.stderr
    ours = subprocess.run(
        [*polyflow, "energy.c", "main.c", "-I", ".", "-o", "ours", "--checkpoint-steps", "4",
         "--report"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert ours.returncode == 0, ours.stderr
    assert "checkpointed: the adjoint runs it again in segments of 4 iterations" in ours.stderr
    subprocess.run(
        ["gcc", "-O2", "-DORACLE", "energy.c", "main.c", "-o", "oracle", "-lm"],
        check=True, cwd=tmp_path,
    )  # fmt: skip
    run = lambda exe: np.loadtxt(  # noqa: E731
        subprocess.run(
            [str(tmp_path / exe)], capture_output=True, text=True, check=True
        ).stdout.splitlines()
    )
    got, want = run("ours"), run("oracle")
    assert got.shape == (10, 2) and np.abs(got).max() > 0.1
    assert np.allclose(got, want, rtol=1e-6, atol=1e-7), (got, want)


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
        gradient = str(module).split("@f_grad(")[1]
    assert "affine.if #set" in gradient and "-> f64" in gradient and "else" in gradient


def test_the_adjoint_of_a_window_updates_along_its_longest_unit_stride_loop() -> None:
    """A copy of a distributed adjoint that writes its shadow through a window (`dI[c, h+kh]`
    += dO[f, h] · W[f, kh], a 1-D convolution's input): its innermost loop becomes the one
    that moves every access by one element, of the most iterations (h, not kh), instead of
    the strided reduction over f."""
    from mlir import ir

    from polyflow.autodiff.contraction import order_as_contraction
    from polyflow.ir.contexts import new_context

    text = """
func.func @f(%dI: memref<4x10xf64>, %dO: memref<5x8xf64>, %W: memref<5x3xf64>) {
  affine.for %c = 0 to 4 {
    affine.for %h = 0 to 8 {
      affine.for %kh = 0 to 3 {
        affine.for %f = 0 to 5 {
          %a = affine.load %dO[%f, %h] : memref<5x8xf64>
          %b = affine.load %W[%f, %kh] : memref<5x3xf64>
          %p = arith.mulf %a, %b : f64
          %old = affine.load %dI[%c, %h + %kh] : memref<4x10xf64>
          %s = arith.addf %old, %p : f64
          affine.store %s, %dI[%c, %h + %kh] : memref<4x10xf64>
        }
      }
    }
  }
  return
}
"""
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        function = module.body.operations[0]
        entry = function.regions[0].blocks[0]
        nest = entry.operations[0]
        shadow = entry.arguments[0]
        with ir.InsertionPoint(entry):
            outer = order_as_contraction(nest.operation, shadow)
        assert module.operation.verify()
        bounds = []
        loop = outer
        while loop.name == "affine.for":
            bounds.append(str(loop.attributes["upperBoundMap"]))
            inner = [o for o in loop.regions[0].blocks[0].operations if o.name == "affine.for"]
            loop = inner[0].operation if inner else loop.regions[0].blocks[0].operations[0]
    # c (4) and h (8) index the shadow first, then kh (3), f (5), and h innermost: c, kh, f, h
    assert [b.split("-> (")[1].rstrip(")>") for b in bounds] == ["4", "3", "5", "8"], bounds


def test_a_filter_gradient_accumulates_transposed_into_a_micro_kernel() -> None:
    """The gradient of a convolution's filter (`W̄[f,c,kh,kw] += Σ Ō[n,f,h,w]·I[n,c,h+kh,w+kw]`,
    its last subscript over 3 elements) accumulates into a temporary with f last, over loops
    (kh, kw, n, h | c, f, w), kept in that order: the scheduler's micro-kernel takes the three
    innermost. The result matches NumPy's, and the small window's shadow is updated once."""
    source = KERNELS[[k[0] for k in KERNELS].index("conv2d")][1]
    fn = tc.define(source, "conv")
    rng = np.random.default_rng(3)
    images, filters, bias = (rng.standard_normal(s) for s in [(2, 5, 9, 9), (16, 5, 3, 3), (16,)])
    seed = rng.standard_normal((2, 16, 7, 7))
    d_filters = fn.grad(("W1",))(images, filters, bias, seed=seed)
    expected = np.zeros_like(filters)
    for kh in range(3):
        for kw in range(3):
            window = images[:, :, kh : kh + 7, kw : kw + 7]
            expected[:, :, kh, kw] = np.einsum("nfhw,nchw->fc", seed, window)
    np.testing.assert_allclose(d_filters, expected, rtol=1e-13, atol=1e-13)
    stages = fn._last.stages
    assert "memref<5x3x3x16xf64>" in stages["grad"] and "polyflow.keep_order" in stages["grad"]
    remarks = [r for r in fn._last.report.remarks if r.kind == "micro-kernel"]
    assert remarks, "the transposed accumulation did not become a micro-kernel"


def test_a_short_last_subscript_without_a_long_loop_is_left_alone() -> None:
    """`accumulate_transposed` rebuilds only what pays: a shadow whose subscripts are all short
    (here 4 x 3, no loop of 16 or more to vectorize along) keeps its nest."""
    from mlir import ir

    from polyflow.autodiff.transpose import accumulate_transposed
    from polyflow.ir.contexts import new_context

    text = """
func.func @f(%dW: memref<4x2x3xf64>, %dO: memref<4x8xf64>, %I: memref<2x10xf64>) {
  affine.for %f = 0 to 4 {
    affine.for %c = 0 to 2 {
      affine.for %k = 0 to 3 {
        affine.for %h = 0 to 8 {
          %a = affine.load %dO[%f, %h] : memref<4x8xf64>
          %b = affine.load %I[%c, %h + %k] : memref<2x10xf64>
          %p = arith.mulf %a, %b : f64
          %old = affine.load %dW[%f, %c, %k] : memref<4x2x3xf64>
          %s = arith.addf %old, %p : f64
          affine.store %s, %dW[%f, %c, %k] : memref<4x2x3xf64>
        }
      }
    }
  }
  return
}
"""
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        entry = module.body.operations[0].regions[0].blocks[0]
        nest = entry.operations[0].operation
        with ir.InsertionPoint(entry):
            assert accumulate_transposed(nest, entry.arguments[0]) == nest
        module.operation.verify()
        assert "memref.alloc" not in str(module)


# (name, C source, arguments: ints size the arrays; float arrays and float scalars are active)
C_KERNELS: list[tuple[str, str, list[Any]]] = [
    (
        "dot_with_a_result",
        """double f(int n, const double *x, const double *y) {
             double s = 0.0;
             for (int i = 0; i < n; i++) s += x[i] * y[i] * y[i];
             return s;
           }""",
        [7, (7,), (7,)],
    ),
    (
        "matmul_initialized_in_place",
        """void f(int n, int m, int k, double A[n][k], double B[k][m], double C[n][m]) {
             for (int i = 0; i < n; i++)
               for (int j = 0; j < m; j++) {
                 C[i][j] = 0.0;
                 for (int l = 0; l < k; l++) C[i][j] += A[i][l] * B[l][j];
               }
           }""",
        [3, 4, 5, (3, 5), (5, 4), (3, 4)],
    ),
    (
        "recurrence_with_a_scalar",
        """#include <math.h>
           void f(int T, int n, double h[T + 1][n], double W[n][n], double a) {
             for (int t = 0; t < T; t++)
               for (int i = 0; i < n; i++) {
                 double s = 0.0;
                 for (int j = 0; j < n; j++) s += W[i][j] * h[t][j];
                 h[t + 1][i] = tanh(a * s);
               }
           }""",
        [4, 3, (5, 3), (3, 3), 0.7],
    ),
    (
        "jacobi_1d_in_place",
        """void f(int T, int n, double A[n], double B[n]) {
             for (int t = 0; t < T; t++) {
               for (int i = 1; i < n - 1; i++) B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1]);
               for (int i = 1; i < n - 1; i++) A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1]);
             }
           }""",
        [5, 10, (10,), (10,)],
    ),
    (
        "jacobi_2d_time_loop",
        """void f(int T, int n, double A[n][n], double B[n][n]) {
             for (int t = 0; t < T; t++) {
               for (int i = 1; i < n - 1; i++)
                 for (int j = 1; j < n - 1; j++)
                   B[i][j] = 0.2 * (A[i][j] + A[i][j - 1] + A[i][j + 1] + A[i + 1][j] + A[i - 1][j]);
               for (int i = 1; i < n - 1; i++)
                 for (int j = 1; j < n - 1; j++)
                   A[i][j] = 0.2 * (B[i][j] + B[i][j - 1] + B[i][j + 1] + B[i + 1][j] + B[i - 1][j]);
             }
           }""",
        [3, 7, (7, 7), (7, 7)],
    ),
    (
        "heat_3d_time_loop_with_uneven_offsets",
        """void f(int T, int n, double A[n][n][n], double B[n][n][n]) {
             for (int t = 0; t < T; t++) {
               for (int i = 1; i < n - 1; i++)
                 for (int j = 1; j < n - 1; j++)
                   for (int k = 1; k < n - 2; k++)
                     B[i][j][k] = 0.125 * (A[i + 1][j][k] - 2.0 * A[i][j][k] + A[i - 1][j][k])
                                + 0.125 * (A[i][j + 1][k] - 2.0 * A[i][j][k] + A[i][j - 1][k])
                                + 0.25 * A[i][j][k + 2] * A[i][j][k - 1] + A[i][j][k];
               for (int i = 1; i < n - 1; i++)
                 for (int j = 1; j < n - 1; j++)
                   for (int k = 1; k < n - 2; k++)
                     A[i][j][k] = 0.5 * B[i][j][k] + 0.25 * (B[i][j][k + 1] + B[i][j][k - 1]);
             }
           }""",
        [2, 6, (6, 6, 6), (6, 6, 6)],
    ),
    (
        "stencil_with_a_row_weight_between_its_loops",
        """#include <math.h>
           void f(int T, int n, double A[n][n], double B[n][n]) {
             for (int t = 0; t < T; t++) {
               for (int i = 1; i < n - 1; i++) {
                 double w = sin(0.1 * i);
                 for (int j = 1; j < n - 1; j++)
                   B[i][j] = w * (A[i][j - 1] + A[i][j + 1]) + 0.25 * A[i - 1][j];
               }
               for (int i = 1; i < n - 1; i++)
                 for (int j = 1; j < n - 1; j++)
                   A[i][j] = 0.5 * (B[i][j] + B[i + 1][j]);
             }
           }""",
        [2, 6, (6, 6), (6, 6)],
    ),
    (
        "nonlinear_update_in_place_taped",
        """#include <math.h>
           void f(int T, int n, double x[n]) {
             for (int t = 0; t < T; t++)
               for (int i = 0; i < n; i++) x[i] = sin(x[i]) * x[i] + 0.5;
           }""",
        [3, 6, (6,)],
    ),
    (
        "local_arrays_fixed_and_variable_length",
        """#include <math.h>
           void f(int n, double x[n], double y[n]) {
             double t[16];
             double u[n];
             for (int i = 0; i < 16; i++) t[i] = sin(x[i % n]);
             for (int i = 0; i < n; i++) u[i] = t[i % 16] * x[i];
             for (int i = 0; i < n; i++) y[i] = u[i] * u[(i + 1) % n] + t[3];
           }""",
        [9, (9,), (9,)],
    ),
    (
        "recurrence_in_a_local_array_strided_and_under_conditions",
        """#include <math.h>
           void f(int n, double x[n], double y[n]) {
             double t[n];
             for (int i = 0; i < n; i++) t[i] = exp(0.5 * x[i]);
             for (int k = 0; k < 3; k++)
               for (int i = 1 + k; i < n; i += 2) t[i] = t[i] * t[i - 1] * 0.5;
             for (int i = 0; i < n; i++) {
               if (t[i] > 0.8) y[i] = t[i] * x[i];
               else y[i] = cos(t[i]) + y[i];
               if (i >= 2) y[i] += t[i - 2];
             }
           }""",
        [8, (8,), (8,)],
    ),
    (
        "costly_value_overwritten_later",
        """#include <math.h>
           void f(int n, double x[n], double y[n]) {
             for (int i = 0; i < n; i++) y[i] = exp(x[i]) + 1.0;
             for (int i = 0; i < n; i++) y[i] = exp(0.5 * x[i]);
             for (int i = 1; i < n; i++) y[i] = y[i] * y[i - 1];
           }""",
        [6, (6,), (6,)],
    ),
    (
        "triangular_solve_forward",
        """void f(int n, double L[n][n], double b[n], double x[n]) {
             for (int i = 0; i < n; i++) {
               double s = b[i];
               for (int j = 0; j < i; j++) s -= L[i][j] * x[j];
               x[i] = s / L[i][i];
             }
           }""",
        [6, (6, 6), (6,), (6,)],
    ),
]


@pytest.mark.parametrize(("name", "source", "spec"), C_KERNELS, ids=[k[0] for k in C_KERNELS])
def test_c_gradients_agree_with_central_differences(
    name: str, source: str, spec: list[Any]
) -> None:
    """`compile_c(grad=True)`: f_grad with Enzyme's arguments (each float array and scalar
    followed by its shadow, the seed of a float result last) against central differences of
    L = Σ seed·(final arrays) + seed·result along 3 random directions."""
    rng = np.random.default_rng(5)
    args: list[Any] = [rng.uniform(0.5, 1.5, s) if isinstance(s, tuple) else s for s in spec]
    if name == "triangular_solve_forward":
        args[1] += 4 * np.eye(6)  # well conditioned
    f = compile_c(source, "f", grad=True)
    mismatch = central_difference_mismatch(f, args, rng)
    assert mismatch is None, (name, mismatch)


_JACOBI_2D = C_KERNELS[[k[0] for k in C_KERNELS].index("jacobi_2d_time_loop")][1]


def test_a_stencils_adjoint_in_a_time_loop_is_one_gather_per_shadow_at_every_size() -> None:
    """The adjoint of a sweep `B[i][j] = f(A[i][j±1], A[i±1][j], ...)` inside a time loop adds
    to Ā at shifted elements; it becomes one gather per shadow, storing only at the element
    its loops run over (`Ā[y] += ... B̄[y - o] ...`), rather than a nest that scatters. It is
    kept out of isl's scheduling (its loops still parallel), and it is right on boxes smaller
    than the offsets spread (n = 2, 3: every term tests its domain) as on larger ones."""
    f = compile_c(_JACOBI_2D, "f", grad=True, options={"opt_level": 3})
    grad = f.stages["grad"]
    body = grad[grad.index("@f_grad") :]
    stores = re.findall(r"affine\.store %\w+, %(\w+)\[([^\]]*)\]", body)
    shifted = [(m, s) for m, s in stores if re.search(r"%\w+ [+-] \d", s)]
    # the forward sweep stores B[i][j], A[i][j]; the gathers store Ā[y], B̄[y]; none shifted
    assert not shifted, shifted
    assert "polyflow.keep_order" in grad
    # isl schedules the forward sweep (one scop), not the adjoint's sweeps
    assert f.report.schedules["f_grad"].count("# scop") == 1, f.report.schedules
    for n, steps in ((2, 2), (3, 1), (4, 3), (9, 2)):
        rng = np.random.default_rng(n)
        args = [steps, n, *(rng.uniform(0.5, 1.5, (n, n)) for _ in range(2))]
        mismatch = central_difference_mismatch(f, args, rng)
        assert mismatch is None, (n, mismatch)


# a nonlinear time loop: each step's values are overwritten by the next, so its adjoint tapes
_EVOLVE = """
void evolve(int T, int n, double alpha, double *A, double *B, const double *k) {
  for (int t = 2; t < T; t++) {
    for (int i = 1; i < n - 1; i++)
      B[i] = A[i] + alpha * k[i] * tanh(A[i - 1] - 2.0 * A[i] + A[i + 1]);
    for (int i = 1; i < n - 1; i++)
      A[i] = B[i] * (1.0 + 0.01 * sin(B[i]));
  }
  A[n / 2] = 3.0 * A[0];  /* after the loop: part of its state written again */
}
"""


@pytest.mark.parametrize("steps", [None, 0, 1, 3])
def test_checkpointed_time_loops_agree_with_central_differences(steps: int | None) -> None:
    """`checkpoint_steps` K: the adjoint runs each segment of K time steps again from a
    snapshot; gradients and the arrays the gradient leaves (f's outputs) are the same for every
    K (0: a tape of every step; None: the sizes decide, and here they are not known), with
    more steps than K, fewer, none, and a remainder segment."""
    f = compile_c(_EVOLVE, "evolve", grad=True, options={"checkpoint_steps": steps})
    for trip in (0, 2, 3, 4, 9, 20):
        rng = np.random.default_rng(trip)
        n = 13
        args = [trip, n, 0.1, *(rng.uniform(0.5, 1.5, n) for _ in range(3))]
        mismatch = central_difference_mismatch(f, args, rng)
        assert mismatch is None, (steps, trip, mismatch)


def test_a_time_loop_with_known_sizes_is_checkpointed_where_it_saves_memory() -> None:
    """With constant sizes the default checkpoints where the tape of every step would take
    8 MiB or more and the snapshots and one segment's tapes at most half of that, and the
    report says so; the gradient allocates less and agrees with central differences. At 64
    points it does not (tapes of 100 kB)."""
    source = _EVOLVE.replace("int T, int n, ", "").replace("double *", "double ")
    source = source.replace("double A", "double A[512]").replace("double B", "double B[512]")
    source = source.replace("const double k", "const double k[512]")
    source = source.replace("t < T", "t < 602").replace("n - 1", "511").replace("n / 2", "256")
    rng = np.random.default_rng(3)
    args = [0.1, *(rng.uniform(0.5, 1.5, 512) for _ in range(3))]
    checkpointed = compile_c(source, "evolve", grad=True)
    notes = [r.message for r in checkpointed.report.remarks if r.kind == "checkpoint"]
    assert len(notes) == 1 and "segments of 17 iterations" in notes[0], notes
    small = source.replace("512", "64").replace("511", "63").replace("256", "32")
    small_notes = compile_c(small, "evolve", grad=True).report.remarks
    assert not [r for r in small_notes if r.kind == "checkpoint"]
    assert central_difference_mismatch(checkpointed, args, rng) is None
    taped = compile_c(source, "evolve", grad=True, options={"checkpoint_steps": 0})
    grad_ir = {}
    for name, build in (("checkpointed", checkpointed), ("taped", taped)):
        text = build.mlir("grad")
        text = text[text.index("@evolve_grad(") :]
        grad_ir[name] = sum(
            int(np.prod([int(d) for d in shape.split("x")[:-1]]))
            for shape in re.findall(r"memref.alloc\(\) : memref<([\dx]+f64)>", text)
        )
    assert 0 < grad_ir["checkpointed"] * 4 < grad_ir["taped"], grad_ir


_C_GPU_KERNELS = [
    "nonlinear_update_in_place_taped",
    "recurrence_in_a_local_array_strided_and_under_conditions",
    "triangular_solve_forward",
]


@pytest.mark.parametrize(
    ("name", "source", "spec"),
    [k for k in C_KERNELS if k[0] in _C_GPU_KERNELS],
    ids=_C_GPU_KERNELS,
)
def test_c_gradients_built_for_the_gpu_agree_on_the_cpu(
    name: str, source: str, spec: list[Any]
) -> None:
    """`compile_c(grad=True, target="cuda")`: `f.grad` is a CudaFunction of the same GPU
    program (tapes, local arrays and all); its kernels, run by the CPU emulation, leave the
    shadows exactly as the CPU gradient does."""
    rng = np.random.default_rng(5)
    args: list[Any] = [rng.uniform(0.5, 1.5, s) if isinstance(s, tuple) else s for s in spec]
    if name == "triangular_solve_forward":
        args[1] += 4 * np.eye(6)
    results = []
    for build in (
        compile_c(source, "f", grad=True),
        compile_c(source, "f", grad=True, target="cuda"),
    ):
        assert build.grad is not None
        call: list[Any] = []
        shadows = []
        for value in args:
            call.append(value.copy() if isinstance(value, np.ndarray) else value)
            if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                shadows.append(np.ones_like(value))
                call.append(shadows[-1])
            elif isinstance(value, float):
                shadows.append(np.zeros(1))
                call.append(shadows[-1])
        run = build.grad if not hasattr(build.grad, "emulate") else build.grad.emulate
        run(*call)
        results.append(shadows)
    for cpu, gpu in zip(*results, strict=True):
        assert np.array_equal(cpu, gpu), (name, np.max(np.abs(cpu - gpu)))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_random_stencils_in_time_loops_get_right_gradients(seed: int) -> None:
    """A sample of `tests/fuzz/stencil_ad_fuzz.py` (`make fuzz` runs more): random stencil
    sweeps in a time loop, their adjoints merged into gathers, against central differences at
    box sizes below and above the offsets' spread."""
    from fuzz.stencil_ad_fuzz import check_stencil

    result = check_stencil(seed)
    assert result == "ok", result


def test_random_affine_programs_get_right_gradients_or_a_refusal() -> None:
    """A sample of tests/fuzz/ad_fuzz.py (`make fuzz` runs more): each kernel of a random
    program gets a gradient that agrees with central differences, or a CompileError."""
    from fuzz.ad_fuzz import check_kernel, kernel_calls
    from fuzz.affine_gen import generate_program

    outcomes = []
    for seed in [*range(40), 2034]:  # 2034: a condition read from a tape
        source = generate_program(seed)
        arrays, calls = kernel_calls(source)
        for name, call in calls:
            outcome = check_kernel(source, name, call, arrays, np.random.default_rng(seed))
            if outcome.startswith("FAILED"):  # a kink crossed within h: other data once
                rng = np.random.default_rng(seed + 10**6)
                outcome = check_kernel(source, name, call, arrays, rng)
            outcomes.append((seed, name, outcome))
    assert not [o for o in outcomes if o[2].startswith("FAILED")], outcomes
    assert sum(o[2] == "ok" for o in outcomes) >= 25, outcomes


_CORPUS = Path(__file__).resolve().parent / "programs"


def _corpus_functions() -> list[tuple[str, str]]:
    """(file, function) for every `kernel_*` function of the C corpus (tests/programs)."""
    found = []
    for path in sorted(_CORPUS.glob("*.c")):
        for name in re.findall(r"^\w[\w\s]*?\b(kernel_\w+)\(", path.read_text(), re.M):
            found.append((path.name, name))
    return found


@pytest.mark.parametrize(("file", "name"), _corpus_functions())
def test_corpus_kernels_get_right_gradients_or_a_refusal(file: str, name: str) -> None:
    """Each `kernel_*` of the C corpus, on random data (ints 5, floats in [0.5, 1.5]): its
    gradient agrees with central differences of L = Σ seed·(final float arrays) (+ a float
    result's), or compile_c refuses it with a CompileError; never another exception. Kernels
    whose outputs are not finite on such data (cholesky's sqrt) are not checked."""
    from polyflow.drivers.jit import _eval_dim
    from polyflow.frontend.c_types import Array

    source = (_CORPUS / file).read_text()
    try:
        f = compile_c(source, name, grad=True)
    except CompileError:
        return  # refused, with its reason: never a wrong gradient
    rng = np.random.default_rng(11)
    scalars = {p: 5 for p, t in f.signature.params if not isinstance(t, Array) and t.is_int}
    args: list[Any] = []
    for pname, ptype in f.signature.params:
        if isinstance(ptype, Array):
            dims = [_eval_dim(d, scalars) for d in ptype.dims]
            shape = tuple(512 if d is None else d for d in dims)
            if ptype.elem.is_float:
                args.append(rng.uniform(0.5, 1.5, shape))
            else:
                args.append(rng.integers(0, 5, shape).astype(ptype.elem.numpy_dtype))
        elif ptype.is_float:
            args.append(float(rng.uniform(0.5, 1.5)))
        else:
            args.append(scalars[pname])
    mismatch = central_difference_mismatch(f, args, rng, skip_if_not_finite=True)
    assert mismatch is None, (file, name, mismatch)
