"""The raising stage around the passes: options and stage wiring, the report read off the IR,
`--emit=affine` and `--report`, failures of a pass contained to its function, lowering of what
raising produces, and the PolyBench survey."""

from __future__ import annotations

import ctypes
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from mlir import ir

import polyflow
from polyflow import passes, raising
from polyflow.cli import main
from polyflow.lowering.llvm_dialect import lower_to_llvm_dialect
from polyflow.pipeline import STAGE_NAMES
from polyflow.raising import report as report_mod

SAXPY = """void kernel(int n, double a, double *x, double *y) {
  for (int i = 0; i < n; i++)
    y[i] = a * x[i] + y[i];
}
"""


# --- options and stages ---------------------------------------------------------------------


def test_affine_stage_follows_mlir_and_is_on_by_default() -> None:
    assert STAGE_NAMES[:6] == ["mlir", "affine", "grad", "affine-opt", "gpu", "llvm-dialect"]
    assert polyflow.Options().raise_affine is True
    assert polyflow.Options().raising_enabled
    assert not polyflow.Options(opt_level=0).raising_enabled
    assert not polyflow.Options(raise_affine=False).raising_enabled


@pytest.mark.parametrize(
    "options", [polyflow.Options(opt_level=0), polyflow.Options(raise_affine=False)]
)
def test_raising_off_is_the_identity(options: polyflow.Options) -> None:
    fn = polyflow.compile_c(SAXPY, options=options)
    assert fn.mlir("affine") == fn.mlir("mlir")


def test_compile_c_keeps_the_affine_stage() -> None:
    fn = polyflow.compile_c(SAXPY)
    affine = fn.mlir("affine")
    assert "func.func private @kernel" in affine and fn.warnings == []
    x, y = np.arange(5.0), np.ones(5)
    fn(5, 2.0, x, y)
    assert np.array_equal(y, 2.0 * np.arange(5.0) + 1.0)


def test_cli_emit_affine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "saxpy.c"
    src.write_text(SAXPY)
    assert main(["build", str(src), "--emit=affine"]) == 0  # a text stage: stdout by default
    out = capsys.readouterr().out
    assert out.startswith("module") and "func.func private @kernel" in out
    assert main(["build", str(src), "--emit=affine", "-o", str(tmp_path / "k.mlir")]) == 0
    assert (tmp_path / "k.mlir").read_text() == out
    assert main(["build", str(src), "--emit=affine", "--no-raise-affine", "-O2"]) == 0
    unraised = capsys.readouterr().out
    assert main(["build", str(src), "--emit=mlir"]) == 0
    assert unraised == capsys.readouterr().out


# --- the report, on hand-written IR carrying the contract's attributes ------------------------

REPORT_IR = """
module {
  func.func private @kernel(%n: index, %A: memref<?xf64>, %c: i1) -> f64 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %z = arith.constant 0.0 : f64
    %alloca = memref.alloca() : memref<f64> loc("k.c":2:3)
    memref.store %z, %alloca[] : memref<f64> loc("S0"("k.c":2:10))
    %r = affine.for %i = 0 to 10 iter_args(%a = %z) -> (f64) {
      %v = affine.load %A[%i] : memref<?xf64> loc("S1"("k.c":4:12))
      %s = arith.addf %a, %v : f64
      affine.yield %s : f64
    } {polyflow.reductions = ["add"]} loc("k.c":3:3)
    %w = scf.while (%i = %c0) : (index) -> index {
      %v = memref.load %A[%i] {polyflow.not_affine = "subscript 0 is not affine: loaded from memory"} : memref<?xf64> loc("S2"("k.c":5:14))
      %p = arith.cmpf olt, %v, %z : f64
      scf.condition(%p) %i : index
    } do {
    ^bb0(%i: index):
      %i1 = arith.addi %i, %c1 : index
      scf.yield %i1 : index
    } attributes {polyflow.not_affine = "while loop: data-dependent exit"} loc("k.c":5:3)
    scf.if %c {
      memref.store %z, %A[%w] : memref<?xf64> loc(fused["S3"("k.c":7:7), "elsewhere.c":1:1])
    } {polyflow.not_affine = "condition is not affine: a function argument of type i1"} loc("k.c":6:3)
    return %r : f64
  } loc("k.c":1:8)
  func.func private @affine_only(%A: memref<10xf64>) {
    %z = arith.constant 0.0 : f64
    affine.for %i = 0 to 10 {
      affine.store %z, %A[%i] : memref<10xf64> loc("S4"("k.c":11:24))
    } loc("k.c":11:3)
    return
  } loc("k.c":10:6)
  func.func private @failed(%A: memref<10xf64>) attributes {polyflow.not_affine = "pass 'raise-mem2reg' failed: boom"} {
    %z = arith.constant 0.0 : f64
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c10 = arith.constant 10 : index
    scf.for %i = %c0 to %c10 step %c1 {
      memref.store %z, %A[%i] : memref<10xf64> loc("S5"("k.c":21:24))
    } loc("k.c":21:3)
    return
  } loc("k.c":20:6)
  func.func private @the_scf_copy(%A: memref<10xf64>) attributes {polyflow.no_raise} {
    return
  }
  func.func @__polyflow_kernel() {
    return
  }
}
"""


@pytest.fixture
def report() -> report_mod.RaiseReport:
    with ir.Context():
        module = ir.Module.parse(REPORT_IR)
        return report_mod.RaiseReport.from_module(module)


def test_report_reads_loops_reasons_reductions_and_positions(
    report: report_mod.RaiseReport,
) -> None:
    assert [fn.name for fn in report.functions] == ["kernel", "affine_only", "failed"]
    kernel = report.function("kernel")
    assert (kernel.position.line, kernel.position.column) == (1, 8)  # type: ignore[union-attr]
    rows = [(i.construct, i.raised, i.where, i.reason, i.reductions) for i in kernel.items]
    assert rows == [
        ("for", True, "3:3", None, ("add",)),
        ("while", False, "5:3", "while loop: data-dependent exit", ()),
        ("load", False, "5:14", "subscript 0 is not affine: loaded from memory", ()),
        ("if", False, "6:3", "condition is not affine: a function argument of type i1", ()),
        ("store", False, "7:7", "no reason recorded", ()),  # inside a fused location
    ]  # the store to the scalar local at 2:10 is not listed: allocas aside
    assert [i.statement for i in kernel.items] == [None, None, "S2", None, "S3"]
    assert (kernel.loops_raised, len(kernel.loops), kernel.fully_affine) == (1, 2, False)
    assert report.function("affine_only").fully_affine
    failed = report.function("failed")
    assert failed.error == "pass 'raise-mem2reg' failed: boom" and not failed.fully_affine
    assert failed.items[0].reason == "the function's raising failed"
    assert report.fully_affine == ["affine_only"]


def test_report_format_and_json(report: report_mod.RaiseReport) -> None:
    lines = report.format().splitlines()
    assert lines[0] == "raising to affine: 3 function(s), 1 fully affine"
    assert lines[1].split() == ["function", "line:col", "construct", "raised", "reason"]
    columns = lines[1].index("line:col"), lines[1].index("construct"), lines[1].index("raised")
    for line in lines[2:9]:  # aligned: every row's cells start under their headers
        assert all(line[c - 1] == " " and line[c] != " " for c in columns), line
    assert lines[2].split() == ["kernel", "3:3", "for", "yes", "carries:", "add", "reduction"]
    assert lines[3].split(None, 4) == [
        "kernel",
        "5:3",
        "while",
        "no",
        "while loop: data-dependent exit",
    ]
    failed = ["failed", "20:6", "function", "no", "pass 'raise-mem2reg' failed: boom"]
    assert failed in [line.split(None, 4) for line in lines]
    assert lines[-3:] == [
        "kernel: not fully affine, 1/2 loops raised, reductions: add",
        "affine_only: fully affine, 1/1 loops raised",
        "failed: not fully affine, 0/1 loops raised",
    ]
    data = json.loads(report.to_json())
    assert data["fully_affine"] == ["affine_only"]
    first = data["functions"][0]["items"][0]
    assert first == {
        "construct": "for",
        "op": "affine.for",
        "raised": True,
        "file": "k.c",
        "line": 3,
        "column": 3,
        "statement": None,
        "reason": None,
        "reductions": ["add"],
    }


def test_report_names_the_alias_guards_copy_after_its_c_function() -> None:
    guarded = """
    func.func private @f(%A: memref<4xf64>) attributes {polyflow.no_raise, polyflow.alias_dispatcher = "f.affine"} {
      return
    }
    func.func private @f.affine(%A: memref<4xf64>) {
      return
    }
    func.func private @f.scf(%A: memref<4xf64>) attributes {polyflow.no_raise} {
      return
    }
    """
    with ir.Context():
        module = ir.Module.parse(guarded)
        report = report_mod.RaiseReport.from_module(module, functions=["f"])
        assert [fn.name for fn in report.functions] == ["f"] and report.fully_affine == ["f"]
        module.body.operations[1].attributes["polyflow.not_affine"] = ir.StringAttr.get("boom")
        (warning,) = raising.raise_warnings(module)
        assert "function 'f' is not raised to affine" in warning


def test_raise_report_api_and_cli_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "saxpy.c"
    src.write_text(SAXPY)
    report = polyflow.raise_report(src)
    assert [fn.name for fn in report.functions] == ["kernel"]
    assert report.enabled and report.seconds is not None
    assert report.function("kernel").loops[0].where == "2:3"
    assert polyflow.raise_report(SAXPY, functions=["nothing"]).functions == ()
    # --report goes to stderr: with `-o -` stdout holds the IR alone
    assert main(["build", str(src), "--emit=affine", "-o", "-", "--report"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("module") and "raising to affine" not in captured.out
    err = captured.err.splitlines()
    assert err[0].startswith("raising to affine: 1 function(s)")
    assert err[1].split() == ["function", "line:col", "construct", "raised", "reason"]
    assert err[2].split()[:3] == ["kernel", "2:3", "for"]
    summary = [line for line in err if line.startswith("kernel: ")]
    assert summary and "/1 loops raised" in summary[0]
    # then the notes: its C pointers are sized at run time (raising/pointer_extents.py)
    assert err[-1].startswith("note: kernel: parameters 3 and 4 are C pointers")
    # and the build still happens
    exe = tmp_path / "prog"
    prog = tmp_path / "prog.c"
    prog.write_text(SAXPY + MAIN_SAXPY)
    assert main(["build", str(prog), "-o", str(exe), "--report"]) == 0
    assert "raising to affine: 1 function(s)" in capsys.readouterr().err
    assert run(exe) == "1 3 5\n"
    assert main(["build", str(prog), "--emit=mlir", "-o", "-", "--report", "-O0"]) == 0
    assert "(raising is off: -O0 or raise_affine=False)" in capsys.readouterr().err


MAIN_SAXPY = """#include <stdio.h>
int main(void) {
  double x[3] = {0, 1, 2}, y[3] = {1, 1, 1};
  kernel(3, 2.0, x, y);
  printf("%g %g %g\\n", y[0], y[1], y[2]);
  return 0;
}
"""


def run(exe: Path) -> str:
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


# --- a failing pass is contained to its function ---------------------------------------------

TWO_FUNCTIONS = """void good(int n, double *a) { for (int i = 0; i < n; i++) a[i] = a[i] + 1.0; }
void bad(int n, double *a) {
  for (int i = 0; i < n; i++)
    a[i] = 2.0 * a[i];
}
"""


@dataclass(frozen=True)
class Saboteur:
    """A pass that breaks function `bad` the way `mode` says, after damaging its IR, and marks
    every other function it sees."""

    name: str = "test-saboteur"
    mode: str = "raise"

    def __call__(self, op: ir.Operation, pass_: object) -> None:
        fn = op.operation
        if ir.StringAttr(fn.attributes["sym_name"]).value != "bad":
            fn.attributes["polyflow.test_seen"] = ir.UnitAttr.get()
            return
        body = fn.regions[0].blocks[0]
        terminator = list(body.operations)[-1]
        if self.mode == "invalid-ir":
            terminator.erase()  # a block without terminator: the verifier rejects it
            return
        for op_ in list(body.operations)[:-1]:  # half-done work the fallback must not keep
            if not op_.results or all(len(list(r.uses)) == 0 for r in op_.results):
                op_.erase()
        if self.mode == "raise":
            raise RuntimeError("simulated bug")
        pass_.signal_pass_failure()  # type: ignore[attr-defined]


@pytest.fixture
def saboteur(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(passes.PASSES, "test-saboteur", f"{__name__}:Saboteur")
    monkeypatch.setattr(
        raising, "RAISE_PIPELINE", "canonicalize,test-saboteur{mode=MODE},cse", raising=True
    )


@pytest.mark.parametrize(
    "mode,why",
    [
        ("raise", "RuntimeError: simulated bug"),
        ("signal", "it signalled failure"),
        ("invalid-ir", "block with no terminator"),
    ],
)
def test_a_failing_pass_leaves_its_function_unraised_and_correct(
    monkeypatch: pytest.MonkeyPatch, saboteur: None, mode: str, why: str
) -> None:
    monkeypatch.setattr(
        raising, "RAISE_PIPELINE", raising.RAISE_PIPELINE.replace("MODE", mode), raising=True
    )
    fn = polyflow.compile_c(TWO_FUNCTIONS, entry="bad")
    (warning,) = fn.warnings
    assert warning.startswith("<input>:2:6: warning: function 'bad' is not raised to affine")
    assert f"pass 'test-saboteur{{mode={mode}}}' failed" in warning and why in warning
    affine = fn.mlir("affine")
    bad = affine[affine.index("@bad(") : affine.index("@__polyflow_bad")]
    assert "scf.for" in bad and "memref.store" in bad and "polyflow.not_affine" in bad
    good = affine[affine.index("@good(") : affine.index("@__polyflow_good")]
    assert "polyflow.test_seen" in good  # the other function was raised as usual
    a = np.arange(4.0)
    fn(4, a)
    assert np.array_equal(a, 2.0 * np.arange(4.0))


def test_a_failing_pass_in_a_build(
    monkeypatch: pytest.MonkeyPatch, saboteur: None, tmp_path: Path
) -> None:
    monkeypatch.setattr(
        raising, "RAISE_PIPELINE", raising.RAISE_PIPELINE.replace("MODE", "raise"), raising=True
    )
    src = tmp_path / "prog.c"
    src.write_text(
        TWO_FUNCTIONS
        + '#include <stdio.h>\nint main(void) { double a[2] = {1, 2}; good(2, a); bad(2, a); printf("%g %g\\n", a[0], a[1]); return 0; }\n'
    )
    report = polyflow.build_program(src, tmp_path / "prog", raise_report=True)
    assert report.compiled == ["bad", "good"]
    assert any("function 'bad' is not raised to affine" in w for w in report.warnings)
    assert report.raising.function("bad").error.startswith("pass 'test-saboteur")
    assert report.raising.function("good").error is None
    assert run(tmp_path / "prog") == "4 6\n"


def test_a_pass_that_cannot_be_built_leaves_everything_unraised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(passes.PASSES, "test-missing-class", f"{__name__}:NoSuchPass")
    monkeypatch.setattr(raising, "RAISE_PIPELINE", "canonicalize,test-missing-class", raising=True)
    fn = polyflow.compile_c(SAXPY)
    assert len(fn.warnings) == 1 and "the raising pipeline could not be built" in fn.warnings[0]
    x, y = np.arange(3.0), np.zeros(3)
    fn(3, 1.0, x, y)
    assert np.array_equal(y, x)


def test_a_pass_whose_module_is_missing_leaves_the_code_unraised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(passes.PASSES, "test-absent", "polyflow.raising.no_such_module:Absent")
    monkeypatch.setattr(raising, "RAISE_PIPELINE", "canonicalize,test-absent{x=1},cse")
    fn = polyflow.compile_c(SAXPY)
    assert len(fn.warnings) == 1 and "pass 'test-absent' is not available" in fn.warnings[0]
    x, y = np.arange(3.0), np.zeros(3)
    fn(3, 1.0, x, y)
    assert np.array_equal(y, x)


# --- lowering takes what raising produces -----------------------------------------------------

LOWERING_IR = """
#lb = affine_map<(d0)[s0] -> (0, d0 - s0)>
#ub = affine_map<(d0)[s0] -> (d0 + 3, s0)>
func.func @k(%n: index, %out: memref<16xi64>) attributes {llvm.emit_c_interface} {
  %z = arith.constant 0 : i64
  affine.for %i = 0 to 16 {
    %s = affine.for %j = max #lb(%i)[%n] to min #ub(%i)[%n] iter_args(%acc = %z) -> (i64) {
      %jj = arith.index_cast %j : index to i64
      %t = arith.addi %acc, %jj : i64
      affine.yield %t : i64
    } {polyflow.reductions = ["add"]}
    %m = affine.min affine_map<(d0)[s0] -> (d0 floordiv 2, s0 - d0)>(%i)[%n]
    %mm = arith.index_cast %m : index to i64
    %v = affine.if affine_set<(d0)[s0] : (d0 mod 3 == 0, s0 - d0 - 1 >= 0)>(%i)[%n] -> i64 {
      affine.yield %s : i64
    } else {
      %neg = arith.subi %mm, %s : i64
      affine.yield %neg : i64
    }
    affine.store %v, %out[%i] : memref<16xi64>
  } {polyflow.not_affine = "ignored by lowering"}
  return
}
"""


def test_lowering_handles_affine_if_with_results_and_min_max_bounds() -> None:
    from mlir.execution_engine import ExecutionEngine
    from mlir.runtime import get_ranked_memref_descriptor

    n = 9
    expected = np.zeros(16, dtype=np.int64)
    for i in range(16):
        s = sum(range(max(0, i - n), min(i + 3, n)))
        m = min(i // 2, n - i)
        expected[i] = s if (i % 3 == 0 and n - i - 1 >= 0) else m - s
    with ir.Context():
        module = lower_to_llvm_dialect(ir.Module.parse(LOWERING_IR))
        out = np.zeros(16, dtype=np.int64)
        descriptor = ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(out)))
        ExecutionEngine(module).invoke("k", ctypes.pointer(ctypes.c_int64(n)), descriptor)
    assert np.array_equal(out, expected)


# --- the PolyBench survey ---------------------------------------------------------------------


def test_survey_on_two_kernels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bench_polybench import raise_survey

    out = tmp_path / "survey.json"
    assert raise_survey.main(["--size", "MINI", "--kernels", "gemm,atax", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert [k["kernel"] for k in data["kernels"]] == ["gemm", "atax"]
    gemm = data["kernels"][0]
    assert gemm["function"] == "kernel_gemm" and gemm["error"] is None
    assert gemm["loops"] == 4 and 0 <= gemm["loops_raised"] <= 4 and gemm["ms"] > 0
    assert data["totals"]["kernels"] == 2 and data["totals"]["errors"] == 0
    text = capsys.readouterr().out
    assert "Raising to affine, MINI dataset" in text and "fully affine:" in text


def test_the_report_calls_a_carried_value_that_is_no_reduction_a_recurrence() -> None:
    source = (
        "unsigned lcg(int n, unsigned x) {\n"
        "  for (int i = 0; i < n; i++)\n"
        "    x = x * 1103515245u + 12345u;\n"
        "  return x;\n}\n"
    )
    report = polyflow.raise_report(source)
    (loop,) = report.function("lcg").loops
    assert loop.raised and loop.reductions == ("none",)
    assert "carries: recurrence" in report.format()
    (remark,) = [r for r in report.remarks() if r.kind == "loop"]
    assert remark.message == "for loop raised to affine (carries: recurrence)"


def test_the_report_names_loops_as_the_c_source_does() -> None:
    source = (
        "int find(int n, int *a, int v) {\n  int k = -1;\n"
        "  for (int i = 0; i < n; i++) {\n    if (a[i] == v) { k = i; break; }\n  }\n"
        "  return k;\n}\n"
        "int total(int n, int *a) {\n  int i = 0, s = 0;\n"
        "  do { s += a[i]; i++; } while (i < n && s < 100);\n  return s;\n}\n"
    )
    report = polyflow.raise_report(source)
    (find,) = report.function("find").loops
    assert (find.construct, find.op, find.raised) == ("for", "scf.while", False)
    assert find.reason is not None and find.reason.startswith(
        "a for loop made a while loop by a break"
    )
    (total,) = report.function("total").loops
    assert total.construct == "do" and total.reason.startswith("a do-while loop: ")  # type: ignore[union-attr]


def test_counted_loops_comparing_signed_with_unsigned_are_raised() -> None:
    """`size_t k < 2` and `int i = 0; i < unsigned_n` are counted loops (the signed side is a
    constant >= 0); `int i = -1; i < unsigned_n` is not: -1 becomes the largest unsigned."""
    source = """
    #include <stddef.h>
    void pair_swap(double *d, size_t s, size_t i, size_t j) {
      for (size_t k = 0; k < 2; k++) {
        double t = d[j * s + k]; d[j * s + k] = d[i * s + k]; d[i * s + k] = t;
      }
    }
    long from_zero(const long *x, unsigned n) {
      long s = 0;
      for (int i = 0; i < n; i++) s += x[i];
      return s;
    }
    long from_minus_one(const long *x, unsigned n) {
      long s = 0;
      for (int i = -1; i < n; i++) s += x[i + 1];
      return s;
    }
    """
    affine = polyflow.compile_c(source, "pair_swap").mlir("affine")
    bodies = {
        name: affine.split(f"func.func private @{name}(")[1].split("func.func")[0]
        for name in ("pair_swap", "from_zero", "from_minus_one")
    }
    assert "affine.for" in bodies["pair_swap"]
    assert "affine.for" in bodies["from_zero"]
    assert "affine.for" not in bodies["from_minus_one"] and "scf.while" in bodies["from_minus_one"]


def test_do_while_zero_is_no_loop() -> None:
    """A macro's `do { ... } while (0)` is its body; with a `break` of its own it stays a loop."""
    source = """
    int f(int n, int *a) {
      if (n < 0) do { a[0] = 1; return -1; } while (0);
      do { a[1] = 2; } while (0);
      return 0;
    }
    int g(int n, int *a) {
      do { if (n) break; a[0] = 3; } while (0);
      return 0;
    }
    """
    mlir = polyflow.compile_c(source, "f").mlir("mlir")
    f_body = mlir.split("func.func private @f(")[1].split("func.func")[0]
    g_body = mlir.split("func.func private @g(")[1].split("func.func")[0]
    assert "scf.while" not in f_body and "scf.while" in g_body


def test_struct_parameters_passed_to_accessors_become_their_fields() -> None:
    """`get(a, i, k)` with `a` the caller's struct parameter passes get's fields instead
    (c_struct_forwarding.py); the accessor is then inlined and the loops are affine. An
    accessor that counts its calls in the struct keeps its caller with cc."""
    source = """
    typedef struct { int rows, cols; double *data; } Mat;
    typedef struct { int n; long count; double *x; } Counted;
    static double get(const Mat *m, int i, int j) { return m->data[i * m->cols + j]; }
    double trace_ab(const Mat *a, const Mat *b) {
      double s = 0;
      for (int i = 0; i < a->rows; i++)
        for (int k = 0; k < a->cols; k++)
          s += get(a, i, k) * get(b, k, i);
      return s;
    }
    static double counted_get(Counted *c, int i) { c->count++; return c->x[i]; }
    double counted_sum(Counted *c) {
      double s = 0;
      for (int i = 0; i < c->n; i++) s += counted_get(c, i);
      return s;
    }
    """
    fn = polyflow.compile_c(source, "trace_ab", options={"opt_level": 3})
    affine = fn.mlir("affine")
    body = affine.split("func.func private @trace_ab(")[1].split("func.func")[0]
    assert body.count("affine.for") == 2 and "call @get" not in body
    assert "@counted_sum(" not in affine and "@counted_get(" in affine
