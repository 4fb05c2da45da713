"""raise-mem2reg end to end: C through the frontend, `promote_scalars` on every function, the
module verified, no scalar local left in memory, then run: each function must compute what the
same C built by ``gcc -O2`` computes, and what the unpromoted module computes."""

from __future__ import annotations

import ctypes
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mlir import ir
from mlir.execution_engine import ExecutionEngine
from mlir.passmanager import PassManager

from polyflow.drivers.jit import CompiledFunction, _ctype
from polyflow.frontend.c import CModule, emit_c_module
from polyflow.frontend.c_parse import parse_c
from polyflow.frontend.c_types import Scalar
from polyflow.ir.names import CABI_PREFIX
from polyflow.lowering.llvm_dialect import lower_to_llvm_dialect
from polyflow.options import Options
from polyflow.raising import mem2reg

ROOT = Path(__file__).parent.parent
KERNELS = ROOT / "bench_polybench" / "kernels"
PROGRAMS = Path(__file__).parent / "programs"
BENCH_OPTIONS = Options(
    include_dirs=(str(ROOT / "bench_polybench" / "harness"),), defines=("MINI_DATASET",)
)
# A scalar local that stayed in memory: a 0-d or 1-element alloca.
SCALAR_ALLOCA = re.compile(r"memref\.alloca\(\) : memref<(1x)?(i\d+|f\d+|bf16|index)>")

Args = Callable[[], tuple[Any, ...]]


def emit(src: str, options: Options | None = None) -> CModule:
    cmod = emit_c_module(parse_c(src, "t.c", options or Options()))
    assert not cmod.skipped, cmod.skipped
    return cmod


def promote(cmod: CModule) -> int:
    """`promote_scalars` on every function; the module must still verify."""
    with cmod.context:
        count = sum(
            mem2reg.promote_scalars(op.operation)
            for op in cmod.module.body.operations
            if op.operation.name == "func.func"
        )
        assert cmod.module.operation.verify()
    return count


def jit(cmod: CModule, entry: str) -> CompiledFunction:
    """Lower `cmod` to LLVM and JIT it. `convert-ub-to-llvm` first: the poison that an
    uninitialized local reads is not lowered by `lower_to_llvm_dialect` (yet)."""
    with cmod.context:
        PassManager.parse("builtin.module(convert-ub-to-llvm)").run(cmod.module.operation)
        lower_to_llvm_dialect(cmod.module)
        engine = ExecutionEngine(cmod.module, opt_level=2)
    return CompiledFunction(engine, cmod.functions[entry], cmod, {})


def gcc_function(
    src: str, entry: str, cmod: CModule, tmp: Path, flags: tuple[str, ...] = ()
) -> Any:
    """`entry` of `src` built by gcc -O2 as a shared library, called through a wrapper with
    `void *` for arrays (so that static and array-typed functions can be reached too)."""
    fn = cmod.functions[entry]
    params = [
        f"{t.c_spelling} a{k}" if isinstance(t, Scalar) else f"void *a{k}"
        for k, (_, t) in enumerate(fn.params)
    ]
    ret = fn.ret.c_spelling if isinstance(fn.ret, Scalar) else "void"
    call = f"{entry}({', '.join(f'a{k}' for k in range(len(fn.params)))})"
    body = f"return {call};" if ret != "void" else f"{call};"
    wrapper = f"\n{ret} pf_oracle_{entry}({', '.join(params) or 'void'}) {{ {body} }}\n"
    source = tmp / f"{entry}.c"
    source.write_text(src + wrapper)
    library = tmp / f"lib{entry}.so"
    cmd = ["gcc", "-O2", "-shared", "-fPIC", *flags, "-o", str(library), str(source), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True)
    cfunc = getattr(ctypes.CDLL(str(library)), f"pf_oracle_{entry}")
    cfunc.argtypes = [_ctype(t) if isinstance(t, Scalar) else ctypes.c_void_p for _, t in fn.params]
    cfunc.restype = _ctype(fn.ret) if isinstance(fn.ret, Scalar) else None

    def call_it(*args: Any) -> Any:
        return cfunc(*(a.ctypes.data if isinstance(a, np.ndarray) else a for a in args))

    return call_it


def run(f: Callable[..., Any], make_args: Args) -> tuple[Any, list[Any]]:
    """The result of `f` on fresh arguments, and the arguments afterwards (arrays are outputs)."""
    args = make_args()
    return f(*args), [a for a in args if isinstance(a, np.ndarray)]


def assert_same(expected: tuple[Any, list[Any]], actual: tuple[Any, list[Any]]) -> None:
    (eret, earrays), (aret, aarrays) = expected, actual
    if isinstance(eret, float):
        assert aret == pytest.approx(eret, rel=1e-12, abs=1e-300)
    else:
        assert aret == eret
    for e, a in zip(earrays, aarrays, strict=True):
        if e.dtype.kind == "f":
            np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-12)
        else:
            np.testing.assert_array_equal(a, e)


def scalar_allocas(cmod: CModule) -> list[str]:
    return [
        line.strip()
        for op in cmod.module.body.operations
        if not str(op.operation.attributes["sym_name"]).strip('"').startswith(CABI_PREFIX)
        for line in str(op).splitlines()
        if SCALAR_ALLOCA.search(line)
    ]


def ints(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int32)


# --- C snippets: (source, entry, arguments) ------------------------------------------------

SNIPPETS: dict[str, tuple[str, str, Args]] = {
    "straight_line_and_if": (
        """
        int pick(int a, int b) {
          int t = a + b;
          int u;
          if (t > 10) u = t * 2; else u = t - 1;
          t = u + a;
          if (a > b) t = t * 3;
          return t;
        }""",
        "pick",
        lambda: (7, 9),
    ),
    "for_continue_accumulates": (
        """
        long sum_skip(int n, int k) {
          long s = 0;
          for (int i = 1; i <= n; i++) {
            if (i % k == 0) continue;
            s += i;
          }
          return s;
        }""",
        "sum_skip",
        lambda: (1000, 7),
    ),
    "carried_but_dead_after_loop": (
        """
        void prefix_sums(int n, double *a) {
          double run = 0.0;
          for (int i = 0; i < n; i++) {
            run += a[i];
            a[i] = run;
          }
        }""",
        "prefix_sums",
        lambda: (9, np.linspace(-1.0, 3.0, 9)),
    ),
    "while_break": (
        """
        int first_over(int n, const int *a, int lim) {
          int i = 0, found = -1;
          while (i < n) {
            if (a[i] > lim) { found = i; break; }
            i++;
          }
          return found * 100 + i;
        }""",
        "first_over",
        lambda: (8, ints(3, 1, 4, 1, 5, 9, 2, 6), 4),
    ),
    "do_while": (
        """
        int collatz(int x) {
          int steps = 0;
          do {
            if (x % 2) x = 3 * x + 1; else x /= 2;
            steps++;
          } while (x != 1);
          return steps;
        }""",
        "collatz",
        lambda: (27,),
    ),
    "iteration_local_temporary": (
        """
        void row_norms(int n, int m, double A[n][m], double *out) {
          for (int i = 0; i < n; i++) {
            double t = 0.0;
            for (int j = 0; j < m; j++) {
              double v = A[i][j] * 0.5;
              t += v * v;
            }
            out[i] = t;
          }
        }""",
        "row_norms",
        lambda: (5, 7, np.arange(35, dtype=np.float64).reshape(5, 7) / 3.0, np.zeros(5)),
    ),
    "uninitialized_local": (
        """
        int maybe(int c, int d) {
          int x;
          if (c) x = d * 5;
          if (c) return x + 1;
          return 0;
        }""",
        "maybe",
        lambda: (1, 4),
    ),
    "uninitialized_loop_carried": (
        """
        int last_positive(int n, const int *a) {
          int last, found = 0;
          for (int i = 0; i < n; i++)
            if (a[i] > 0) { last = a[i]; found = 1; }
          return found ? last : -1;
        }""",
        "last_positive",
        lambda: (6, ints(1, -2, 3, 7, -4, -1)),
    ),
    "early_return_nested": (
        """
        int find2(int n, int m, int A[n][m], int v) {
          for (int i = 0; i < n; i++)
            for (int j = 0; j < m; j++)
              if (A[i][j] == v) return i * m + j;
          return -1;
        }""",
        "find2",
        lambda: (4, 5, np.arange(20, dtype=np.int32).reshape(4, 5) % 13, 11),
    ),
    "break_continue_nested": (
        """
        int first_duplicate_distance(int n, const int *restrict a) {
          int best = n;
          for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
              if (j - i >= best) break;
              if (a[i] != a[j]) continue;
              best = j - i;
              break;
            }
            if (best == 1) break;
          }
          return best;
        }""",
        "first_duplicate_distance",
        lambda: (10, ints(5, 3, 8, 1, 9, 3, 7, 2, 5, 8)),
    ),
    "mixed_scalar_types": (
        """
        float mix(int n, const float *x) {
          float acc = 0.0f;
          short count = 0;
          unsigned char seen = 0;
          for (int i = 0; i < n; i++) {
            if (x[i] < 0.0f) { seen = 1; continue; }
            acc += x[i];
            count++;
          }
          return seen ? acc / count : acc;
        }""",
        "mix",
        lambda: (6, np.array([1.5, -2.0, 3.25, 4.0, -1.0, 0.5], dtype=np.float32)),
    ),
    "while_with_two_counters": (
        """
        int gcd_steps(int a, int b) {
          int steps = 0;
          while (a != b) {
            if (a > b) a -= b; else b -= a;
            steps++;
          }
          return steps * 1000 + a;
        }""",
        "gcd_steps",
        lambda: (1071, 462),
    ),
}


@pytest.mark.parametrize("case", list(SNIPPETS))
def test_snippet_matches_gcc_and_unpromoted(case: str, tmp_path: Path) -> None:
    src, entry, make_args = SNIPPETS[case]
    promoted = emit(src)
    assert promote(promoted) > 0
    assert scalar_allocas(promoted) == []
    expected = run(gcc_function(src, entry, promoted, tmp_path), make_args)
    assert_same(expected, run(jit(promoted, entry), make_args))
    assert_same(expected, run(jit(emit(src), entry), make_args))


def test_second_run_finds_nothing() -> None:
    cmod = emit(SNIPPETS["break_continue_nested"][0])
    assert promote(cmod) > 0
    before = str(cmod.module)
    assert promote(cmod) == 0
    assert str(cmod.module) == before


def test_uninitialized_read_is_poison() -> None:
    cmod = emit(SNIPPETS["uninitialized_local"][0])
    promote(cmod)
    assert "ub.poison : i32" in str(cmod.module)


# --- PolyBench kernels with scalars --------------------------------------------------------


def _rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def _durbin() -> tuple[Any, ...]:
    n = 40
    r = 1.0 / (np.arange(n, dtype=np.float64) + 2)
    return n, r, np.zeros(n), np.zeros(n)


def _ludcmp() -> tuple[Any, ...]:
    n = 40
    a = _rng().random((n, n)) + n * np.eye(n)
    return n, a, _rng().random(n), np.zeros(n), np.zeros(n)


def _gramschmidt() -> tuple[Any, ...]:
    m, n = 20, 30
    return m, n, _rng().random((m, n)) + 0.5, np.zeros((n, n)), np.zeros((m, n))


def _deriche() -> tuple[Any, ...]:
    w = h = 64
    img = _rng().random((w, h))
    return w, h, 0.25, img, np.zeros((w, h)), np.zeros((w, h)), np.zeros((w, h))


KERNEL_CASES: dict[str, Args] = {
    "durbin": _durbin,
    "ludcmp": _ludcmp,
    "gramschmidt": _gramschmidt,
    "deriche": _deriche,
}


@pytest.mark.parametrize("kernel", list(KERNEL_CASES))
def test_kernel_matches_gcc_and_unpromoted(kernel: str, tmp_path: Path) -> None:
    src = (KERNELS / f"{kernel}.c").read_text()
    entry = f"kernel_{kernel}"
    promoted = emit(src, BENCH_OPTIONS)
    assert promote(promoted) > 0
    assert scalar_allocas(promoted) == []
    flags = ("-DMINI_DATASET", f"-I{ROOT / 'bench_polybench' / 'harness'}")
    expected = run(gcc_function(src, entry, promoted, tmp_path, flags), KERNEL_CASES[kernel])
    assert_same(expected, run(jit(promoted, entry), KERNEL_CASES[kernel]))
    assert_same(expected, run(jit(emit(src, BENCH_OPTIONS), entry), KERNEL_CASES[kernel]))


def test_durbin_carries_only_what_it_needs() -> None:
    """durbin's outer loop carries beta and alpha, the inner sum loop carries sum; the other
    loops carry nothing."""
    cmod = emit((KERNELS / "durbin.c").read_text(), BENCH_OPTIONS)
    promote(cmod)
    fn = next(
        str(op)
        for op in cmod.module.body.operations
        if str(op.operation.attributes["sym_name"]) == '"kernel_durbin"'
    )
    loops = re.findall(r"scf\.for .*", fn)
    carried = sorted(loop.count("=") - 1 for loop in loops)  # `%iv = ...` plus one per iter_arg
    assert carried == [0, 0, 1, 2], loops


def test_fast_on_a_kernel() -> None:
    """< 0.1 s on a 30-line C kernel (best of three, the machine may be busy)."""
    src = (KERNELS / "deriche.c").read_text()
    times = []
    for _ in range(3):
        cmod = emit(src, BENCH_OPTIONS)
        with cmod.context:
            start = time.perf_counter()
            for op in cmod.module.body.operations:
                mem2reg.promote_scalars(op.operation)
            times.append(time.perf_counter() - start)
    assert min(times) < 0.1, times


# --- every program of the corpus: promotes and verifies --------------------------------------


@pytest.mark.parametrize("program", sorted(PROGRAMS.glob("*.c")), ids=lambda p: p.stem)
def test_corpus_program_promotes_and_verifies(program: Path) -> None:
    cmod = emit_c_module(parse_c(program.read_text(), str(program), Options()))
    promote(cmod)
    assert scalar_allocas(cmod) == []


def test_pass_runs_in_a_pass_manager() -> None:
    """The pass class, on a func.func pass manager as the raising pipeline runs it."""
    src = SNIPPETS["for_continue_accumulates"][0]
    cmod = emit(src)
    with cmod.context:
        pm = PassManager("func.func")
        instance = mem2reg.Mem2Reg()
        pm.add(instance, instance.name)
        for op in cmod.module.body.operations:
            pm.run(op.operation)
        assert isinstance(cmod.module.operation, ir.Operation)
        assert cmod.module.operation.verify()
    assert scalar_allocas(cmod) == []
