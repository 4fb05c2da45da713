"""Parameters every call passes as one constant (frontend/c_constant_arguments.py), bound in the
lowering (lowering/bound_arguments.py): which parameters qualify, what the lowered code does with
them, and programs against gcc -O2."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

import polyflow
from polyflow import Options
from polyflow.drivers.sources import c_module
from polyflow.ir.names import BOUND_VALUE_ATTR


def _bound(source: str, function: str = "f", *, bind: bool = True) -> dict[int, int]:
    """The arguments of `function` marked bound, by position, with their values."""
    cmod = c_module(source, "t.c", Options(), bind_constant_arguments=bind)
    with cmod.context:
        for op in cmod.module.body.operations:
            if op.attributes["sym_name"].value != function:
                continue
            if "arg_attrs" not in op.attributes:
                return {}
            found = {}
            for k, attrs in enumerate(op.attributes["arg_attrs"]):
                text = str(attrs)
                match = re.search(re.escape(BOUND_VALUE_ATTR) + r" = (-?\d+)", text)
                if match:
                    found[k] = int(match.group(1))
            return found
    raise AssertionError(f"no function {function}")


def _program(params: str, calls: str, *, storage: str = "static") -> str:
    return f"""
    enum {{ SIZE = 12 }};
    {storage} void f({params}, double *a) {{
      for (int i = 0; i < 4; i++) a[i] = i;
    }}
    int main(void) {{
      double a[4];
      {calls}
      return 0;
    }}
    """


@pytest.mark.parametrize(
    ("params", "calls", "expected"),
    [
        ("int n, int m", "f(2100, 7, a); f(2100, 8, a);", {0: 2100}),  # m differs
        ("int n", "f(5 * 100 + 1, a);", {0: 501}),
        ("int n", "f(-7 / 2, a);", {0: -3}),  # C truncates toward zero
        ("int n", "f(-7 % 2, a);", {0: -1}),
        ("int n", "f(0x10, a);", {0: 16}),
        ("int n", "f(SIZE, a);", {0: 12}),  # an enumerator
        ("int n", "f('A', a);", {0: 65}),
        ("long n", "f(1900, a);", {0: 1900}),
        ("unsigned n", "f(40, a);", {0: 40}),
        # the caller's local variables that keep one constant value
        ("int n", "int k = 3; f(k, a);", {0: 3}),
        ("int n", "int t = 500, k = 120; f(k, a);", {0: 120}),  # PolyBench's main
        ("int n", "const int k = 2 * SIZE; f(k - 1, a);", {0: 23}),
        ("int n", "int k = 3; int m = k * 4; f(m, a);", {0: 12}),
        ("int n", "static int k = 3; f(k, a);", {0: 3}),
        ("int n", "for (int r = 0; r < 2; r++) { int k = 6; f(k, a); }", {0: 6}),
        ("long n", "short k = 9; f(k, a);", {0: 9}),
        ("int n", "int k = 3; k = 4; f(k, a);", {}),  # assigned
        ("int n", "int k = 3; f(k, a); k++;", {}),  # changed after the call: a loop may repeat it
        ("int n", "int k = 3; int *p = &k; *p = 5; f(k, a);", {}),  # its address taken
        ("int n", "int k; k = 3; f(k, a);", {}),  # no initializer
        ("int n", "volatile int k = 3; f(k, a);", {}),
        ("int n", "unsigned k = -1; f(k, a);", {}),  # k is not -1
        ("int n", "char k = 300; f(k, a);", {}),  # does not hold 300
        ("int n", "_Bool k = 1; f(k, a);", {}),
        ("int n", "double k = 3; f(k, a);", {}),
        ("int n", "int k = 3; { int k = 4; f(k, a); } f(k, a);", {}),  # two k: not followed
        ("int n", "{ int k = 3; } { int k = 3; f(k, a); }", {}),
        ("int n", "int k = 3; f(k, a); f(3, a); f(2 + 1, a);", {0: 3}),
        ("int n", "int k = 3; f(k, a); f(4, a);", {}),
        ("int n", "int k = 3; if (k) { f(k, a); }", {0: 3}),  # an inner block sees it
        ("int n", "f(3, a); f(4, a);", {}),
        ("int n", "f(1u, a);", {}),  # unsigned arithmetic wraps: not followed
        ("int n", "f(3000000000, a);", {}),  # a long literal
        ("int n", "f(65536 * 65536, a);", {}),  # overflows int
        ("int n", "f((int)5, a);", {}),  # a cast: its type decides the value
        ("unsigned n", "f(-1, a);", {}),  # the parameter's value is not -1
        ("short n", "f(70000, a);", {}),  # does not fit
        ("_Bool n", "f(1, a);", {}),
        ("double x", "f(2, a);", {}),
        ("int n", "void (*p)(int, double *) = f; f(2, a); p(3, a);", {}),  # address taken
        # a local variable hides the enumerator: its value is the variable's
        ("int n", "{ int SIZE = 3; f(SIZE, a); }", {0: 3}),
        ("int n", "{ int SIZE = 3; SIZE++; f(SIZE, a); }", {}),
    ],
)
def test_the_parameters_every_call_passes_as_one_constant(
    params: str, calls: str, expected: dict[int, int]
) -> None:
    assert _bound(_program(params, calls)) == expected


def test_only_static_functions_and_only_when_asked() -> None:
    calls = "f(2100, a);"
    assert _bound(_program("int n", calls)) == {0: 2100}
    # another unit may call an external function with anything
    assert _bound(_program("int n", calls, storage="")) == {}
    # the JIT (polyflow.compile_c) calls a unit's functions with its own arguments
    assert _bound(_program("int n", calls), bind=False) == {}


def test_an_enumerator_defined_twice_means_nothing_certain() -> None:
    source = _program("int n", "f(SIZE, a);").replace(
        "int main(void) {", "int main(void) {\n  enum { SIZE = 4 };"
    )
    assert _bound(source) == {}


def test_a_local_counts_only_where_its_declaration_is_in_scope() -> None:
    head = """
    static void f(int n, double *a) { for (int i = 0; i < n; i++) a[i] = i; }
    int k = 5;
    """
    # before the local's declaration, `k` is the global (anything another unit stores)
    before = head + "int main(void) { double a[4]; f(k, a); int k = 5; f(k, a); return 0; }"
    assert _bound(before) == {}
    # another function's local of that name
    other = head + (
        "void g(double *a) { int k = 5; f(k, a); }\n"
        "int main(void) { double a[4]; f(k, a); g(a); return 0; }"
    )
    assert _bound(other) == {}
    inside = head + "void g(double *a) { int k = 5; f(k, a); }\nint main(void) { return 0; }"
    assert _bound(inside) == {0: 5}


def test_calls_from_compiled_functions_count() -> None:
    source = """
    static void g(int n, double *a) { for (int i = 0; i < n; i++) a[i] = i; }
    void h(int n, double *a) { g(n, a); }
    int main(void) { double a[8]; g(8, a); h(4, a); return a[1] > 0; }
    """
    assert _bound(source, "g") == {}


def test_a_differentiated_function_keeps_its_parameters() -> None:
    source = _program("int n", "f(4, a);")
    cmod = c_module(source, "t.c", Options(grad=("f",)), bind_constant_arguments=True)
    assert BOUND_VALUE_ATTR not in str(cmod.module)


# atax's initialization: `% n` and `/ (5 * m)` of parameters that main passes as constants
PROGRAM = """
#include <stdio.h>
#define M 37
#define N 45
static void init(int m, int n, double A[M][N], int B[M][N]) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      A[i][j] = (double)((i + j) % n) / (5 * m);
      B[i][j] = (i * j + 3) % n - (i - j) / 7;
    }
}
static double sum(int m, int n, double A[M][N], int B[M][N]) {
  double s = 0;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) s += A[i][j] * (1 + i % 3) + B[i][j];
  return s;
}
int main(void) {
  static double A[M][N];
  static int B[M][N];
  init(M, N, A, B);
  printf("%.17g\\n", sum(M, N, A, B));
  init(M - 2, N - 3, A, B);  /* other sizes: only what every call passes is bound */
  printf("%.17g\\n", sum(M, N, A, B));
  for (int i = 0; i < M; i += 9)
    for (int j = 0; j < N; j += 5) printf("%d %.17g %d\\n", i * N + j, A[i][j], B[i][j]);
  return 0;
}
"""


def test_bound_arguments_fold_in_the_lowered_code(tmp_path: Path) -> None:
    source = tmp_path / "p.c"
    source.write_text(PROGRAM.replace("init(M - 2, N - 3, A, B);", ""))
    llvm = tmp_path / "p.ll"
    built = polyflow.build_program(source, llvm, emit="llvm", cache=None)
    said = {r.function: r for r in built.report.select(kind="constant-argument")}
    assert sorted(said) == ["init", "sum"]
    assert said["init"].data == {"arguments": {"m": 37, "n": 45}}
    assert said["init"].message.startswith("every call passes m = 37, n = 45: compiled with")
    assert said["init"].position is not None and said["init"].position.line == 5
    text = llvm.read_text()
    # `% n` by the constant 45: no division by a value left (without the binding: `srem i32
    # %x, %n` per element)
    assert "@__polyflow_init" in text and re.search(r"srem .*splat \(i32 45\)", text)
    assert not re.search(VARIABLE_DIVISION, text), text


# a division whose divisor is a value, scalar or vector
VARIABLE_DIVISION = r"[su](?:rem|div) (?:i32|<\d+ x i32>) %[\w.]+, %"


def test_a_parameter_calls_disagree_on_stays_a_division(tmp_path: Path) -> None:
    source = tmp_path / "p.c"
    source.write_text(PROGRAM)
    llvm = tmp_path / "p.ll"
    built = polyflow.build_program(source, llvm, emit="llvm", cache=None)
    assert re.search(VARIABLE_DIVISION, llvm.read_text())
    said = {r.function for r in built.report.select(kind="constant-argument")}
    assert said == {"sum"}  # init is called with two sizes


# PolyBench's main: the sizes in local variables
LOCALS_PROGRAM = """
#include <stdio.h>
#define N 40
static void fill(int n, int k, double A[N]) {
  for (int i = 0; i < n; i++) A[i] = (double)((i * 5) % k) / n;
}
static double total(int n, double A[N]) {
  double s = 0;
  for (int i = 0; i < n; i++) s += A[i] * (i % 4);
  return s;
}
int main(void) {
  static double A[N];
  int n = N, k = 3 + 4;
  fill(n, k, A);
  printf("%.17g\\n", total(n, A));
  for (int step = 1; step < 4; step++) {
    int m = n - step;  /* changes with step: total's n is not bound */
    printf("%.17g\\n", total(m, A));
  }
  return 0;
}
"""


def test_sizes_in_local_variables_are_bound(tmp_path: Path) -> None:
    source = tmp_path / "p.c"
    source.write_text(LOCALS_PROGRAM)
    built = polyflow.build_program(source, tmp_path / "pf", cache=None)
    said = {r.function: r.data for r in built.report.select(kind="constant-argument")}
    assert said == {"fill": {"arguments": {"n": 40, "k": 7}}}
    subprocess.run(["gcc", "-O2", str(source), "-o", str(tmp_path / "ref")], check=True)
    ours = subprocess.run([tmp_path / "pf"], capture_output=True, text=True, check=True)
    ref = subprocess.run([tmp_path / "ref"], capture_output=True, text=True, check=True)
    assert ours.stdout == ref.stdout and len(ours.stdout.split()) == 4


@pytest.mark.parametrize("threads", [1, 2])
def test_programs_with_bound_arguments_print_gccs_digits(tmp_path: Path, threads: int) -> None:
    source = tmp_path / "p.c"
    source.write_text(PROGRAM)
    polyflow.build_program(source, tmp_path / "pf", options=Options(threads=threads), cache=None)
    subprocess.run(
        ["gcc", "-O2", "-ffp-contract=off", str(source), "-o", str(tmp_path / "ref")], check=True
    )
    ours = subprocess.run([tmp_path / "pf"], capture_output=True, text=True, check=True)
    ref = subprocess.run([tmp_path / "ref"], capture_output=True, text=True, check=True)
    assert ours.stdout == ref.stdout
