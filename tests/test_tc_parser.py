"""The Tensor Comprehensions lexer and parser (polyflow/frontend/tc/lexer.py, parser.py)."""

from __future__ import annotations

import pytest

from polyflow.errors import CompileError
from polyflow.frontend.tc import syntax as ast
from polyflow.frontend.tc.lexer import Kind, tokenize
from polyflow.frontend.tc.parser import parse


def at(source: str, line: int, text: str, nth: int = 0) -> ast.Pos:
    """The position of the `nth` occurrence of `text` on line `line` of `source`."""
    row = source.splitlines()[line - 1]
    column = -1
    for _ in range(nth + 1):
        column = row.index(text, column + 1)
    return ast.Pos(line, column + 1)


def only_def(source: str) -> ast.Definition:
    (definition,) = parse(source).definitions
    return definition


def test_tokens_carry_lines_and_columns_and_skip_comments() -> None:
    tokens = tokenize("def f # a comment\n  (x.1 += 2.5f, 3e2 -> !=)")
    assert [(t.kind, t.text, t.line, t.column) for t in tokens] == [
        (Kind.IDENT, "def", 1, 1),
        (Kind.IDENT, "f", 1, 5),
        (Kind.PUNCT, "(", 2, 3),
        (Kind.IDENT, "x", 2, 4),
        (Kind.PUNCT, ".", 2, 5),
        (Kind.INT, "1", 2, 6),
        (Kind.PUNCT, "+=", 2, 8),
        (Kind.FLOAT, "2.5f", 2, 11),
        (Kind.PUNCT, ",", 2, 15),
        (Kind.FLOAT, "3e2", 2, 17),
        (Kind.PUNCT, "->", 2, 21),
        (Kind.PUNCT, "!=", 2, 24),
        (Kind.PUNCT, ")", 2, 26),
        (Kind.EOF, "", 2, 27),
    ]


def test_matrix_vector_product() -> None:
    definition = only_def("def mv(float(M,K) A, float(K) x) -> (C) {\n  C(i) +=! A(i,k) * x(k)\n}")
    assert definition.name == "mv"
    assert [(p.name, p.type.element, p.type.dims) for p in definition.params] == [
        ("A", "float", ("M", "K")),
        ("x", "float", ("K",)),
    ]
    assert [(o.name, o.type) for o in definition.outputs] == [("C", None)]
    (statement,) = definition.body
    assert isinstance(statement, ast.Comprehension)
    assert (statement.tensor, [i.name for i in statement.indices]) == ("C", ["i"])
    assert (statement.op, statement.init, statement.pos) == ("+=", True, ast.Pos(2, 3))
    rhs = statement.rhs
    assert isinstance(rhs, ast.Binary) and rhs.op == "*"
    assert rhs.left == ast.Apply(
        "A", (ast.Name("i", ast.Pos(2, 14)), ast.Name("k", ast.Pos(2, 16))), ast.Pos(2, 12)
    )


@pytest.mark.parametrize(
    ("text", "op", "init"),
    [
        ("=", "=", False),
        ("+=", "+=", False),
        ("+=!", "+=", True),
        ("*=!", "*=", True),
        ("min=", "min=", False),
        ("min=!", "min=", True),
        ("max=!", "max=", True),
        ("max =", "max=", False),
    ],
)
def test_assignment_operators(text: str, op: str, init: bool) -> None:
    (statement,) = only_def(f"def f(float(N) A) -> (B) {{ B(i) {text} A(i) }}").body
    assert isinstance(statement, ast.Comprehension)
    assert (statement.op, statement.init) == (op, init)


def test_where_clauses_dimension_sizes_and_several_statements() -> None:
    source = """
    def maxpool(float(B,C,H,W) in) -> (out) {
      out(b,c,i,j) max=! in(b,c, 2 * i + kh, 2 * j + kw) where kh in 0:2, kw in 0:2
      out(b,c,i,j) = out(b,c,i,j) / in.3   # a second statement
    }
    """
    first, second = only_def(source).body
    assert isinstance(first, ast.Comprehension) and isinstance(second, ast.Comprehension)
    lows = [at(source, 3, "0:2", nth) for nth in (0, 1)]
    highs = [ast.Pos(low.line, low.column + 2) for low in lows]
    assert [(r.index, r.low, r.high) for r in first.ranges] == [
        (name, ast.Number(0, False, low), ast.Number(2, False, high))
        for name, low, high in zip(("kh", "kw"), lows, highs, strict=True)
    ]
    assert isinstance(second.rhs, ast.Binary)
    assert second.rhs.right == ast.DimSize("in", 3, at(source, 4, "in.3"))


def test_precedence_follows_c() -> None:
    source = "def f(float(N) A) -> (B) { B(i) = A(i) > 0 && -A(i) < 1 || !(i == 0) ? 1.0 : 2 * A(i) + 3 }"
    (statement,) = only_def(source).body
    assert isinstance(statement, ast.Comprehension)
    rhs = statement.rhs
    assert isinstance(rhs, ast.Ternary)
    assert isinstance(rhs.cond, ast.Binary) and rhs.cond.op == "||"
    assert isinstance(rhs.cond.left, ast.Binary) and rhs.cond.left.op == "&&"
    assert isinstance(rhs.cond.right, ast.Unary) and rhs.cond.right.op == "!"
    assert rhs.then == ast.Number(1.0, True, at(source, 1, "1.0"))
    otherwise = rhs.otherwise
    assert isinstance(otherwise, ast.Binary) and otherwise.op == "+"
    assert isinstance(otherwise.left, ast.Binary) and otherwise.left.op == "*"


def test_gathers_builtins_scalars_and_typed_outputs() -> None:
    source = """
    def embed(float(V,D) table, int64(N) ids, float scale) -> (float(N,D) out) {
      out(n,d) = scale * fmax(table(ids(n), d), 0.0)
    }
    """
    definition = only_def(source)
    assert definition.params[2].type == ast.TensorType("float", (), at(source, 2, "float scale"))
    assert definition.outputs[0].type == ast.TensorType(
        "float", ("N", "D"), at(source, 2, "float(N,D)")
    )
    (statement,) = definition.body
    assert isinstance(statement, ast.Comprehension)
    assert isinstance(statement.rhs, ast.Binary)
    call = statement.rhs.right
    assert isinstance(call, ast.Apply) and call.name == "fmax"
    gather = call.args[0]
    assert isinstance(gather, ast.Apply) and isinstance(gather.args[0], ast.Apply)


def test_several_definitions_and_calls() -> None:
    source = """
    def scale(float(N) x) -> (y) { y(i) = 2 * x(i) }
    def twice(float(N) x) -> (z) {
      t = scale(x)
      z = scale(t)
    }
    """
    program = parse(source)
    assert [d.name for d in program.definitions] == ["scale", "twice"]
    twice = program.find("twice")
    assert twice is not None
    first, _ = twice.body
    assert first == ast.CallStatement(
        (ast.Name("t", ast.Pos(4, 7)),), "scale", (ast.Name("x", ast.Pos(4, 17)),), ast.Pos(4, 7)
    )


def test_zero_dimensional_outputs_and_empty_parameter_lists() -> None:
    definition = only_def("def total(float(N) A) -> (s) { s() +=! A(i) }")
    (statement,) = definition.body
    assert isinstance(statement, ast.Comprehension) and statement.indices == ()


@pytest.mark.parametrize(
    ("source", "message", "line", "column"),
    [
        ("def f(float(N) A) -> (B) { B(i) = A(i) $ 2 }", "unexpected character '$'", 1, 40),
        ("def f(float(N) A) (B) { }", "expected '->' and the outputs, found '('", 1, 19),
        (
            "def f(float(N) A) -> (B) { B(i) -= A(i) }",
            "expected '=', '+=', '*=', 'min=' or 'max='",
            1,
            33,
        ),
        (
            "def f(float(N) A) -> (B) {\n B(i) = A(i)\n",
            "expected '}' to close definition 'f'",
            3,
            1,
        ),
        ("def f(floaty(N) A) -> (B) { }", "expected an element type", 1, 7),
        ("def f(float(N) A) -> (B) { B(i) = A. }", "expected a dimension number after 'A.'", 1, 38),
        (
            "def f(float(N) A) -> (B) { B(i + 1) = A(i) }",
            "expected ',' or ')' after an index",
            1,
            32,
        ),
        ("def f(float(N) A) -> (B) { B(i) = A(i) where i 0:N }", "expected 'in' after 'i'", 1, 48),
        ("def f(float(N) A) -> (B) { B(i) = (A(i) }", "expected ')' to close '('", 1, 41),
        ("", "expected a definition", 1, 1),
        ("mv(float(N) A)", "expected 'def', found 'mv'", 1, 1),
    ],
)
def test_syntax_errors_point_at_the_offending_token(
    source: str, message: str, line: int, column: int
) -> None:
    with pytest.raises(CompileError) as caught:
        parse(source, file="k.tc")
    error = caught.value
    assert message in error.message
    assert (error.file, error.line, error.column) == ("k.tc", line, column)
    if source:
        lines = error.format().splitlines()
        assert lines[-1] == " " * (column - 1) + "^"
