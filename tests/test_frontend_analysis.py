"""The frontend's syntactic queries (polyflow/frontend/c_analysis.py): `walk` reads children off
the node slots, and must visit exactly what pycparser's `children()` lists, in the same order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pycparser import c_ast

from polyflow.frontend import c_analysis
from polyflow.frontend.c_parse import parse_c
from polyflow.options import Options

ROOT = Path(__file__).resolve().parent.parent

EVERY_KIND = r"""
#include <stdio.h>
typedef struct { int x; double y[4]; } pair;
enum colour { RED, GREEN = 4, BLUE };
static const int table[3] = {1, 2, 3};
int (*pick)(int, int);
static int add(int a, int b) { return a + b; }
double f(int n, double *restrict a, pair *p, const char *s) {
  double t = 0, u[2][2] = {{1, 2}, {3, 4}};
  for (int i = 0, j = n; i < n && j > 0; i++, j--) {
    if (i % 2) t += a[i] * u[i & 1][j & 1]; else { t -= p->y[i & 3]; continue; }
    while (t > 1e9) { t /= 2; if (t < 0) break; }
    do { t = -t; } while (0);
  }
  switch (n) { case RED: t++; break; case BLUE: { t--; } default: ; }
  t += sizeof(pair) + (double)(unsigned char)s[0] + (n ? table[1] : add(1, 2));
  pick = add;
  label: if (t < 0) goto label;
  return t + p[0].x + (*pick)(1, 2) + (int)GREEN;
}
int main(void) { printf("%f\n", f(0, 0, 0, "x")); return 0; }
"""


def _by_children(node: c_ast.Node) -> Iterator[c_ast.Node]:
    yield node
    for _, child in node.children():
        yield from _by_children(child)


def test_walk_visits_what_children_lists_in_pre_order(tmp_path: Path) -> None:
    sources = [("every.c", EVERY_KIND)] + [
        (path.name, path.read_text()) for path in sorted(ROOT.glob("examples/*.c"))
    ]
    for name, text in sources:
        parsed = parse_c(text, name, Options(), tmp_path)
        expected = list(_by_children(parsed.ast))
        got = list(c_analysis.walk(parsed.ast))
        assert len(got) == len(expected) > 100, name
        assert all(a is b for a, b in zip(got, expected, strict=True)), name
    assert list(c_analysis.walk(None)) == []


def test_the_name_queries_see_the_whole_statement(tmp_path: Path) -> None:
    parsed = parse_c(EVERY_KIND, "every.c", Options(), tmp_path)
    (f,) = [e for e in parsed.ast.ext if isinstance(e, c_ast.FuncDef) and e.decl.name == "f"]
    assert c_analysis.assigned_names(f.body) >= {"t", "i", "j", "pick"}
    assert {"add", "pick", "table", "n"} <= c_analysis.referenced_names(f.body)
    assert c_analysis.called_names(f.body) == {"add"}
    assert c_analysis.contains_return(f.body)
