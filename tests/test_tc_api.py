"""polyflow.tc end to end: every language feature run on NumPy arrays and compared with NumPy,
and the API's argument checks, outputs, caching and introspection."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import polyflow.tc as tc
from polyflow.arrays import ArrayCopyWarning
from polyflow.errors import CompileError
from polyflow.options import Options

RNG = np.random.default_rng(11)
O2 = Options(opt_level=2)  # the language tests need no scheduling: keep them quick


def rand(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def run(source: str, *args: Any, options: Options = O2, **kwargs: Any) -> Any:
    return tc.define(source, options=options)(*args, **kwargs)


# ----- the language


@pytest.mark.parametrize(
    ("op", "reference"),
    [
        ("+=!", lambda a: a.sum(axis=1)),
        ("*=!", lambda a: a.prod(axis=1)),
        ("min=!", lambda a: a.min(axis=1)),
        ("max=!", lambda a: a.max(axis=1)),
    ],
)
def test_initialized_reductions(op: str, reference: Any) -> None:
    a = rand(5, 7)
    got = run(f"def r(float(N,M) A) -> (B) {{ B(i) {op} A(i, j) }}", a)
    np.testing.assert_allclose(got, reference(a), rtol=1e-5)


@pytest.mark.parametrize(
    ("op", "reference"),
    [
        ("+=", lambda s, a: s + a.sum(axis=1)),
        ("*=", lambda s, a: s * a.prod(axis=1)),
        ("min=", lambda s, a: np.minimum(s, a.min(axis=1))),
        ("max=", lambda s, a: np.maximum(s, a.max(axis=1))),
    ],
)
def test_reductions_without_init_continue_from_the_current_value(op: str, reference: Any) -> None:
    a, s = rand(4, 6), rand(4)
    source = f"def r(float(N,M) A, float(N) S) -> (B) {{\n B(i) = S(i)\n B(i) {op} A(i, j)\n}}"
    np.testing.assert_allclose(run(source, a, s), reference(s, a), rtol=1e-5)


def test_where_clauses_dimension_sizes_and_scalars() -> None:
    a = rand(6, 8)
    source = """def f(float(N,M) A, float alpha) -> (B) {
      B(i, j) = alpha * A(i, j) + A.1 + N   # sizes are values
      B(i, j) += A(i, k) where k in 0:2     # a partial sum over the first two columns
    }"""
    got = run(source, a, 0.5)
    want = 0.5 * a + 8 + 6 + a[:, :2].sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_comparisons_logic_and_conditionals() -> None:
    a = rand(50)
    source = "def f(float(N) A) -> (B) { B(i) = A(i) > 0 && !(A(i) > 1) || i == 3 ? A(i) : -1.0 }"
    want = np.where(((a > 0) & ~(a > 1)) | (np.arange(50) == 3), a, -1.0)
    np.testing.assert_allclose(run(source, a), want)


@pytest.mark.parametrize(
    ("call", "reference"),
    [
        ("exp(A(i))", np.exp),
        ("log(fabs(A(i)) + 1)", lambda a: np.log(np.abs(a) + 1)),
        ("sqrt(fabs(A(i)))", lambda a: np.sqrt(np.abs(a))),
        ("tanh(A(i))", np.tanh),
        ("sigmoid(A(i))", lambda a: 1 / (1 + np.exp(-a))),
        ("rsqrt(fabs(A(i)) + 1)", lambda a: 1 / np.sqrt(np.abs(a) + 1)),
        ("fmax(A(i), 0)", lambda a: np.maximum(a, 0)),
        ("fmin(A(i), 0.5)", lambda a: np.minimum(a, 0.5)),
        ("pow(fabs(A(i)), 1.5)", lambda a: np.abs(a) ** 1.5),
        ("fma(A(i), 2, 1)", lambda a: a * 2 + 1),
        ("erf(A(i))", None),
        ("max(A(i), -A(i))", np.abs),
    ],
)
def test_builtins(call: str, reference: Any) -> None:
    a = rand(33)
    got = run(f"def f(float(N) A) -> (B) {{ B(i) = {call} }}", a)
    if reference is None:  # erf: compare with its series at small x, and symmetry
        assert np.allclose(got, -run(f"def f(float(N) A) -> (B) {{ B(i) = {call} }}", -a))
        small = np.abs(a) < 0.1
        np.testing.assert_allclose(got[small], 2 / np.sqrt(np.pi) * a[small], atol=1e-3)
        return
    np.testing.assert_allclose(got, reference(a), rtol=2e-5, atol=1e-6)


def test_gathers_read_through_an_index_tensor() -> None:
    x, idx = rand(10), RNG.integers(0, 10, size=(3, 4)).astype(np.int32)
    got = run("def g(float(N) X, int32(A,B) I) -> (Z) { Z(i, j) = X(I(i, j)) }", x, idx)
    np.testing.assert_array_equal(got, x[idx])


def test_gather_indices_out_of_range_are_refused() -> None:
    g = tc.define("def g(float(N) X, int32(A) I) -> (Z) { Z(i) = X(I(i)) }", options=O2)
    with pytest.raises(ValueError, match="'I' indexes dimension 0 of 'X' \\(size 4\\) but holds"):
        g(rand(4), np.array([0, 4], dtype=np.int32))


@pytest.mark.parametrize(
    ("element", "dtype"),
    [
        ("double", np.float64), ("float64", np.float64), ("half", np.float16), ("int8", np.int8),
        ("int16", np.int16), ("int32", np.int32), ("int64", np.int64), ("uint8", np.uint8),
        ("uint16", np.uint16), ("uint32", np.uint32), ("uint64", np.uint64),
    ],
)  # fmt: skip
def test_element_types(element: str, dtype: Any) -> None:
    a = RNG.integers(0, 6, size=(4, 5)).astype(dtype)  # no overflow, even in 8 bits
    got = run(f"def f({element}(N,M) A) -> (B) {{ B(i) +=! A(i, j) * 2 }}", a)
    assert got.dtype == dtype
    np.testing.assert_allclose(got.astype(np.float64), (a.astype(np.float64) * 2).sum(axis=1))


def test_integer_division_and_modulo_follow_c() -> None:
    a = np.array([7, -7, 9, -9], dtype=np.int32)
    got = run("def f(int32(N) A) -> (B, C) { B(i) = A(i) / 2\n C(i) = A(i) % 4 }", a)
    np.testing.assert_array_equal(got[0], [3, -3, 4, -4])
    np.testing.assert_array_equal(got[1], [3, -3, 1, -1])


def test_booleans() -> None:
    a = rand(9)
    got = run("def f(float(N) A) -> (B) { B(i) = A(i) > 0 }", a)
    np.testing.assert_array_equal(got.astype(bool), a > 0)


def test_one_definition_calls_another() -> None:
    source = """
    def scale(float(N) x) -> (y) { y(i) = 2 * x(i) }
    def twice(float(N) x) -> (t, z) {
      t = scale(x)   # t = 2x
      z = scale(t)   # z = 4x
    }
    """
    x = rand(12)
    t, z = tc.define(source, "twice", options=O2)(x)
    np.testing.assert_allclose(t, 2 * x)
    np.testing.assert_allclose(z, 4 * x)


def test_in_place_updates_read_the_whole_right_hand_side_first() -> None:
    # B(i) = B(N-1-i) reverses B: without reading all of B first, the second half would read
    # elements already overwritten.
    a = rand(9)
    got = run("def f(float(N) A) -> (B) {\n B(i) = A(i)\n B(i) = B(N - 1 - i) + 0 * A(i)\n}", a)
    np.testing.assert_allclose(got, a[::-1])


def test_zero_dimensional_outputs() -> None:
    a = rand(6, 3)
    got = run("def total(float(N,M) A) -> (s) { s() +=! A(i, j) }", a)
    assert got.shape == ()
    np.testing.assert_allclose(got, a.sum(), rtol=1e-5)


def test_unwritten_output_elements_are_zero() -> None:
    a = rand(8)
    got = run("def f(float(N) A) -> (B) { B(i) = A(i) where i in 2:N }", a)
    np.testing.assert_array_equal(got[:2], 0)
    np.testing.assert_allclose(got[2:], a[2:])


def test_scheduled_code_agrees_with_numpy_at_o3() -> None:
    a, b = rand(70, 50), rand(50, 60)
    got = run("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }", a, b,
              options=Options(opt_level=3))  # fmt: skip
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-5)


# ----- the API


MV = "def mv(float(M,K) A, float(K) x) -> (C) { C(i) +=! A(i,k) * x(k) }"


def test_arguments_are_checked_against_the_signature() -> None:
    mv = tc.define(MV, options=O2)
    with pytest.raises(TypeError, match=r"mv\(\) takes 2 argument\(s\), 1 given"):
        mv(rand(3, 4))
    with pytest.raises(
        TypeError, match="argument 'A' of mv\\(\\) must have dtype float32 \\(TC f32\\), got a NumPy array of float64"
    ):
        mv(rand(3, 4, dtype=np.float64), rand(4))
    with pytest.raises(TypeError, match="argument 'x' of mv\\(\\) must have 1 dimension"):
        mv(rand(3, 4), rand(4, 1))
    with pytest.raises(
        ValueError, match="size 'K' of mv\\(\\) is 4 in 'A' \\(dimension 1\\) but 5 in 'x'"
    ):
        mv(rand(3, 4), rand(5))
    with pytest.raises(TypeError, match="must be an array \\(NumPy, PyTorch, JAX, CuPy or any DLPack"):
        mv([[1.0]], rand(1))


def test_constant_dimensions_must_match() -> None:
    f = tc.define("def f(float(3,N) A) -> (B) { B(j) +=! A(i, j) }", options=O2)
    with pytest.raises(ValueError, match="must have size 3 in dimension 0"):
        f(rand(4, 2))
    np.testing.assert_allclose(f(a := rand(3, 2)), a.sum(axis=0), rtol=1e-6)


def test_outputs_can_be_given() -> None:
    mv = tc.define(MV, options=O2)
    a, x = rand(5, 4), rand(4)
    out = np.full(5, 99.0, dtype=np.float32)
    assert mv(a, x, out=out) is out
    np.testing.assert_allclose(out, a @ x, rtol=1e-5)
    with pytest.raises(ValueError, match="output 'C' of mv\\(\\) must have shape \\(5,\\), got"):
        mv(a, x, out=np.zeros(6, dtype=np.float32))
    with pytest.raises(ValueError, match="output 'C' of mv\\(\\) overlaps 'x'"):
        mv(np.zeros((4, 4), dtype=np.float32), x, out=x)


def test_inputs_from_dlpack_and_non_contiguous_views() -> None:
    mv = tc.define(MV, options=O2)

    class Producer:  # any object with the DLPack protocol
        def __init__(self, array: np.ndarray) -> None:
            self.array = array

        def __dlpack__(self, **kwargs: Any) -> Any:
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self) -> Any:
            return self.array.__dlpack_device__()

    a, x = rand(6, 8), rand(8)
    np.testing.assert_allclose(mv(Producer(a), x), a @ x, rtol=1e-5)
    with pytest.warns(ArrayCopyWarning, match="argument 'A' of mv\\(\\) is not C-contiguous"):
        np.testing.assert_allclose(mv(a.T.copy().T, x), a @ x, rtol=1e-5)


def test_compiled_kernels_are_cached_per_shape() -> None:
    mv = tc.define(MV, options=O2)
    mv(rand(3, 4), rand(4))
    first = mv._last
    mv(rand(3, 4), rand(4))
    assert mv._last is first
    mv(rand(5, 4), rand(4))
    assert mv._last is not first
    assert len(mv._cache) == 2


def test_ir_after_each_stage_and_explain() -> None:
    mv = tc.define(MV, options=Options(opt_level=3))
    with pytest.raises(ValueError, match="has not run yet"):
        mv.mlir()
    assert "affine.for" in mv.mlir("mlir", rand(64, 32), rand(32))
    assert "affine" in mv.mlir("affine-opt")
    assert "llvm.func" in mv.mlir("llvm-dialect")
    assert mv.explain() == "def mv:\n  output C: f32(M)\n  line 1: C: i in 0:M, k in 0:K"


def test_several_definitions_need_a_name() -> None:
    source = "def a(float(N) x) -> (y) { y(i) = x(i) }\ndef b(float(N) x) -> (y) { y(i) = x(i) }"
    with pytest.raises(ValueError, match="defines a, b: say which one"):
        tc.define(source)
    with pytest.raises(ValueError, match="no definition named 'c'"):
        tc.define(source, "c")


def test_source_errors_are_compile_errors_with_position() -> None:
    with pytest.raises(CompileError) as caught:
        tc.define("def f(float(N) A) -> (B) {\n  B(i) = A(i) + Q(i)\n}", file="layer.tc")
    error = caught.value
    assert (error.file, error.line, error.column) == ("layer.tc", 2, 17)
    assert error.format() == (
        "layer.tc:2:17: error: unknown tensor or function 'Q'\n  B(i) = A(i) + Q(i)\n"
        + " " * 16
        + "^"
    )


def test_sizes_that_empty_a_range_are_compile_errors() -> None:
    f = tc.define("def s(float(N) B, float(K) W) -> (A) { A(i) +=! B(i + k) * W(k) }", options=O2)
    with pytest.raises(CompileError, match="'A' would have shape \\(0,\\) for these sizes"):
        f(rand(2), rand(3))


# ----- the command line


LAYERS = """# two layers
def conv2d(float(N,C,H,W) in, float(K,C,KH,KW) weight) -> (out) {
  out(n, k, h, w) +=! in(n, c, h + kh, w + kw) * weight(k, c, kh, kw)
}
def maxpool2x2(float(N,C,H,W) in) -> (out) {
  out(n, c, i, j) max=! in(n, c, 2 * i + kh, 2 * j + kw) where kh in 0:2, kw in 0:2
}
"""


def test_cli_explains_every_definition(tmp_path: Any, capsys: Any) -> None:
    from polyflow.cli import main

    path = tmp_path / "layers.tc"
    path.write_text(LAYERS)
    assert main(["tc", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "def conv2d:",
        "  output out: f32(N, K, H - KH + 1, W - KW + 1)",
        "  line 3: out: n in 0:N, k in 0:K, h in 0:H - KH + 1, w in 0:W - KW + 1, c in 0:C, "
        "kh in 0:KH, kw in 0:KW",
        "def maxpool2x2:",
        "  output out: f32(N, C, floor(H / 2), floor(W / 2))",
        "  line 6: out: n in 0:N, c in 0:C, i in 0:floor(H / 2), j in 0:floor(W / 2), "
        "kh in 0:2, kw in 0:2",
    ]


def test_cli_emits_ir_for_given_sizes(tmp_path: Any, capsys: Any) -> None:
    from polyflow.cli import main

    path = tmp_path / "layers.tc"
    path.write_text(LAYERS)
    args = ["tc", str(path), "--name", "maxpool2x2", "--emit", "mlir"]
    assert main([*args, "--sizes", "N=1,C=2,H=8,W=6"]) == 0
    assert "memref<1x2x4x3xf32>" in capsys.readouterr().out
    assert main(args) == 1
    assert "--emit needs --sizes for N, C, H, W" in capsys.readouterr().err


def test_cli_prints_source_errors_with_a_caret(tmp_path: Any, capsys: Any) -> None:
    from polyflow.cli import main

    path = tmp_path / "bad.tc"
    path.write_text("def f(float(N) A) -> (B) {\n  B(i) = A(i, i)\n}\n")
    assert main(["tc", str(path)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{path}:2:10: error: 'A' has 1 dimension(s), accessed with 2 subscript(s)",
        "  B(i) = A(i, i)",
        "         ^",
    ]


@pytest.mark.parametrize("opt_level", [2, 3])
def test_zero_size_arrays_behave_as_in_numpy(opt_level: int) -> None:
    from polyflow.tc_library import LIBRARY

    options = {"opt_level": opt_level}
    matmul = tc.define(LIBRARY["matmul"], options=options)
    for m, k, n in ((0, 5, 3), (4, 0, 3), (4, 5, 0), (0, 0, 0)):
        a = np.arange(m * k, dtype=np.float32).reshape(m, k)
        b = np.ones((k, n), dtype=np.float32)
        got = matmul(a, b)
        assert got.shape == (m, n)
        np.testing.assert_array_equal(got, a @ b)
    fcrelu = tc.define(LIBRARY["fcrelu"], options=options)
    bias = np.array([1.0, -2.0, 3.0], dtype=np.float32)
    got = fcrelu(np.ones((2, 0), np.float32), np.ones((3, 0), np.float32), bias)
    np.testing.assert_array_equal(got, np.maximum(np.zeros((2, 0)) @ np.zeros((0, 3)) + bias, 0))
    # a negative extent is still an error: the shapes cannot be
    conv = tc.define(LIBRARY["conv2d"], options=options)
    with pytest.raises(CompileError, match="would have shape"):
        conv(np.ones((1, 1, 2, 2), np.float32), np.ones((1, 1, 3, 3), np.float32))


def test_tc_is_an_attribute_of_the_package_without_loading_mlir_first() -> None:
    # `import polyflow` then `polyflow.tc.define(...)`: no AttributeError, and the plain
    # import still loads no MLIR (the command line starts fast)
    import subprocess
    import sys

    script = (
        "import sys, numpy as np, polyflow\n"
        "assert not any(m == 'mlir' or m.startswith('mlir.') for m in sys.modules), 'mlir loaded'\n"
        "fn = polyflow.tc.define('def scale(float(N) x) -> (y) { y(i) = 2 * x(i) }', 'scale')\n"
        "print(fn(np.arange(3, dtype=np.float32)).tolist())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0.0, 2.0, 4.0]"


def test_the_gradients_ir_leaves_the_last_calls_report_and_stages() -> None:
    mv = tc.define(MV, options=O2)
    a, x = rand(5, 4), rand(4)
    assert mv.stages == {}
    mv(a, x)
    stages, report = mv.stages, mv.report
    assert "affine" in stages and "func.func" in mv.mlir("grad", a, x)
    assert mv.report is report and mv.stages == stages
