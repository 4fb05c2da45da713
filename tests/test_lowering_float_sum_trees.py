"""Chains of reassociable adds become balanced trees under -ffast-math
(lowering/float_sum_trees.py): IR in and out, the sums that stay chains, and a Gauss-Seidel
program against gcc -O2 at a reassociating build's tolerance."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from mlir import ir
from test_schedule_interleave import SEIDEL_2D

import polyflow
from polyflow import Options
from polyflow.lowering.float_sum_trees import balance_float_sums

FAST = "fastmath<fast>"


def _chain(terms: list[str], flags: str = FAST, body: str = "") -> str:
    """A function summing `terms` (SSA names defined in `body`) left to right."""
    lines = [f"%s1 = arith.addf {terms[0]}, {terms[1]} {flags} : f64"]
    for position, term in enumerate(terms[2:], start=2):
        lines.append(f"%s{position} = arith.addf %s{position - 1}, {term} {flags} : f64")
    result = f"%s{len(terms) - 1}"
    joined = "\n  ".join(lines)
    return f"""
func.func @f(%m: memref<16xf64>, %x: f64, %y: f64) -> f64 {{
  {body}
  {joined}
  return {result} : f64
}}
"""


LOADS = "\n  ".join(f"%l{k} = memref.load %m[%c{k}] : memref<16xf64>" for k in range(8))
CONSTANTS = "\n  ".join(f"%c{k} = arith.constant {k} : index" for k in range(8))


class Balanced:
    """What `balance_float_sums` made of a function: how many sums changed, the text, the most
    adds one after the other on a path, and the ops defining the last add's operands."""

    def __init__(self, text: str) -> None:
        with ir.Context(), ir.Location.unknown():
            module = ir.Module.parse(text)
            self.count = balance_float_sums(module)
            assert module.operation.verify()
            self.text = str(module)
            block = module.body.operations[0].regions[0].blocks[0]
            adds = [op for op in block.operations if op.operation.name == "arith.addf"]
            depth: dict[ir.Value, int] = {}
            self.depth = 0
            for op in adds:
                level = 1 + max(depth.get(operand, 0) for operand in op.operands)
                depth[op.result] = level
                self.depth = max(self.depth, level)
            self.last_operands = (
                [
                    "arg" if isinstance(v.owner, ir.Block) else v.owner.name
                    for v in adds[-1].operands
                ]
                if adds
                else []
            )


def test_a_chain_of_eight_loads_becomes_a_tree_of_three_levels() -> None:
    done = Balanced(_chain([f"%l{k}" for k in range(8)], body=CONSTANTS + "\n  " + LOADS))
    assert done.count == 1
    assert done.text.count("arith.addf") == 7  # the same number of adds
    assert done.depth == 3
    # the adds lose reassociation (LLVM would write them back as a chain), keep the rest
    assert "fastmath<nnan,ninf,nsz,arcp,contract,afn>" in done.text
    assert "fastmath<fast>" not in done.text


def test_the_term_ready_last_is_added_last() -> None:
    # %late is a quotient (about 14 cycles): the loads are summed first, it joins the top add
    body = CONSTANTS + "\n  " + LOADS + "\n  %late = arith.divf %x, %y : f64"
    done = Balanced(_chain(["%late", "%l0", "%l1", "%l2", "%l3"], body=body))
    assert done.count == 1
    assert sorted(done.last_operands) == ["arith.addf", "arith.divf"]
    assert done.depth == 3


@pytest.mark.parametrize(
    ("terms", "body", "why"),
    [
        (["%l0", "%l1", "%l2"], CONSTANTS + "\n  " + LOADS, "two adds: as short as a tree"),
        (
            ["%p0", "%p1", "%p2", "%p3"],
            CONSTANTS
            + "\n  "
            + LOADS
            + "".join(f"\n  %p{k} = arith.mulf %l{k}, %x : f64" for k in range(4)),
            "products: multiply-adds absorb them in a chain",
        ),
    ],
)
def test_sums_that_stay_chains(terms: list[str], body: str, why: str) -> None:
    done = Balanced(_chain(terms, body=body))
    assert done.count == 0, why
    assert "fastmath<fast>" in done.text


def test_adds_without_reassociation_stay() -> None:
    # a recurrence's ops keep C's order under -ffast-math (llvm_dialect.allow_fast_math)
    in_order = "fastmath<nnan,ninf,nsz,arcp,contract,afn>"
    done = Balanced(_chain([f"%l{k}" for k in range(6)], in_order, CONSTANTS + "\n  " + LOADS))
    assert done.count == 0


def test_a_loops_running_sum_stays_a_chain() -> None:
    # the carried value is a term: LLVM vectorizes this as a reduction, which needs reassoc
    text = f"""
func.func @f(%m: memref<16xf64>) -> f64 {{
  {CONSTANTS}
  %zero = arith.constant 0.0 : f64
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f64) {{
    %a = memref.load %m[%i] : memref<16xf64>
    %b = memref.load %m[%c5] : memref<16xf64>
    %c = memref.load %m[%c6] : memref<16xf64>
    %s1 = arith.addf %acc, %a {FAST} : f64
    %s2 = arith.addf %s1, %b {FAST} : f64
    %s3 = arith.addf %s2, %c {FAST} : f64
    scf.yield %s3 : f64
  }}
  return %r : f64
}}
"""
    assert Balanced(text).count == 0


def test_vectors_and_a_chain_in_a_loop_body() -> None:
    text = f"""
func.func @f(%v: memref<64xf64>, %out: memref<64xf64>) {{
  {CONSTANTS}
  %c64 = arith.constant 64 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c64 step %c8 {{
    %a = vector.load %v[%i] : memref<64xf64>, vector<8xf64>
    %b = vector.load %v[%c1] : memref<64xf64>, vector<8xf64>
    %c = vector.load %v[%c2] : memref<64xf64>, vector<8xf64>
    %d = vector.load %v[%c3] : memref<64xf64>, vector<8xf64>
    %s1 = arith.addf %a, %b {FAST} : vector<8xf64>
    %s2 = arith.addf %s1, %c {FAST} : vector<8xf64>
    %s3 = arith.addf %s2, %d {FAST} : vector<8xf64>
    vector.store %s3, %out[%i] : memref<64xf64>, vector<8xf64>
  }}
  return
}}
"""
    done = Balanced(text)
    assert done.count == 1
    assert done.text.count("arith.addf") == 3 and "fastmath<fast>" not in done.text


# Gauss-Seidel in place (test_schedule_interleave's seidel-2d) at a small size: a sum of nine
# loads per point
SEIDEL = SEIDEL_2D.replace("#define N 203", "#define N 61").replace("STEPS", "7")
SEIDEL = SEIDEL.replace("SIZE", "N")
PRINTED = sum(len(range(i % 3, 61, 3)) for i in range(61))


@pytest.mark.parametrize("threads", [1, 2])
def test_gauss_seidel_under_fast_math_against_gcc(tmp_path: Path, threads: int) -> None:
    src = tmp_path / "seidel.c"
    src.write_text(SEIDEL)
    options = Options(opt_level=3, fast_math=True, threads=threads)
    lowered = tmp_path / "seidel.mlir"
    polyflow.build_program(src, lowered, options=options, emit="llvm-dialect", cache=None)
    text = lowered.read_text()
    # the nine terms as a tree: adds without reassociation (a chain would keep `fast`)
    assert text.count("llvm.fadd") >= 8
    assert "#llvm.fastmath<nnan, ninf, nsz, arcp, contract, afn>" in text
    ref, exe = tmp_path / "ref", tmp_path / "fast"
    subprocess.run(["gcc", "-O2", str(src), "-o", str(ref)], check=True)
    polyflow.build_program(src, exe, options=options, cache=None)
    want = subprocess.run([ref], capture_output=True, text=True, check=True).stdout.split()
    got = subprocess.run([exe], capture_output=True, text=True, check=True).stdout.split()
    assert len(got) == len(want) == PRINTED
    for g, w in zip(got, want, strict=True):
        assert float(g) == pytest.approx(float(w), rel=1e-12)


def test_a_sum_of_thousands_of_terms_after_a_long_chain() -> None:
    # an unrolled sum and a term at the end of a long chain of ops: no recursion limit
    loads = "\n  ".join(f"%l{k} = memref.load %m[%c0] : memref<16xf64>" for k in range(3000))
    chain = "\n  ".join(f"%n{k + 1} = arith.negf %n{k} : f64" for k in range(3000))
    body = f"%c0 = arith.constant 0 : index\n  {loads}\n  %n0 = arith.negf %x : f64\n  {chain}"
    done = Balanced(_chain([f"%l{k}" for k in range(3000)] + ["%n3000"], body=body))
    assert done.count == 1
    assert done.depth == 13  # the 3000 loads in 12 levels, then the late term
    assert sorted(done.last_operands) == ["arith.addf", "arith.negf"]  # the late term last
