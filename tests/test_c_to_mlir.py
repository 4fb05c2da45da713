"""The shape of the frontend's MLIR: counted loops are scf.for, others scf.while, arrays are memrefs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from polyflow.frontend.c import emit_c_module
from polyflow.frontend.c_parse import parse_c
from polyflow.options import Options
from polyflow.toolchain import llvm_bin


def frontend_mlir(src: str) -> str:
    cmod = emit_c_module(parse_c(src, "t.c", Options()))
    assert not cmod.skipped, cmod.skipped
    return str(cmod.module)


def filecheck(text: str, checks: str, tmp_path: Path) -> None:
    """Match `text` against FileCheck directives with LLVM's own FileCheck."""
    check_file = tmp_path / "checks.txt"
    check_file.write_text(checks)
    proc = subprocess.run(
        [str(llvm_bin("FileCheck")), str(check_file)], input=text, capture_output=True, text=True
    )
    assert proc.returncode == 0, f"{proc.stderr}\n--- input ---\n{text}"


CASES = {
    "counted loops become scf.for over index, subscripts stay index arithmetic": (
        "void k(int n, double A[100][200]) { for (int i = 0; i < n; i++) for (int j = i; j <= n; j++) A[i][j+1] = 0; }",
        """
        // CHECK: func.func private @k(%[[N:.*]]: i32, %[[A:.*]]: memref<100x200xf64>)
        // CHECK: %[[UB:.*]] = arith.index_cast %[[N]] : i32 to index
        // CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[UB]] step %{{.*}} {
        // CHECK: scf.for %[[J:.*]] = %[[I]] to %{{.*}} step
        // CHECK: %[[J1:.*]] = arith.addi %[[J]], %{{.*}} : index
        // CHECK: memref.store %{{.*}}, %[[A]][%[[I]], %[[J1]]] : memref<100x200xf64>
        """,
    ),
    "decreasing loops are normalized to a positive step": (
        "void k(int n, double *a) { for (int i = n - 1; i >= 0; i--) a[i] = 1.0; }",
        """
        // CHECK: %[[TRIPS:.*]] = arith.addi %{{.*}}, %{{.*}} : index
        // CHECK: scf.for %[[K:.*]] = %{{.*}} to %[[TRIPS]] step %{{.*}} {
        // CHECK: %[[I:.*]] = arith.subi %{{.*}}, %{{.*}} : index
        // CHECK: memref.store %{{.*}}, %{{.*}}[%[[I]]] : memref<?xf64>
        """,
    ),
    "while loops and loops with break become scf.while": (
        "int k(int n, double *a) { int i = 0; while (i < n && a[i] > 0) i++; for (int j = 0; j < n; j++) if (a[j] < 0) break; return i; }",
        """
        // CHECK: scf.while
        // CHECK: scf.condition
        // CHECK: scf.while
        // CHECK: scf.condition
        """,
    ),
    "VLA parameters are dynamic memrefs; the C-ABI entry builds their descriptors": (
        "void k(int n, int m, float A[n][m]) { A[0][0] = 1.0f; }",
        """
        // CHECK: func.func private @k(%{{.*}}: i32, %{{.*}}: i32, %{{.*}}: memref<?x?xf32>)
        // CHECK: func.func @__polyflow_k(%{{.*}}: i32, %{{.*}}: i32, %{{.*}}: !llvm.ptr)
        // CHECK: builtin.unrealized_conversion_cast %{{.*}} : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> to memref<?x?xf32>
        // CHECK: call @k(
        """,
    ),
    "globals are passed by reference after the parameters": (
        "static double G[8]; int count; void k(void) { G[count] = 1.0; }",
        """
        // CHECK: func.func private @k(%{{.*}}: memref<8xf64>, %{{.*}}: memref<i32>)
        """,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_frontend_mlir(name: str, tmp_path: Path) -> None:
    src, checks = CASES[name]
    filecheck(frontend_mlir(src), checks, tmp_path)


def test_statements_are_named_and_located() -> None:
    """Each expression statement's ops carry loc("S<n>"(file:line:col)), for later reports."""
    src = "void k(int n, double *a) {\n  for (int i = 0; i < n; i++) {\n    a[i] = a[i] * 2.0;\n    a[i] += 1.0;\n  }\n}\n"
    cmod = emit_c_module(parse_c(src, "t.c", Options()))
    with cmod.context:
        text = cmod.module.operation.get_asm(enable_debug_info=True)
    aliases = dict(
        line.split(" = ", 1)
        for line in text.splitlines()
        if line.startswith("#loc") and " = " in line
    )

    def resolve(alias: str) -> str:
        value = aliases[alias]
        for inner in sorted(aliases, key=len, reverse=True):
            value = value.replace(f"({inner})", f"({aliases[inner]})")
        return value

    stores = [
        line.rsplit("loc(", 1)[1].rstrip(")")
        for line in text.splitlines()
        if "memref.store" in line
    ]
    assert [resolve(a) for a in stores if a.startswith("#loc")] == [
        'loc("S0"(loc("t.c":3:5)))',
        'loc("S1"(loc("t.c":4:5)))',
    ]


def test_internal_error_in_one_function_leaves_only_that_one_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import polyflow.frontend.c as c

    original = c.FunctionEmitter.emit_body

    def broken_for_f(self: c.FunctionEmitter, body: object) -> None:
        if self.fn.name == "f":
            raise KeyError("simulated")
        original(self, body)  # type: ignore[arg-type]

    monkeypatch.setattr(c.FunctionEmitter, "emit_body", broken_for_f)
    cmod = emit_c_module(
        parse_c(
            "int g(int x) { return x + 1; }\nint f(int x) { return x * 2; }\n", "t.c", Options()
        )
    )
    assert sorted(cmod.functions) == ["g"]
    assert cmod.skipped["f"].reason == "internal error in polyflow (KeyError: 'simulated')"
    text = str(cmod.module)
    assert "@f(" not in text and "@__polyflow_f(" not in text and "@g(" in text
