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


def _rewritten(source: str) -> str:
    """`source`'s one function, its local pointers rewritten (c_pointer_locals), as C."""
    from pycparser import c_generator, c_parser

    from polyflow.frontend.c_pointer_locals import inline_pointer_locals, parameter_names

    fdef = c_parser.CParser().parse(source).ext[-1]
    inline_pointer_locals(fdef.body, parameter_names(fdef))
    return " ".join(c_generator.CGenerator().visit(fdef).split())


def test_a_pointer_set_once_becomes_subscripts_of_its_array() -> None:
    text = _rewritten(
        "typedef struct { double *data; } vec;\n"
        "void f(vec *v, double *a, int k, int n) {\n"
        "  double *const d = v->data; double *c = a + k; double *e = &a[n];\n"
        "  d[1] = *(c + 2) + *e + *(double *) (d + n);\n}"
    )
    assert "{ v->data[1] = (a[k + 2] + a[n]) + v->data[n]; }" in text


def test_an_offset_that_changes_later_is_kept_in_a_local() -> None:
    text = _rewritten("void f(double *a, int k) { double *r = a + k; k = 0; r[1] = k; }")
    assert "long r@offset = k;" in text and "a[r@offset + 1] = k;" in text


def test_pointers_that_move_escape_or_point_at_globals_are_left() -> None:
    for source in (
        "void f(double *a) { double *p = a; *p++ = 1; }",  # moves
        "void g(double *); void f(double *a) { double *p = a + 1; g(p); }",  # passed on
        "double t[4]; void f(void) { double *p = t; p[0] = 1; }",  # a global: a call may move
    ):
        assert "double *p" in _rewritten(source), source
    # a local shadows the offset's variable where the pointer is used: the offset is kept
    text = _rewritten("void f(double *a, int k) { double *p = a + k; { int k = 2; p[k] = 1; } }")
    assert "long p@offset = k; { int k = 2; a[p@offset + k] = 1; }" in text
