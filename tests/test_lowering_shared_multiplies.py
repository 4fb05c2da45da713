"""Multiplies shared by several adds become a multiply-add per use
(lowering/shared_multiplies.py): IR in and out, the machine code of heat-3d's element, and
programs against gcc -O2."""

from __future__ import annotations

from pathlib import Path

import pytest
from difftest import check_program_against_gcc
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


# PolyBench's heat-3d: `2.0 * A[i][j][k]` subtracted on each of the three axes
HEAT = Path(__file__).parent / "programs" / "heat3d.c"


def test_heat_3d_subtracts_its_doubled_centre_with_fused_ops(tmp_path: Path) -> None:
    options = Options(opt_level=3, march="x86-64-v3")
    asm = tmp_path / "heat.s"
    polyflow.build_program(HEAT, asm, options=options, emit="asm", cache=None)
    text = asm.read_text()
    assert "vfnmadd" in text  # x - 2a as one fused op
    plain = tmp_path / "plain.s"
    off = options.model_copy(update={"fp_contract": "off"})
    polyflow.build_program(HEAT, plain, options=off, emit="asm", cache=None)
    assert "vfnmadd" not in plain.read_text() and "vfmadd" not in plain.read_text()


@pytest.mark.parametrize("march", ["x86-64-v3", ""])
def test_heat_3d_prints_gccs_digits(tmp_path: Path, march: str) -> None:
    # 2a is exact: fused or not, every element rounds alike (the program hashes their bits)
    check_program_against_gcc(HEAT, tmp_path, Options(opt_level=3, march=march))
