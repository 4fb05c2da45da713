"""Multiplies shared by several adds become a multiply-add per use
(lowering/shared_multiplies.py): IR in and out, the machine code of heat-3d's element, and
programs against gcc -O2."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from mlir import ir

import polyflow
from polyflow import Options
from polyflow.lowering.shared_multiplies import fuse_shared_multiplies

SHARED = """
llvm.func @f(%a: f64, %x: f64, %y: f64, %z: f64) -> f64 {
  %c = llvm.mlir.constant(2.0 : f64) : f64
  %m = llvm.fmul %a, %c : f64
  %0 = llvm.fsub %x, %m : f64
  %1 = llvm.fadd %m, %y {fastmathFlags = #llvm.fastmath<contract>} : f64
  %2 = llvm.fsub %m, %z : f64
  %3 = llvm.fadd %0, %1 : f64
  %4 = llvm.fadd %3, %2 : f64
  llvm.return %4 : f64
}
"""


def _fused(text: str) -> tuple[int, str]:
    with ir.Context():
        module = ir.Module.parse(text)
        count = fuse_shared_multiplies(module)
        assert module.operation.verify()
        return count, str(module)


def test_each_use_of_a_shared_multiply_becomes_a_multiply_add() -> None:
    count, text = _fused(SHARED)
    assert count == 1
    assert "llvm.fmul" not in text
    assert text.count("llvm.intr.fmuladd") == 3
    # x - a*c: the multiplier negated; a*c - z: the addend negated; flags kept
    assert "llvm.fneg %arg0" in text and "llvm.fneg %arg3" in text
    assert "fastmathFlags = #llvm.fastmath<contract>" in text


@pytest.mark.parametrize(
    ("uses", "why"),
    [
        ("%0 = llvm.fsub %x, %m : f64\n  %1 = llvm.fadd %0, %x : f64", "one use: LLVM fuses it"),
        ("%0 = llvm.fsub %x, %m : f64\n  %1 = llvm.fdiv %m, %0 : f64", "a division uses it"),
        ("%0 = llvm.fadd %m, %m : f64\n  %1 = llvm.fadd %0, %m : f64", "an add of it twice"),
    ],
)
def test_a_multiply_with_any_other_use_stays(uses: str, why: str) -> None:
    text = f"""
    llvm.func @f(%a: f64, %x: f64) -> f64 {{
      %m = llvm.fmul %a, %x : f64
      {uses}
      llvm.return %1 : f64
    }}
    """
    count, out = _fused(text)
    assert count == 0, why
    assert "llvm.fmul" in out and "fmuladd" not in out


def test_vectors_and_other_blocks() -> None:
    text = """
    llvm.func @f(%a: vector<8xf64>, %x: vector<8xf64>, %b: i1) -> vector<8xf64> {
      %m = llvm.fmul %a, %x : vector<8xf64>
      %0 = llvm.fadd %m, %x : vector<8xf64>
      llvm.cond_br %b, ^t, ^e
    ^t:
      %1 = llvm.fadd %m, %0 : vector<8xf64>
      llvm.return %1 : vector<8xf64>
    ^e:
      %2 = llvm.fadd %0, %m : vector<8xf64>
      %3 = llvm.fsub %2, %m : vector<8xf64>
      llvm.return %3 : vector<8xf64>
    }
    """
    count, out = _fused(text)
    assert count == 0  # a use in another block: the multiply stays for it
    same_block = """
    llvm.func @f(%a: vector<8xf64>, %x: vector<8xf64>) -> vector<8xf64> {
      %m = llvm.fmul %a, %x : vector<8xf64>
      %0 = llvm.fadd %m, %x : vector<8xf64>
      %1 = llvm.fsub %0, %m : vector<8xf64>
      llvm.return %1 : vector<8xf64>
    }
    """
    count, out = _fused(same_block)
    assert count == 1 and out.count("llvm.intr.fmuladd") == 2


HEAT = """
#include <stdio.h>
#define N 24
static double A[N][N][N], B[N][N][N];
static void step(int n) {
  for (int i = 1; i < n - 1; i++)
    for (int j = 1; j < n - 1; j++)
      for (int k = 1; k < n - 1; k++)
        B[i][j][k] = 0.125 * (A[i + 1][j][k] - 2.0 * A[i][j][k] + A[i - 1][j][k]) +
                     0.125 * (A[i][j + 1][k] - 2.0 * A[i][j][k] + A[i][j - 1][k]) +
                     0.125 * (A[i][j][k + 1] - 2.0 * A[i][j][k] + A[i][j][k - 1]) + A[i][j][k];
}
int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = 0; k < N; k++) A[i][j][k] = (double)((i * 7 + j * 3 + k) % 11) / 3.0;
  step(N);
  double s = 0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = 0; k < N; k++) s += B[i][j][k] * (1 + (i + j + k) % 5);
  printf("%.17g %.17g %.17g\\n", s, B[5][6][7], B[N - 2][1][N - 2]);
  return 0;
}
"""


def test_heat_3d_subtracts_its_doubled_centre_with_fused_ops(tmp_path: Path) -> None:
    source = tmp_path / "heat.c"
    source.write_text(HEAT)
    options = Options(opt_level=3, march="x86-64-v3")
    asm = tmp_path / "heat.s"
    polyflow.build_program(source, asm, options=options, emit="asm", cache=None)
    text = asm.read_text()
    assert "vfnmadd" in text  # x - 2a as one fused op
    plain = tmp_path / "plain.s"
    off = options.model_copy(update={"fp_contract": "off"})
    polyflow.build_program(source, plain, options=off, emit="asm", cache=None)
    assert "vfnmadd" not in plain.read_text() and "vfmadd" not in plain.read_text()


@pytest.mark.parametrize("march", ["x86-64-v3", ""])
def test_heat_3d_prints_gccs_digits(tmp_path: Path, march: str) -> None:
    # 2a is exact: fused or not, every element rounds alike
    source = tmp_path / "heat.c"
    source.write_text(HEAT)
    options = Options(opt_level=3, march=march) if march else Options(opt_level=3)
    polyflow.build_program(source, tmp_path / "pf", options=options, cache=None)
    subprocess.run(
        ["gcc", "-O2", "-ffp-contract=off", str(source), "-o", str(tmp_path / "ref")], check=True
    )
    ours = subprocess.run([tmp_path / "pf"], capture_output=True, text=True, check=True)
    ref = subprocess.run([tmp_path / "ref"], capture_output=True, text=True, check=True)
    assert ours.stdout == ref.stdout
