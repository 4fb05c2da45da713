"""C semantics of the frontend, checked by JIT-compiling small functions and comparing with Python."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polyflow
from polyflow.arrays import ArrayCopyWarning
from polyflow.errors import CompileError


def jit(src: str, entry: str = "f") -> polyflow.drivers.jit.CompiledFunction:  # type: ignore[name-defined]
    return polyflow.compile_c(src, entry)


def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


@pytest.mark.parametrize("a,b", [(7, 2), (-7, 2), (7, -2), (-7, -2), (0, 3), (-1, 5)])
def test_signed_division_truncates_toward_zero(a: int, b: int) -> None:
    f = jit("int f(int a, int b) { return a / b * 1000 + a % b; }")
    assert f(a, b) == c_div(a, b) * 1000 + (a - c_div(a, b) * b)


def test_unsigned_arithmetic_wraps() -> None:
    f = jit("unsigned f(unsigned a, unsigned b) { return a - b; }")
    assert f(3, 5) == (3 - 5) % 2**32
    g = jit(
        "unsigned long f(unsigned long a) { return a * 6364136223846793005UL + 1442695040888963407UL; }"
    )
    assert g(12345) == (12345 * 6364136223846793005 + 1442695040888963407) % 2**64


def test_shifts_follow_signedness() -> None:
    f = jit("int f(int a) { return a >> 2; }")
    assert f(-17) == -17 >> 2
    g = jit("unsigned f(unsigned a) { return (a >> 3) | (a << 29); }")
    assert g(0x12345678) == ((0x12345678 >> 3) | (0x12345678 << 29)) % 2**32


def test_char_promotion_and_truncation() -> None:
    f = jit("int f(int x) { signed char c = x; unsigned char u = x; return c * 1000 + u; }")
    assert f(200) == (200 - 256) * 1000 + 200
    g = jit("int f(void) { short a = 30000, b = 30000; return a + b; }")
    assert g() == 60000  # promoted to int before adding


def test_float_to_int_truncates_and_float_is_single_precision() -> None:
    f = jit("int f(double x) { return (int)x; }")
    assert [f(v) for v in (2.9, -2.9)] == [2, -2]
    g = jit("float f(float a, float b) { return a + b; }")
    assert g(0.1, 0.2) == float(np.float32(0.1) + np.float32(0.2))


def test_usual_arithmetic_conversions_signed_unsigned_compare() -> None:
    f = jit("int f(int a, unsigned b) { return a < b; }")
    assert f(-1, 1) == 0  # -1 converts to UINT_MAX


def test_counted_loop_leaves_counter_past_the_end() -> None:
    f = jit("int f(int n) { int i; for (i = 0; i < n; i += 3) ; return i; }")
    assert [f(n) for n in (0, 1, 3, 10, -5)] == [0, 3, 3, 12, 0]
    g = jit("int f(int n) { int i; for (i = n; i >= 0; i -= 2) ; return i; }")
    assert [g(n) for n in (0, 1, 7, -3)] == [-2, -1, -1, -3]


def test_while_with_data_dependent_exit_and_break_continue() -> None:
    src = """
    int f(int n, double *a) {
      int i = 0, hits = 0;
      while (1) {
        if (i >= n) break;
        if (a[i] < 0) { i++; continue; }
        if (a[i] > 100) break;
        hits++; i++;
      }
      return hits * 1000 + i;
    }"""
    a = np.array([1.0, -2.0, 3.0, 4.0, 500.0, 6.0])
    assert jit(src)(6, a) == 3 * 1000 + 4


def test_early_return_from_nested_loops() -> None:
    src = """
    int f(int n, int m, int A[n][m], int t) {
      for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++)
          if (A[i][j] == t) return i * 100 + j;
      return -1;
    }"""
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    f = jit(src)
    assert f(3, 4, a, 7) == 103
    assert f(3, 4, a, 99) == -1


def test_do_while_runs_once_and_short_circuit_skips_side_effects() -> None:
    f = jit("int f(int n) { int k = 0; do { k++; } while (k < n); return k; }")
    assert f(-5) == 1 and f(4) == 4
    g = jit(
        "int f(int n, int *c) { int x = 0; if (n > 0 && (c[0]++, 1)) x = 1; if (n > 0 || c[1]++) x += 2; return x; }"
    )
    c = np.zeros(2, dtype=np.int32)
    assert g(0, c) == 0 and list(c) == [0, 1]


def test_ternary_and_compound_assignments() -> None:
    src = """
    void f(int n, double *a, int *b) {
      for (int i = 0; i < n; i++) {
        a[i] *= i % 2 ? -1.5 : 2.0;
        b[i] <<= 2; b[i] ^= i; b[i] -= 3; b[i] %= 7;
      }
    }"""
    a = np.arange(5, dtype=np.float64)
    b = np.arange(5, dtype=np.int32) + 10
    jit(src)(5, a, b)
    exp_a = [x * (-1.5 if i % 2 else 2.0) for i, x in enumerate(np.arange(5.0))]
    exp_b = [int(np.fmod(((x << 2) ^ i) - 3, 7)) for i, x in enumerate(range(10, 15))]
    assert list(a) == exp_a and list(b) == exp_b


def test_vla_parameters_and_calls_between_functions() -> None:
    src = """
    static double dot(int n, double *x, double *y) { double s = 0; for (int i = 0; i < n; i++) s += x[i] * y[i]; return s; }
    void f(int n, int m, double A[n][m], double *x, double *y) {
      for (int i = 0; i < n; i++) y[i] = dot(m, A[i] == A[i] ? x : x, x);
    }"""
    with pytest.raises(CompileError):
        jit(src)  # A[i] == A[i] compares pointers: left to the C compiler, and compile_c says so
    src2 = """
    static double dot(int n, double *x, double *y) { double s = 0; for (int i = 0; i < n; i++) s += x[i] * y[i]; return s; }
    void f(int n, int m, double A[n][m], double *x, double *y) {
      for (int i = 0; i < n; i++) { y[i] = 0; for (int j = 0; j < m; j++) y[i] += A[i][j] * x[j]; }
      y[0] += dot(m, x, x);
    }"""
    A = np.arange(12, dtype=np.float64).reshape(3, 4)
    x = np.arange(4, dtype=np.float64)
    y = np.zeros(3)
    jit(src2)(3, 4, A, x, y)
    expected = A @ x
    expected[0] += x @ x
    assert np.array_equal(y, expected)


def test_math_functions_match_numpy() -> None:
    src = """
    void f(int n, double *x, double *y, float *z) {
      for (int i = 0; i < n; i++) {
        y[i] = sqrt(x[i]) + exp(-x[i]) + log(x[i] + 1) + pow(x[i], 1.5) + fabs(-x[i])
             + floor(x[i]) + ceil(x[i]) + fmin(x[i], 2.0) + fmax(x[i], 2.0) + tanh(x[i]);
        z[i] = sqrtf((float)x[i]) + expf(-(float)x[i]);
      }
    }"""
    x = np.linspace(0.1, 4.0, 9)
    y, z = np.zeros(9), np.zeros(9, dtype=np.float32)
    jit(src)(9, x, y, z)
    expected = (
        np.sqrt(x)
        + np.exp(-x)
        + np.log(x + 1)
        + x**1.5
        + x
        + np.floor(x)
        + np.ceil(x)
        + np.minimum(x, 2)
        + np.maximum(x, 2)
        + np.tanh(x)
    )
    np.testing.assert_allclose(y, expected, rtol=1e-14)
    xf = x.astype(np.float32)
    np.testing.assert_allclose(z, np.sqrt(xf) + np.exp(-xf), rtol=1e-6)


def test_globals_live_in_the_compiled_function() -> None:
    src = """
    static int table[4] = {1, 2, 3};
    double scale = 2.5;
    int f(int k) { table[3] += k; return (int)(table[k % 4] * scale); }"""
    f = jit(src)
    assert list(f.globals["table"]) == [1, 2, 3, 0]
    assert f(3) == int(3 * 2.5)
    assert f.globals["table"][3] == 3


def test_local_arrays_with_initializers() -> None:
    src = "int f(int k) { int w[2][3] = {{1, 2}, {4}}; int s = 0; for (int i = 0; i < 2; i++) for (int j = 0; j < 3; j++) s = s * 10 + w[i][j]; return s + k; }"
    assert jit(src)(0) == 120400


def test_argument_checks() -> None:
    f = jit("void f(int n, int m, double A[n][m]) { A[0][0] = n; }")
    with pytest.raises(TypeError, match="dtype float64"):
        f(2, 2, np.zeros((2, 2), dtype=np.float32))
    with pytest.raises(TypeError, match="shape"):
        f(2, 3, np.zeros((2, 2)))
    wide = np.zeros((2, 4))
    with pytest.warns(ArrayCopyWarning, match="not C-contiguous"):  # copied in and back out
        f(2, 2, wide[:, ::2])
    assert wide[0, 0] == 2 and wide.sum() == 2
    with pytest.raises(TypeError, match="takes 3 argument"):
        f(2, 2)


def test_vla_declared_in_a_loop_is_freed_every_iteration() -> None:
    src = """
    double f(int n, int reps) {
      double total = 0;
      for (int r = 0; r < reps; r++) {
        double tmp[n];
        for (int i = 0; i < n; i++) tmp[i] = i * 0.5 + r;
        for (int i = 0; i < n; i++) total += tmp[i];
      }
      return total;
    }"""
    f = jit(src)
    # 2000 iterations x 800 KB would overflow the stack if the arrays were not released.
    n, reps = 100_000, 2000
    assert f(n, reps) == sum(i * 0.5 for i in range(n)) * reps + n * sum(range(reps))


def test_header_constants_directory_is_shared_not_leaked() -> None:
    """Every process of a build (polyflow cc runs one per unit) finds the same directory of
    stand-in headers, named by its contents, rather than leaving a new one in /tmp."""
    from polyflow.frontend.c_parse import header_constants

    first = header_constants("gcc")
    header_constants.cache_clear()
    again = header_constants("gcc")
    assert first == again
    text = (Path(again) / "float.h").read_text()
    assert "#define DBL_MAX" in text


@pytest.mark.parametrize(
    "literal", ["0.1L", "1e-30L", "3.0L", "0x1.8p-3L", "1.0000000000000000001L", "-2.5e300L"]
)
def test_long_double_literals_are_exact(literal: str) -> None:
    """A long double literal is rounded once, to the x87 format (not to double first): the
    bits equal NumPy's long double parse of the same text (x86-64)."""
    from fractions import Fraction

    from polyflow.frontend.c_scope import float_literal_value, x87_bits

    value = float_literal_value(literal.lstrip("-"))
    bits = x87_bits(-value if literal.startswith("-") else value)
    text = literal.rstrip("L")
    expected = np.longdouble(float.fromhex(text) if "0x" in text else text)
    assert bits is not None and bits.to_bytes(16, "little")[:10] == expected.tobytes()[:10]
    assert x87_bits(Fraction(10) ** 5000) is None  # beyond the format: left to cc


def test_long_double_accumulator_matches_numpy_longdouble() -> None:
    source = """
    double mean(const double *x, unsigned long n) {
      long double m = 0;
      for (unsigned long i = 0; i < n; i++) m += (x[i] - m) / (i + 1);
      return m;
    }
    """
    fn = polyflow.compile_c(source, options={"opt_level": 3})
    assert "f80" in fn.mlir("affine") and "affine.for" in fn.mlir("affine")
    x = 1.0 / np.arange(3.0, 103.0) + 1e8
    m = np.longdouble(0)
    for i, v in enumerate(x):
        m += (np.longdouble(v) - m) / np.longdouble(i + 1)
    assert fn(x, len(x)) == float(m)
