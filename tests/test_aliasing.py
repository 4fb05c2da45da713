"""The one alias analysis (polyflow/ir/aliasing.py): its rules on argument, global, local, view
and unknown memrefs, and, through each stage that asks it (the alias guard, raise-reductions,
the polyhedral model, the parallelizer, the micro-kernels), programs whose arrays really are
one: a function handed the global it also names, built at -O3 and checked against gcc."""

from __future__ import annotations

from pathlib import Path

import pytest
from difftest import check_program_against_gcc
from mlir import ir

import polyflow
from polyflow.frontend.c import emit_c_module
from polyflow.frontend.c_parse import parse_c
from polyflow.ir.aliasing import has_unknown_extent, may_alias, origin, view_root

RULES = """
memref.global "private" @G : memref<8xf64> = uninitialized
memref.global "private" @H : memref<8xf64> = uninitialized
func.func private @make() -> memref<8xf64>
func.func @k(%a: memref<8xf64>, %b: memref<8xf64>,
             %p: memref<?xf64> {polyflow.unknown_extent}) {
  %g1 = memref.get_global @G : memref<8xf64>
  %g2 = memref.get_global @G : memref<8xf64>
  %h = memref.get_global @H : memref<8xf64>
  %t = memref.alloca() : memref<8xf64>
  %u = memref.alloca() : memref<8xf64>
  %v = memref.subview %a[0] [4] [1] : memref<8xf64> to memref<4xf64, strided<[1]>>
  %c = func.call @make() : () -> memref<8xf64>
  return
}
"""


@pytest.fixture(scope="module")
def values() -> dict[str, ir.Value]:
    context = ir.Context()
    context.allow_unregistered_dialects = True
    with context:
        module = ir.Module.parse(RULES)
        fn = next(
            op.operation
            for op in module.body.operations
            if op.operation.name == "func.func" and len(op.regions[0].blocks) > 0
        )
        block = fn.regions[0].blocks[0]
        found: dict[str, ir.Value] = dict(zip("abp", block.arguments, strict=True))
        for op, name in zip(block.operations, ["g1", "g2", "h", "t", "u", "v", "c"], strict=False):
            found[name] = op.result
        found["_module"] = module  # type: ignore[assignment]  # keeps the IR alive
        return found


@pytest.mark.parametrize(
    ("x", "y", "alias", "rule"),
    [
        ("a", "a", True, "a value aliases itself"),
        ("a", "v", True, "a view aliases what it views"),
        ("a", "b", False, "distinct arguments of known extent: the alias guard checked them"),
        ("a", "p", True, "an argument from a C pointer was not checked"),
        ("t", "a", False, "a local allocation aliases nothing else"),
        ("t", "p", False, "not even an unchecked pointer"),
        ("t", "u", False, "two allocations are distinct"),
        ("t", "c", True, "unknown before fresh: the allocation may come back from a call"),
        ("g1", "g2", True, "two reads of one global's address"),
        ("g1", "h", False, "distinct globals"),
        ("a", "g1", True, "an argument may be the global (f(G))"),
        ("v", "h", True, "through a view too"),
        ("c", "a", True, "a call's result may be anything"),
        ("c", "g1", True, "a call's result may be a global"),
    ],
)
def test_rules(values: dict[str, ir.Value], x: str, y: str, alias: bool, rule: str) -> None:
    assert may_alias(values[x], values[y]) is alias, rule
    assert may_alias(values[y], values[x]) is alias, "symmetric"


def test_origins_and_views(values: dict[str, ir.Value]) -> None:
    assert view_root(values["v"]) == values["a"]
    assert origin(values["a"])[0] == "argument"
    assert origin(values["g1"]) == ("global", "G")
    assert origin(values["t"])[0] == "allocation"
    assert origin(values["c"])[0] == "unknown"
    assert has_unknown_extent(values["p"]) and not has_unknown_extent(values["a"])


def test_c_pointers_and_locals_from_the_frontend() -> None:
    """The C frontend's arguments carry what the rules read."""
    with ir.Context():
        module = emit_c_module(
            parse_c(
                "void kernel(int n, double A[8], double B[8], double *p) {\n double T[8];\n"
                " for (int i = 0; i < n; i++) { T[i] = p[i]; A[i] = B[i] + T[i]; }\n}\n",
                "t.c",
                polyflow.Options(),
            )
        ).module
    fn = next(
        op.operation
        for op in module.body.operations
        if op.operation.name == "func.func"
        and ir.StringAttr(op.attributes["sym_name"]).value == "kernel"
    )
    block = fn.regions[0].blocks[0]
    a, b, p = (block.arguments[k] for k in (1, 2, 3))
    local = next(op.result for op in block.operations if op.name == "memref.alloca")
    assert not may_alias(a, b)
    assert may_alias(a, p) and may_alias(p, b)
    assert not may_alias(local, a) and not may_alias(local, p)


# Each program hands a function the global it also reads or writes: a stage that took the
# argument and the global for distinct arrays would reorder, parallelize or register-promote
# across the overlap, and print something else than gcc.
ONE_ARRAY_TWO_NAMES = {
    # raise-reductions: A[0] accumulates while the loop reads G, which is A
    "reduction": """
#include <stdio.h>
#define N 64
double G[N];
void kernel(double A[N]) {
  for (int i = 0; i < N; i++) A[0] += G[i];
}
int main(void) {
  for (int i = 0; i < N; i++) G[i] = i + 1;
  kernel(G);
  printf("%.17g %.17g\\n", G[0], G[1]);
  return 0;
}
""",
    # the parallelizer: iteration i reads what iteration i-1 wrote
    "parallel": """
#include <stdio.h>
#define N 4096
double G[N];
void kernel(double a[N]) {
  for (int i = 1; i < N; i++) a[i] = G[i - 1] * 0.5 + 1.0;
}
int main(void) {
  for (int i = 0; i < N; i++) G[i] = i;
  kernel(G);
  double s = 0;
  for (int i = 0; i < N; i++) s += G[i] * (i % 7);
  printf("%.17g\\n", s);
  return 0;
}
""",
    # the polyhedral model: the second nest reads what the first wrote through the other name
    "schedule": """
#include <stdio.h>
#define N 96
double G[N][N];
void kernel(double a[N][N]) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) a[i][j] = i * 0.25 + j;
  for (int i = 1; i < N; i++)
    for (int j = 1; j < N; j++) G[i][j] = G[i - 1][j - 1] * 0.5 + G[i][j];
}
int main(void) {
  kernel(G);
  double s = 0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) s += G[i][j] * ((i + 2 * j) % 5);
  printf("%.17g\\n", s);
  return 0;
}
""",
    # the micro-kernels: C is also an operand of the contraction
    "contraction": """
#include <stdio.h>
#define N 48
double G[N][N];
double B[N][N];
void kernel(double C[N][N]) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = 0; k < N; k++) C[i][j] += G[i][k] * B[k][j];
}
int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) { G[i][j] = (i * j % 5) * 0.5; B[i][j] = ((i + j) % 3) * 0.25; }
  kernel(G);
  double s = 0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) s += G[i][j] * (1 + (i + j) % 4);
  printf("%.17g\\n", s);
  return 0;
}
""",
}


@pytest.mark.parametrize("name", sorted(ONE_ARRAY_TWO_NAMES))
def test_an_argument_that_is_a_global_matches_gcc(name: str, tmp_path: Path) -> None:
    source = tmp_path / f"{name}.c"
    source.write_text(ONE_ARRAY_TWO_NAMES[name])
    check_program_against_gcc(source, tmp_path, polyflow.Options(opt_level=3))
