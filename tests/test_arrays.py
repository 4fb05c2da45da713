"""Arrays of every library through polyflow's kernels (polyflow/arrays.py): NumPy, PyTorch and
JAX arrays in without copies, outputs made in the caller's library, `out=` written in place,
strided views copied with a warning, and every wrong argument refused before a kernel runs
with an error that names it. TC results are checked against NumPy, C functions against the
same functions built by gcc -O2."""

from __future__ import annotations

import ctypes
import subprocess
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from polyflow import Options, compile_c, tc
from polyflow.arrays import (
    ArrayCopyWarning,
    aligned_zeros,
    as_library,
    given_output,
    host_view,
    new_output,
    result_library,
)

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

O2 = Options(opt_level=2)
MATMUL = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(i,j) +=! A(i,k) * B(k,j) }"
RTOL = 1e-5


@pytest.fixture(scope="module")
def mm() -> Any:
    return tc.define(MATMUL, options=O2)


@pytest.fixture(scope="module")
def operands() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.random((33, 17), np.float32), rng.random((17, 20), np.float32)


def address(value: Any) -> int:
    if isinstance(value, np.ndarray):
        return int(value.ctypes.data)
    if hasattr(value, "data_ptr"):
        return int(value.data_ptr())
    return int(value.unsafe_buffer_pointer())


# ----- the boundary itself: views over the caller's memory, outputs in its library


@pytest.mark.parametrize("make", [np.ones, torch.ones, jnp.ones], ids=["numpy", "torch", "jax"])
def test_inputs_are_read_in_place(make: Any) -> None:
    value = make((4, 8), dtype=np.float32 if make is not torch.ones else torch.float32)
    view = host_view(value, function="f", name="A")
    assert address(view) == address(value) and view.shape == (4, 8)


@pytest.mark.parametrize("library", ["numpy", "torch", "jax"])
def test_outputs_are_made_in_the_library_without_a_copy(library: str) -> None:
    output = new_output(library, (5, 7), np.float32)
    output.view[...] = 3.0  # what a kernel does
    result = output.finish()
    assert type(result).__module__.split(".")[0] in {"numpy": ("numpy",), "torch": ("torch",),
                                                      "jax": ("jax", "jaxlib")}[library]
    assert address(result) == address(output.view)
    assert np.array_equal(np.asarray(result), np.full((5, 7), 3.0, np.float32))


def test_aligned_buffers_and_the_library_of_a_call() -> None:
    for shape in [(1,), (3, 5), (0,), (7, 9, 2)]:
        array = aligned_zeros(shape, np.float64)
        assert array.shape == shape and array.flags.c_contiguous and not array.any()
        assert address(array) % 64 == 0 or array.size == 0
    assert result_library([2.0, torch.ones(2), np.ones(2)]) == "torch"
    assert result_library([np.ones(2), jnp.ones(2)]) == "numpy"
    assert result_library([1, 2.5]) == "numpy"
    shared = np.arange(6.0)
    assert address(as_library(shared, "torch")) == address(shared)


# ----- TC kernels


@pytest.mark.parametrize(
    "to", [np.asarray, torch.from_numpy, jnp.asarray], ids=["numpy", "torch", "jax"]
)
def test_tc_outputs_come_back_in_the_callers_library(mm: Any, operands: Any, to: Any) -> None:
    a, b = operands
    got = mm(to(a), to(b))
    assert type(got) is type(to(a))
    np.testing.assert_allclose(np.asarray(got), a @ b, rtol=RTOL)


def test_tc_mixed_libraries_follow_the_first_array(mm: Any, operands: Any) -> None:
    a, b = operands
    assert isinstance(mm(torch.from_numpy(a), b), torch.Tensor)
    assert isinstance(mm(a, torch.from_numpy(b)), np.ndarray)


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_tc_out_is_written_in_place_and_returned(mm: Any, operands: Any, library: str) -> None:
    a, b = operands
    out = np.full((33, 20), 7.0, np.float32)
    if library == "torch":
        out = torch.from_numpy(out)
    before = address(out)
    got = mm(torch.from_numpy(a) if library == "torch" else a, b, out=out)
    assert got is out and address(out) == before
    np.testing.assert_allclose(np.asarray(out), a @ b, rtol=RTOL)


def test_tc_out_takes_no_jax_array(mm: Any, operands: Any) -> None:
    a, b = operands
    with pytest.raises(TypeError, match=r"out= cannot take a JAX array for output 'C' of mm\(\)"):
        mm(a, b, out=jnp.zeros((33, 20), jnp.float32))


def test_tc_strided_inputs_are_copied_with_a_warning(mm: Any, operands: Any) -> None:
    a, b = operands
    transposed = torch.from_numpy(np.ascontiguousarray(a.T)).t()  # a's values, strided
    with pytest.warns(ArrayCopyWarning, match=r"argument 'A' of mm\(\) is not C-contiguous"):
        got = mm(transposed, b)
    np.testing.assert_allclose(got.numpy(), a @ b, rtol=RTOL)


def test_tc_strided_out_gets_the_result_copied_in(mm: Any, operands: Any) -> None:
    a, b = operands
    wide = np.full((33, 40), -1.0, np.float32)
    with pytest.warns(ArrayCopyWarning, match="output 'C' of mm"):
        got = mm(a, b, out=wide[:, ::2])
    assert got.base is wide
    np.testing.assert_allclose(wide[:, ::2], a @ b, rtol=RTOL)
    assert (wide[:, 1::2] == -1.0).all()  # the columns between untouched


def test_tc_contiguous_arguments_give_no_warning(mm: Any, operands: Any) -> None:
    a, b = operands
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mm(torch.from_numpy(a), jnp.asarray(b))


def test_tc_gradients_come_back_in_the_callers_library(mm: Any, operands: Any) -> None:
    a, b = operands
    seed = np.ones((33, 20), np.float32)
    grad_a = mm.grad("A")(torch.from_numpy(a), torch.from_numpy(b), seed=torch.from_numpy(seed))
    assert isinstance(grad_a, torch.Tensor)
    np.testing.assert_allclose(grad_a.numpy(), seed @ b.T, rtol=1e-4)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda mm, a, b: mm(a.astype(np.float64), b), TypeError,
         r"argument 'A' of mm\(\) must have dtype float32 \(TC f32\), got a NumPy array of "
         r"float64 with shape \(33, 17\)"),
        (lambda mm, a, b: mm(a[None], b), TypeError,
         r"argument 'A' of mm\(\) must have 2 dimension\(s\), got .* shape \(1, 33, 17\)"),
        (lambda mm, a, b: mm(a, b[:16]), ValueError,
         r"size 'K' of mm\(\) is 17 in 'A' \(dimension 1\) but 16 in 'B' \(dimension 0\)"),
        (lambda mm, a, b: mm(torch.zeros(33, 17, dtype=torch.bfloat16), b), TypeError,
         r"argument 'A' of mm\(\) has dtype bfloat16"),
        (lambda mm, a, b: mm([[1.0]], b), TypeError,
         r"argument 'A' of mm\(\) must be an array .*, got list"),
        (lambda mm, a, b: mm(a, b, out=np.zeros((33, 21), np.float32)), ValueError,
         r"output 'C' of mm\(\) must have shape \(33, 20\), got .* shape \(33, 21\)"),
        (lambda mm, a, b: mm(a, b, out=torch.zeros(33, 20, dtype=torch.float64)), TypeError,
         r"output 'C' of mm\(\) must have dtype float32, got a torch tensor of float64"),
        (lambda mm, a, b: mm(a, b, out=np.broadcast_to(np.float32(0), (33, 20))), ValueError,
         r"output 'C' of mm\(\) is read-only"),
        (lambda mm, a, b: mm(a, b, out=(np.zeros((33, 20), np.float32),) * 2), TypeError,
         r"mm\(\) has 1 output\(s\), out= gives 2"),
        (lambda mm, a, b: mm(a), TypeError, r"mm\(\) takes 2 argument\(s\), 1 given"),
    ],
    ids=["dtype", "rank", "size", "no-numpy-dtype", "not-an-array", "out-shape", "out-dtype",
         "out-read-only", "out-count", "count"],
)
def test_tc_wrong_arguments_are_named(
    mm: Any, operands: Any, call: Any, error: type[Exception], message: str
) -> None:
    a, b = operands
    with pytest.raises(error, match=message) as caught:
        call(mm, a, b)
    assert "\n" not in str(caught.value)  # one line


def test_tc_refuses_before_compiling() -> None:
    fresh = tc.define(MATMUL, options=O2)
    with pytest.raises(ValueError, match="size 'K'"):
        fresh(np.ones((4, 3), np.float32), np.ones((2, 5), np.float32))
    assert not fresh._cache  # nothing was compiled for the contradictory shapes


# ----- C functions (checked against the same functions built by gcc -O2)

C_SOURCE = """
void axpy(int n, double a, const double *x, double *y) {
  for (int i = 0; i < n; i++) y[i] += a * x[i];
}
void scale_rows(int n, int m, double A[n][m], const double s[n]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) A[i][j] = A[i][j] * s[i] + j;
}
"""


@pytest.fixture(scope="module")
def c_functions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, Any]]:
    """name -> (polyflow's compiled function, gcc's on NumPy arrays)."""
    tmp: Path = tmp_path_factory.mktemp("gcc")
    (tmp / "k.c").write_text(C_SOURCE)
    library = tmp / "libk.so"
    subprocess.run(
        ["gcc", "-O2", "-shared", "-fPIC", "-o", str(library), str(tmp / "k.c")], check=True
    )
    lib = ctypes.CDLL(str(library))
    lib.axpy.argtypes = [ctypes.c_int, ctypes.c_double, ctypes.c_void_p, ctypes.c_void_p]
    lib.scale_rows.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]

    def gcc(name: str) -> Any:
        def call(*args: Any) -> None:
            getattr(lib, name)(*(a.ctypes.data if isinstance(a, np.ndarray) else a for a in args))

        return call

    return {name: (compile_c(C_SOURCE, name), gcc(name)) for name in ("axpy", "scale_rows")}


def test_c_functions_take_torch_and_jax_arrays_in_place(c_functions: Any) -> None:
    axpy, gcc_axpy = c_functions["axpy"]
    x = np.linspace(0.0, 1.0, 11)
    expected = np.ones(11)
    gcc_axpy(11, 2.5, x, expected)
    y = torch.ones(11, dtype=torch.float64)
    before = y.data_ptr()
    with jax.enable_x64(True):
        axpy(11, 2.5, jnp.asarray(x), y)  # a JAX array where the function only reads
    assert y.data_ptr() == before
    np.testing.assert_array_equal(y.numpy(), expected)


def test_c_strided_arrays_are_copied_and_copied_back(c_functions: Any) -> None:
    scale_rows, gcc_scale_rows = c_functions["scale_rows"]
    rng = np.random.default_rng(1)
    values = rng.random((6, 5))
    s = rng.random(6)
    expected = values.copy()
    gcc_scale_rows(6, 5, expected, s)
    wide = np.zeros((6, 10))
    wide[:, ::2] = values
    with pytest.warns(ArrayCopyWarning, match=r"argument 'A' of scale_rows\(\) is not C-contig"):
        scale_rows(6, 5, wide[:, ::2], s)
    np.testing.assert_array_equal(wide[:, ::2], expected)
    assert not wide[:, 1::2].any()
    transposed = torch.from_numpy(np.ascontiguousarray(values.T)).t()  # strided torch view
    with pytest.warns(ArrayCopyWarning):
        scale_rows(6, 5, transposed, torch.from_numpy(s))
    np.testing.assert_array_equal(transposed.numpy(), expected)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (lambda: (4, 1.0, np.ones(4), jnp.ones(4)), TypeError,
         r"argument 'y' of axpy\(\) is a JAX array, which is immutable, but axpy\(\) may store"),
        (lambda: (4, 1.0, np.ones(4), np.ones(4, np.float32)), TypeError,
         r"argument 'y' of axpy\(\) must have dtype float64 \(double\), got a NumPy array of "
         r"float32"),
        (lambda: (4, 1.0, np.ones(4), np.broadcast_to(np.float64(1), (4,))), ValueError,
         r"argument 'y' of axpy\(\) is read-only .* may store into it"),
        (lambda: (4, 1.0, "x", np.ones(4)), TypeError, r"argument 'x' of axpy\(\) must be an array"),
    ],
    ids=["jax-output", "dtype", "read-only-output", "not-an-array"],
)
def test_c_wrong_arguments_are_named(
    c_functions: Any, args: Any, error: type[Exception], message: str
) -> None:
    axpy, _ = c_functions["axpy"]
    with pytest.raises(error, match=message):
        axpy(*args())


def test_c_read_only_arrays_where_the_function_only_reads(c_functions: Any) -> None:
    axpy, gcc_axpy = c_functions["axpy"]
    x = np.arange(5.0)
    x.flags.writeable = False
    y, expected = np.ones(5), np.ones(5)
    axpy(5, 3.0, x, y)
    gcc_axpy(5, 3.0, np.array(x), expected)
    np.testing.assert_array_equal(y, expected)


# ----- GPU memory passed to a CPU kernel


def _gpu_array() -> Any:
    if torch.cuda.is_available():
        return torch.ones(4, 3, device="cuda")
    try:
        import cupy  # type: ignore[import-not-found]

        return cupy.ones((4, 3), cupy.float32)
    except Exception:
        pytest.skip("no GPU (neither torch.cuda nor CuPy can make an array on one)")


@pytest.mark.gpu
def test_gpu_arrays_are_refused_by_cpu_kernels(mm: Any, c_functions: Any) -> None:
    on_gpu = _gpu_array()
    with pytest.raises(ValueError, match=r"argument 'A' of mm\(\) is on cuda:0 .* runs on the CPU"):
        mm(on_gpu, np.ones((3, 2), np.float32))
    axpy, _ = c_functions["axpy"]
    with pytest.raises(ValueError, match=r"argument 'x' of axpy\(\) is on cuda:0"):
        axpy(12, 1.0, on_gpu, np.ones(12))


def test_given_output_checks_without_a_kernel() -> None:
    target = torch.zeros(2, 3)
    slot = given_output(target, function="f", name="C", shape=(2, 3), dtype=np.float32)
    assert slot.finish() is target and address(slot.view) == target.data_ptr()


@pytest.mark.gpu
def test_cuda_kernels_give_back_torch_tensors_and_the_out_given(operands: Any) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    a, b = operands
    mm_gpu = tc.define(MATMUL, options=Options(opt_level=3, target="cuda"))
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    got = mm_gpu(ta, tb)
    assert isinstance(got, torch.Tensor) and got.is_cuda
    out = torch.zeros(33, 20, device="cuda")
    assert mm_gpu(ta, tb, out=out) is out
    np.testing.assert_allclose(out.cpu().numpy(), a @ b, rtol=RTOL)


ALIASED_C = """
void through_local(int n, const double *x, double *y) {
  double *p = y;
  for (int i = 0; i < n; i++) p[i] = 2 * x[i];
}
"""


def test_c_stores_through_a_local_pointer_count_for_its_array() -> None:
    """A store through a local pointer to a parameter's memory is a store into that parameter:
    a read-only array is refused there, and taken where the function only reads; the results
    are what gcc -O2's build writes."""
    fn = compile_c(ALIASED_C, "through_local")
    frozen = np.arange(4.0)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="argument 'y' of through_local\\(\\) is read-only"):
        fn(4, np.arange(4.0), frozen)
    y, expected = np.zeros(4), np.zeros(4)
    fn(4, frozen, y)
    gcc_call(ALIASED_C, "through_local", 4, np.arange(4.0), expected)
    np.testing.assert_array_equal(y, expected)


def gcc_call(source: str, name: str, n: int, *arrays: np.ndarray) -> None:
    """`name` of `source` built by gcc -O2 as a shared library, called on `arrays`."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "k.c").write_text(source)
        library = Path(tmp) / "libk.so"
        subprocess.run(
            ["gcc", "-O2", "-shared", "-fPIC", "-o", str(library), str(Path(tmp) / "k.c")],
            check=True,
        )
        function = getattr(ctypes.CDLL(str(library)), name)
        function.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * len(arrays)
        function(n, *(a.ctypes.data for a in arrays))
